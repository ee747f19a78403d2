/* fixtures.h - what the unit tests (tests/test_*.c) share: a fresh context for each test (ctx,
 * with setup and teardown for tcase_add_checked_fixture), tensors from literal values, and the
 * run of a suite that main returns. */
#ifndef QKV_TEST_FIXTURES_H
#define QKV_TEST_FIXTURES_H

#include "qkv.h"

#include <check.h>
#include <stdlib.h>

static const qkv_dtype FLOATS[2] = {QKV_F32, QKV_F64};

/* The context of the running test: Check forks each test, so no test sees another's. */
static qkv_ctx *ctx;

static inline void setup(void) {
    ctx = qkv_ctx_new(0);
    ck_assert_ptr_nonnull(ctx);
}
static inline void teardown(void) { qkv_ctx_free(ctx); }

/* A tensor of ctx in any dtype, from double values (v holds its size of them). */
static inline qkv_tensor *mk(qkv_dtype dt, int ndim, const int64_t *shape, const double *v) {
    qkv_tensor *t = qkv_new(ctx, dt, ndim, shape);
    for (int64_t i = 0; i < t->size; i++) qkv_set(t, i, v[i]);
    return t;
}
/* The same as a parameter: a leaf that collects a gradient. */
static inline qkv_tensor *mkp(qkv_dtype dt, int ndim, const int64_t *shape, const double *v) {
    return qkv_param(ctx, mk(dt, ndim, shape, v));
}

/* Runs every test of the suite; main's exit status: failure if one failed. */
static inline int run_suite(Suite *suite) {
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
