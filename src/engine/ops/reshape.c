/* reshape.c - the same elements under a new shape (split or merge heads), without a copy:
 * the result shares x's data, and x's gradient when x is not a leaf. */
#include "engine/internal.h"

qkv_tensor *qkv_reshape(qkv_ctx *ctx, qkv_tensor *x, int ndim, const int64_t *shape) {
    tensor_check_float(x, "reshape", "x");
    QKV_CHECK(ndim >= 0 && ndim <= QKV_MAX_DIMS && (ndim == 0 || shape), "reshape",
              "%d dims (at most %d)", ndim, QKV_MAX_DIMS);
    int64_t size = 1;
    for (int i = 0; i < ndim; i++) {
        QKV_CHECK(shape[i] >= 1, "reshape", "dim %d has size %lld", i, (long long)shape[i]);
        size *= shape[i];
    }
    QKV_CHECK(size == x->size, "reshape", "x %s has %lld elements, the new shape %lld",
              SHAPE(x), (long long)x->size, (long long)size);
    return tensor_new_view(ctx, QKV_OP_RESHAPE, x, ndim, shape);
}

void reshape_backward(qkv_tensor *y) {
    qkv_tensor *x = y->src[0];
    if (!x->grad || x->grad == y->grad) return; /* a shared gradient already holds it */
    bool store = grad_first_write(x); /* then dx = 0 + dy (internal.h) */
    QKV_TYPED(y->dtype, {
        T *dx = x->grad;
        const T *dy = y->grad;
        for (int64_t i = 0; i < y->size; i++) /* the same element order */
            dx[i] = (store ? (T)0 : dx[i]) + dy[i];
    });
}
