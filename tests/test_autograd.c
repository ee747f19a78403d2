/* test_autograd.c - accumulation, first writes of a gradient, repeated backward, zero_grad,
 * deep graphs, SGD. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* setrlimit */
#endif
#include "qkv.h"
#include "engine/internal.h" /* op_table */
#include "kernels/kernels.h"

#include "fixtures.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>


static qkv_tensor *param_f64(qkv_ctx *c, int ndim, const int64_t *shape, const double *v) {
    return qkv_param(c, qkv_from_array(c, QKV_F64, ndim, shape, v));
}

/* ---- a tensor used several times ------------------------------------------------------- */

START_TEST(test_polynomial_reuse) {
    /* y = Σ (x⊙x + x): x feeds mul twice and add once; dy/dx = 2x + 1 */
    qkv_tensor *x = param_f64(ctx, 1, (int64_t[]){4}, (double[]){1, -2, 0.5, 0});
    qkv_tensor *y = qkv_sum(ctx, qkv_add(ctx, qkv_mul(ctx, x, x), x));
    ck_assert_double_eq(qkv_get(y, 0), 2.0 + 2.0 + 0.75 + 0.0);
    qkv_backward(y);
    const double want[4] = {3, -3, 2, 1};
    for (int i = 0; i < 4; i++) ck_assert_double_eq(qkv_grad_get(x, i), want[i]);
}
END_TEST

START_TEST(test_matmul_with_itself) {
    /* y = Σ_ij (X·Xᵀ)_ij = Σ_k (Σ_i X_ik)²  =>  dy/dX_ik = 2·Σ_i' X_i'k (twice the column sum).
     * X = [[1,2],[3,4]]: column sums (4, 6), so dX = [[8,12],[8,12]]; y = 16 + 36 = 52. */
    qkv_tensor *x = param_f64(ctx, 2, (int64_t[]){2, 2}, (double[]){1, 2, 3, 4});
    qkv_tensor *y = qkv_sum(ctx, qkv_matmul_ex(ctx, x, false, x, true));
    ck_assert_double_eq(qkv_get(y, 0), 52.0);
    qkv_backward(y);
    const double want[4] = {8, 12, 8, 12};
    for (int i = 0; i < 4; i++) ck_assert_double_eq(qkv_grad_get(x, i), want[i]);
}
END_TEST

/* Self-attention loss Σ w ⊙ attention(Xq·Wq, Xk·Wk, Xv·Wv) in f64. */
static const double WQ[6] = {0.3, -0.2, 0.5, 0.1, -0.4, 0.7};
static const double WK[6] = {-0.6, 0.2, 0.4, 0.3, 0.1, -0.5};
static const double WV[6] = {0.2, 0.9, -0.3, 0.4, 0.6, -0.1};
static const double XV[9] = {0.5, -1.0, 0.25, 1.5, 0.0, -0.75, -0.5, 2.0, 1.0};
static const double OW[6] = {1.0, -0.5, 0.3, 2.0, -1.2, 0.7};

static qkv_tensor *attn_loss(qkv_ctx *c, qkv_tensor *xq, qkv_tensor *xk, qkv_tensor *xv) {
    qkv_tensor *wq = qkv_from_array(c, QKV_F64, 2, (int64_t[]){3, 2}, WQ);
    qkv_tensor *wk = qkv_from_array(c, QKV_F64, 2, (int64_t[]){3, 2}, WK);
    qkv_tensor *wv = qkv_from_array(c, QKV_F64, 2, (int64_t[]){3, 2}, WV);
    qkv_tensor *w = qkv_from_array(c, QKV_F64, 2, (int64_t[]){3, 2}, OW);
    qkv_tensor *y = qkv_attention(c, qkv_matmul(c, xq, wq), qkv_matmul(c, xk, wk),
                                  qkv_matmul(c, xv, wv), NULL, 0, NULL);
    return qkv_sum(c, qkv_mul(c, y, w));
}

START_TEST(test_x_feeds_q_k_v) {
    const int64_t xs[2] = {3, 3};
    /* X used three times */
    qkv_tensor *x = param_f64(ctx, 2, xs, XV);
    qkv_tensor *loss = attn_loss(ctx, x, x, x);
    qkv_backward(loss);
    /* three separate copies, one per role */
    qkv_ctx *c2 = qkv_ctx_new(0);
    qkv_tensor *xq = param_f64(c2, 2, xs, XV), *xk = param_f64(c2, 2, xs, XV),
               *xv = param_f64(c2, 2, xs, XV);
    qkv_tensor *loss2 = attn_loss(c2, xq, xk, xv);
    ck_assert_double_eq(qkv_get(loss, 0), qkv_get(loss2, 0));
    qkv_backward(loss2);
    double total_q = 0, total_k = 0;
    for (int64_t i = 0; i < 9; i++) {
        double sum = qkv_grad_get(xq, i) + qkv_grad_get(xk, i) + qkv_grad_get(xv, i);
        ck_assert_double_eq_tol(qkv_grad_get(x, i), sum, 1e-14);
        total_q += fabs(qkv_grad_get(xq, i));
        total_k += fabs(qkv_grad_get(xk, i));
    }
    /* each role really contributes (a backward that kept only the last use would fail above) */
    ck_assert_double_gt(total_q, 1e-3);
    ck_assert_double_gt(total_k, 1e-3);
    /* and the sum is the true derivative: central differences on the shared X */
    qkv_ctx *scratch = qkv_ctx_new(0);
    qkv_ctx_set_no_grad(scratch, true);
    double *xd = x->data;
    for (int64_t i = 0; i < 9; i++) {
        const double h = 1e-5, keep = xd[i];
        xd[i] = keep + h;
        qkv_ctx_reset(scratch);
        double fp = qkv_get(attn_loss(scratch, x, x, x), 0);
        xd[i] = keep - h;
        qkv_ctx_reset(scratch);
        double fm = qkv_get(attn_loss(scratch, x, x, x), 0);
        xd[i] = keep;
        ck_assert_double_eq_tol(qkv_grad_get(x, i), (fp - fm) / (2 * h), 1e-8);
    }
    qkv_ctx_free(scratch);
    qkv_ctx_free(c2);
}
END_TEST

/* ---- repeated backward, zero_grad ------------------------------------------------------ */

START_TEST(test_backward_twice_doubles_leaves) {
    const int64_t xs[2] = {3, 3};
    qkv_tensor *x = param_f64(ctx, 2, xs, XV);
    qkv_tensor *wq = qkv_param(ctx, qkv_from_array(ctx, QKV_F64, 2, (int64_t[]){3, 2}, WQ));
    qkv_tensor *w = qkv_from_array(ctx, QKV_F64, 2, (int64_t[]){3, 2}, OW);
    qkv_tensor *q = qkv_matmul(ctx, x, wq);
    qkv_tensor *y = qkv_attention(ctx, q, q, q, NULL, 0, NULL);
    qkv_tensor *loss = qkv_sum(ctx, qkv_mul(ctx, y, w));

    qkv_backward(loss);
    double gx[9], gw[6], gq[6], gy[6];
    for (int i = 0; i < 9; i++) gx[i] = qkv_grad_get(x, i);
    for (int i = 0; i < 6; i++) {
        gw[i] = qkv_grad_get(wq, i);
        gq[i] = qkv_grad_get(q, i);
        gy[i] = qkv_grad_get(y, i);
        ck_assert_double_eq(gy[i], OW[i]); /* d loss / d y = w */
    }
    ck_assert_double_ne(gx[0], 0.0);
    ck_assert_double_ne(gw[0], 0.0);

    qkv_backward(loss); /* no zero_grad: leaves accumulate, exactly twice (g + g is exact) */
    for (int i = 0; i < 9; i++) ck_assert_double_eq(qkv_grad_get(x, i), 2 * gx[i]);
    for (int i = 0; i < 6; i++) {
        ck_assert_double_eq(qkv_grad_get(wq, i), 2 * gw[i]);
        /* intermediates are recomputed, not accumulated */
        ck_assert_double_eq(qkv_grad_get(q, i), gq[i]);
        ck_assert_double_eq(qkv_grad_get(y, i), gy[i]);
    }
    ck_assert_double_eq(qkv_grad_get(loss, 0), 1.0);

    qkv_zero_grad(ctx);
    for (int i = 0; i < 9; i++) ck_assert_double_eq(qkv_grad_get(x, i), 0.0);
    for (int i = 0; i < 6; i++) ck_assert_double_eq(qkv_grad_get(wq, i), 0.0);

    qkv_backward(loss); /* after zeroing: the first result again, exactly */
    for (int i = 0; i < 9; i++) ck_assert_double_eq(qkv_grad_get(x, i), gx[i]);
    for (int i = 0; i < 6; i++) ck_assert_double_eq(qkv_grad_get(wq, i), gw[i]);
}
END_TEST

START_TEST(test_backward_twice_mini_model) {
    /* Every way a parameter collects gradient: embedding rows hit by repeated tokens, a bias
     * broadcast over positions, weights shared by every batch of a matmul (Q, K, V). Each is a
     * sum of many contributions into one entry; a second backward must still add exactly the
     * same gradient again. */
    qkv_rng rng = qkv_rng_seed(77);
    qkv_tensor *table = qkv_param(ctx, qkv_randn(ctx, QKV_F64, 2, (int64_t[]){5, 3}, 1.0, &rng));
    qkv_tensor *bias = qkv_param(ctx, qkv_randn(ctx, QKV_F64, 2, (int64_t[]){1, 3}, 1.0, &rng));
    qkv_tensor *w[3];
    for (int i = 0; i < 3; i++)
        w[i] = qkv_param(ctx, qkv_randn(ctx, QKV_F64, 2, (int64_t[]){3, 3}, 1.0, &rng));
    qkv_tensor *idx = qkv_from_array(ctx, QKV_I32, 2, (int64_t[]){2, 4},
                                     (int32_t[]){1, 3, 1, 1, 0, 1, 4, 3});
    qkv_tensor *x = qkv_add(ctx, qkv_embedding(ctx, table, idx), bias); /* (2,4,3) */
    qkv_tensor *y = qkv_attention(ctx, qkv_matmul(ctx, x, w[0]), qkv_matmul(ctx, x, w[1]),
                                  qkv_matmul(ctx, x, w[2]), qkv_mask_causal(ctx, QKV_F64, 4, 4),
                                  0, NULL);
    qkv_tensor *ow = qkv_randn(ctx, QKV_F64, 3, (int64_t[]){2, 4, 3}, 1.0, &rng);
    qkv_tensor *loss = qkv_sum(ctx, qkv_mul(ctx, y, ow));
    qkv_tensor *leaves[5] = {table, bias, w[0], w[1], w[2]};
    double first[5][15];
    qkv_backward(loss);
    for (int l = 0; l < 5; l++)
        for (int64_t i = 0; i < leaves[l]->size; i++) first[l][i] = qkv_grad_get(leaves[l], i);
    ck_assert_double_ne(first[0][3], 0.0); /* row 1 of the table: tokens at 4 positions */
    ck_assert_double_eq(first[0][2 * 3], 0.0); /* row 2: no token uses it */
    /* after k calls each entry is exactly g + g + ... + g (k terms, summed left to right) */
    double expect[5][15];
    memcpy(expect, first, sizeof expect);
    for (int round = 2; round <= 4; round++) {
        qkv_backward(loss);
        for (int l = 0; l < 5; l++)
            for (int64_t i = 0; i < leaves[l]->size; i++) {
                expect[l][i] += first[l][i];
                ck_assert_msg(qkv_grad_get(leaves[l], i) == expect[l][i],
                              "call %d, leaf %d entry %lld: %.17g, want %.17g", round, l,
                              (long long)i, qkv_grad_get(leaves[l], i), expect[l][i]);
            }
    }
}
END_TEST

START_TEST(test_zero_grad_only_own_ctx) {
    qkv_ctx *other = qkv_ctx_new(0);
    qkv_tensor *a = qkv_param(ctx, qkv_ones(ctx, QKV_F32, 1, (int64_t[]){3}));
    qkv_tensor *b = qkv_param(other, qkv_ones(other, QKV_F32, 1, (int64_t[]){3}));
    qkv_backward(qkv_sum(ctx, qkv_mul(ctx, a, b)));
    for (int i = 0; i < 3; i++) {
        ck_assert_double_eq(qkv_grad_get(a, i), 1.0);
        ck_assert_double_eq(qkv_grad_get(b, i), 1.0);
    }
    qkv_zero_grad(ctx);
    for (int i = 0; i < 3; i++) {
        ck_assert_double_eq(qkv_grad_get(a, i), 0.0);
        ck_assert_double_eq(qkv_grad_get(b, i), 1.0);
    }
    qkv_zero_grad(other);
    for (int i = 0; i < 3; i++) ck_assert_double_eq(qkv_grad_get(b, i), 0.0);
    qkv_ctx_free(other);
}
END_TEST

START_TEST(test_backward_from_earlier_loss) {
    /* Two losses in one context: backward from each gives only its own gradient, whatever
     * else is on the tape. */
    qkv_tensor *x = param_f64(ctx, 1, (int64_t[]){3}, (double[]){1, 2, 3});
    qkv_tensor *l1 = qkv_sum(ctx, x);                  /* dl1/dx = 1 */
    qkv_tensor *l2 = qkv_sum(ctx, qkv_mul(ctx, x, x)); /* dl2/dx = 2x */
    qkv_backward(l2);
    for (int i = 0; i < 3; i++) ck_assert_double_eq(qkv_grad_get(x, i), 2.0 * (i + 1));
    qkv_zero_grad(ctx);
    qkv_backward(l1);
    for (int i = 0; i < 3; i++) ck_assert_double_eq(qkv_grad_get(x, i), 1.0);
}
END_TEST

START_TEST(test_non_param_inputs_get_no_grad) {
    qkv_tensor *x = qkv_ones(ctx, QKV_F64, 1, (int64_t[]){3}); /* data, not a parameter */
    qkv_tensor *w = param_f64(ctx, 1, (int64_t[]){3}, (double[]){1, 2, 3});
    qkv_tensor *y = qkv_mul(ctx, x, w);
    ck_assert(y->requires_grad);
    ck_assert(!x->requires_grad);
    qkv_backward(qkv_sum(ctx, y));
    ck_assert_ptr_null(x->grad);
    for (int i = 0; i < 3; i++) ck_assert_double_eq(qkv_grad_get(w, i), 1.0);
    /* an op of non-parameters only needs no gradient */
    ck_assert(!qkv_scale(ctx, x, 2.0)->requires_grad);
}
END_TEST

/* ---- a deep graph ------------------------------------------------------------------------ */

START_TEST(test_deep_chain_no_recursion) {
    /* 100000 scale ops alternating ×2 and ×0.5. With the stack limited to 512 KiB a recursive
     * backward (at least tens of bytes per level, 100000 levels deep) would overflow it. */
    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_STACK, &old), 0);
    lim = old;
    if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur > 512 * 1024) lim.rlim_cur = 512 * 1024;
    ck_assert_int_eq(setrlimit(RLIMIT_STACK, &lim), 0);

    qkv_tensor *x = param_f64(ctx, 0, NULL, (double[]){1.5});
    qkv_tensor *t = x;
    enum { DEPTH = 100000 };
    for (int i = 0; i < DEPTH; i++) t = qkv_scale(ctx, t, i % 2 ? 0.5 : 2.0);
    ck_assert_double_eq(qkv_get(t, 0), 1.5);
    qkv_backward(t);
    ck_assert_double_eq(qkv_grad_get(x, 0), 1.0);
    /* an odd depth would leave a factor 2: check the count really matters */
    t = qkv_scale(ctx, t, 2.0);
    qkv_zero_grad(ctx);
    qkv_backward(t);
    ck_assert_double_eq(qkv_grad_get(x, 0), 2.0);

    setrlimit(RLIMIT_STACK, &old);
}
END_TEST

/* ---- SGD --------------------------------------------------------------------------------- */

START_TEST(test_sgd_step) {
    const float p0[4] = {1.0f, -2.0f, 0.5f, 3.0f};
    const float c[4] = {0.25f, -1.5f, 2.0f, 0.0f};
    const double d0[3] = {0.1, 0.2, 0.3}, dc[3] = {-1.0, 4.0, 0.5};
    qkv_tensor *p = qkv_param(ctx, qkv_from_array(ctx, QKV_F32, 1, (int64_t[]){4}, p0));
    qkv_tensor *d = param_f64(ctx, 1, (int64_t[]){3}, d0);
    qkv_tensor *data = qkv_from_array(ctx, QKV_F32, 1, (int64_t[]){4}, p0); /* not a param */
    qkv_tensor *cf = qkv_from_array(ctx, QKV_F32, 1, (int64_t[]){4}, c);
    qkv_tensor *cd = qkv_from_array(ctx, QKV_F64, 1, (int64_t[]){3}, dc);
    /* loss = Σ p⊙c + Σ d⊙dc (two dtypes): grad p = c, grad d = dc */
    qkv_backward(qkv_sum(ctx, qkv_mul(ctx, p, cf)));
    qkv_backward(qkv_sum(ctx, qkv_mul(ctx, d, cd)));
    const float lr = 0.1f;
    qkv_sgd_step(ctx, lr);
    for (int i = 0; i < 4; i++) {
        float want = p0[i] - lr * c[i];
        ck_assert_float_eq_tol((float)qkv_get(p, i), want, 1e-6f);
        ck_assert_double_eq(qkv_get(data, i), p0[i]); /* untouched */
        ck_assert_double_eq(qkv_grad_get(p, i), c[i]); /* the step does not clear gradients */
    }
    for (int i = 0; i < 3; i++)
        ck_assert_double_eq_tol(qkv_get(d, i), d0[i] - (double)lr * dc[i], 1e-15);
    ck_assert_float_eq(((float *)p->data)[0], 1.0f - 0.1f * 0.25f);
    /* a second step with the same gradient moves by the same amount again */
    qkv_sgd_step(ctx, lr);
    ck_assert_double_eq_tol(qkv_get(d, 1), d0[1] - 2 * (double)lr * dc[1], 1e-15);
}
END_TEST

START_TEST(test_sgd_descends) {
    /* minimise mse(W·x, t) for a fixed x: the loss must fall step after step */
    qkv_rng rng = qkv_rng_seed(8);
    qkv_tensor *w = qkv_param(ctx, qkv_randn(ctx, QKV_F64, 2, (int64_t[]){3, 4}, 0.5, &rng));
    qkv_ctx *step = qkv_ctx_new(0);
    qkv_tensor *x = qkv_randn(ctx, QKV_F64, 2, (int64_t[]){5, 3}, 1.0, &rng);
    qkv_tensor *t = qkv_randn(ctx, QKV_F64, 2, (int64_t[]){5, 4}, 1.0, &rng);
    double prev = INFINITY;
    for (int it = 0; it < 20; it++) {
        qkv_ctx_reset(step);
        qkv_tensor *loss = qkv_mse(step, qkv_matmul(step, x, w), t);
        ck_assert_double_lt(qkv_get(loss, 0), prev);
        prev = qkv_get(loss, 0);
        qkv_zero_grad(ctx);
        qkv_backward(loss);
        qkv_sgd_step(ctx, 0.1f);
    }
    qkv_ctx_free(step);
}
END_TEST

static void collect(qkv_tensor *p, void *user) {
    qkv_tensor **list = user;
    while (*list) list++;
    *list = p;
}

START_TEST(test_for_params_order) {
    qkv_tensor *a = qkv_param(ctx, qkv_ones(ctx, QKV_F32, 1, (int64_t[]){1}));
    qkv_ones(ctx, QKV_F32, 1, (int64_t[]){1}); /* not a param */
    qkv_tensor *b = qkv_param(ctx, qkv_ones(ctx, QKV_F64, 1, (int64_t[]){2}));
    qkv_tensor *c = qkv_param(ctx, qkv_ones(ctx, QKV_F32, 1, (int64_t[]){3}));
    qkv_tensor *seen[8] = {0};
    qkv_ctx_for_params(ctx, collect, seen);
    ck_assert_ptr_eq(seen[0], a);
    ck_assert_ptr_eq(seen[1], b);
    ck_assert_ptr_eq(seen[2], c);
    ck_assert_ptr_null(seen[3]);
}
END_TEST

START_TEST(test_many_params) {
    /* more parameters than the initial registry holds */
    qkv_tensor *p[40];
    for (int i = 0; i < 40; i++)
        p[i] = qkv_param(ctx, qkv_scalar(ctx, QKV_F64, (double)i));
    qkv_tensor *s = p[0];
    for (int i = 1; i < 40; i++) s = qkv_add(ctx, s, p[i]);
    qkv_backward(s);
    qkv_sgd_step(ctx, 1.0f);
    for (int i = 0; i < 40; i++) ck_assert_double_eq(qkv_get(p[i], 0), i - 1.0);
}
END_TEST

/* A side computation on the same tape that the loss does not depend on is left alone: here
 * masked scores times a parameter would put 0·(−inf) = NaN into the parameter's gradient if
 * its backward ran. */
START_TEST(test_side_computation_untouched) {
    qkv_ctx *ctx = qkv_ctx_new(0);
    qkv_rng rng = qkv_rng_seed(3);
    qkv_tensor *w = qkv_param(ctx, qkv_randn(ctx, QKV_F64, 2, (int64_t[]){2, 2}, 1.0, &rng));
    qkv_tensor *side = qkv_mask(ctx, qkv_ones(ctx, QKV_F64, 2, (int64_t[]){2, 2}),
                                qkv_mask_causal(ctx, QKV_F64, 2, 2));
    qkv_tensor *unused = qkv_sum(ctx, qkv_mul(ctx, w, side)); /* depends on w, not on the loss */
    (void)unused;
    qkv_tensor *loss = qkv_sum(ctx, qkv_mul(ctx, w, w));
    qkv_backward(loss);
    for (int64_t i = 0; i < 4; i++)
        ck_assert_double_eq_tol(qkv_grad_get(w, i), 2 * qkv_get(w, i), 1e-15);
    qkv_ctx_free(ctx);
}
END_TEST

/* ---- the first write of a gradient stores, the later ones add -------------------------- */

/* h = X·W (an intermediate, 2×4) feeds an op that stores its input's gradient on the first
 * write (transpose), one the engine zeroes for (scale), and a view of it (reshape) feeding a
 * product: in either order of creation, dh is the sum of all three, every value exact in f64.
 *   loss = Σ C1 ⊙ hᵀ + Σ C2 ⊙ (2h) + Σ (reshape(h, 4×2)·v), v = (1, 3)ᵀ */
static void check_mixed_consumers(bool transpose_first) {
    qkv_tensor *x = mkp(QKV_F64, 2, (int64_t[]){2, 3}, (double[]){1, 2, 0, -1, 0.5, 3});
    qkv_tensor *w = mkp(QKV_F64, 2, (int64_t[]){3, 4},
                        (double[]){1, 0, 2, -1, 0.5, 1, 0, 2, -2, 1, 1, 0});
    qkv_tensor *h = qkv_matmul(ctx, x, w);
    qkv_tensor *c1 = mk(QKV_F64, 2, (int64_t[]){4, 2}, (double[]){1, 2, 3, 4, 5, 6, 7, 8});
    qkv_tensor *c2 = mk(QKV_F64, 2, (int64_t[]){2, 4}, (double[]){-1, 0.5, 0, 2, 1, -3, 4, 0.25});
    qkv_tensor *v = mk(QKV_F64, 2, (int64_t[]){2, 1}, (double[]){1, 3});
    qkv_tensor *terms[3];
    int first = transpose_first ? 0 : 1, second = 1 - first;
    terms[first] = qkv_sum(ctx, qkv_mul(ctx, qkv_transpose(ctx, h, 0, 1), c1));
    terms[second] = qkv_sum(ctx, qkv_mul(ctx, qkv_scale(ctx, h, 2.0), c2));
    terms[2] = qkv_sum(ctx, qkv_matmul(ctx, qkv_reshape(ctx, h, 2, (int64_t[]){4, 2}), v));
    qkv_backward(qkv_add(ctx, qkv_add(ctx, terms[0], terms[1]), terms[2]));
    /* dh[i][j] = C1[j][i] + 2·C2[i][j] + v[(4i + j) mod 2] */
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++) {
            double want = qkv_get(c1, j * 2 + i) + 2 * qkv_get(c2, i * 4 + j) + qkv_get(v, j % 2);
            ck_assert_double_eq(qkv_grad_get(h, i * 4 + j), want);
        }
}

START_TEST(test_first_write_mixed_consumers) {
    check_mixed_consumers(true);
    qkv_ctx_reset(ctx);
    check_mixed_consumers(false);
}
END_TEST

/* Every op has its row of op_table: a name, and a backward (the leaf none). A row missing
 * from the end stops the build (its _Static_assert); one missing from the middle is zeros. */
START_TEST(test_op_table) {
    ck_assert(op_table[QKV_OP_NONE].backward == NULL);
    for (int op = 0; op < QKV_OP_COUNT; op++) {
        ck_assert_msg(op_table[op].name != NULL, "op %d has no row in op_table", op);
        ck_assert_str_eq(qkv_op_name((qkv_op)op), op_table[op].name);
        ck_assert_msg(op == QKV_OP_NONE || op_table[op].backward, "op %s has no backward",
                      op_table[op].name);
        ck_assert_int_lt(op_table[op].part, PROFILE_PART_COUNT);
        for (int other = 0; other < op; other++)
            ck_assert_str_ne(op_table[other].name, op_table[op].name);
    }
    ck_assert_str_eq(qkv_op_name(QKV_OP_COUNT), "?");
}
END_TEST

/* relu, gelu and the LayerNorm's two ops store their inputs' gradients on the first write and add on the
 * later ones. h = 1·X (an intermediate) feeds all three, LayerNorm as its x, its gain and its
 * bias at once (h is 1-D, of C elements). dX must be the sum of what each use gives alone,
 * each from its own graph (LayerNorm's three slots one at a time, the other two given X's
 * values as constants) and summed in X's gradient (leaves accumulate over passes). The orders
 * of the sums differ: equal to f64 rounding. */
static qkv_tensor *mlp_use(qkv_ctx *c, qkv_tensor *x, qkv_tensor *w, int use) {
    qkv_tensor *h = qkv_scale(c, x, 1.0), *y;
    qkv_tensor *k = qkv_from_array(c, QKV_F64, x->ndim, x->shape, x->data); /* no gradient */
    switch (use) {
    case 0: y = qkv_relu(c, h); break;
    case 1: y = qkv_gelu(c, h, QKV_ACT_GELU); break;
    case 2: y = qkv_gelu(c, h, QKV_ACT_GELU_TANH); break;
    case 3: y = qkv_layernorm(c, h, k, k, QKV_LAYERNORM_EPS); break;
    case 4: y = qkv_layernorm(c, k, h, k, QKV_LAYERNORM_EPS); break;
    default: y = qkv_layernorm(c, k, k, h, QKV_LAYERNORM_EPS); break;
    }
    return qkv_sum(c, qkv_mul(c, y, w));
}

START_TEST(test_mlp_ops_first_write) {
    qkv_tensor *x = param_f64(ctx, 1, (int64_t[]){5}, (double[]){-1.5, 0.3, 2, -0.2, 0.9});
    qkv_tensor *w = qkv_from_array(ctx, QKV_F64, 1, (int64_t[]){5},
                                   (double[]){0.5, -1, 2, 1.5, -0.75});
    double alone[5] = {0};
    for (int use = 0; use < 6; use++) {
        qkv_ctx *c = qkv_ctx_new(0);
        qkv_zero_grad(ctx);
        qkv_backward(mlp_use(c, x, w, use));
        double total = 0;
        for (int i = 0; i < 5; i++) alone[i] += qkv_grad_get(x, i), total += fabs(qkv_grad_get(x, i));
        ck_assert_msg(total > 0, "use %d gives no gradient", use);
        qkv_ctx_free(c);
    }
    /* all four uses of one h in one graph */
    qkv_zero_grad(ctx);
    qkv_ctx *c = qkv_ctx_new(0);
    qkv_tensor *h = qkv_scale(c, x, 1.0);
    qkv_tensor *ys[4] = {qkv_relu(c, h), qkv_gelu(c, h, QKV_ACT_GELU),
                         qkv_gelu(c, h, QKV_ACT_GELU_TANH),
                         qkv_layernorm(c, h, h, h, QKV_LAYERNORM_EPS)};
    qkv_tensor *loss = qkv_sum(c, qkv_mul(c, ys[0], w));
    for (int u = 1; u < 4; u++) loss = qkv_add(c, loss, qkv_sum(c, qkv_mul(c, ys[u], w)));
    qkv_backward(loss);
    for (int i = 0; i < 5; i++)
        ck_assert_msg(fabs(qkv_grad_get(x, i) - alone[i]) <= 1e-13 * fmax(1, fabs(alone[i])),
                      "dX[%d]: %.17g in one graph, %.17g from each use alone", i,
                      qkv_grad_get(x, i), alone[i]);
    qkv_ctx_free(c);
}
END_TEST

/* A gradient nothing writes in a pass reads as zeros, not as the arena's old bytes. h = X·W
 * reaches the loss only through an op built in no-grad mode, whose backward never runs: h's
 * own backward still runs (h is marked and needs a gradient), and must find zeros, so W's
 * gradient is exactly 0, although the same memory held the gradients of the round before
 * (the first round grows the arena; from the second on, each round's tensors take the same
 * places). */
START_TEST(test_unwritten_gradient_is_zero) {
    qkv_ctx *params = qkv_ctx_new(0), *step = qkv_ctx_new(0);
    qkv_rng rng = qkv_rng_seed(5);
    qkv_tensor *w = qkv_param(params, qkv_randn(params, QKV_F32, 2, (int64_t[]){4, 3}, 1, &rng));
    qkv_tensor *p = qkv_param(params, qkv_randn(params, QKV_F32, 2, (int64_t[]){2, 3}, 1, &rng));
    qkv_tensor *x = qkv_randn(params, QKV_F32, 2, (int64_t[]){2, 4}, 1, &rng);
    for (int round = 0; round < 3; round++) {
        bool cut = round == 2;
        qkv_ctx_reset(step);
        qkv_zero_grad(params);
        qkv_tensor *h = qkv_matmul(step, x, w);
        qkv_ctx_set_no_grad(step, cut);
        qkv_tensor *y = qkv_scale(step, h, 2.0);
        qkv_ctx_set_no_grad(step, false);
        qkv_backward(qkv_sum(step, qkv_mul(step, y, p)));
        for (int64_t i = 0; i < w->size; i++)
            ck_assert_msg((qkv_grad_get(w, i) == 0) == cut, "round %d: dW[%lld] = %g", round,
                          (long long)i, qkv_grad_get(w, i));
        if (cut)
            for (int64_t i = 0; i < h->size; i++) ck_assert(qkv_grad_get(h, i) == 0);
    }
    qkv_ctx_free(step);
    qkv_ctx_free(params);
}
END_TEST

/* The fused attention stores the gradients of q, k and v when nothing has written them yet
 * (ops/attention_fused.c). Each case runs it twice on the same values: on leaves (whose
 * gradients are always added to a zeroed buffer) and on intermediates x·1 (whose gradients
 * the kernel stores: per head, per group of query blocks, each group's partials); the
 * leaves' gradients must be the same bits. Also: q, k and v one intermediate (their
 * gradients share memory: the kernel must add, not store over what the others wrote), and
 * an intermediate that another op reads too, that op's backward running first or last. */
typedef enum { ROLES_APART, ROLES_ONE_TENSOR, ROLES_SHARED_FIRST, ROLES_SHARED_LAST } roles;

static qkv_tensor *fused_loss(qkv_ctx *c, qkv_tensor *q, qkv_tensor *k, qkv_tensor *v,
                              qkv_tensor *mask, qkv_tensor *w, qkv_tensor *other, roles r) {
    qkv_tensor *extra = NULL;
    if (r == ROLES_SHARED_FIRST) extra = qkv_sum(c, qkv_scale(c, other, 0.75));
    qkv_tensor *y = qkv_attention_fused(c, q, r == ROLES_ONE_TENSOR ? q : k,
                                        r == ROLES_ONE_TENSOR ? q : v, mask, 0);
    qkv_tensor *loss = qkv_sum(c, qkv_mul(c, y, w));
    if (r == ROLES_SHARED_LAST) extra = qkv_sum(c, qkv_scale(c, other, 0.75));
    return extra ? qkv_add(c, loss, extra) : loss;
}

static void check_fused_stores(qkv_dtype dt, int64_t B, int64_t H, int64_t Nq, int64_t Nk,
                               int64_t D, bool causal, roles r) {
    qkv_ctx *params = qkv_ctx_new(0), *step = qkv_ctx_new(0);
    qkv_rng rng = qkv_rng_seed(11);
    int64_t sq[4] = {B, H, Nq, D}, sk[4] = {B, H, Nk, D};
    qkv_tensor *leaf[3], *twin[3];
    for (int i = 0; i < 3; i++) {
        const int64_t *shape = i == 0 || r == ROLES_ONE_TENSOR ? sq : sk;
        leaf[i] = qkv_param(params, qkv_randn(params, dt, 4, shape, 1.0, &rng));
        twin[i] = qkv_param(params, qkv_zeros(params, dt, 4, shape));
        memcpy(twin[i]->data, leaf[i]->data, (size_t)leaf[i]->size * qkv_dtype_size(dt));
    }
    qkv_tensor *w = qkv_randn(params, dt, 4, sq, 1.0, &rng);
    qkv_tensor *mask = causal ? qkv_mask_causal(params, dt, Nq, Nk) : NULL;
    /* twice: the second round's gradients and scratch lie where the first round's were, so a
     * gradient added to without being zeroed shows */
    for (int round = 0; round < 2; round++) {
        qkv_ctx_reset(step);
        qkv_zero_grad(params);
        qkv_backward(fused_loss(step, leaf[0], leaf[1], leaf[2], mask, w, leaf[0], r));
        qkv_tensor *mid[3];
        for (int i = 0; i < 3; i++) mid[i] = qkv_scale(step, twin[i], 1.0);
        qkv_backward(fused_loss(step, mid[0], mid[1], mid[2], mask, w, mid[0], r));
        for (int i = 0; i < (r == ROLES_ONE_TENSOR ? 1 : 3); i++) {
            size_t bytes = (size_t)leaf[i]->size * qkv_dtype_size(dt);
            double total = 0;
            for (int64_t e = 0; e < leaf[i]->size; e++) total += fabs(qkv_grad_get(leaf[i], e));
            ck_assert_msg(total > 0, "%s: gradient %d is all zeros", qkv_dtype_name(dt), i);
            ck_assert_msg(memcmp(leaf[i]->grad, twin[i]->grad, bytes) == 0,
                          "%s %s (%lld, %lld, %lld, %lld, %lld)%s roles %d round %d: gradient %d "
                          "through an intermediate differs from the leaf's", qkv_attention_form(),
                          qkv_dtype_name(dt), (long long)B, (long long)H, (long long)Nq,
                          (long long)Nk, (long long)D, causal ? " causal" : "", (int)r, round, i);
        }
    }
    qkv_ctx_free(step);
    qkv_ctx_free(params);
}

/* Every store case under both forms, with the current thread count; `two_pass_shapes` adds
 * the shapes whose backward runs in two passes on 16 threads. */
static void check_all_stores(bool two_pass_shapes) {
    const qkv_dtype dts[] = {QKV_F32, QKV_F64};
    /* the default form stores; "legacy" only adds, so the op zeroes the gradients for it */
    const char *forms[] = {"d-from-p", "legacy"};
    for (int f = 0; f < 2; f++) {
        for (int d = 0; d < 2; d++) {
            ck_assert(qkv_set_attention_form(forms[f]));
            if (two_pass_shapes) check_fused_stores(dts[d], 1, 1, 320, 300, 32, true, ROLES_APART);
            /* 8 heads and more: one task a head, every gradient direct */
            check_fused_stores(dts[d], 2, 4, 20, 33, 8, false, ROLES_APART);
            /* fewer heads: groups of query blocks with partial dK and dV (2 groups of 1 block;
             * 4 groups of 2 of 5 blocks, the last group empty) */
            check_fused_stores(dts[d], 2, 2, 70, 90, 8, true, ROLES_APART);
            check_fused_stores(dts[d], 1, 1, 257, 129, 16, false, ROLES_APART);
            for (roles r = ROLES_ONE_TENSOR; r <= ROLES_SHARED_LAST; r++) {
                check_fused_stores(dts[d], 2, 4, 20, 20, 8, false, r);
                check_fused_stores(dts[d], 1, 1, 150, 150, 8, true, r);
                if (two_pass_shapes) check_fused_stores(dts[d], 1, 1, 320, 320, 32, false, r);
            }
        }
    }
    ck_assert(qkv_set_attention_form("d-from-p"));
}

START_TEST(test_fused_attention_stores) { check_all_stores(false); }
END_TEST

#ifdef QKV_HAVE_OPENMP
/* On 16 threads the default form's backward runs in two passes (queries, then keys) where the
 * query groups are fewer than half the loop's threads and each pass has more tasks, as on one
 * head of 320 with Dk = Dv = 32 (5 query and 5 key blocks against 4 groups; work for 12
 * threads and more, kernel_team): the same stores and adds there. */
START_TEST(test_fused_attention_stores_two_passes) {
    int saved = qkv_threads();
    qkv_set_threads(16);
    check_all_stores(true);
    qkv_set_threads(saved);
}
END_TEST
#endif

/* qkv_attention_heads (heads side by side in each row) against the same heads split out,
 * fused and merged back (reshape, transpose, qkv_attention_fused, transpose, reshape): the
 * output and the gradients of q, k and v must be the same bits. q, k and v are
 * intermediates x·1, so the kernel stores their gradients where it can, in either layout. */
static qkv_tensor *heads_loss(qkv_ctx *c, qkv_tensor *const x[3], qkv_tensor *mask,
                              qkv_tensor *w, int64_t H, bool split, qkv_tensor **out) {
    qkv_tensor *in[3];
    for (int i = 0; i < 3; i++) in[i] = qkv_scale(c, x[i], 1.0);
    int64_t B = x[0]->shape[0], Nq = x[0]->shape[1];
    qkv_tensor *y;
    if (split) {
        qkv_tensor *sp[3];
        for (int i = 0; i < 3; i++) {
            int64_t N = x[i]->shape[1], D = x[i]->shape[2] / H;
            sp[i] = qkv_transpose(c, qkv_reshape(c, in[i], 4, (int64_t[]){B, N, H, D}), 1, 2);
        }
        y = qkv_attention_fused(c, sp[0], sp[1], sp[2], mask, 0);
        y = qkv_reshape(c, qkv_transpose(c, y, 1, 2), 3, (int64_t[]){B, Nq, x[2]->shape[2]});
    } else {
        y = qkv_attention_heads(c, in[0], in[1], in[2], mask, (int)H, 0);
    }
    *out = y;
    return qkv_sum(c, qkv_mul(c, y, w));
}

/* mask: 0 none, 1 causal (Nq, Nk), 2 padding (B, 1, 1, Nk) with a batch entry of no keys */
static qkv_tensor *heads_mask(qkv_ctx *c, qkv_dtype dt, int mask_kind, int64_t B, int64_t Nq,
                              int64_t Nk) {
    if (mask_kind == 1) return qkv_mask_causal(c, dt, Nq, Nk);
    if (mask_kind != 2) return NULL;
    int32_t lengths[4];
    for (int64_t b = 0; b < B; b++) lengths[b] = b == 0 ? 0 : (int32_t)(Nk - 3 * b);
    return qkv_mask_padding(c, dt, B, Nk, lengths);
}

/* mask_kind as heads_mask's */
static void check_heads_form(qkv_dtype dt, int64_t B, int64_t H, int64_t Nq, int64_t Nk,
                             int64_t Dk, int64_t Dv, int mask_kind) {
    qkv_ctx *params = qkv_ctx_new(0), *step = qkv_ctx_new(0);
    qkv_rng rng = qkv_rng_seed(12);
    int64_t shapes[3][3] = {{B, Nq, H * Dk}, {B, Nk, H * Dk}, {B, Nk, H * Dv}};
    qkv_tensor *x[3], *twin[3];
    for (int i = 0; i < 3; i++) {
        x[i] = qkv_param(params, qkv_randn(params, dt, 3, shapes[i], 1.0, &rng));
        twin[i] = qkv_param(params, qkv_zeros(params, dt, 3, shapes[i]));
        memcpy(twin[i]->data, x[i]->data, (size_t)x[i]->size * qkv_dtype_size(dt));
    }
    qkv_tensor *w = qkv_randn(params, dt, 3, (int64_t[]){B, Nq, H * Dv}, 1.0, &rng);
    qkv_tensor *mask = heads_mask(params, dt, mask_kind, B, Nq, Nk);
    qkv_zero_grad(params);
    qkv_tensor *y_heads, *y_split;
    qkv_backward(heads_loss(step, x, mask, w, H, false, &y_heads));
    qkv_backward(heads_loss(step, twin, mask, w, H, true, &y_split));
    char what[160];
    snprintf(what, sizeof what, "%s %s B %lld H %lld Nq %lld Nk %lld Dk %lld Dv %lld mask %d",
             qkv_attention_form(), qkv_dtype_name(dt), (long long)B, (long long)H, (long long)Nq,
             (long long)Nk, (long long)Dk, (long long)Dv, mask_kind);
    size_t es = qkv_dtype_size(dt);
    ck_assert_msg(y_heads->size == y_split->size &&
                      memcmp(y_heads->data, y_split->data, (size_t)y_heads->size * es) == 0,
                  "%s: the heads form's output differs from split, fused, merged", what);
    for (int i = 0; i < 3; i++) {
        double total = 0;
        for (int64_t e = 0; e < x[i]->size; e++) total += fabs(qkv_grad_get(x[i], e));
        ck_assert_msg(total > 0, "%s: gradient %d is all zeros", what, i);
        ck_assert_msg(memcmp(x[i]->grad, twin[i]->grad, (size_t)x[i]->size * es) == 0,
                      "%s: gradient %d of the heads form differs from split, fused, merged",
                      what, i);
    }
    qkv_ctx_free(step);
    qkv_ctx_free(params);
}

/* The attention shapes that the heads-form and kept-P checks run, in both dtypes: one task a
 * head (8 heads), groups of query blocks with partial dK and dV (causal, cross, Dk ≠ Dv),
 * edge tiles of every size, rows of 16 (which the products read in place), one head of 257
 * and of 300 queries, and a padding mask with an entry of no keys; with `two_passes` (16
 * threads), the shapes whose backward runs in two passes. */
typedef void attention_check(qkv_dtype dt, int64_t B, int64_t H, int64_t Nq, int64_t Nk,
                             int64_t Dk, int64_t Dv, int mask_kind);
static void each_attention_shape(attention_check *check, bool two_passes) {
    static const int64_t one_pass[][7] = { /* B, H, Nq, Nk, Dk, Dv, mask kind */
        {2, 4, 20, 33, 8, 8, 0},      {2, 2, 70, 90, 8, 4, 1},     {2, 3, 130, 70, 16, 32, 2},
        {1, 1, 257, 129, 16, 16, 0}, {1, 1, 300, 129, 16, 16, 0}, {4, 4, 16, 16, 16, 16, 1}};
    static const int64_t two[][7] = {{1, 2, 320, 320, 16, 16, 1}, {1, 1, 320, 300, 32, 32, 0}};
    const int64_t(*shapes)[7] = two_passes ? two : one_pass;
    size_t n = two_passes ? sizeof two / sizeof two[0] : sizeof one_pass / sizeof one_pass[0];
    const qkv_dtype dts[] = {QKV_F32, QKV_F64};
    for (int d = 0; d < 2; d++)
        for (size_t i = 0; i < n; i++)
            check(dts[d], shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], shapes[i][4],
                  shapes[i][5], (int)shapes[i][6]);
}

/* The default backward form and "legacy" (the older forms' code: by key groups, with partial
 * dQ; split-l and wide-d differ from it only in the row terms), on every shape above. */
static void check_heads_forms(bool two_passes) {
    const char *forms[] = {"d-from-p", "legacy"};
    for (int f = 0; f < 2; f++) {
        ck_assert(qkv_set_attention_form(forms[f]));
        each_attention_shape(check_heads_form, two_passes);
    }
    ck_assert(qkv_set_attention_form("d-from-p"));
}

START_TEST(test_attention_heads_form) { check_heads_forms(false); }
END_TEST

#ifdef QKV_HAVE_OPENMP
START_TEST(test_attention_heads_form_two_passes) {
    int saved = qkv_threads();
    qkv_set_threads(16);
    check_heads_forms(true);
    qkv_set_threads(saved);
}
END_TEST
#endif

/* The forward pass keeps P where attention_kept_probs's rule allows (attention_probs
 * "auto"), and the backward pass then reads it instead of recomputing each tile. Kept or
 * recomputed, the output, the log-sum-exp and the gradients of q, k and v must be the same
 * bits. mask_kind as heads_mask's. */
static void check_kept_probs(qkv_dtype dt, int64_t B, int64_t H, int64_t Nq, int64_t Nk,
                             int64_t Dk, int64_t Dv, int mask_kind) {
    qkv_ctx *params = qkv_ctx_new(0), *step = qkv_ctx_new(0);
    qkv_rng rng = qkv_rng_seed(13);
    int64_t shapes[3][3] = {{B, Nq, H * Dk}, {B, Nk, H * Dk}, {B, Nk, H * Dv}};
    qkv_tensor *x[3];
    for (int i = 0; i < 3; i++)
        x[i] = qkv_param(params, qkv_randn(params, dt, 3, shapes[i], 2.0, &rng));
    qkv_tensor *w = qkv_randn(params, dt, 3, (int64_t[]){B, Nq, H * Dv}, 1.0, &rng);
    qkv_tensor *mask = heads_mask(params, dt, mask_kind, B, Nq, Nk);
    size_t es = qkv_dtype_size(dt), n_out = (size_t)(B * Nq * H * Dv), n_lse = (size_t)(2 * B * H * Nq);
    void *out[2], *lse[2], *grad[2][3];
    const char *modes[] = {"keep", "recompute"};
    char what[160];
    snprintf(what, sizeof what, "%s B %lld H %lld Nq %lld Nk %lld Dk %lld Dv %lld mask %d on %d "
             "threads", qkv_dtype_name(dt), (long long)B, (long long)H, (long long)Nq,
             (long long)Nk, (long long)Dk, (long long)Dv, mask_kind, qkv_threads());
    for (int m = 0; m < 2; m++) {
        ck_assert(qkv_set_attention_probs(modes[m]));
        qkv_ctx_reset(step);
        qkv_zero_grad(params);
        qkv_tensor *in[3];
        for (int i = 0; i < 3; i++) in[i] = qkv_scale(step, x[i], 1.0);
        qkv_tensor *y = qkv_attention_heads(step, in[0], in[1], in[2], mask, (int)H, 0);
        ck_assert_msg(y->iparam[1] == (m == 0), "%s: P %s", what, m == 0 ? "not kept" : "kept");
        qkv_backward(qkv_sum(step, qkv_mul(step, y, w)));
        out[m] = malloc(n_out * es), lse[m] = malloc(n_lse * es);
        memcpy(out[m], y->data, n_out * es);
        memcpy(lse[m], y->saved, n_lse * es);
        for (int i = 0; i < 3; i++) {
            size_t bytes = (size_t)x[i]->size * es;
            grad[m][i] = malloc(bytes);
            memcpy(grad[m][i], x[i]->grad, bytes);
        }
    }
    ck_assert_msg(memcmp(out[0], out[1], n_out * es) == 0, "%s: the outputs differ", what);
    ck_assert_msg(memcmp(lse[0], lse[1], n_lse * es) == 0, "%s: the log-sum-exps differ", what);
    for (int i = 0; i < 3; i++) {
        double total = 0;
        for (int64_t e = 0; e < x[i]->size; e++) total += fabs(qkv_grad_get(x[i], e));
        ck_assert_msg(total > 0, "%s: gradient %d is all zeros", what, i);
        ck_assert_msg(memcmp(grad[0][i], grad[1][i], (size_t)x[i]->size * es) == 0,
                      "%s: gradient %d with P kept differs from P recomputed", what, i);
    }
    for (int m = 0; m < 2; m++) {
        free(out[m]), free(lse[m]);
        for (int i = 0; i < 3; i++) free(grad[m][i]);
    }
    ck_assert(qkv_set_attention_probs("auto"));
    qkv_ctx_free(step);
    qkv_ctx_free(params);
}

/* Every shape above, kept P against recomputed (the padding mask's entry of no keys: its
 * rows' P all zeros); in two passes each kept tile is read twice. */
static void check_all_kept_probs(bool two_passes) {
    each_attention_shape(check_kept_probs, two_passes);
}

START_TEST(test_kept_probs_same_bits) { check_all_kept_probs(false); }
END_TEST

#ifdef QKV_HAVE_OPENMP
START_TEST(test_kept_probs_same_bits_two_passes) {
    int saved = qkv_threads();
    qkv_set_threads(16);
    check_all_kept_probs(true);
    qkv_set_threads(saved);
}
END_TEST
#endif

/* The rule: P kept when it is at most 4× the op's q, k, v and output and at most 1 MiB; the
 * benchmark's workloads (kernels.h), the edges of both bounds, the other forms, and a forward
 * pass that takes no gradient. */
START_TEST(test_kept_probs_rule) {
    int64_t ms[4] = {0};
    attention_dims tiny = {.G = 128, .H = 4, .Nq = 16, .Nk = 16, .Dk = 16, .Dv = 16, .ms = ms};
    attention_dims medium = {.G = 32, .H = 4, .Nq = 256, .Nk = 256, .Dk = 32, .Dv = 32, .ms = ms};
    attention_dims long_ = {.G = 1, .H = 1, .Nq = 2048, .Nk = 2048, .Dk = 64, .Dv = 64, .ms = ms};
    attention_dims edge = {.G = 2, .H = 1, .Nq = 64, .Nk = 64, .Dk = 4, .Dv = 4, .ms = ms};
    attention_dims ceiling = {.G = 16, .H = 4, .Nq = 128, .Nk = 128, .Dk = 32, .Dv = 32, .ms = ms};
    ck_assert_uint_eq(attention_kept_probs(&tiny, 4), 128 * 16 * 16);
    ck_assert_uint_eq(attention_kept_probs(&medium, 4), 0); /* 2× its operands, 8 MiB */
    ck_assert_uint_eq(attention_kept_probs(&long_, 4), 0);
    ck_assert_uint_eq(attention_kept_probs(&edge, 4), 2 * 64 * 64); /* N = 8·(Dk + Dv): kept */
    edge.Nq = edge.Nk = 65;
    ck_assert_uint_eq(attention_kept_probs(&edge, 4), 0);
    ck_assert_uint_eq(attention_kept_probs(&ceiling, 4), 16 * 128 * 128); /* 1 MiB: kept */
    ck_assert_uint_eq(attention_kept_probs(&ceiling, 8), 0);                /* 2 MiB */
    ck_assert(qkv_set_attention_probs("keep"));
    ck_assert_uint_eq(attention_kept_probs(&long_, 4), 2048 * 2048);
    ck_assert(qkv_set_attention_form("legacy"));
    ck_assert_uint_eq(attention_kept_probs(&tiny, 4), 0); /* only d-from-p reads it */
    ck_assert(qkv_set_attention_form("d-from-p"));
    ck_assert(qkv_set_attention_probs("recompute"));
    ck_assert_uint_eq(attention_kept_probs(&tiny, 4), 0);
    ck_assert(!qkv_set_attention_probs("always"));
    ck_assert(qkv_set_attention_probs("auto"));
    /* no gradient to take: nothing kept */
    qkv_ctx *c = qkv_ctx_new(0);
    qkv_rng rng = qkv_rng_seed(3);
    qkv_tensor *q = qkv_randn(c, QKV_F32, 3, (int64_t[]){2, 16, 32}, 1.0, &rng);
    qkv_tensor *y = qkv_attention_heads(c, q, q, q, NULL, 2, 0);
    ck_assert_int_eq(y->iparam[1], 0);
    qkv_tensor *p = qkv_param(c, q);
    y = qkv_attention_heads(c, p, p, p, NULL, 2, 0);
    ck_assert_int_eq(y->iparam[1], 1);
    qkv_ctx_set_no_grad(c, true);
    y = qkv_attention_heads(c, p, p, p, NULL, 2, 0);
    ck_assert_int_eq(y->iparam[1], 0);
    qkv_ctx_free(c);
}
END_TEST

static Suite *autograd_suite(void) {
    Suite *s = suite_create("autograd");
    TCase *tc = tcase_create("accumulation");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_polynomial_reuse);
    tcase_add_test(tc, test_kept_probs_same_bits);
    tcase_add_test(tc, test_kept_probs_rule);
    tcase_add_test(tc, test_matmul_with_itself);
    tcase_add_test(tc, test_x_feeds_q_k_v);
    tcase_add_test(tc, test_backward_twice_doubles_leaves);
    tcase_add_test(tc, test_backward_twice_mini_model);
    tcase_add_test(tc, test_zero_grad_only_own_ctx);
    tcase_add_test(tc, test_backward_from_earlier_loss);
    tcase_add_test(tc, test_non_param_inputs_get_no_grad);
    tcase_add_test(tc, test_side_computation_untouched);
    tcase_add_test(tc, test_first_write_mixed_consumers);
    tcase_add_test(tc, test_op_table);
    tcase_add_test(tc, test_mlp_ops_first_write);
    tcase_add_test(tc, test_unwritten_gradient_is_zero);
    tcase_add_test(tc, test_fused_attention_stores);
    tcase_add_test(tc, test_attention_heads_form);
    suite_add_tcase(s, tc);

#ifdef QKV_HAVE_OPENMP
    tc = tcase_create("threads");
    tcase_set_tags(tc, "threads"); /* left out under qemu-user and valgrind (.ci/run) */
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_fused_attention_stores_two_passes);
    tcase_add_test(tc, test_attention_heads_form_two_passes);
    tcase_add_test(tc, test_kept_probs_same_bits_two_passes);
    suite_add_tcase(s, tc);
#endif

    tc = tcase_create("deep");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_deep_chain_no_recursion);
    suite_add_tcase(s, tc);

    tc = tcase_create("sgd");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_sgd_step);
    tcase_add_test(tc, test_sgd_descends);
    tcase_add_test(tc, test_for_params_order);
    tcase_add_test(tc, test_many_params);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return run_suite(autograd_suite()); }
