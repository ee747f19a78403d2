/* cmd_bench.c - `qkv bench`: milliseconds per training step, GFLOP/s and step memory. */
#include "cli.h"
#include "kernels/isa.h"
#include "train/bench.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The FMA peak on this many threads (qkv_fma_peak), measured once per count: 0 until then. */
typedef struct {
    double one, all; /* on 1 thread, and on the bench's threads */
    fma_width_result width; /* on the AVX-512 path: against the AVX2 path's (ratio 0: not) */
} bench_peak;

/* The profile of a step (--profile): each part's share, in JSON under its name with '_' for
 * ' ' ("exp_and_softmax"), or as lines of a table. */
static void print_profile(const bench_result *r, bool json) {
    if (json) {
        printf(",\"profile_ms_per_step\":%.4f,\"profile\":{", 1e3 * r->profile_step);
        for (int p = 0; p < BENCH_PROFILE_PARTS; p++) {
            printf("%s\"", p ? "," : "");
            for (const char *c = bench_profile_part_name(p); *c; c++) putchar(*c == ' ' ? '_' : *c);
            printf("\":%.4f", r->profile_step > 0 ? r->profile[p] / r->profile_step : 0);
        }
        putchar('}');
        return;
    }
    printf("        profile of a step: %.3f ms, %ld steps with the profile on\n",
           1e3 * r->profile_step, r->steps_timed);
    for (int p = 0; p < BENCH_PROFILE_PARTS; p++)
        printf("          %-20s %5.1f%%  %9.3f ms\n", bench_profile_part_name(p),
               r->profile_step > 0 ? 100 * r->profile[p] / r->profile_step : 0,
               1e3 * r->profile[p]);
}

static int run_workload(const bench_workload *w, int threads, long repeat, double budget,
                        bool json, qkv_dtype dtype, const bench_peak *peak, bool profile) {
    bench_result r;
    qkv_status s = bench_workload_run(w, dtype, repeat, budget, profile, &r);
    if (s != QKV_OK) {
        cli_error("bench: %s", qkv_last_error());
        return cli_exit_for(s);
    }
    if (json)
        printf("{\"config\":\"%s\",\"threads\":%d,\"ms_per_step\":%.4f,\"gflops\":%.2f,"
               "\"step_mem_mb\":%.2f,\"steps_timed\":%ld,\"loss\":%.5f,\"dtype\":\"%s\","
               "\"backward_form\":\"%s\",\"probs\":\"%s\",\"simd\":\"%s\",\"openmp\":%s,"
               "\"positions\":%d",
               w->name, threads, r.ms_per_step, r.gflops, r.step_mem_mb, r.steps_timed,
               r.last_loss, qkv_dtype_name(dtype), qkv_attention_form(), qkv_attention_probs(),
               qkv_simd_path(), qkv_has_openmp() ? "true" : "false", r.positions);
    else
        printf("%-7s %-6s threads %d%s  %9.3f ms/step  %7.2f GFLOP/s  step memory %8.2f MB  (%ld steps)%s%s",
               w->name, qkv_simd_path(), threads, qkv_has_openmp() ? "" : " (no OpenMP)",
               r.ms_per_step, r.gflops, r.step_mem_mb, r.steps_timed,
               dtype == QKV_F64 ? "  f64" : "",
               !strcmp(qkv_attention_form(), "d-from-p") ? "" : qkv_attention_form());
    /* with --peak: the step's share of the f32 FMA peak on as many threads */
    if (peak && peak->all > 0) {
        double share = r.gflops / peak->all;
        if (json) printf(",\"peak_gflops\":%.2f,\"peak_share\":%.4f", peak->all, share);
        else printf("  %5.1f%% of peak", 100 * share);
    }
    if (json && profile) print_profile(&r, true);
    fputs(json ? "}\n" : "\n", stdout);
    if (!json && profile) print_profile(&r, false);
    fflush(stdout);
    return EXIT_OK;
}

typedef struct {
    const char *config;
    long threads, repeat;
    double seconds;
    bool json;
    int dtype; /* a qkv_dtype */
    bool peak; /* measure the FMA peak first, and each step's share of it */
    bool profile; /* then as many steps again, profiled: where the step's time goes */
    const char *form; /* the fused backward's form, by name */
    const char *probs; /* whether the fused forward keeps P: auto, keep or recompute */
} bench_args;

static int bench_parse(int argc, char **argv, bench_args *a) {
    static const char *const configs[] = {"tiny", "medium", "long", "mlp", "grok", "all", NULL};
    static const char *const forms[] = {"d-from-p", "wide-d", "split-l", "legacy", NULL};
    const char *const *probs = qkv_attention_probs_modes(); /* auto (the default), ... */
    int config = 5, form = 0, probs_mode = 0; /* all */
    *a = (bench_args){.seconds = 2};
    cli_option options[] = {
        {"config", CLI_CHOICE, &config, .choices = configs, .arg = "C",
         .help = "tiny, medium, long, mlp, grok or all (default all)"},
        {"threads", CLI_INT, &a->threads, 1, QKV_MAX_THREADS, .arg = "N",
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
        {"probs", CLI_CHOICE, &probs_mode, .choices = probs, .arg = "P",
         .help = "whether the fused forward keeps the attention probabilities P\n"
                 "for the backward: auto (the default: when P is at most 4x the\n"
                 "op's q, k, v and output, and at most 1 MiB), keep or\n"
                 "recompute, to time them (the same bits either way)"},
        {"peak", CLI_FLAG, &a->peak,
         .help = "first measure the f32 FMA peak of the path in use (FMA chains in\n"
                 "registers, on 1 thread and on --threads), then give each step's\n"
                 "share of it (JSON: peak_gflops, peak_share). On the avx512 path\n"
                 "also the avx2 path's 1-thread peak, trials of the two in turn,\n"
                 "each by the thread's CPU time: 1.5x it or more says the CPU's FMA\n"
                 "units are 512 bits wide, under 1.3x 256 bits wide; trials that\n"
                 "disagree, or a ratio between, say the machine was too busy to\n"
                 "tell (JSON: avx2_gflops_1_thread, avx512_over_avx2, full_width:\n"
                 "true, false or null)"},
        {"profile", CLI_FLAG, &a->profile,
         .help = "then run as many steps again with a profile: each part's share of\n"
                 "the step (products, exp and softmax, layout and copies,\n"
                 "elementwise, embedding, loss, optimizer, waiting on threads,\n"
                 "other; they add up to the step). JSON: profile_ms_per_step,\n"
                 "profile {part: share}"},
        {"json", CLI_FLAG, &a->json, .help = "one JSON object per line, one line per workload"},
        CLI_NO_SELFTEST_ROW,
        {"help", CLI_HELP, .help = "show this help"},
        {0}};
    const cli_command cmd = {
        .name = "bench",
        .usage = "usage: qkv bench [options]\n"
                 "Times one training step (forward, backward, SGD update) of the model on the reverse task:\n"
                 "  tiny    batch 32, seq-len 16,   d-model 64,  heads 4, vocab 16\n"
                 "  medium  batch 8,  seq-len 256,  d-model 128, heads 4, vocab 64\n"
                 "  long    batch 1,  seq-len 2048, d-model 64,  heads 1, vocab 64\n"
                 "  mlp     batch 64, seq-len 64,   d-model 128, heads 4, vocab 64, an MLP of 512\n"
                 "          (ReLU) in the residual stream\n"
                 "  grok    one epoch of `qkv train --task modular`'s default run: every training pair\n"
                 "          of (a + b) mod 113 (3830, seq-len 3), d-model 128, heads 4, an MLP of 512,\n"
                 "          AdamW; the target is at the last position, and the step computes the\n"
                 "          queries, the MLP and the head there only (JSON: positions)\n"
                 "It prints the median ms/step after a warm-up, GFLOP/s, and the step memory: peak resident\n"
                 "memory minus the resident memory just before the first step.\n"
                 "\n",
        .options = options,
        .column = 17};
    int code = cli_parse_options(&cmd, argc, argv, NULL);
    if (code != CLI_RUN) return code;
    a->config = configs[config];
    a->form = forms[form];
    a->probs = probs[probs_mode];
    return CLI_RUN;
}

static int bench_run(const bench_args *a) {
    cli_threads_ignore_load(); /* its default is every core, as its help says */
    int nthreads = 1, code = cli_set_threads(a->threads);
    if (code != EXIT_OK) return code;
    nthreads = qkv_threads();
    qkv_set_attention_form(a->form); /* every one of forms[] is a form */
    qkv_set_attention_probs(a->probs); /* and of the modes one */
    const char *slow = qkv_simd_slow_reason(); /* on stderr: stdout is the table or the JSON */
    if (slow) fprintf(stderr, "note: %s\n", slow);
    bench_peak peak = {0};
    if (a->peak) {
        /* On the AVX-512 path, the AVX2 path's 1-thread peak too, the two measured in turn
         * by the thread's CPU clock: how wide the CPU's FMA units are (isa.h's fma_width).
         * Each path's 1-thread peak is then its best trial there. */
        if (!strcmp(qkv_simd_path(), "avx512") && qkv_simd_runs("avx2")) {
            peak.width = fma_width_measure("avx512", "avx2", 2.0);
            peak.one = peak.width.wide;
        }
        if (!(peak.one > 0)) peak.one = qkv_fma_peak(1, 1.0);
        peak.all = nthreads > 1 ? qkv_fma_peak(nthreads, 1.0) : peak.one;
        /* On a shared machine a core may be taken for a second: all threads' peak then
         * comes out near one thread's, and a step would show above 100% of it. Below 90%
         * of one thread's × the count, measure again (twice at most) and keep the best;
         * threads that share a core's FMA units (SMT) cost these two seconds and no more. */
        for (int retry = 0; retry < 2 && peak.all < 0.9 * nthreads * peak.one; retry++) {
            double again = qkv_fma_peak(nthreads, 1.0);
            if (again > peak.all) peak.all = again;
        }
        const fma_width_result *w = &peak.width;
        if (a->json) {
            printf("{\"peak\":\"fma\",\"simd\":\"%s\",\"gflops_1_thread\":%.2f,"
                   "\"threads\":%d,\"gflops\":%.2f", qkv_simd_path(), peak.one, nthreads,
                   peak.all);
            if (w->ratio > 0) /* full_width null: the machine was too busy to tell */
                printf(",\"avx2_gflops_1_thread\":%.2f,\"avx512_over_avx2\":%.3f,"
                       "\"full_width\":%s", w->narrow, w->ratio,
                       w->width == FMA_WIDTH_FULL   ? "true"
                       : w->width == FMA_WIDTH_HALF ? "false"
                                                    : "null");
            printf("}\n");
        } else {
            printf("peak    %-6s f32 FMA chains in registers: %.2f GFLOP/s on 1 thread, %.2f on "
                   "%d\n", qkv_simd_path(), peak.one, peak.all, nthreads);
            if (w->ratio > 0)
                printf("        avx2 path: %.2f GFLOP/s on 1 thread; avx512 %.2fx that: %s\n",
                       w->narrow, w->ratio,
                       w->width == FMA_WIDTH_FULL   ? "full-width AVX-512 (512-bit FMA units)"
                       : w->width == FMA_WIDTH_HALF ? "AVX-512 on 256-bit FMA units"
                                                    : "the machine was too busy to tell the "
                                                      "FMA units' width");
        }
    }
    if (a->dtype == QKV_F64) peak.all = 0; /* an f32 peak says nothing of f64 steps */
    for (int i = 0; i < bench_workload_count; i++) {
        if (strcmp(a->config, "all") && strcmp(a->config, bench_workloads[i].name)) continue;
        code = run_workload(&bench_workloads[i], nthreads, a->repeat, a->seconds, a->json,
                            (qkv_dtype)a->dtype, a->peak ? &peak : NULL, a->profile);
        if (code != EXIT_OK) return code;
    }
    return EXIT_OK;
}

int cmd_bench(int argc, char **argv, bool parse_only) {
    bench_args a;
    int code = bench_parse(argc, argv, &a);
    return code != CLI_RUN || parse_only ? code : bench_run(&a);
}
