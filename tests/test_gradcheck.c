/* test_gradcheck.c - every op's backward pass against finite differences (qkv_gradcheck_run). */
#include "qkv.h"

#include "fixtures.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-6

/* One Check test per op: _i is the op's index. */
START_TEST(test_gradcheck_op) {
    qkv_gradcheck_result r = qkv_gradcheck_run(_i, TOL, 1);
    ck_assert_ptr_nonnull(r.op);
    ck_assert_msg(r.cases > 0, "%s: no cases", r.op);
    ck_assert_msg(r.entries > 0, "%s: no gradient entries compared", r.op);
    ck_assert_msg(r.passed, "%s failed: max_rel_err %.3e, max_abs_err %.3e on %s", r.op,
                  r.max_rel_err, r.max_abs_err, r.shapes);
    ck_assert_msg(r.max_rel_err <= TOL, "%s: max_rel_err %.3e > %g", r.op, r.max_rel_err, TOL);
    ck_assert(isfinite(r.max_abs_err));
    ck_assert_msg(strlen(r.shapes) > 0 && r.shapes[0] == '(', "%s: shapes '%s'", r.op, r.shapes);
    /* every shape whole: as many cases as space-separated groups, each group's shapes closed */
    int groups = 1, depth = 0;
    for (const char *p = r.shapes; *p; p++) {
        groups += *p == ' ';
        depth += (*p == '(') - (*p == ')');
        ck_assert_msg(depth == 0 || depth == 1, "%s: shapes '%s'", r.op, r.shapes);
    }
    ck_assert_msg(depth == 0 && r.shapes[strlen(r.shapes) - 1] == ')', "%s: shapes cut: '%s'",
                  r.op, r.shapes);
    ck_assert_msg(groups == r.cases, "%s: %d cases, shapes '%s'", r.op, r.cases, r.shapes);
}
END_TEST

START_TEST(test_gradcheck_other_seed) {
    /* a different seed draws different inputs and must pass as well */
    qkv_gradcheck_result r = qkv_gradcheck_run(_i, TOL, 12345);
    ck_assert_msg(r.passed && r.max_rel_err <= TOL, "%s (seed 12345): max_rel_err %.3e", r.op,
                  r.max_rel_err);
}
END_TEST

/* Every op of the qkv_op enum has a gradcheck entry (a new op without one fails here), and
 * so do the composed attention and the LayerNorm composed of its two ops; test_gradcheck_op checks each entry has cases and passes. */
START_TEST(test_gradcheck_coverage) {
    int n = qkv_gradcheck_count();
    ck_assert_ptr_null(qkv_gradcheck_op(n));
    for (int op = QKV_OP_NONE + 1; op < QKV_OP_COUNT; op++) {
        const char *name = qkv_op_name((qkv_op)op);
        bool found = false;
        for (int i = 0; i < n; i++) found = found || !strcmp(qkv_gradcheck_op(i), name);
        ck_assert_msg(found, "op %s has no gradcheck case (src/engine/gradcheck.c)", name);
    }
    bool composed = false, layernorm = false;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < i; j++) ck_assert_str_ne(qkv_gradcheck_op(j), qkv_gradcheck_op(i));
        composed = composed || !strcmp(qkv_gradcheck_op(i), "attention");
        layernorm = layernorm || !strcmp(qkv_gradcheck_op(i), "layernorm");
    }
    ck_assert_msg(composed, "gradcheck does not cover the composed attention");
    ck_assert_msg(layernorm, "gradcheck does not cover the LayerNorm's two ops composed");
}
END_TEST

START_TEST(test_gradcheck_reports_failure) {
    /* passed is max_rel_err <= tol: a tolerance below the error found must fail */
    qkv_gradcheck_result r = qkv_gradcheck_run(0, TOL, 1);
    ck_assert_double_gt(r.max_rel_err, 0.0); /* finite differences are never exact */
    qkv_gradcheck_result strict = qkv_gradcheck_run(0, r.max_rel_err / 2, 1);
    ck_assert(!strict.passed);
    ck_assert_double_eq(strict.max_rel_err, r.max_rel_err); /* same seed, same numbers */
}
END_TEST

static Suite *gradcheck_suite(void) {
    /* The second seed is tagged "slow": the valgrind stage of .ci/run skips it
     * (CK_EXCLUDE_TAGS=slow), one run of each op is enough to check its memory. And "long": the runs on each SIMD path, with clang and
     * without OpenMP skip them too (CK_EXCLUDE_TAGS=long). */
    Suite *s = suite_create("gradcheck");
    TCase *tc = tcase_create("ops");
    tcase_add_loop_test(tc, test_gradcheck_op, 0, qkv_gradcheck_count());
    tcase_add_test(tc, test_gradcheck_reports_failure);
    suite_add_tcase(s, tc);
    tc = tcase_create("seeds");
    tcase_set_tags(tc, "slow long");
    tcase_add_loop_test(tc, test_gradcheck_other_seed, 0, qkv_gradcheck_count());
    suite_add_tcase(s, tc);
    tc = tcase_create("coverage");
    tcase_add_test(tc, test_gradcheck_coverage);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return run_suite(gradcheck_suite()); }
