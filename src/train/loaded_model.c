/* loaded_model.c - a saved model loaded for analysis, and the one memory check of its batches. */
#include "train/loaded_model.h"
#include "train/checkpoint.h"

#include "engine/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

qkv_status loaded_model_load(loaded_model *m, const char *path, int dtype) {
    memset(m, 0, sizeof *m);
    trainer t;
    qkv_status s = trainer_load_as(&t, path, dtype);
    if (s == QKV_OK) loaded_model_take(m, &t);
    return s;
}

void loaded_model_take(loaded_model *m, trainer *t) {
    *m = (loaded_model){.model = t->model, .cfg = t->cfg, .data = t->data,
                        .target_len = t->target_len, .n_held = t->n_held,
                        .held_tokens = t->held_tokens, .held_targets = t->held_targets,
                        .held_lengths = t->held_lengths, .step = t->optim.step,
                        .ctx = t->eval_ctx, .ideal = t->ideal};
    /* the parameters' arena also holds the optimizer's moments (qkv_optim_init): they stay
     * with it, unused, as when the trainer held them */
    t->model.params = NULL, t->data = NULL, t->held_tokens = t->held_targets = NULL;
    t->held_lengths = NULL, t->eval_ctx = NULL, t->ideal = NULL;
    trainer_free(t);
}

void loaded_model_free(loaded_model *m) {
    qkv_model_free(&m->model);
    qkv_ctx_free(m->ctx);
    free(m->held_tokens);
    free(m->held_targets);
    free(m->held_lengths);
    free(m->ideal);
    if (m->data) dataset_free(m->data);
    free(m->data);
    memset(m, 0, sizeof *m);
}

/* QKV_ERR_NOMEM for an analysis: `what_for` needs `need` bytes, more than half the limit
 * (`over`), or a malloc of it failed. `command` prefixes the line ("ablate: "), or NULL. */
static qkv_status analysis_nomem(const char *command, const char *what_for, double need,
                                 bool over) {
    const char *what;
    double have = memory_limit(&what);
    const char *prefix = command ? command : "", *colon = command ? ": " : "";
    if (over)
        return qkv_fail(QKV_ERR_NOMEM, "%s%s%s needs about %.1f MiB, more than half of %s "
                        "(%.1f MiB)", prefix, colon, what_for, need / (1 << 20), what,
                        have / (1 << 20));
    return qkv_fail(QKV_ERR_NOMEM, "%s%sout of memory for %s (about %.1f MiB, under %s of "
                    "%.1f MiB)", prefix, colon, what_for, need / (1 << 20), what,
                    have / (1 << 20));
}

qkv_ctx *loaded_model_arena(double bytes, const char *command) {
    bytes += 1 << 20; /* the arena's own slack, as training's step arenas */
    bool over = bytes > memory_limit(NULL) / 2;
    qkv_ctx *ctx = over ? NULL : qkv_ctx_new((size_t)bytes);
    if (!ctx) analysis_nomem(command, "its working memory", bytes, over);
    return ctx;
}

qkv_status loaded_model_reserve(loaded_model *m, int n, const char *command) {
    int B = n < 1 ? 1 : n < ANALYSIS_BATCH ? n : ANALYSIS_BATCH;
    /* a whole step's estimate (forward and backward) bounds a forward with its probes and
     * the edits' copies, and with the parameters (already allocated) is checked as training
     * checks a step */
    double step = qkv_model_step_bytes(&m->model.cfg, B) + (1 << 20);
    double need = step + qkv_model_param_bytes(&m->model.cfg);
    char what_for[96];
    snprintf(what_for, sizeof what_for, "scoring %d sequence%s at a time", B, B == 1 ? "" : "s");
    if (need > memory_limit(NULL) / 2) return analysis_nomem(command, what_for, need, true);
    qkv_ctx *ctx = qkv_ctx_new((size_t)step);
    if (!ctx) return analysis_nomem(command, what_for, need, false);
    qkv_ctx_set_no_grad(ctx, qkv_ctx_no_grad(m->ctx));
    qkv_ctx_free(m->ctx);
    m->ctx = ctx;
    return QKV_OK;
}

example_set loaded_model_heldout(const loaded_model *m) {
    return (example_set){m->n_held, m->held_tokens, m->held_targets, m->held_lengths};
}

eval_result loaded_model_evaluate(loaded_model *m, example_set set) {
    return train_evaluate_set(&m->model, &m->cfg.task, m->target_len, set, m->ctx, m->ideal);
}

train_hint_kind loaded_model_hint(const loaded_model *m, const eval_result *r, char *buf,
                                  size_t len) {
    return train_hint_of(&m->cfg, &m->model.cfg, m->step, loaded_model_heldout(m), r, NULL, buf,
                         len);
}

void loaded_model_token_label(const loaded_model *m, int32_t token, char *buf, size_t len) {
    train_token_label(&m->cfg.task, m->data, token, buf, len);
}

const char *loaded_model_token_text(const loaded_model *m, int32_t token, char *buf,
                                    size_t len) {
    return train_token_text(&m->cfg.task, m->data, token, buf, len);
}

void loaded_model_class_label(const loaded_model *m, int32_t c, char *buf, size_t len) {
    train_class_label(&m->cfg.task, m->data, c, buf, len);
}

const char *loaded_model_class_text(const loaded_model *m, int32_t c, char *buf, size_t len) {
    return train_class_text(&m->cfg.task, m->data, c, buf, len);
}
