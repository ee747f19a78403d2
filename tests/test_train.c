/* test_train.c - the training layer (src/train/trainer.h): each task learns in a few seconds, a model
 * round-trips through save/load/eval, a resumed run equals a straight one bit for bit, a step's
 * shards add up to the whole batch, results do not depend on the thread count, divergence is
 * reported with its step, data files train; and the model's traced forward pass matches its
 * own. The tasks themselves: test_tasks.c. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#endif
#include "train/checkpoint.h"
#include "train/grads.h"
#include "train/run.h"

#include "fixtures.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef QKV_HAVE_OPENMP
#include <omp.h>
#endif

/* The CLI's defaults (src/cli/cmd_train.c), with a smaller model so that each run takes well under
 * a second: adam, cosine decay, warm-up steps/20, clip 1, batch 32, init scale 0.5, seed 1. */
static train_config make_config(const char *task, int seq_len, int d_model, int heads,
                                int64_t steps, qkv_optim_kind optim, double lr) {
    train_config c;
    memset(&c, 0, sizeof c);
    ck_assert_int_eq(qkv_task_init(&c.task, task, seq_len, 0), QKV_OK);
    c.model = (qkv_model_config){.vocab = c.task.vocab, .seq_len = seq_len, .d_model = d_model,
                                 .heads = heads, .layers = 1, .residual = false,
                                 .causal = c.task.causal, .init_scale = 0.5};
    c.optim = optim;
    c.lr = lr;
    c.clip = 1;
    c.cosine = true;
    c.warmup = steps / 20;
    c.batch = 32;
    c.steps = steps;
    c.seed = 1;
    return c;
}

/* A model of transformer blocks: two layers, each attention then an MLP of 32 units (`act`),
 * with LayerNorm before each and before the head when `norm`. */
static train_config block_config(const char *task, int seq_len, qkv_act act, bool norm,
                                  int64_t steps) {
    train_config c = make_config(task, seq_len, 16, 2, steps, QKV_ADAM, 0.005);
    c.model.layers = 2;
    c.model.residual = true;
    c.model.mlp = 32;
    c.model.act = act;
    c.model.norm = norm ? QKV_NORM_LAYERNORM : QKV_NORM_NONE;
    return c;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void train_steps(trainer *t, int64_t upto) {
    while (t->optim.step < upto) {
        qkv_status s = trainer_step(t);
        ck_assert_msg(s == QKV_OK, "step %lld failed: %s", (long long)t->optim.step + 1,
                      qkv_last_error());
    }
}

/* Every parameter and optimizer-state tensor of a and b holds the same bytes. */
static void assert_same_state(const trainer *a, const trainer *b) {
    ck_assert_int_eq(a->model.nparams, b->model.nparams);
    ck_assert_int_eq(a->optim.step, b->optim.step);
    for (int i = 0; i < a->model.nparams; i++) {
        const qkv_tensor *p = a->model.param[i], *q = b->model.param[i];
        ck_assert_str_eq(a->model.param_name[i], b->model.param_name[i]);
        ck_assert_int_eq(p->size, q->size);
        ck_assert_int_eq(p->dtype, q->dtype);
        size_t es = qkv_dtype_size(p->dtype);
        ck_assert_msg(memcmp(p->data, q->data, (size_t)p->size * es) == 0,
                      "parameter %s differs", a->model.param_name[i]);
        const qkv_tensor *am = a->optim.m[i], *bm = b->optim.m[i];
        const qkv_tensor *av = a->optim.v[i], *bv = b->optim.v[i];
        ck_assert((am == NULL) == (bm == NULL) && (av == NULL) == (bv == NULL));
        if (am) ck_assert_msg(!memcmp(am->data, bm->data, (size_t)am->size * es),
                              "optim.m.%s differs", a->model.param_name[i]);
        if (av) ck_assert_msg(!memcmp(av->data, bv->data, (size_t)av->size * es),
                              "optim.v.%s differs", a->model.param_name[i]);
    }
    ck_assert(!memcmp(&a->data_rng, &b->data_rng, sizeof a->data_rng));
}

static void assert_same_eval(eval_result a, eval_result b) {
    /* exact: the same weights and the same held-out set give the same bits */
    ck_assert(a.loss == b.loss);
    ck_assert(a.accuracy == b.accuracy);
    ck_assert(a.attention_mass == b.attention_mass);
    ck_assert_int_eq(a.best_head, b.best_head);
}

static char tmpdir[64];
static void make_tmpdir(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/qkv_test_train.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}
static void remove_tmpdir(const char *file) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", tmpdir, file);
    remove(path);
    remove(tmpdir);
}

/* ---- each task learns: held-out accuracy and attention mass of layer 1's best head ------ */
static const struct {
    const char *task;
    int seq_len, d_model;
    int64_t steps;
    double lr, min_accuracy, min_mass;
} learn[] = {
    /* measured with seed 1 (accuracy, mass): copy 1.000 0.969, reverse 1.000 0.988,
     * shift 1.000 0.993, lookup 1.000 0.999, max 0.998 0.983 */
    {"copy", 8, 32, 500, 0.02, 0.99, 0.9},
    {"reverse", 8, 32, 300, 0.005, 0.99, 0.9},
    {"shift", 8, 32, 300, 0.005, 0.99, 0.9},
    {"lookup", 5, 32, 1000, 0.01, 0.99, 0.9},
    {"max", 8, 32, 500, 0.005, 0.99, 0.9},
};

START_TEST(test_task_learns) {
    train_config c = make_config(learn[_i].task, learn[_i].seq_len, learn[_i].d_model, 1,
                                 learn[_i].steps, QKV_ADAM, learn[_i].lr);
    trainer t;
    ck_assert_int_eq(trainer_init(&t, &c), QKV_OK);
    double t0 = now();
    train_steps(&t, c.steps);
    eval_result r = trainer_evaluate(&t);
    double seconds = now() - t0;
    printf("test_train: %-8s seq-len %d d-model %d steps %lld lr %g: held-out accuracy %.4f, "
           "attention mass %.4f, %.2f s\n", learn[_i].task, learn[_i].seq_len, learn[_i].d_model,
           (long long)c.steps, c.lr, r.accuracy, r.attention_mass, seconds);
    fflush(stdout);
    ck_assert_msg(r.accuracy >= learn[_i].min_accuracy, "%s: held-out accuracy %.4f < %.2f",
                  learn[_i].task, r.accuracy, learn[_i].min_accuracy);
    ck_assert_msg(r.attention_mass >= learn[_i].min_mass, "%s: attention mass %.4f < %.2f",
                  learn[_i].task, r.attention_mass, learn[_i].min_mass);
    trainer_free(&t);
}
END_TEST

/* ---- the tasks that need depth, a separator or a decoder learn with their CLI defaults ---- */
static const struct {
    const char *task;
    int64_t steps; /* 0: the task's default steps (qkv_train_defaults) */
    double min_accuracy, min_mass;
} learn_deep[] = {
    /* measured with seed 1 (accuracy, mass of the task's layer): induction 1.000 0.98,
     * recall 1.000 0.99, sort 1.000 0.72, translate 1.000 1.000 (its full 500 default steps
     * take about 0.3 s; at 60 steps it still reaches 1.000, at 40 only 0.86) */
    {"induction", 300, 0.99, 0.9}, /* half its default 600 */
    {"recall", 0, 0.99, 0.9},
    {"sort", 0, 0.99, 0.6},
    /* the encoder-decoder: 8 decoder queries against 16 source keys, ideal query i -> key 2i+1 */
    {"translate", 0, 0.99, 0.9},
};

START_TEST(test_deep_task_learns) {
    qkv_task_defaults d = qkv_train_defaults(learn_deep[_i].task);
    train_config c = make_config(learn_deep[_i].task, d.seq_len, d.d_model, d.heads,
                                 learn_deep[_i].steps ? learn_deep[_i].steps : d.steps, QKV_ADAM,
                                 d.lr[QKV_ADAM]);
    c.model.layers = d.layers;
    c.model.residual = d.residual;
    c.model.target_len = c.task.target_len; /* translate: T/2 decoder positions; else 0 */
    trainer t;
    ck_assert_int_eq(trainer_init(&t, &c), QKV_OK);
    ck_assert_int_eq(t.target_len, c.task.target_len ? c.task.target_len : c.task.seq_len);
    train_steps(&t, c.steps);
    eval_result r = trainer_evaluate(&t);
    int L = c.model.layers;
    double best_induction = 0;
    for (int h = 0; h < c.model.heads; h++)
        best_induction = fmax(best_induction, r.induction[L - 1][h]);
    printf("test_train: %-9s layers %d: held-out accuracy %.4f, mass %.4f (layer %d), last "
           "layer's induction score %.4f\n", learn_deep[_i].task, L, r.accuracy, r.attention_mass,
           r.attention_layer + 1, best_induction);
    fflush(stdout);
    ck_assert_msg(r.accuracy >= learn_deep[_i].min_accuracy, "%s: held-out accuracy %.4f",
                  learn_deep[_i].task, r.accuracy);
    ck_assert_msg(r.attention_mass >= learn_deep[_i].min_mass, "%s: attention mass %.4f",
                  learn_deep[_i].task, r.attention_mass);
    if (L > 1) {
        ck_assert_int_eq(r.attention_layer, L - 1); /* the task's layer is the last */
        /* the induction head of layer 2: it attends after earlier copies of its token */
        ck_assert_msg(best_induction >= 0.9, "%s: layer %d induction score %.4f < 0.9",
                      learn_deep[_i].task, L, best_induction);
    }
    trainer_free(&t);
}
END_TEST

/* One layer cannot do induction: the hint's "too few layers" rests on this. */
START_TEST(test_induction_needs_two_layers) {
    train_config c = make_config("induction", 16, 64, 2, 300, QKV_ADAM, 0.005);
    c.model.layers = 1;
    trainer t;
    ck_assert_int_eq(trainer_init(&t, &c), QKV_OK);
    train_steps(&t, c.steps);
    eval_result r = trainer_evaluate(&t);
    ck_assert_msg(r.accuracy < 0.9, "one layer reached %.4f on induction", r.accuracy);
    trainer_free(&t);
}
END_TEST

/* ---- data files (qkv train --data) ---------------------------------------------------------- */
/* Writes `lines` examples to path: swap neighbours (outputs as long as inputs, lengths 2..8),
 * or, with `half`, target i = source token 2i+1 in capitals (lengths 2, 4, 6, 8). */
static void write_data_file(const char *path, int lines, bool half, uint64_t seed) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    qkv_rng rng = qkv_rng_seed(seed);
    for (int n = 0; n < lines; n++) {
        int len = half ? 2 * (1 + (int)qkv_rng_below(&rng, 4)) : 2 + (int)qkv_rng_below(&rng, 7);
        int x[8];
        for (int i = 0; i < len; i++) {
            x[i] = (int)qkv_rng_below(&rng, 10);
            fprintf(f, "%sw%d", i ? " " : "", x[i]);
        }
        fputc('\t', f);
        if (half)
            for (int i = 0; i < len / 2; i++) fprintf(f, "%sW%d", i ? " " : "", x[2 * i + 1]);
        else
            for (int i = 0; i < len; i++) /* swap each pair; an odd last token stays */
                fprintf(f, "%sw%d", i ? " " : "", x[i % 2 ? i - 1 : i + 1 < len ? i + 1 : i]);
        fputc('\n', f);
    }
    fclose(f);
}

static train_config data_config(const char *path, int64_t steps) {
    train_config c = make_config("copy", 8, 32, 1, steps, QKV_ADAM, 0.005);
    snprintf(c.data_path, sizeof c.data_path, "%s", path);
    return c;
}

/* Padding gets no attention and no loss: keys past an example's length have weight exactly 0
 * in every layer, head and row; logits and loss at real positions do not change when the
 * padding holds another token; and the padding token's embedding gets no gradient. */
START_TEST(test_data_padding_mask) {
    make_tmpdir();
    char path[128];
    snprintf(path, sizeof path, "%s/data.tsv", tmpdir);
    write_data_file(path, 400, _i == 1, 3);
    train_config c = data_config(path, 1);
    c.model.layers = 2;
    c.model.residual = true;
    c.model.heads = 2;
    trainer t;
    ck_assert_int_eq(trainer_init(&t, &c), QKV_OK);
    ck_assert_int_eq(t.model.cfg.target_len, _i == 1 ? 4 : 0);
    int T = t.model.cfg.seq_len, To = t.target_len, L = 2, H = 2;
    ck_assert_int_eq(T, 8);
    /* held-out examples of every length, attention of each */
    float *a = malloc((size_t)L * H * To * T * sizeof *a);
    int padded = 0;
    for (int e = 0; e < t.n_held; e++) {
        int len = t.held_lengths[e];
        for (int i = 0; i < T; i++) ck_assert_int_eq(t.held_tokens[e * T + i] == DATA_PAD, i >= len);
        if (len == T) continue;
        padded++;
        trainer_attention(&t, e, a);
        for (int k = 0; k < L * H * To; k++)
            for (int j = len; j < T; j++)
                ck_assert_msg(a[k * T + j] == 0, "example %d: weight %g on padding key %d", e,
                              a[k * T + j], j);
    }
    ck_assert_int_gt(padded, 0);
    free(a);
    /* the same batch with the padding as token 1: real positions keep their logits and loss */
    int B = 16;
    int32_t *x = malloc((size_t)B * T * sizeof *x), *y = t.held_targets;
    memcpy(x, t.held_tokens, (size_t)B * T * sizeof *x);
    double loss[2];
    float *logits[2];
    int V = t.model.cfg.vocab;
    for (int pass = 0; pass < 2; pass++) {
        qkv_ctx_reset(t.eval_ctx);
        qkv_tensor *lg = qkv_model_forward_padded(&t.model, t.eval_ctx, x, t.held_lengths, B, NULL);
        qkv_tensor *tg = qkv_from_array(t.eval_ctx, QKV_I32, 2, (int64_t[]){B, To}, y);
        loss[pass] = qkv_get(qkv_cross_entropy(t.eval_ctx, lg, tg, -1), 0);
        logits[pass] = malloc((size_t)lg->size * sizeof(float));
        memcpy(logits[pass], lg->data, (size_t)lg->size * sizeof(float));
        for (int64_t i = 0; i < (int64_t)B * T; i++) x[i] = x[i] == DATA_PAD ? 1 : x[i];
    }
    ck_assert_msg(loss[0] == loss[1], "the loss moved with the padding: %.9g, %.9g", loss[0], loss[1]);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < To; i++)
            if (y[b * To + i] >= 0)
                for (int v = 0; v < V; v++)
                    ck_assert(logits[0][((size_t)b * To + i) * V + v] ==
                              logits[1][((size_t)b * To + i) * V + v]);
    free(logits[0]);
    free(logits[1]);
    free(x);
    /* one training step: the padding token's embedding row gets no gradient */
    ck_assert_int_eq(trainer_step(&t), QKV_OK);
    const float *g = t.model.tok_emb->grad;
    for (int k = 0; k < t.model.cfg.d_model; k++) ck_assert(g[DATA_PAD * t.model.cfg.d_model + k] == 0);
    trainer_free(&t);
    remove_tmpdir("data.tsv");
}
END_TEST

/* The held-out split is the line hash's; a model file names its data and refuses a changed one. */
START_TEST(test_data_save_load) {
    make_tmpdir();
    char path[128], model[128];
    snprintf(path, sizeof path, "%s/data.tsv", tmpdir);
    snprintf(model, sizeof model, "%s/model.safetensors", tmpdir);
    write_data_file(path, 300, false, 4);
    train_config c = data_config(path, 20);
    trainer t, u;
    ck_assert_int_eq(trainer_init(&t, &c), QKV_OK);
    ck_assert(t.n_held > 0 && t.n_held < 300 / 4);
    train_steps(&t, 20);
    ck_assert_int_eq(trainer_save(&t, model), QKV_OK);
    ck_assert_int_eq(trainer_load(&u, model), QKV_OK);
    ck_assert_int_eq(u.cfg.task.kind, QKV_TASK_DATA);
    ck_assert_int_eq(u.data->vocab, t.data->vocab);
    assert_same_state(&t, &u);
    assert_same_eval(trainer_evaluate(&t), trainer_evaluate(&u));
    trainer_free(&u);
    write_data_file(path, 300, false, 5); /* another file at the same path */
    ck_assert_int_eq(trainer_load(&u, model), QKV_ERR_MISMATCH);
    ck_assert_ptr_nonnull(strstr(qkv_last_error(), "changed since the model was trained"));
    trainer_free(&t);
    remove(model);
    remove_tmpdir("data.tsv");
}
END_TEST

/* Bad files: one error naming the line. */
START_TEST(test_data_bad_files) {
    static const struct { const char *text, *fragment; } bad[] = {
        {"a b\tb a\na b\n", "line 2: no tab"},
        {"a b\tb a\na\t\n", "line 2: the output side is empty"},
        {"a\tb\n \tb\n", "line 2: the input side is empty"},
        {"a b\tb a\nb c d\tc\n", "line 2: 3 input and 1 output tokens"},
        {"a b c d\tb d\nb a\ta b\n", "line 2: 2 input and 2 output tokens"},
        {"", "holds no examples"},
    };
    make_tmpdir();
    char path[128];
    snprintf(path, sizeof path, "%s/data.tsv", tmpdir);
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        FILE *f = fopen(path, "w");
        fputs(bad[k].text, f);
        fclose(f);
        dataset d;
        ck_assert_int_eq(dataset_load(&d, path, NULL), QKV_ERR_FORMAT);
        ck_assert_msg(strstr(qkv_last_error(), bad[k].fragment), "case %zu: %s", k, qkv_last_error());
    }
    remove_tmpdir("data.tsv");
}
END_TEST

/* A data file of a rule no built-in task has (swap neighbours), and one of outputs half as
 * long (cross-attention), each learned to 99% held-out. */
START_TEST(test_data_learns) {
    make_tmpdir();
    char path[128];
    snprintf(path, sizeof path, "%s/data.tsv", tmpdir);
    write_data_file(path, 3000, _i == 1, 6);
    train_config c = data_config(path, 600);
    c.model.d_model = 64;
    trainer t;
    ck_assert_int_eq(trainer_init(&t, &c), QKV_OK);
    train_steps(&t, c.steps);
    eval_result r = trainer_evaluate(&t);
    printf("test_train: data file (%s): held-out accuracy %.4f on %d examples\n",
           _i ? "half-length outputs, cross-attention" : "swap neighbours", r.accuracy, t.n_held);
    ck_assert_msg(r.accuracy >= 0.99, "held-out accuracy %.4f", r.accuracy);
    trainer_free(&t);
    remove_tmpdir("data.tsv");
}
END_TEST

/* ---- save, load, eval ------------------------------------------------------------------ */
START_TEST(test_save_load_eval) {
    make_tmpdir();
    char path[128];
    snprintf(path, sizeof path, "%s/model.safetensors", tmpdir);
    train_config c = make_config("reverse", 8, 32, 2, 60, QKV_ADAM, 0.005);
    c.model.residual = true;
    c.model.layers = 2;
    trainer a, b;
    ck_assert_int_eq(trainer_init(&a, &c), QKV_OK);
    train_steps(&a, 50); /* stop before the end: the file must carry the step and schedule */
    eval_result ra = trainer_evaluate(&a);
    ck_assert_int_eq(trainer_save(&a, path), QKV_OK);
    ck_assert_msg(trainer_load(&b, path) == QKV_OK, "%s", qkv_last_error());
    /* the config comes back whole */
    ck_assert_int_eq(b.cfg.task.kind, a.cfg.task.kind);
    ck_assert_int_eq(b.cfg.task.seq_len, a.cfg.task.seq_len);
    ck_assert_int_eq(b.cfg.task.vocab, a.cfg.task.vocab);
    ck_assert(!memcmp(&b.cfg.model, &a.cfg.model, sizeof a.cfg.model));
    ck_assert_int_eq(b.cfg.optim, a.cfg.optim);
    ck_assert(b.cfg.lr == a.cfg.lr && b.cfg.clip == a.cfg.clip &&
              b.cfg.weight_decay == a.cfg.weight_decay && b.cfg.cosine == a.cfg.cosine);
    ck_assert_int_eq(b.cfg.warmup, a.cfg.warmup);
    ck_assert_int_eq(b.cfg.batch, a.cfg.batch);
    ck_assert_int_eq(b.cfg.steps, a.cfg.steps);
    ck_assert(b.cfg.seed == a.cfg.seed);
    assert_same_state(&a, &b);
    eval_result rb = trainer_evaluate(&b);
    assert_same_eval(ra, rb);
    ck_assert(ra.accuracy > 0.5); /* it did learn something (0.73): the comparison is not of noise */
    trainer_free(&a);
    trainer_free(&b);
    remove_tmpdir("model.safetensors");
}
END_TEST

/* The loss of a batch under the model as it is: a fresh graph, no gradients. */
static double batch_loss(trainer *t, const int32_t *tokens, const int32_t *targets,
                         const int32_t *lengths, int batch) {
    qkv_ctx *ctx = qkv_ctx_new(0);
    qkv_ctx_set_no_grad(ctx, true);
    qkv_tensor *logits = qkv_model_forward_padded(&t->model, ctx, tokens, lengths, batch, NULL);
    qkv_tensor *y = qkv_from_array(ctx, QKV_I32, 2, (int64_t[]){batch, t->target_len}, targets);
    double loss = qkv_get(qkv_cross_entropy(ctx, logits, y, -1), 0);
    qkv_ctx_free(ctx);
    return loss;
}

/* qkv grads for every kind of model: a data file's (padded inputs), a data file's
 * encoder-decoder (outputs half as long), and translate. The batch is the trainer's own draw
 * from a generator seeded with the seed, and every parameter's gradient is that of the batch's
 * loss with its padding mask: central differences in f64 agree. */
START_TEST(test_batch_grads_every_model) {
    make_tmpdir();
    char path[128];
    snprintf(path, sizeof path, "%s/data.tsv", tmpdir);
    train_config c;
    if (_i < 2) {
        write_data_file(path, 300, _i == 1, 4);
        c = data_config(path, 20);
    } else if (_i >= 3) { /* transformer blocks: every activation, with and without LayerNorm */
        c = block_config("reverse", 8, (qkv_act)(_i - 3), _i != 4, 20);
    } else {
        c = make_config("translate", 16, 16, 2, 20, QKV_ADAM, 0.005);
        c.model.target_len = c.task.target_len;
    }
    c.model.dtype = QKV_F64;
    trainer t;
    ck_assert_msg(trainer_init(&t, &c) == QKV_OK, "%s", qkv_last_error());
    train_steps(&t, 2); /* away from the initial weights */
    const int B = 6;
    int T = t.model.cfg.seq_len, To = t.target_len;
    ck_assert_int_eq(To, _i == 0 || _i >= 3 ? T : T / 2);
    batch_grads g;
    ck_assert_msg(trainer_batch_grads(&t, 9, B, &g) == QKV_OK, "%s", qkv_last_error());
    ck_assert_int_eq(g.targets->shape[1], To);
    ck_assert_int_eq(g.logits->shape[1], To);
    ck_assert((g.lengths != NULL) == (_i < 2));
    if (_i >= 3) ck_assert_int_eq(t.model.nparams, _i == 4 ? 20 : 30);
    int32_t tokens[6 * 16], targets[6 * 16], lengths[6];
    qkv_rng rng = qkv_rng_seed(9);
    trainer_sample(&t, &rng, B, tokens, targets, lengths);
    ck_assert(!memcmp(tokens, g.tokens->data, sizeof(int32_t) * (size_t)(B * T)));
    ck_assert(!memcmp(targets, g.targets->data, sizeof(int32_t) * (size_t)(B * To)));
    const int32_t *len = g.lengths ? lengths : NULL;
    if (len) {
        ck_assert(!memcmp(lengths, g.lengths->data, sizeof lengths));
        int padded = 0;
        for (int b = 0; b < B; b++) padded += lengths[b] < T;
        ck_assert_msg(padded > 0, "no example of the batch is padded: the mask is not tested");
    }
    double loss = batch_loss(&t, tokens, targets, len, B);
    ck_assert_msg(fabs(qkv_get(g.loss, 0) - loss) < 1e-12, "%.17g vs %.17g", qkv_get(g.loss, 0), loss);
    for (int i = 0; i < t.model.nparams; i++) {
        qkv_tensor *p = t.model.param[i];
        for (int k = 0; k < 3; k++) { /* the first, a middle and the last element */
            int64_t at = k == 0 ? 0 : k == 1 ? p->size / 2 + 1 : p->size - 1;
            double v = qkv_get(p, at), h = 1e-5;
            qkv_set(p, at, v + h);
            double up = batch_loss(&t, tokens, targets, len, B);
            qkv_set(p, at, v - h);
            double down = batch_loss(&t, tokens, targets, len, B);
            qkv_set(p, at, v);
            double fd = (up - down) / (2 * h), grad = qkv_get(g.grad[i], at);
            ck_assert_msg(fabs(fd - grad) <= 1e-7 + 1e-5 * fabs(grad),
                          "%s[%lld]: gradient %.10g, central difference %.10g",
                          t.model.param_name[i], (long long)at, grad, fd);
        }
    }
    batch_grads_free(&g);
    trainer_free(&t);
    remove_tmpdir("data.tsv");
}
END_TEST

/* qkv_model_load, the public call: a trained model comes back with its config, its task and
 * its weights bit for bit, and computes the same logits; for a built-in task, a data file's
 * encoder-decoder and translate. A file that is not a model is refused. */
START_TEST(test_model_load) {
    make_tmpdir();
    char data[128], path[128];
    snprintf(data, sizeof data, "%s/data.tsv", tmpdir);
    snprintf(path, sizeof path, "%s/model.safetensors", tmpdir);
    train_config c;
    if (_i == 0) {
        c = make_config("reverse", 8, 16, 2, 10, QKV_ADAM, 0.005);
        c.model.layers = 2;
        c.model.residual = true;
        c.model.dtype = QKV_F64;
    } else if (_i == 1) {
        write_data_file(data, 200, true, 4);
        c = data_config(data, 10);
    } else if (_i == 3) {
        c = block_config("reverse", 8, QKV_ACT_GELU_TANH, true, 10);
    } else {
        c = make_config("translate", 16, 16, 2, 10, QKV_ADAM, 0.005);
        c.model.target_len = c.task.target_len;
    }
    trainer t;
    ck_assert_msg(trainer_init(&t, &c) == QKV_OK, "%s", qkv_last_error());
    train_steps(&t, 3);
    ck_assert_int_eq(trainer_save(&t, path), QKV_OK);
    qkv_model m;
    qkv_task task;
    ck_assert_msg(qkv_model_load(&m, &task, path) == QKV_OK, "%s", qkv_last_error());
    ck_assert(!memcmp(&m.cfg, &t.model.cfg, sizeof m.cfg));
    ck_assert_int_eq(task.kind, t.cfg.task.kind);
    ck_assert_int_eq(task.seq_len, t.cfg.task.seq_len);
    ck_assert_int_eq(task.vocab, t.cfg.task.vocab);
    ck_assert_int_eq(task.target_len, t.model.cfg.target_len);
    if (_i != 1) ck_assert(!memcmp(&task, &t.cfg.task, sizeof task));
    ck_assert_int_eq(m.nparams, t.model.nparams);
    for (int i = 0; i < m.nparams; i++) {
        ck_assert_str_eq(m.param_name[i], t.model.param_name[i]);
        ck_assert(!memcmp(m.param[i]->data, t.model.param[i]->data,
                          (size_t)m.param[i]->size * qkv_dtype_size(m.param[i]->dtype)));
    }
    /* the same logits for the first held-out sequences */
    qkv_ctx *ctx = qkv_ctx_new(0);
    const int32_t *len = t.held_lengths;
    qkv_tensor *a = qkv_model_forward_padded(&t.model, ctx, t.held_tokens, len, 4, NULL);
    qkv_tensor *b = qkv_model_forward_padded(&m, ctx, t.held_tokens, len, 4, NULL);
    ck_assert_int_eq(a->size, b->size);
    ck_assert(!memcmp(a->data, b->data, (size_t)a->size * qkv_dtype_size(a->dtype)));
    qkv_ctx_free(ctx);
    qkv_model_free(&m);
    trainer_free(&t);
    /* not a model: a grads file; and no file at all */
    batch_grads g;
    ck_assert_int_eq(trainer_init(&t, &c), QKV_OK);
    ck_assert_int_eq(trainer_batch_grads(&t, 1, 2, &g), QKV_OK);
    ck_assert_int_eq(batch_grads_save(&g, &t, 1, "m", path), QKV_OK);
    batch_grads_free(&g);
    trainer_free(&t);
    ck_assert_int_eq(qkv_model_load(&m, NULL, path), QKV_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(qkv_last_error(), "not a qkv model"));
    ck_assert_ptr_null(m.params);
    remove(path);
    ck_assert_int_eq(qkv_model_load(&m, NULL, path), QKV_ERR_IO);
    ck_assert_ptr_null(m.params);
    remove_tmpdir("data.tsv");
}
END_TEST

/* trainer_run, as a C program uses it: a run straight to N steps and a run of N/2 steps
 * resumed from its directory to N write the same model.safetensors and metrics.csv, byte for
 * byte (a constant learning rate, so that the first run's shorter plan changes nothing); the
 * progress callback hears of every evaluation and checkpoint. */
typedef struct {
    int begun, evaluated, stepped, committed, trained;
} run_counts;

static void count_events(run_event e, const training_run *run, const trainer *t, void *user) {
    run_counts *n = user;
    (void)run;
    (void)t;
    n->begun += e == RUN_BEGIN;
    n->evaluated += e == RUN_EVALUATED;
    n->stepped += e == RUN_STEPPED;
    n->committed += e == RUN_COMMITTED;
    n->trained += e == RUN_TRAINED;
}

static char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s is missing", path);
    static char buf[4][1 << 20];
    static int next;
    char *b = buf[next++ % 4];
    *n = fread(b, 1, sizeof buf[0], f);
    fclose(f);
    return b;
}

START_TEST(test_trainer_run_resumes_exactly) {
    make_tmpdir();
    char straight[128], halves[128], path[160];
    snprintf(straight, sizeof straight, "%s/straight", tmpdir);
    snprintf(halves, sizeof halves, "%s/halves", tmpdir);
    train_config c = make_config("reverse", 8, 16, 2, 20, QKV_ADAM, 0.005);
    c.cosine = false;
    c.warmup = 0;
    run_options o = {.out_dir = straight, .eval_every = 5, .snapshot_every = 5};
    trainer t;
    training_run run;
    run_counts n = {0};
    ck_assert_int_eq(trainer_init(&t, &c), QKV_OK);
    ck_assert_msg(trainer_run(&t, &o, count_events, &n, &run) == QKV_OK, "%s", qkv_last_error());
    ck_assert_int_eq(run.metrics.n, 1 + 20 / 5); /* step 0, then every 5 */
    ck_assert_int_eq(n.begun, 1);
    ck_assert_int_eq(n.evaluated, 20 / 5);
    ck_assert_int_eq(n.stepped, 20);
    ck_assert_int_eq(n.committed, 1);
    ck_assert_int_eq(n.trained, 1);
    ck_assert_int_eq(trainer_run_end(&run, &t, 0, NULL), QKV_OK);
    trainer_free(&t);

    c.steps = 10;
    o.out_dir = halves;
    ck_assert_int_eq(trainer_init(&t, &c), QKV_OK);
    ck_assert_int_eq(trainer_run(&t, &o, NULL, NULL, &run), QKV_OK);
    ck_assert_int_eq(trainer_run_end(&run, &t, 0, NULL), QKV_OK);
    trainer_free(&t);
    snprintf(path, sizeof path, "%s/model.safetensors", halves);
    ck_assert_msg(trainer_load(&t, path) == QKV_OK, "%s", qkv_last_error());
    t.cfg.steps = 20;
    o.resume_dir = halves;
    memset(&n, 0, sizeof n);
    ck_assert_int_eq(trainer_run(&t, &o, count_events, &n, &run), QKV_OK);
    ck_assert_int_eq(n.committed, 2); /* its own checkpoint at the start, and the new one */
    ck_assert_int_eq(run.start_step, 10);
    ck_assert_int_eq(trainer_run_end(&run, &t, 0, NULL), QKV_OK);
    trainer_free(&t);

    const char *files[] = {"model.safetensors", "metrics.csv", "attention/layer1_head2.dat",
                           "gradients/layer1_head1_dS.dat", "snapshots/step15_layer1_head1.dat"};
    for (int i = 0; i < 5; i++) {
        size_t na, nb;
        snprintf(path, sizeof path, "%s/%s", straight, files[i]);
        const char *a = read_all(path, &na);
        snprintf(path, sizeof path, "%s/%s", halves, files[i]);
        const char *b = read_all(path, &nb);
        ck_assert_msg(na == nb && !memcmp(a, b, na), "%s differs", files[i]);
    }
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -r '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* ---- a file's metadata is read exactly: each word or number qkv does not know is refused,
 * naming its key, never read as a default ---- */
static const struct {
    const char *from, *to, *message; /* same length: the header keeps its size */
} bad_meta[] = {
    {"\"optim\":\"momentum\"", "\"optim\":\"rmsprop!\"", "metadata 'optim' is not one of qkv's values (sgd, momentum, adam)"},
    {"\"residual\":\"true\"", "\"residual\":\"yes!\"", "metadata 'residual' is not one of qkv's values"},
    {"\"causal\":\"true\"", "\"causal\":\"True\"", "metadata 'causal' is not one of qkv's values"},
    {"\"schedule\":\"constant\"", "\"schedule\":\"linear!!\"", "metadata 'schedule' is not one of qkv's values (cosine, constant)"},
    /* the ranges are those of train's options (train/options.c) */
    {"\"steps\":\"10\"", "\"steps\":\"-1\"", "metadata 'steps' is out of range (1..1e+08)"},
    {"\"lr\":\"0.10000000000000001\"", "\"lr\":\"0.00000000000000000\"", "metadata 'lr' is out of range (above 0..1e+06)"},
    {"\"dtype\":\"f32\"", "\"dtype\":\"f16\"", "metadata 'dtype' is not one of qkv's values (f32, f64)"},
    {"\"heads\":\"2\"", "\"heads\":\"x\"", "metadata 'heads' is not a number ('x')"},
    {"\"warmup\":\"100\"", "\"warmup\":\"1.5\"", "metadata 'warmup' is not a whole number"},
    /* numbers by the one syntax of engine/numbers.c, which strtod and strtoull are not */
    {"\"warmup\":\"100\"", "\"warmup\":\"1e2\"", "metadata 'warmup' is not a whole number"},
    {"\"warmup\":\"100\"", "\"warmup\":\"+10\"", "metadata 'warmup' is not a number ('+10')"},
    {"\"warmup\":\"100\"", "\"warmup\":\" 10\"", "metadata 'warmup' is not a number (' 10')"},
    {"\"warmup\":\"100\"", "\"warmup\":\"0x1\"", "metadata 'warmup' is not a number ('0x1')"},
    {"\"step\":\"3\"", "\"step\":\"x\"", "metadata 'step' is not a whole number"},
    {"\"seed\":\"7\"", "\"seed\":\"-\"", "metadata 'seed' is not a number"},
    {"\"optim\":\"momentum\"", "\"optix\":\"momentum\"", "metadata 'optim' is missing"},
};

START_TEST(test_checkpoint_refuses_unknown_values) {
    make_tmpdir();
    char path[128];
    snprintf(path, sizeof path, "%s/model.safetensors", tmpdir);
    train_config c = make_config("reverse", 8, 32, 2, 10, QKV_MOMENTUM, 0.1);
    c.model.residual = c.model.causal = true;
    c.cosine = false;
    c.warmup = 100;
    c.seed = 7;
    trainer t;
    ck_assert_int_eq(trainer_init(&t, &c), QKV_OK);
    train_steps(&t, 3);
    ck_assert_int_eq(trainer_save(&t, path), QKV_OK);
    trainer_free(&t);
    /* the file as bytes; its header is JSON, so a value can be swapped in place */
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    static char bytes[1 << 20];
    size_t n = fread(bytes, 1, sizeof bytes, f);
    fclose(f);
    ck_assert(n > 8 && n < sizeof bytes);
    /* the file as saved loads: the refusals below are of the one value changed */
    ck_assert_msg(trainer_load(&t, path) == QKV_OK, "%s", qkv_last_error());
    trainer_free(&t);
    const char *header = bytes + 8;
    size_t header_len = 0;
    for (int i = 7; i >= 0; i--) header_len = header_len << 8 | (unsigned char)bytes[i];
    ck_assert(header_len < n - 8);
    for (size_t k = 0; k < sizeof bad_meta / sizeof bad_meta[0]; k++) {
        static char patched[1 << 20];
        memcpy(patched, bytes, n);
        char *at = strstr(header, bad_meta[k].from);
        ck_assert_msg(at && at < header + header_len, "no %s in the header", bad_meta[k].from);
        ck_assert_uint_eq(strlen(bad_meta[k].from), strlen(bad_meta[k].to));
        memcpy(patched + (at - bytes), bad_meta[k].to, strlen(bad_meta[k].to));
        snprintf(path, sizeof path, "%s/patched.safetensors", tmpdir);
        f = fopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        ck_assert_uint_eq(fwrite(patched, 1, n, f), n);
        fclose(f);
        ck_assert_int_eq(trainer_load(&t, path), QKV_ERR_FORMAT);
        ck_assert_msg(strstr(qkv_last_error(), bad_meta[k].message), "%s: got '%s'",
                      bad_meta[k].to, qkv_last_error());
        remove(path);
    }
    snprintf(path, sizeof path, "%s/model.safetensors", tmpdir);
    /* what --lr allows reads back: any lr above 0, however small */
    c.lr = 1e-305;
    ck_assert_int_eq(trainer_init(&t, &c), QKV_OK);
    ck_assert_int_eq(trainer_save(&t, path), QKV_OK);
    trainer_free(&t);
    ck_assert_msg(trainer_load(&t, path) == QKV_OK, "%s", qkv_last_error());
    ck_assert(t.cfg.lr == 1e-305);
    trainer_free(&t);
    remove(path);
    remove(tmpdir);
}
END_TEST

/* ---- resume: N straight == N/2, save, load, N/2 more ------------------------------------ */
/* Adam in f32 first: the "files" case runs it, "optimizers" the rest */
static const qkv_optim_kind resume_optim[] = {QKV_ADAM, QKV_ADAM, QKV_MOMENTUM, QKV_SGD, QKV_SGD};
static const qkv_dtype resume_dtype[] = {QKV_F32, QKV_F64, QKV_F32, QKV_F32, QKV_F64};

START_TEST(test_resume_is_exact) {
    const int64_t N = 40; /* warm-up 2 steps, then the cosine schedule: resumed at its middle */
    qkv_optim_kind kind = resume_optim[_i];
    double lr = kind == QKV_ADAM ? 0.005 : kind == QKV_MOMENTUM ? 0.1 : 1.0;
    train_config c = make_config("shift", 8, 32, 2, N, kind, lr);
    c.model.dtype = resume_dtype[_i];
    make_tmpdir();
    char path[128];
    snprintf(path, sizeof path, "%s/model.safetensors", tmpdir);

    trainer straight, first, resumed;
    ck_assert_int_eq(trainer_init(&straight, &c), QKV_OK);
    train_steps(&straight, N);

    ck_assert_int_eq(trainer_init(&first, &c), QKV_OK);
    train_steps(&first, N / 2);
    ck_assert_int_eq(trainer_save(&first, path), QKV_OK);
    trainer_free(&first);
    ck_assert_msg(trainer_load(&resumed, path) == QKV_OK, "%s", qkv_last_error());
    ck_assert_int_eq(resumed.optim.step, N / 2);
    train_steps(&resumed, N);

    assert_same_state(&straight, &resumed);
    ck_assert(straight.last_loss == resumed.last_loss);
    ck_assert(straight.last_train_acc == resumed.last_train_acc);
    ck_assert(straight.optim.lr == resumed.optim.lr);
    assert_same_eval(trainer_evaluate(&straight), trainer_evaluate(&resumed));
    trainer_free(&straight);
    trainer_free(&resumed);
    remove_tmpdir("model.safetensors");
}
END_TEST

/* ---- an f32 model loaded as f64: every weight and moment widened exactly; an f64 model
 * is never rounded to f32 ------------------------------------------------------------------ */
START_TEST(test_load_as_f64) {
    make_tmpdir();
    char path[128];
    snprintf(path, sizeof path, "%s/model.safetensors", tmpdir);
    train_config c = make_config("copy", 8, 16, 2, 20, QKV_ADAM, 0.005);
    trainer a, b, d;
    ck_assert_int_eq(trainer_init(&a, &c), QKV_OK);
    train_steps(&a, 20);
    ck_assert_int_eq(trainer_save(&a, path), QKV_OK);
    ck_assert_msg(trainer_load_as(&b, path, QKV_F64) == QKV_OK, "%s", qkv_last_error());
    ck_assert_int_eq(b.model.cfg.dtype, QKV_F64);
    for (int i = 0; i < a.model.nparams; i++) {
        const qkv_tensor *p = a.model.param[i], *q = b.model.param[i];
        ck_assert_int_eq(q->dtype, QKV_F64);
        for (int64_t j = 0; j < p->size; j++) {
            ck_assert(qkv_get(q, j) == qkv_get(p, j));
            ck_assert(qkv_get(b.optim.v[i], j) == qkv_get(a.optim.v[i], j));
        }
    }
    eval_result ra = trainer_evaluate(&a), rb = trainer_evaluate(&b);
    ck_assert_double_eq_tol(ra.loss, rb.loss, 1e-5 * ra.loss);
    /* saved as f64, loaded back as f64 (its own dtype); asked for as f32, refused */
    ck_assert_int_eq(trainer_save(&b, path), QKV_OK);
    ck_assert_msg(trainer_load(&d, path) == QKV_OK, "%s", qkv_last_error());
    assert_same_state(&b, &d);
    trainer_free(&d);
    ck_assert_int_eq(trainer_load_as(&d, path, QKV_F32), QKV_ERR_MISMATCH);
    ck_assert_ptr_nonnull(strstr(qkv_last_error(), "the model is f64"));
    trainer_free(&a);
    trainer_free(&b);
    remove_tmpdir("model.safetensors");
}
END_TEST

/* ---- a step's shards add up to the whole batch ------------------------------------------- */
/* The gradient a sharded step leaves in the model equals one graph over the whole batch, up
 * to f32 summation order: batches of 32 (two equal shards), 3 (uneven) and 1 (no sharding),
 * on lookup, whose targets skip most positions, so shards hold different numbers of them. */
START_TEST(test_shards_match_whole_batch) {
    static const int batches[] = {32, 3, 1};
    train_config c = make_config("lookup", 7, 32, 2, 10, QKV_SGD, 0.1);
    c.batch = batches[_i];
    trainer t;
    ck_assert_int_eq(trainer_init(&t, &c), QKV_OK);
    ck_assert_int_eq(t.nshards, c.batch < TRAIN_SHARDS ? c.batch : TRAIN_SHARDS);
    int T = c.task.seq_len;
    for (int b = 0; b < c.batch; b++)
        qkv_task_sample(&c.task, &t.data_rng, false, t.tokens + b * T, t.targets + b * T);
    /* the same weights (the same seed), one graph */
    qkv_model whole;
    ck_assert_int_eq(qkv_model_init(&whole, &c.model, c.seed), QKV_OK);
    qkv_ctx *ctx = qkv_ctx_new(0);
    qkv_tensor *logits = qkv_model_forward(&whole, ctx, t.tokens, c.batch, NULL);
    qkv_tensor *y = qkv_from_array(ctx, QKV_I32, 2, (int64_t[]){c.batch, T}, t.targets);
    qkv_tensor *loss = qkv_cross_entropy(ctx, logits, y, -1);
    qkv_backward(loss);
    ck_assert_int_eq(trainer_update(&t), QKV_OK);
    ck_assert_msg(fabs(t.last_loss - qkv_get(loss, 0)) <= 1e-6 * fabs(qkv_get(loss, 0)),
                  "loss %.9g, whole batch %.9g", t.last_loss, qkv_get(loss, 0));
    for (int i = 0; i < whole.nparams; i++) {
        const float *g = t.model.param[i]->grad, *ref = whole.param[i]->grad;
        double worst = 0, scale = 0;
        /* not fmax: it would pass over a NaN (and GCC 12 for aarch64 cannot vectorise an
         * fmax of widened floats: it stops with an internal error) */
        for (int64_t j = 0; j < whole.param[i]->size; j++) {
            double off = fabs((double)g[j] - ref[j]), size = fabs((double)ref[j]);
            worst = off <= worst ? worst : off; /* a NaN stays */
            scale = size <= scale ? scale : size;
        }
        ck_assert_msg(scale > 0, "%s has no gradient", whole.param_name[i]);
        ck_assert_msg(worst <= 1e-5 * scale, "%s: gradient off by %.3g (largest %.3g)",
                      whole.param_name[i], worst, scale);
    }
    qkv_ctx_free(ctx);
    qkv_model_free(&whole);
    trainer_free(&t);
}
END_TEST

/* ---- the thread count does not change a single bit ---------------------------------------- */
#ifdef QKV_HAVE_OPENMP
/* Trains `c` on 1 thread and on `threads`, and compares every byte of the state. */
/* held > 0: the evaluation reads only the first `held` held-out sequences (the cases of one
 * long sequence a step, whose 512 held-out sequences would cost a hundred times their steps) */
static void assert_threads_agree_held(train_config c, int threads, int held) {
    trainer t1, t2;
    omp_set_num_threads(1);
    ck_assert_int_eq(trainer_init(&t1, &c), QKV_OK);
    if (held > 0 && held < t1.n_held) t1.n_held = held;
    train_steps(&t1, c.steps);
    eval_result r1 = trainer_evaluate(&t1);
    omp_set_num_threads(threads);
    ck_assert_int_eq(omp_get_max_threads(), threads);
    ck_assert_int_eq(trainer_init(&t2, &c), QKV_OK);
    if (held > 0 && held < t2.n_held) t2.n_held = held;
    train_steps(&t2, c.steps);
    eval_result r2 = trainer_evaluate(&t2);
    assert_same_state(&t1, &t2);
    ck_assert(t1.last_loss == t2.last_loss);
    assert_same_eval(r1, r2);
    trainer_free(&t1);
    trainer_free(&t2);
    omp_set_num_threads(2);
}

static void assert_threads_agree(train_config c, int threads) {
    assert_threads_agree_held(c, threads, 0);
}

/* Two shards side by side on 2 threads, and one after the other on 4, each op on all four. */
START_TEST(test_threads_bit_identical_shards) {
    train_config c = make_config("copy", 16, 128, 2, 4, QKV_ADAM, 0.005);
    c.batch = 64;
    assert_threads_agree(c, 2);
    assert_threads_agree(c, 4);
}
END_TEST

/* Thread counts that change how a step runs: shards side by side on 2 and 3 threads, and on
 * 4 and 7 the layout trials, whose steps alternate between the shards in turn (each op on
 * every thread) and side by side; on tiny's shapes (batch 32 of 16 tokens, d_model 64, 4
 * heads) and on a model whose ops are split. Oversubscribing the machine changes nothing but
 * the time. */
START_TEST(test_threads_bit_identical_counts) {
    static const int counts[] = {2, 3, 4, 7};
    train_config small = make_config("copy", 16, 64, 4, 6, QKV_ADAM, 0.005);
    small.batch = 32;
    train_config big = make_config("copy", 64, 64, 2, 6, QKV_ADAM, 0.005);
    big.batch = 16;
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        assert_threads_agree(small, counts[i]);
        assert_threads_agree(big, counts[i]);
    }
}
END_TEST

/* With two threads or more per shard, the first step runs the shards in turn, the next four
 * alternate the two layouts and time them, and the faster is kept; with fewer threads the
 * layout is fixed and nothing is timed. */
START_TEST(test_shard_layout_trials) {
    train_config c = make_config("copy", 16, 64, 4, 8, QKV_ADAM, 0.005);
    c.batch = 32;
    trainer t;
    omp_set_num_threads(2);
    ck_assert_int_eq(trainer_init(&t, &c), QKV_OK);
    train_steps(&t, 3);
    ck_assert_int_eq(t.layout.steps, 0);
    omp_set_num_threads(4);
    train_steps(&t, 4);
    ck_assert_int_eq(t.layout.threads, 4);
    ck_assert_int_eq(t.layout.steps, 1); /* the untimed first */
    ck_assert(isinf(t.layout.best[0]) && isinf(t.layout.best[1]));
    train_steps(&t, 8);
    ck_assert_int_eq(t.layout.steps, 1 + 2 * SHARD_LAYOUT_TRIALS);
    ck_assert(t.layout.best[0] > 0 && isfinite(t.layout.best[0]));
    ck_assert(t.layout.best[1] > 0 && isfinite(t.layout.best[1]));
    trainer_free(&t);
    omp_set_num_threads(2);
}
END_TEST

/* The same in f64, shards and kernels. */
START_TEST(test_threads_bit_identical_f64) {
    train_config c = make_config("copy", 16, 64, 2, 4, QKV_ADAM, 0.005);
    c.model.dtype = QKV_F64;
    c.batch = 64;
    assert_threads_agree(c, 2);
    assert_threads_agree(c, 4);
    c = make_config("copy", 256, 64, 2, 3, QKV_ADAM, 0.005);
    c.model.dtype = QKV_F64;
    c.batch = 1;
    assert_threads_agree_held(c, 2, 64); /* one evaluation batch of 64 */
}
END_TEST

/* Transformer blocks (MLP and LayerNorm): the same bits on 1 and 4 threads (isa_bits_test
 * trains three block models, f32 and f64, on 1 and 2 threads on every path). */
START_TEST(test_threads_bit_identical_blocks) {
    train_config c = block_config("reverse", 16, QKV_ACT_GELU, true, 4);
    c.batch = 64;
    assert_threads_agree(c, 4);
}
END_TEST

/* A data file's run: padded batches, the same bits on 1 and 2 threads. */
START_TEST(test_threads_bit_identical_data) {
    make_tmpdir();
    char path[128];
    snprintf(path, sizeof path, "%s/data.tsv", tmpdir);
    for (int half = 0; half < 2; half++) {
        write_data_file(path, 300, half, 8);
        train_config c = data_config(path, 4);
        c.batch = 64;
        assert_threads_agree(c, 2);
    }
    remove_tmpdir("data.tsv");
}
END_TEST

/* One sequence, so no shards: the matrix products and the fused attention take their
 * parallel paths (src/kernels: above 3e6 flops and 5e5 multiply-adds). */
START_TEST(test_threads_bit_identical_kernels) {
    train_config c = make_config("copy", 256, 128, 2, 4, QKV_ADAM, 0.005);
    c.batch = 1;
    assert_threads_agree_held(c, 2, 64); /* one evaluation batch of 64 */
}
END_TEST
#endif

/* ---- divergence ---------------------------------------------------------------------------- */
START_TEST(test_divergence_reports_step) {
    train_config c = make_config("copy", 8, 32, 1, 50, QKV_SGD, 1e6);
    c.clip = 0;
    c.cosine = false;
    c.warmup = 0;
    trainer t;
    ck_assert_int_eq(trainer_init(&t, &c), QKV_OK);
    qkv_status s = QKV_OK;
    int64_t failed_at = 0;
    for (int64_t k = 1; k <= c.steps && s == QKV_OK; k++) {
        s = trainer_step(&t);
        failed_at = k;
    }
    ck_assert_int_eq(s, QKV_ERR_NUMERIC);
    char want[32];
    snprintf(want, sizeof want, "at step %lld", (long long)failed_at);
    ck_assert_msg(strstr(qkv_last_error(), want), "'%s' does not say '%s'", qkv_last_error(), want);
    ck_assert_ptr_nonnull(strstr(qkv_last_error(), "lower lr)"));
    trainer_free(&t);
}
END_TEST

/* A state with a non-finite weight or moment, or a negative second moment, is never saved:
 * one poisoned element in each kind of tensor, in turn. */
START_TEST(test_poisoned_state_never_saved) {
    make_tmpdir();
    char path[128];
    snprintf(path, sizeof path, "%s/model.safetensors", tmpdir);
    train_config c = make_config("copy", 4, 8, 1, 10, QKV_ADAM, 0.01);
    trainer t;
    ck_assert_int_eq(trainer_init(&t, &c), QKV_OK);
    train_steps(&t, 3);
    struct { qkv_tensor *x; float bad; const char *says; } poison[] = {
        {t.model.param[1], NAN, "the weights of 'pos_emb' hold NaN at element 5 after step 3"},
        {t.optim.m[0], INFINITY, "first moments of 'tok_emb' hold Inf at element 5"},
        {t.optim.v[2], -1e-30f, "second moments of 'attn.0.w_q' hold a negative value at element 5"},
    };
    for (size_t i = 0; i < sizeof poison / sizeof poison[0]; i++) {
        float *p = poison[i].x->data, keep = p[5];
        p[5] = poison[i].bad;
        ck_assert_int_eq(trainer_save(&t, path), QKV_ERR_NUMERIC);
        ck_assert_msg(strstr(qkv_last_error(), poison[i].says), "'%s' does not say '%s'",
                      qkv_last_error(), poison[i].says);
        ck_assert_int_eq(access(path, F_OK), -1); /* nothing written, not even a temporary */
        p[5] = keep;
    }
    ck_assert_int_eq(trainer_save(&t, path), QKV_OK); /* the state as it was: saved */
    /* (A file holding such a state is refused when loaded: bad_inputs' negv fixture.) */
    trainer_free(&t);
    remove_tmpdir("model.safetensors");
}
END_TEST

START_TEST(test_init_rejects_bad_values) {
    train_config c = make_config("copy", 8, 32, 1, 10, QKV_ADAM, 0.005);
    trainer t;
    train_config bad = c;
    bad.lr = 0;
    ck_assert_int_eq(trainer_init(&t, &bad), QKV_ERR_VALUE);
    bad = c;
    bad.lr = -1;
    ck_assert_int_eq(trainer_init(&t, &bad), QKV_ERR_VALUE);
    bad = c;
    bad.batch = 0;
    ck_assert_int_eq(trainer_init(&t, &bad), QKV_ERR_VALUE);
    bad = c;
    bad.model.heads = 3; /* does not divide 32 */
    ck_assert_int_eq(trainer_init(&t, &bad), QKV_ERR_VALUE);
    ck_assert_ptr_nonnull(strstr(qkv_last_error(), "divide"));
    bad = c;
    bad.model.heads = 0;
    ck_assert_int_eq(trainer_init(&t, &bad), QKV_ERR_VALUE);
    bad = c;
    bad.model.vocab = c.task.vocab - 1; /* tokens beyond the embedding table */
    ck_assert_int_eq(trainer_init(&t, &bad), QKV_ERR_VALUE);
}
END_TEST

/* The library's messages name a config's fields as C does, unless a front end renames them
 * (qkv's CLI names its flags). */
static const char *dashed_field(const char *field) {
    return !strcmp(field, "batch") ? "--batch" : !strcmp(field, "d_model") ? "--d-model" : NULL;
}

START_TEST(test_config_messages_name_fields) {
    train_config c = make_config("copy", 8, 32, 1, 10, QKV_ADAM, 0.005);
    train_config bad = c;
    bad.batch = 0;
    ck_assert_int_eq(trainer_check_config(&bad), QKV_ERR_VALUE);
    ck_assert_str_eq(qkv_last_error(), "batch 0 is out of range (1..65536)");
    bad = c;
    bad.model.heads = 3;
    ck_assert_int_eq(trainer_check_config(&bad), QKV_ERR_VALUE);
    ck_assert_str_eq(qkv_last_error(), "heads 3 does not divide d_model 32");
    bad = c;
    bad.lr = 0;
    ck_assert_int_eq(trainer_check_config(&bad), QKV_ERR_VALUE);
    ck_assert_str_eq(qkv_last_error(), "lr 0 is out of range (above 0..1e+06)");
    ck_assert_int_eq(trainer_check_config(&c), QKV_OK);

    qkv_set_field_names(dashed_field); /* renamed where the namer knows the field */
    bad = c;
    bad.model.heads = 3;
    ck_assert_int_eq(trainer_check_config(&bad), QKV_ERR_VALUE);
    ck_assert_str_eq(qkv_last_error(), "heads 3 does not divide --d-model 32");
    bad = c;
    bad.batch = 65537;
    ck_assert_int_eq(trainer_check_config(&bad), QKV_ERR_VALUE);
    ck_assert_str_eq(qkv_last_error(), "--batch 65537 is out of range (1..65536)");
    qkv_set_field_names(NULL);
    ck_assert_int_eq(trainer_check_config(&bad), QKV_ERR_VALUE);
    ck_assert_str_eq(qkv_last_error(), "batch 65537 is out of range (1..65536)");
}
END_TEST

/* ---- the model ------------------------------------------------------------------------------ */
/* qkv_model_forward_trace gives the same logits, bit for bit, as qkv_model_forward with the
 * composed attention, on a 2-layer, 2-head causal model; its parts fit together (A is the
 * softmax of `masked`, which is `scaled` with -inf after the query), and after a backward pass
 * each part holds a gradient. */
/* qkv_model_forward_trace_padded gives the logits and weights of qkv_model_forward_padded, bit
 * for bit, on an encoder-decoder with a causal mask over padded inputs; padded keys get exactly
 * zero weight, and `masked` holds -inf there. */
START_TEST(test_forward_trace_padded) {
    qkv_model m;
    qkv_model_config c = {.vocab = 9, .seq_len = 6, .d_model = 8, .heads = 2, .layers = 2,
                          .residual = true, .causal = true, .init_scale = 0.7, .target_len = 3};
    ck_assert_int_eq(qkv_model_init(&m, &c, 5), QKV_OK);
    qkv_ctx *a = qkv_ctx_new(0), *b = qkv_ctx_new(0);
    const int32_t tokens[12] = {1, 4, 4, 0, 0, 0, 3, 8, 2, 2, 7, 0}, lengths[2] = {3, 5};
    qkv_tensor *attn[QKV_MAX_LAYERS];
    qkv_layer_trace trace[QKV_MAX_LAYERS];
    qkv_tensor *la = qkv_model_forward_padded(&m, a, tokens, lengths, 2, attn);
    qkv_tensor *lb = qkv_model_forward_trace_padded(&m, b, tokens, lengths, 2, trace);
    ck_assert_int_eq(la->size, lb->size);
    ck_assert(memcmp(la->data, lb->data, (size_t)la->size * sizeof(float)) == 0);
    for (int l = 0; l < 2; l++) {
        const qkv_layer_trace *t = &trace[l];
        ck_assert(memcmp(attn[l]->data, t->weights->data, (size_t)t->weights->size * sizeof(float)) == 0);
        for (int64_t e = 0; e < t->weights->size; e++) { /* (B, H, 3, 6) */
            int64_t j = e % 6, i = (e / 6) % 3, bi = e / (6 * 3 * 2);
            bool dropped = j >= lengths[bi] || j > i + 3; /* causal, aligned at the end */
            ck_assert(dropped == (isinf(qkv_get(t->masked, e)) != 0));
            if (dropped) ck_assert(qkv_get(t->weights, e) == 0);
        }
    }
    qkv_ctx_free(a);
    qkv_ctx_free(b);
    qkv_model_free(&m);
}
END_TEST

START_TEST(test_forward_trace) {
    qkv_model m;
    qkv_model_config c = {.vocab = 11, .seq_len = 5, .d_model = 8, .heads = 2, .layers = 2,
                          .residual = true, .causal = true, .init_scale = 0.7};
    ck_assert_int_eq(qkv_model_init(&m, &c, 3), QKV_OK);
    qkv_ctx *a = qkv_ctx_new(0), *b = qkv_ctx_new(0);
    const int32_t tokens[10] = {1, 4, 4, 9, 0, 3, 10, 2, 2, 7};
    qkv_tensor *attn[QKV_MAX_LAYERS];
    qkv_layer_trace trace[QKV_MAX_LAYERS];
    qkv_tensor *la = qkv_model_forward(&m, a, tokens, 2, attn);
    qkv_tensor *lb = qkv_model_forward_trace(&m, b, tokens, 2, trace);
    ck_assert_int_eq(la->size, lb->size);
    ck_assert(memcmp(la->data, lb->data, (size_t)la->size * sizeof(float)) == 0);
    for (int l = 0; l < 2; l++) {
        const qkv_layer_trace *t = &trace[l];
        ck_assert(memcmp(attn[l]->data, t->weights->data, (size_t)t->weights->size * sizeof(float)) == 0);
        ck_assert_int_eq(t->q->shape[1], 2);
        ck_assert_int_eq(t->q->shape[3], 4);
        for (int64_t e = 0; e < t->scores->size; e++) {
            int64_t i = (e / 5) % 5, j = e % 5;
            ck_assert(fabs(qkv_get(t->scaled, e) - qkv_get(t->scores, e) / 2) < 1e-6); /* sqrt(4) */
            if (j > i) {
                ck_assert(isinf(qkv_get(t->masked, e)) && qkv_get(t->weights, e) == 0);
            } else {
                ck_assert(qkv_get(t->masked, e) == qkv_get(t->scaled, e));
            }
        }
    }
    qkv_tensor *y = qkv_from_array(b, QKV_I32, 2, (int64_t[]){2, 5}, tokens);
    qkv_zero_grad(m.params);
    qkv_backward(qkv_cross_entropy(b, lb, y, -1));
    double norm = 0;
    for (int64_t e = 0; e < trace[0].q->size; e++) norm += fabs(qkv_grad_get(trace[0].q, e));
    ck_assert(norm > 0);
    ck_assert(trace[0].weights->grad && trace[0].masked->grad && trace[1].v->grad);
    qkv_ctx_free(a);
    qkv_ctx_free(b);
    qkv_model_free(&m);
}
END_TEST

/* qkv_model_forward_at computes the queries, W_O, the MLP and the head at the positions with a
 * target only, and gives the bits of the forward over every position: the logits' rows there,
 * the loss and every parameter's gradient, byte for byte, where the other positions have no
 * target. Cases: modular's shape (one target, at the last of 3 positions, 300 sequences: 900
 * rows, so the weight gradients' sums cross depth blocks that the 300 rows alone would place
 * elsewhere) with an MLP; two causal layers with positions 1 and 3 of 5 over padded inputs;
 * attention only without the residual stream; f64; GELU; and LayerNorm, which computes every
 * position and picks the rows. */
START_TEST(test_forward_at_same_bits) {
    static const struct {
        int layers, seq_len, mlp, n;
        int32_t at[2];
        bool residual, causal, padded, f64, norm;
        qkv_act act;
    } cases[] = {
        {1, 3, 32, 1, {2, 0}, true, false, false, false, false, QKV_ACT_RELU},
        {2, 5, 24, 2, {1, 3}, true, true, true, false, false, QKV_ACT_RELU},
        {2, 5, 0, 2, {0, 4}, false, true, false, false, false, QKV_ACT_RELU},
        {1, 3, 32, 1, {2, 0}, true, false, false, true, false, QKV_ACT_RELU},
        {1, 4, 16, 2, {2, 3}, true, false, true, false, false, QKV_ACT_GELU},
        {1, 3, 16, 1, {2, 0}, true, false, false, false, true, QKV_ACT_RELU},
    };
    const int B = 300, V = 24;
    int T = cases[_i].seq_len, n = cases[_i].n;
    const int32_t *at = cases[_i].at;
    qkv_model_config c = {.vocab = V, .seq_len = T, .d_model = 16, .heads = 2,
                          .layers = cases[_i].layers, .residual = cases[_i].residual,
                          .causal = cases[_i].causal, .init_scale = 0.7, .mlp = cases[_i].mlp,
                          .act = cases[_i].act,
                          .dtype = cases[_i].f64 ? QKV_F64 : QKV_F32,
                          .norm = cases[_i].norm ? QKV_NORM_LAYERNORM : QKV_NORM_NONE};
    qkv_model m;
    ck_assert_int_eq(qkv_model_init(&m, &c, 11), QKV_OK);
    int32_t *tokens = malloc(sizeof *tokens * B * T), *targets = malloc(sizeof *targets * B * T);
    int32_t *picked = malloc(sizeof *picked * B * n), *lengths = malloc(sizeof *lengths * B);
    qkv_rng rng = qkv_rng_seed(3);
    for (int b = 0; b < B; b++) {
        lengths[b] = T - (int)qkv_rng_below(&rng, 2); /* the last position padded or not */
        for (int i = 0; i < T; i++) {
            tokens[b * T + i] = (int32_t)qkv_rng_below(&rng, V);
            targets[b * T + i] = -1;
        }
        for (int p = 0; p < n; p++)
            targets[b * T + at[p]] = picked[b * n + p] = (int32_t)qkv_rng_below(&rng, V);
    }
    const int32_t *len = cases[_i].padded ? lengths : NULL;
    size_t es = qkv_dtype_size(c.dtype);
    qkv_ctx *a = qkv_ctx_new(0), *b = qkv_ctx_new(0);
    /* every position */
    qkv_tensor *all = qkv_model_forward_padded(&m, a, tokens, len, B, NULL);
    qkv_tensor *loss_all = qkv_cross_entropy(
        a, all, qkv_from_array(a, QKV_I32, 2, (int64_t[]){B, T}, targets), -1);
    qkv_zero_grad(m.params);
    qkv_backward(loss_all);
    void *grads[QKV_MAX_PARAMS];
    for (int i = 0; i < m.nparams; i++) {
        size_t bytes = (size_t)m.param[i]->size * es;
        grads[i] = malloc(bytes);
        memcpy(grads[i], m.param[i]->grad, bytes);
    }
    /* the targets' positions only */
    qkv_tensor *some = qkv_model_forward_at(&m, b, tokens, len, B, n, at);
    ck_assert_int_eq(some->shape[0], B);
    ck_assert_int_eq(some->shape[1], n);
    qkv_tensor *loss_some = qkv_cross_entropy(
        b, some, qkv_from_array(b, QKV_I32, 2, (int64_t[]){B, n}, picked), -1);
    qkv_zero_grad(m.params);
    qkv_backward(loss_some);
    for (int r = 0; r < B * n; r++) {
        const char *row_all = (const char *)all->data + ((size_t)(r / n) * T + at[r % n]) * V * es;
        ck_assert_msg(!memcmp((const char *)some->data + (size_t)r * V * es, row_all, V * es),
                      "case %d: the logits of row %d differ", _i, r);
    }
    ck_assert(!memcmp(loss_all->data, loss_some->data, es));
    for (int i = 0; i < m.nparams; i++) {
        ck_assert_msg(!memcmp(grads[i], m.param[i]->grad, (size_t)m.param[i]->size * es),
                      "case %d: the gradient of %s differs", _i, m.param_name[i]);
        free(grads[i]);
    }
    free(tokens), free(targets), free(picked), free(lengths);
    qkv_ctx_free(a);
    qkv_ctx_free(b);
    qkv_model_free(&m);
}
END_TEST

/* The paper's scheme (QKV_INIT_PAPER) draws the same normals as qkv's, in the same order, at
 * its own scales: every element of an encoder-decoder with an MLP and LayerNorm is qkv's
 * times the ratio of the two standard deviations (qkv_init, qkv.h), gains 1 and biases 0
 * under both. */
START_TEST(test_init_paper_scales_qkv_draws) {
    const int V = 9, C = 8, N = 12;
    const double s = 0.7;
    qkv_model_config c = {.vocab = V, .seq_len = 6, .d_model = C, .heads = 2, .layers = 2,
                          .residual = true, .init_scale = s, .dtype = QKV_F64, .target_len = 3,
                          .mlp = N, .norm = QKV_NORM_LAYERNORM};
    qkv_model q, p;
    ck_assert_int_eq(qkv_model_init(&q, &c, 11), QKV_OK);
    c.init = QKV_INIT_PAPER;
    ck_assert_int_eq(qkv_model_init(&p, &c, 11), QKV_OK);
    ck_assert_int_eq(p.nparams, q.nparams);
    double sw = s / sqrt(C);
    for (int i = 0; i < q.nparams; i++) {
        const char *name = q.param_name[i];
        ck_assert_str_eq(p.param_name[i], name);
        double qkv_std = -1, paper_std = -1; /* -1: drawn as a constant, the same under both */
        if (strstr(name, "emb")) qkv_std = s, paper_std = sw;
        else if (!strcmp(name, "head.w")) qkv_std = sw, paper_std = s / sqrt(V);
        else if (strstr(name, ".w_out")) qkv_std = s / sqrt(N), paper_std = sw;
        else if (strstr(name, ".w_")) qkv_std = paper_std = sw;
        const qkv_tensor *a = q.param[i], *b = p.param[i];
        double largest = 0;
        for (int64_t e = 0; e < a->size; e++) {
            double x = qkv_get(a, e), y = qkv_get(b, e);
            if (qkv_std < 0) ck_assert(x == y && (x == 0 || x == 1));
            else ck_assert_msg(fabs(y - x * paper_std / qkv_std) <= 1e-15 * fabs(y),
                               "%s[%lld]: %g, qkv's %g", name, (long long)e, y, x);
            largest = fmax(largest, fabs(x));
        }
        if (qkv_std > 0) ck_assert(largest > 0);
    }
    qkv_model_free(&q);
    qkv_model_free(&p);
    c.init = (qkv_init)2;
    ck_assert_int_eq(qkv_model_config_check(&c), QKV_ERR_VALUE);
}
END_TEST

static Suite *train_suite(void) {
    /* Tagged "slow": learning (hundreds of steps per task), the thread test (a bigger
     * model) and resuming in f64 and with momentum and SGD, which the valgrind stage of
     * .ci/run skips with CK_EXCLUDE_TAGS=slow. Learning is also "long": .ci/run's runs on
     * each SIMD path, with clang and without OpenMP skip it (CK_EXCLUDE_TAGS=long) and keep
     * the thread test. */
    Suite *s = suite_create("train");
    TCase *tc = tcase_create("learn");
    tcase_set_tags(tc, "slow long");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_task_learns, 0, (int)(sizeof learn / sizeof learn[0]));
    tcase_add_loop_test(tc, test_deep_task_learns, 0,
                        (int)(sizeof learn_deep / sizeof learn_deep[0]));
    tcase_add_test(tc, test_induction_needs_two_layers);
    tcase_add_loop_test(tc, test_data_learns, 0, 2);
    suite_add_tcase(s, tc);

    tc = tcase_create("files");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_save_load_eval);
    tcase_add_loop_test(tc, test_resume_is_exact, 0, 1);
    tcase_add_test(tc, test_load_as_f64);
    suite_add_tcase(s, tc);

    /* Resuming in f64 and with the other optimizers: the same file code with other state
     * tensors, so "slow" (valgrind runs the one above: 40 s there) */
    tc = tcase_create("optimizers");
    tcase_set_tags(tc, "slow");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_resume_is_exact, 1, 5);
    suite_add_tcase(s, tc);

    tc = tcase_create("library");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_checkpoint_refuses_unknown_values);
    tcase_add_loop_test(tc, test_batch_grads_every_model, 0, 3); /* 3..5: "blocks" below */
    tcase_add_loop_test(tc, test_model_load, 0, 4);
    tcase_add_test(tc, test_trainer_run_resumes_exactly);
    suite_add_tcase(s, tc);

    /* the block models' gradients against finite differences: "slow", so that valgrind, which
     * trains a block model in test_model_load above, skips them */
    tc = tcase_create("blocks");
    tcase_set_tags(tc, "slow");
    tcase_add_loop_test(tc, test_batch_grads_every_model, 3, 6);
    suite_add_tcase(s, tc);

#ifdef QKV_HAVE_OPENMP
    tc = tcase_create("threads");
    tcase_set_tags(tc, "slow threads");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_threads_bit_identical_shards);
    tcase_add_test(tc, test_threads_bit_identical_counts);
    tcase_add_test(tc, test_shard_layout_trials);
    tcase_add_test(tc, test_threads_bit_identical_data);
    tcase_add_test(tc, test_threads_bit_identical_kernels);
    tcase_add_test(tc, test_threads_bit_identical_f64);
    tcase_add_test(tc, test_threads_bit_identical_blocks);
    suite_add_tcase(s, tc);
#endif

    tc = tcase_create("shards");
    tcase_add_loop_test(tc, test_shards_match_whole_batch, 0, 3);
    suite_add_tcase(s, tc);

    tc = tcase_create("numerics");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_divergence_reports_step);
    tcase_add_test(tc, test_poisoned_state_never_saved);
    tcase_add_test(tc, test_init_rejects_bad_values);
    tcase_add_test(tc, test_config_messages_name_fields);
    suite_add_tcase(s, tc);

    tc = tcase_create("data");
    tcase_add_loop_test(tc, test_data_padding_mask, 0, 2);
    tcase_add_test(tc, test_data_save_load);
    tcase_add_test(tc, test_data_bad_files);
    suite_add_tcase(s, tc);

    tc = tcase_create("model");
    tcase_add_test(tc, test_forward_trace);
    tcase_add_test(tc, test_forward_trace_padded);
    tcase_add_loop_test(tc, test_forward_at_same_bits, 0, 6);
    tcase_add_test(tc, test_init_paper_scales_qkv_draws);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return run_suite(train_suite()); }
