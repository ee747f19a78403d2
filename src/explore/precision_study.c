/* precision_study.c - `qkv study precision`'s numbers (precision_study.h says what they
 * show). */
#include "explore/precision_study.h"
#include "engine/engine.h" /* memory_limit */
#include "train/checkpoint.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every parameter's gradient of the batch's mean cross-entropy, concatenated as doubles in
 * parameter order; the attention fused (in the form qkv_set_attention_form set) or composed. */
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
static void measure_saturation(precision_study *ps, qkv_ctx *ctx, const int32_t *tokens,
                               const int32_t *targets) {
    trainer *t = &ps->wide;
    const qkv_model_config *c = &t->model.cfg;
    int B = ps->batch, T = c->seq_len, H = c->heads;
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
    ps->rows = rows, ps->above = above;
    ps->min_e = min_e, ps->max_e = 1 - worst, ps->mean_e = rows ? sum_e / rows : 0;
}

qkv_status precision_study_run(precision_study *ps, const char *path, long steps, int batch,
                               uint64_t seed, int form) {
    memset(ps, 0, sizeof *ps);
    int forms = 0;
    while (qkv_attention_forms()[forms]) forms++;
    if (forms != PRECISION_FORMS)
        return qkv_fail(QKV_ERR_VALUE, "study precision knows %d forms, the library %d",
                        PRECISION_FORMS, forms);
    ps->batch = batch;
    trainer *t = &ps->t;
    qkv_status s;
    if (path) {
        if ((s = trainer_load(t, path)) != QKV_OK) return s;
        if (t->model.cfg.dtype != QKV_F32)
            return qkv_fail(QKV_ERR_FORMAT, "study: %s is an f64 model; the study compares an f32 "
                            "model's gradients with their f64 truth", path);
    } else {
        train_config c = {.optim = QKV_ADAM, .lr = 0.005, .clip = 1, .cosine = true,
                          .batch = 32, .steps = steps, .warmup = steps / 20, .seed = 1};
        if ((s = qkv_task_init(&c.task, "lookup", 8, 0)) == QKV_OK) {
            c.model = (qkv_model_config){.vocab = c.task.vocab, .seq_len = 8, .d_model = 64,
                                         .heads = 1, .layers = 1, .init_scale = 0.5};
            if ((s = trainer_init_for(t, &c, "training the default lookup model")) != QKV_OK)
                return qkv_fail(s, "study: %s", qkv_last_error());
        }
        while (s == QKV_OK && t->optim.step < c.steps) s = trainer_step(t);
        if (s != QKV_OK) return s;
    }
    const qkv_model_config *c = &t->model.cfg;
    int B = batch, T = c->seq_len;
    const char *what;
    double need = 2 * qkv_model_step_bytes(c, B), have = memory_limit(&what);
    if (need > have / 2)
        return qkv_fail(QKV_ERR_NOMEM, "study: a batch of %d needs about %.1f %s, more than half "
                        "of %s (%.1f %s): lower --batch", B, memory_in(need, have),
                        memory_unit(have), what, memory_in(have, have), memory_unit(have));
    /* the same model in f64: its f32 weights widened exactly */
    if (path)
        s = trainer_load_as(&ps->wide, path, QKV_F64);
    else {
        train_config wc = t->cfg;
        wc.model.dtype = QKV_F64;
        if ((s = trainer_init_for(&ps->wide, &wc, "widening the model to f64")) != QKV_OK)
            return qkv_fail(s, "study: %s", qkv_last_error());
        for (int i = 0; s == QKV_OK && i < t->model.nparams; i++)
            for (int64_t j = 0; j < t->model.param[i]->size; j++)
                qkv_set(ps->wide.model.param[i], j, qkv_get(t->model.param[i], j));
    }
    if (s != QKV_OK) return s;
    int n = t->model.nparams;
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += t->model.param[i]->size;
    int32_t *tokens = malloc((size_t)B * T * sizeof *tokens), *targets = malloc((size_t)B * T * sizeof *targets);
    double *truth = malloc((size_t)total * sizeof *truth), *g = malloc((size_t)total * sizeof *g);
    /* reserved at the f64 step's estimate (the larger model's, checked above as twice the
     * f32 one's): no batch grows it */
    double f64_step = qkv_model_step_bytes(&ps->wide.model.cfg, B);
    qkv_ctx *ctx = qkv_ctx_new((size_t)(f64_step > need ? f64_step : need) + (1 << 20));
    ps->norm = calloc((size_t)n, sizeof *ps->norm);
    ps->err = calloc((size_t)n * PRECISION_COLS, sizeof *ps->err);
    if (!tokens || !targets || !truth || !g || !ctx || !ps->norm || !ps->err) {
        free(tokens), free(targets), free(truth), free(g), qkv_ctx_free(ctx);
        return qkv_fail(QKV_ERR_NOMEM, "study: out of memory");
    }
    qkv_rng rng = qkv_rng_seed(seed); /* the batch of `qkv grads --seed` */
    for (int b = 0; b < B; b++)
        qkv_task_sample(&t->cfg.task, &rng, false, tokens + b * T, targets + b * T);
    measure_saturation(ps, ctx, tokens, targets);

    const char *saved = qkv_attention_form();
    batch_grads(&ps->wide, ctx, tokens, targets, B, false, truth); /* f64, the default form */
    for (int col = 0; col < PRECISION_COLS; col++) {
        ps->shown[col] = col == 0 || form < 0 || form == col - 1;
        if (!ps->shown[col]) continue;
        if (col > 0) qkv_set_attention_form(qkv_attention_forms()[col - 1]);
        batch_grads(t, ctx, tokens, targets, B, col == 0, g);
        int64_t at = 0;
        for (int i = 0; i < n; i++) {
            int64_t size = t->model.param[i]->size;
            ps->err[i * PRECISION_COLS + col] = rel_err(g + at, truth + at, size);
            at += t->model.param[i]->size;
        }
    }
    qkv_set_attention_form(saved);
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        double norm = 0;
        for (int64_t j = 0; j < t->model.param[i]->size; j++) norm += truth[at + j] * truth[at + j];
        at += t->model.param[i]->size;
        ps->norm[i] = sqrt(norm);
    }
    free(tokens), free(targets), free(truth), free(g);
    qkv_ctx_free(ctx);
    return QKV_OK;
}

void precision_study_free(precision_study *ps) {
    free(ps->norm);
    free(ps->err);
    if (ps->t.eval_ctx) trainer_free(&ps->t);
    if (ps->wide.eval_ctx) trainer_free(&ps->wide);
    memset(ps, 0, sizeof *ps);
}
