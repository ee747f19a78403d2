/* isa.c - which f32 kernels run, for the whole process: the table QKV_SIMD names, or else the
 * best this CPU runs (AVX-512, then AVX2 + FMA on x86-64; NEON on AArch64; plain C
 * elsewhere). Chosen once, on first use, never changed. */
#include "isa.h"
#include "qkv.h"

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
    bool fma = __builtin_cpu_supports("fma");
    if (isa == &kernel_isa_avx512) return fma && __builtin_cpu_supports("avx512f");
    if (isa == &kernel_isa_avx2) return fma && __builtin_cpu_supports("avx2");
#endif
    (void)isa;
    return true; /* plain C, and NEON on AArch64 */
}

static const kernel_isa *known(const char *name) {
    for (size_t i = 0; i < N_TABLES; i++)
        if (!strcmp(tables[i]->name, name)) return tables[i];
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
    char all[64] = "";
    for (const char *const *p = path_names; *p; p++) {
        named = named || !strcmp(env, *p);
        strcat(all, *all ? ", " : "");
        strcat(all, *p);
    }
    if (!named) {
        snprintf(msg, len, "QKV_SIMD=%s: unknown path (one of %s)", seen, all);
        return false;
    }
    char runs[64] = "";
    for (size_t i = 0; i < N_TABLES; i++)
        if (cpu_runs(tables[i])) {
            strcat(runs, *runs ? " " : "");
            strcat(runs, tables[i]->name);
        }
    snprintf(msg, len, "QKV_SIMD=%s: this %s cannot run it (it runs: %s)", seen,
             known(env) ? "CPU" : "build", runs);
    return false;
}

const kernel_isa *kernel_isa_best(void) {
    for (size_t i = 0; i < N_TABLES; i++)
        if (cpu_runs(tables[i])) return tables[i];
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

bool kernel_isa_runs(const char *name) { return kernel_isa_find(name) != NULL; }

const char *kernel_isa_name(void) { return kernel_isa_active()->name; }

const char *qkv_simd_path(void) { return kernel_isa_name(); }

const char *qkv_simd_slow_reason(void) {
    if (kernel_isa_active() != &kernel_isa_scalar) return NULL;
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
