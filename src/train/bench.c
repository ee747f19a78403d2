/* bench.c - the timing of training steps behind `qkv bench`. */
#include "train/bench.h"
#include "train/options.h"
#include "kernels/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const bench_workload bench_workloads[] = {
    {"tiny", 32, 16, 64, 4, 16, 0, NULL},
    {"medium", 8, 256, 128, 4, 64, 0, NULL},
    {"long", 1, 2048, 64, 1, 64, 0, NULL},
    {"mlp", 64, 64, 128, 4, 64, 512, NULL}, /* a transformer block: attention, then the MLP */
    /* one epoch of grokking's default run: every training pair of (a + b) mod 113 */
    {"grok", 3830, 3, 128, 4, 114, 512, "modular"},
};
const int bench_workload_count = (int)(sizeof bench_workloads / sizeof bench_workloads[0]);

_Static_assert(BENCH_PROFILE_PARTS == PROFILE_PART_COUNT, "bench.h's part count is kernels.h's");

const char *bench_profile_part_name(int part) { return profile_part_name((profile_part)part); }

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Reads a "Vm...:  N kB" line of /proc/self/status, in bytes; -1 if unavailable. */
static double proc_status_bytes(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    double v = -1;
    size_t n = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') v = 1024.0 * strtod(line + n + 1, NULL);
    fclose(f);
    return v;
}

/* Resets the peak resident size (VmHWM) to the current one (Linux, "5" to clear_refs). */
static void reset_peak_rss(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
}

/* Floating-point operations of one forward pass of a one-layer model: the matrix products,
 * of B sequences of T positions, P of them computed past the attention's keys and values (the
 * queries, W_O, the MLP and the head: P = T but where only some positions have a target). A
 * training step does about three times as many (forward, and two products per product
 * backward). */
static double forward_flops(const qkv_model_config *m, double B, double P) {
    double T = m->seq_len, C = m->d_model, V = m->vocab, N = m->mlp;
    return 2 * 2 * B * T * C * C   /* x·W_K, x·W_V */
           + 2 * 2 * B * P * C * C /* x·W_Q, y·W_O */
           + 2 * 2 * B * P * T * C /* Q·Kᵀ and A·V over all heads */
           + 2 * 2 * B * P * C * N /* the MLP's x·W_in and h·W_out */
           + 2 * B * P * C * V;    /* the vocabulary head */
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

qkv_status bench_workload_run(const bench_workload *w, qkv_dtype dtype, long repeat,
                              double budget, bool profile, bench_result *out) {
    train_config cfg = {.optim = QKV_SGD, .lr = 0.01, .batch = w->batch, .steps = 1000000,
                        .seed = 1};
    qkv_status s;
    if (w->task) { /* `qkv train --task modular`'s config, as nothing else was given */
        train_options o;
        train_options_init(&o);
        o.task = w->task;
        o.dtype = dtype;
        if ((s = train_options_to_config(&o, false, &cfg)) != QKV_OK) return s;
    } else {
        if ((s = qkv_task_init(&cfg.task, "reverse", w->seq_len, w->vocab)) != QKV_OK) return s;
        cfg.model = (qkv_model_config){.vocab = w->vocab, .seq_len = w->seq_len,
                                       .d_model = w->d_model, .heads = w->heads, .layers = 1,
                                       .init_scale = 0.5, .dtype = dtype, .mlp = w->mlp,
                                       .residual = w->mlp > 0};
    }
    trainer t;
    if ((s = trainer_init(&t, &cfg)) != QKV_OK) return s;
    if (w->task) { /* the full batch: every training pair, in order */
        trainer_sample(&t, &t.data_rng, cfg.batch, t.tokens, t.targets, t.lengths);
    } else {
        qkv_rng rng = qkv_rng_seed(7);
        for (int b = 0; b < w->batch; b++)
            qkv_task_sample(&cfg.task, &rng, false, t.tokens + b * w->seq_len,
                            t.targets + b * w->seq_len);
    }
    reset_peak_rss();
    double rss_before = proc_status_bytes("VmRSS");
    for (int i = 0; i < 3; i++) trainer_update(&t); /* warm-up: the arena grows to size here */
    double times[10000];
    long n = 0;
    double start = now_seconds();
    while (n < (long)(sizeof times / sizeof times[0]) &&
           (repeat ? n < repeat : (n < 5 || now_seconds() - start < budget))) {
        double t0 = now_seconds();
        trainer_update(&t);
        times[n++] = now_seconds() - t0;
    }
    double peak = proc_status_bytes("VmHWM");
    qsort(times, (size_t)n, sizeof times[0], cmp_double);
    double median = n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
    int positions = t.shard[0].positions;
    *out = (bench_result){
        .ms_per_step = 1e3 * median,
        .gflops = 3 * forward_flops(&cfg.model, cfg.batch, positions) / median * 1e-9,
        .positions = positions,
        .step_mem_mb = rss_before >= 0 && peak >= 0 ? (peak - rss_before) / (1 << 20) : -1,
        .steps_timed = n,
        .last_loss = t.last_loss};
    if (profile) {
        /* the profile's own span: its parts add up to it, on the clock that timed them (a
         * second clock read after profile_start also timed the first page faults of the
         * profile's counters and the thread's TLS, 1-2% of 5 tiny steps on two threads) */
        profile_start();
        for (long i = 0; i < n; i++) trainer_update(&t);
        out->profile_step = profile_stop(out->profile) / (double)n;
        for (int p = 0; p < PROFILE_PART_COUNT; p++) out->profile[p] /= (double)n;
    }
    trainer_free(&t);
    return QKV_OK;
}
