/* sum.c - the sum of all elements, a scalar. */
#include "engine/internal.h"

qkv_tensor *qkv_sum(qkv_ctx *ctx, qkv_tensor *x) {
    tensor_check_float(x, "sum", "x");
    qkv_tensor *y = tensor_new_op(ctx, QKV_OP_SUM, x->dtype, 0, NULL, x, NULL, NULL);
    double total = 0;
    for (int64_t i = 0; i < x->size; i++) total += qkv_get(x, i);
    qkv_set(y, 0, total);
    return y;
}

void sum_backward(qkv_tensor *y) {
    qkv_tensor *x = y->src[0];
    if (!x->grad) return;
    QKV_TYPED(y->dtype, {
        T g = *(const T *)y->grad, *dx = x->grad;
        for (int64_t i = 0; i < x->size; i++) dx[i] += g; /* y = Σ x  =>  dx += dy */
    });
}
