/* backward_by_hand.c - one attention backward pass worked in numbers, the way micrograd
 * works one neuron: dA -> dS -> dQ, dK, dV, each step by hand, then checked against qkv's
 * autograd (the composed attention and the fused one).
 *
 * n = 2 tokens, d_k = d_v = 2. Forward:
 *     S = Q·Kᵀ                  the scores (2×2)
 *     P = S / sqrt(d_k)         the scaled scores, what enters the softmax
 *     A = softmax(P)            row by row
 *     Y = A·V                   the output (2×2)
 *     loss = Σ G ⊙ Y            G fixed, so dLoss/dY = G (any loss gives some dY; this one
 *                               makes it easy to write down)
 * Backward, each line the chain rule on one line of the forward pass:
 *     dY = G
 *     dA = dY·Vᵀ                from Y = A·V
 *     dV = Aᵀ·dY                from Y = A·V
 *     dP = A ⊙ (dA − rowsum(dA ⊙ A))   the softmax backward, row by row (docs/plots.md)
 *     dS = dP / sqrt(d_k)       from P = S / sqrt(d_k)
 *     dQ = dS·K                 from S = Q·Kᵀ
 *     dK = dSᵀ·Q                from S = Q·Kᵀ
 * (qkv's plots and `qkv inspect` show dP under the name dS: the gradient of the scores that
 * enter the softmax, after the scale and the mask.)
 * Returns 1 if qkv disagrees with the hand computation. */
#include <math.h>
#include <stdio.h>

#include "qkv.h"

#define N 2
#define D 2

static int failures = 0;
static void check(double got, double want, double tol, const char *what) {
    if (!(fabs(got - want) <= tol)) {
        printf("MISMATCH %s: qkv %.12g, by hand %.12g\n", what, got, want);
        failures++;
    }
}

/* A 2×2 matrix m (row-major) on two lines after its name. */
static void print2(const char *name, const double *m) {
    printf("%-50s [%8.4f %8.4f]\n%-50s [%8.4f %8.4f]\n", name, m[0], m[1], "", m[2], m[3]);
}

int main(void) {
    const double q[N][D] = {{1, 0}, {0, 1}};
    const double k[N][D] = {{1, 0}, {1, 1}};
    const double v[N][D] = {{1, 2}, {3, -1}};
    const double g[N][D] = {{1, 0}, {0, 1}}; /* loss = Y[0][0] + Y[1][1] */
    const double r = sqrt((double)D);

    /* ---- by hand ---- */
    double s[N][N], p[N][N], a[N][N], y[N][D] = {{0}};
    for (int i = 0; i < N; i++) {
        double max = -INFINITY, sum = 0;
        for (int j = 0; j < N; j++) {
            s[i][j] = q[i][0] * k[j][0] + q[i][1] * k[j][1];
            p[i][j] = s[i][j] / r;
            if (p[i][j] > max) max = p[i][j];
        }
        for (int j = 0; j < N; j++) sum += a[i][j] = exp(p[i][j] - max);
        for (int j = 0; j < N; j++) a[i][j] /= sum;
        for (int j = 0; j < N; j++)
            for (int d = 0; d < D; d++) y[i][d] += a[i][j] * v[j][d];
    }
    double loss = 0, da[N][N] = {{0}}, dv[N][D] = {{0}}, dp[N][N], ds[N][N], dq[N][D] = {{0}},
           dk[N][D] = {{0}};
    for (int i = 0; i < N; i++)
        for (int d = 0; d < D; d++) loss += g[i][d] * y[i][d];
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            for (int d = 0; d < D; d++) {
                da[i][j] += g[i][d] * v[j][d]; /* dA = dY·Vᵀ */
                dv[j][d] += a[i][j] * g[i][d]; /* dV = Aᵀ·dY */
            }
    for (int i = 0; i < N; i++) {
        double dot = 0; /* rowsum(dA ⊙ A): what the row's weights, which sum to 1, cannot change */
        for (int j = 0; j < N; j++) dot += da[i][j] * a[i][j];
        for (int j = 0; j < N; j++) {
            dp[i][j] = a[i][j] * (da[i][j] - dot);
            ds[i][j] = dp[i][j] / r;
        }
    }
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            for (int d = 0; d < D; d++) {
                dq[i][d] += ds[i][j] * k[j][d]; /* dQ = dS·K */
                dk[j][d] += ds[i][j] * q[i][d]; /* dK = dSᵀ·Q */
            }

    printf("forward\n");
    print2("S = Q K^T", &s[0][0]);
    print2("P = S / sqrt(2)", &p[0][0]);
    print2("A = softmax(P)  (row 1: equal scores, 1/2 each)", &a[0][0]);
    print2("Y = A V", &y[0][0]);
    printf("loss = Y[1][1] + Y[2][2] = %.6f\n\nbackward\n", loss);
    print2("dY = G", &g[0][0]);
    print2("dA = dY V^T", &da[0][0]);
    print2("dV = A^T dY", &dv[0][0]);
    print2("dP = A * (dA - rowsum(dA * A))  (rows sum to 0)", &dp[0][0]);
    print2("dS = dP / sqrt(2)", &ds[0][0]);
    print2("dQ = dS K", &dq[0][0]);
    print2("dK = dS^T Q", &dk[0][0]);

    /* ---- the engine: Q, K, V as parameters, the same loss, one backward pass ---- */
    qkv_ctx *params = qkv_ctx_new(0), *step = qkv_ctx_new(0);
    if (!params || !step) return 1;
    const int64_t shape[2] = {N, D};
    qkv_tensor *Q = qkv_param(params, qkv_from_array(params, QKV_F64, 2, shape, q));
    qkv_tensor *K = qkv_param(params, qkv_from_array(params, QKV_F64, 2, shape, k));
    qkv_tensor *V = qkv_param(params, qkv_from_array(params, QKV_F64, 2, shape, v));
    qkv_tensor *G = qkv_from_array(step, QKV_F64, 2, shape, g);
    for (int fused = 0; fused < 2; fused++) {
        const char *form = fused ? "fused attention" : "composed attention";
        qkv_ctx_reset(step);
        G = qkv_from_array(step, QKV_F64, 2, shape, g);
        qkv_tensor *weights = NULL;
        qkv_tensor *Y = fused ? qkv_attention_fused(step, Q, K, V, NULL, 0.0)
                              : qkv_attention_unfused(step, Q, K, V, NULL, 0.0, &weights);
        qkv_tensor *L = qkv_sum(step, qkv_mul(step, Y, G));
        qkv_zero_grad(params);
        qkv_backward(L);
        check(qkv_get(L, 0), loss, 1e-12, "loss");
        for (int i = 0; i < N; i++) {
            for (int j = 0; j < N && !fused; j++) {
                /* the composed form keeps A and P as tensors: their gradients are dA and dP */
                check(qkv_grad_get(weights, i * N + j), da[i][j], 1e-12, "dA");
                check(qkv_grad_get(weights->src[0], i * N + j), dp[i][j], 1e-12, "dP");
            }
            for (int d = 0; d < D; d++) {
                check(qkv_grad_get(Q, i * D + d), dq[i][d], 1e-12, form);
                check(qkv_grad_get(K, i * D + d), dk[i][d], 1e-12, form);
                check(qkv_grad_get(V, i * D + d), dv[i][d], 1e-12, form);
            }
        }
    }
    /* On paper: query 1 scores both keys 1, so A[1] = (1/2, 1/2), and its dA row is
     * (v1·e1, v2·e1) = (1, 3): dP[1] = 1/2·(1 − 2), 1/2·(3 − 2) = (−1/2, 1/2). */
    check(a[0][0], 0.5, 1e-15, "A[1][1] = 1/2");
    check(dp[0][0], -0.5, 1e-15, "dP[1][1] = -1/2");
    check(dp[0][1], 0.5, 1e-15, "dP[1][2] = 1/2");
    qkv_ctx_free(step);
    qkv_ctx_free(params);
    printf(failures ? "FAILED: %d mismatches\n" : "ok: qkv's backward pass matches the hand computation\n",
           failures);
    return failures != 0;
}
