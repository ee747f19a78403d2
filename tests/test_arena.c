/* test_arena.c - contexts: alignment, reset, growth, warm steps without malloc, no-grad mode. */
#include "qkv.h"

#include "fixtures.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static bool all_bytes(const void *p, size_t n, unsigned char v) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i] != v) return false;
    return true;
}

START_TEST(test_new_defaults) {
    qkv_ctx *ctx = qkv_ctx_new(0);
    ck_assert_ptr_nonnull(ctx);
    ck_assert_uint_gt(qkv_ctx_capacity(ctx), 0);
    ck_assert_uint_eq(qkv_ctx_used(ctx), 0);
    ck_assert_uint_eq(qkv_ctx_mallocs(ctx), 1);
    ck_assert(!qkv_ctx_no_grad(ctx));
    qkv_ctx_free(ctx);

    ctx = qkv_ctx_new(4096);
    ck_assert_uint_eq(qkv_ctx_capacity(ctx), 4096);
    qkv_ctx_free(ctx);
    qkv_ctx_free(NULL); /* allowed, like free(NULL) */
}
END_TEST

START_TEST(test_alloc_alignment) {
    qkv_ctx *ctx = qkv_ctx_new(0);
    const size_t sizes[] = {1, 3, 7, 63, 64, 65, 100, 127, 128, 129, 1000, 4097, 5, 0, 33};
    enum { N = sizeof sizes / sizeof sizes[0] };
    unsigned char *p[N];
    size_t used = 0;
    for (int i = 0; i < N; i++) {
        p[i] = qkv_ctx_alloc(ctx, sizes[i]);
        ck_assert_ptr_nonnull(p[i]);
        ck_assert_uint_eq((uintptr_t)p[i] % 64, 0);
        ck_assert(all_bytes(p[i], sizes[i], 0)); /* zeroed */
        memset(p[i], 0xA0 + i, sizes[i]);
        used += (sizes[i] + 63) / 64 * 64;
        ck_assert_uint_ge(qkv_ctx_used(ctx), used);
    }
    /* no two allocations overlap: every pattern survived the later writes */
    for (int i = 0; i < N; i++) ck_assert(all_bytes(p[i], sizes[i], (unsigned char)(0xA0 + i)));
    /* tensor data and gradients are aligned too */
    qkv_tensor *t = qkv_param(ctx, qkv_zeros(ctx, QKV_F32, 2, (int64_t[]){3, 5}));
    ck_assert_uint_eq((uintptr_t)t->data % 64, 0);
    ck_assert_uint_eq((uintptr_t)t->grad % 64, 0);
    qkv_ctx_free(ctx);
}
END_TEST

START_TEST(test_reset) {
    qkv_ctx *ctx = qkv_ctx_new(1 << 16);
    unsigned char *first = qkv_ctx_alloc(ctx, 100);
    memset(first, 0xFF, 100);
    qkv_ctx_alloc(ctx, 5000);
    qkv_zeros(ctx, QKV_F64, 2, (int64_t[]){10, 10});
    ck_assert_uint_gt(qkv_ctx_used(ctx), 5000);
    size_t cap = qkv_ctx_capacity(ctx);
    uint64_t mallocs = qkv_ctx_mallocs(ctx);

    qkv_ctx_reset(ctx);
    ck_assert_uint_eq(qkv_ctx_used(ctx), 0);
    ck_assert_uint_eq(qkv_ctx_capacity(ctx), cap);
    ck_assert_uint_eq(qkv_ctx_mallocs(ctx), mallocs);
    /* the memory is reused from the start, and handed out zeroed again */
    unsigned char *again = qkv_ctx_alloc(ctx, 100);
    ck_assert_ptr_eq(again, first);
    ck_assert(all_bytes(again, 100, 0));
    qkv_ctx_free(ctx);
}
END_TEST

START_TEST(test_reset_forgets_params) {
    qkv_ctx *ctx = qkv_ctx_new(0);
    qkv_param(ctx, qkv_ones(ctx, QKV_F32, 1, (int64_t[]){4}));
    qkv_ctx_reset(ctx);
    qkv_tensor *p = qkv_param(ctx, qkv_ones(ctx, QKV_F32, 1, (int64_t[]){2}));
    /* only the new parameter is left: an SGD step must not touch freed memory, and moves p */
    qkv_backward(qkv_sum(ctx, p));
    qkv_sgd_step(ctx, 0.5f);
    ck_assert_double_eq(qkv_get(p, 0), 0.5);
    ck_assert_double_eq(qkv_get(p, 1), 0.5);
    qkv_ctx_free(ctx);
}
END_TEST

START_TEST(test_growth) {
    qkv_ctx *ctx = qkv_ctx_new(256);
    ck_assert_uint_eq(qkv_ctx_mallocs(ctx), 1);
    unsigned char *a = qkv_ctx_alloc(ctx, 200);
    memset(a, 0x5A, 200);
    ck_assert_uint_eq(qkv_ctx_mallocs(ctx), 1);
    /* does not fit: a new block */
    unsigned char *b = qkv_ctx_alloc(ctx, 200);
    ck_assert_uint_eq(qkv_ctx_mallocs(ctx), 2);
    ck_assert_uint_gt(qkv_ctx_capacity(ctx), 256);
    ck_assert_uint_eq((uintptr_t)b % 64, 0);
    memset(b, 0x11, 200);
    /* much bigger than the blocks so far */
    unsigned char *c = qkv_ctx_alloc(ctx, 100000);
    ck_assert_uint_ge(qkv_ctx_capacity(ctx), 100000 + 256 + 200);
    ck_assert_uint_eq((uintptr_t)c % 64, 0);
    ck_assert(all_bytes(c, 100000, 0));
    memset(c, 0x22, 100000);
    /* growing never moves or clobbers what was handed out before */
    ck_assert(all_bytes(a, 200, 0x5A));
    ck_assert(all_bytes(b, 200, 0x11));
    size_t used = qkv_ctx_used(ctx);
    ck_assert_uint_ge(used, 256 + 256 + 100000);
    ck_assert_uint_le(used, qkv_ctx_capacity(ctx));

    /* the reset after growth merges the blocks into one (one malloc)... */
    uint64_t m = qkv_ctx_mallocs(ctx);
    qkv_ctx_reset(ctx);
    ck_assert_uint_eq(qkv_ctx_mallocs(ctx), m + 1);
    ck_assert_uint_ge(qkv_ctx_capacity(ctx), used);
    /* ...which holds the same sequence without another malloc, and keeps doing so */
    for (int round = 0; round < 3; round++) {
        qkv_ctx_alloc(ctx, 200);
        qkv_ctx_alloc(ctx, 200);
        qkv_ctx_alloc(ctx, 100000);
        ck_assert_uint_eq(qkv_ctx_used(ctx), used);
        ck_assert_uint_eq(qkv_ctx_mallocs(ctx), m + 1);
        qkv_ctx_reset(ctx);
        ck_assert_uint_eq(qkv_ctx_mallocs(ctx), m + 1);
    }
    qkv_ctx_free(ctx);
}
END_TEST

/* ---- a warm training step allocates nothing -------------------------------------------- */

typedef struct {
    double loss;
    uint64_t step_mallocs, param_mallocs;
    size_t step_used, step_capacity;
} step_stats;

/* Attention over X (2,3,4) with W_Q, W_K, W_V (4,4), an mse loss, backward and SGD. */
static void run_steps(size_t step_capacity, int nsteps, step_stats *st) {
    qkv_ctx *params = qkv_ctx_new(0), *step = qkv_ctx_new(step_capacity);
    ck_assert_ptr_nonnull(params);
    ck_assert_ptr_nonnull(step);
    qkv_rng rng = qkv_rng_seed(11);
    const int64_t wshape[2] = {4, 4}, xshape[3] = {2, 3, 4};
    qkv_tensor *wq = qkv_param(params, qkv_randn(params, QKV_F32, 2, wshape, 0.5, &rng));
    qkv_tensor *wk = qkv_param(params, qkv_randn(params, QKV_F32, 2, wshape, 0.5, &rng));
    qkv_tensor *wv = qkv_param(params, qkv_randn(params, QKV_F32, 2, wshape, 0.5, &rng));
    for (int s = 0; s < nsteps; s++) {
        qkv_ctx_reset(step);
        qkv_tensor *x = qkv_randn(step, QKV_F32, 3, xshape, 1.0, &rng);
        qkv_tensor *target = qkv_randn(step, QKV_F32, 3, xshape, 1.0, &rng);
        qkv_tensor *q = qkv_matmul(step, x, wq), *k = qkv_matmul(step, x, wk),
                   *v = qkv_matmul(step, x, wv);
        qkv_tensor *y = qkv_attention(step, q, k, v, NULL, 0.0, NULL);
        ck_assert_int_eq(y->ndim, 3);
        ck_assert_int_eq(y->shape[2], 4);
        qkv_tensor *loss = qkv_mse(step, y, target);
        qkv_zero_grad(params);
        qkv_backward(loss);
        double gnorm = 0;
        for (int64_t i = 0; i < wq->size; i++)
            gnorm += fabs(qkv_grad_get(wq, i)) + fabs(qkv_grad_get(wk, i)) +
                     fabs(qkv_grad_get(wv, i));
        ck_assert(isfinite(gnorm) && gnorm > 0); /* the step really trained something */
        qkv_sgd_step(params, 0.1f);
        st[s].loss = qkv_get(loss, 0);
        st[s].step_mallocs = qkv_ctx_mallocs(step);
        st[s].param_mallocs = qkv_ctx_mallocs(params);
        st[s].step_used = qkv_ctx_used(step);
        st[s].step_capacity = qkv_ctx_capacity(step);
        ck_assert(isfinite(st[s].loss));
    }
    qkv_ctx_free(step);
    qkv_ctx_free(params);
}

START_TEST(test_warm_step_no_malloc) {
    enum { STEPS = 6 };
    step_stats st[STEPS];
    run_steps(0, STEPS, st);
    for (int s = 2; s < STEPS; s++) {
        ck_assert_uint_eq(st[s].step_mallocs, st[1].step_mallocs);
        ck_assert_uint_eq(st[s].step_used, st[1].step_used);
        ck_assert_uint_eq(st[s].param_mallocs, st[1].param_mallocs);
    }
    ck_assert_uint_eq(st[0].param_mallocs, st[STEPS - 1].param_mallocs);
}
END_TEST

START_TEST(test_warm_step_after_growth) {
    /* A step arena far too small for one step: the first step grows it, the reset before the
     * second merges the blocks, and from then on no step calls malloc. */
    enum { STEPS = 6 };
    step_stats st[STEPS];
    run_steps(1024, STEPS, st);
    ck_assert_uint_gt(st[0].step_mallocs, 1);          /* the first step did grow */
    ck_assert_uint_gt(st[0].step_capacity, 1024);
    for (int s = 2; s < STEPS; s++) {
        ck_assert_uint_eq(st[s].step_mallocs, st[1].step_mallocs);
        ck_assert_uint_eq(st[s].step_capacity, st[1].step_capacity);
        ck_assert_uint_eq(st[s].param_mallocs, st[1].param_mallocs);
    }
    ck_assert_uint_le(st[1].step_used, st[1].step_capacity);
    /* the same steps in a roomy arena compute the same losses: growth changes no numbers */
    step_stats ref[STEPS];
    run_steps(0, STEPS, ref);
    for (int s = 0; s < STEPS; s++) ck_assert_double_eq(st[s].loss, ref[s].loss);
}
END_TEST

/* ---- no-grad mode ------------------------------------------------------------------------ */

START_TEST(test_no_grad) {
    qkv_ctx *params = qkv_ctx_new(0), *ctx = qkv_ctx_new(0);
    qkv_rng rng = qkv_rng_seed(3);
    qkv_tensor *w = qkv_param(params, qkv_randn(params, QKV_F64, 2, (int64_t[]){4, 4}, 1.0, &rng));
    qkv_tensor *bias = qkv_param(params, qkv_randn(params, QKV_F64, 1, (int64_t[]){4}, 1.0, &rng));
    qkv_tensor *x = qkv_randn(ctx, QKV_F64, 3, (int64_t[]){2, 3, 4}, 1.0, &rng);

    qkv_ctx_set_no_grad(ctx, true);
    ck_assert(qkv_ctx_no_grad(ctx));
    qkv_tensor *q = qkv_matmul(ctx, x, w);
    qkv_tensor *s = qkv_scale(ctx, q, 0.5);
    qkv_tensor *m = qkv_mask(ctx, s, qkv_mask_causal(ctx, QKV_F64, 3, 4));
    qkv_tensor *sc = qkv_matmul_ex(ctx, q, false, q, true);
    qkv_tensor *sm = qkv_softmax(ctx, sc);
    qkv_tensor *att = qkv_attention(ctx, q, q, q, NULL, 0, NULL);
    qkv_tensor *ad = qkv_add(ctx, att, bias);
    qkv_tensor *mu = qkv_mul(ctx, ad, bias);
    qkv_tensor *rs = qkv_reshape(ctx, mu, 2, (int64_t[]){6, 4});
    qkv_tensor *tr = qkv_transpose(ctx, rs, 0, 1);
    qkv_tensor *emb = qkv_embedding(ctx, w, qkv_from_array(ctx, QKV_I32, 1, (int64_t[]){2},
                                                         (int32_t[]){1, 3}));
    qkv_tensor *ce = qkv_cross_entropy(ctx, q, qkv_zeros(ctx, QKV_I32, 2, (int64_t[]){2, 3}), -1);
    qkv_tensor *ms = qkv_mse(ctx, att, x);
    qkv_tensor *su = qkv_sum(ctx, tr), *me = qkv_mean(ctx, emb);
    qkv_tensor *all[] = {q, s, m, sc, sm, att, ad, mu, rs, tr, emb, ce, ms, su, me};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        ck_assert_msg(!all[i]->requires_grad, "%s requires grad in no-grad mode",
                      qkv_op_name(all[i]->op));
        ck_assert_ptr_null(all[i]->grad);
        ck_assert_int_ne(all[i]->op, QKV_OP_NONE); /* the op still ran */
    }
    ck_assert(isfinite(qkv_get(ms, 0)));

    /* with no-grad off again, the same ops require grad */
    qkv_ctx_set_no_grad(ctx, false);
    ck_assert(!qkv_ctx_no_grad(ctx));
    qkv_tensor *q2 = qkv_matmul(ctx, x, w);
    qkv_tensor *att2 = qkv_attention(ctx, q2, q2, q2, NULL, 0, NULL);
    ck_assert(q2->requires_grad && q2->grad);
    ck_assert(att2->requires_grad && att2->grad);
    /* and no-grad computed the same values */
    for (int64_t i = 0; i < att->size; i++) ck_assert_double_eq(qkv_get(att, i), qkv_get(att2, i));
    qkv_ctx_free(ctx);
    qkv_ctx_free(params);
}
END_TEST

START_TEST(test_no_grad_saves_memory) {
    qkv_ctx *params = qkv_ctx_new(0), *a = qkv_ctx_new(0), *b = qkv_ctx_new(0);
    qkv_rng r1 = qkv_rng_seed(1);
    qkv_tensor *w = qkv_param(params, qkv_randn(params, QKV_F32, 2, (int64_t[]){8, 8}, 1.0, &r1));
    qkv_ctx_set_no_grad(b, true);
    qkv_ctx *ctxs[2] = {a, b};
    for (int c = 0; c < 2; c++) {
        qkv_rng r = qkv_rng_seed(2);
        qkv_tensor *x = qkv_randn(ctxs[c], QKV_F32, 3, (int64_t[]){2, 16, 8}, 1.0, &r);
        qkv_tensor *q = qkv_matmul(ctxs[c], x, w);
        qkv_attention(ctxs[c], q, q, q, NULL, 0, NULL);
    }
    ck_assert_uint_lt(qkv_ctx_used(b), qkv_ctx_used(a));
    qkv_ctx_free(a);
    qkv_ctx_free(b);
    qkv_ctx_free(params);
}
END_TEST

static Suite *arena_suite(void) {
    Suite *s = suite_create("arena");
    TCase *tc = tcase_create("context");
    tcase_add_test(tc, test_new_defaults);
    tcase_add_test(tc, test_alloc_alignment);
    tcase_add_test(tc, test_reset);
    tcase_add_test(tc, test_reset_forgets_params);
    tcase_add_test(tc, test_growth);
    suite_add_tcase(s, tc);

    tc = tcase_create("training");
    tcase_add_test(tc, test_warm_step_no_malloc);
    tcase_add_test(tc, test_warm_step_after_growth);
    tcase_add_test(tc, test_no_grad);
    tcase_add_test(tc, test_no_grad_saves_memory);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return run_suite(arena_suite()); }
