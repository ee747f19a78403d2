/* mask.c - y = x + M with M holding 0 (keep) or -inf (drop), and the mask builders. */
#include "engine/internal.h"

qkv_tensor *qkv_mask(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *mask) {
    tensor_check_float(x, "mask", "x");
    tensor_check_float(mask, "mask", "mask");
    QKV_CHECK(x->dtype == mask->dtype, "mask", "dtypes differ: x is %s, mask is %s",
              qkv_dtype_name(x->dtype), qkv_dtype_name(mask->dtype));
    int64_t ms[4];
    QKV_CHECK(tensor_broadcast_strides(x, mask, ms), "mask", "mask %s does not broadcast to x %s",
              SHAPE(mask), SHAPE(x));
    qkv_tensor *y = tensor_new_op(ctx, QKV_OP_MASK, x->dtype, x->ndim, x->shape, x, mask, NULL);
    QKV_TYPED(x->dtype, {
        T *yv = y->data;
        const T *xv = x->data, *mv = mask->data;
        FOR_STRIDED(x, ms, i, j, { yv[i] = xv[i] + mv[j]; });
    });
    return y;
}

void mask_backward(qkv_tensor *y) {
    qkv_tensor *x = y->src[0], *mask = y->src[1];
    if (!x->grad) return;
    int64_t ms[4];
    tensor_broadcast_strides(x, mask, ms);
    QKV_TYPED(y->dtype, {
        T *dx = x->grad;
        const T *dy = y->grad, *mv = mask->data;
        /* forward was: y = x + m  =>  dx += dy where m is finite; a dropped entry has none */
        FOR_STRIDED(x, ms, i, j, {
            if (isfinite(mv[j])) dx[i] += dy[i];
        });
    });
}

qkv_tensor *qkv_mask_causal(qkv_ctx *ctx, qkv_dtype dtype, int64_t nq, int64_t nk) {
    qkv_tensor *m = qkv_new(ctx, dtype, 2, (int64_t[]){nq, nk});
    tensor_check_float(m, "mask_causal", "dtype");
    for (int64_t i = 0; i < nq; i++)
        for (int64_t j = 0; j < nk; j++) qkv_set(m, i * nk + j, j <= i + (nk - nq) ? 0 : -INFINITY);
    return m;
}

qkv_tensor *qkv_mask_padding(qkv_ctx *ctx, qkv_dtype dtype, int64_t batch, int64_t nk,
                             const int32_t *lengths) {
    QKV_CHECK(lengths, "mask_padding", "lengths is NULL");
    qkv_tensor *m = qkv_new(ctx, dtype, 4, (int64_t[]){batch, 1, 1, nk});
    tensor_check_float(m, "mask_padding", "dtype");
    for (int64_t b = 0; b < batch; b++) {
        QKV_CHECK(lengths[b] >= 0 && lengths[b] <= nk, "mask_padding",
                  "lengths[%lld] = %d is outside 0..%lld", (long long)b, lengths[b], (long long)nk);
        for (int64_t j = 0; j < nk; j++) qkv_set(m, b * nk + j, j < lengths[b] ? 0 : -INFINITY);
    }
    return m;
}

qkv_tensor *qkv_mask_from_bool(qkv_ctx *ctx, qkv_dtype dtype, int ndim, const int64_t *shape,
                               const uint8_t *keep) {
    QKV_CHECK(keep, "mask_from_bool", "keep is NULL");
    qkv_tensor *m = qkv_new(ctx, dtype, ndim, shape);
    tensor_check_float(m, "mask_from_bool", "dtype");
    for (int64_t i = 0; i < m->size; i++) qkv_set(m, i, keep[i] ? 0 : -INFINITY);
    return m;
}
