/* gradcheck.c - every op's backward pass against central finite differences, in f64. */
#include "engine/internal.h"

/* Five-point central differences, f'(x) ≈ [8(f(x+h) − f(x−h)) − (f(x+2h) − f(x−2h))] / 12h:
 * truncation error ~h⁴·f⁽⁵⁾/30 and rounding error ~eps·|f|/h, both ~1e-13 at h = 1e-3. */
#define GC_STEP 1e-3
#define GC_REL_FLOOR 1e-3

/* One case: an op applied to differentiable f64 inputs of the given shapes. `build` may draw
 * non-differentiable extras (masks, indices, targets) from rng, which is re-seeded the same
 * way for every evaluation, so the function being differentiated never changes. */
typedef struct {
    const char *op;
    int nin;
    int ndim[4];
    int64_t shape[4][4];
    qkv_tensor *(*build)(qkv_ctx *ctx, qkv_tensor **in, qkv_rng *rng);
} gc_case;

static qkv_tensor *b_matmul_nn(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    (void)r;
    return qkv_matmul(c, in[0], in[1]);
}
static qkv_tensor *b_matmul_nt(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    (void)r;
    return qkv_matmul_ex(c, in[0], false, in[1], true);
}
static qkv_tensor *b_matmul_tn(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    (void)r;
    return qkv_matmul_ex(c, in[0], true, in[1], false);
}
static qkv_tensor *b_matmul_tt(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    (void)r;
    return qkv_matmul_ex(c, in[0], true, in[1], true);
}
/* a's rows as position 2 of sequences of 3 (qkv_matmul_rows): a (90, 1, K) stands for 270
 * rows, so b's gradient sums them in two depth blocks of the product over the sequences */
static qkv_tensor *b_matmul_rows(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    (void)r;
    return qkv_matmul_rows(c, in[0], in[1], 3, 1, (const int32_t[]){2});
}
static qkv_tensor *b_scale(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    (void)r;
    return qkv_scale(c, in[0], -0.7);
}
/* A mask for scores x (..., Nq, Nk): causal, or padding by lengths, or random booleans with
 * one fully masked row. */
static qkv_tensor *random_mask(qkv_ctx *c, const qkv_tensor *x, int kind, qkv_rng *r) {
    int64_t nq = x->shape[x->ndim - 2], nk = x->shape[x->ndim - 1];
    if (kind == 0) return qkv_mask_causal(c, QKV_F64, nq, nk);
    if (kind == 1) {
        int32_t lengths[8];
        for (int b = 0; b < x->shape[0]; b++) lengths[b] = b == 0 ? 0 : 1 + (int32_t)qkv_rng_below(r, (uint32_t)nk);
        return qkv_mask_padding(c, QKV_F64, x->shape[0], nk, lengths);
    }
    uint8_t *keep = qkv_ctx_alloc(c, (size_t)(nq * nk));
    for (int64_t i = 0; i < nq * nk; i++) keep[i] = i >= nk && qkv_rng_below(r, 3) != 0;
    return qkv_mask_from_bool(c, QKV_F64, 2, (int64_t[]){nq, nk}, keep); /* row 0 fully masked */
}
static qkv_tensor *b_mask_causal(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    return qkv_mask(c, in[0], random_mask(c, in[0], 0, r));
}
static qkv_tensor *b_mask_padding(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    return qkv_mask(c, in[0], random_mask(c, in[0], 1, r));
}
static qkv_tensor *b_mask_bool(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    return qkv_mask(c, in[0], random_mask(c, in[0], 2, r));
}
static qkv_tensor *b_softmax(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    (void)r;
    return qkv_softmax(c, in[0]);
}
static qkv_tensor *b_softmax_masked(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    return qkv_softmax(c, qkv_mask(c, in[0], random_mask(c, in[0], 2, r)));
}
static qkv_tensor *b_add(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    (void)r;
    return qkv_add(c, in[0], in[1]);
}
static qkv_tensor *b_mul(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    (void)r;
    return qkv_mul(c, in[0], in[1]);
}
static qkv_tensor *b_embedding(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    int32_t idx[12];
    for (int i = 0; i < 12; i++) idx[i] = (int32_t)qkv_rng_below(r, (uint32_t)in[0]->shape[0]);
    idx[5] = idx[0]; /* a repeated token: its gradient rows must add up */
    return qkv_embedding(c, in[0], qkv_from_array(c, QKV_I32, 2, (int64_t[]){3, 4}, idx));
}
static qkv_tensor *b_reshape(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    (void)r;
    return qkv_reshape(c, in[0], 2, (int64_t[]){in[0]->size / 4, 4});
}
static qkv_tensor *b_transpose_12(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    (void)r;
    return qkv_transpose(c, in[0], 1, 2);
}
static qkv_tensor *b_transpose_01(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    (void)r;
    return qkv_transpose(c, in[0], 0, 1);
}
static qkv_tensor *b_cross_entropy(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    int64_t rows = in[0]->size / in[0]->shape[in[0]->ndim - 1];
    int32_t tg[64];
    for (int64_t i = 0; i < rows; i++)
        tg[i] = i % 3 == 1 ? -1 : (int32_t)qkv_rng_below(r, (uint32_t)in[0]->shape[in[0]->ndim - 1]);
    return qkv_cross_entropy(c, in[0], qkv_from_array(c, QKV_I32, in[0]->ndim - 1, in[0]->shape, tg),
                             -1);
}
static qkv_tensor *b_mse(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    (void)r;
    return qkv_mse(c, in[0], in[1]);
}
static qkv_tensor *b_sum(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    (void)r;
    return qkv_sum(c, in[0]);
}
static qkv_tensor *b_mean(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    (void)r;
    return qkv_mean(c, in[0]);
}
static qkv_tensor *b_attention(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    (void)r;
    return qkv_attention_unfused(c, in[0], in[1], in[2], NULL, 0, NULL);
}
static qkv_tensor *b_attention_fused(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    (void)r;
    return qkv_attention_fused(c, in[0], in[1], in[2], NULL, 0);
}
/* Attention under a random mask of `kind`, composed or fused. */
static qkv_tensor *attention_masked(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, int kind,
                                    bool fused) {
    int64_t shape[4];
    memcpy(shape, in[0]->shape, sizeof shape);
    shape[in[0]->ndim - 1] = in[1]->shape[in[1]->ndim - 2]; /* scores are (..., Nq, Nk) */
    qkv_tensor scores = {.ndim = in[0]->ndim};
    memcpy(scores.shape, shape, sizeof shape);
    qkv_tensor *mask = random_mask(c, &scores, kind, r);
    return fused ? qkv_attention_fused(c, in[0], in[1], in[2], mask, 0)
                 : qkv_attention_unfused(c, in[0], in[1], in[2], mask, 0, NULL);
}
static qkv_tensor *b_attention_causal(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    return attention_masked(c, in, r, 0, false);
}
static qkv_tensor *b_attention_padding(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    return attention_masked(c, in, r, 1, false);
}
static qkv_tensor *b_attention_bool(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    return attention_masked(c, in, r, 2, false);
}
static qkv_tensor *b_fused_causal(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    return attention_masked(c, in, r, 0, true);
}
static qkv_tensor *b_fused_padding(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    return attention_masked(c, in, r, 1, true);
}
static qkv_tensor *b_fused_bool(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    return attention_masked(c, in, r, 2, true);
}
/* The heads form on 2 heads side by side in each row, under a mask of `kind` (-1: none),
 * drawn for its scores (B, 2, Nq, Nk). */
static qkv_tensor *heads_masked(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, int kind) {
    qkv_tensor scores = {.ndim = 4, .shape = {in[0]->shape[0], 2, in[0]->shape[1], in[1]->shape[1]}};
    qkv_tensor *mask = kind >= 0 ? random_mask(c, &scores, kind, r) : NULL;
    return qkv_attention_heads(c, in[0], in[1], in[2], mask, 2, 0);
}
static qkv_tensor *b_heads(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    return heads_masked(c, in, r, -1);
}
static qkv_tensor *b_heads_causal(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    return heads_masked(c, in, r, 0);
}
static qkv_tensor *b_heads_padding(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    return heads_masked(c, in, r, 1);
}
static qkv_tensor *b_relu(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    (void)r;
    return qkv_relu(c, in[0]);
}
static qkv_tensor *b_gelu(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    (void)r;
    return qkv_gelu(c, in[0], QKV_ACT_GELU);
}
/* The tanh form on inputs spread over (-6, 6): its tails, where tanh saturates. */
static qkv_tensor *b_gelu_tanh(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    (void)r;
    return qkv_gelu(c, qkv_scale(c, in[0], 2.5), QKV_ACT_GELU_TANH);
}
/* Rows 1 and 4 of each (5, C) matrix; rows 3, 0 and 3 again (row 3's gradient the sum of
 * two). */
static qkv_tensor *b_select_rows(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    (void)r;
    return qkv_select_rows(c, in[0], 2, (const int32_t[]){1, 4});
}
static qkv_tensor *b_select_rows_twice(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    (void)r;
    return qkv_select_rows(c, in[0], 3, (const int32_t[]){3, 0, 3});
}
/* The LayerNorm's two ops, each alone, and composed (qkv_layernorm: the gradient of the
 * whole LayerNorm, each op's backward adding its share into x's). */
static qkv_tensor *b_layernorm_scale(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    (void)r;
    return qkv_layernorm_scale(c, in[0], QKV_LAYERNORM_EPS);
}
static qkv_tensor *b_layernorm_apply(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    (void)r;
    return qkv_layernorm_apply(c, in[0], in[1], in[2], in[3]);
}
static qkv_tensor *b_layernorm(qkv_ctx *c, qkv_tensor **in, qkv_rng *r) {
    (void)r;
    return qkv_layernorm(c, in[0], in[1], in[2], QKV_LAYERNORM_EPS);
}

#define S1(a) {a}
#define S2(a, b) {a, b}
#define S3(a, b, c) {a, b, c}
#define S4(a, b, c, d) {a, b, c, d}
static const gc_case cases[] = {
    {"matmul", 2, {2, 2}, {S2(3, 4), S2(4, 5)}, b_matmul_nn},
    {"matmul", 2, {3, 2}, {S3(2, 3, 4), S2(4, 5)}, b_matmul_nn},          /* shared B */
    {"matmul", 2, {4, 4}, {S4(2, 3, 4, 5), S4(2, 3, 6, 5)}, b_matmul_nt}, /* Q·Kᵀ, Nq ≠ Nk */
    {"matmul", 2, {3, 3}, {S3(2, 5, 3), S3(2, 5, 4)}, b_matmul_tn},
    {"matmul", 2, {3, 3}, {S3(2, 5, 3), S3(2, 4, 5)}, b_matmul_tt},
    {"scale", 1, {2}, {S2(3, 5)}, b_scale},
    {"mask", 1, {4}, {S4(2, 3, 4, 5)}, b_mask_causal},
    {"mask", 1, {4}, {S4(3, 2, 4, 5)}, b_mask_padding},
    {"mask", 1, {3}, {S3(2, 4, 6)}, b_mask_bool},
    {"softmax", 1, {2}, {S2(4, 7)}, b_softmax},
    {"softmax", 1, {4}, {S4(2, 2, 3, 5)}, b_softmax},
    {"softmax", 1, {3}, {S3(2, 4, 6)}, b_softmax_masked}, /* with a fully masked row */
    {"add", 2, {3, 2}, {S3(2, 3, 4), S2(3, 4)}, b_add},
    {"add", 2, {3, 1}, {S3(2, 3, 4), {4}}, b_add},
    {"add", 2, {4, 4}, {S4(2, 1, 3, 2), S4(1, 1, 3, 2)}, b_add},
    {"mul", 2, {3, 3}, {S3(2, 3, 4), S3(2, 3, 4)}, b_mul},
    {"mul", 2, {3, 2}, {S3(2, 3, 4), S2(1, 4)}, b_mul},
    {"embedding", 1, {2}, {S2(7, 5)}, b_embedding},
    {"reshape", 1, {3}, {S3(2, 3, 4)}, b_reshape},
    {"transpose", 1, {4}, {S4(2, 3, 4, 5)}, b_transpose_12},
    {"transpose", 1, {2}, {S2(3, 4)}, b_transpose_01},
    {"cross_entropy", 1, {3}, {S3(2, 3, 5)}, b_cross_entropy},
    {"cross_entropy", 1, {2}, {S2(7, 4)}, b_cross_entropy},
    {"mse", 2, {2, 2}, {S2(3, 4), S2(3, 4)}, b_mse},
    {"sum", 1, {3}, {S3(2, 3, 4)}, b_sum},
    {"mean", 1, {3}, {S3(2, 3, 4)}, b_mean},
    {"attention", 3, {3, 3, 3}, {S3(2, 4, 3), S3(2, 4, 3), S3(2, 4, 3)}, b_attention},
    /* cross-attention, B=2 H=3, Nq=3 ≠ Nk=5, Dk=4 ≠ Dv=2 */
    {"attention", 3, {4, 4, 4}, {S4(2, 3, 3, 4), S4(2, 3, 5, 4), S4(2, 3, 5, 2)}, b_attention},
    {"attention", 3, {4, 4, 4}, {S4(2, 2, 4, 3), S4(2, 2, 6, 3), S4(2, 2, 6, 2)}, b_attention_causal},
    {"attention", 3, {4, 4, 4}, {S4(3, 2, 4, 3), S4(3, 2, 5, 3), S4(3, 2, 5, 3)}, b_attention_padding},
    {"attention", 3, {3, 3, 3}, {S3(2, 4, 3), S3(2, 6, 3), S3(2, 6, 2)}, b_attention_bool},
    /* The fused op on the same shapes, then on shapes with several tiles of 64 queries and
     * keys: few heads (the backward splits keys into groups) and >= 8 heads (split by head). */
    {"attention_fused", 3, {3, 3, 3}, {S3(2, 4, 3), S3(2, 4, 3), S3(2, 4, 3)}, b_attention_fused},
    {"attention_fused", 3, {4, 4, 4}, {S4(2, 3, 3, 4), S4(2, 3, 5, 4), S4(2, 3, 5, 2)}, b_attention_fused},
    {"attention_fused", 3, {4, 4, 4}, {S4(2, 2, 4, 3), S4(2, 2, 6, 3), S4(2, 2, 6, 2)}, b_fused_causal},
    {"attention_fused", 3, {4, 4, 4}, {S4(3, 2, 4, 3), S4(3, 2, 5, 3), S4(3, 2, 5, 3)}, b_fused_padding},
    {"attention_fused", 3, {3, 3, 3}, {S3(2, 4, 3), S3(2, 6, 3), S3(2, 6, 2)}, b_fused_bool},
    {"attention_fused", 3, {2, 2, 2}, {S2(70, 2), S2(140, 2), S2(140, 2)}, b_fused_causal},
    {"attention_fused", 3, {4, 4, 4}, {S4(1, 2, 67, 2), S4(1, 2, 131, 2), S4(1, 2, 131, 1)}, b_attention_fused},
    {"attention_fused", 3, {4, 4, 4}, {S4(2, 4, 66, 1), S4(2, 4, 70, 1), S4(2, 4, 70, 1)}, b_fused_bool},
    /* 2 heads side by side in each row: cross (Nq 3, Nk 5, Dk 2 ≠ Dv 1), causal, padding
     * (one entry without keys), and several tiles of 64 queries and keys */
    {"attention_heads", 3, {3, 3, 3}, {S3(2, 3, 4), S3(2, 5, 4), S3(2, 5, 2)}, b_heads},
    {"attention_heads", 3, {3, 3, 3}, {S3(2, 4, 6), S3(2, 6, 6), S3(2, 6, 4)}, b_heads_causal},
    {"attention_heads", 3, {3, 3, 3}, {S3(3, 4, 4), S3(3, 5, 4), S3(3, 5, 4)}, b_heads_padding},
    {"attention_heads", 3, {3, 3, 3}, {S3(1, 67, 4), S3(1, 131, 4), S3(1, 131, 2)}, b_heads_causal},
    /* relu's inputs are moved away from its kink (has_kink) */
    {"relu", 1, {3}, {S3(2, 3, 4)}, b_relu},
    {"relu", 1, {1}, {S1(7)}, b_relu},
    {"gelu", 1, {3}, {S3(2, 3, 4)}, b_gelu},
    {"gelu", 1, {2}, {S2(3, 5)}, b_gelu_tanh},
    /* The LayerNorm's scale (B, T, C) -> (B, T, 1), and its apply with s any number (it is
     * linear in s), gain and bias; then 36 rows, three blocks of the sums over rows. And the
     * two composed, as the model uses them. */
    {"layernorm_scale", 1, {3}, {S3(2, 3, 5)}, b_layernorm_scale},
    {"layernorm_scale", 1, {2}, {S2(4, 6)}, b_layernorm_scale},
    {"layernorm_scale", 1, {3}, {S3(3, 12, 4)}, b_layernorm_scale},
    {"layernorm_apply", 4, {3, 3, 1, 1}, {S3(2, 3, 5), S3(2, 3, 1), S1(5), S1(5)},
     b_layernorm_apply},
    {"layernorm_apply", 4, {2, 2, 1, 1}, {S2(4, 6), S2(4, 1), S1(6), S1(6)}, b_layernorm_apply},
    {"layernorm_apply", 4, {3, 3, 1, 1}, {S3(3, 12, 4), S3(3, 12, 1), S1(4), S1(4)},
     b_layernorm_apply},
    {"layernorm", 3, {3, 1, 1}, {S3(2, 3, 5), S1(5), S1(5)}, b_layernorm},
    {"layernorm", 3, {2, 1, 1}, {S2(4, 6), S1(6), S1(6)}, b_layernorm},
    {"layernorm", 3, {3, 1, 1}, {S3(3, 12, 4), S1(4), S1(4)}, b_layernorm},
    /* the positions with a target: rows of each sequence, one picked twice; and a product of
     * positions 2 of 3 whose weight gradient sums two depth blocks */
    {"select_rows", 1, {3}, {S3(2, 5, 3)}, b_select_rows},
    {"select_rows", 1, {2}, {S2(4, 2)}, b_select_rows_twice},
    /* last, so that the cases above draw what they always drew */
    {"matmul", 2, {3, 2}, {S3(90, 1, 3), S2(3, 2)}, b_matmul_rows},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static const char *const checked_ops[] = {"matmul", "scale", "mask", "softmax", "add",
                                          "mul", "embedding", "reshape", "transpose",
                                          "cross_entropy", "mse", "sum", "mean", "attention",
                                          "attention_fused", "attention_heads", "relu",
                                          "gelu", "layernorm_scale",
                                          "layernorm_apply", "layernorm", "select_rows"};
#define NOPS ((int)(sizeof checked_ops / sizeof checked_ops[0]))

int qkv_gradcheck_count(void) { return NOPS; }

const char *qkv_gradcheck_op(int index) {
    return index >= 0 && index < NOPS ? checked_ops[index] : NULL;
}

/* Σ w ⊙ f(inputs), in a scratch context, without a graph. */
static double weighted_output(qkv_ctx *scratch, const gc_case *gc, qkv_tensor **in,
                              const qkv_tensor *w, uint64_t seed) {
    qkv_ctx_reset(scratch);
    qkv_rng r = qkv_rng_seed(seed);
    qkv_tensor *out = gc->build(scratch, in, &r);
    double total = 0;
    for (int64_t i = 0; i < out->size; i++) /* a masked (-inf) entry is constant: leave it out */
        if (isfinite(qkv_get(out, i))) total += qkv_get(out, i) * qkv_get(w, i);
    return total;
}

/* An op not differentiable at 0 (relu): the differences reach 2·GC_STEP either side of each
 * input, so its inputs are moved GC_KINK_GAP further from 0 (|x| >= GC_KINK_GAP). */
#define GC_KINK_GAP 0.1
static bool has_kink(const gc_case *gc) { return strcmp(gc->op, "relu") == 0; }

static void check_case(const gc_case *gc, uint64_t seed, qkv_gradcheck_result *res) {
    /* every case fits the default 1 MiB of each (f64 inputs of a few dozen entries): no
     * context grows, so memory fails here or nowhere */
    qkv_ctx *ctx = qkv_ctx_new(0), *scratch = qkv_ctx_new(0);
    if (!ctx || !scratch) {
        qkv_ctx_free(ctx), qkv_ctx_free(scratch);
        res->out_of_memory = true;
        return;
    }
    qkv_ctx_set_no_grad(scratch, true);
    qkv_rng rng = qkv_rng_seed(seed);
    qkv_tensor *in[4];
    for (int i = 0; i < gc->nin; i++) {
        in[i] = qkv_param(ctx, qkv_randn(ctx, QKV_F64, gc->ndim[i], gc->shape[i], 1.0, &rng));
        double *x = in[i]->data;
        if (has_kink(gc))
            for (int64_t e = 0; e < in[i]->size; e++) x[e] += copysign(GC_KINK_GAP, x[e]);
    }
    uint64_t extras_seed = qkv_rng_u64(&rng);
    qkv_rng r = qkv_rng_seed(extras_seed);
    qkv_tensor *out = gc->build(ctx, in, &r);
    /* Random weights: a plain Σ softmax is constant and would have a zero gradient. */
    qkv_tensor *w = qkv_randn(ctx, QKV_F64, out->ndim, out->shape, 1.0, &rng);
    qkv_backward(qkv_sum(ctx, qkv_mul(ctx, out, w)));

    for (int i = 0; i < gc->nin; i++) {
        double *x = in[i]->data;
        for (int64_t e = 0; e < in[i]->size; e++) {
            double keep = x[e];
            double f[4], offsets[4] = {2, 1, -1, -2};
            for (int k = 0; k < 4; k++) {
                x[e] = keep + offsets[k] * GC_STEP;
                f[k] = weighted_output(scratch, gc, in, w, extras_seed);
            }
            x[e] = keep;
            double numeric = (8 * (f[1] - f[2]) - (f[0] - f[3])) / (12 * GC_STEP);
            double analytic = qkv_grad_get(in[i], e);
            double abs_err = fabs(analytic - numeric);
            double denom = fmax(fmax(fabs(analytic), fabs(numeric)), GC_REL_FLOOR);
            if (!(abs_err <= res->max_abs_err)) res->max_abs_err = abs_err; /* NaN sticks */
            if (!(abs_err / denom <= res->max_rel_err)) res->max_rel_err = abs_err / denom;
            res->entries++;
        }
    }
    /* Record the shapes tried: a case's shapes whole, or " ..." once when they do not fit. */
    char one[sizeof res->shapes];
    size_t len = 0;
    for (int i = 0; i < gc->nin && len < sizeof one; i++)
        len += (size_t)snprintf(one + len, sizeof one - len, "%s%s", i ? "," : "", SHAPE(in[i]));
    size_t n = strlen(res->shapes);
    bool cut = n >= 4 && strcmp(res->shapes + n - 4, " ...") == 0;
    if (!cut && n + 1 + len < sizeof res->shapes)
        snprintf(res->shapes + n, sizeof res->shapes - n, "%s%s", n ? " " : "", one);
    else if (!cut && n + 4 < sizeof res->shapes)
        memcpy(res->shapes + n, " ...", 5);
    res->cases++;
    qkv_ctx_free(scratch);
    qkv_ctx_free(ctx);
}

qkv_gradcheck_result qkv_gradcheck_run(int index, double tol, uint64_t seed) {
    QKV_CHECK(index >= 0 && index < NOPS, "gradcheck", "op %d of %d", index, NOPS);
    qkv_gradcheck_result res = {.op = checked_ops[index]};
    for (int c = 0; c < NCASES && !res.out_of_memory; c++)
        if (strcmp(cases[c].op, res.op) == 0) check_case(&cases[c], seed + (uint64_t)c, &res);
    res.passed = !res.out_of_memory && res.cases > 0 && res.max_rel_err <= tol;
    return res;
}
