/* saturated_cases.h - attention whose rows are close to one-hot, for the precision checks of
 * the fused backward (test_attention_precision.c, saturated_dump.c).
 *
 * Every query i has a target key t(i) that its scores favour by a margin of `margin` (±20%)
 * over a random key: P at the target is 1 − (Nk − 1)·e^−margin or so. Every score of a row is
 * also shifted by `offset` (an extra last dimension, equal in every key), which leaves P alone
 * but makes the row's log-sum-exp large, as in trained models. Inputs are drawn in f64 and
 * rounded to f32, so the f32 and the f64 runs see the same numbers. */
#ifndef QKV_SATURATED_CASES_H
#define QKV_SATURATED_CASES_H

#include "qkv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum { SAT_NO_MASK, SAT_CAUSAL_PADDED } sat_mask;

typedef struct {
    const char *name;
    int B, H, Nq, Nk, D; /* D = Dk = Dv */
    double margin, offset;
    sat_mask mask;
} sat_case;

/* near one-hot rows; a causal mask with padding and one fully masked row; long rows */
static const sat_case SAT_CASES[] = {
    {"one-hot", 2, 2, 48, 48, 16, 10.0, 30.0, SAT_NO_MASK},
    {"masked", 2, 2, 40, 40, 16, 10.0, 30.0, SAT_CAUSAL_PADDED},
    {"long", 1, 2, 8, 1000, 16, 16.0, 30.0, SAT_NO_MASK},
};
#define SAT_NCASES ((int)(sizeof SAT_CASES / sizeof SAT_CASES[0]))

/* The inputs of one case as doubles that are exactly f32 values: q (B,H,Nq,D), k and v
 * (B,H,Nk,D), dout (B,H,Nq,D), and the mask as keep bytes (B,1,Nq,Nk), or keep NULL. */
typedef struct {
    double *q, *k, *v, *dout;
    uint8_t *keep;
} sat_inputs;

static inline double sat_f32(double x) { return (double)(float)x; }

/* Whether key j is kept for query i of batch b (the causal-padded mask). */
static inline int sat_kept(const sat_case *c, int b, int i, int j) {
    if (c->mask == SAT_NO_MASK) return 1;
    int len = b % 2 ? c->Nk / 2 : c->Nk; /* odd batches: the second half of the keys padded */
    if (b % 2 && i == 1) return 0;      /* and one query with no key at all */
    return j <= i + (c->Nk - c->Nq) && j < len;
}

static inline void sat_build(const sat_case *c, uint64_t seed, sat_inputs *in) {
    int B = c->B, H = c->H, Nq = c->Nq, Nk = c->Nk, D = c->D;
    size_t nq = (size_t)B * H * Nq * D, nk = (size_t)B * H * Nk * D;
    in->q = calloc(nq, sizeof(double));
    in->dout = calloc(nq, sizeof(double));
    in->k = calloc(nk, sizeof(double));
    in->v = calloc(nk, sizeof(double));
    in->keep = c->mask == SAT_NO_MASK ? NULL : calloc((size_t)B * Nq * Nk, 1);
    qkv_rng rng = qkv_rng_seed(seed);
    double shift = sqrt(c->offset * sqrt((double)D)); /* scale·shift² = offset */
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            size_t g = (size_t)b * H + h;
            double *k = in->k + g * Nk * D, *v = in->v + g * Nk * D;
            for (int j = 0; j < Nk; j++) {
                for (int x = 0; x < D - 1; x++) k[j * D + x] = sat_f32(qkv_rng_normal(&rng));
                k[j * D + D - 1] = sat_f32(shift);
                for (int x = 0; x < D; x++) v[j * D + x] = sat_f32(qkv_rng_normal(&rng));
            }
            for (int i = 0; i < Nq; i++) {
                int kept = 0;
                for (int j = 0; j < Nk; j++) kept += sat_kept(c, b, i, j);
                /* a target t among the kept keys that its own direction favours: r_t·r_t
                 * beats every other kept r_t·r_j (a few draws at most) */
                int t = 0;
                double gap = 0;
                for (int tries = 0; tries < 64 && kept && gap <= 0; tries++) {
                    int pick = (int)qkv_rng_below(&rng, (uint32_t)kept);
                    for (int j = 0, seen = 0; j < Nk; j++)
                        if (sat_kept(c, b, i, j) && seen++ == pick) t = j;
                    double self = 0, other = -INFINITY;
                    for (int j = 0; j < Nk; j++) {
                        if (!sat_kept(c, b, i, j)) continue;
                        double dot = 0;
                        for (int x = 0; x < D - 1; x++) dot += k[t * D + x] * k[j * D + x];
                        if (j == t) self = dot;
                        else if (dot > other) other = dot;
                    }
                    gap = kept == 1 ? 1 : self - other;
                }
                /* q = a·r_t: the target's score beats the next by scale·a·gap = margin (±20%) */
                double a = c->margin * (0.8 + 0.4 * qkv_rng_uniform(&rng)) * sqrt((double)D) /
                           (gap > 0 ? gap : 1);
                double *q = in->q + (g * Nq + i) * D, *dout = in->dout + (g * Nq + i) * D;
                for (int x = 0; x < D - 1; x++) q[x] = sat_f32(a * k[t * D + x]);
                q[D - 1] = sat_f32(shift);
                for (int x = 0; x < D; x++) dout[x] = sat_f32(qkv_rng_normal(&rng));
            }
        }
    if (in->keep)
        for (int b = 0; b < B; b++)
            for (int i = 0; i < Nq; i++)
                for (int j = 0; j < Nk; j++)
                    in->keep[((size_t)b * Nq + i) * Nk + j] = (uint8_t)sat_kept(c, b, i, j);
}

static inline void sat_free(sat_inputs *in) {
    free(in->q), free(in->k), free(in->v), free(in->dout), free(in->keep);
    memset(in, 0, sizeof *in);
}

/* The gradients of Σ dout ⊙ attention(q, k, v, mask) in `dtype`, fused or composed, into
 * dq, dk, dv (doubles, sizes as the inputs). */
static inline void sat_grads(const sat_case *c, const sat_inputs *in, qkv_dtype dtype, bool fused,
                             double *dq, double *dk, double *dv) {
    int64_t qs[4] = {c->B, c->H, c->Nq, c->D}, ks[4] = {c->B, c->H, c->Nk, c->D};
    qkv_ctx *ctx = qkv_ctx_new(0);
    qkv_tensor *q = qkv_param(ctx, qkv_new(ctx, dtype, 4, qs));
    qkv_tensor *k = qkv_param(ctx, qkv_new(ctx, dtype, 4, ks));
    qkv_tensor *v = qkv_param(ctx, qkv_new(ctx, dtype, 4, ks));
    qkv_tensor *w = qkv_new(ctx, dtype, 4, qs);
    for (int64_t i = 0; i < q->size; i++) qkv_set(q, i, in->q[i]), qkv_set(w, i, in->dout[i]);
    for (int64_t i = 0; i < k->size; i++) qkv_set(k, i, in->k[i]), qkv_set(v, i, in->v[i]);
    qkv_tensor *mask = in->keep ? qkv_mask_from_bool(ctx, dtype, 4,
                                                     (int64_t[]){c->B, 1, c->Nq, c->Nk}, in->keep)
                                : NULL;
    qkv_tensor *o = fused ? qkv_attention_fused(ctx, q, k, v, mask, 0)
                          : qkv_attention_unfused(ctx, q, k, v, mask, 0, NULL);
    qkv_zero_grad(ctx);
    qkv_backward(qkv_sum(ctx, qkv_mul(ctx, o, w))); /* d/d out = w exactly */
    for (int64_t i = 0; i < q->size; i++) dq[i] = qkv_grad_get(q, i);
    for (int64_t i = 0; i < k->size; i++) dk[i] = qkv_grad_get(k, i), dv[i] = qkv_grad_get(v, i);
    qkv_ctx_free(ctx);
}

/* ‖a − ref‖ / ‖ref‖ over n entries. */
static inline double sat_rel_err(const double *a, const double *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) num += (a[i] - ref[i]) * (a[i] - ref[i]), den += ref[i] * ref[i];
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

#endif
