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

/* Visits y in runs of its last dim, n elements from y[i] on, whose x elements lie from x[j] on
 * when xs[3] == 1: the last dim stays last, as in split and merge heads, so each run is one
 * contiguous copy instead of n strided ones. */
#define FOR_RUNS(y, xs, i, j, n, ...)                                                     \
    do {                                                                                  \
        int64_t s4_[4];                                                                   \
        tensor_shape4((y), s4_);                                                          \
        int64_t n = s4_[3], i = 0;                                                        \
        for (int64_t i0 = 0; i0 < s4_[0]; i0++)                                           \
            for (int64_t i1 = 0; i1 < s4_[1]; i1++)                                       \
                for (int64_t i2 = 0; i2 < s4_[2]; i2++, i += n) {                         \
                    int64_t j = i0 * (xs)[0] + i1 * (xs)[1] + i2 * (xs)[2];               \
                    __VA_ARGS__                                                           \
                }                                                                         \
    } while (0)

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
        if (xs[3] == 1)
            FOR_RUNS(y, xs, i, j, n, { memcpy(yv + i, xv + j, (size_t)n * sizeof(T)); });
        else
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
        T *restrict dx = x->grad; /* restrict: a run's loop is vectorized */
        const T *restrict dy = y->grad;
        /* y[i] = x[j] => dx[j] += dy[i] */
        if (xs[3] == 1 && store)
            FOR_RUNS(y, xs, i, j, n, {
                for (int64_t e = 0; e < n; e++) dx[j + e] = (T)0 + dy[i + e];
            });
        else if (xs[3] == 1)
            FOR_RUNS(y, xs, i, j, n, {
                for (int64_t e = 0; e < n; e++) dx[j + e] += dy[i + e];
            });
        else
            FOR_STRIDED(y, xs, i, j, { dx[j] = (store ? (T)0 : dx[j]) + dy[i]; });
    });
}
