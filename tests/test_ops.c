/* test_ops.c - every op's forward values (and simple gradients) on small known cases, and the
 * 3-token attention example worked by hand. */
#include "qkv.h"

#include "fixtures.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>




static void assert_values(const qkv_tensor *t, const double *want, double tol) {
    for (int64_t i = 0; i < t->size; i++) /* (==: -inf where a mask drops) */
        ck_assert_msg(qkv_get(t, i) == want[i] || fabs(qkv_get(t, i) - want[i]) <= tol, "%s entry %lld: got %.10g, want %.10g",
                      qkv_op_name(t->op), (long long)i, qkv_get(t, i), want[i]);
}
static void assert_grads(const qkv_tensor *t, const double *want, double tol) {
    ck_assert_ptr_nonnull(t->grad);
    for (int64_t i = 0; i < t->size; i++)
        ck_assert_msg(fabs(qkv_grad_get(t, i) - want[i]) <= tol,
                      "grad entry %lld: got %.10g, want %.10g", (long long)i, qkv_grad_get(t, i),
                      want[i]);
}
static void assert_shape(const qkv_tensor *t, int ndim, const int64_t *shape) {
    ck_assert_int_eq(t->ndim, ndim);
    for (int i = 0; i < ndim; i++) ck_assert_int_eq(t->shape[i], shape[i]);
}
static bool is_neg_inf(double v) { return isinf(v) && v < 0; }

/* ---- softmax ------------------------------------------------------------------------------ */

START_TEST(test_softmax_known) {
    for (int d = 0; d < 2; d++) {
        qkv_tensor *y = qkv_softmax(ctx, mk(FLOATS[d], 1, (int64_t[]){3}, (double[]){4, -1, 2.1}));
        ck_assert_int_eq(y->op, QKV_OP_SOFTMAX);
        ck_assert_double_eq_tol(qkv_get(y, 0), 0.8648, 5e-5);
        ck_assert_double_eq_tol(qkv_get(y, 1), 0.0058, 5e-5);
        ck_assert_double_eq_tol(qkv_get(y, 2), 0.1294, 5e-5);
    }
}
END_TEST

START_TEST(test_softmax_rows_sum_to_one) {
    qkv_rng rng = qkv_rng_seed(4);
    for (int d = 0; d < 2; d++) {
        qkv_tensor *x = qkv_randn(ctx, FLOATS[d], 4, (int64_t[]){2, 3, 5, 9}, 4.0, &rng);
        qkv_tensor *y = qkv_softmax(ctx, x);
        assert_shape(y, 4, x->shape);
        for (int64_t r = 0; r < 30; r++) {
            double sum = 0;
            for (int j = 0; j < 9; j++) {
                double v = qkv_get(y, r * 9 + j);
                ck_assert(v > 0 && v < 1);
                sum += v;
            }
            ck_assert_double_eq_tol(sum, 1.0, d == 0 ? 1e-6 : 1e-14);
        }
        /* the largest input gets the largest weight, row by row */
        for (int64_t r = 0; r < 30; r++) {
            int jx = 0, jy = 0;
            for (int j = 1; j < 9; j++) {
                if (qkv_get(x, r * 9 + j) > qkv_get(x, r * 9 + jx)) jx = j;
                if (qkv_get(y, r * 9 + j) > qkv_get(y, r * 9 + jy)) jy = j;
            }
            ck_assert_int_eq(jx, jy);
        }
    }
}
END_TEST

START_TEST(test_softmax_no_overflow) {
    for (int d = 0; d < 2; d++) {
        qkv_tensor *x = mkp(FLOATS[d], 2, (int64_t[]){4, 2},
                            (double[]){1000, 1000, 1000, 0, -1000, -1000, 88.5, 89.5});
        qkv_tensor *y = qkv_softmax(ctx, x);
        ck_assert_double_eq(qkv_get(y, 0), 0.5);
        ck_assert_double_eq(qkv_get(y, 1), 0.5);
        ck_assert_double_eq_tol(qkv_get(y, 2), 1.0, 1e-7);
        ck_assert_double_eq_tol(qkv_get(y, 3), 0.0, 1e-300);
        ck_assert_double_eq(qkv_get(y, 4), 0.5);
        ck_assert_double_eq(qkv_get(y, 5), 0.5);
        /* e^89.5 overflows f32 without the max subtracted; softmax([0, 1]) = (0.2689, 0.7311) */
        ck_assert_double_eq_tol(qkv_get(y, 6), 0.2689414213699951, 1e-6);
        ck_assert_double_eq_tol(qkv_get(y, 7), 0.7310585786300049, 1e-6);
        qkv_tensor *w = mk(FLOATS[d], 2, (int64_t[]){4, 2}, (double[]){1, 2, 3, 4, 5, 6, 7, 8});
        qkv_backward(qkv_sum(ctx, qkv_mul(ctx, y, w)));
        for (int i = 0; i < 8; i++) ck_assert(isfinite(qkv_grad_get(x, i)));
        /* row 0: y = (.5,.5), dy = (1,2): dx = y(dy - <y,dy>) = (-.25, .25) */
        ck_assert_double_eq_tol(qkv_grad_get(x, 0), -0.25, 1e-7);
        ck_assert_double_eq_tol(qkv_grad_get(x, 1), 0.25, 1e-7);
    }
}
END_TEST

START_TEST(test_softmax_shift_invariant) {
    double a[5] = {0.3, -1.2, 2.5, 0.0, 1.1}, b[5];
    for (int i = 0; i < 5; i++) b[i] = a[i] + 300;
    qkv_tensor *ya = qkv_softmax(ctx, mk(QKV_F64, 1, (int64_t[]){5}, a));
    qkv_tensor *yb = qkv_softmax(ctx, mk(QKV_F64, 1, (int64_t[]){5}, b));
    for (int i = 0; i < 5; i++) ck_assert_double_eq_tol(qkv_get(ya, i), qkv_get(yb, i), 1e-13);
}
END_TEST

START_TEST(test_softmax_fully_masked_row) {
    /* a row that is all -inf gives zero weights and a zero gradient, never NaN */
    for (int d = 0; d < 2; d++) {
        double v[6] = {-INFINITY, -INFINITY, -INFINITY, 1.0, -INFINITY, 2.0};
        qkv_tensor *x = mkp(FLOATS[d], 2, (int64_t[]){2, 3}, v);
        qkv_tensor *y = qkv_softmax(ctx, x);
        for (int j = 0; j < 3; j++) ck_assert_double_eq(qkv_get(y, j), 0.0);
        ck_assert_double_eq(qkv_get(y, 4), 0.0);
        ck_assert_double_eq_tol(qkv_get(y, 3) + qkv_get(y, 5), 1.0, 1e-7);
        qkv_tensor *w = mk(FLOATS[d], 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6});
        qkv_backward(qkv_sum(ctx, qkv_mul(ctx, y, w)));
        for (int j = 0; j < 3; j++) ck_assert_double_eq(qkv_grad_get(x, j), 0.0);
        for (int j = 0; j < 6; j++) ck_assert(!isnan(qkv_grad_get(x, j)));
    }
}
END_TEST

START_TEST(test_attention_fully_masked_row) {
    for (int d = 0; d < 2; d++) {
        qkv_dtype dt = FLOATS[d];
        qkv_rng rng = qkv_rng_seed(12);
        qkv_tensor *q = qkv_param(ctx, qkv_randn(ctx, dt, 2, (int64_t[]){3, 2}, 1.0, &rng));
        qkv_tensor *k = qkv_param(ctx, qkv_randn(ctx, dt, 2, (int64_t[]){3, 2}, 1.0, &rng));
        qkv_tensor *v = qkv_param(ctx, qkv_randn(ctx, dt, 2, (int64_t[]){3, 2}, 1.0, &rng));
        /* query 0 sees nothing, query 1 sees key 0 only, query 2 sees everything */
        qkv_tensor *m = qkv_mask_from_bool(ctx, dt, 2, (int64_t[]){3, 3},
                                           (const uint8_t[]){0, 0, 0, 1, 0, 0, 1, 1, 1});
        qkv_tensor *a = NULL;
        qkv_tensor *y = qkv_attention(ctx, q, k, v, m, 0, &a);
        ck_assert_ptr_nonnull(a);
        assert_shape(a, 2, (int64_t[]){3, 3});
        for (int j = 0; j < 3; j++) ck_assert_double_eq(qkv_get(a, j), 0.0);
        ck_assert_double_eq_tol(qkv_get(a, 3), 1.0, 1e-7);
        ck_assert_double_eq(qkv_get(a, 4), 0.0);
        ck_assert_double_eq(qkv_get(a, 5), 0.0);
        ck_assert_double_eq(qkv_get(y, 0), 0.0); /* zero output */
        ck_assert_double_eq(qkv_get(y, 1), 0.0);
        ck_assert_double_eq_tol(qkv_get(y, 2), qkv_get(v, 0), 1e-6); /* = V row 0 */
        ck_assert_double_eq_tol(qkv_get(y, 3), qkv_get(v, 1), 1e-6);
        qkv_tensor *w = qkv_randn(ctx, dt, 2, (int64_t[]){3, 2}, 1.0, &rng);
        qkv_backward(qkv_sum(ctx, qkv_mul(ctx, y, w)));
        ck_assert_double_eq(qkv_grad_get(q, 0), 0.0); /* zero gradient for the masked query */
        ck_assert_double_eq(qkv_grad_get(q, 1), 0.0);
        ck_assert_double_eq(qkv_grad_get(q, 2), 0.0); /* query 1 has one key: softmax is const */
        ck_assert_double_eq(qkv_grad_get(q, 3), 0.0);
        double gsum = 0;
        for (int i = 0; i < 6; i++) {
            ck_assert(isfinite(qkv_grad_get(q, i)));
            ck_assert(isfinite(qkv_grad_get(k, i)));
            ck_assert(isfinite(qkv_grad_get(v, i)));
            gsum += fabs(qkv_grad_get(q, i));
        }
        ck_assert_double_gt(gsum, 0.0); /* query 2 still learns */
    }
}
END_TEST

/* ---- masks -------------------------------------------------------------------------------- */

START_TEST(test_mask_causal) {
    for (int d = 0; d < 2; d++) {
        qkv_tensor *m = qkv_mask_causal(ctx, FLOATS[d], 3, 3);
        ck_assert_int_eq(m->dtype, FLOATS[d]);
        assert_shape(m, 2, (int64_t[]){3, 3});
        const int keep[9] = {1, 0, 0, 1, 1, 0, 1, 1, 1};
        for (int i = 0; i < 9; i++) {
            if (keep[i]) ck_assert_double_eq(qkv_get(m, i), 0.0);
            else ck_assert(is_neg_inf(qkv_get(m, i)));
        }
        /* Nq < Nk: query i sees keys j <= i + 2, so the last query sees every key */
        m = qkv_mask_causal(ctx, FLOATS[d], 2, 4);
        const int keep24[8] = {1, 1, 1, 0, 1, 1, 1, 1};
        for (int i = 0; i < 8; i++) {
            if (keep24[i]) ck_assert_double_eq(qkv_get(m, i), 0.0);
            else ck_assert(is_neg_inf(qkv_get(m, i)));
        }
        /* Nq > Nk: query i sees keys j <= i - 2 */
        m = qkv_mask_causal(ctx, FLOATS[d], 4, 2);
        const int keep42[8] = {0, 0, 0, 0, 1, 0, 1, 1};
        for (int i = 0; i < 8; i++) {
            if (keep42[i]) ck_assert_double_eq(qkv_get(m, i), 0.0);
            else ck_assert(is_neg_inf(qkv_get(m, i)));
        }
    }
}
END_TEST

START_TEST(test_mask_padding) {
    const int32_t lengths[3] = {2, 4, 0};
    qkv_tensor *m = qkv_mask_padding(ctx, QKV_F32, 3, 4, lengths);
    assert_shape(m, 4, (int64_t[]){3, 1, 1, 4});
    for (int b = 0; b < 3; b++)
        for (int j = 0; j < 4; j++) {
            double v = qkv_get(m, b * 4 + j);
            if (j < lengths[b]) ck_assert_double_eq(v, 0.0);
            else ck_assert(is_neg_inf(v));
        }
    /* it broadcasts over heads and queries of (B, H, Nq, Nk) scores */
    qkv_rng rng = qkv_rng_seed(2);
    qkv_tensor *s = qkv_randn(ctx, QKV_F32, 4, (int64_t[]){3, 2, 5, 4}, 1.0, &rng);
    qkv_tensor *y = qkv_mask(ctx, s, m);
    for (int64_t i = 0; i < y->size; i++) {
        int b = (int)(i / 40), j = (int)(i % 4);
        if (j < lengths[b]) ck_assert_double_eq(qkv_get(y, i), qkv_get(s, i));
        else ck_assert(is_neg_inf(qkv_get(y, i)));
    }
}
END_TEST

START_TEST(test_mask_from_bool) {
    const uint8_t keep[6] = {1, 0, 7, 0, 0, 1}; /* any non-zero keeps */
    qkv_tensor *m = qkv_mask_from_bool(ctx, QKV_F64, 2, (int64_t[]){2, 3}, keep);
    assert_shape(m, 2, (int64_t[]){2, 3});
    for (int i = 0; i < 6; i++) {
        if (keep[i]) ck_assert_double_eq(qkv_get(m, i), 0.0);
        else ck_assert(is_neg_inf(qkv_get(m, i)));
    }
    /* the mask op: y = x + M, gradient passes where kept and is zero where dropped */
    qkv_tensor *x = mkp(QKV_F64, 3, (int64_t[]){2, 2, 3}, (double[]){1, 2, 3, 4, 5, 6, 7, 8, 9,
                                                                      10, 11, 12});
    qkv_tensor *y = qkv_mask(ctx, x, m);
    ck_assert_int_eq(y->op, QKV_OP_MASK);
    qkv_tensor *w = mk(QKV_F64, 3, (int64_t[]){2, 2, 3},
                       (double[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
    qkv_tensor *finite = qkv_mul(ctx, qkv_softmax(ctx, y), w); /* no inf reaches the loss */
    qkv_backward(qkv_sum(ctx, finite));
    for (int i = 0; i < 12; i++) {
        if (keep[i % 6]) {
            ck_assert_double_eq(qkv_get(y, i), qkv_get(x, i));
        } else {
            ck_assert(is_neg_inf(qkv_get(y, i)));
            ck_assert_double_eq(qkv_grad_get(x, i), 0.0);
        }
    }
    /* a kept entry in a row with two kept entries has a non-zero gradient */
    ck_assert_double_ne(qkv_grad_get(x, 0), 0.0);
}
END_TEST

/* The mask's own backward, with nothing after it that would zero a dropped entry's gradient
 * (a softmax does): the loss sum(y ⊙ w) is -inf, but dy = w is finite everywhere, and dx must
 * be w where the mask keeps and 0 where it drops. */
START_TEST(test_mask_gradient_is_identity_where_kept) {
    qkv_tensor *x = mkp(QKV_F64, 2, (int64_t[]){2, 2}, (double[]){1, 2, 3, 4});
    qkv_tensor *m = qkv_mask_from_bool(ctx, QKV_F64, 1, (int64_t[]){2}, (const uint8_t[]){1, 0});
    qkv_tensor *y = qkv_mask(ctx, x, m); /* column 1 dropped in both rows */
    qkv_tensor *w = mk(QKV_F64, 2, (int64_t[]){2, 2}, (double[]){5, 6, 7, 8});
    qkv_backward(qkv_sum(ctx, qkv_mul(ctx, y, w)));
    assert_values(y, (double[]){1, -INFINITY, 3, -INFINITY}, 0);
    assert_grads(x, (double[]){5, 0, 7, 0}, 0);
}
END_TEST

/* ---- matmul ------------------------------------------------------------------------------- */

/* C (M,N) = op(A)·op(B) by the definition, A stored (M,K) or (K,M), B (K,N) or (N,K). */
static void naive(bool ta, bool tb, int M, int N, int K, const double *a, const double *b,
                  double *c) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s += (ta ? a[k * M + i] : a[i * K + k]) * (tb ? b[j * K + k] : b[k * N + j]);
            c[i * N + j] = s;
        }
}

START_TEST(test_matmul_known) {
    /* [[1,2,3],[4,5,6]] · [[7,8],[9,10],[11,12]] = [[58,64],[139,154]] */
    for (int d = 0; d < 2; d++) {
        qkv_tensor *a = mk(FLOATS[d], 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6});
        qkv_tensor *b = mk(FLOATS[d], 2, (int64_t[]){3, 2}, (double[]){7, 8, 9, 10, 11, 12});
        qkv_tensor *c = qkv_matmul(ctx, a, b);
        assert_shape(c, 2, (int64_t[]){2, 2});
        ck_assert_int_eq(c->op, QKV_OP_MATMUL);
        assert_values(c, (double[]){58, 64, 139, 154}, 0);
    }
}
END_TEST

START_TEST(test_matmul_transposes) {
    /* A is (M,K) = (3,4), B is (K,N) = (4,5); every combination of stored transposes */
    enum { M = 3, K = 4, N = 5 };
    double a[M * K], at[K * M], b[K * N], bt[N * K];
    qkv_rng rng = qkv_rng_seed(21);
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) at[k * M + i] = a[i * K + k] = (double)qkv_rng_below(&rng, 19) - 9;
    for (int k = 0; k < K; k++)
        for (int j = 0; j < N; j++) bt[j * K + k] = b[k * N + j] = (double)qkv_rng_below(&rng, 19) - 9;
    double want[M * N];
    naive(false, false, M, N, K, a, b, want);
    for (int d = 0; d < 2; d++) {
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                qkv_tensor *A = ta ? mk(FLOATS[d], 2, (int64_t[]){K, M}, at)
                                   : mk(FLOATS[d], 2, (int64_t[]){M, K}, a);
                qkv_tensor *B = tb ? mk(FLOATS[d], 2, (int64_t[]){N, K}, bt)
                                   : mk(FLOATS[d], 2, (int64_t[]){K, N}, b);
                qkv_tensor *C = qkv_matmul_ex(ctx, A, ta, B, tb);
                assert_shape(C, 2, (int64_t[]){M, N});
                double ref[M * N];
                naive(ta, tb, M, N, K, ta ? at : a, tb ? bt : b, ref);
                for (int i = 0; i < M * N; i++) ck_assert_double_eq(ref[i], want[i]);
                assert_values(C, want, 0); /* small integers: exact */
            }
    }
}
END_TEST

START_TEST(test_matmul_batched) {
    /* (2,3,4)·(2,4,5) per batch, (2,3,4)·(4,5) shared, and 4-D (2,2,3,4)·(2,2,5,4)ᵀ */
    qkv_rng rng = qkv_rng_seed(5);
    qkv_tensor *a = qkv_randn(ctx, QKV_F64, 3, (int64_t[]){2, 3, 4}, 1.0, &rng);
    qkv_tensor *b = qkv_randn(ctx, QKV_F64, 3, (int64_t[]){2, 4, 5}, 1.0, &rng);
    qkv_tensor *c = qkv_matmul(ctx, a, b);
    assert_shape(c, 3, (int64_t[]){2, 3, 5});
    double ref[15];
    for (int bt = 0; bt < 2; bt++) {
        naive(false, false, 3, 5, 4, (double *)a->data + bt * 12, (double *)b->data + bt * 20, ref);
        for (int i = 0; i < 15; i++) ck_assert_double_eq_tol(qkv_get(c, bt * 15 + i), ref[i], 1e-12);
    }
    qkv_tensor *w = qkv_randn(ctx, QKV_F64, 2, (int64_t[]){4, 5}, 1.0, &rng);
    c = qkv_matmul(ctx, a, w);
    assert_shape(c, 3, (int64_t[]){2, 3, 5});
    for (int bt = 0; bt < 2; bt++) {
        naive(false, false, 3, 5, 4, (double *)a->data + bt * 12, w->data, ref);
        for (int i = 0; i < 15; i++) ck_assert_double_eq_tol(qkv_get(c, bt * 15 + i), ref[i], 1e-12);
    }
    qkv_tensor *q = qkv_randn(ctx, QKV_F64, 4, (int64_t[]){2, 2, 3, 4}, 1.0, &rng);
    qkv_tensor *k = qkv_randn(ctx, QKV_F64, 4, (int64_t[]){2, 2, 5, 4}, 1.0, &rng);
    c = qkv_matmul_ex(ctx, q, false, k, true);
    assert_shape(c, 4, (int64_t[]){2, 2, 3, 5});
    for (int bt = 0; bt < 4; bt++) {
        naive(false, true, 3, 5, 4, (double *)q->data + bt * 12, (double *)k->data + bt * 20, ref);
        for (int i = 0; i < 15; i++) ck_assert_double_eq_tol(qkv_get(c, bt * 15 + i), ref[i], 1e-12);
    }
}
END_TEST

START_TEST(test_matmul_large_matches_naive) {
    /* big enough to take the threaded path of the kernel */
    enum { M = 48, K = 40, N = 36 };
    qkv_rng rng = qkv_rng_seed(6);
    qkv_tensor *a = qkv_randn(ctx, QKV_F64, 2, (int64_t[]){M, K}, 1.0, &rng);
    qkv_tensor *b = qkv_randn(ctx, QKV_F64, 2, (int64_t[]){N, K}, 1.0, &rng);
    qkv_tensor *c = qkv_matmul_ex(ctx, a, false, b, true);
    static double ref[M * N];
    naive(false, true, M, N, K, a->data, b->data, ref);
    for (int i = 0; i < M * N; i++) ck_assert_double_eq_tol(qkv_get(c, i), ref[i], 1e-12);
}
END_TEST

START_TEST(test_matmul_gradient_known) {
    /* C = A·B, L = Σ C: dA = 1·Bᵀ (row sums of B), dB = Aᵀ·1 (column sums of A) */
    qkv_tensor *a = mkp(QKV_F64, 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6});
    qkv_tensor *b = mkp(QKV_F64, 2, (int64_t[]){3, 2}, (double[]){7, 8, 9, 10, 11, 12});
    qkv_backward(qkv_sum(ctx, qkv_matmul(ctx, a, b)));
    assert_grads(a, (double[]){15, 19, 23, 15, 19, 23}, 0);
    assert_grads(b, (double[]){5, 5, 7, 7, 9, 9}, 0);
}
END_TEST

/* ---- add, mul ----------------------------------------------------------------------------- */

START_TEST(test_add_broadcast) {
    for (int d = 0; d < 2; d++) {
        qkv_dtype dt = FLOATS[d];
        qkv_tensor *a = mkp(dt, 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6});
        /* same shape */
        qkv_tensor *y = qkv_add(ctx, a, mk(dt, 2, (int64_t[]){2, 3}, (double[]){10, 20, 30, 40, 50, 60}));
        assert_values(y, (double[]){11, 22, 33, 44, 55, 66}, 0);
        /* a row vector (3) */
        qkv_tensor *row = mkp(dt, 1, (int64_t[]){3}, (double[]){10, 20, 30});
        y = qkv_add(ctx, a, row);
        assert_shape(y, 2, (int64_t[]){2, 3});
        assert_values(y, (double[]){11, 22, 33, 14, 25, 36}, 0);
        /* a column (2,1) */
        qkv_tensor *col = mkp(dt, 2, (int64_t[]){2, 1}, (double[]){100, 200});
        qkv_tensor *y2 = qkv_add(ctx, a, col);
        assert_values(y2, (double[]){101, 102, 103, 204, 205, 206}, 0);
        /* a scalar */
        qkv_tensor *s = mkp(dt, 0, NULL, (double[]){0.5});
        qkv_tensor *y3 = qkv_add(ctx, a, s);
        assert_values(y3, (double[]){1.5, 2.5, 3.5, 4.5, 5.5, 6.5}, 0);
        /* gradients: the broadcast operand sums over the dims it was repeated along */
        qkv_tensor *w = mk(dt, 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6});
        qkv_tensor *loss = qkv_add(ctx, qkv_add(ctx, qkv_sum(ctx, qkv_mul(ctx, y, w)),
                                                qkv_sum(ctx, qkv_mul(ctx, y2, w))),
                                   qkv_sum(ctx, qkv_mul(ctx, y3, w)));
        qkv_backward(loss);
        assert_grads(row, (double[]){5, 7, 9}, 0);
        assert_grads(col, (double[]){6, 15}, 0);
        assert_grads(s, (double[]){21}, 0);
        assert_grads(a, (double[]){3, 6, 9, 12, 15, 18}, 0); /* used by three adds */
    }
}
END_TEST

START_TEST(test_add_broadcast_3d) {
    /* (2,3,2) + (3,1): b[j] added to every a[i][j][:] */
    double av[12];
    for (int i = 0; i < 12; i++) av[i] = i;
    qkv_tensor *a = mk(QKV_F64, 3, (int64_t[]){2, 3, 2}, av);
    qkv_tensor *b = mkp(QKV_F64, 2, (int64_t[]){3, 1}, (double[]){100, 200, 300});
    qkv_tensor *y = qkv_add(ctx, a, b);
    assert_values(y, (double[]){100, 101, 202, 203, 304, 305, 106, 107, 208, 209, 310, 311}, 0);
    qkv_backward(qkv_sum(ctx, y));
    assert_grads(b, (double[]){4, 4, 4}, 0);
}
END_TEST

START_TEST(test_mul_broadcast) {
    for (int d = 0; d < 2; d++) {
        qkv_dtype dt = FLOATS[d];
        qkv_tensor *a = mkp(dt, 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6});
        qkv_tensor *b = mkp(dt, 2, (int64_t[]){1, 3}, (double[]){2, -1, 0.5});
        qkv_tensor *y = qkv_mul(ctx, a, b);
        ck_assert_int_eq(y->op, QKV_OP_MUL);
        assert_values(y, (double[]){2, -2, 1.5, 8, -5, 3}, 0);
        qkv_backward(qkv_sum(ctx, y));
        assert_grads(a, (double[]){2, -1, 0.5, 2, -1, 0.5}, 0); /* da = b */
        assert_grads(b, (double[]){5, 7, 9}, 0);                /* db = Σ over rows of a */
        /* same shapes */
        qkv_tensor *c = mk(dt, 2, (int64_t[]){2, 3}, (double[]){-1, 0, 1, 2, 3, 4});
        assert_values(qkv_mul(ctx, a, c), (double[]){-1, 0, 3, 8, 15, 24}, 0);
    }
}
END_TEST

/* ---- embedding ---------------------------------------------------------------------------- */

START_TEST(test_embedding) {
    for (int d = 0; d < 2; d++) {
        /* table row r is (10r, 10r+1, 10r+2) */
        double tv[15];
        for (int r = 0; r < 5; r++)
            for (int c = 0; c < 3; c++) tv[r * 3 + c] = 10 * r + c;
        qkv_tensor *table = mkp(FLOATS[d], 2, (int64_t[]){5, 3}, tv);
        const int32_t ids[6] = {1, 3, 3, 4, 1, 1}; /* row 1 three times, 3 twice, 0 and 2 never */
        qkv_tensor *idx = qkv_from_array(ctx, QKV_I32, 2, (int64_t[]){2, 3}, ids);
        qkv_tensor *y = qkv_embedding(ctx, table, idx);
        ck_assert_int_eq(y->op, QKV_OP_EMBEDDING);
        assert_shape(y, 3, (int64_t[]){2, 3, 3});
        for (int p = 0; p < 6; p++)
            for (int c = 0; c < 3; c++) ck_assert_double_eq(qkv_get(y, p * 3 + c), 10 * ids[p] + c);
        /* scatter-add: weight position p by (p+1) */
        double wv[18];
        for (int p = 0; p < 6; p++)
            for (int c = 0; c < 3; c++) wv[p * 3 + c] = (p + 1) * (c == 1 ? 2 : 1);
        qkv_tensor *w = mk(FLOATS[d], 3, (int64_t[]){2, 3, 3}, wv);
        qkv_backward(qkv_sum(ctx, qkv_mul(ctx, y, w)));
        /* row 1 at positions 0, 4, 5: 1+5+6 = 12; row 3 at 1, 2: 2+3 = 5; row 4 at 3: 4 */
        assert_grads(table, (double[]){0, 0, 0, 12, 24, 12, 0, 0, 0, 5, 10, 5, 4, 8, 4}, 0);
    }
}
END_TEST

START_TEST(test_embedding_1d_idx) {
    qkv_tensor *table = mk(QKV_F64, 2, (int64_t[]){3, 2}, (double[]){1, 2, 3, 4, 5, 6});
    qkv_tensor *idx = qkv_from_array(ctx, QKV_I32, 1, (int64_t[]){4}, (int32_t[]){2, 0, 2, 1});
    qkv_tensor *y = qkv_embedding(ctx, table, idx);
    assert_shape(y, 2, (int64_t[]){4, 2});
    assert_values(y, (double[]){5, 6, 1, 2, 5, 6, 3, 4}, 0);
    ck_assert(!y->requires_grad); /* the table is not a parameter */
}
END_TEST

/* ---- transpose, reshape ------------------------------------------------------------------- */

START_TEST(test_transpose) {
    qkv_tensor *x = mkp(QKV_F64, 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6});
    qkv_tensor *y = qkv_transpose(ctx, x, 0, 1);
    assert_shape(y, 2, (int64_t[]){3, 2});
    assert_values(y, (double[]){1, 4, 2, 5, 3, 6}, 0);
    /* the gradient is the transposed upstream gradient */
    qkv_tensor *w = mk(QKV_F64, 2, (int64_t[]){3, 2}, (double[]){10, 40, 20, 50, 30, 60});
    qkv_backward(qkv_sum(ctx, qkv_mul(ctx, y, w)));
    assert_grads(x, (double[]){10, 20, 30, 40, 50, 60}, 0);

    /* 3-D, dims 0 and 2: y[k][j][i] = x[i][j][k] */
    double v[24];
    for (int i = 0; i < 24; i++) v[i] = i;
    qkv_tensor *x3 = mk(QKV_F32, 3, (int64_t[]){2, 3, 4}, v);
    qkv_tensor *y3 = qkv_transpose(ctx, x3, 0, 2);
    assert_shape(y3, 3, (int64_t[]){4, 3, 2});
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                ck_assert_double_eq(qkv_get(y3, (k * 3 + j) * 2 + i), qkv_get(x3, (i * 3 + j) * 4 + k));

    /* 4-D, (B,T,H,D) -> (B,H,T,D): dims 1 and 2 */
    double v4[2 * 3 * 2 * 2];
    for (int i = 0; i < 24; i++) v4[i] = i;
    qkv_tensor *x4 = mk(QKV_F64, 4, (int64_t[]){2, 3, 2, 2}, v4);
    qkv_tensor *y4 = qkv_transpose(ctx, x4, 1, 2);
    assert_shape(y4, 4, (int64_t[]){2, 2, 3, 2});
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < 3; t++)
            for (int h = 0; h < 2; h++)
                for (int dd = 0; dd < 2; dd++)
                    ck_assert_double_eq(qkv_get(y4, ((b * 2 + h) * 3 + t) * 2 + dd),
                                        qkv_get(x4, ((b * 3 + t) * 2 + h) * 2 + dd));
    /* transposing twice gives x back */
    qkv_tensor *back = qkv_transpose(ctx, y4, 1, 2);
    assert_values(back, v4, 0);

    /* its gradient, where the last dim stays last (copied in runs): two transposes of one x,
     * the first backward to run stores dx and the second adds to it */
    qkv_tensor *xp = mkp(QKV_F64, 4, (int64_t[]){2, 3, 2, 2}, v4);
    double w1[24], w2[24];
    for (int i = 0; i < 24; i++) w1[i] = 100 + i, w2[i] = 1000 * (i + 1);
    qkv_tensor *c1 = mk(QKV_F64, 4, (int64_t[]){2, 2, 3, 2}, w1);
    qkv_tensor *c2 = mk(QKV_F64, 4, (int64_t[]){2, 2, 3, 2}, w2);
    qkv_tensor *a = qkv_sum(ctx, qkv_mul(ctx, qkv_transpose(ctx, xp, 1, 2), c1));
    qkv_tensor *b2 = qkv_sum(ctx, qkv_mul(ctx, qkv_transpose(ctx, xp, 1, 2), c2));
    qkv_backward(qkv_add(ctx, a, b2));
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < 3; t++)
            for (int h = 0; h < 2; h++)
                for (int dd = 0; dd < 2; dd++) {
                    int yi = ((b * 2 + h) * 3 + t) * 2 + dd, xi = ((b * 3 + t) * 2 + h) * 2 + dd;
                    ck_assert_double_eq(qkv_grad_get(xp, xi), w1[yi] + w2[yi]);
                }
}
END_TEST

/* Rows of each (T, C) matrix: values and the gradient scattered back (a row picked twice gets
 * the sum); qkv_matmul_rows is qkv_matmul on them, its gradients too. */
START_TEST(test_select_rows) {
    double v[12];
    for (int i = 0; i < 12; i++) v[i] = i + 1;
    qkv_tensor *x = mkp(QKV_F64, 3, (int64_t[]){2, 3, 2}, v); /* 2 sequences of 3 rows of 2 */
    qkv_tensor *y = qkv_select_rows(ctx, x, 3, (const int32_t[]){2, 0, 2});
    ck_assert_int_eq(y->op, QKV_OP_SELECT_ROWS);
    assert_shape(y, 3, (int64_t[]){2, 3, 2});
    assert_values(y, (double[]){5, 6, 1, 2, 5, 6, 11, 12, 7, 8, 11, 12}, 0);
    double w[12];
    for (int i = 0; i < 12; i++) w[i] = 10 * (i + 1);
    qkv_backward(qkv_sum(ctx, qkv_mul(ctx, y, mk(QKV_F64, 3, (int64_t[]){2, 3, 2}, w))));
    /* row 0 gets w's second row, row 1 nothing, row 2 the first and third */
    assert_grads(x, (double[]){30, 40, 0, 0, 10 + 50, 20 + 60, 90, 100, 0, 0, 70 + 110, 80 + 120},
                 0);
    ck_assert_str_eq(qkv_op_name(QKV_OP_SELECT_ROWS), "select_rows");

    /* matmul_rows: the product of qkv_matmul, and its gradients (in f64 the same sums) */
    double av[10], bv[6];
    for (int i = 0; i < 10; i++) av[i] = 0.5 * i - 2;
    for (int i = 0; i < 6; i++) bv[i] = 1.5 - 0.25 * i;
    qkv_tensor *a1 = mkp(QKV_F64, 3, (int64_t[]){5, 1, 2}, av), *b1 = mkp(QKV_F64, 2, (int64_t[]){2, 3}, bv);
    qkv_tensor *a2 = mkp(QKV_F64, 3, (int64_t[]){5, 1, 2}, av), *b2 = mkp(QKV_F64, 2, (int64_t[]){2, 3}, bv);
    qkv_tensor *c1 = qkv_matmul_rows(ctx, a1, b1, 4, 1, (const int32_t[]){3});
    qkv_tensor *c2 = qkv_matmul(ctx, a2, b2);
    assert_shape(c1, 3, (int64_t[]){5, 1, 3});
    for (int64_t i = 0; i < c1->size; i++) ck_assert_double_eq(qkv_get(c1, i), qkv_get(c2, i));
    qkv_backward(qkv_add(ctx, qkv_sum(ctx, qkv_mul(ctx, c1, c1)), qkv_sum(ctx, qkv_mul(ctx, c2, c2))));
    for (int64_t i = 0; i < a1->size; i++) ck_assert_double_eq(qkv_grad_get(a1, i), qkv_grad_get(a2, i));
    for (int64_t i = 0; i < b1->size; i++) ck_assert_double_eq(qkv_grad_get(b1, i), qkv_grad_get(b2, i));
}
END_TEST

START_TEST(test_reshape) {
    double v[12];
    for (int i = 0; i < 12; i++) v[i] = i * 1.5;
    qkv_tensor *x = mkp(QKV_F32, 2, (int64_t[]){3, 4}, v);
    qkv_tensor *y = qkv_reshape(ctx, x, 3, (int64_t[]){2, 3, 2});
    ck_assert_int_eq(y->op, QKV_OP_RESHAPE);
    assert_shape(y, 3, (int64_t[]){2, 3, 2});
    assert_values(y, v, 0);
    double wv[12];
    for (int i = 0; i < 12; i++) wv[i] = 12 - i;
    qkv_backward(qkv_sum(ctx, qkv_mul(ctx, y, mk(QKV_F32, 3, (int64_t[]){2, 3, 2}, wv))));
    assert_grads(x, wv, 0);
}
END_TEST

/* ---- losses and reductions ---------------------------------------------------------------- */

/* logits [[1,2,3],[0.5,-1,2]], targets [2,0]:
 *   row 0: -log softmax_2 = log(e + e² + e³) − 3       = 0.4076059644443804
 *   row 1: -log softmax_0 = log(e^.5 + e^-1 + e²) − 0.5 = 1.7413112966571571
 *   mean                                                = 1.0744586305507688
 * softmax row 0 = (0.09003057317038046, 0.24472847105479764, 0.6652409557748218)
 * softmax row 1 = (0.1752903921400367, 0.039112573270687456, 0.7855970345892759)
 * d loss / d logits = (softmax − onehot(target)) / rows counted */
static const double CE_LOGITS[6] = {1, 2, 3, 0.5, -1, 2};
static const double CE_P[6] = {0.09003057317038046, 0.24472847105479764, 0.6652409557748218,
                               0.1752903921400367, 0.039112573270687456, 0.7855970345892759};

START_TEST(test_cross_entropy) {
    for (int d = 0; d < 2; d++) {
        double tol = d == 0 ? 1e-6 : 1e-14;
        qkv_tensor *x = mkp(FLOATS[d], 2, (int64_t[]){2, 3}, CE_LOGITS);
        qkv_tensor *t = qkv_from_array(ctx, QKV_I32, 1, (int64_t[]){2}, (int32_t[]){2, 0});
        qkv_tensor *loss = qkv_cross_entropy(ctx, x, t, -100);
        ck_assert_int_eq(loss->ndim, 0);
        ck_assert_int_eq(loss->op, QKV_OP_CROSS_ENTROPY);
        /* by the definition, evaluated here */
        double l0 = log(exp(1.0) + exp(2.0) + exp(3.0)) - 3.0;
        double l1 = log(exp(0.5) + exp(-1.0) + exp(2.0)) - 0.5;
        ck_assert_double_eq_tol(l0, 0.4076059644443804, 1e-15);
        ck_assert_double_eq_tol(l1, 1.7413112966571571, 1e-15);
        ck_assert_double_eq_tol(qkv_get(loss, 0), 1.0744586305507688, tol);
        qkv_backward(loss);
        double want[6];
        for (int i = 0; i < 6; i++) want[i] = CE_P[i] / 2;
        want[2] -= 0.5;
        want[3] -= 0.5;
        assert_grads(x, want, tol);
    }
}
END_TEST

START_TEST(test_cross_entropy_ignore_index) {
    /* row 1 ignored: the loss is row 0's alone, and row 1 gets no gradient */
    qkv_tensor *x = mkp(QKV_F64, 2, (int64_t[]){2, 3}, CE_LOGITS);
    qkv_tensor *t = qkv_from_array(ctx, QKV_I32, 1, (int64_t[]){2}, (int32_t[]){2, -1});
    qkv_tensor *loss = qkv_cross_entropy(ctx, x, t, -1);
    ck_assert_double_eq_tol(qkv_get(loss, 0), 0.4076059644443804, 1e-14);
    qkv_backward(loss);
    assert_grads(x, (double[]){CE_P[0], CE_P[1], CE_P[2] - 1, 0, 0, 0}, 1e-14);

    /* 3-D logits (B,T,V) with targets (B,T) */
    double v[2 * 2 * 3];
    for (int i = 0; i < 12; i++) v[i] = CE_LOGITS[i % 6];
    qkv_tensor *x3 = mkp(QKV_F64, 3, (int64_t[]){2, 2, 3}, v);
    qkv_tensor *t3 = qkv_from_array(ctx, QKV_I32, 2, (int64_t[]){2, 2}, (int32_t[]){2, 0, 7, 7});
    qkv_tensor *l3 = qkv_cross_entropy(ctx, x3, t3, 7);
    ck_assert_double_eq_tol(qkv_get(l3, 0), 1.0744586305507688, 1e-14);
}
END_TEST

START_TEST(test_cross_entropy_all_ignored) {
    for (int d = 0; d < 2; d++) {
        qkv_tensor *x = mkp(FLOATS[d], 2, (int64_t[]){2, 3}, CE_LOGITS);
        qkv_tensor *t = qkv_from_array(ctx, QKV_I32, 1, (int64_t[]){2}, (int32_t[]){-1, -1});
        qkv_tensor *loss = qkv_cross_entropy(ctx, x, t, -1);
        ck_assert_double_eq(qkv_get(loss, 0), 0.0);
        qkv_backward(loss);
        for (int i = 0; i < 6; i++) {
            ck_assert(!isnan(qkv_grad_get(x, i)));
            ck_assert_double_eq(qkv_grad_get(x, i), 0.0);
        }
    }
}
END_TEST

START_TEST(test_cross_entropy_large_logits) {
    /* the log-sum-exp is stable: logits of 1000 do not overflow */
    qkv_tensor *x = mkp(QKV_F32, 2, (int64_t[]){1, 2}, (double[]){1000, 1000});
    qkv_tensor *loss = qkv_cross_entropy(ctx, x, qkv_from_array(ctx, QKV_I32, 1, (int64_t[]){1},
                                                              (int32_t[]){0}), -1);
    ck_assert_double_eq_tol(qkv_get(loss, 0), log(2.0), 1e-6);
    qkv_backward(loss);
    ck_assert_double_eq_tol(qkv_grad_get(x, 0), -0.5, 1e-6);
    ck_assert_double_eq_tol(qkv_grad_get(x, 1), 0.5, 1e-6);
}
END_TEST

START_TEST(test_mse) {
    for (int d = 0; d < 2; d++) {
        qkv_tensor *a = mkp(FLOATS[d], 2, (int64_t[]){2, 2}, (double[]){1, 2, 3, 4});
        qkv_tensor *b = mkp(FLOATS[d], 2, (int64_t[]){2, 2}, (double[]){0, 2, 5, 1});
        qkv_tensor *loss = qkv_mse(ctx, a, b);
        /* ((1)² + 0² + (−2)² + 3²) / 4 = 14 / 4 */
        ck_assert_double_eq(qkv_get(loss, 0), 3.5);
        qkv_backward(loss);
        /* da = 2(a − b)/n, db = −da */
        assert_grads(a, (double[]){0.5, 0, -1, 1.5}, 0);
        assert_grads(b, (double[]){-0.5, 0, 1, -1.5}, 0);
    }
}
END_TEST

START_TEST(test_sum_mean_scale) {
    for (int d = 0; d < 2; d++) {
        qkv_tensor *x = mkp(FLOATS[d], 3, (int64_t[]){2, 2, 2}, (double[]){1, 2, 3, 4, 5, 6, 7, -8});
        qkv_tensor *s = qkv_sum(ctx, x), *m = qkv_mean(ctx, x);
        ck_assert_int_eq(s->ndim, 0);
        ck_assert_int_eq(m->ndim, 0);
        ck_assert_double_eq(qkv_get(s, 0), 20.0);
        ck_assert_double_eq(qkv_get(m, 0), 2.5);
        qkv_backward(m);
        for (int i = 0; i < 8; i++) ck_assert_double_eq(qkv_grad_get(x, i), 0.125);
        qkv_zero_grad(ctx);
        qkv_backward(s);
        for (int i = 0; i < 8; i++) ck_assert_double_eq(qkv_grad_get(x, i), 1.0);
        qkv_zero_grad(ctx);
        qkv_tensor *y = qkv_scale(ctx, x, -0.5);
        ck_assert_int_eq(y->op, QKV_OP_SCALE);
        assert_values(y, (double[]){-0.5, -1, -1.5, -2, -2.5, -3, -3.5, 4}, 0);
        qkv_backward(qkv_sum(ctx, y));
        for (int i = 0; i < 8; i++) ck_assert_double_eq(qkv_grad_get(x, i), -0.5);
    }
}
END_TEST

/* ---- attention ---------------------------------------------------------------------------- */

/* The 3-token example, n = 3, d_model = 4, d_k = d_v = 2, worked by hand (numbers from
 * python3, math module, 17 significant digits):
 *
 *   X   = [1 0 1 0]    W_Q = [1 0]    W_K = [0 1]    W_V = [1 0]
 *         [0 2 0 1]          [0 1]          [1 0]          [2 1]
 *         [1 1 0 0]          [1 1]          [0 1]          [0 3]
 *                            [0 0]          [1 1]          [1 1]
 *
 *   Q = X·W_Q = [2 1]    K = X·W_K = [0 2]    V = X·W_V = [1 3]
 *               [0 2]                [3 1]                [5 3]
 *               [1 1]                [1 1]                [3 1]
 *
 *   S = Q·Kᵀ  = [2 7 3]      e.g. S[0][1] = q0·k1 = 2·3 + 1·1 = 7
 *               [4 2 2]
 *               [2 4 2]
 *
 *   S/√2      = [1.4142135623730950 4.9497474683058329 2.1213203435596424]
 *               [2.8284271247461903 1.4142135623730950 1.4142135623730950]
 *               [1.4142135623730950 2.8284271247461903 1.4142135623730950]
 *
 *   A = softmax rows:
 *     row 0 = e^(S0/√2) / Σ = [0.02677989571025372 0.9189073965928238 0.054312707696922445]
 *     row 1 = [e^(2√2), e^√2, e^√2] / Σ = [0.672841798375977 0.16357910081201152 0.16357910081201152]
 *     row 2 = [e^√2, e^(2√2), e^√2] / Σ = [0.16357910081201152 0.672841798375977 0.16357910081201152]
 *
 *   O = A·V:
 *     row 0 = 0.026780·(1,3) + 0.918907·(5,3) + 0.054313·(3,1) = (4.78425500176514, 2.891374584606155)
 *     row 1 = 0.672842·(1,3) + 0.163579·(5,3) + 0.163579·(3,1) = (1.9814746048720693, 2.6728417983759774)
 *     row 2 = 0.163579·(1,3) + 0.672842·(5,3) + 0.163579·(3,1) = (4.018525395127931, 2.6728417983759774)
 */
static const double WX[12] = {1, 0, 1, 0, 0, 2, 0, 1, 1, 1, 0, 0};
static const double WWQ[8] = {1, 0, 0, 1, 1, 1, 0, 0};
static const double WWK[8] = {0, 1, 1, 0, 0, 1, 1, 1};
static const double WWV[8] = {1, 0, 2, 1, 0, 3, 1, 1};
static const double WQ_EXP[6] = {2, 1, 0, 2, 1, 1};
static const double WK_EXP[6] = {0, 2, 3, 1, 1, 1};
static const double WV_EXP[6] = {1, 3, 5, 3, 3, 1};
static const double WS_EXP[9] = {2, 7, 3, 4, 2, 2, 2, 4, 2};
static const double WA_EXP[9] = {0.02677989571025372, 0.9189073965928238, 0.054312707696922445,
                                 0.672841798375977,   0.16357910081201152, 0.16357910081201152,
                                 0.16357910081201152, 0.672841798375977,   0.16357910081201152};
static const double WO_EXP[6] = {4.78425500176514,   2.891374584606155,  1.9814746048720693,
                                 2.6728417983759774, 4.018525395127931, 2.6728417983759774};

START_TEST(test_attention_worked_example) {
    qkv_tensor *x = mk(QKV_F64, 2, (int64_t[]){3, 4}, WX);
    qkv_tensor *q = qkv_matmul(ctx, x, mk(QKV_F64, 2, (int64_t[]){4, 2}, WWQ));
    qkv_tensor *k = qkv_matmul(ctx, x, mk(QKV_F64, 2, (int64_t[]){4, 2}, WWK));
    qkv_tensor *v = qkv_matmul(ctx, x, mk(QKV_F64, 2, (int64_t[]){4, 2}, WWV));
    assert_values(q, WQ_EXP, 0);
    assert_values(k, WK_EXP, 0);
    assert_values(v, WV_EXP, 0);
    assert_values(qkv_matmul_ex(ctx, q, false, k, true), WS_EXP, 0);
    qkv_tensor *a = NULL;
    qkv_tensor *o = qkv_attention(ctx, q, k, v, NULL, 0.0, &a); /* 0 => 1/sqrt(2) */
    assert_shape(o, 2, (int64_t[]){3, 2});
    assert_shape(a, 2, (int64_t[]){3, 3});
    assert_values(a, WA_EXP, 1e-6);
    assert_values(o, WO_EXP, 1e-6);
    /* an explicit scale of 1/√2 is the same thing */
    qkv_tensor *o2 = qkv_attention(ctx, q, k, v, NULL, 1.0 / sqrt(2.0), NULL);
    assert_values(o2, WO_EXP, 1e-6);
    /* f32 agrees to f32 precision */
    qkv_tensor *x32 = mk(QKV_F32, 2, (int64_t[]){3, 4}, WX);
    qkv_tensor *o32 = qkv_attention(ctx, qkv_matmul(ctx, x32, mk(QKV_F32, 2, (int64_t[]){4, 2}, WWQ)),
                                    qkv_matmul(ctx, x32, mk(QKV_F32, 2, (int64_t[]){4, 2}, WWK)),
                                    qkv_matmul(ctx, x32, mk(QKV_F32, 2, (int64_t[]){4, 2}, WWV)),
                                    NULL, 0.0, NULL);
    assert_values(o32, WO_EXP, 1e-5);
}
END_TEST

START_TEST(test_attention_worked_example_causal) {
    /* the same example under a causal mask: row 0 attends to itself only (O0 = V0 = (1,3)),
     * row 1 to keys 0, 1 with scores (4, 2)/√2, row 2 is unchanged */
    qkv_tensor *q = mk(QKV_F64, 2, (int64_t[]){3, 2}, WQ_EXP);
    qkv_tensor *k = mk(QKV_F64, 2, (int64_t[]){3, 2}, WK_EXP);
    qkv_tensor *v = mk(QKV_F64, 2, (int64_t[]){3, 2}, WV_EXP);
    qkv_tensor *o = qkv_attention(ctx, q, k, v, qkv_mask_causal(ctx, QKV_F64, 3, 3), 0, NULL);
    double p = 1.0 / (1.0 + exp(-2.0 / sqrt(2.0))); /* softmax((4,2)/√2)[0] = σ(√2) */
    ck_assert_double_eq_tol(p, 0.8044296825069569, 1e-15);
    const double want[6] = {1, 3, p * 1 + (1 - p) * 5, 3, WO_EXP[4], WO_EXP[5]};
    assert_values(o, want, 1e-12);
}
END_TEST

START_TEST(test_attention_shapes) {
    /* cross-attention with heads: Q (2,3,4,5), K (2,3,6,5), V (2,3,6,7) -> (2,3,4,7) */
    qkv_rng rng = qkv_rng_seed(13);
    qkv_tensor *q = qkv_randn(ctx, QKV_F32, 4, (int64_t[]){2, 3, 4, 5}, 1.0, &rng);
    qkv_tensor *k = qkv_randn(ctx, QKV_F32, 4, (int64_t[]){2, 3, 6, 5}, 1.0, &rng);
    qkv_tensor *v = qkv_randn(ctx, QKV_F32, 4, (int64_t[]){2, 3, 6, 7}, 1.0, &rng);
    qkv_tensor *w = NULL;
    qkv_tensor *o = qkv_attention(ctx, q, k, v, NULL, 0, &w);
    assert_shape(o, 4, (int64_t[]){2, 3, 4, 7});
    assert_shape(w, 4, (int64_t[]){2, 3, 4, 6});
    for (int64_t r = 0; r < 24; r++) {
        double s = 0;
        for (int j = 0; j < 6; j++) s += qkv_get(w, r * 6 + j);
        ck_assert_double_eq_tol(s, 1.0, 1e-6);
    }
    /* every output row is a convex combination of V rows: within their range per column */
    for (int64_t bh = 0; bh < 6; bh++)
        for (int c = 0; c < 7; c++) {
            double lo = INFINITY, hi = -INFINITY;
            for (int j = 0; j < 6; j++) {
                double x = qkv_get(v, (bh * 6 + j) * 7 + c);
                lo = fmin(lo, x);
                hi = fmax(hi, x);
            }
            for (int i = 0; i < 4; i++) {
                double y = qkv_get(o, (bh * 4 + i) * 7 + c);
                ck_assert(y >= lo - 1e-5 && y <= hi + 1e-5);
            }
        }
}
END_TEST

/* ---- the MLP's activations and LayerNorm ------------------------------------------------- */

START_TEST(test_relu_known) {
    for (int d = 0; d < 2; d++) {
        qkv_tensor *x = mkp(FLOATS[d], 1, (int64_t[]){5}, (double[]){-2, -0.0, 0, 0.5, 3});
        qkv_tensor *y = qkv_relu(ctx, x);
        ck_assert_int_eq(y->op, QKV_OP_RELU);
        assert_values(y, (double[]){0, 0, 0, 0.5, 3}, 0);
        ck_assert(!signbit(qkv_get(y, 1))); /* relu(-0) is +0 */
        /* dy = w: the gradient passes where x > 0 only (0 at x = 0, as PyTorch) */
        qkv_tensor *w = mk(FLOATS[d], 1, (int64_t[]){5}, (double[]){1, 2, 3, 4, 5});
        qkv_backward(qkv_sum(ctx, qkv_mul(ctx, y, w)));
        assert_grads(x, (double[]){0, 0, 0, 4, 5}, 0);
        /* NaN stays NaN (a clamp), and gets no gradient */
        qkv_tensor *n = qkv_relu(ctx, mk(FLOATS[d], 1, (int64_t[]){1}, (double[]){NAN}));
        ck_assert(isnan(qkv_get(n, 0)));
    }
}
END_TEST

/* gelu and its derivative at a few points, worked out apart from qkv (in double, from the
 * definitions: x·Φ(x) and Φ(x) + x·φ(x); 0.5·x·(1 + tanh(u)) and its derivative). */
START_TEST(test_gelu_known) {
    static const double x[5] = {-3, -0.5, 0, 1, 2};
    static const double erf_y[5] = {-0.00404969409489031, -0.15426876936299344, 0,
                                    0.8413447460685429, 1.9544997361036416};
    static const double erf_dy[5] = {-0.011945647204183918, 0.13250487534383712, 0.5,
                                     1.0833154705876864, 1.085231801078197};
    static const double tanh_y[5] = {-0.0036373920817729943, -0.15428599017485606, 0,
                                     0.8411919906082768, 1.954597694087775};
    static const double tanh_dy[5] = {-0.011584166630969516, 0.13263009646535764, 0.5,
                                      1.0829640838457826, 1.0860992566236183};
    for (int d = 0; d < 2; d++) {
        double tol = d == 0 ? 2e-7 : 1e-15;
        for (int form = 0; form < 2; form++) {
            qkv_act act = form == 0 ? QKV_ACT_GELU : QKV_ACT_GELU_TANH;
            qkv_tensor *in = mkp(FLOATS[d], 1, (int64_t[]){5}, x);
            qkv_tensor *y = qkv_gelu(ctx, in, act);
            ck_assert_int_eq(y->op, QKV_OP_GELU);
            ck_assert_int_eq(y->iparam[0], act);
            assert_values(y, form == 0 ? erf_y : tanh_y, tol);
            qkv_backward(qkv_sum(ctx, y));
            assert_grads(in, form == 0 ? erf_dy : tanh_dy, tol);
        }
    }
}
END_TEST

/* The negative tail, where 1 + erf and 1 + tanh would cancel: both forms keep their relative
 * precision, in f32 too (values from mpmath at 40 digits). */
START_TEST(test_gelu_tail) {
    static const double x[2] = {-5, -8};
    static const double want[2][2][2] = { /* [form][value, derivative][x] */
        {{-1.4332578593959696e-6, -4.9767684594174273e-15},
         {-7.1469460017922946e-6, -3.979607261086796e-14}},
        {{-2.291796196629506e-7, -3.1077829375011112e-21},
         {-1.5463619875325946e-6, -4.7147845041068416e-20}}};
    for (int d = 0; d < 2; d++)
        for (int form = 0; form < 2; form++) {
            qkv_tensor *in = mkp(FLOATS[d], 1, (int64_t[]){2}, x);
            qkv_tensor *y = qkv_gelu(ctx, in, form == 0 ? QKV_ACT_GELU : QKV_ACT_GELU_TANH);
            qkv_backward(qkv_sum(ctx, y));
            double tol = d == 0 ? 1e-5 : 1e-13; /* relative */
            for (int i = 0; i < 2; i++) {
                double got[2] = {qkv_get(y, i), qkv_grad_get(in, i)};
                for (int k = 0; k < 2; k++)
                    ck_assert_msg(fabs(got[k] - want[form][k][i]) <= tol * fabs(want[form][k][i]),
                                  "%s form %d x %g %s: got %.10g, want %.10g",
                                  qkv_dtype_name(FLOATS[d]), form, x[i], k ? "dy/dx" : "y",
                                  got[k], want[form][k][i]);
            }
        }
}
END_TEST

START_TEST(test_activation_dispatch) {
    ck_assert_str_eq(qkv_act_name(QKV_ACT_RELU), "relu");
    ck_assert_str_eq(qkv_act_name(QKV_ACT_GELU), "gelu");
    ck_assert_str_eq(qkv_act_name(QKV_ACT_GELU_TANH), "gelu-tanh");
    ck_assert_str_eq(qkv_act_name((qkv_act)QKV_ACTS), "?");
    ck_assert_str_eq(qkv_op_name(QKV_OP_RELU), "relu");
    ck_assert_str_eq(qkv_op_name(QKV_OP_GELU), "gelu");
    ck_assert_str_eq(qkv_op_name(QKV_OP_LAYERNORM_SCALE), "layernorm_scale");
    ck_assert_str_eq(qkv_op_name(QKV_OP_LAYERNORM_APPLY), "layernorm_apply");
    qkv_tensor *x = mk(QKV_F64, 1, (int64_t[]){3}, (double[]){-1, 0.25, 2});
    for (int a = 0; a < QKV_ACTS; a++) {
        qkv_tensor *y = qkv_activation(ctx, x, (qkv_act)a);
        ck_assert_int_eq(y->op, a == QKV_ACT_RELU ? QKV_OP_RELU : QKV_OP_GELU);
        qkv_tensor *want = a == QKV_ACT_RELU ? qkv_relu(ctx, x) : qkv_gelu(ctx, x, (qkv_act)a);
        for (int i = 0; i < 3; i++) ck_assert_double_eq(qkv_get(y, i), qkv_get(want, i));
    }
}
END_TEST

/* Two rows of 4: (1, 2, 3, 4), mean 2.5 and variance 1.25, and a constant row, which
 * normalises to 0 and so gives the bias. loss = Σ w ⊙ y. */
START_TEST(test_layernorm_known) {
    const double r0 = 1 / sqrt(1.25 + QKV_LAYERNORM_EPS), r1 = 1 / sqrt(QKV_LAYERNORM_EPS);
    const double xhat[4] = {-1.5 * r0, -0.5 * r0, 0.5 * r0, 1.5 * r0};
    const double gain[4] = {1, 2, 0.5, -1}, bias[4] = {0, 1, -1, 0.5};
    const double w[8] = {1, -1, 2, 0.5, 3, 1, -2, 1};
    for (int d = 0; d < 2; d++) {
        double tol = d == 0 ? 1e-6 : 1e-14;
        qkv_tensor *x = mkp(FLOATS[d], 2, (int64_t[]){2, 4}, (double[]){1, 2, 3, 4, 7, 7, 7, 7});
        qkv_tensor *g = mkp(FLOATS[d], 1, (int64_t[]){4}, gain);
        qkv_tensor *b = mkp(FLOATS[d], 1, (int64_t[]){4}, bias);
        qkv_tensor *y = qkv_layernorm(ctx, x, g, b, QKV_LAYERNORM_EPS);
        /* the two ops: the apply, reading x and the scale of x */
        ck_assert_int_eq(y->op, QKV_OP_LAYERNORM_APPLY);
        ck_assert_int_eq(y->src[1]->op, QKV_OP_LAYERNORM_SCALE);
        ck_assert_ptr_eq(y->src[0], x);
        ck_assert_ptr_eq(y->src[1]->src[0], x);
        assert_shape(y, 2, x->shape);
        /* y = x̂·gain + bias: (-1.3416354, 0.10557639, -0.77639410, -0.84163542), and bias */
        double want_y[8];
        for (int j = 0; j < 4; j++) want_y[j] = xhat[j] * gain[j] + bias[j], want_y[4 + j] = bias[j];
        ck_assert_double_eq_tol(want_y[0], -1.3416354199689269, 1e-15);
        assert_values(y, want_y, tol);

        qkv_backward(qkv_sum(ctx, qkv_mul(ctx, y, mk(FLOATS[d], 2, (int64_t[]){2, 4}, w))));
        /* dbias = Σ_rows w; dgain = Σ_rows w ⊙ x̂ (row 1's x̂ is 0) */
        double want_db[4], want_dg[4], want_dx[8];
        for (int j = 0; j < 4; j++) want_db[j] = w[j] + w[4 + j], want_dg[j] = w[j] * xhat[j];
        assert_grads(b, want_db, tol);
        assert_grads(g, want_dg, tol);
        /* dx = rstd·(g − mean(g) − x̂·mean(g·x̂)), g = w ⊙ gain */
        for (int r = 0; r < 2; r++) {
            double gs[4], mg = 0, mgx = 0, rs = r == 0 ? r0 : r1;
            for (int j = 0; j < 4; j++) {
                gs[j] = w[4 * r + j] * gain[j];
                mg += gs[j] / 4;
                mgx += gs[j] * (r == 0 ? xhat[j] : 0) / 4;
            }
            for (int j = 0; j < 4; j++)
                want_dx[4 * r + j] = rs * (gs[j] - mg - (r == 0 ? xhat[j] : 0) * mgx);
        }
        /* the constant row: rstd = 1/√eps times (3, 2, -1, -1) − 0.75 */
        ck_assert_double_eq_tol(want_dx[4], r1 * 2.25, 1e-12);
        for (int i = 0; i < 8; i++)
            ck_assert_msg(fabs(qkv_grad_get(x, i) - want_dx[i]) <= tol * fmax(1, fabs(want_dx[i])),
                          "%s dx[%d]: got %.10g, want %.10g", qkv_dtype_name(FLOATS[d]), i,
                          qkv_grad_get(x, i), want_dx[i]);
    }
}
END_TEST

/* The LayerNorm's two ops alone, on the rows of test_layernorm_known. The scale: s (2, 1) =
 * 1/√(var + eps), and with loss Σ v ⊙ s, dx = v·(−s³·(x − mean)/C) (0 on the constant row).
 * The apply with s given (2 and −0.5, not the rows' own): y = (x − mean)·s·gain + bias, and
 * with loss Σ w ⊙ y, s held: dx = s·(g − mean(g)), ds = Σ g·(x − mean), g = w ⊙ gain. */
START_TEST(test_layernorm_two_ops) {
    const double r0 = 1 / sqrt(1.25 + QKV_LAYERNORM_EPS), r1 = 1 / sqrt(QKV_LAYERNORM_EPS);
    const double xs[8] = {1, 2, 3, 4, 7, 7, 7, 7}, means[2] = {2.5, 7};
    const double gain[4] = {1, 2, 0.5, -1}, bias[4] = {0, 1, -1, 0.5};
    const double w[8] = {1, -1, 2, 0.5, 3, 1, -2, 1}, v[2] = {0.5, -2}, sv[2] = {2, -0.5};
    for (int d = 0; d < 2; d++) {
        double tol = d == 0 ? 1e-6 : 1e-14;
        qkv_tensor *x = mkp(FLOATS[d], 2, (int64_t[]){2, 4}, xs);
        qkv_tensor *s = qkv_layernorm_scale(ctx, x, QKV_LAYERNORM_EPS);
        ck_assert_int_eq(s->op, QKV_OP_LAYERNORM_SCALE);
        assert_shape(s, 2, (int64_t[]){2, 1});
        assert_values(s, (double[]){r0, r1}, tol * r1); /* f32: s rounded to a float */
        qkv_backward(qkv_sum(ctx, qkv_mul(ctx, s, mk(FLOATS[d], 2, (int64_t[]){2, 1}, v))));
        double want[8];
        for (int r = 0; r < 2; r++)
            for (int j = 0; j < 4; j++) {
                double sr = r == 0 ? r0 : r1;
                want[4 * r + j] = v[r] * -sr * sr * sr * (xs[4 * r + j] - means[r]) / 4;
            }
        ck_assert_double_eq_tol(want[0], 0.5 * 1.5 / 4 * pow(1.25 + QKV_LAYERNORM_EPS, -1.5),
                                1e-15);
        assert_grads(x, want, tol);

        qkv_tensor *x2 = mkp(FLOATS[d], 2, (int64_t[]){2, 4}, xs);
        qkv_tensor *sp = mkp(FLOATS[d], 2, (int64_t[]){2, 1}, sv);
        qkv_tensor *g = mkp(FLOATS[d], 1, (int64_t[]){4}, gain);
        qkv_tensor *b = mkp(FLOATS[d], 1, (int64_t[]){4}, bias);
        qkv_tensor *y = qkv_layernorm_apply(ctx, x2, sp, g, b);
        ck_assert_int_eq(y->op, QKV_OP_LAYERNORM_APPLY);
        ck_assert_ptr_eq(y->src[3], b);
        double want_y[8], want_dx[8], want_ds[2] = {0, 0}, want_dg[4], want_db[4];
        for (int r = 0; r < 2; r++) {
            double mg = 0;
            for (int j = 0; j < 4; j++) mg += w[4 * r + j] * gain[j] / 4;
            for (int j = 0; j < 4; j++) {
                double c = xs[4 * r + j] - means[r], gj = w[4 * r + j] * gain[j];
                want_y[4 * r + j] = c * sv[r] * gain[j] + bias[j];
                want_dx[4 * r + j] = sv[r] * (gj - mg);
                want_ds[r] += gj * c;
            }
        }
        for (int j = 0; j < 4; j++)
            want_db[j] = w[j] + w[4 + j], want_dg[j] = w[j] * (xs[j] - 2.5) * sv[0];
        ck_assert_double_eq_tol(want_ds[0], -0.75, 1e-15); /* (1, -2, 1, -0.5)·(-1.5, ..., 1.5) */
        assert_values(y, want_y, tol);
        qkv_backward(qkv_sum(ctx, qkv_mul(ctx, y, mk(FLOATS[d], 2, (int64_t[]){2, 4}, w))));
        assert_grads(x2, want_dx, tol);
        assert_grads(sp, want_ds, tol);
        assert_grads(g, want_dg, tol);
        assert_grads(b, want_db, tol);
    }
}
END_TEST

/* (B, T, C) with gain 1 and bias 0: every row has mean 0 and variance var/(var + eps); the
 * gradient of x sums to 0 over each row; f32 agrees with f64. In no-grad mode nothing is kept
 * for a backward pass. */
START_TEST(test_layernorm_rows) {
    qkv_rng rng = qkv_rng_seed(21);
    qkv_tensor *x64 = qkv_param(ctx, qkv_randn(ctx, QKV_F64, 3, (int64_t[]){2, 3, 8}, 3.0, &rng));
    qkv_tensor *x32 = qkv_param(ctx, qkv_new(ctx, QKV_F32, 3, x64->shape));
    for (int64_t i = 0; i < x64->size; i++) qkv_set(x32, i, qkv_get(x64, i));
    qkv_tensor *w = qkv_randn(ctx, QKV_F64, 3, x64->shape, 1.0, &rng);
    qkv_tensor *w32 = qkv_new(ctx, QKV_F32, 3, x64->shape);
    for (int64_t i = 0; i < w->size; i++) qkv_set(w32, i, qkv_get(w, i));
    qkv_tensor *y[2];
    for (int d = 0; d < 2; d++) {
        qkv_tensor *x = d == 0 ? x32 : x64;
        qkv_tensor *g = qkv_param(ctx, qkv_ones(ctx, FLOATS[d], 1, (int64_t[]){8}));
        qkv_tensor *b = qkv_param(ctx, qkv_zeros(ctx, FLOATS[d], 1, (int64_t[]){8}));
        y[d] = qkv_layernorm(ctx, x, g, b, QKV_LAYERNORM_EPS);
        ck_assert_ptr_nonnull(y[d]->saved);
        qkv_backward(qkv_sum(ctx, qkv_mul(ctx, y[d], d == 0 ? w32 : w)));
        for (int64_t r = 0; r < 6; r++) {
            double mean = 0, sq = 0, dsum = 0, var = 0;
            for (int j = 0; j < 8; j++) mean += qkv_get(y[d], r * 8 + j) / 8;
            for (int j = 0; j < 8; j++) {
                sq += pow(qkv_get(y[d], r * 8 + j) - mean, 2) / 8;
                var += pow(qkv_get(x, r * 8 + j), 2) / 8; /* about the mean below */
                dsum += qkv_grad_get(x, r * 8 + j);
            }
            double xm = 0;
            for (int j = 0; j < 8; j++) xm += qkv_get(x, r * 8 + j) / 8;
            var -= xm * xm;
            ck_assert_double_eq_tol(mean, 0, d == 0 ? 1e-6 : 1e-15);
            ck_assert_double_eq_tol(sq, var / (var + QKV_LAYERNORM_EPS), d == 0 ? 1e-6 : 1e-12);
            ck_assert_double_eq_tol(dsum, 0, d == 0 ? 1e-5 : 1e-13);
        }
    }
    for (int64_t i = 0; i < x64->size; i++) {
        ck_assert_double_eq_tol(qkv_get(y[0], i), qkv_get(y[1], i), 1e-6);
        ck_assert_double_eq_tol(qkv_grad_get(x32, i), qkv_grad_get(x64, i), 1e-5);
    }
    qkv_ctx_set_no_grad(ctx, true);
    qkv_tensor *g = qkv_ones(ctx, QKV_F64, 1, (int64_t[]){8}), *b = qkv_zeros(ctx, QKV_F64, 1, (int64_t[]){8});
    qkv_tensor *e = qkv_layernorm(ctx, x64, g, b, QKV_LAYERNORM_EPS);
    ck_assert_ptr_null(e->saved);
    ck_assert_ptr_null(e->grad);
    for (int64_t i = 0; i < x64->size; i++) ck_assert_double_eq(qkv_get(e, i), qkv_get(y[1], i));
}
END_TEST

/* f32 rows with a large common offset (1000 + 0.01·noise): x̂ is formed in double, so the f32
 * output is the f64 output (on the same, float-rounded inputs) to a float's rounding; a float
 * mean, off by up to half its ulp (3e-5), would put 3e-3 into every x̂. */
START_TEST(test_layernorm_f32_offset) {
    qkv_rng rng = qkv_rng_seed(8);
    qkv_tensor *x32 = qkv_new(ctx, QKV_F32, 2, (int64_t[]){4, 16});
    for (int64_t i = 0; i < x32->size; i++) qkv_set(x32, i, 1000 + 0.01 * qkv_rng_normal(&rng));
    qkv_tensor *x64 = qkv_new(ctx, QKV_F64, 2, x32->shape);
    for (int64_t i = 0; i < x32->size; i++) qkv_set(x64, i, qkv_get(x32, i));
    qkv_tensor *y[2];
    for (int d = 0; d < 2; d++)
        y[d] = qkv_layernorm(ctx, d == 0 ? x32 : x64, qkv_ones(ctx, FLOATS[d], 1, (int64_t[]){16}),
                             qkv_zeros(ctx, FLOATS[d], 1, (int64_t[]){16}), QKV_LAYERNORM_EPS);
    for (int64_t i = 0; i < x32->size; i++)
        ck_assert_msg(fabs(qkv_get(y[0], i) - qkv_get(y[1], i)) <= 1e-6, "y[%lld]: %.9g vs %.9g",
                      (long long)i, qkv_get(y[0], i), qkv_get(y[1], i));
}
END_TEST

#ifdef QKV_HAVE_OPENMP
/* The new ops on 1, 2 and 3 threads give the same bits: outputs, dx, and LayerNorm's dgain and
 * dbias, sums over every row in blocks that depend on the rows only. 900 rows of 64: the loops
 * fork (3.5 times KERNEL_PARALLEL_ELEMS elements), 57 blocks. */
static void *copy_of(const void *p, int64_t n, qkv_dtype dt) {
    void *c = malloc((size_t)n * qkv_dtype_size(dt));
    ck_assert_ptr_nonnull(c);
    return memcpy(c, p, (size_t)n * qkv_dtype_size(dt));
}

START_TEST(test_mlp_ops_thread_count) {
    int saved = qkv_threads();
    for (int d = 0; d < 2; d++) {
        qkv_dtype dt = FLOATS[d];
        void *first[6] = {0};
        for (int threads = 1; threads <= 3; threads++) {
            qkv_set_threads(threads);
            qkv_ctx *c = qkv_ctx_new(0);
            qkv_rng rng = qkv_rng_seed(99);
            int64_t shape[3] = {6, 150, 64};
            qkv_tensor *x = qkv_param(c, qkv_randn(c, dt, 3, shape, 1.0, &rng));
            qkv_tensor *g = qkv_param(c, qkv_randn(c, dt, 1, (int64_t[]){64}, 1.0, &rng));
            qkv_tensor *b = qkv_param(c, qkv_randn(c, dt, 1, (int64_t[]){64}, 1.0, &rng));
            qkv_tensor *w = qkv_randn(c, dt, 3, shape, 1.0, &rng);
            qkv_tensor *h = qkv_layernorm(c, x, g, b, QKV_LAYERNORM_EPS);
            qkv_tensor *y = qkv_add(c, qkv_gelu(c, h, QKV_ACT_GELU),
                                    qkv_add(c, qkv_gelu(c, h, QKV_ACT_GELU_TANH), qkv_relu(c, h)));
            qkv_backward(qkv_sum(c, qkv_mul(c, y, w)));
            const qkv_tensor *t[6] = {h, y, x, g, b, NULL};
            for (int k = 0; k < 5; k++) {
                const void *bits = k < 2 ? t[k]->data : t[k]->grad;
                if (threads == 1) {
                    first[k] = copy_of(bits, t[k]->size, dt);
                } else {
                    ck_assert_msg(memcmp(first[k], bits, (size_t)t[k]->size * qkv_dtype_size(dt)) == 0,
                                  "%s: tensor %d on %d threads differs from 1 thread",
                                  qkv_dtype_name(dt), k, threads);
                }
            }
            qkv_ctx_free(c);
        }
        for (int k = 0; k < 5; k++) free(first[k]);
    }
    qkv_set_threads(saved);
}
END_TEST
#endif

static Suite *ops_suite(void) {
    Suite *s = suite_create("ops");
    TCase *tc = tcase_create("softmax");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_softmax_known);
    tcase_add_test(tc, test_softmax_rows_sum_to_one);
    tcase_add_test(tc, test_softmax_no_overflow);
    tcase_add_test(tc, test_softmax_shift_invariant);
    tcase_add_test(tc, test_softmax_fully_masked_row);
    tcase_add_test(tc, test_attention_fully_masked_row);
    suite_add_tcase(s, tc);

    tc = tcase_create("masks");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_mask_causal);
    tcase_add_test(tc, test_mask_padding);
    tcase_add_test(tc, test_mask_from_bool);
    tcase_add_test(tc, test_mask_gradient_is_identity_where_kept);
    suite_add_tcase(s, tc);

    tc = tcase_create("matmul");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_matmul_known);
    tcase_add_test(tc, test_matmul_transposes);
    tcase_add_test(tc, test_matmul_batched);
    tcase_add_test(tc, test_matmul_large_matches_naive);
    tcase_add_test(tc, test_matmul_gradient_known);
    suite_add_tcase(s, tc);

    tc = tcase_create("elementwise");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_add_broadcast);
    tcase_add_test(tc, test_add_broadcast_3d);
    tcase_add_test(tc, test_mul_broadcast);
    tcase_add_test(tc, test_embedding);
    tcase_add_test(tc, test_embedding_1d_idx);
    tcase_add_test(tc, test_transpose);
    tcase_add_test(tc, test_select_rows);
    tcase_add_test(tc, test_reshape);
    suite_add_tcase(s, tc);

    tc = tcase_create("losses");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_cross_entropy);
    tcase_add_test(tc, test_cross_entropy_ignore_index);
    tcase_add_test(tc, test_cross_entropy_all_ignored);
    tcase_add_test(tc, test_cross_entropy_large_logits);
    tcase_add_test(tc, test_mse);
    tcase_add_test(tc, test_sum_mean_scale);
    suite_add_tcase(s, tc);

    tc = tcase_create("attention");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_attention_worked_example);
    tcase_add_test(tc, test_attention_worked_example_causal);
    tcase_add_test(tc, test_attention_shapes);
    suite_add_tcase(s, tc);

    tc = tcase_create("mlp");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_relu_known);
    tcase_add_test(tc, test_gelu_known);
    tcase_add_test(tc, test_gelu_tail);
    tcase_add_test(tc, test_activation_dispatch);
    tcase_add_test(tc, test_layernorm_known);
    tcase_add_test(tc, test_layernorm_two_ops);
    tcase_add_test(tc, test_layernorm_rows);
    tcase_add_test(tc, test_layernorm_f32_offset);
    suite_add_tcase(s, tc);

#ifdef QKV_HAVE_OPENMP
    tc = tcase_create("threads");
    tcase_set_tags(tc, "threads"); /* left out under qemu-user and valgrind (.ci/run) */
    tcase_add_test(tc, test_mlp_ops_thread_count);
    suite_add_tcase(s, tc);
#endif
    return s;
}

int main(void) { return run_suite(ops_suite()); }
