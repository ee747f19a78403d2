/* cli.c - the qkv command line: dispatches to one file per command. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    int (*run)(int argc, char **argv, bool parse_only);
    const char *summary;
} commands[] = {
    {"train", cmd_train, "train a toy attention model on a task"},
    {"eval", cmd_eval, "evaluate a saved model on its held-out set"},
    {"ablate", cmd_ablate, "which heads matter: each head's output removed, the loss and accuracy"},
    {"patch", cmd_patch, "which heads carry an answer: activation and attribution patching"},
    {"attribute", cmd_attribute, "a logit split exactly into the embeddings, each head and the bias"},
    {"lens", cmd_lens, "the logit lens: the stream after each layer read as tokens; its parts"},
    {"inspect", cmd_inspect, "run a saved model on any input: Q, K, V, scores, weights, gradients"},
    {"grads", cmd_grads, "write one batch and every parameter's gradient to a file"},
    {"bench", cmd_bench, "time a training step: ms/step, GFLOP/s, step memory"},
    {"gradcheck", cmd_gradcheck, "check every op's backward pass against finite differences"},
    {"selftest", cmd_selftest, "check every SIMD path this CPU runs against plain C, bit for bit"},
    {"plot", cmd_plot, "draw a run's attention, gradients and curves with gnuplot"},
    {"study", cmd_study, "study softmax: its Jacobian, backward pass, why scores are scaled"},
    {"circuits", cmd_circuits, "what each head computes, from its weights: QK, OV, composition"},
    {"fourier", cmd_fourier, "a modular model's key frequencies, neuron clusters, progress measures"},
    {"sweep", cmd_sweep, "train a grid of options here, or for GNU parallel or Slurm; collect it"},
};

static void print_usage(FILE *out) {
    fprintf(out, "qkv %s - learn attention from the inside\n\n"
                 "usage: qkv COMMAND [options]     (qkv COMMAND --help for its options)\n\n"
                 "commands:\n", QKV_VERSION_STRING);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n  -h, --help     show this help\n  -V, --version  print the version\n");
}

/* The edits (insertions, deletions, substitutions, swaps of two neighbours) that make a
 * into b, counted up to 3 ("trian" is one from "train"). */
static int edit_distance(const char *a, const char *b) {
    enum { MAX = 16 };
    size_t n = strlen(a), m = strlen(b);
    if (n >= MAX || m >= MAX) return 3;
    int d[MAX][MAX];
    for (size_t i = 0; i <= n; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m] < 3 ? d[n][m] : 3;
}

/* The command nearest `cmd` by a typo (one edit; two for names of 6 letters or more), or
 * NULL. */
static const char *nearest_command(const char *cmd) {
    const char *best = NULL;
    int least = strlen(cmd) >= 6 ? 2 : 1;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        int d = edit_distance(cmd, commands[i].name);
        if (d <= least && (!best || d < edit_distance(cmd, best))) best = commands[i].name;
    }
    return best;
}

/* qkv --version: the version, then the SIMD path and the threads the kernels use. */
static void print_version(void) {
    printf("qkv %s\n", QKV_VERSION_STRING);
    printf("simd: %s (%s; this CPU runs", qkv_simd_path(),
           qkv_simd_forced() ? "forced by QKV_SIMD" : "the best this CPU runs, QKV_SIMD unset");
    for (const char *const *path = qkv_simd_paths(); *path; path++)
        if (qkv_simd_runs(*path))
            printf(" %s%s", *path, qkv_simd_emulated(*path) ? " (emulated over SIMDe)" : "");
    printf(")\n");
    const char *slow = qkv_simd_slow_reason();
    if (slow) printf("slow: %s\n", slow);
    if (qkv_has_openmp())
        printf("threads: %d (OpenMP; --threads or OMP_NUM_THREADS set them)\n", qkv_threads());
    else
        printf("threads: 1 (built without OpenMP)\n");
}

int cli_main(int argc, char **argv, bool parse_only) {
    qkv_set_field_names(cli_flag_of_field); /* the library's messages name qkv's flags */
    if (argc < 2) {
        print_usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        print_usage(stdout);
        return EXIT_OK;
    }
    char why[128];
    if (!qkv_simd_check_env(why, sizeof why)) { /* before anything runs on another path */
        cli_error("%s", why);
        return EXIT_USAGE;
    }
    /* sweep reads its cells' train options with train's table, but computes nothing itself:
     * each cell's qkv train probes its own path */
    cli_arm_simd_probe(!parse_only && strcmp(cmd, "sweep") != 0);
    if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version")) {
        print_version();
        return EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(cmd, commands[i].name)) return commands[i].run(argc - 1, argv + 1, parse_only);
    const char *near = nearest_command(cmd);
    if (near) cli_error("unknown command '%s'; did you mean %s? (see qkv --help)", cmd, near);
    else cli_error("unknown command '%s' (see qkv --help)", cmd);
    return EXIT_USAGE;
}
