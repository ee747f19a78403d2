/* cmd_bench.c - `qkv bench`: milliseconds per training step, GFLOP/s and step memory. */
#include "cli.h"
#include "kernels/kernels.h"
#include "train/trainer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef QKV_HAVE_OPENMP
#include <omp.h>
#endif

typedef struct {
    const char *name;
    int batch, seq_len, d_model, heads, vocab;
} workload;

static const workload workloads[] = {
    {"tiny", 32, 16, 64, 4, 16},
    {"medium", 8, 256, 128, 4, 64},
    {"long", 1, 2048, 64, 1, 64},
};

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

/* Floating-point operations of one forward pass: the matrix products. A training step does
 * about three times as many (forward, and two products per product backward). */
static double forward_flops(const workload *w) {
    double B = w->batch, T = w->seq_len, C = w->d_model, V = w->vocab;
    return 4 * 2 * B * T * C * C   /* x·W_Q, x·W_K, x·W_V, y·W_O */
           + 2 * 2 * B * T * T * C /* Q·Kᵀ and A·V over all heads */
           + 2 * B * T * C * V;    /* the vocabulary head */
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int run_workload(const workload *w, int threads, long repeat, double budget, bool json,
                        qkv_dtype dtype) {
    train_config cfg = {.optim = QKV_SGD, .lr = 0.01, .batch = w->batch, .steps = 1000000,
                        .seed = 1};
    if (qkv_task_init(&cfg.task, "reverse", w->seq_len, w->vocab) != QKV_OK) {
        cli_error("bench: %s", qkv_last_error());
        return EXIT_FAILED;
    }
    cfg.model = (qkv_model_config){.vocab = w->vocab, .seq_len = w->seq_len,
                                   .d_model = w->d_model, .heads = w->heads, .layers = 1,
                                   .init_scale = 0.5, .dtype = dtype};
    trainer t;
    qkv_status s = trainer_init(&t, &cfg);
    if (s != QKV_OK) {
        cli_error("bench: %s", qkv_last_error());
        return cli_exit_for(s);
    }
    qkv_rng rng = qkv_rng_seed(7);
    for (int b = 0; b < w->batch; b++)
        qkv_task_sample(&cfg.task, &rng, false, t.tokens + b * w->seq_len,
                        t.targets + b * w->seq_len);
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
    double gflops = 3 * forward_flops(w) / median * 1e-9;
    double mem_mb = rss_before >= 0 && peak >= 0 ? (peak - rss_before) / (1 << 20) : -1;
    if (json)
        printf("{\"config\":\"%s\",\"threads\":%d,\"ms_per_step\":%.4f,\"gflops\":%.2f,"
               "\"step_mem_mb\":%.2f,\"steps_timed\":%ld,\"loss\":%.5f,\"dtype\":\"%s\","
               "\"backward_form\":\"%s\"}\n",
               w->name, threads, 1e3 * median, gflops, mem_mb, n, t.last_loss,
               qkv_dtype_name(dtype), attention_form_name(attention_form));
    else
        printf("%-7s threads %d  %9.3f ms/step  %7.2f GFLOP/s  step memory %8.2f MB  (%ld steps)%s%s\n",
               w->name, threads, 1e3 * median, gflops, mem_mb, n, dtype == QKV_F64 ? "  f64" : "",
               attention_form == ATTENTION_FORM_D_FROM_P ? "" : attention_form_name(attention_form));
    fflush(stdout);
    trainer_free(&t);
    return EXIT_OK;
}

typedef struct {
    const char *config;
    long threads, repeat;
    double seconds;
    bool json;
    int dtype; /* a qkv_dtype */
    attention_form_kind form;
} bench_args;

static int bench_parse(int argc, char **argv, bench_args *a) {
    static const char *const configs[] = {"tiny", "medium", "long", "all", NULL};
    static const char *const forms[] = {"d-from-p", "wide-d", "split-l", "legacy", NULL};
    int config = 3, form = 0;
    *a = (bench_args){.seconds = 2};
    cli_option options[] = {
        {"config", CLI_CHOICE, &config, .choices = configs, .arg = "C",
         .help = "tiny, medium, long or all (default all)"},
        {"threads", CLI_INT, &a->threads, 1, 1024, .arg = "N",
         .help = "OpenMP threads (default: all cores)"},
        {"repeat", CLI_INT, &a->repeat, 1, 10000, .arg = "N",
         .help = "timed steps (default: as many as fit in --seconds, at least 5)"},
        {"seconds", CLI_DOUBLE, &a->seconds, 0, 3600, .lo_open = true, .arg = "X",
         .help = "time budget per workload (default 2)"},
        {"dtype", CLI_CHOICE, &a->dtype, .choices = cli_dtype_names, .arg = "D",
         .help = "f32 or f64: the model's precision (default f32)"},
        {"backward-form", CLI_CHOICE, &form, .choices = forms, .arg = "F",
         .help = "how the fused attention's backward forms its softmax row term:\n"
                 "d-from-p (the default), wide-d, split-l or legacy, to time them\n"
                 "(docs/architecture.md, \"The fused backward's precision\")"},
        {"json", CLI_FLAG, &a->json, .help = "one JSON object per line, one line per workload"},
        {"help", CLI_HELP, .help = "show this help"},
        {0}};
    const cli_command cmd = {
        .name = "bench",
        .usage = "usage: qkv bench [options]\n"
                 "Times one training step (forward, backward, SGD update) of the model on the reverse task:\n"
                 "  tiny    batch 32, seq-len 16,   d-model 64,  heads 4, vocab 16\n"
                 "  medium  batch 8,  seq-len 256,  d-model 128, heads 4, vocab 64\n"
                 "  long    batch 1,  seq-len 2048, d-model 64,  heads 1, vocab 64\n"
                 "It prints the median ms/step after a warm-up, GFLOP/s, and the step memory: peak resident\n"
                 "memory minus the resident memory just before the first step.\n"
                 "\n",
        .options = options,
        .column = 17};
    int code = cli_parse_options(&cmd, argc, argv, NULL);
    if (code != CLI_RUN) return code;
    a->config = configs[config];
    attention_form_parse(forms[form], &a->form); /* every one of forms[] is a form */
    return CLI_RUN;
}

static int bench_run(const bench_args *a) {
    int nthreads = 1, code = cli_set_threads(a->threads);
    if (code != EXIT_OK) return code;
#ifdef QKV_HAVE_OPENMP
    nthreads = omp_get_max_threads();
#endif
    attention_form = a->form;
    for (size_t i = 0; i < sizeof workloads / sizeof workloads[0]; i++) {
        if (strcmp(a->config, "all") && strcmp(a->config, workloads[i].name)) continue;
        code = run_workload(&workloads[i], nthreads, a->repeat, a->seconds, a->json, (qkv_dtype)a->dtype);
        if (code != EXIT_OK) return code;
    }
    return EXIT_OK;
}

int cmd_bench(int argc, char **argv, bool parse_only) {
    bench_args a;
    int code = bench_parse(argc, argv, &a);
    return code != CLI_RUN || parse_only ? code : bench_run(&a);
}
