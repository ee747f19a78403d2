/* attention_fused.c - softmax(scale·Q·Kᵀ + M)·V as one op: the Nq×Nk matrix is never stored.
 * The forward pass keeps only the row log-sum-exp; the backward pass recomputes the tiles. */
#include "engine/internal.h"
#include "kernels/kernels.h"

/* The kernel's view of the op's operands. ms receives the mask's broadcast strides. */
static attention_dims fused_dims(const qkv_tensor *q, const qkv_tensor *k, const qkv_tensor *v,
                                 const qkv_tensor *mask, double scale, int64_t ms[4]) {
    int n = q->ndim;
    attention_dims d = {.Nq = q->shape[n - 2], .Nk = k->shape[n - 2], .Dk = q->shape[n - 1],
                        .Dv = v->shape[n - 1], .scale = scale, .ms = ms};
    d.G = q->size / (d.Nq * d.Dk);
    d.H = n >= 3 ? q->shape[n - 3] : 1;
    memset(ms, 0, 4 * sizeof *ms);
    if (mask) {
        qkv_tensor scores = {.ndim = n}; /* only the shape, (..., Nq, Nk) */
        memcpy(scores.shape, q->shape, sizeof scores.shape);
        scores.shape[n - 1] = d.Nk;
        tensor_broadcast_strides(&scores, mask, ms); /* dims (G/H, H, Nq, Nk) */
    }
    return d;
}

qkv_tensor *qkv_attention_fused(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k, qkv_tensor *v,
                                qkv_tensor *mask, double scale) {
    tensor_check_float(q, "attention_fused", "q");
    tensor_check_float(k, "attention_fused", "k");
    tensor_check_float(v, "attention_fused", "v");
    int n = q->ndim;
    QKV_CHECK(n >= 2 && k->ndim == n && v->ndim == n, "attention_fused",
              "q %s, k %s and v %s must be (..., N, D) with the same number of dims", SHAPE(q), SHAPE(k), SHAPE(v));
    QKV_CHECK(q->dtype == k->dtype && q->dtype == v->dtype, "attention_fused", "dtypes differ");
    for (int i = 0; i < n - 2; i++)
        QKV_CHECK(q->shape[i] == k->shape[i] && q->shape[i] == v->shape[i], "attention_fused",
                  "batch dims differ: q %s, k %s, v %s", SHAPE(q), SHAPE(k), SHAPE(v));
    QKV_CHECK(q->shape[n - 1] == k->shape[n - 1], "attention_fused", "q %s and k %s differ in d_k",
              SHAPE(q), SHAPE(k));
    QKV_CHECK(k->shape[n - 2] == v->shape[n - 2], "attention_fused",
              "k %s and v %s must hold the same number of keys", SHAPE(k), SHAPE(v));
    if (scale <= 0) scale = 1.0 / sqrt((double)q->shape[n - 1]);
    int64_t ms[4];
    if (mask) {
        tensor_check_float(mask, "attention_fused", "mask");
        qkv_tensor scores = {.ndim = n};
        memcpy(scores.shape, q->shape, sizeof scores.shape);
        scores.shape[n - 1] = k->shape[n - 2];
        QKV_CHECK(mask->dtype == q->dtype && tensor_broadcast_strides(&scores, mask, ms),
                  "attention_fused", "mask %s does not broadcast to the scores %s",
                  SHAPE(mask), SHAPE(&scores));
    }
    attention_dims d = fused_dims(q, k, v, mask, scale, ms);
    int64_t shape[QKV_MAX_DIMS];
    memcpy(shape, q->shape, sizeof shape);
    shape[n - 1] = d.Dv;
    qkv_tensor *out = tensor_new_op(ctx, QKV_OP_ATTENTION, q->dtype, n, shape, q, k, v);
    out->src[3] = mask;
    out->fparam[0] = scale;
    size_t es = qkv_dtype_size(q->dtype);
    out->saved = arena_alloc_raw(ctx, (size_t)(2 * d.G * d.Nq) * es); /* row log-sum-exp (2, G, Nq) */
    int threads = kernel_threads();
    if (q->dtype == QKV_F32) {
        void *scratch = arena_alloc_raw(ctx, attention_scratch_size_f32(&d, threads, false));
        attention_forward_f32(&d, out->data, out->saved, q->data, k->data, v->data,
                              mask ? mask->data : NULL, scratch);
    } else {
        void *scratch = arena_alloc_raw(ctx, attention_scratch_size_f64(&d, threads, false));
        attention_forward_f64(&d, out->data, out->saved, q->data, k->data, v->data,
                              mask ? mask->data : NULL, scratch);
    }
    return out;
}

/* Whether the gradients of a and b share memory (the same tensor, or views of one). */
static bool grads_overlap(const qkv_tensor *a, const qkv_tensor *b) {
    if (!a->grad || !b->grad) return false;
    const char *ga = a->grad, *gb = b->grad;
    size_t na = (size_t)a->size * qkv_dtype_size(a->dtype);
    size_t nb = (size_t)b->size * qkv_dtype_size(b->dtype);
    return ga < gb + nb && gb < ga + na;
}

/* The kernel stores the gradients of q, k and v that nothing has written yet in this pass
 * (grad_first_write): it writes every element of them. When two of them share memory, or
 * its backward form only adds (attention_backward_stores), it adds into all three, zeroed
 * first where unwritten, as the other ops do. */
static unsigned stored_grads(const attention_dims *d, qkv_tensor *q, qkv_tensor *k,
                             qkv_tensor *v) {
    if (!attention_backward_stores(d) || grads_overlap(q, k) || grads_overlap(q, v) ||
        grads_overlap(k, v)) {
        qkv_tensor *in[] = {q, k, v};
        for (int i = 0; i < 3; i++)
            if (in[i]->grad) grad_to_add(in[i]);
        return 0;
    }
    unsigned store = 0;
    if (q->grad && grad_first_write(q)) store |= ATTENTION_STORE_DQ;
    if (k->grad && grad_first_write(k)) store |= ATTENTION_STORE_DK;
    if (v->grad && grad_first_write(v)) store |= ATTENTION_STORE_DV;
    return store;
}

void attention_fused_backward(qkv_tensor *out) {
    qkv_tensor *q = out->src[0], *k = out->src[1], *v = out->src[2], *mask = out->src[3];
    int64_t ms[4];
    attention_dims d = fused_dims(q, k, v, mask, out->fparam[0], ms);
    d.store = stored_grads(&d, q, k, v);
    if (mask && mask->grad) grad_to_add(mask); /* no gradient flows into a mask: it stays 0 */
    int threads = kernel_threads();
    if (out->dtype == QKV_F32) {
        void *scratch = arena_alloc_raw(out->ctx, attention_scratch_size_f32(&d, threads, true));
        attention_backward_f32(&d, q->grad, k->grad, v->grad, out->grad, out->data, out->saved,
                               q->data, k->data, v->data, mask ? mask->data : NULL, scratch);
    } else {
        void *scratch = arena_alloc_raw(out->ctx, attention_scratch_size_f64(&d, threads, true));
        attention_backward_f64(&d, q->grad, k->grad, v->grad, out->grad, out->data, out->saved,
                               q->data, k->data, v->data, mask ? mask->data : NULL, scratch);
    }
}
