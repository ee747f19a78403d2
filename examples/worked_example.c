/* worked_example.c - scaled dot-product attention on numbers small enough to follow by hand.
 *
 * n = 3 tokens, d_model = 4, d_k = d_v = 2:
 *     Q = X·W_Q, K = X·W_K, V = X·W_V          (3×4)·(4×2) = (3×2)
 *     S = Q·Kᵀ                                  (3×2)·(2×3) = (3×3), S[i][j] = q_i·k_j
 *     S' = S / sqrt(d_k)
 *     A = softmax(S') row by row                each row sums to 1
 *     Y = A·V                                   (3×3)·(3×2) = (3×2)
 * The weights are chosen so that Q, K, V and S are small integers. The program prints every
 * step from qkv (in f64), redoes it with plain loops, and returns 1 if the two disagree. */
#include <math.h>
#include <stdio.h>

#include "qkv.h"

#define N 3
#define C 4
#define D 2

static void print_matrix(const char *name, const qkv_tensor *t) {
    int64_t rows = t->shape[0], cols = t->shape[1];
    printf("%s (%lldx%lld):\n", name, (long long)rows, (long long)cols);
    for (int64_t i = 0; i < rows; i++) {
        printf("   ");
        for (int64_t j = 0; j < cols; j++) printf(" %9.4f", qkv_get(t, i * cols + j));
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
    const double x[N][C] = {{1, 0, 1, 0}, {0, 2, 0, 2}, {1, 1, 1, 1}};
    const double wq[C][D] = {{1, 0}, {0, 1}, {1, 0}, {0, 1}};
    const double wk[C][D] = {{0, 1}, {1, 0}, {0, 1}, {1, 0}};
    const double wv[C][D] = {{1, 0}, {0, 1}, {0, 0}, {1, 1}};

    qkv_ctx *ctx = qkv_ctx_new(0);
    qkv_tensor *X = qkv_from_array(ctx, QKV_F64, 2, (int64_t[]){N, C}, x);
    qkv_tensor *WQ = qkv_from_array(ctx, QKV_F64, 2, (int64_t[]){C, D}, wq);
    qkv_tensor *WK = qkv_from_array(ctx, QKV_F64, 2, (int64_t[]){C, D}, wk);
    qkv_tensor *WV = qkv_from_array(ctx, QKV_F64, 2, (int64_t[]){C, D}, wv);
    qkv_tensor *Q = qkv_matmul(ctx, X, WQ), *K = qkv_matmul(ctx, X, WK), *V = qkv_matmul(ctx, X, WV);
    qkv_tensor *S = qkv_matmul_ex(ctx, Q, false, K, true); /* Q·Kᵀ without copying Kᵀ */
    qkv_tensor *S2 = qkv_scale(ctx, S, 1 / sqrt((double)D));
    qkv_tensor *A = qkv_softmax(ctx, S2);
    qkv_tensor *Y = qkv_matmul(ctx, A, V);
    /* The same through the library's attention call, which must agree. */
    qkv_tensor *weights;
    qkv_tensor *Y2 = qkv_attention(ctx, Q, K, V, NULL, 0.0, &weights);

    print_matrix("X, the tokens", X);
    print_matrix("W_Q", WQ);
    print_matrix("W_K", WK);
    print_matrix("W_V", WV);
    print_matrix("Q = X W_Q", Q);
    print_matrix("K = X W_K", K);
    print_matrix("V = X W_V", V);
    print_matrix("S = Q K^T, the scores", S);
    print_matrix("S / sqrt(d_k), the scaled scores", S2);
    printf("A = softmax(S / sqrt(d_k)), row by row:\n");
    for (int i = 0; i < N; i++) {
        double sum = 0;
        printf("   ");
        for (int j = 0; j < N; j++) {
            printf(" %9.4f", qkv_get(A, i * N + j));
            sum += qkv_get(A, i * N + j);
        }
        printf("    sum %.6f\n", sum);
    }
    print_matrix("Y = A V, the output", Y);

    /* By hand: the same arithmetic in plain loops. */
    double q[N][D] = {{0}}, k[N][D] = {{0}}, v[N][D] = {{0}}, s[N][N], a[N][N], y[N][D] = {{0}};
    for (int i = 0; i < N; i++)
        for (int j = 0; j < D; j++)
            for (int c = 0; c < C; c++) {
                q[i][j] += x[i][c] * wq[c][j];
                k[i][j] += x[i][c] * wk[c][j];
                v[i][j] += x[i][c] * wv[c][j];
            }
    for (int i = 0; i < N; i++) {
        double max = -INFINITY, sum = 0;
        for (int j = 0; j < N; j++) {
            s[i][j] = (q[i][0] * k[j][0] + q[i][1] * k[j][1]) / sqrt((double)D);
            if (s[i][j] > max) max = s[i][j];
        }
        for (int j = 0; j < N; j++) sum += a[i][j] = exp(s[i][j] - max);
        for (int j = 0; j < N; j++) a[i][j] /= sum;
        for (int j = 0; j < N; j++)
            for (int d = 0; d < D; d++) y[i][d] += a[i][j] * v[j][d];
    }
    for (int i = 0; i < N; i++) {
        for (int d = 0; d < D; d++) {
            check(qkv_get(Q, i * D + d), q[i][d], 0, "Q");
            check(qkv_get(K, i * D + d), k[i][d], 0, "K");
            check(qkv_get(V, i * D + d), v[i][d], 0, "V");
            check(qkv_get(Y, i * D + d), y[i][d], 1e-12, "Y");
            check(qkv_get(Y2, i * D + d), y[i][d], 1e-12, "qkv_attention output");
        }
        for (int j = 0; j < N; j++) {
            check(qkv_get(S2, i * N + j), s[i][j], 1e-12, "scaled scores");
            check(qkv_get(A, i * N + j), a[i][j], 1e-12, "weights");
            check(qkv_get(weights, i * N + j), a[i][j], 1e-12, "qkv_attention weights");
        }
    }
    /* Numbers worked out on paper: the first query's scores are q1·k = (2,0)·(0,2), (4,0),
     * (2,2) = 0, 8, 4; the second query (0,4) scores keys 1 and 3 equally (8), so they share
     * its weight exactly. */
    check(qkv_get(S, 0), 0, 0, "S[0][0]");
    check(qkv_get(S, 1), 8, 0, "S[0][1]");
    check(qkv_get(S, 2), 4, 0, "S[0][2]");
    check(qkv_get(A, 3), qkv_get(A, 5), 0, "A[1][0] = A[1][2]");
    qkv_ctx_free(ctx);
    printf(failures ? "FAILED: %d mismatches\n" : "ok: qkv matches the hand computation\n", failures);
    return failures != 0;
}
