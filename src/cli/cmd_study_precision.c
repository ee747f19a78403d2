/* cmd_study_precision.c - `qkv study precision`: one gradient of a trained model in f32 and in f64,
 * where the two part, and why.
 *
 * The softmax backward is dS = P ⊙ (dP − D) with D = Σ_j P_j·dP_j. When a row of attention is
 * saturated (P_top = 1 − e), dP_top and D agree in all but a fraction e of their size, so dS
 * is a difference of two numbers 1/e times larger than itself: whatever rounding the two
 * carry separately comes back multiplied by 1/e. The gradients that flow through dS (W_Q, W_K
 * and what lies before them) show it; those that do not (W_V, W_O, the head) stay at f32's
 * rounding. The study takes the same batch through the model in f64 (the truth), through the
 * composed attention in f32 (the way PyTorch's eager autograd computes it), and through the
 * fused attention in f32 with each form of its backward, from the first one to the default. */
#include "cli.h"
#include "engine/internal.h"
#include "kernels/kernels.h"
#include "train/checkpoint.h"

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

/* Every parameter's gradient of the batch's mean cross-entropy, concatenated as doubles in
 * parameter order; the attention fused (in attention_form) or composed. */
static void batch_grads(trainer *t, qkv_ctx *ctx, const int32_t *tokens, const int32_t *targets,
                        int B, bool composed, double *out) {
    qkv_model *m = &t->model;
    int T = m->cfg.seq_len;
    qkv_tensor *attn[QKV_MAX_LAYERS];
    qkv_ctx_reset(ctx);
    qkv_tensor *logits = qkv_model_forward(m, ctx, tokens, B, composed ? attn : NULL);
    qkv_tensor *y = qkv_from_array(ctx, QKV_I32, 2, (int64_t[]){B, T}, targets);
    qkv_zero_grad(m->params);
    qkv_backward(qkv_cross_entropy(ctx, logits, y, -1));
    for (int i = 0; i < m->nparams; i++) {
        const qkv_tensor *p = m->param[i];
        for (int64_t j = 0; j < p->size; j++) *out++ = qkv_grad_get(p, j);
    }
}

/* ‖a − ref‖ / ‖ref‖ over n entries (or ‖a‖ when ref is 0). */
static double rel_err(const double *a, const double *ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) num += (a[i] - ref[i]) * (a[i] - ref[i]), den += ref[i] * ref[i];
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* For the batch's rows with a target, in layer 1's heads (f64): how saturated they are. */
static void print_saturation(trainer *t, qkv_ctx *ctx, const int32_t *tokens,
                             const int32_t *targets, int B) {
    const qkv_model_config *c = &t->model.cfg;
    int T = c->seq_len, H = c->heads;
    qkv_tensor *attn[QKV_MAX_LAYERS];
    qkv_ctx_reset(ctx);
    qkv_model_forward(&t->model, ctx, tokens, B, attn);
    double worst = 1, sum_e = 0, min_e = 1;
    int rows = 0, above = 0;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++) {
            if (targets[b * T + i] < 0) continue;
            for (int h = 0; h < H; h++) {
                int64_t row = (((int64_t)b * H + h) * T + i) * T;
                double top = 0;
                for (int j = 0; j < T; j++) top = fmax(top, qkv_get(attn[0], row + j));
                double e = 1 - top;
                worst = fmin(worst, top);
                min_e = fmin(min_e, e);
                sum_e += e;
                rows++;
                above += top > 0.999;
            }
        }
    printf("Saturation of layer 1 over the %d (row, head) pairs with a target: %d put more\n"
           "than 0.999 on one key. The top weight is 1 - e, e from %.2g to %.2g (mean %.2g).\n",
           rows, above, min_e, 1 - worst, rows ? sum_e / rows : 0);
    if (rows)
        printf("Where P_top = 1 - e, dS = P (dP - D) is 1/e times smaller than its terms: f32's\n"
               "rounding of them (u = 6e-8) comes back as about u/e = %.2g, relative, in the\n"
               "gradients that flow through dS, unless the rounding cancels.\n\n",
               5.96e-8 / (sum_e / rows));
}

static int precision_run(const precision_args *a) {
    trainer t;
    qkv_status s;
    char path[1100];
    if (a->model) {
        if (!cli_model_path(a->model, path, sizeof path)) return EXIT_IO;
        if ((s = trainer_load(&t, path)) != QKV_OK) {
            cli_error("%s", qkv_last_error());
            return cli_exit_for(s);
        }
        if (t.model.cfg.dtype != QKV_F32) {
            cli_error("study: %s is an f64 model; the study compares an f32 model's gradients "
                      "with their f64 truth", path);
            trainer_free(&t);
            return EXIT_FORMAT;
        }
    } else {
        train_config c = {.optim = QKV_ADAM, .lr = 0.005, .clip = 1, .cosine = true,
                          .batch = 32, .steps = a->steps, .warmup = a->steps / 20, .seed = 1};
        if ((s = qkv_task_init(&c.task, "lookup", 8, 0)) == QKV_OK) {
            c.model = (qkv_model_config){.vocab = c.task.vocab, .seq_len = 8, .d_model = 64,
                                         .heads = 1, .layers = 1, .init_scale = 0.5};
            s = trainer_init(&t, &c);
        }
        while (s == QKV_OK && t.optim.step < c.steps) s = trainer_step(&t);
        if (s != QKV_OK) {
            cli_error("%s", qkv_last_error());
            return cli_exit_for(s);
        }
    }
    const qkv_model_config *c = &t.model.cfg;
    int B = (int)a->batch, T = c->seq_len;
    const char *what;
    double need = 2 * qkv_model_step_bytes(c, B), have = memory_limit(&what);
    if (need > have / 2) {
        cli_error("study: a batch of %d needs about %.1f GiB, more than half of %s (%.1f GiB): "
                  "lower --batch", B, need / (1 << 30), what, have / (1 << 30));
        trainer_free(&t);
        return EXIT_NOMEM;
    }
    /* the same model in f64: its f32 weights widened exactly */
    trainer wide;
    if (a->model)
        s = trainer_load_as(&wide, path, QKV_F64);
    else {
        train_config wc = t.cfg;
        wc.model.dtype = QKV_F64;
        s = trainer_init(&wide, &wc);
        for (int i = 0; s == QKV_OK && i < t.model.nparams; i++)
            for (int64_t j = 0; j < t.model.param[i]->size; j++)
                qkv_set(wide.model.param[i], j, qkv_get(t.model.param[i], j));
    }
    if (s != QKV_OK) {
        cli_error("%s", qkv_last_error());
        trainer_free(&t);
        return cli_exit_for(s);
    }
    int64_t total = 0;
    for (int i = 0; i < t.model.nparams; i++) total += t.model.param[i]->size;
    int32_t *tokens = malloc((size_t)B * T * sizeof *tokens), *targets = malloc((size_t)B * T * sizeof *targets);
    double *truth = malloc((size_t)total * sizeof *truth), *g = malloc((size_t)total * sizeof *g);
    qkv_ctx *ctx = qkv_ctx_new(0);
    if (!tokens || !targets || !truth || !g || !ctx) {
        cli_error("study: out of memory");
        free(tokens), free(targets), free(truth), free(g), qkv_ctx_free(ctx);
        trainer_free(&t), trainer_free(&wide);
        return EXIT_NOMEM;
    }
    qkv_rng rng = qkv_rng_seed(a->seed); /* the batch of `qkv grads --seed` */
    for (int b = 0; b < B; b++)
        qkv_task_sample(&t.cfg.task, &rng, false, tokens + b * T, targets + b * T);

    printf("qkv study precision: %s model\n(task %s, d_model %d, %d head(s), %d layer(s)) after "
           "%" PRId64 " steps, batch of %d from seed %" PRIu64 ".\nEach column: the relative "
           "error |g32 - g64| / |g64| of one f32 gradient.\n\n",
           a->model ? path : "the default lookup", qkv_task_name(t.cfg.task.kind), c->d_model,
           c->heads, c->layers, t.optim.step, B, a->seed);
    print_saturation(&wide, ctx, tokens, targets, B);

    attention_form_kind saved = attention_form;
    batch_grads(&wide, ctx, tokens, targets, B, false, truth); /* f64, the default form */
    enum { COLS = 1 + ATTENTION_FORM_COUNT };
    double *err = calloc((size_t)t.model.nparams * COLS, sizeof *err);
    const char *head[COLS] = {"composed"};
    int show[COLS] = {1};
    for (int f = 0; f < ATTENTION_FORM_COUNT; f++) {
        head[1 + f] = attention_form_name((attention_form_kind)f);
        show[1 + f] = a->form < 0 || a->form == f;
    }
    for (int col = 0; err && col < COLS; col++) {
        if (!show[col]) continue;
        if (col > 0) attention_form = (attention_form_kind)(col - 1);
        batch_grads(&t, ctx, tokens, targets, B, col == 0, g);
        int64_t at = 0;
        for (int i = 0; i < t.model.nparams; i++) {
            err[i * COLS + col] = rel_err(g + at, truth + at, t.model.param[i]->size);
            at += t.model.param[i]->size;
        }
    }
    attention_form = saved;
    printf("%-16s %12s", "parameter", "|g64|");
    for (int col = 0; col < COLS; col++)
        if (show[col]) printf(" %10s", head[col]);
    printf("\n%-16s %12s", "", "");
    for (int col = 0; col < COLS; col++)
        if (show[col]) printf(" %10s", col == 0 ? "(PyTorch)" : col == COLS - 1 ? "(default)" : "fused");
    printf("\n");
    int64_t at = 0;
    for (int i = 0; err && i < t.model.nparams; i++) {
        double norm = 0;
        for (int64_t j = 0; j < t.model.param[i]->size; j++) norm += truth[at + j] * truth[at + j];
        at += t.model.param[i]->size;
        printf("%-16s %12.3g", t.model.param_name[i], sqrt(norm));
        for (int col = 0; col < COLS; col++)
            if (show[col]) printf(" %10.2g", err[i * COLS + col]);
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
    free(err), free(tokens), free(targets), free(truth), free(g);
    qkv_ctx_free(ctx);
    trainer_free(&t);
    trainer_free(&wide);
    return EXIT_OK;
}

int study_precision(int argc, char **argv, bool parse_only) {
    static const char *const forms[] = {"legacy", "split-l", "wide-d", "d-from-p", NULL};
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
        {"help", CLI_HELP, .help = "show this help"},
        {0}};
    const cli_command cmd = {
        .name = "study precision",
        .usage = "usage: qkv study precision [options]\n"
                 "Takes one batch through a trained model in f32 and in f64 and shows, parameter by\n"
                 "parameter, how far the f32 gradient is from the f64 one: for the composed attention\n"
                 "(computed as PyTorch's eager autograd does) and for the fused attention with each form of\n"
                 "its backward pass (legacy, the first one, to d-from-p, the default).\n"
                 "\n",
        .options = options,
        .column = 17,
        .epilog = "\n"
                  "Exit codes: 0 done, 2 bad option or value, 3 or 4 the model cannot be read.\n"};
    int code = cli_parse_options(&cmd, argc, argv, NULL);
    if (code != CLI_RUN) return code;
    attention_form_kind kind;
    if (form >= 0 && attention_form_parse(forms[form], &kind)) a.form = (int)kind;
    return parse_only ? CLI_RUN : precision_run(&a);
}
