/* grads.c - one batch's gradients, and the file that holds them. */
#include "train/grads.h"

#include "engine/engine.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

qkv_status trainer_batch_grads(trainer *t, uint64_t seed, int batch, batch_grads *g) {
    memset(g, 0, sizeof *g);
    qkv_model *m = &t->model;
    int T = m->cfg.seq_len, To = t->target_len, B = batch;
    const char *what;
    double need = qkv_model_step_bytes(&m->cfg, B), have = memory_limit(&what);
    if (need > have / 2)
        return qkv_fail(QKV_ERR_NOMEM, "grads: a batch of %d needs about %.1f %s, more than "
                        "half of %s (%.1f %s): lower %s", B, memory_in(need, have),
                        memory_unit(have), what, memory_in(have, have), memory_unit(have),
                        field_name("batch"));
    /* reserved at the estimate it was checked by: the step never grows it */
    g->ctx = qkv_ctx_new((size_t)need + (1 << 20));
    if (!g->ctx) return qkv_fail(QKV_ERR_NOMEM, "out of memory");
    g->batch = B;
    g->tokens = qkv_zeros(g->ctx, QKV_I32, 2, (int64_t[]){B, T});
    g->targets = qkv_zeros(g->ctx, QKV_I32, 2, (int64_t[]){B, To});
    if (t->data) g->lengths = qkv_zeros(g->ctx, QKV_I32, 1, (int64_t[]){B});
    qkv_rng rng = qkv_rng_seed(seed);
    trainer_sample(t, &rng, B, g->tokens->data, g->targets->data,
                   g->lengths ? g->lengths->data : NULL);
    g->logits = qkv_model_forward_padded(m, g->ctx, g->tokens->data,
                                         g->lengths ? g->lengths->data : NULL, B, NULL);
    g->loss = qkv_cross_entropy(g->ctx, g->logits, g->targets, -1);
    qkv_zero_grad(m->params);
    qkv_backward(g->loss);
    for (int i = 0; i < m->nparams; i++) {
        const qkv_tensor *p = m->param[i];
        /* the gradient as a tensor of its own, of the parameter's shape */
        g->grad[i] = qkv_from_array(g->ctx, p->dtype, p->ndim, p->shape, p->grad);
    }
    return QKV_OK;
}

void batch_grads_free(batch_grads *g) {
    qkv_ctx_free(g->ctx);
    memset(g, 0, sizeof *g);
}

qkv_status batch_grads_save(const batch_grads *g, const trainer *t, uint64_t seed,
                            const char *model_path, const char *path) {
    const qkv_model *m = &t->model;
    const char *names[5 + QKV_MAX_PARAMS];
    const qkv_tensor *tensors[5 + QKV_MAX_PARAMS];
    char grad_names[QKV_MAX_PARAMS][48];
    int n = 0;
    names[n] = "tokens", tensors[n++] = g->tokens;
    names[n] = "targets", tensors[n++] = g->targets;
    if (g->lengths) names[n] = "lengths", tensors[n++] = g->lengths;
    names[n] = "loss", tensors[n++] = g->loss;
    names[n] = "logits", tensors[n++] = g->logits;
    for (int i = 0; i < m->nparams; i++) {
        snprintf(grad_names[i], sizeof grad_names[i], "grad.%s", m->param_name[i]);
        names[n] = grad_names[i], tensors[n++] = g->grad[i];
    }
    char seed_s[24], batch_s[16];
    snprintf(seed_s, sizeof seed_s, "%" PRIu64, seed);
    snprintf(batch_s, sizeof batch_s, "%d", g->batch);
    const char *meta[] = {"format", "qkv-grads", "task", qkv_task_name(t->cfg.task.kind),
                          "seed", seed_s, "batch", batch_s, "model", model_path,
                          "loss_definition",
                          "mean cross-entropy over positions whose target is not -1",
                          /* the same text under its name of before 0.2, kept through 0.2 */
                          "loss", "mean cross-entropy over positions whose target is not -1",
                          "dtype", qkv_dtype_name(m->cfg.dtype)};
    return qkv_st_save(path, n, names, tensors, (int)(sizeof meta / sizeof meta[0] / 2), meta);
}
