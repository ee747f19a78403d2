/* cmd_study_precision.c - `qkv study precision`: one gradient of a trained model in f32 and in
 * f64, where the two part, and why (src/explore/precision_study.h). */
#include "cli.h"
#include "explain_cli.h"
#include "io/paths.h"
#include "explore/precision_study.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *model;
    long steps, batch;
    uint64_t seed;
    int form; /* -1: all */
} precision_args;

/* The study's table, with the saturation that explains it. */
static void print_study(const precision_study *ps, const precision_args *a, const char *path) {
    const trainer *t = &ps->t;
    const qkv_model_config *c = &t->model.cfg;
    printf("qkv study precision: %s model\n(task %s, d_model %d, %d head(s), %d layer(s)) after "
           "%" PRId64 " steps, batch of %d from seed %" PRIu64 ".\nEach column: the relative "
           "error |g32 - g64| / |g64| of one f32 gradient.\n\n",
           a->model ? path : "the default lookup", qkv_task_name(t->cfg.task.kind), c->d_model,
           c->heads, c->layers, t->optim.step, ps->batch, a->seed);
    printf("Saturation of layer 1 over the %d (row, head) pairs with a target: %d put more\n"
           "than 0.999 on one key. The top weight is 1 - e, e from %.2g to %.2g (mean %.2g).\n",
           ps->rows, ps->above, ps->min_e, ps->max_e, ps->mean_e);
    if (ps->rows)
        printf("Where P_top = 1 - e, dS = P (dP - D) is 1/e times smaller than its terms: f32's\n"
               "rounding of them (u = 6e-8) comes back as about u/e = %.2g, relative, in the\n"
               "gradients that flow through dS, unless the rounding cancels.\n\n",
               5.96e-8 / ps->mean_e);
    enum { COLS = PRECISION_COLS };
    const char *head[COLS] = {"composed"};
    for (int f = 0; f < PRECISION_FORMS; f++) head[1 + f] = qkv_attention_forms()[f];
    printf("%-16s %12s", "parameter", "|g64|");
    for (int col = 0; col < COLS; col++)
        if (ps->shown[col]) printf(" %10s", head[col]);
    printf("\n%-16s %12s", "", "");
    for (int col = 0; col < COLS; col++)
        if (ps->shown[col])
            printf(" %10s", col == 0 ? "(PyTorch)" : col == COLS - 1 ? "(default)" : "fused");
    printf("\n");
    for (int i = 0; i < t->model.nparams; i++) {
        printf("%-16s %12.3g", t->model.param_name[i], ps->norm[i]);
        for (int col = 0; col < COLS; col++)
            if (ps->shown[col]) printf(" %10.2g", ps->err[i * COLS + col]);
        printf("\n");
    }
    printf("\nWhere they part: head.*, attn.*.w_o and attn.*.w_v do not go through dS; their f32\n"
           "error is f32's rounding, the same in every column. attn.*.w_q and attn.*.w_k get\n"
           "their whole gradient through dS (the embeddings a part of theirs). There:\n"
           "  legacy    rounds the log-sum-exp L = m + log l to f32, an error of up to half an\n"
           "            ulp of the largest score, in every recomputed P of the row; and forms\n"
           "            D = sum(dO * O) from the forward's O, not from the dP that dS subtracts\n"
           "            it from, so the rounding of dP at the top key is not cancelled: u/e.\n"
           "  split-l   keeps L as hi + lo: P is exact to exp's rounding (w_v improves).\n"
           "  wide-d    sums D in twice the precision: no better, since the error is dP's own.\n"
           "  d-from-p  forms D = sum(P dP) / sum(P) from the very P and dP of the backward pass\n"
           "            (one more pass over the keys): the rounding of dP at the top key cancels\n"
           "            as in the composed form, and sum(P) = 1 holds for the P it uses.\n"
           "The composed form (PyTorch) keeps D consistent with dP too, and is left with the\n"
           "rounding of its own D and P; d-from-p sums D in double.\n");
}

static int precision_run(const precision_args *a) {
    cli_set_threads(0); /* as many threads as can start: OpenMP's own failure would exit 1 */
    char path[RUN_PATH_LEN];
    if (a->model && !cli_model_path(a->model, path, sizeof path)) return EXIT_IO;
    precision_study *ps = malloc(sizeof *ps);
    if (!ps) {
        cli_error("study: out of memory");
        return EXIT_NOMEM;
    }
    qkv_status s = precision_study_run(ps, a->model ? path : NULL, a->steps, (int)a->batch,
                                       a->seed, a->form);
    if (s == QKV_OK)
        print_study(ps, a, path);
    else
        cli_error("%s", qkv_last_error());
    precision_study_free(ps);
    free(ps);
    return cli_exit_for(s);
}

int study_precision(int argc, char **argv, bool parse_only) {
    const char *const *forms = qkv_attention_forms();
    int form = -1;
    precision_args a = {.steps = 40, .batch = 8, .seed = 1, .form = -1};
    cli_option options[] = {
        {"model", CLI_STRING, &a.model, .arg = "FILE",
         .help = "an f32 model.safetensors, or the directory holding one (default: a lookup\n"
                 "model trained here for --steps steps, whose query rows saturate)"},
        {"steps", CLI_INT, &a.steps, 1, 100000, .arg = "N",
         .help = "steps of that default model, 1..100000 (default 40)"},
        {"batch", CLI_INT, &a.batch, 1, 4096, .arg = "B",
         .help = "sequences in the batch, 1..4096 (default 8)"},
        {"seed", CLI_U64, &a.seed, .arg = "S",
         .help = "seed of the batch, as qkv grads --seed (default 1)"},
        {"form", CLI_CHOICE, &form, .choices = forms, .arg = "F",
         .help = "show only the fused backward's form F: legacy, split-l, wide-d or\n"
                 "d-from-p (default: all four)"},
        CLI_NO_SELFTEST_ROW,
        {"help", CLI_HELP, .help = "show this help"},
        {0}};
    const cli_command cmd = {
        .name = "study precision",
        .usage = "usage: qkv study precision [DIR] [options]   (or --model DIR)\n"
                 "Takes one batch through a trained model in f32 and in f64 and shows, parameter by\n"
                 "parameter, how far the f32 gradient is from the f64 one: for the composed attention\n"
                 "(computed as PyTorch's eager autograd does) and for the fused attention with each form of\n"
                 "its backward pass (legacy, the first one, to d-from-p, the default).\n"
                 "\n",
        .options = options,
        .column = 17,
        .epilog = "\n"
                  "Exit codes: 0 done, 2 bad option or value, 3 or 4 the model cannot be read.\n",
        .operands = true};
    int first;
    int code = cli_parse_options(&cmd, argc, argv, &first);
    if (code != CLI_RUN) return code;
    /* the model: DIR, --model, or neither (the default model) */
    if (first < argc &&
        (code = explain_cli_model("study precision", a.model, argc, argv, first, &a.model)) != CLI_RUN)
        return code;
    a.form = form; /* the index in qkv_attention_forms(), -1 for all */
    return parse_only ? CLI_RUN : precision_run(&a);
}
