/* multi_head.c - multi-head attention by hand: split the width into heads, attend in each
 * head on its own, put the heads side by side again, and mix them with W_O.
 *
 * n = 3 tokens, d_model = 4, H = 2 heads, so d_k = d_v = 4 / 2 = 2:
 *     Q = X·W_Q, K = X·W_K, V = X·W_V          (3×4)·(4×4) = (3×4)
 *     split: head h takes columns 2h, 2h+1      Q_h, K_h, V_h are (3×2)
 *     A_h = softmax(Q_h·K_hᵀ / sqrt(2))         (3×3), one per head
 *     Y_h = A_h·V_h                             (3×2)
 *     concat: [Y_1 | Y_2]                       (3×4)
 *     out = concat·W_O                          (3×4)·(4×4) = (3×4)
 * W_Q = W_K = W_V = I, so each head sees half of every token: head 1 its first two numbers,
 * head 2 its last two. W_O adds and subtracts the heads: out = [Y_1 + Y_2 | Y_1 - Y_2].
 * The program does it the way the qkv model does (reshape to (3, 2, 2), transpose to
 * (2, 3, 2): heads first, one batched attention, the inverse transpose and reshape), then
 * with plain loops over the heads, and returns 1 if the two disagree. */
#include <math.h>
#include <stdio.h>

#include "qkv.h"

#define N 3  /* tokens */
#define C 4  /* d_model */
#define H 2  /* heads */
#define D 2  /* d_k = d_v = C / H */

static void print_rows(const char *name, const qkv_tensor *t, int64_t rows, int64_t cols,
                       int64_t offset) {
    printf("%s:\n", name);
    for (int64_t i = 0; i < rows; i++) {
        printf("   ");
        for (int64_t j = 0; j < cols; j++) printf(" %8.4f", qkv_get(t, offset + i * cols + j));
        printf("\n");
    }
}

static int failures = 0;
static void check(double got, double want, double tol, const char *what) {
    if (!(fabs(got - want) <= tol)) {
        printf("MISMATCH %s: qkv %.12g, by hand %.12g\n", what, got, want);
        failures++;
    }
}

int main(void) {
    const double x[N][C] = {{1, 0, 0, 1}, {0, 1, 1, 0}, {1, 1, 0, 0}};
    const double eye[C][C] = {{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}};
    /* rows 0-1 take head 1's two outputs, rows 2-3 head 2's: out = [Y1 + Y2 | Y1 - Y2] */
    const double wo[C][C] = {{1, 0, 1, 0}, {0, 1, 0, 1}, {1, 0, -1, 0}, {0, 1, 0, -1}};

    qkv_ctx *ctx = qkv_ctx_new(0);
    if (!ctx) return 1;
    qkv_tensor *X = qkv_from_array(ctx, QKV_F64, 2, (int64_t[]){N, C}, x);
    qkv_tensor *I = qkv_from_array(ctx, QKV_F64, 2, (int64_t[]){C, C}, eye);
    qkv_tensor *WO = qkv_from_array(ctx, QKV_F64, 2, (int64_t[]){C, C}, wo);
    qkv_tensor *Q = qkv_matmul(ctx, X, I), *K = qkv_matmul(ctx, X, I), *V = qkv_matmul(ctx, X, I);
    /* split: (N, C) -> (N, H, D) -> (H, N, D), heads first, as the model does */
    const int64_t nhd[3] = {N, H, D};
    qkv_tensor *Qh = qkv_transpose(ctx, qkv_reshape(ctx, Q, 3, nhd), 0, 1);
    qkv_tensor *Kh = qkv_transpose(ctx, qkv_reshape(ctx, K, 3, nhd), 0, 1);
    qkv_tensor *Vh = qkv_transpose(ctx, qkv_reshape(ctx, V, 3, nhd), 0, 1);
    qkv_tensor *weights; /* (H, N, N) */
    qkv_tensor *Yh = qkv_attention(ctx, Qh, Kh, Vh, NULL, 0.0, &weights); /* (H, N, D) */
    /* concatenate: (H, N, D) -> (N, H, D) -> (N, C) */
    qkv_tensor *concat = qkv_reshape(ctx, qkv_transpose(ctx, Yh, 0, 1), 2, (int64_t[]){N, C});
    qkv_tensor *out = qkv_matmul(ctx, concat, WO);

    print_rows("X, the tokens (3 x 4)", X, N, C, 0);
    for (int h = 0; h < H; h++) {
        char title[96];
        printf("\n-- head %d: columns %d and %d of Q, K and V\n", h + 1, 2 * h, 2 * h + 1);
        snprintf(title, sizeof title, "Q_%d = K_%d = V_%d (3 x 2)", h + 1, h + 1, h + 1);
        print_rows(title, Qh, N, D, (int64_t)h * N * D);
        snprintf(title, sizeof title, "A_%d = softmax(Q_%d K_%d^T / sqrt(2)) (3 x 3)", h + 1, h + 1, h + 1);
        print_rows(title, weights, N, N, (int64_t)h * N * N);
        snprintf(title, sizeof title, "Y_%d = A_%d V_%d (3 x 2)", h + 1, h + 1, h + 1);
        print_rows(title, Yh, N, D, (int64_t)h * N * D);
    }
    printf("\n");
    print_rows("concat = [Y_1 | Y_2] (3 x 4)", concat, N, C, 0);
    print_rows("W_O (4 x 4)", WO, C, C, 0);
    print_rows("out = concat W_O = [Y_1 + Y_2 | Y_1 - Y_2] (3 x 4)", out, N, C, 0);

    /* By hand: each head on its own columns, plain loops. */
    double a[H][N][N], y[H][N][D] = {{{0}}}, cat[N][C], o[N][C] = {{0}};
    for (int h = 0; h < H; h++)
        for (int i = 0; i < N; i++) {
            double s[N], max = -INFINITY, sum = 0;
            for (int j = 0; j < N; j++) {
                s[j] = 0;
                for (int d = 0; d < D; d++) s[j] += x[i][h * D + d] * x[j][h * D + d];
                s[j] /= sqrt((double)D);
                if (s[j] > max) max = s[j];
            }
            for (int j = 0; j < N; j++) sum += a[h][i][j] = exp(s[j] - max);
            for (int j = 0; j < N; j++) {
                a[h][i][j] /= sum;
                for (int d = 0; d < D; d++) y[h][i][d] += a[h][i][j] * x[j][h * D + d];
            }
        }
    for (int i = 0; i < N; i++)
        for (int h = 0; h < H; h++)
            for (int d = 0; d < D; d++) cat[i][h * D + d] = y[h][i][d];
    for (int i = 0; i < N; i++)
        for (int j = 0; j < C; j++)
            for (int c = 0; c < C; c++) o[i][j] += cat[i][c] * wo[c][j];
    for (int h = 0; h < H; h++)
        for (int i = 0; i < N; i++) {
            for (int j = 0; j < N; j++) check(qkv_get(weights, (h * N + i) * N + j), a[h][i][j], 1e-12, "A_h");
            for (int d = 0; d < D; d++) check(qkv_get(Yh, (h * N + i) * D + d), y[h][i][d], 1e-12, "Y_h");
        }
    for (int i = 0; i < N; i++)
        for (int j = 0; j < C; j++) {
            check(qkv_get(concat, i * C + j), cat[i][j], 1e-12, "concat");
            check(qkv_get(out, i * C + j), o[i][j], 1e-12, "out");
        }
    /* On paper: the third token's half for head 2 is (0, 0), so its scores are all 0 and it
     * spreads its weight evenly, 1/3 on each token. Head 1's first query (1, 0) scores the keys
     * (1, 0), (0, 1), (1, 1) as 1, 0, 1: keys 1 and 3 get the same weight. */
    for (int j = 0; j < N; j++) check(qkv_get(weights, (1 * N + 2) * N + j), 1.0 / 3, 1e-12, "A_2[3][j] = 1/3");
    check(qkv_get(weights, 0), qkv_get(weights, 2), 0, "A_1[1][1] = A_1[1][3]");
    qkv_ctx_free(ctx);
    printf(failures ? "FAILED: %d mismatches\n" : "ok: qkv matches the hand computation\n", failures);
    return failures != 0;
}
