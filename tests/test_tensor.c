/* test_tensor.c - tensor creation, element access, the portable RNG, printing, shape strings. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#endif
#include "qkv.h"

#include "fixtures.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* Prints t into a string (caller frees). */
static char *print_to_string(const qkv_tensor *t, const char *label, int64_t max_values) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    qkv_print(f, t, label, max_values);
    fclose(f);
    return buf;
}

/* ---- creation ---------------------------------------------------------------------------- */

START_TEST(test_zeros) {
    const qkv_dtype dts[] = {QKV_F32, QKV_F64, QKV_I32};
    for (int d = 0; d < 3; d++) {
        qkv_tensor *t = qkv_zeros(ctx, dts[d], 3, (int64_t[]){2, 3, 4});
        ck_assert_int_eq(t->dtype, dts[d]);
        ck_assert_int_eq(t->ndim, 3);
        ck_assert_int_eq(t->shape[0], 2);
        ck_assert_int_eq(t->shape[1], 3);
        ck_assert_int_eq(t->shape[2], 4);
        ck_assert_int_eq(t->size, 24);
        ck_assert_ptr_nonnull(t->data);
        ck_assert_ptr_null(t->grad);
        ck_assert(!t->requires_grad);
        ck_assert_int_eq(t->op, QKV_OP_NONE);
        ck_assert_ptr_eq(t->ctx, ctx);
        for (int64_t i = 0; i < t->size; i++) ck_assert_double_eq(qkv_get(t, i), 0.0);
    }
}
END_TEST

START_TEST(test_ones) {
    const qkv_dtype dts[] = {QKV_F32, QKV_F64, QKV_I32};
    for (int d = 0; d < 3; d++) {
        qkv_tensor *t = qkv_ones(ctx, dts[d], 2, (int64_t[]){5, 7});
        ck_assert_int_eq(t->size, 35);
        for (int64_t i = 0; i < t->size; i++) ck_assert_double_eq(qkv_get(t, i), 1.0);
    }
    /* the element type really is the dtype's C type */
    qkv_tensor *f = qkv_ones(ctx, QKV_F32, 1, (int64_t[]){3});
    ck_assert_float_eq(((float *)f->data)[2], 1.0f);
    qkv_tensor *i = qkv_ones(ctx, QKV_I32, 1, (int64_t[]){3});
    ck_assert_int_eq(((int32_t *)i->data)[2], 1);
}
END_TEST

START_TEST(test_scalar) {
    qkv_tensor *s = qkv_scalar(ctx, QKV_F64, -2.5);
    ck_assert_int_eq(s->ndim, 0);
    ck_assert_int_eq(s->size, 1);
    ck_assert_double_eq(qkv_get(s, 0), -2.5);
    qkv_tensor *i = qkv_scalar(ctx, QKV_I32, 7);
    ck_assert_int_eq(((int32_t *)i->data)[0], 7);
}
END_TEST

START_TEST(test_from_array) {
    float vf[6] = {1.5f, -2, 3, 4.25f, 5, -6};
    double vd[6] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6};
    int32_t vi[6] = {-3, 0, 3, 7, 11, 2147483647};
    qkv_tensor *tf = qkv_from_array(ctx, QKV_F32, 2, (int64_t[]){2, 3}, vf);
    qkv_tensor *td = qkv_from_array(ctx, QKV_F64, 2, (int64_t[]){3, 2}, vd);
    qkv_tensor *ti = qkv_from_array(ctx, QKV_I32, 1, (int64_t[]){6}, vi);
    for (int k = 0; k < 6; k++) {
        ck_assert_double_eq(qkv_get(tf, k), (double)vf[k]);
        ck_assert_double_eq(qkv_get(td, k), vd[k]);
        ck_assert_double_eq(qkv_get(ti, k), (double)vi[k]);
    }
    ck_assert_int_eq(td->shape[0], 3);
    ck_assert_int_eq(td->shape[1], 2);
    /* the values are copied, not referenced */
    vd[0] = 99;
    ck_assert_double_eq(qkv_get(td, 0), 0.1);
    ck_assert_ptr_ne(td->data, (void *)vd);
}
END_TEST

START_TEST(test_get_set) {
    qkv_tensor *t = qkv_zeros(ctx, QKV_F32, 1, (int64_t[]){4});
    qkv_set(t, 2, 0.1);
    ck_assert_float_eq(((float *)t->data)[2], 0.1f); /* rounded to f32 */
    ck_assert_double_eq(qkv_get(t, 2), (double)0.1f);
    qkv_tensor *i = qkv_zeros(ctx, QKV_I32, 1, (int64_t[]){2});
    qkv_set(i, 1, -42);
    ck_assert_int_eq(((int32_t *)i->data)[1], -42);
    /* a tensor without a gradient reads as zero gradient */
    ck_assert_double_eq(qkv_grad_get(t, 0), 0.0);
}
END_TEST

START_TEST(test_param) {
    qkv_tensor *t = qkv_ones(ctx, QKV_F64, 2, (int64_t[]){2, 2});
    ck_assert_ptr_eq(qkv_param(ctx, t), t);
    ck_assert(t->requires_grad);
    ck_assert_ptr_nonnull(t->grad);
    for (int64_t i = 0; i < t->size; i++) ck_assert_double_eq(qkv_grad_get(t, i), 0.0);
    /* a parameter's gradient lives in its own memory, separate from the data */
    ck_assert_ptr_ne(t->grad, t->data);
    ck_assert_double_eq(qkv_get(t, 3), 1.0);
}
END_TEST

static void count_param(qkv_tensor *p, void *user) {
    (void)p;
    (*(int *)user)++;
}

START_TEST(test_param_registered_once) {
    qkv_tensor *t = qkv_param(ctx, qkv_ones(ctx, QKV_F32, 1, (int64_t[]){3}));
    qkv_param(ctx, t);
    int n = 0;
    qkv_ctx_for_params(ctx, count_param, &n);
    ck_assert_int_eq(n, 1);
}
END_TEST

START_TEST(test_rand_range) {
    qkv_rng rng = qkv_rng_seed(7);
    qkv_tensor *t = qkv_rand(ctx, QKV_F64, 2, (int64_t[]){100, 100}, -2.0, 3.0, &rng);
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (int64_t i = 0; i < t->size; i++) {
        double v = qkv_get(t, i);
        ck_assert(v >= -2.0 && v < 3.0);
        lo = fmin(lo, v);
        hi = fmax(hi, v);
        sum += v;
    }
    /* 10000 uniform draws cover the range and centre on its middle (std error 0.014) */
    ck_assert_double_lt(lo, -1.99);
    ck_assert_double_gt(hi, 2.99);
    ck_assert_double_eq_tol(sum / (double)t->size, 0.5, 0.06);
    /* f32 too */
    qkv_tensor *f = qkv_rand(ctx, QKV_F32, 1, (int64_t[]){1000}, 0.0, 1.0, &rng);
    for (int64_t i = 0; i < f->size; i++) ck_assert(qkv_get(f, i) >= 0.0 && qkv_get(f, i) <= 1.0);
}
END_TEST

START_TEST(test_randn_moments) {
    qkv_rng rng = qkv_rng_seed(2024);
    const int64_t n = 100000;
    qkv_tensor *t = qkv_randn(ctx, QKV_F64, 1, (int64_t[]){n}, 1.0, &rng);
    double sum = 0, sq = 0;
    int64_t within1 = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = qkv_get(t, i);
        ck_assert(isfinite(v));
        sum += v;
        within1 += fabs(v) < 1.0;
    }
    double mean = sum / (double)n;
    for (int64_t i = 0; i < n; i++) sq += (qkv_get(t, i) - mean) * (qkv_get(t, i) - mean);
    double var = sq / (double)(n - 1);
    /* std errors: mean 0.0032, variance 0.0045, P(|x|<1) 0.0015 */
    ck_assert_double_eq_tol(mean, 0.0, 0.015);
    ck_assert_double_eq_tol(var, 1.0, 0.025);
    ck_assert_double_eq_tol((double)within1 / (double)n, 0.6827, 0.008);

    /* std scales the draws: variance std^2 */
    qkv_tensor *s = qkv_randn(ctx, QKV_F32, 1, (int64_t[]){n}, 3.0, &rng);
    sum = sq = 0;
    for (int64_t i = 0; i < n; i++) sum += qkv_get(s, i);
    mean = sum / (double)n;
    for (int64_t i = 0; i < n; i++) sq += (qkv_get(s, i) - mean) * (qkv_get(s, i) - mean);
    ck_assert_double_eq_tol(mean, 0.0, 0.05);
    ck_assert_double_eq_tol(sq / (double)(n - 1), 9.0, 0.25);
}
END_TEST

/* ---- the RNG ------------------------------------------------------------------------------ */

START_TEST(test_rng_reproducible) {
    qkv_rng a = qkv_rng_seed(123), b = qkv_rng_seed(123), c = qkv_rng_seed(124);
    int differ = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = qkv_rng_u64(&a), y = qkv_rng_u64(&b), z = qkv_rng_u64(&c);
        ck_assert_uint_eq(x, y);
        differ += x != z;
    }
    ck_assert_int_eq(differ, 1000);
    /* the state is the whole story: a copy continues the same stream */
    qkv_rng copy = a;
    ck_assert_uint_eq(qkv_rng_u64(&copy), qkv_rng_u64(&a));
    /* tensors drawn from the same seed are identical */
    qkv_rng r1 = qkv_rng_seed(9), r2 = qkv_rng_seed(9);
    qkv_tensor *t1 = qkv_randn(ctx, QKV_F64, 2, (int64_t[]){4, 5}, 1.0, &r1);
    qkv_tensor *t2 = qkv_randn(ctx, QKV_F64, 2, (int64_t[]){4, 5}, 1.0, &r2);
    ck_assert_int_eq(memcmp(t1->data, t2->data, 20 * sizeof(double)), 0);
}
END_TEST

START_TEST(test_rng_pinned_seed42) {
    /* xoshiro256** seeded by splitmix64(42): computed once with the library and cross-checked
     * with an independent Python implementation of the reference algorithms. A change to the
     * generator (and so to every seeded experiment) fails here. */
    qkv_rng r = qkv_rng_seed(42);
    ck_assert_uint_eq(qkv_rng_u64(&r), UINT64_C(0x15780b2e0c2ec716));
    ck_assert_uint_eq(qkv_rng_u64(&r), UINT64_C(0x6104d9866d113a7e));
    ck_assert_uint_eq(qkv_rng_u64(&r), UINT64_C(0xae17533239e499a1));
    /* The first three outputs do not yet depend on every part of the state update (the
     * rotation of s[3] first shows in the 4th), so pin the next two and the 1000th as well. */
    ck_assert_uint_eq(qkv_rng_u64(&r), UINT64_C(0xecb8ad4703b360a1));
    ck_assert_uint_eq(qkv_rng_u64(&r), UINT64_C(0xfde6dc7fe2ec5e64));
    for (int i = 6; i < 1000; i++) qkv_rng_u64(&r);
    ck_assert_uint_eq(qkv_rng_u64(&r), UINT64_C(0x8de5848c61ab8968));
}
END_TEST

/* The inverse of an odd number modulo 2^64 (Newton's iteration). */
static uint64_t inv_odd(uint64_t a) {
    uint64_t x = a; /* correct to 3 bits */
    for (int i = 0; i < 5; i++) x *= 2 - a * x;
    return x;
}

/* A generator state whose next qkv_rng_u64 returns `out`: xoshiro256** outputs
 * rotl(s[1]·5, 7)·9, so s[1] = rotr(out·9⁻¹, 7)·5⁻¹. */
static qkv_rng rng_with_next(uint64_t out) {
    uint64_t y = out * inv_odd(9);
    qkv_rng r = {{0x0123456789abcdefull, ((y >> 7) | (y << 57)) * inv_odd(5), 0xfedcba9876543210ull,
                  0x0f1e2d3c4b5a6978ull}};
    return r;
}

START_TEST(test_rng_below_rejects) {
    /* For n = 6 the accepted draws are x < 2^64 - 4 (a multiple of 6); the top four values
     * would favour 0..3 and must be redrawn. */
    qkv_rng r = rng_with_next(UINT64_MAX);
    qkv_rng peek = r;
    ck_assert_uint_eq(qkv_rng_u64(&peek), UINT64_MAX); /* the crafted state works */
    uint64_t second = qkv_rng_u64(&peek);
    ck_assert_uint_lt(second, UINT64_MAX - 3);
    ck_assert_uint_eq(qkv_rng_below(&r, 6), (uint32_t)(second % 6));
    /* the last accepted value is used as is */
    r = rng_with_next(UINT64_MAX - 4);
    ck_assert_uint_eq(qkv_rng_below(&r, 6), (uint32_t)((UINT64_MAX - 4) % 6));
    /* a power of two never needs a redraw of a value below the limit */
    r = rng_with_next(UINT64_C(0x123456789));
    ck_assert_uint_eq(qkv_rng_below(&r, 256), 0x89);
}
END_TEST

START_TEST(test_rng_uniform) {
    qkv_rng r = qkv_rng_seed(5);
    double sum = 0;
    for (int i = 0; i < 100000; i++) {
        double u = qkv_rng_uniform(&r);
        ck_assert(u >= 0.0 && u < 1.0);
        sum += u;
    }
    ck_assert_double_eq_tol(sum / 100000, 0.5, 0.005);
    /* uniform is the top 53 bits of the next u64 */
    qkv_rng a = qkv_rng_seed(42), b = qkv_rng_seed(42);
    ck_assert_double_eq(qkv_rng_uniform(&a), (double)(qkv_rng_u64(&b) >> 11) * 0x1.0p-53);
}
END_TEST

START_TEST(test_rng_below) {
    qkv_rng r = qkv_rng_seed(31);
    for (int i = 0; i < 100; i++) ck_assert_uint_eq(qkv_rng_below(&r, 1), 0);
    /* n = 6: every value in range, counts pass a chi-square test (df 5, p = 0.001 is 20.5) */
    enum { N = 6, DRAWS = 60000 };
    int counts[N] = {0};
    for (int i = 0; i < DRAWS; i++) {
        uint32_t v = qkv_rng_below(&r, N);
        ck_assert_uint_lt(v, N);
        counts[v]++;
    }
    double chi2 = 0, expect = (double)DRAWS / N;
    for (int k = 0; k < N; k++) chi2 += (counts[k] - expect) * (counts[k] - expect) / expect;
    ck_assert_double_lt(chi2, 20.5);
    /* a large n, where a biased "x % n" on 32 bits would skew the mean to ~0.42 n */
    const uint32_t big = 3000000000u;
    double sum = 0;
    for (int i = 0; i < 20000; i++) {
        uint32_t v = qkv_rng_below(&r, big);
        ck_assert_uint_lt(v, big);
        sum += v;
    }
    ck_assert_double_eq_tol(sum / 20000 / big, 0.5, 0.01);
    /* n = 2^32 - 1 (the largest) stays in range */
    for (int i = 0; i < 1000; i++) ck_assert_uint_lt(qkv_rng_below(&r, UINT32_MAX), UINT32_MAX);
}
END_TEST

/* ---- printing and names ------------------------------------------------------------------ */

START_TEST(test_print_values) {
    float v[6] = {1, 2, 3, 4, 5, -6.5f};
    qkv_tensor *t = qkv_from_array(ctx, QKV_F32, 2, (int64_t[]){2, 3}, v);
    char *s = print_to_string(t, "x", 0);
    ck_assert_str_eq(s, "x f32 (2,3)\n"
                        " 1.0000  2.0000  3.0000\n"
                        " 4.0000  5.0000 -6.5000\n");
    free(s);
    /* truncated: at most 4 values, then how many were left out */
    s = print_to_string(t, "x", 4);
    ck_assert_str_eq(s, "x f32 (2,3)\n"
                        " 1.0000  2.0000  3.0000\n"
                        " 4.0000\n"
                        "... (2 more)\n");
    free(s);
}
END_TEST

START_TEST(test_print_kinds) {
    /* no label, i32 */
    int32_t iv[3] = {7, -12, 300};
    char *s = print_to_string(qkv_from_array(ctx, QKV_I32, 1, (int64_t[]){3}, iv), NULL, 0);
    ck_assert_str_eq(s, "tensor i32 (3)\n     7    -12    300\n");
    free(s);
    /* a scalar */
    s = print_to_string(qkv_scalar(ctx, QKV_F64, 0.125), "s", 0);
    ck_assert_str_eq(s, "s f64 ()\n 0.1250\n");
    free(s);
    /* an op result names its op */
    qkv_tensor *x = qkv_ones(ctx, QKV_F64, 1, (int64_t[]){2});
    s = print_to_string(qkv_scale(ctx, x, 3.0), "y", 0);
    ck_assert_str_eq(s, "y f64 (2) op=scale\n 3.0000  3.0000\n");
    free(s);
}
END_TEST

START_TEST(test_shape_str) {
    char buf[64];
    ck_assert_str_eq(qkv_shape_str(qkv_zeros(ctx, QKV_F32, 3, (int64_t[]){2, 3, 4}), buf, sizeof buf),
                     "(2,3,4)");
    ck_assert_str_eq(qkv_shape_str(qkv_zeros(ctx, QKV_F32, 1, (int64_t[]){17}), buf, sizeof buf),
                     "(17)");
    ck_assert_str_eq(qkv_shape_str(qkv_scalar(ctx, QKV_F32, 0), buf, sizeof buf), "()");
    qkv_tensor *big = qkv_zeros(ctx, QKV_I32, 4, (int64_t[]){1, 1000, 1, 12});
    ck_assert_str_eq(qkv_shape_str(big, buf, sizeof buf), "(1,1000,1,12)");
    /* returns buf */
    ck_assert_ptr_eq(qkv_shape_str(big, buf, sizeof buf), buf);
    /* a short buffer is truncated, terminated, and not overrun */
    char small[8];
    memset(small, 'Z', sizeof small);
    qkv_shape_str(big, small, 5);
    ck_assert_str_eq(small, "(1,1");
    ck_assert_int_eq(small[5], 'Z');
    ck_assert_int_eq(small[7], 'Z');
}
END_TEST

START_TEST(test_names) {
    ck_assert_str_eq(qkv_dtype_name(QKV_F32), "f32");
    ck_assert_str_eq(qkv_dtype_name(QKV_F64), "f64");
    ck_assert_str_eq(qkv_dtype_name(QKV_I32), "i32");
    ck_assert_uint_eq(qkv_dtype_size(QKV_F32), 4);
    ck_assert_uint_eq(qkv_dtype_size(QKV_F64), 8);
    ck_assert_uint_eq(qkv_dtype_size(QKV_I32), 4);
    ck_assert_str_eq(qkv_op_name(QKV_OP_NONE), "leaf");
    ck_assert_str_eq(qkv_op_name(QKV_OP_MATMUL), "matmul");
    ck_assert_str_eq(qkv_op_name(QKV_OP_CROSS_ENTROPY), "cross_entropy");
    ck_assert_str_eq(qkv_op_name(QKV_OP_MEAN), "mean");
    ck_assert_str_eq(qkv_op_name(QKV_OP_COUNT), "?");
    for (int op = 0; op < QKV_OP_COUNT; op++) {
        ck_assert_ptr_nonnull(qkv_op_name((qkv_op)op));
        ck_assert_str_ne(qkv_op_name((qkv_op)op), "?");
    }
}
END_TEST

START_TEST(test_last_error) {
    ck_assert_int_eq(qkv_fail(QKV_ERR_VALUE, "lr %g is not positive", -0.5), QKV_ERR_VALUE);
    ck_assert_str_eq(qkv_last_error(), "lr -0.5 is not positive");
    ck_assert_int_eq(qkv_fail(QKV_ERR_IO, "cannot open %s", "x.bin"), QKV_ERR_IO);
    ck_assert_str_eq(qkv_last_error(), "cannot open x.bin");
}
END_TEST

static Suite *tensor_suite(void) {
    Suite *s = suite_create("tensor");
    TCase *tc = tcase_create("creation");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_zeros);
    tcase_add_test(tc, test_ones);
    tcase_add_test(tc, test_scalar);
    tcase_add_test(tc, test_from_array);
    tcase_add_test(tc, test_get_set);
    tcase_add_test(tc, test_param);
    tcase_add_test(tc, test_param_registered_once);
    tcase_add_test(tc, test_rand_range);
    suite_add_tcase(s, tc);

    tc = tcase_create("rng");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_rng_reproducible);
    tcase_add_test(tc, test_rng_pinned_seed42);
    tcase_add_test(tc, test_rng_below_rejects);
    suite_add_tcase(s, tc);

    /* The draws' statistics, 60000 to 100000 samples each: "slow", left out by the valgrind
     * stage of .ci/run (CK_EXCLUDE_TAGS=slow): arithmetic on the RNG's state, little memory */
    tc = tcase_create("statistics");
    tcase_set_tags(tc, "slow");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_randn_moments);
    tcase_add_test(tc, test_rng_uniform);
    tcase_add_test(tc, test_rng_below);
    suite_add_tcase(s, tc);

    tc = tcase_create("printing");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_print_values);
    tcase_add_test(tc, test_print_kinds);
    tcase_add_test(tc, test_shape_str);
    tcase_add_test(tc, test_names);
    tcase_add_test(tc, test_last_error);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return run_suite(tensor_suite()); }
