/* test_profile.c - the step profile of `qkv bench --profile` (src/kernels/profile.c): its parts
 * add up to the step, each kernel's time lands in its own part, waiting on threads is zero
 * where no team is forked, and a profiled step computes the same bits as one without. */
#include "kernels/kernels.h"
#include "train/bench.h"

#include <check.h>
#include <math.h>
#include <string.h>
#ifdef QKV_HAVE_OPENMP
#include <omp.h>
#endif

static void set_threads(int n) {
#ifdef QKV_HAVE_OPENMP
    omp_set_num_threads(n);
#else
    (void)n;
#endif
}

static double sum_parts(const double *parts) {
    double sum = 0;
    for (int p = 0; p < PROFILE_PART_COUNT; p++) sum += parts[p];
    return sum;
}

/* Every part is named, and each name once. */
START_TEST(test_part_names) {
    for (int p = 0; p < PROFILE_PART_COUNT; p++) {
        const char *name = profile_part_name((profile_part)p);
        ck_assert_str_ne(name, "?");
        for (int q = 0; q < p; q++) ck_assert_str_ne(name, profile_part_name((profile_part)q));
    }
    ck_assert_str_eq(profile_part_name(PROFILE_PART_COUNT), "?");
}
END_TEST

/* A product alone is all products (and packing), nothing else: on one thread, no waiting. */
START_TEST(test_product_lands_in_products) {
    set_threads(1);
    enum { M = 96, N = 96, K = 96 };
    static float a[M * K], b[N * K], c[M * N];
    for (int i = 0; i < M * K; i++) a[i] = (float)(i % 7) - 3, b[i] = (float)(i % 5) - 2;
    double parts[PROFILE_PART_COUNT];
    profile_start();
    for (int r = 0; r < 20; r++) gemm_f32(false, true, 1, M, N, K, a, 0, b, 0, c, 0, false);
    profile_stop(parts);
    ck_assert(parts[PROFILE_PRODUCTS] > 0);
    ck_assert(parts[PROFILE_LAYOUT] > 0); /* a transposed B of 96 columns is packed */
    ck_assert(parts[PROFILE_WAIT] == 0);
    ck_assert(parts[PROFILE_SOFTMAX] == 0 && parts[PROFILE_OPTIMIZER] == 0);
    /* outside a profile, the parts are left as they were */
    double again[PROFILE_PART_COUNT];
    gemm_f32(false, true, 1, M, N, K, a, 0, b, 0, c, 0, false);
    profile_start();
    profile_stop(again);
    ck_assert(again[PROFILE_PRODUCTS] == 0);
}
END_TEST

/* The parts of a profiled training step add up to the step's own time, and each part the
 * step has is there: products, exp and softmax, layout, embedding, loss, optimizer; on one
 * thread nothing waits, on two the waiting is counted. */
static void check_workload(int threads, int workload) {
    set_threads(threads);
    bench_result r;
    ck_assert_int_eq(bench_workload_run(&bench_workloads[workload], QKV_F32, 5, 0, true, &r),
                     QKV_OK);
    double sum = sum_parts(r.profile);
    /* profile_step is timed from just after profile_start to just after profile_stop: the
     * parts miss only profile_stop's call, and count profile_start's return */
    ck_assert_msg(fabs(sum - r.profile_step) <= 0.01 * r.profile_step + 2e-6,
                  "parts add up to %g s, the step took %g s", sum, r.profile_step);
    static const profile_part present[] = {PROFILE_PRODUCTS, PROFILE_SOFTMAX, PROFILE_LAYOUT,
                                           PROFILE_EMBEDDING, PROFILE_LOSS, PROFILE_OPTIMIZER};
    for (size_t i = 0; i < sizeof present / sizeof present[0]; i++)
        ck_assert_msg(r.profile[present[i]] > 0, "%s has no time",
                      profile_part_name(present[i]));
    for (int p = 0; p < PROFILE_PART_COUNT; p++) ck_assert(r.profile[p] >= 0);
    if (threads == 1) ck_assert(r.profile[PROFILE_WAIT] == 0);
#ifdef QKV_HAVE_OPENMP
    else ck_assert(r.profile[PROFILE_WAIT] > 0);
#endif
}

START_TEST(test_step_parts_add_up) { check_workload(1, 0); } /* tiny */
END_TEST

START_TEST(test_step_parts_add_up_threads) {
    check_workload(2, 0);
    check_workload(2, 1); /* medium: its products are split among the threads */
}
END_TEST

/* Steps with the profile on give the model the same bits as steps without. */
static void check_profile_changes_nothing(int threads) {
    set_threads(threads);
    train_config c = {.optim = QKV_ADAM, .lr = 0.01, .batch = 16, .steps = 100, .seed = 3,
                      .clip = 1};
    ck_assert_int_eq(qkv_task_init(&c.task, "copy", 16, 0), QKV_OK);
    c.model = (qkv_model_config){.vocab = c.task.vocab, .seq_len = 16, .d_model = 64,
                                 .heads = 4, .layers = 2, .residual = true, .init_scale = 0.5};
    trainer plain, profiled;
    ck_assert_int_eq(trainer_init(&plain, &c), QKV_OK);
    ck_assert_int_eq(trainer_init(&profiled, &c), QKV_OK);
    double parts[PROFILE_PART_COUNT];
    for (int i = 0; i < 6; i++) {
        ck_assert_int_eq(trainer_step(&plain), QKV_OK);
        profile_start();
        ck_assert_int_eq(trainer_step(&profiled), QKV_OK);
        profile_stop(parts);
    }
    for (int i = 0; i < plain.model.nparams; i++) {
        const qkv_tensor *a = plain.model.param[i], *b = profiled.model.param[i];
        ck_assert(memcmp(a->data, b->data, (size_t)a->size * sizeof(float)) == 0);
    }
    trainer_free(&plain);
    trainer_free(&profiled);
}

START_TEST(test_profile_changes_nothing) { check_profile_changes_nothing(1); }
END_TEST

/* On two threads: the regions' profile_enter calls, on thread 0 and on the others. */
START_TEST(test_profile_changes_nothing_threads) { check_profile_changes_nothing(2); }
END_TEST

int main(void) {
    Suite *s = suite_create("profile");
    TCase *tc = tcase_create("profile");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_part_names);
    tcase_add_test(tc, test_product_lands_in_products);
    tcase_add_test(tc, test_step_parts_add_up);
    tcase_add_test(tc, test_profile_changes_nothing);
    suite_add_tcase(s, tc);
    /* "threads": two threads, and medium's bigger step (skipped under valgrind and qemu, as
     * test_train's thread cases are: .ci/run) */
    tc = tcase_create("threads");
    tcase_set_tags(tc, "threads");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_step_parts_add_up_threads);
    tcase_add_test(tc, test_profile_changes_nothing_threads);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
