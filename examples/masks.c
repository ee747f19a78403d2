/* masks.c - what masks do to attention: causal, padding, and a row with nothing left.
 *
 * A mask adds 0 (keep) or -inf (drop) to the scores before the softmax, so a dropped key gets
 * weight exp(-inf) = 0 and the kept keys share the whole weight of 1:
 *   causal   query i sees keys j <= i (a model that predicts the next token must not peek)
 *   padding  a short sequence in a batch sees only its real keys j < length; the rest is filler
 * Combine left padding with a causal mask and the first query sees no key at all: its row of
 * scores is all -inf. softmax would give 0/0 = NaN; qkv defines that row as all zeros, with
 * zero output and zero gradient, so one empty row never poisons the batch.
 *
 * Q, K, V are (B=2, H=1, T=4, d=2). The program prints the weights side by side, checks each
 * mask, and returns 1 if a check fails. */
#include <math.h>
#include <stdio.h>

#include "qkv.h"

#define B 2
#define T 4
#define D 2

static int failures = 0;
static void expect(bool ok, const char *what) {
    if (!ok) {
        printf("FAILED: %s\n", what);
        failures++;
    }
}

/* Weight of query i on key j in batch b of a (B, 1, T, T) tensor. */
static double w(const qkv_tensor *a, int b, int i, int j) { return qkv_get(a, (b * T + i) * T + j); }

int main(void) {
    qkv_ctx *params = qkv_ctx_new(0), *ctx = qkv_ctx_new(0);
    qkv_rng rng = qkv_rng_seed(11);
    int64_t shape[4] = {B, 1, T, D};
    qkv_tensor *q = qkv_param(params, qkv_randn(params, QKV_F32, 4, shape, 1.0, &rng));
    qkv_tensor *k = qkv_param(params, qkv_randn(params, QKV_F32, 4, shape, 1.0, &rng));
    qkv_tensor *v = qkv_param(params, qkv_randn(params, QKV_F32, 4, shape, 1.0, &rng));

    /* causal (T, T), broadcast over batch and heads */
    qkv_tensor *causal = qkv_mask_causal(ctx, QKV_F32, T, T);
    /* padding (B, 1, 1, T): batch 0 has 4 real tokens, batch 1 only 2 */
    const int32_t lengths[B] = {4, 2};
    qkv_tensor *padding = qkv_mask_padding(ctx, QKV_F32, B, T, lengths);
    /* left padding + causal (T, T): key 0 is a pad, and query i sees keys 1..i, so query 0
     * sees nothing */
    uint8_t keep[T * T];
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) keep[i * T + j] = j <= i && j >= 1;
    qkv_tensor *both = qkv_mask_from_bool(ctx, QKV_F32, 2, (int64_t[]){T, T}, keep);

    qkv_tensor *a_causal, *a_pad, *a_both;
    qkv_attention(ctx, q, k, v, causal, 0.0, &a_causal);
    qkv_attention(ctx, q, k, v, padding, 0.0, &a_pad);
    qkv_tensor *y = qkv_attention(ctx, q, k, v, both, 0.0, &a_both);

    printf("attention weights of batch 1 (rows: queries, columns: keys; '.' = masked out)\n\n");
    printf("  %-30s %-30s %s\n", "causal (j <= i)", "padding (length 2)", "left pad + causal");
    const qkv_tensor *maps[3] = {a_causal, a_pad, a_both};
    for (int i = 0; i < T; i++) {
        printf(" ");
        for (int m = 0; m < 3; m++) {
            for (int j = 0; j < T; j++) {
                /* the mask value for (batch 1, query i, key j): each mask's own layout */
                double mv = m == 0 ? qkv_get(causal, i * T + j)
                          : m == 1 ? qkv_get(padding, 1 * T + j)
                                   : qkv_get(both, i * T + j);
                if (isinf(mv)) printf("  %5s", ".");
                else printf("  %5.3f", w(maps[m], 1, i, j));
            }
            printf("   ");
        }
        printf("\n");
    }

    /* causal: nothing above the diagonal, every row sums to 1 */
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++) {
            double sum = 0;
            for (int j = 0; j < T; j++) {
                sum += w(a_causal, b, i, j);
                if (j > i) expect(w(a_causal, b, i, j) == 0, "causal: a future key has weight");
            }
            expect(fabs(sum - 1) < 1e-5, "causal: a row does not sum to 1");
        }
    /* padding: batch 1 gives no weight to keys 2 and 3, batch 0 sees all; rows sum to 1 */
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++) {
            double sum = 0;
            for (int j = 0; j < T; j++) {
                sum += w(a_pad, b, i, j);
                if (j >= lengths[b]) expect(w(a_pad, b, i, j) == 0, "padding: a pad key has weight");
            }
            expect(fabs(sum - 1) < 1e-5, "padding: a row does not sum to 1");
        }

    /* the empty row: zero weights, zero output, no NaN, and zero gradient into its query */
    qkv_zero_grad(params);
    qkv_backward(qkv_sum(ctx, y));
    bool finite = true;
    for (int64_t i = 0; i < y->size; i++) finite = finite && isfinite(qkv_get(y, i));
    for (int64_t i = 0; i < a_both->size; i++) finite = finite && isfinite(qkv_get(a_both, i));
    for (int64_t i = 0; i < q->size; i++)
        finite = finite && isfinite(qkv_grad_get(q, i)) && isfinite(qkv_grad_get(k, i)) &&
                 isfinite(qkv_grad_get(v, i));
    expect(finite, "a NaN or Inf appeared");
    printf("\nthe fully masked row (query 0 of left pad + causal):\n");
    for (int b = 0; b < B; b++) {
        printf("  batch %d: weights", b);
        for (int j = 0; j < T; j++) {
            printf(" %g", w(a_both, b, 0, j));
            expect(w(a_both, b, 0, j) == 0, "the empty row has a non-zero weight");
        }
        printf("   output");
        for (int d = 0; d < D; d++) {
            double out = qkv_get(y, (b * T + 0) * D + d), g = qkv_grad_get(q, (b * T + 0) * D + d);
            printf(" %g", out);
            expect(out == 0, "the empty row has a non-zero output");
            expect(g == 0, "the empty row's query has a gradient");
        }
        printf("   dLoss/dq %g %g\n", qkv_grad_get(q, (b * T) * D), qkv_grad_get(q, (b * T) * D + 1));
    }
    /* the other rows still sum to 1 */
    for (int b = 0; b < B; b++)
        for (int i = 1; i < T; i++) {
            double sum = 0;
            for (int j = 0; j < T; j++) sum += w(a_both, b, i, j);
            expect(fabs(sum - 1) < 1e-5, "left pad + causal: a row with keys does not sum to 1");
        }
    /* Without asking for the weights, qkv_attention may take a fused path; it must agree. */
    qkv_tensor *y2 = qkv_attention(ctx, q, k, v, both, 0.0, NULL);
    double diff = 0;
    for (int64_t i = 0; i < y->size; i++) diff = fmax(diff, fabs(qkv_get(y, i) - qkv_get(y2, i)));
    expect(diff < 1e-5, "the attention without weights differs");

    qkv_ctx_free(ctx);
    qkv_ctx_free(params);
    if (failures)
        printf("FAILED: %d checks\n", failures);
    else
        printf("ok: causal, padding and an empty row behave\n");
    return failures != 0;
}
