/* lookup_by_meaning.c - attention as a soft dictionary lookup.
 *
 * A dictionary returns the value of the key that equals the query. Attention returns a blend
 * of all the values, weighted by how well each key matches the query: softmax(q·k / sqrt(d_k)).
 * The query "tennis" is not one of the keys racket, ball and tree, but it is close in meaning
 * to racket and ball, so the lookup returns mostly their values 10 and 5, and almost none of
 * tree's 2.
 *
 * Part 1 uses hand-made query and key vectors. Part 2 starts from word features and learns the
 * projections W_Q and W_K with plain SGD until "tennis" looks up the wanted value 8 (that is,
 * 0.6·10 + 0.4·5). The program returns 1 if either lookup misses. */
#include <math.h>
#include <stdio.h>

#include "qkv.h"

#define NKEYS 3
static const char *const key_names[NKEYS] = {"racket", "ball", "tree"};
static const double values[NKEYS] = {10, 5, 2};

/* Prints the scores, weights and result of one lookup: q (1, d), keys (3, d), vals (3, 1). */
static double lookup(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *keys, qkv_tensor *vals,
                     double *weight_out) {
    qkv_tensor *weights;
    qkv_tensor *y = qkv_attention(ctx, q, keys, vals, NULL, 0.0, &weights); /* (1, 1) */
    qkv_tensor *scores = qkv_matmul_ex(ctx, q, false, keys, true);         /* (1, 3) */
    double scale = 1 / sqrt((double)q->shape[1]);
    printf("  %-8s %8s %8s %8s %8s\n", "key", "q.k", "scaled", "weight", "value");
    for (int j = 0; j < NKEYS; j++) {
        printf("  %-8s %8.3f %8.3f %8.3f %8.1f\n", key_names[j], qkv_get(scores, j),
               scale * qkv_get(scores, j), qkv_get(weights, j), values[j]);
        weight_out[j] = qkv_get(weights, j);
    }
    printf("  result: %.3f x 10 + %.3f x 5 + %.3f x 2 = %.4f\n", qkv_get(weights, 0),
           qkv_get(weights, 1), qkv_get(weights, 2), qkv_get(y, 0));
    return qkv_get(y, 0);
}

int main(void) {
    int failures = 0;
    qkv_ctx *ctx = qkv_ctx_new(0);
    qkv_tensor *vals = qkv_from_array(ctx, QKV_F64, 2, (int64_t[]){NKEYS, 1}, values);

    /* ---- Part 1: fixed vectors, d_k = 2. The first coordinate says "sport", the second
     * "held in the hand": tennis is both, racket is both, ball is mostly sport, a tree is
     * neither. ---- */
    printf("Part 1: hand-made vectors, query \"tennis\" = (2, 1)\n");
    const double q1[2] = {2, 1};
    const double k1[NKEYS][2] = {{2, 1}, {1.8, 0.6}, {-1, -1}};
    qkv_tensor *q = qkv_from_array(ctx, QKV_F64, 2, (int64_t[]){1, 2}, q1);
    qkv_tensor *keys = qkv_from_array(ctx, QKV_F64, 2, (int64_t[]){NKEYS, 2}, k1);
    double w[NKEYS];
    double y = lookup(ctx, q, keys, vals, w);
    if (!(y > 7.5 && y < 8.5 && w[2] < 0.01)) {
        printf("FAILED: expected about 0.6 x 10 + 0.4 x 5 = 8 and almost no weight on tree\n");
        failures++;
    }

    /* ---- Part 2: learn W_Q and W_K. Each word has 4 features (sport, equipment, round,
     * plant); q = x_tennis·W_Q and k = x_key·W_K, with W_Q, W_K (4, 2) drawn at random. ---- */
    const double x_tennis[4] = {1.0, 0.2, 0.1, 0.0};
    const double x_keys[NKEYS][4] = {{0.9, 1.0, 0.0, 0.0},  /* racket */
                                     {0.8, 0.3, 1.0, 0.0},  /* ball */
                                     {0.0, 0.0, 0.2, 1.0}}; /* tree */
    const double wanted = 8.0;
    qkv_ctx *params = qkv_ctx_new(0), *step = qkv_ctx_new(0);
    qkv_rng rng = qkv_rng_seed(7);
    qkv_tensor *wq = qkv_param(params, qkv_randn(params, QKV_F64, 2, (int64_t[]){4, 2}, 0.3, &rng));
    qkv_tensor *wk = qkv_param(params, qkv_randn(params, QKV_F64, 2, (int64_t[]){4, 2}, 0.3, &rng));
    qkv_tensor *target = qkv_from_array(params, QKV_F64, 2, (int64_t[]){1, 1}, &wanted);
    printf("\nPart 2: learning W_Q and W_K by SGD so that \"tennis\" looks up %.0f\n", wanted);
    double loss = INFINITY, first = 0;
    int it;
    for (it = 0; it <= 3000; it++) {
        qkv_ctx_reset(step); /* a fresh graph every step */
        qkv_tensor *xq = qkv_from_array(step, QKV_F64, 2, (int64_t[]){1, 4}, x_tennis);
        qkv_tensor *xk = qkv_from_array(step, QKV_F64, 2, (int64_t[]){NKEYS, 4}, x_keys);
        qkv_tensor *v = qkv_from_array(step, QKV_F64, 2, (int64_t[]){NKEYS, 1}, values);
        qkv_tensor *out = qkv_attention(step, qkv_matmul(step, xq, wq), qkv_matmul(step, xk, wk),
                                        v, NULL, 0.0, NULL);           /* (1, 1) */
        qkv_tensor *l = qkv_mse(step, out, target);                    /* (out - 8)² */
        loss = qkv_get(l, 0);
        if (it == 0) first = loss;
        if (it % 5 == 0) printf("  step %4d  lookup %.4f  loss %.6f\n", it, qkv_get(out, 0), loss);
        if (loss < 1e-8) break;
        qkv_zero_grad(params);
        qkv_backward(l);
        qkv_sgd_step(params, 0.05f);
    }
    printf("  stopped after %d steps, loss %.3g (from %.3g)\n\n", it, loss, first);
    printf("the learned lookup:\n");
    qkv_ctx_reset(step);
    qkv_tensor *xq = qkv_from_array(step, QKV_F64, 2, (int64_t[]){1, 4}, x_tennis);
    qkv_tensor *xk = qkv_from_array(step, QKV_F64, 2, (int64_t[]){NKEYS, 4}, x_keys);
    y = lookup(step, qkv_matmul(step, xq, wq), qkv_matmul(step, xk, wk), vals, w);
    if (!(fabs(y - wanted) < 0.01)) {
        printf("FAILED: the learned lookup returns %.4f, not %.0f\n", y, wanted);
        failures++;
    }
    if (!(w[2] < w[0] && w[2] < w[1])) {
        printf("FAILED: tree should get the smallest weight\n");
        failures++;
    }
    qkv_ctx_free(step);
    qkv_ctx_free(params);
    qkv_ctx_free(ctx);
    if (!failures) printf("ok: both lookups return about %.0f\n", wanted);
    return failures != 0;
}
