/* isa.c - which f32 kernels run, for the whole process: the table QKV_SIMD names, or else the
 * best this CPU runs (AVX-512, then AVX2 + FMA on x86-64; NEON on AArch64; plain C
 * elsewhere), never an emulated one (a QKV_SIMD_EMULATE build's AVX-512: for its tests).
 * Chosen once, on first use; changed only between computations, by the start-up probe when
 * the chosen path's bits differ from the plain C path's, and by the self-test, which runs
 * every path in turn (both in isa_check.c). */
#include "isa.h"
#include "qkv.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Best first. */
static const kernel_isa *const tables[] = {
#ifdef QKV_ISA_X86
    &kernel_isa_avx512, &kernel_isa_avx2,
#endif
#ifdef QKV_ISA_NEON
    &kernel_isa_neon,
#endif
    &kernel_isa_scalar,
};
#define N_TABLES (sizeof tables / sizeof tables[0])

/* Every path's name, in any build, best first: the one list of them (QKV_SIMD, --version, the
 * tests, the CI's stages read it from here). */
static const char *const path_names[] = {"avx512", "avx2", "neon", "scalar", NULL};

const char *const *qkv_simd_paths(void) { return path_names; }

static bool cpu_runs(const kernel_isa *isa) {
#ifdef QKV_ISA_X86
    __builtin_cpu_init();
    bool fma = __builtin_cpu_supports("fma"), avx2 = fma && __builtin_cpu_supports("avx2");
    if (!strcmp(isa->name, "avx512")) /* emulated: SIMDe's AVX-512 over AVX2 + FMA */
        return isa->emulated ? avx2 : fma && __builtin_cpu_supports("avx512f");
    if (!strcmp(isa->name, "avx2")) return avx2;
#endif
    (void)isa;
    return true; /* plain C, and NEON on AArch64 */
}

/* A test's fault (QKV_TEST_SIMD_FAULT=PATH, as QKV_TEST_FAIL_WRITE in atomic.c): that path's
 * small products come out one unit in the last place off in their first element, so that
 * the tests can show the probe's fallback (tests/selftest_test.sh) on a CPU whose paths all
 * agree. The plain C path, the reference, cannot be made faulty. */
static kernel_isa faulty;
static const kernel_isa *faulty_of;
static void faulty_gemm_small(bool ta, int64_t M, int64_t N, int64_t K, const float *A,
                              int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc,
                              bool accumulate);

static void init_fault(void) {
    const char *name = getenv("QKV_TEST_SIMD_FAULT");
    for (size_t i = 0; name && i < N_TABLES; i++)
        if (tables[i] != &kernel_isa_scalar && !strcmp(tables[i]->name, name)) {
            faulty_of = tables[i];
            faulty = *tables[i];
            faulty.gemm_small = faulty_gemm_small;
        }
}

static void faulty_gemm_small(bool ta, int64_t M, int64_t N, int64_t K, const float *A,
                              int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc,
                              bool accumulate) {
    faulty_of->gemm_small(ta, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
    if (M > 0 && N > 0) C[0] = nextafterf(C[0], INFINITY);
}

static const kernel_isa *table(size_t i) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_fault);
    return tables[i] == faulty_of ? &faulty : tables[i];
}

static const kernel_isa *known(const char *name) {
    for (size_t i = 0; i < N_TABLES; i++)
        if (!strcmp(table(i)->name, name)) return table(i);
    return NULL;
}

const kernel_isa *kernel_isa_find(const char *name) {
    const kernel_isa *isa = known(name);
    return isa && cpu_runs(isa) ? isa : NULL;
}

static const char *simd_env(void) {
    const char *env = getenv("QKV_SIMD");
    return env && *env ? env : NULL; /* set but empty: as unset */
}

bool kernel_isa_check_env(char *msg, size_t len) {
    const char *env = simd_env();
    if (!env || kernel_isa_find(env)) return true;
    const char *seen = strlen(env) > 40 ? "(a long value)" : env;
    bool named = false;
    char all[64] = "", runs[64] = "";
    for (const char *const *p = path_names; *p; p++) {
        named = named || !strcmp(env, *p);
        strcat(all, *all ? ", " : "");
        strcat(all, *p);
    }
    for (size_t i = 0; i < N_TABLES; i++)
        if (cpu_runs(table(i))) {
            strcat(runs, *runs ? " " : "");
            strcat(runs, table(i)->name);
        }
    if (!named)
        snprintf(msg, len, "QKV_SIMD=%s: unknown path (one of %s; this CPU runs: %s)", seen, all,
                 runs);
    else
        snprintf(msg, len, "QKV_SIMD=%s: this %s cannot run it (it runs: %s)", seen,
                 known(env) ? "CPU" : "build", runs);
    return false;
}

const kernel_isa *kernel_isa_best(void) {
    for (size_t i = 0; i < N_TABLES; i++)
        if (!table(i)->emulated && cpu_runs(table(i))) return table(i);
    return &kernel_isa_scalar;
}

static _Atomic(const kernel_isa *) active;

const kernel_isa *kernel_isa_active(void) {
    const kernel_isa *isa = atomic_load_explicit(&active, memory_order_acquire);
    if (isa) return isa;
    /* a QKV_SIMD that cannot run falls back to the best; the qkv tool refuses it before
     * (kernel_isa_check_env) */
    const char *env = simd_env();
    isa = env ? kernel_isa_find(env) : NULL;
    if (!isa) isa = kernel_isa_best();
    atomic_store_explicit(&active, isa, memory_order_release); /* racing callers agree */
    return isa;
}

void kernel_isa_use(const kernel_isa *isa) {
    atomic_store_explicit(&active, isa, memory_order_release);
}

bool kernel_isa_select(const char *name) {
    const kernel_isa *isa = kernel_isa_find(name);
    if (isa) kernel_isa_use(isa);
    return isa != NULL;
}

bool kernel_isa_runs(const char *name) { return kernel_isa_find(name) != NULL; }

bool kernel_isa_emulated(const char *name) {
    const kernel_isa *isa = known(name);
    return isa && isa->emulated;
}

static bool fell_back; /* the start-up probe left a path whose bits differ */

void kernel_isa_fall_back(const kernel_isa *isa) {
    kernel_isa_use(isa);
    fell_back = true;
}

const char *kernel_isa_name(void) { return kernel_isa_active()->name; }

const char *qkv_simd_path(void) { return kernel_isa_name(); }

const char *qkv_simd_slow_reason(void) {
    if (kernel_isa_active() != &kernel_isa_scalar) return NULL;
    if (fell_back)
        return "no SIMD path of this CPU gave the plain C path's bits at start-up (qkv selftest "
               "says where): the plain C loops run, many times slower";
    if (simd_env())
        return "QKV_SIMD=scalar forces the plain C loops, many times slower than a SIMD path "
               "(qkv bench measures it)";
#ifdef QKV_ISA_X86
    return "this CPU has no AVX2 with FMA (an x86-64 from before them, or a virtual machine "
           "that hides them): the plain C loops run, dozens of times slower than AVX2";
#else
    return "this build has no SIMD path for this CPU: the plain C loops run, many times slower";
#endif
}

bool qkv_simd_forced(void) { return simd_env() != NULL; }
bool qkv_simd_runs(const char *path) { return kernel_isa_runs(path); }
bool qkv_simd_check_env(char *msg, size_t len) { return kernel_isa_check_env(msg, len); }
bool qkv_simd_emulated(const char *path) { return kernel_isa_emulated(path); }
