/* transpose.c - swaps two dims, e.g. (B, T, H, Dk) -> (B, H, T, Dk) to split heads. */
#include "engine/internal.h"

/* Strides of x, in y's padded dim order. */
static void swapped_strides(const qkv_tensor *x, int d0, int d1, int64_t out[4]) {
    int64_t xs[4];
    tensor_shape4(x, xs);
    int64_t stride = 1;
    for (int i = 3; i >= 0; i--) {
        out[i] = stride;
        stride *= xs[i];
    }
    int pad = 4 - x->ndim;
    int64_t t = out[d0 + pad];
    out[d0 + pad] = out[d1 + pad];
    out[d1 + pad] = t;
}

qkv_tensor *qkv_transpose(qkv_ctx *ctx, qkv_tensor *x, int d0, int d1) {
    tensor_check_float(x, "transpose", "x");
    QKV_CHECK(d0 >= 0 && d0 < x->ndim && d1 >= 0 && d1 < x->ndim, "transpose",
              "dims %d and %d, but x has %d", d0, d1, x->ndim);
    int64_t shape[QKV_MAX_DIMS], xs[4];
    memcpy(shape, x->shape, sizeof shape);
    shape[d0] = x->shape[d1];
    shape[d1] = x->shape[d0];
    qkv_tensor *y = tensor_new_op(ctx, QKV_OP_TRANSPOSE, x->dtype, x->ndim, shape, x, NULL, NULL);
    y->iparam[0] = d0;
    y->iparam[1] = d1;
    swapped_strides(x, d0, d1, xs);
    QKV_TYPED(x->dtype, {
        T *yv = y->data;
        const T *xv = x->data;
        FOR_STRIDED(y, xs, i, j, { yv[i] = xv[j]; });
    });
    return y;
}

void transpose_backward(qkv_tensor *y) {
    qkv_tensor *x = y->src[0];
    if (!x->grad) return;
    int64_t xs[4];
    swapped_strides(x, (int)y->iparam[0], (int)y->iparam[1], xs);
    bool store = grad_first_write(x); /* then dx = 0 + dy (internal.h) */
    QKV_TYPED(y->dtype, {
        T *dx = x->grad;
        const T *dy = y->grad;
        /* y[i] = x[j] => dx[j] += dy[i] */
        FOR_STRIDED(y, xs, i, j, { dx[j] = (store ? (T)0 : dx[j]) + dy[i]; });
    });
}
