/* attention.c - softmax(scale·Q·Kᵀ + M)·V: the composed form, and the choice between it and
 * the fused op (ops/attention_fused.c). */
#include "engine/internal.h"

qkv_tensor *qkv_attention(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k, qkv_tensor *v,
                          qkv_tensor *mask, double scale, qkv_tensor **weights) {
    if (weights) return qkv_attention_unfused(ctx, q, k, v, mask, scale, weights);
    return qkv_attention_fused(ctx, q, k, v, mask, scale);
}

qkv_tensor *qkv_attention_unfused(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k, qkv_tensor *v,
                          qkv_tensor *mask, double scale, qkv_tensor **weights) {
    tensor_check_float(q, "attention", "q");
    tensor_check_float(k, "attention", "k");
    tensor_check_float(v, "attention", "v");
    QKV_CHECK(k->ndim == v->ndim && k->ndim >= 2 && k->shape[k->ndim - 2] == v->shape[v->ndim - 2],
              "attention", "k %s and v %s must hold the same number of keys", SHAPE(k), SHAPE(v));
    QKV_CHECK(q->ndim >= 2, "attention", "q %s must be (..., Nq, Dk)", SHAPE(q));
    QKV_CHECK(q->shape[q->ndim - 1] == k->shape[k->ndim - 1], "attention",
              "q %s and k %s differ in d_k", SHAPE(q), SHAPE(k));
    if (scale <= 0) scale = 1.0 / sqrt((double)q->shape[q->ndim - 1]);
    qkv_tensor *scores = qkv_matmul_ex(ctx, q, false, k, true); /* (..., Nq, Nk), no copy of Kᵀ */
    scores = qkv_scale(ctx, scores, scale);
    if (mask) scores = qkv_mask(ctx, scores, mask);
    qkv_tensor *a = qkv_softmax(ctx, scores);
    if (weights) *weights = a;
    return qkv_matmul(ctx, a, v); /* (..., Nq, Dv) */
}
