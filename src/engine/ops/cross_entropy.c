/* cross_entropy.c - mean of -log softmax(logits)[target], with a fused, stable log-softmax. */
#include "engine/internal.h"
#include "kernels/kernels.h"

/* saved: per row, log Σ exp(logits) (the log-sum-exp), kept for the backward pass. The row
 * loops are in src/kernels/cross_entropy_kernel.c. */

qkv_tensor *qkv_cross_entropy(qkv_ctx *ctx, qkv_tensor *logits, qkv_tensor *targets,
                              int32_t ignore_index) {
    tensor_check_float(logits, "cross_entropy", "logits");
    QKV_CHECK(targets && targets->dtype == QKV_I32, "cross_entropy",
              "targets must be an i32 tensor");
    QKV_CHECK(logits->ndim >= 1 && targets->ndim == logits->ndim - 1, "cross_entropy",
              "targets %s must be logits %s without its last dim",
                  SHAPE(targets), SHAPE(logits));
    for (int i = 0; i < targets->ndim; i++)
        QKV_CHECK(targets->shape[i] == logits->shape[i], "cross_entropy",
                  "targets %s must be logits %s without its last dim",
                  SHAPE(targets), SHAPE(logits));
    int64_t V = logits->shape[logits->ndim - 1], rows = targets->size;
    const int32_t *tg = targets->data;
    for (int64_t r = 0; r < rows; r++)
        QKV_CHECK(tg[r] == ignore_index || (tg[r] >= 0 && tg[r] < V), "cross_entropy",
                  "target %d is outside 0..%lld", tg[r], (long long)V - 1);
    qkv_tensor *loss =
        tensor_new_op(ctx, QKV_OP_CROSS_ENTROPY, logits->dtype, 0, NULL, logits, targets, NULL);
    loss->iparam[0] = ignore_index;
    double *lse = qkv_ctx_alloc(ctx, (size_t)rows * sizeof *lse);
    loss->saved = lse;
    int64_t count;
    double total = logits->dtype == QKV_F32
                       ? cross_entropy_forward_f32(logits->data, tg, ignore_index, rows, V, lse, &count)
                       : cross_entropy_forward_f64(logits->data, tg, ignore_index, rows, V, lse, &count);
    loss->iparam[1] = count;
    qkv_set(loss, 0, count ? total / (double)count : 0.0);
    return loss;
}

void cross_entropy_backward(qkv_tensor *loss) {
    qkv_tensor *logits = loss->src[0], *targets = loss->src[1];
    int64_t count = loss->iparam[1];
    if (!logits->grad || count == 0) return;
    int32_t ignore = (int32_t)loss->iparam[0];
    int64_t V = logits->shape[logits->ndim - 1], rows = targets->size;
    const int32_t *tg = targets->data;
    const double *lse = loss->saved;
    double g = qkv_grad_get(loss, 0) / (double)count;
    /* forward was: L = mean_r (lse_r - x[r, t_r])  =>  dx[r, j] += g·(softmax_j - [j = t_r]) */
    if (logits->dtype == QKV_F32)
        cross_entropy_backward_f32(logits->grad, logits->data, tg, ignore, rows, V, lse, g);
    else
        cross_entropy_backward_f64(logits->grad, logits->data, tg, ignore, rows, V, lse, g);
}
