/* bench_gemm.c - qkv's f32 matrix multiply against OpenBLAS's cblas_sgemm, single-threaded by
 * default, on 512³, 64³ and the shapes of the benchmark workloads. Prints median GFLOP/s and
 * the ratio qkv/OpenBLAS, and each side's best (its fastest timing: on a shared machine whose
 * speed comes and goes, what the code does when nothing slows it). Not a test: timings vary
 * with the machine's load.
 *
 *   bench_gemm [--threads N] [--json]        (OPENBLAS_NUM_THREADS follows --threads)
 *
 * OpenBLAS picks its kernels by the CPU's model number, and a release older than the CPU falls
 * back to its generic x86-64 core ("Prescott", SSE3): Debian 12's 0.3.21 does so on a Xeon of
 * family 6, model 207, where it ran 512³ at 22 GFLOP/s and, told its core, at 129. The
 * comparison is with OpenBLAS at its best on this CPU, so when it has fallen back and
 * OPENBLAS_CORETYPE is unset, bench_gemm runs itself again with the core of the widest
 * vectors the CPU has: SkylakeX (AVX-512) or Haswell (AVX2). The core is printed. */
#include <cblas.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef QKV_HAVE_OPENMP
#include <omp.h>
#endif

#include "bench_time.h"
#include "kernels/kernels.h"

typedef struct {
    const char *what;
    int64_t batch, M, N, K;
    bool ta, tb;
} shape;

static const shape shapes[] = {
    {"square 512", 1, 512, 512, 512, false, false},
    {"square 64", 1, 64, 64, 64, false, false},
    {"tiny x·W (BT,C)·(C,C)", 1, 512, 64, 64, false, false},
    {"tiny Q·Kᵀ (B·H batches)", 128, 16, 16, 16, false, true},
    {"tiny dX = dY·Wᵀ", 1, 512, 64, 64, false, true},
    {"tiny dW = Xᵀ·dY", 1, 64, 64, 512, true, false},
    {"tiny head x·W", 1, 512, 16, 64, false, false},
    {"tiny head dX", 1, 512, 64, 16, false, true},
    {"tiny head dW", 1, 64, 16, 512, true, false},
    {"medium x·W", 1, 2048, 128, 128, false, false},
    {"medium dW = xᵀ·dY", 1, 128, 128, 2048, true, false},
    {"medium Q·Kᵀ", 32, 256, 256, 32, false, true},
    {"medium A·V", 32, 256, 32, 256, false, false},
    {"long Q·Kᵀ", 1, 2048, 2048, 64, false, true},
    {"long A·V", 1, 2048, 64, 2048, false, false},
    {"long x·W", 1, 2048, 64, 64, false, false},
};

/* n floats starting on a cache line, as the arena gives the step's tensors: where B's rows
 * start mid-line, the products read it otherwise (sgemm.c, b_in_place), and a malloc'd
 * operand started on a line in some runs and not in others. */
static float *cache_lines(size_t n) {
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!p) abort();
    return p;
}

static double fastest(const double *t, int n) {
    double best = t[0];
    for (int i = 1; i < n; i++) best = t[i] < best ? t[i] : best;
    return best;
}

/* Median seconds of qkv's and of OpenBLAS's product, timed in turn (qkv, OpenBLAS, qkv, ...)
 * over repeats filling ~0.6 s: a spell of load on a shared machine then slows both sides'
 * timings alike, not one side's. And each side's fastest timing (bq, bb). */
static void median_times(void (*qkv)(const shape *, float *, float *, float *),
                         void (*blas)(const shape *, float *, float *, float *), const shape *s,
                         float *a, float *b, float *c, double *tq, double *tb, double *bq,
                         double *bb) {
    double t[2][200];
    int n = 0;
    qkv(s, a, b, c);
    blas(s, a, b, c);
    double start = bench_now();
    while (n < 200 && (n < 5 || bench_now() - start < 0.6)) {
        double t0 = bench_now();
        qkv(s, a, b, c);
        double t1 = bench_now();
        blas(s, a, b, c);
        t[0][n] = t1 - t0, t[1][n++] = bench_now() - t1;
    }
    *bq = fastest(t[0], n), *bb = fastest(t[1], n);
    *tq = bench_median(t[0], n), *tb = bench_median(t[1], n);
}

static void run_qkv(const shape *s, float *a, float *b, float *c) {
    gemm_f32(s->ta, s->tb, s->batch, s->M, s->N, s->K, a, s->M * s->K, b, s->K * s->N, c,
             s->M * s->N, false);
}

static void run_blas(const shape *s, float *a, float *b, float *c) {
    for (int64_t i = 0; i < s->batch; i++)
        cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans,
                    s->tb ? CblasTrans : CblasNoTrans, (int)s->M, (int)s->N, (int)s->K, 1.0f,
                    a + i * s->M * s->K, s->ta ? (int)s->M : (int)s->K, b + i * s->K * s->N,
                    s->tb ? (int)s->K : (int)s->N, 0.0f, c + i * s->M * s->N, (int)s->N);
}

/* OpenBLAS's generic core on a CPU it does not know: run again with the CPU's own core. */
static void openblas_best_core(char **argv) {
    const char *core = openblas_get_corename();
    if (getenv("OPENBLAS_CORETYPE") || !core || strcmp(core, "Prescott") != 0) return;
#if defined(__x86_64__)
    const char *best = __builtin_cpu_supports("avx512f") ? "SkylakeX"
                       : __builtin_cpu_supports("avx2") ? "Haswell" : NULL;
    if (!best) return;
    setenv("OPENBLAS_CORETYPE", best, 1);
    execv("/proc/self/exe", argv);
    /* not run again: go on with the generic core, which the header names */
#endif
}

int main(int argc, char **argv) {
    openblas_best_core(argv);
    int threads = 1;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json")) json = true;
        else {
            fprintf(stderr, "usage: bench_gemm [--threads N] [--json]\n");
            return 2;
        }
    }
    if (threads < 1) threads = 1;
#ifdef QKV_HAVE_OPENMP
    omp_set_num_threads(threads);
#endif
    openblas_set_num_threads(threads);
    if (!json)
        printf("%-26s %-22s %10s %10s %7s %9s %9s   (kernel %s, %d thread%s; OpenBLAS %s "
               "core)\n", "shape", "batch×M×N×K", "qkv GF/s", "BLAS GF/s", "ratio", "qkv best",
               "BLAS best", kernel_isa_name(), threads, threads > 1 ? "s" : "",
               openblas_get_corename());
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape *s = &shapes[i];
        size_t na = (size_t)(s->batch * s->M * s->K), nb = (size_t)(s->batch * s->K * s->N),
               nc = (size_t)(s->batch * s->M * s->N);
        float *a = cache_lines(na), *b = cache_lines(nb), *c = cache_lines(nc);
        for (size_t j = 0; j < na; j++) a[j] = (float)((j * 7 % 13) - 6) / 8;
        for (size_t j = 0; j < nb; j++) b[j] = (float)((j * 5 % 11) - 5) / 8;
        double flops = 2.0 * (double)(s->batch * s->M * s->N * s->K);
        double tq, tb, bq, bb;
        median_times(run_qkv, run_blas, s, a, b, c, &tq, &tb, &bq, &bb);
        char dims[64];
        snprintf(dims, sizeof dims, "%lld×%lld×%lld×%lld%s%s", (long long)s->batch,
                 (long long)s->M, (long long)s->N, (long long)s->K, s->ta ? " Aᵀ" : "",
                 s->tb ? " Bᵀ" : "");
        if (json)
            printf("{\"shape\":\"%s\",\"dims\":\"%s\",\"threads\":%d,\"kernel\":\"%s\","
                   "\"qkv_gflops\":%.2f,\"openblas_gflops\":%.2f,\"ratio\":%.3f,"
                   "\"openblas_core\":\"%s\",\"qkv_gflops_best\":%.2f,"
                   "\"openblas_gflops_best\":%.2f}\n",
                   s->what, dims, threads, kernel_isa_name(), flops / tq * 1e-9,
                   flops / tb * 1e-9, tb / tq, openblas_get_corename(), flops / bq * 1e-9,
                   flops / bb * 1e-9);
        else
            printf("%-26s %-22s %10.2f %10.2f %7.2f %9.2f %9.2f\n", s->what, dims,
                   flops / tq * 1e-9, flops / tb * 1e-9, tb / tq, flops / bq * 1e-9,
                   flops / bb * 1e-9);
        free(a);
        free(b);
        free(c);
    }
    return 0;
}
