/* noalloc_test.c - a warm training step allocates nothing, anywhere in the process: this
 * program replaces malloc and its relatives with counting wrappers around glibc's own, so
 * that allocations by OpenMP's runtime count too (test_kernels checks qkv's arenas alone).
 * Steps are taken with one thread and with two, on a batch of many sequences (two shards side
 * by side) and on one long sequence (every op on both threads). Built only without
 * sanitizers, whose runtimes replace malloc themselves; valgrind's stage skips it for the same
 * reason. */
#include "train/trainer.h"

#include <check.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#ifdef QKV_HAVE_OPENMP
#include <omp.h>
#endif

/* glibc's allocator under its internal names. */
void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);
void *__libc_memalign(size_t align, size_t n);
void __libc_free(void *p);

static atomic_int counting;
static atomic_long allocations;

static void count(void) {
    if (atomic_load(&counting)) atomic_fetch_add(&allocations, 1);
}

void *malloc(size_t n) {
    count();
    return __libc_malloc(n);
}
void *calloc(size_t n, size_t size) {
    count();
    return __libc_calloc(n, size);
}
void *realloc(void *p, size_t n) {
    count();
    return __libc_realloc(p, n);
}
void *memalign(size_t align, size_t n) {
    count();
    return __libc_memalign(align, n);
}
void *aligned_alloc(size_t align, size_t n) {
    count();
    return __libc_memalign(align, n);
}
int posix_memalign(void **out, size_t align, size_t n) {
    count();
    *out = __libc_memalign(align, n);
    return *out ? 0 : 12; /* ENOMEM */
}
void free(void *p) { __libc_free(p); }

typedef struct {
    const char *what;
    int batch, seq_len, d_model, heads;
    qkv_dtype dtype;
} step_config;

static const step_config configs[] = {
    {"32 short sequences, two shards", 32, 16, 64, 4, QKV_F32},
    {"one long sequence", 1, 512, 64, 2, QKV_F32},
    {"f64: 32 short sequences, two shards", 32, 16, 64, 4, QKV_F64},
    {"f64: one long sequence", 1, 512, 64, 2, QKV_F64},
};

START_TEST(test_warm_step_allocates_nothing) {
    int threads = 1 + _i % 2;
    const step_config *k = &configs[_i / 2];
#ifdef QKV_HAVE_OPENMP
    omp_set_num_threads(threads);
#endif
    train_config c;
    memset(&c, 0, sizeof c);
    ck_assert_int_eq(qkv_task_init(&c.task, "reverse", k->seq_len, 0), QKV_OK);
    c.model = (qkv_model_config){.vocab = c.task.vocab, .seq_len = k->seq_len,
                                 .d_model = k->d_model, .heads = k->heads, .layers = 1,
                                 .init_scale = 0.5, .dtype = k->dtype};
    c.optim = QKV_ADAM;
    c.lr = 0.001;
    c.clip = 1;
    c.batch = k->batch;
    c.steps = 100;
    c.seed = 1;
    trainer t;
    ck_assert_int_eq(trainer_init(&t, &c), QKV_OK);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(trainer_step(&t), QKV_OK); /* warm-up */
    atomic_store(&allocations, 0);
    atomic_store(&counting, 1);
    for (int i = 0; i < 5; i++) trainer_step(&t);
    atomic_store(&counting, 0);
    long n = atomic_load(&allocations);
    ck_assert_msg(n == 0, "%s, %d thread(s): 5 warm steps made %ld allocations", k->what,
                  threads, n);
    trainer_free(&t);
}
END_TEST

int main(void) {
    Suite *s = suite_create("noalloc");
    TCase *tc = tcase_create("steps");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_warm_step_allocates_nothing, 0,
                        (int)(2 * sizeof configs / sizeof configs[0]));
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
