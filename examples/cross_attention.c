/* cross_attention.c - queries from one sequence, keys and values from another.
 *
 * In self-attention Q, K and V all come from the same tokens. In cross-attention (a decoder
 * reading an encoder, a question reading a document) the queries come from sequence A and the
 * keys and values from sequence B, so the weights are (n_q × n_k), not square:
 *     Q = A·W_Q (n_q, d_k)    K = B·W_K (n_k, d_k)    V = B·W_V (n_k, d_v)
 *     weights = softmax(Q·Kᵀ / sqrt(d_k))  (n_q, n_k): each query spreads 1 over B's tokens
 *     output  = weights·V                  (n_q, d_v): one row per query, mixing B's values
 * The program prints the shapes and the weights, checks that every row of weights sums to 1
 * and that the output has one row per query, and returns 1 if not. */
#include <math.h>
#include <stdio.h>

#include "qkv.h"

#define NQ 2 /* tokens in A, the queries */
#define NK 5 /* tokens in B, the keys and values */
#define C 4  /* d_model of both sequences */
#define DK 3
#define DV 2

int main(void) {
    int failures = 0;
    char s1[32], s2[32];
    qkv_ctx *ctx = qkv_ctx_new(0);
    qkv_rng rng = qkv_rng_seed(3);
    qkv_tensor *A = qkv_randn(ctx, QKV_F32, 2, (int64_t[]){NQ, C}, 1.0, &rng);
    qkv_tensor *B = qkv_randn(ctx, QKV_F32, 2, (int64_t[]){NK, C}, 1.0, &rng);
    qkv_tensor *wq = qkv_randn(ctx, QKV_F32, 2, (int64_t[]){C, DK}, 0.5, &rng);
    qkv_tensor *wk = qkv_randn(ctx, QKV_F32, 2, (int64_t[]){C, DK}, 0.5, &rng);
    qkv_tensor *wv = qkv_randn(ctx, QKV_F32, 2, (int64_t[]){C, DV}, 1.0, &rng);

    qkv_tensor *Q = qkv_matmul(ctx, A, wq), *K = qkv_matmul(ctx, B, wk), *V = qkv_matmul(ctx, B, wv);
    qkv_tensor *weights;
    qkv_tensor *Y = qkv_attention(ctx, Q, K, V, NULL, 0.0, &weights);

    printf("A (queries' sequence) %s   B (keys' and values' sequence) %s\n",
           qkv_shape_str(A, s1, sizeof s1), qkv_shape_str(B, s2, sizeof s2));
    printf("Q = A W_Q %s   ", qkv_shape_str(Q, s1, sizeof s1));
    printf("K = B W_K %s   ", qkv_shape_str(K, s1, sizeof s1));
    printf("V = B W_V %s\n", qkv_shape_str(V, s1, sizeof s1));
    printf("weights %s   output %s\n\n", qkv_shape_str(weights, s1, sizeof s1),
           qkv_shape_str(Y, s2, sizeof s2));

    printf("weights: row i = how query i of A spreads its attention over B's %d tokens\n", NK);
    printf("%10s", "");
    for (int j = 0; j < NK; j++) printf("     B[%d]", j);
    printf("        sum\n");
    for (int i = 0; i < NQ; i++) {
        double sum = 0;
        printf("  A[%d] -> ", i);
        for (int j = 0; j < NK; j++) {
            double w = qkv_get(weights, i * NK + j);
            printf(" %8.4f", w);
            sum += w;
            if (!(w >= 0 && w <= 1)) failures++;
        }
        printf("   %8.6f\n", sum);
        if (!(fabs(sum - 1) < 1e-5)) {
            printf("FAILED: row %d sums to %.8f\n", i, sum);
            failures++;
        }
    }
    printf("\noutput: one row per query of A, a blend of B's values\n");
    for (int i = 0; i < NQ; i++) {
        printf("  y[%d] = (", i);
        for (int d = 0; d < DV; d++) {
            /* y_i = Σ_j w_ij v_j, recomputed here */
            double want = 0;
            for (int j = 0; j < NK; j++) want += qkv_get(weights, i * NK + j) * qkv_get(V, j * DV + d);
            printf("%s%.4f", d ? ", " : "", qkv_get(Y, i * DV + d));
            if (!(fabs(qkv_get(Y, i * DV + d) - want) < 1e-5)) {
                printf(" MISMATCH, want %.6f", want);
                failures++;
            }
        }
        printf(")\n");
    }
    if (Y->ndim != 2 || Y->shape[0] != NQ || Y->shape[1] != DV || weights->shape[0] != NQ ||
        weights->shape[1] != NK) {
        printf("FAILED: output should be (%d,%d) and weights (%d,%d)\n", NQ, DV, NQ, NK);
        failures++;
    }
    qkv_ctx_free(ctx);
    if (failures)
        printf("FAILED: %d problems\n", failures);
    else
        printf("ok: %d queries over %d keys, every row of weights sums to 1\n", NQ, NK);
    return failures != 0;
}
