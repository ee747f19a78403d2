/* mean.c - the mean of all elements, a scalar. */
#include "engine/internal.h"

qkv_tensor *qkv_mean(qkv_ctx *ctx, qkv_tensor *x) {
    tensor_check_float(x, "mean", "x");
    qkv_tensor *y = tensor_new_op(ctx, QKV_OP_MEAN, x->dtype, 0, NULL, x, NULL, NULL);
    double total = 0;
    for (int64_t i = 0; i < x->size; i++) total += qkv_get(x, i);
    qkv_set(y, 0, total / (double)x->size);
    return y;
}

void mean_backward(qkv_tensor *y) {
    qkv_tensor *x = y->src[0];
    if (!x->grad) return;
    QKV_TYPED(y->dtype, {
        T g = *(const T *)y->grad / (T)x->size, *dx = x->grad;
        for (int64_t i = 0; i < x->size; i++) dx[i] += g; /* y = Σ x / n  =>  dx += dy / n */
    });
}
