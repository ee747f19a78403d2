/* cross_entropy.c - mean of -log softmax(logits)[target], with a fused, stable log-softmax. */
#include "../internal.h"

/* saved: per row, log Σ exp(logits) (the log-sum-exp), kept for the backward pass.
 * Sums are in double; each exp is taken in the logits' own precision (expf for f32: as
 * accurate as the logits, and several times faster than exp). */
#define EXP_T(T, x) (sizeof(T) == sizeof(float) ? (double)expf((float)(x)) : exp((double)(x)))

qkv_tensor *qkv_cross_entropy(qkv_ctx *ctx, qkv_tensor *logits, qkv_tensor *targets,
                              int32_t ignore_index) {
    tensor_check_float(logits, "cross_entropy", "logits");
    QKV_CHECK(targets && targets->dtype == QKV_I32, "cross_entropy",
              "targets must be an i32 tensor");
    char sl[64], st[64];
    qkv_shape_str(logits, sl, sizeof sl);
    qkv_shape_str(targets, st, sizeof st);
    QKV_CHECK(logits->ndim >= 1 && targets->ndim == logits->ndim - 1, "cross_entropy",
              "targets %s must be logits %s without its last dim", st, sl);
    for (int i = 0; i < targets->ndim; i++)
        QKV_CHECK(targets->shape[i] == logits->shape[i], "cross_entropy",
                  "targets %s must be logits %s without its last dim", st, sl);
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
    double total = 0;
    int64_t count = 0;
    QKV_TYPED(logits->dtype, {
        const T *x = logits->data;
        for (int64_t r = 0; r < rows; r++) {
            if (tg[r] == ignore_index) continue;
            const T *xr = x + r * V;
            double max = xr[0], sum = 0;
            for (int64_t j = 1; j < V; j++) max = xr[j] > max ? xr[j] : max;
            for (int64_t j = 0; j < V; j++) sum += EXP_T(T, (double)xr[j] - max);
            lse[r] = max + log(sum);
            total += lse[r] - (double)xr[tg[r]]; /* -log p[target] */
            count++;
        }
    });
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
    QKV_TYPED(logits->dtype, {
        const T *x = logits->data;
        T *dx = logits->grad;
        double g = qkv_grad_get(loss, 0) / (double)count;
        /* forward was: L = mean_r (lse_r - x[r, t_r])  =>  dx[r, j] += g·(softmax_j - [j = t_r]) */
        for (int64_t r = 0; r < rows; r++) {
            if (tg[r] == ignore) continue;
            for (int64_t j = 0; j < V; j++) {
                double p = EXP_T(T, (double)x[r * V + j] - lse[r]);
                dx[r * V + j] += (T)(g * (p - (j == tg[r])));
            }
        }
    });
}
