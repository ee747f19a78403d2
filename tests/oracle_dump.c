/* oracle_dump.c - runs every op forward and backward in f64 and dumps inputs, outputs and
 * gradients, so that scripts/torch_check.py can rebuild each case in PyTorch and compare.
 *
 * Usage: oracle_dump OUTDIR [SEED]
 *
 * Layout written to OUTDIR:
 *   manifest.json            {"format": "qkv-oracle", "version": 1, "seed": ..., "cases": [...]}
 *   <case>/<tensor>.bin      raw little-endian data: f64 (8 bytes) or i32 (4 bytes), row-major
 * Each case in the manifest has "name", "op", "params" (op parameters, mask recipes) and
 * "tensors", a list of {"name", "role", "dtype", "shape", "file"} where role is one of
 *   "input"   differentiable input (a parameter with a gradient)
 *   "extra"   non-differentiable input: a 0/-inf mask (f64) or indices / targets (i32)
 *   "weights" w, the loss being loss = Σ w ⊙ out over the finite entries of out
 *   "output"  out
 *   "grad"    d loss / d input, with "of" naming the input
 * and "loss", the loss value (over the finite entries of out). */
#define _POSIX_C_SOURCE 200809L
#include "qkv.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_IN 4
#define MAX_EXTRA 4

/* What a case records besides its differentiable inputs. */
typedef struct {
    int nextra;
    const char *extra_name[MAX_EXTRA];
    qkv_tensor *extra[MAX_EXTRA];
    cJSON *params; /* an object */
} dump_rec;

typedef struct {
    const char *name; /* unique; also the directory of the case */
    const char *op;   /* the recipe torch_check.py rebuilds */
    int nin;
    const char *in_name[MAX_IN];
    int ndim[MAX_IN];
    int64_t shape[MAX_IN][4];
    qkv_tensor *(*build)(qkv_ctx *ctx, qkv_tensor **in, qkv_rng *rng, dump_rec *rec);
} dump_case;

static void add_extra(dump_rec *rec, const char *name, qkv_tensor *t) {
    if (rec->nextra >= MAX_EXTRA) {
        fprintf(stderr, "oracle_dump: too many extras\n");
        exit(1);
    }
    rec->extra_name[rec->nextra] = name;
    rec->extra[rec->nextra++] = t;
}

/* ---- masks, recorded with the recipe that made them so torch can rebuild them too ---- */
enum { MASK_CAUSAL, MASK_PADDING, MASK_BOOL };

/* A mask for scores of shape (..., Nq, Nk) with `batch` = the leading dim: causal; padding by
 * lengths, batch 0 having length 0 (all its rows fully masked); or random booleans of shape
 * (Nq, Nk) whose row 0 is fully masked. */
static qkv_tensor *make_mask(qkv_ctx *c, int kind, int64_t batch, int64_t nq, int64_t nk,
                             qkv_rng *r, dump_rec *rec) {
    qkv_tensor *m;
    if (kind == MASK_CAUSAL) {
        m = qkv_mask_causal(c, QKV_F64, nq, nk);
        cJSON_AddStringToObject(rec->params, "mask_kind", "causal");
        cJSON_AddNumberToObject(rec->params, "mask_nq", (double)nq);
        cJSON_AddNumberToObject(rec->params, "mask_nk", (double)nk);
    } else if (kind == MASK_PADDING) {
        int32_t lengths[8];
        cJSON *jl = cJSON_AddArrayToObject(rec->params, "mask_lengths");
        for (int64_t b = 0; b < batch; b++) {
            lengths[b] = b == 0 ? 0 : 1 + (int32_t)qkv_rng_below(r, (uint32_t)nk);
            cJSON_AddItemToArray(jl, cJSON_CreateNumber(lengths[b]));
        }
        m = qkv_mask_padding(c, QKV_F64, batch, nk, lengths);
        cJSON_AddStringToObject(rec->params, "mask_kind", "padding");
        cJSON_AddNumberToObject(rec->params, "mask_nk", (double)nk);
    } else {
        uint8_t keep[256];
        cJSON *jk = cJSON_AddArrayToObject(rec->params, "mask_keep");
        for (int64_t i = 0; i < nq * nk; i++) {
            keep[i] = i >= nk && qkv_rng_below(r, 3) != 0; /* row 0 fully masked */
            cJSON_AddItemToArray(jk, cJSON_CreateNumber(keep[i]));
        }
        m = qkv_mask_from_bool(c, QKV_F64, 2, (int64_t[]){nq, nk}, keep);
        cJSON_AddStringToObject(rec->params, "mask_kind", "bool");
        cJSON_AddNumberToObject(rec->params, "mask_nq", (double)nq);
        cJSON_AddNumberToObject(rec->params, "mask_nk", (double)nk);
    }
    add_extra(rec, "mask", m);
    return m;
}

static qkv_tensor *mask_for(qkv_ctx *c, const qkv_tensor *scores_like, int64_t nk, int kind,
                            qkv_rng *r, dump_rec *rec) {
    int64_t nq = scores_like->shape[scores_like->ndim - 2];
    return make_mask(c, kind, scores_like->shape[0], nq, nk, r, rec);
}

/* ---- builders ---- */
static qkv_tensor *matmul_flags(qkv_ctx *c, qkv_tensor **in, dump_rec *rec, bool ta, bool tb) {
    cJSON_AddBoolToObject(rec->params, "trans_a", ta);
    cJSON_AddBoolToObject(rec->params, "trans_b", tb);
    return qkv_matmul_ex(c, in[0], ta, in[1], tb);
}
/* qkv_matmul_rows: a (90, 1, K) as position 2 of sequences of 3, PyTorch's a·b */
static qkv_tensor *b_matmul_rows(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    (void)r;
    cJSON_AddBoolToObject(rec->params, "trans_a", false);
    cJSON_AddBoolToObject(rec->params, "trans_b", false);
    return qkv_matmul_rows(c, in[0], in[1], 3, 1, (const int32_t[]){2});
}
static qkv_tensor *b_matmul_nn(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    (void)r;
    return matmul_flags(c, in, rec, false, false);
}
static qkv_tensor *b_matmul_nt(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    (void)r;
    return matmul_flags(c, in, rec, false, true);
}
static qkv_tensor *b_matmul_tn(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    (void)r;
    return matmul_flags(c, in, rec, true, false);
}
static qkv_tensor *b_matmul_tt(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    (void)r;
    return matmul_flags(c, in, rec, true, true);
}
static qkv_tensor *b_scale(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    (void)r;
    cJSON_AddNumberToObject(rec->params, "s", -0.7);
    return qkv_scale(c, in[0], -0.7);
}
static qkv_tensor *b_mask_causal(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    return qkv_mask(c, in[0], mask_for(c, in[0], in[0]->shape[in[0]->ndim - 1], MASK_CAUSAL, r, rec));
}
static qkv_tensor *b_mask_padding(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    return qkv_mask(c, in[0], mask_for(c, in[0], in[0]->shape[in[0]->ndim - 1], MASK_PADDING, r, rec));
}
static qkv_tensor *b_mask_bool(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    return qkv_mask(c, in[0], mask_for(c, in[0], in[0]->shape[in[0]->ndim - 1], MASK_BOOL, r, rec));
}
static qkv_tensor *b_softmax(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    (void)r;
    (void)rec;
    return qkv_softmax(c, in[0]);
}
static qkv_tensor *b_softmax_masked(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    qkv_tensor *m = mask_for(c, in[0], in[0]->shape[in[0]->ndim - 1], MASK_BOOL, r, rec);
    return qkv_softmax(c, qkv_mask(c, in[0], m));
}
static qkv_tensor *b_softmax_padded(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    qkv_tensor *m = mask_for(c, in[0], in[0]->shape[in[0]->ndim - 1], MASK_PADDING, r, rec);
    return qkv_softmax(c, qkv_mask(c, in[0], m));
}
static qkv_tensor *b_add(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    (void)r;
    (void)rec;
    return qkv_add(c, in[0], in[1]);
}
static qkv_tensor *b_mul(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    (void)r;
    (void)rec;
    return qkv_mul(c, in[0], in[1]);
}
static qkv_tensor *b_embedding(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    int32_t idx[12];
    for (int i = 0; i < 12; i++) idx[i] = (int32_t)qkv_rng_below(r, (uint32_t)in[0]->shape[0]);
    idx[5] = idx[0];  /* repeated tokens: their gradient rows must add up */
    idx[11] = idx[0]; /* three times */
    idx[7] = idx[2];
    qkv_tensor *ix = qkv_from_array(c, QKV_I32, 2, (int64_t[]){3, 4}, idx);
    add_extra(rec, "idx", ix);
    return qkv_embedding(c, in[0], ix);
}
static qkv_tensor *b_reshape(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    (void)r;
    int64_t shape[2] = {in[0]->size / 4, 4};
    cJSON *js = cJSON_AddArrayToObject(rec->params, "shape");
    for (int i = 0; i < 2; i++) cJSON_AddItemToArray(js, cJSON_CreateNumber((double)shape[i]));
    return qkv_reshape(c, in[0], 2, shape);
}
static qkv_tensor *transpose_dims(qkv_ctx *c, qkv_tensor **in, dump_rec *rec, int d0, int d1) {
    cJSON_AddNumberToObject(rec->params, "dim0", d0);
    cJSON_AddNumberToObject(rec->params, "dim1", d1);
    return qkv_transpose(c, in[0], d0, d1);
}
static qkv_tensor *b_transpose_12(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    (void)r;
    return transpose_dims(c, in, rec, 1, 2);
}
static qkv_tensor *b_transpose_01(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    (void)r;
    return transpose_dims(c, in, rec, 0, 1);
}
static qkv_tensor *b_transpose_03(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    (void)r;
    return transpose_dims(c, in, rec, 0, 3);
}
/* Rows i % 3 == 1 get the ignore index; with a valid class as ignore index, some targets equal
 * to it are ignored as well. */
static qkv_tensor *cross_entropy_ignore(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec,
                                        int32_t ignore) {
    int64_t V = in[0]->shape[in[0]->ndim - 1], rows = in[0]->size / V;
    int32_t tg[64];
    for (int64_t i = 0; i < rows; i++)
        tg[i] = i % 3 == 1 ? ignore : (int32_t)qkv_rng_below(r, (uint32_t)V);
    qkv_tensor *t = qkv_from_array(c, QKV_I32, in[0]->ndim - 1, in[0]->shape, tg);
    add_extra(rec, "targets", t);
    cJSON_AddNumberToObject(rec->params, "ignore_index", ignore);
    return qkv_cross_entropy(c, in[0], t, ignore);
}
static qkv_tensor *b_cross_entropy(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    return cross_entropy_ignore(c, in, r, rec, -1);
}
static qkv_tensor *b_cross_entropy_cls(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    return cross_entropy_ignore(c, in, r, rec, 2);
}
static qkv_tensor *b_mse(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    (void)r;
    (void)rec;
    return qkv_mse(c, in[0], in[1]);
}
static qkv_tensor *b_sum(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    (void)r;
    (void)rec;
    return qkv_sum(c, in[0]);
}
static qkv_tensor *b_mean(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    (void)r;
    (void)rec;
    return qkv_mean(c, in[0]);
}
/* Attention; the scale recorded is the one passed (<= 0 means 1/sqrt(Dk), which torch_check.py
 * recomputes on its own). */
static qkv_tensor *attention_kind(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec, int kind,
                                  double scale, bool fused) {
    qkv_tensor *m = NULL;
    if (kind >= 0) m = mask_for(c, in[0], in[1]->shape[in[1]->ndim - 2], kind, r, rec);
    cJSON_AddNumberToObject(rec->params, "scale", scale);
    return fused ? qkv_attention_fused(c, in[0], in[1], in[2], m, scale)
                 : qkv_attention_unfused(c, in[0], in[1], in[2], m, scale, NULL);
}
static qkv_tensor *b_attention(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    return attention_kind(c, in, r, rec, -1, 0.0, false);
}
static qkv_tensor *b_attention_scaled(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    return attention_kind(c, in, r, rec, -1, 0.3, false);
}
static qkv_tensor *b_attention_causal(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    return attention_kind(c, in, r, rec, MASK_CAUSAL, 0.0, false);
}
static qkv_tensor *b_attention_padding(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    return attention_kind(c, in, r, rec, MASK_PADDING, 0.0, false);
}
static qkv_tensor *b_attention_bool(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    return attention_kind(c, in, r, rec, MASK_BOOL, 0.0, false);
}
/* The fused op on the same cases. */
static qkv_tensor *b_fused(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    return attention_kind(c, in, r, rec, -1, 0.0, true);
}
static qkv_tensor *b_fused_scaled(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    return attention_kind(c, in, r, rec, -1, 0.3, true);
}
static qkv_tensor *b_fused_causal(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    return attention_kind(c, in, r, rec, MASK_CAUSAL, 0.0, true);
}
static qkv_tensor *b_fused_padding(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    return attention_kind(c, in, r, rec, MASK_PADDING, 0.0, true);
}
static qkv_tensor *b_fused_bool(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    return attention_kind(c, in, r, rec, MASK_BOOL, 0.0, true);
}
/* The heads form, 2 heads side by side in each row of q (B, Nq, 2·Dk), k and v. */
static qkv_tensor *heads_kind(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec, int kind) {
    qkv_tensor *m = NULL;
    if (kind >= 0) m = make_mask(c, kind, in[0]->shape[0], in[0]->shape[1], in[1]->shape[1], r, rec);
    cJSON_AddNumberToObject(rec->params, "scale", 0.0);
    cJSON_AddNumberToObject(rec->params, "heads", 2);
    return qkv_attention_heads(c, in[0], in[1], in[2], m, 2, 0.0);
}
static qkv_tensor *b_heads(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    return heads_kind(c, in, r, rec, -1);
}
static qkv_tensor *b_heads_causal(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    return heads_kind(c, in, r, rec, MASK_CAUSAL);
}
static qkv_tensor *b_heads_padding(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    return heads_kind(c, in, r, rec, MASK_PADDING);
}
/* Self-attention on projections of one X feeding Q, K and V through shared 2-D weights, with a
 * causal mask: X's gradient accumulates from three paths. */
static qkv_tensor *b_self_attention(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    qkv_tensor *q = qkv_matmul(c, in[0], in[1]), *k = qkv_matmul(c, in[0], in[2]),
               *v = qkv_matmul(c, in[0], in[3]);
    int64_t T = in[0]->shape[in[0]->ndim - 2];
    qkv_tensor *m = make_mask(c, MASK_CAUSAL, in[0]->shape[0], T, T, r, rec);
    cJSON_AddNumberToObject(rec->params, "scale", 0.0);
    return qkv_attention(c, q, k, v, m, 0.0, NULL);
}
static qkv_tensor *b_relu(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    (void)r;
    (void)rec;
    return qkv_relu(c, in[0]);
}
/* params "approximate": PyTorch's name of the form ("none" or "tanh") */
static qkv_tensor *gelu_form(qkv_ctx *c, qkv_tensor **in, dump_rec *rec, qkv_act act) {
    cJSON_AddStringToObject(rec->params, "approximate", act == QKV_ACT_GELU_TANH ? "tanh" : "none");
    return qkv_gelu(c, in[0], act);
}
static qkv_tensor *b_gelu(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    (void)r;
    return gelu_form(c, in, rec, QKV_ACT_GELU);
}
static qkv_tensor *b_gelu_tanh(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    (void)r;
    return gelu_form(c, in, rec, QKV_ACT_GELU_TANH);
}
/* params "rows": the rows picked of each matrix, PyTorch's x[..., rows, :] */
static qkv_tensor *select_rows_of(qkv_ctx *c, qkv_tensor **in, dump_rec *rec, int n,
                                  const int32_t *rows) {
    cJSON *jr = cJSON_AddArrayToObject(rec->params, "rows");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(jr, cJSON_CreateNumber(rows[i]));
    return qkv_select_rows(c, in[0], n, rows);
}
static qkv_tensor *b_select_rows(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    (void)r;
    return select_rows_of(c, in, rec, 2, (const int32_t[]){1, 4});
}
static qkv_tensor *b_select_rows_twice(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    (void)r;
    return select_rows_of(c, in, rec, 3, (const int32_t[]){3, 0, 3});
}
static qkv_tensor *b_layernorm(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    (void)r;
    cJSON_AddNumberToObject(rec->params, "eps", QKV_LAYERNORM_EPS);
    return qkv_layernorm(c, in[0], in[1], in[2], QKV_LAYERNORM_EPS);
}
/* The LayerNorm's two ops alone: its scale, and its apply with s any number. */
static qkv_tensor *b_layernorm_scale(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    (void)r;
    cJSON_AddNumberToObject(rec->params, "eps", QKV_LAYERNORM_EPS);
    return qkv_layernorm_scale(c, in[0], QKV_LAYERNORM_EPS);
}
static qkv_tensor *b_layernorm_apply(qkv_ctx *c, qkv_tensor **in, qkv_rng *r, dump_rec *rec) {
    (void)r;
    (void)rec;
    return qkv_layernorm_apply(c, in[0], in[1], in[2], in[3]);
}

#define S1(a) {a}
#define S2(a, b) {a, b}
#define S3(a, b, c) {a, b, c}
#define S4(a, b, c, d) {a, b, c, d}
#define AB {"a", "b"}
#define X {"x"}
#define QKV {"q", "k", "v"}
static const dump_case cases[] = {
    {"matmul_nn", "matmul", 2, AB, {2, 2}, {S2(3, 4), S2(4, 5)}, b_matmul_nn},
    {"matmul_nn_shared_b", "matmul", 2, AB, {3, 2}, {S3(2, 3, 4), S2(4, 5)}, b_matmul_nn},
    {"matmul_nn_shared_b_4d", "matmul", 2, AB, {4, 2}, {S4(2, 3, 2, 4), S2(4, 3)}, b_matmul_nn},
    {"matmul_nt_shared_b", "matmul", 2, AB, {3, 2}, {S3(2, 3, 4), S2(5, 4)}, b_matmul_nt},
    {"matmul_nt_4d", "matmul", 2, AB, {4, 4}, {S4(2, 3, 4, 5), S4(2, 3, 6, 5)}, b_matmul_nt},
    {"matmul_tn", "matmul", 2, AB, {3, 3}, {S3(2, 5, 3), S3(2, 5, 4)}, b_matmul_tn},
    {"matmul_tt", "matmul", 2, AB, {3, 3}, {S3(2, 5, 3), S3(2, 4, 5)}, b_matmul_tt},
    {"matmul_tt_2d", "matmul", 2, AB, {2, 2}, {S2(6, 3), S2(4, 6)}, b_matmul_tt},
    {"scale", "scale", 1, X, {2}, {S2(3, 5)}, b_scale},
    {"mask_causal", "mask", 1, X, {4}, {S4(2, 3, 4, 5)}, b_mask_causal},
    {"mask_padding_zero_len", "mask", 1, X, {4}, {S4(3, 2, 4, 5)}, b_mask_padding},
    {"mask_bool", "mask", 1, X, {3}, {S3(2, 4, 6)}, b_mask_bool},
    {"softmax_2d", "softmax", 1, X, {2}, {S2(4, 7)}, b_softmax},
    {"softmax_4d", "softmax", 1, X, {4}, {S4(2, 2, 3, 5)}, b_softmax},
    {"softmax_masked_full_row", "masked_softmax", 1, X, {3}, {S3(2, 4, 6)}, b_softmax_masked},
    {"softmax_padded_zero_len", "masked_softmax", 1, X, {4}, {S4(3, 2, 3, 5)}, b_softmax_padded},
    {"add_bcast_2d", "add", 2, AB, {3, 2}, {S3(2, 3, 4), S2(3, 4)}, b_add},
    {"add_bcast_1d", "add", 2, AB, {3, 1}, {S3(2, 3, 4), S1(4)}, b_add},
    {"add_bcast_4d", "add", 2, AB, {4, 4}, {S4(2, 1, 3, 2), S4(1, 1, 3, 2)}, b_add},
    {"add_bcast_mid", "add", 2, AB, {3, 3}, {S3(2, 3, 4), S3(2, 1, 4)}, b_add},
    {"mul_same", "mul", 2, AB, {3, 3}, {S3(2, 3, 4), S3(2, 3, 4)}, b_mul},
    {"mul_bcast", "mul", 2, AB, {3, 2}, {S3(2, 3, 4), S2(1, 4)}, b_mul},
    {"mul_bcast_col", "mul", 2, AB, {3, 2}, {S3(2, 3, 4), S2(3, 1)}, b_mul},
    {"embedding_repeat", "embedding", 1, {"table"}, {2}, {S2(7, 5)}, b_embedding},
    {"reshape", "reshape", 1, X, {3}, {S3(2, 3, 4)}, b_reshape},
    {"transpose_12", "transpose", 1, X, {4}, {S4(2, 3, 4, 5)}, b_transpose_12},
    {"transpose_01", "transpose", 1, X, {2}, {S2(3, 4)}, b_transpose_01},
    {"transpose_03", "transpose", 1, X, {4}, {S4(2, 3, 4, 5)}, b_transpose_03},
    {"cross_entropy_3d", "cross_entropy", 1, {"logits"}, {3}, {S3(2, 3, 5)}, b_cross_entropy},
    {"cross_entropy_2d", "cross_entropy", 1, {"logits"}, {2}, {S2(7, 4)}, b_cross_entropy},
    {"cross_entropy_ignore_class", "cross_entropy", 1, {"logits"}, {2}, {S2(9, 4)},
     b_cross_entropy_cls},
    {"mse", "mse", 2, AB, {2, 2}, {S2(3, 4), S2(3, 4)}, b_mse},
    {"sum", "sum", 1, X, {3}, {S3(2, 3, 4)}, b_sum},
    {"mean", "mean", 1, X, {3}, {S3(2, 3, 4)}, b_mean},
    {"attention", "attention", 3, QKV, {3, 3, 3}, {S3(2, 4, 3), S3(2, 4, 3), S3(2, 4, 3)},
     b_attention},
    {"attention_2d_scale", "attention", 3, QKV, {2, 2, 2}, {S2(3, 4), S2(5, 4), S2(5, 3)},
     b_attention_scaled},
    /* cross-attention, B=2 H=3, Nq=3 != Nk=5, Dk=4 != Dv=2 */
    {"attention_cross", "attention", 3, QKV, {4, 4, 4},
     {S4(2, 3, 3, 4), S4(2, 3, 5, 4), S4(2, 3, 5, 2)}, b_attention},
    {"attention_causal", "attention", 3, QKV, {4, 4, 4},
     {S4(2, 2, 4, 3), S4(2, 2, 6, 3), S4(2, 2, 6, 2)}, b_attention_causal},
    {"attention_padding_zero_len", "attention", 3, QKV, {4, 4, 4},
     {S4(3, 2, 4, 3), S4(3, 2, 5, 3), S4(3, 2, 5, 3)}, b_attention_padding},
    {"attention_bool_full_row", "attention", 3, QKV, {3, 3, 3},
     {S3(2, 4, 3), S3(2, 6, 3), S3(2, 6, 2)}, b_attention_bool},
    {"fused", "attention", 3, QKV, {3, 3, 3}, {S3(2, 4, 3), S3(2, 4, 3), S3(2, 4, 3)}, b_fused},
    {"fused_2d_scale", "attention", 3, QKV, {2, 2, 2}, {S2(3, 4), S2(5, 4), S2(5, 3)},
     b_fused_scaled},
    {"fused_cross", "attention", 3, QKV, {4, 4, 4},
     {S4(2, 3, 3, 4), S4(2, 3, 5, 4), S4(2, 3, 5, 2)}, b_fused},
    {"fused_causal", "attention", 3, QKV, {4, 4, 4},
     {S4(2, 2, 4, 3), S4(2, 2, 6, 3), S4(2, 2, 6, 2)}, b_fused_causal},
    {"fused_padding_zero_len", "attention", 3, QKV, {4, 4, 4},
     {S4(3, 2, 4, 3), S4(3, 2, 5, 3), S4(3, 2, 5, 3)}, b_fused_padding},
    {"fused_bool_full_row", "attention", 3, QKV, {3, 3, 3},
     {S3(2, 4, 3), S3(2, 6, 3), S3(2, 6, 2)}, b_fused_bool},
    /* several tiles of 64 queries and keys, few heads (keys split in groups) and many */
    {"fused_tiles_causal", "attention", 3, QKV, {4, 4, 4},
     {S4(1, 2, 70, 4), S4(1, 2, 150, 4), S4(1, 2, 150, 3)}, b_fused_causal},
    {"fused_tiles_heads", "attention", 3, QKV, {4, 4, 4},
     {S4(2, 4, 66, 3), S4(2, 4, 80, 3), S4(2, 4, 80, 2)}, b_fused_padding},
    {"self_attention_shared_x", "self_attention", 4, {"x", "wq", "wk", "wv"}, {3, 2, 2, 2},
     {S3(2, 5, 4), S2(4, 3), S2(4, 3), S2(4, 2)}, b_self_attention},
    /* the heads form (last, so that the cases above draw what they always drew): cross
     * (Dk ≠ Dv), causal, padding with an entry of no keys, tiles */
    {"heads_cross", "attention_heads", 3, QKV, {3, 3, 3}, {S3(2, 3, 8), S3(2, 5, 8), S3(2, 5, 4)},
     b_heads},
    {"heads_causal", "attention_heads", 3, QKV, {3, 3, 3}, {S3(2, 4, 6), S3(2, 6, 6), S3(2, 6, 4)},
     b_heads_causal},
    {"heads_padding_zero_len", "attention_heads", 3, QKV, {3, 3, 3},
     {S3(3, 4, 4), S3(3, 5, 4), S3(3, 5, 4)}, b_heads_padding},
    {"heads_tiles_causal", "attention_heads", 3, QKV, {3, 3, 3},
     {S3(1, 70, 8), S3(1, 150, 8), S3(1, 150, 6)}, b_heads_causal},
    /* the MLP's activations and LayerNorm (last too): (B, T, C); LayerNorm's 36 rows of the
     * last case make three blocks of its sums over rows */
    {"relu", "relu", 1, X, {3}, {S3(2, 3, 4)}, b_relu},
    {"gelu", "gelu", 1, X, {3}, {S3(2, 3, 4)}, b_gelu},
    {"gelu_tanh", "gelu", 1, X, {2}, {S2(3, 5)}, b_gelu_tanh},
    {"layernorm", "layernorm", 3, {"x", "gain", "bias"}, {3, 1, 1}, {S3(2, 3, 5), S1(5), S1(5)},
     b_layernorm},
    {"layernorm_blocks", "layernorm", 3, {"x", "gain", "bias"}, {3, 1, 1},
     {S3(3, 12, 4), S1(4), S1(4)}, b_layernorm},
    /* its two ops alone (last too) */
    {"layernorm_scale", "layernorm_scale", 1, X, {3}, {S3(2, 3, 5)}, b_layernorm_scale},
    {"layernorm_scale_rows", "layernorm_scale", 1, X, {2}, {S2(36, 4)}, b_layernorm_scale},
    {"layernorm_apply", "layernorm_apply", 4, {"x", "s", "gain", "bias"}, {3, 3, 1, 1},
     {S3(2, 3, 5), S3(2, 3, 1), S1(5), S1(5)}, b_layernorm_apply},
    {"layernorm_apply_blocks", "layernorm_apply", 4, {"x", "s", "gain", "bias"}, {3, 3, 1, 1},
     {S3(3, 12, 4), S3(3, 12, 1), S1(4), S1(4)}, b_layernorm_apply},
    /* the positions with a target (last too): rows of each sequence, one picked twice; and
     * a product of positions 2 of 3 whose weight gradient sums two depth blocks */
    {"select_rows", "select_rows", 1, X, {3}, {S3(2, 5, 3)}, b_select_rows},
    {"select_rows_twice", "select_rows", 1, X, {2}, {S2(4, 2)}, b_select_rows_twice},
    {"matmul_rows", "matmul", 2, AB, {3, 2}, {S3(90, 1, 3), S2(3, 2)}, b_matmul_rows},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* ---- writing ---- */
static const char *outdir;

static void die_errno(const char *what, const char *path) {
    fprintf(stderr, "oracle_dump: %s %s: %s\n", what, path, strerror(errno));
    exit(1);
}

static void make_dir(const char *path) {
    if (mkdir(path, 0777) != 0 && errno != EEXIST) die_errno("cannot create", path);
}

/* Writes t's data (or its gradient) as raw little-endian values, whatever the host order. */
static void write_bin(const char *rel, const qkv_tensor *t, bool grad) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", outdir, rel);
    FILE *f = fopen(path, "wb");
    if (!f) die_errno("cannot open", path);
    for (int64_t i = 0; i < t->size; i++) {
        unsigned char b[8];
        int n;
        if (t->dtype == QKV_I32) {
            uint32_t u = (uint32_t)((const int32_t *)t->data)[i];
            for (n = 0; n < 4; n++) b[n] = (unsigned char)(u >> (8 * n));
        } else {
            double d = grad ? qkv_grad_get(t, i) : qkv_get(t, i);
            uint64_t u;
            memcpy(&u, &d, sizeof u);
            for (n = 0; n < 8; n++) b[n] = (unsigned char)(u >> (8 * n));
        }
        if (fwrite(b, 1, (size_t)n, f) != (size_t)n) die_errno("cannot write", path);
    }
    if (fclose(f) != 0) die_errno("cannot close", path);
}

static void dump_tensor(cJSON *list, const char *cname, const char *tname, const char *role,
                        const char *of, const qkv_tensor *t, bool grad) {
    char rel[512];
    snprintf(rel, sizeof rel, "%s/%s.bin", cname, tname);
    write_bin(rel, t, grad);
    cJSON *jt = cJSON_CreateObject();
    cJSON_AddStringToObject(jt, "name", tname);
    cJSON_AddStringToObject(jt, "role", role);
    if (of) cJSON_AddStringToObject(jt, "of", of);
    cJSON_AddStringToObject(jt, "dtype", t->dtype == QKV_I32 ? "i32" : "f64");
    cJSON *js = cJSON_AddArrayToObject(jt, "shape");
    for (int d = 0; d < t->ndim; d++) cJSON_AddItemToArray(js, cJSON_CreateNumber((double)t->shape[d]));
    cJSON_AddStringToObject(jt, "file", rel);
    cJSON_AddItemToArray(list, jt);
}

static cJSON *run_case(const dump_case *dc, uint64_t seed) {
    qkv_ctx *ctx = qkv_ctx_new(0);
    if (!ctx) {
        fprintf(stderr, "oracle_dump: out of memory\n");
        exit(1);
    }
    qkv_rng rng = qkv_rng_seed(seed);
    qkv_tensor *in[MAX_IN];
    for (int i = 0; i < dc->nin; i++)
        in[i] = qkv_param(ctx, qkv_randn(ctx, QKV_F64, dc->ndim[i], dc->shape[i], 1.0, &rng));
    qkv_rng r = qkv_rng_seed(qkv_rng_u64(&rng));
    cJSON *jc = cJSON_CreateObject();
    cJSON_AddStringToObject(jc, "name", dc->name);
    cJSON_AddStringToObject(jc, "op", dc->op);
    dump_rec rec = {.params = cJSON_AddObjectToObject(jc, "params")};
    qkv_tensor *out = dc->build(ctx, in, &r, &rec);
    qkv_tensor *w = qkv_randn(ctx, QKV_F64, out->ndim, out->shape, 1.0, &rng);
    /* loss = Σ w ⊙ out. Masked (-inf) entries of out make the recorded loss -inf, but they are
     * constants: the mask's backward gives them no gradient. The reported loss leaves them out. */
    qkv_backward(qkv_sum(ctx, qkv_mul(ctx, out, w)));
    double loss = 0;
    for (int64_t i = 0; i < out->size; i++)
        if (isfinite(qkv_get(out, i))) loss += qkv_get(w, i) * qkv_get(out, i);
    cJSON_AddNumberToObject(jc, "loss", loss);

    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", outdir, dc->name);
    make_dir(dir);
    cJSON *jt = cJSON_AddArrayToObject(jc, "tensors");
    for (int i = 0; i < dc->nin; i++) dump_tensor(jt, dc->name, dc->in_name[i], "input", NULL, in[i], false);
    for (int i = 0; i < rec.nextra; i++)
        dump_tensor(jt, dc->name, rec.extra_name[i], "extra", NULL, rec.extra[i], false);
    dump_tensor(jt, dc->name, "w", "weights", NULL, w, false);
    dump_tensor(jt, dc->name, "out", "output", NULL, out, false);
    for (int i = 0; i < dc->nin; i++) {
        char gname[64];
        snprintf(gname, sizeof gname, "grad_%s", dc->in_name[i]);
        dump_tensor(jt, dc->name, gname, "grad", dc->in_name[i], in[i], true);
    }
    qkv_ctx_free(ctx);
    return jc;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3 || argv[1][0] == '-') {
        fprintf(stderr, "usage: %s OUTDIR [SEED]\n"
                        "Runs every op forward and backward in f64 and writes inputs, outputs and\n"
                        "gradients to OUTDIR (manifest.json and one directory of .bin files per case).\n",
                argv[0]);
        return 2;
    }
    outdir = argv[1];
    uint64_t seed = 20240611;
    if (argc == 3) {
        char *end;
        errno = 0;
        seed = strtoull(argv[2], &end, 10);
        if (errno || *end || end == argv[2]) {
            fprintf(stderr, "oracle_dump: bad seed '%s'\n", argv[2]);
            return 2;
        }
    }
    make_dir(outdir);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "qkv-oracle");
    cJSON_AddNumberToObject(root, "version", 1);
    cJSON_AddStringToObject(root, "qkv_version", QKV_VERSION_STRING);
    char sbuf[32];
    snprintf(sbuf, sizeof sbuf, "%" PRIu64, seed); /* as a string: a double would round it */
    cJSON_AddStringToObject(root, "seed", sbuf);
    cJSON *jcases = cJSON_AddArrayToObject(root, "cases");
    for (int c = 0; c < NCASES; c++)
        cJSON_AddItemToArray(jcases, run_case(&cases[c], seed + (uint64_t)c * 1000003u));
    char *text = cJSON_Print(root);
    char path[4096];
    snprintf(path, sizeof path, "%s/manifest.json", outdir);
    FILE *f = fopen(path, "w");
    if (!f) die_errno("cannot open", path);
    if (fputs(text, f) == EOF || fputc('\n', f) == EOF) die_errno("cannot write", path);
    if (fclose(f) != 0) die_errno("cannot close", path);
    cJSON_free(text);
    cJSON_Delete(root);
    printf("oracle_dump: %d cases written to %s\n", NCASES, outdir);
    return 0;
}
