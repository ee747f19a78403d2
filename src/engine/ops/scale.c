/* scale.c - y = s·x. */
#include "engine/internal.h"

qkv_tensor *qkv_scale(qkv_ctx *ctx, qkv_tensor *x, double s) {
    tensor_check_float(x, "scale", "x");
    qkv_tensor *y = tensor_new_op(ctx, QKV_OP_SCALE, x->dtype, x->ndim, x->shape, x, NULL, NULL);
    y->fparam[0] = s;
    QKV_TYPED(x->dtype, {
        T *yv = y->data;
        const T *xv = x->data;
        for (int64_t i = 0; i < y->size; i++) yv[i] = (T)s * xv[i];
    });
    return y;
}

void scale_backward(qkv_tensor *y) {
    qkv_tensor *x = y->src[0];
    if (!x->grad) return;
    QKV_TYPED(y->dtype, {
        T s = (T)y->fparam[0], *dx = x->grad;
        const T *dy = y->grad;
        for (int64_t i = 0; i < y->size; i++) dx[i] += s * dy[i]; /* y = s·x => dx += s·dy */
    });
}
