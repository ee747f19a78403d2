/* test_train.c - the training layer (src/train/trainer.h): each task learns in a few seconds, a model
 * round-trips through save/load/eval, a resumed run equals a straight one bit for bit, a step's
 * shards add up to the whole batch, results do not depend on the thread count, divergence is reported with its step, and the tasks generate
 * what they claim. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#endif
#include "train/trainer.h"

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

/* ---- the tasks that need depth or a separator learn with their CLI defaults, smaller ------ */
static const struct {
    const char *task;
    int seq_len, d_model, heads, layers;
    int64_t steps;
    double min_accuracy, min_mass;
} learn_deep[] = {
    /* measured with seed 1 (accuracy, mass of the task's layer): induction 1.000 0.98,
     * recall 1.000 0.99, sort 1.000 0.72 */
    {"induction", 16, 64, 2, 2, 300, 0.99, 0.9},
    {"recall", 16, 64, 2, 2, 800, 0.99, 0.9},
    {"sort", 17, 64, 1, 1, 1500, 0.99, 0.6},
};

START_TEST(test_deep_task_learns) {
    train_config c = make_config(learn_deep[_i].task, learn_deep[_i].seq_len,
                                 learn_deep[_i].d_model, learn_deep[_i].heads,
                                 learn_deep[_i].steps, QKV_ADAM, 0.005);
    c.model.layers = learn_deep[_i].layers;
    c.model.residual = learn_deep[_i].layers > 1;
    trainer t;
    ck_assert_int_eq(trainer_init(&t, &c), QKV_OK);
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
    train_config c = make_config("reverse", 8, 32, 2, 120, QKV_ADAM, 0.005);
    c.model.residual = true;
    c.model.layers = 2;
    trainer a, b;
    ck_assert_int_eq(trainer_init(&a, &c), QKV_OK);
    train_steps(&a, 100); /* stop before the end: the file must carry the step and schedule */
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
    ck_assert(ra.accuracy > 0.5); /* it did learn something: the comparison is not of noise */
    trainer_free(&a);
    trainer_free(&b);
    remove_tmpdir("model.safetensors");
}
END_TEST

/* ---- resume: N straight == N/2, save, load, N/2 more ------------------------------------ */
static const qkv_optim_kind resume_optim[] = {QKV_ADAM, QKV_MOMENTUM, QKV_SGD, QKV_ADAM, QKV_SGD};
static const qkv_dtype resume_dtype[] = {QKV_F32, QKV_F32, QKV_F32, QKV_F64, QKV_F64};

START_TEST(test_resume_is_exact) {
    const int64_t N = 80;
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
static void assert_threads_agree(train_config c, int threads) {
    trainer t1, t2;
    omp_set_num_threads(1);
    ck_assert_int_eq(trainer_init(&t1, &c), QKV_OK);
    train_steps(&t1, c.steps);
    eval_result r1 = trainer_evaluate(&t1);
    omp_set_num_threads(threads);
    ck_assert_int_eq(omp_get_max_threads(), threads);
    ck_assert_int_eq(trainer_init(&t2, &c), QKV_OK);
    train_steps(&t2, c.steps);
    eval_result r2 = trainer_evaluate(&t2);
    assert_same_state(&t1, &t2);
    ck_assert(t1.last_loss == t2.last_loss);
    assert_same_eval(r1, r2);
    trainer_free(&t1);
    trainer_free(&t2);
    omp_set_num_threads(2);
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
    assert_threads_agree(c, 2);
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
    assert_threads_agree(c, 2);
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
    ck_assert_ptr_nonnull(strstr(qkv_last_error(), "lower --lr"));
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

/* ---- tasks --------------------------------------------------------------------------------- */
static const char *const task_names[] = {"copy", "reverse", "shift", "lookup", "max"};

/* Training draws never hit the held-out split, held-out draws always do, and the split holds
 * out about one sequence in eight (drawn uniformly where the task allows it). */
START_TEST(test_heldout_never_trained) {
    qkv_task task;
    ck_assert_int_eq(qkv_task_init(&task, task_names[_i], 8, 0), QKV_OK);
    qkv_rng rng = qkv_rng_seed(7);
    int32_t x[8], y[8];
    for (int n = 0; n < 10000; n++) {
        qkv_task_sample(&task, &rng, false, x, y);
        ck_assert_msg(!qkv_task_is_heldout(&task, x), "%s: training sequence %d is held out",
                      task_names[_i], n);
    }
    for (int n = 0; n < 1000; n++) {
        qkv_task_sample(&task, &rng, true, x, y);
        ck_assert(qkv_task_is_heldout(&task, x));
    }
}
END_TEST

/* The split must depend on every bit of the tokens: with tokens below 8 a hash whose low bits
 * see only tokens mod 8 held out nothing (and sampling a held-out set never finished). */
START_TEST(test_heldout_share) {
    static const struct { int seq_len, vocab; } shapes[] = {{8, 16}, {8, 4}, {12, 2}, {6, 8}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        qkv_task task;
        ck_assert_int_eq(qkv_task_init(&task, "copy", shapes[s].seq_len, shapes[s].vocab), QKV_OK);
        qkv_rng rng = qkv_rng_seed(3);
        int32_t x[16];
        int held = 0, n = 20000;
        for (int k = 0; k < n; k++) {
            for (int i = 0; i < task.seq_len; i++)
                x[i] = (int32_t)qkv_rng_below(&rng, (uint32_t)task.vocab);
            held += qkv_task_is_heldout(&task, x);
        }
        double share = (double)held / n;
        ck_assert_msg(share > 0.11 && share < 0.14, "seq-len %d vocab %d: %.4f held out, not ~1/8",
                      task.seq_len, task.vocab, share);
    }
    /* lookup at its shortest allowed length: the held-out set can be drawn */
    qkv_task task;
    ck_assert_int_eq(qkv_task_init(&task, "lookup", 5, 0), QKV_OK);
    qkv_rng rng = qkv_rng_seed(3);
    int32_t x[5], y[5];
    for (int k = 0; k < 100; k++) qkv_task_sample(&task, &rng, true, x, y);
}
END_TEST

START_TEST(test_targets_and_ideal) {
    enum { T = 8 };
    qkv_task task;
    ck_assert_int_eq(qkv_task_init(&task, task_names[_i], T, 0), QKV_OK);
    qkv_rng rng = qkv_rng_seed(11);
    int32_t x[T], y[T];
    uint8_t ideal[T * T];
    for (int n = 0; n < 2000; n++) {
        qkv_task_sample(&task, &rng, n % 2, x, y);
        qkv_task_ideal(&task, x, ideal);
        int32_t max = x[0];
        for (int i = 0; i < T; i++) {
            ck_assert(x[i] >= 0 && x[i] < task.vocab);
            max = x[i] > max ? x[i] : max;
        }
        for (int i = 0; i < T; i++) {
            int32_t want = -1;
            switch (task.kind) {
            case QKV_TASK_COPY: want = x[i]; break;
            case QKV_TASK_REVERSE: want = x[T - 1 - i]; break;
            case QKV_TASK_SHIFT: want = i ? x[i - 1] : -1; break;
            case QKV_TASK_MAX: want = max; break;
            default: break;
            }
            if (task.kind != QKV_TASK_LOOKUP)
                ck_assert_msg(y[i] == want, "%s: target %d is %d, expected %d", task_names[_i], i,
                              y[i], want);
            for (int j = 0; j < T; j++) {
                int w = 0;
                switch (task.kind) {
                case QKV_TASK_COPY: w = j == i; break;
                case QKV_TASK_REVERSE: w = j == T - 1 - i; break;
                case QKV_TASK_SHIFT: w = i > 0 && j == i - 1; break;
                case QKV_TASK_MAX: w = x[j] == max; break;
                default: w = ideal[i * T + j]; break; /* lookup: checked below */
                }
                ck_assert_msg(ideal[i * T + j] == w, "%s: ideal[%d][%d]", task_names[_i], i, j);
            }
        }
    }
    ck_assert_int_eq(task.causal, task.kind == QKV_TASK_SHIFT);
}
END_TEST

/* induction, recall and sort against their definitions, from the tokens alone. */
static const char *const structured_tasks[] = {"induction", "recall", "sort"};

START_TEST(test_structured_targets) {
    enum { T = 17 };
    qkv_task task;
    int len = _i == 2 ? T : T - 1;
    ck_assert_int_eq(qkv_task_init(&task, structured_tasks[_i], len, 0), QKV_OK);
    ck_assert(task.causal);
    qkv_rng rng = qkv_rng_seed(5);
    int32_t x[T], y[T];
    uint8_t ideal[T * T], prev[T * T];
    /* Check marks every assertion that passes (a write to its pipe): assert only on failure */
#define EXPECT(cond) do { if (!(cond)) ck_abort_msg("%s: draw %d: %s", structured_tasks[_i], n, #cond); } while (0)
    for (int n = 0; n < 600; n++) {
        bool held = n % 3 == 0;
        qkv_task_sample(&task, &rng, held, x, y);
        EXPECT(qkv_task_is_heldout(&task, x) == held);
        qkv_task_ideal(&task, x, ideal);
        qkv_task_ideal_layer(&task, x, 0, 2, prev);
        for (int i = 0; i < len; i++) EXPECT(x[i] >= 0 && x[i] < task.vocab);
        if (task.kind == QKV_TASK_INDUCTION) {
            /* the segment: distinct tokens up to the first repeat of x[0], then repeated */
            int seg = 1;
            while (x[seg] != x[0]) seg++;
            EXPECT(seg >= len / 4 && seg <= len / 2);
            for (int i = 0; i < len; i++) {
                if (i >= seg) EXPECT((x[i]) == (x[i - seg]));
                for (int j = 0; j < i && i < seg; j++) EXPECT(x[j] != x[i]);
                EXPECT((y[i]) == (i >= seg && i < len - 1 ? x[i + 1] : -1));
                for (int j = 0; j < len; j++) {
                    /* after an earlier copy of x[i], for the rows with a target */
                    bool w = y[i] >= 0 && j >= 1 && j <= i && x[j - 1] == x[i];
                    EXPECT(ideal[i * len + j] == w);
                    EXPECT((prev[i * len + j]) == (j == i - 1));
                }
            }
        } else if (task.kind == QKV_TASK_RECALL) {
            int P = len / 3;
            for (int p = 0; p < P; p++) {
                EXPECT(x[2 * p] < task.n_keys && x[2 * p + 1] >= task.n_keys);
                for (int q = 0; q < p; q++) EXPECT(x[2 * q] != x[2 * p]);
            }
            for (int i = 0; i < len; i++) {
                int32_t want = -1;
                int at = -1;
                for (int p = 0; p < P && i >= 2 * P; p++)
                    if (x[2 * p] == x[i]) want = x[at = 2 * p + 1];
                EXPECT(i < 2 * P || want >= 0); /* every query names a key of the pairs */
                EXPECT((y[i]) == (want));
                for (int j = 0; j < len; j++) EXPECT((ideal[i * len + j]) == (j == at));
            }
        } else {
            int k = (len - 1) / 2;
            EXPECT((x[k]) == (task.vocab - 1));
            for (int i = 0; i < k; i++) {
                int rank = 0;
                for (int j = 0; j < k; j++) {
                    rank += x[j] < x[i];
                    EXPECT(j == i || x[j] != x[i]);
                }
                EXPECT((x[k + 1 + rank]) == (x[i])); /* the output is the input sorted */
            }
            for (int i = 0; i < len; i++) {
                EXPECT((y[i]) == (i >= k && i < len - 1 ? x[i + 1] : -1));
                for (int j = 0; j < len; j++)
                    EXPECT((ideal[i * len + j]) == (y[i] >= 0 && j < k && x[j] == y[i]));
            }
        }
    }
#undef EXPECT
}
END_TEST

START_TEST(test_lookup_layout) {
    enum { T = 8 };
    qkv_task task;
    ck_assert_int_eq(qkv_task_init(&task, "lookup", T, 0), QKV_OK);
    ck_assert_int_eq(task.n_keys, T - 1);
    ck_assert_int_eq(task.n_values, 4);
    ck_assert_int_eq(task.vocab, qkv_task_default_vocab(QKV_TASK_LOOKUP, T));
    ck_assert_int_eq(task.vocab, 35);
    int K = task.n_keys, V = task.n_values;
    qkv_rng rng = qkv_rng_seed(5);
    int32_t x[T], y[T];
    uint8_t ideal[T * T];
    for (int n = 0; n < 2000; n++) {
        qkv_task_sample(&task, &rng, n % 3 == 0, x, y);
        qkv_task_ideal(&task, x, ideal);
        /* pairs: every key exactly once, token = key*V + value */
        int seen[T] = {0};
        for (int i = 0; i < T - 1; i++) {
            ck_assert(x[i] >= 0 && x[i] < K * V);
            seen[x[i] / V]++;
        }
        for (int k = 0; k < K; k++) ck_assert_int_eq(seen[k], 1);
        /* the query: token = K*V + key */
        ck_assert(x[T - 1] >= K * V && x[T - 1] < K * V + K);
        int key = x[T - 1] - K * V, pair = -1;
        for (int i = 0; i < T - 1; i++)
            if (x[i] / V == key) pair = i;
        ck_assert_int_ge(pair, 0);
        /* only the last position has a target: the value paired with the queried key */
        for (int i = 0; i < T - 1; i++) ck_assert_int_eq(y[i], -1);
        ck_assert_int_eq(y[T - 1], x[pair] % V);
        /* the ideal pattern: the query attends to that pair, nothing else anywhere */
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++)
                ck_assert_int_eq(ideal[i * T + j], i == T - 1 && j == pair);
    }
    char label[32];
    qkv_task_token_label(&task, 2 * V + 3, label, sizeof label);
    ck_assert_str_eq(label, "k2:v3");
    qkv_task_token_label(&task, K * V + 4, label, sizeof label);
    ck_assert_str_eq(label, "?k4");
}
END_TEST

/* qkv_model_forward_trace gives the same logits, bit for bit, as qkv_model_forward with the
 * composed attention, on a 2-layer, 2-head causal model; its parts fit together (A is the
 * softmax of `masked`, which is `scaled` with -inf after the query), and after a backward pass
 * each part holds a gradient. */
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

START_TEST(test_task_init_rejects) {
    qkv_task task;
    ck_assert_int_eq(qkv_task_init(&task, "bubble", 8, 0), QKV_ERR_VALUE);
    ck_assert_ptr_nonnull(strstr(qkv_last_error(), "unknown task 'bubble'"));
    /* lookup holds at most 32 pairs + the query */
    ck_assert_int_eq(qkv_task_init(&task, "lookup", 33, 0), QKV_OK);
    ck_assert_int_eq(qkv_task_init(&task, "lookup", 34, 0), QKV_ERR_VALUE);
    ck_assert_ptr_nonnull(strstr(qkv_last_error(), "too large for lookup"));
    /* lookup needs 2 values per key: 7 keys * 2 + 7 query tokens = 21 */
    ck_assert_int_eq(qkv_task_init(&task, "lookup", 8, 21), QKV_OK);
    ck_assert_int_eq(qkv_task_init(&task, "lookup", 8, 20), QKV_ERR_VALUE);
    ck_assert_ptr_nonnull(strstr(qkv_last_error(), "too small"));
    /* lookup with too few distinct sequences for a held-out split */
    ck_assert_int_eq(qkv_task_init(&task, "lookup", 4, 0), QKV_ERR_VALUE);
    ck_assert_ptr_nonnull(strstr(qkv_last_error(), "too small"));
    /* the others need 2^12 distinct sequences: vocab 2 at length 8 has 256 */
    ck_assert_int_eq(qkv_task_init(&task, "copy", 8, 2), QKV_ERR_VALUE);
    ck_assert_ptr_nonnull(strstr(qkv_last_error(), "too small"));
    ck_assert_int_eq(qkv_task_init(&task, "max", 12, 2), QKV_OK);
    ck_assert_int_eq(qkv_task_init(&task, "copy", 1, 0), QKV_ERR_VALUE);
    ck_assert_int_eq(qkv_task_init(&task, "copy", 5000, 0), QKV_ERR_VALUE);
}
END_TEST

static Suite *train_suite(void) {
    /* Tagged "slow": learning (hundreds of steps per task) and the thread test (a bigger
     * model), which the valgrind stage of .ci/run skips with CK_EXCLUDE_TAGS=slow. Learning is
     * also "long": .ci/run's runs on each SIMD path, with clang and without OpenMP skip it
     * (CK_EXCLUDE_TAGS=long) and keep the thread test. */
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
    tcase_add_loop_test(tc, test_resume_is_exact, 0, 5);
    tcase_add_test(tc, test_load_as_f64);
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
    suite_add_tcase(s, tc);

    tc = tcase_create("tasks");
    tcase_add_loop_test(tc, test_heldout_never_trained, 0, 5);
    tcase_add_test(tc, test_heldout_share);
    tcase_add_loop_test(tc, test_targets_and_ideal, 0, 5);
    tcase_add_test(tc, test_lookup_layout);
    tcase_add_loop_test(tc, test_structured_targets, 0, 3);
    tcase_add_loop_test(tc, test_data_padding_mask, 0, 2);
    tcase_add_test(tc, test_data_save_load);
    tcase_add_test(tc, test_data_bad_files);
    tcase_add_test(tc, test_task_init_rejects);
    tcase_add_test(tc, test_forward_trace);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(train_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
