/* reshape.c - the same elements under a new shape (split or merge heads). */
#include "../internal.h"

qkv_tensor *qkv_reshape(qkv_ctx *ctx, qkv_tensor *x, int ndim, const int64_t *shape) {
    tensor_check_float(x, "reshape", "x");
    int64_t size = 1;
    for (int i = 0; i < ndim; i++) size *= shape[i];
    char sx[64];
    QKV_CHECK(size == x->size, "reshape", "x %s has %lld elements, the new shape %lld",
              qkv_shape_str(x, sx, sizeof sx), (long long)x->size, (long long)size);
    qkv_tensor *y = tensor_new_op(ctx, QKV_OP_RESHAPE, x->dtype, ndim, shape, x, NULL, NULL);
    memcpy(y->data, x->data, (size_t)x->size * qkv_dtype_size(x->dtype));
    return y;
}

void reshape_backward(qkv_tensor *y) {
    qkv_tensor *x = y->src[0];
    if (!x->grad) return;
    QKV_TYPED(y->dtype, {
        T *dx = x->grad;
        const T *dy = y->grad;
        for (int64_t i = 0; i < y->size; i++) dx[i] += dy[i]; /* same element order */
    });
}
