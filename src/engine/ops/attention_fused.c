/* attention_fused.c - softmax(scale·Q·Kᵀ + M)·V as one op. The forward pass keeps the row
 * log-sum-exp, and P where attention_kept_probs's rule allows; the backward pass reads P
 * kept, or recomputes its tiles from the log-sum-exp (the same bits either way).
 * Two forms of one op: the heads in a leading dim, q (..., H, Nq, Dk), or side by side in
 * each row, q (..., Nq, H·Dk) as the projections x·W_Q give them (qkv_attention_heads):
 * the kernel reads a head's rows in place either way, so the model splits and merges no
 * heads. */
#include "engine/internal.h"
#include "kernels/kernels.h"

/* The scores' shape, (..., Nq, Nk); in the heads form (heads > 0), whose rows hold every
 * head side by side, (..., H, Nq, Nk) (q has at most QKV_MAX_DIMS − 1 dims there). */
static qkv_tensor scores_like(const qkv_tensor *q, const qkv_tensor *k, int64_t heads) {
    int n = q->ndim;
    qkv_tensor scores = {.ndim = heads > 0 ? n + 1 : n}; /* only the shape */
    memcpy(scores.shape, q->shape, (size_t)(n - 2) * sizeof *q->shape);
    if (heads > 0) scores.shape[n - 2] = heads;
    scores.shape[scores.ndim - 2] = q->shape[n - 2];
    scores.shape[scores.ndim - 1] = k->shape[n - 2];
    return scores;
}

/* The kernel's view of the op's operands. ms receives the mask's broadcast strides. */
static attention_dims fused_dims(const qkv_tensor *q, const qkv_tensor *k, const qkv_tensor *v,
                                 const qkv_tensor *mask, double scale, int64_t heads,
                                 int64_t ms[4]) {
    int n = q->ndim;
    int64_t per = heads > 0 ? heads : 1; /* heads side by side in a row */
    attention_dims d = {.Nq = q->shape[n - 2], .Nk = k->shape[n - 2],
                        .Dk = q->shape[n - 1] / per, .Dv = v->shape[n - 1] / per,
                        .scale = scale, .ms = ms, .interleaved = heads > 0};
    d.G = q->size / (d.Nq * d.Dk);
    d.H = heads > 0 ? heads : n >= 3 ? q->shape[n - 3] : 1;
    memset(ms, 0, 4 * sizeof *ms);
    if (mask) {
        qkv_tensor scores = scores_like(q, k, heads);
        tensor_broadcast_strides(&scores, mask, ms); /* dims (G/H, H, Nq, Nk) */
    }
    return d;
}

/* The P that the forward pass of out keeps after its log-sum-exp, or NULL (recomputed). */
static void *saved_probs(const qkv_tensor *out, const attention_dims *d) {
    size_t lse_bytes = (size_t)(2 * d->G * d->Nq) * qkv_dtype_size(out->dtype);
    return out->iparam[1] ? (char *)out->saved + lse_bytes : NULL;
}

/* The fused op, in the plain form (heads 0: q (..., Nq, Dk), the heads in a leading dim) or
 * the heads form (q (..., Nq, H·Dk)). */
static qkv_tensor *attention_op(qkv_ctx *ctx, const char *op, qkv_tensor *q, qkv_tensor *k,
                                qkv_tensor *v, qkv_tensor *mask, double scale, int64_t heads) {
    tensor_check_float(q, op, "q");
    tensor_check_float(k, op, "k");
    tensor_check_float(v, op, "v");
    int n = q->ndim;
    QKV_CHECK(n >= 2 && k->ndim == n && v->ndim == n, op,
              "q %s, k %s and v %s must be (..., N, D) with the same number of dims", SHAPE(q), SHAPE(k), SHAPE(v));
    QKV_CHECK(q->dtype == k->dtype && q->dtype == v->dtype, op, "dtypes differ");
    for (int i = 0; i < n - 2; i++)
        QKV_CHECK(q->shape[i] == k->shape[i] && q->shape[i] == v->shape[i], op,
                  "batch dims differ: q %s, k %s, v %s", SHAPE(q), SHAPE(k), SHAPE(v));
    QKV_CHECK(q->shape[n - 1] == k->shape[n - 1], op, "q %s and k %s differ in d_k",
              SHAPE(q), SHAPE(k));
    QKV_CHECK(k->shape[n - 2] == v->shape[n - 2], op,
              "k %s and v %s must hold the same number of keys", SHAPE(k), SHAPE(v));
    if (heads > 0) {
        QKV_CHECK(n <= QKV_MAX_DIMS - 1, op, "q %s: at most %d dims in the heads form",
                  SHAPE(q), QKV_MAX_DIMS - 1);
        QKV_CHECK(q->shape[n - 1] % heads == 0 && v->shape[n - 1] % heads == 0, op,
                  "q %s and v %s: the last dims must hold %lld heads each", SHAPE(q), SHAPE(v),
                  (long long)heads);
    }
    int64_t ms[4];
    if (mask) {
        tensor_check_float(mask, op, "mask");
        qkv_tensor scores = scores_like(q, k, heads);
        QKV_CHECK(mask->dtype == q->dtype && tensor_broadcast_strides(&scores, mask, ms), op,
                  "mask %s does not broadcast to the scores %s", SHAPE(mask), SHAPE(&scores));
    }
    attention_dims d = fused_dims(q, k, v, mask, scale, heads, ms);
    if (scale <= 0) d.scale = scale = 1.0 / sqrt((double)d.Dk);
    int64_t shape[QKV_MAX_DIMS];
    memcpy(shape, q->shape, sizeof shape);
    shape[n - 1] = v->shape[n - 1]; /* Dv, or H·Dv */
    qkv_tensor *out = tensor_new_op(ctx, QKV_OP_ATTENTION, q->dtype, n, shape, q, k, v);
    out->src[3] = mask;
    out->fparam[0] = scale;
    out->iparam[0] = heads;
    size_t es = qkv_dtype_size(q->dtype);
    /* the row log-sum-exp (2, G, Nq), then P when the backward pass will read it kept (G, Nq,
     * Nk, as attention_probs_at lays it out): only for an output that takes a gradient */
    size_t kept = out->requires_grad ? attention_kept_probs(&d, es) : 0;
    out->saved = arena_alloc_raw(ctx, ((size_t)(2 * d.G * d.Nq) + kept) * es);
    out->iparam[1] = kept > 0;
    d.probs = saved_probs(out, &d);
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

qkv_tensor *qkv_attention_fused(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k, qkv_tensor *v,
                                qkv_tensor *mask, double scale) {
    return attention_op(ctx, "attention_fused", q, k, v, mask, scale, 0);
}

qkv_tensor *qkv_attention_heads(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k, qkv_tensor *v,
                                qkv_tensor *mask, int heads, double scale) {
    QKV_CHECK(heads >= 1, "attention_heads", "heads %d must be at least 1", heads);
    return attention_op(ctx, "attention_heads", q, k, v, mask, scale, heads);
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
    attention_dims d = fused_dims(q, k, v, mask, out->fparam[0], out->iparam[0], ms);
    d.store = stored_grads(&d, q, k, v);
    d.probs = saved_probs(out, &d);
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
