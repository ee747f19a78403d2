/* sgemm.c - the f32 matrix multiply behind every training step: packed, cache-blocked, with
 * AVX-512, AVX2+FMA and portable micro-kernels chosen at run time.
 *
 * C (M×N) (+)= op(A) (M×K) · op(B) (K×N). Packing copies a block of op(A) into row slivers of
 * MR rows and a block of op(B) into column slivers of NR columns, so transposed operands cost
 * nothing extra, and the micro-kernel streams both from L1 while MR×NR sums stay in registers.
 *
 * Threads split the work by (batch, block of MC rows of C). Every element of C is computed by
 * one thread, summing over k in the same order whatever the thread count: results are
 * bit-identical for any number of threads. */
#include "kernels.h"

#include <stdlib.h>
#include <string.h>
#ifdef QKV_HAVE_OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define QKV_X86 1
#endif

#define MC 96   /* rows of C per task: an A block of MC×KC floats stays in L2 */
#define KC 256  /* depth of one block: a B sliver of KC×NR floats stays in L1 */
#define NC 2048 /* columns of C per B block */
#define MR_MAX 12
#define NR_MAX 32

/* A micro-kernel: tile (mr_full × nr_full) = Σ_k a[k][r]·b[k][c] over packed slivers a
 * (kc×MR) and b (kc×NR); written to c (row stride ldc) or added to it when `add`. */
typedef void (*ukernel_fn)(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                           bool add);

typedef struct {
    const char *name;
    int mr, nr;
    ukernel_fn kernel;
} sgemm_impl;

/* ---- portable micro-kernel: 4×16, plain C the compiler may vectorise ---- */
static void ukernel_portable(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                             bool add) {
    float acc[4][16] = {{0}};
    for (int64_t k = 0; k < kc; k++, a += 4, b += 16)
        for (int r = 0; r < 4; r++)
            for (int j = 0; j < 16; j++) acc[r][j] += a[r] * b[j];
    for (int r = 0; r < 4; r++)
        for (int j = 0; j < 16; j++) c[r * ldc + j] = add ? c[r * ldc + j] + acc[r][j] : acc[r][j];
}

#ifdef QKV_X86
/* ---- AVX2 + FMA: 6×16, 12 ymm accumulators ---- */
__attribute__((target("avx2,fma"))) static void
ukernel_avx2(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, bool add) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int64_t k = 0; k < kc; k++, a += 6, b += 16) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8), x;
        x = _mm256_broadcast_ss(a + 0); c00 = _mm256_fmadd_ps(x, b0, c00); c01 = _mm256_fmadd_ps(x, b1, c01);
        x = _mm256_broadcast_ss(a + 1); c10 = _mm256_fmadd_ps(x, b0, c10); c11 = _mm256_fmadd_ps(x, b1, c11);
        x = _mm256_broadcast_ss(a + 2); c20 = _mm256_fmadd_ps(x, b0, c20); c21 = _mm256_fmadd_ps(x, b1, c21);
        x = _mm256_broadcast_ss(a + 3); c30 = _mm256_fmadd_ps(x, b0, c30); c31 = _mm256_fmadd_ps(x, b1, c31);
        x = _mm256_broadcast_ss(a + 4); c40 = _mm256_fmadd_ps(x, b0, c40); c41 = _mm256_fmadd_ps(x, b1, c41);
        x = _mm256_broadcast_ss(a + 5); c50 = _mm256_fmadd_ps(x, b0, c50); c51 = _mm256_fmadd_ps(x, b1, c51);
    }
    __m256 rows[6][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    for (int r = 0; r < 6; r++)
        for (int h = 0; h < 2; h++) {
            float *p = c + r * ldc + 8 * h;
            _mm256_storeu_ps(p, add ? _mm256_add_ps(_mm256_loadu_ps(p), rows[r][h]) : rows[r][h]);
        }
}

/* ---- AVX-512: 12×32, 24 zmm accumulators ---- */
#define Z_ROW(r)                                                                           \
    x = _mm512_set1_ps(a[r]);                                                              \
    c##r##0 = _mm512_fmadd_ps(x, b0, c##r##0);                                             \
    c##r##1 = _mm512_fmadd_ps(x, b1, c##r##1);

__attribute__((target("avx512f"))) static void
ukernel_avx512(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, bool add) {
    __m512 z = _mm512_setzero_ps();
    __m512 c00 = z, c01 = z, c10 = z, c11 = z, c20 = z, c21 = z, c30 = z, c31 = z, c40 = z,
           c41 = z, c50 = z, c51 = z, c60 = z, c61 = z, c70 = z, c71 = z, c80 = z, c81 = z,
           c90 = z, c91 = z, c100 = z, c101 = z, c110 = z, c111 = z;
    for (int64_t k = 0; k < kc; k++, a += 12, b += 32) {
        __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16), x;
        Z_ROW(0) Z_ROW(1) Z_ROW(2) Z_ROW(3) Z_ROW(4) Z_ROW(5)
        Z_ROW(6) Z_ROW(7) Z_ROW(8) Z_ROW(9) Z_ROW(10) Z_ROW(11)
    }
    __m512 rows[12][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51},
                          {c60, c61}, {c70, c71}, {c80, c81}, {c90, c91}, {c100, c101}, {c110, c111}};
    for (int r = 0; r < 12; r++)
        for (int h = 0; h < 2; h++) {
            float *p = c + r * ldc + 16 * h;
            _mm512_storeu_ps(p, add ? _mm512_add_ps(_mm512_loadu_ps(p), rows[r][h]) : rows[r][h]);
        }
}
#undef Z_ROW
#endif

static const sgemm_impl impl_portable = {"portable", 4, 16, ukernel_portable};
#ifdef QKV_X86
static const sgemm_impl impl_avx2 = {"avx2", 6, 16, ukernel_avx2};
static const sgemm_impl impl_avx512 = {"avx512", 12, 32, ukernel_avx512};
#endif

/* The best micro-kernel this CPU runs, or the one QKV_SIMD names (portable, avx2, avx512). */
static const sgemm_impl *choose_impl(void) {
    static const sgemm_impl *chosen;
    if (chosen) return chosen;
    const char *force = getenv("QKV_SIMD");
    const sgemm_impl *impl = &impl_portable;
#ifdef QKV_X86
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    bool avx512 = __builtin_cpu_supports("avx512f");
    if (force && !strcmp(force, "portable")) impl = &impl_portable;
    else if (force && !strcmp(force, "avx2") && avx2) impl = &impl_avx2;
    else if (avx512 && (!force || !strcmp(force, "avx512"))) impl = &impl_avx512;
    else if (avx2) impl = &impl_avx2;
#else
    (void)force;
#endif
    chosen = impl;
    return impl;
}

const char *sgemm_kernel_name(void) { return choose_impl()->name; }

/* Per-thread packing buffers. They grow to the largest block once and are then reused, so
 * warm training steps allocate nothing. */
static _Thread_local float *pack_a, *pack_b;
static _Thread_local size_t pack_a_cap, pack_b_cap;

static float *pack_buffer(float **buf, size_t *cap, size_t floats) {
    if (floats > *cap) {
        free(*buf);
        *buf = aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
        *cap = *buf ? floats : 0;
    }
    return *buf;
}

/* op(A) rows [i0, i0+mc) × depth [p0, p0+kc) into slivers of MR rows (zero-padded):
 * ap[s][k][r] = op(A)(i0 + s·MR + r, p0 + k). A is stored (M, K), or (K, M) when ta. */
static void pack_a_block(float *ap, const float *A, bool ta, int64_t M, int64_t K, int64_t i0,
                         int64_t mc, int64_t p0, int64_t kc, int mr) {
    for (int64_t s = 0; s < mc; s += mr, ap += kc * mr) {
        int rows = mc - s < mr ? (int)(mc - s) : mr;
        for (int64_t k = 0; k < kc; k++) {
            float *dst = ap + k * mr;
            int64_t kk = p0 + k;
            for (int r = 0; r < rows; r++) {
                int64_t i = i0 + s + r;
                dst[r] = ta ? A[kk * M + i] : A[i * K + kk];
            }
            for (int r = rows; r < mr; r++) dst[r] = 0;
        }
    }
}

/* op(B) depth [p0, p0+kc) × columns [j0, j0+nc) into slivers of NR columns (zero-padded):
 * bp[s][k][c] = op(B)(p0 + k, j0 + s·NR + c). B is stored (K, N), or (N, K) when tb. */
static void pack_b_block(float *bp, const float *B, bool tb, int64_t N, int64_t K, int64_t p0,
                         int64_t kc, int64_t j0, int64_t nc, int nr) {
    for (int64_t s = 0; s < nc; s += nr, bp += kc * nr) {
        int cols = nc - s < nr ? (int)(nc - s) : nr;
        for (int64_t k = 0; k < kc; k++) {
            float *dst = bp + k * nr;
            int64_t kk = p0 + k;
            if (!tb && cols == nr) {
                memcpy(dst, B + kk * N + j0 + s, (size_t)nr * sizeof *dst);
                continue;
            }
            for (int c = 0; c < cols; c++) {
                int64_t j = j0 + s + c;
                dst[c] = tb ? B[j * K + kk] : B[kk * N + j];
            }
            for (int c = cols; c < nr; c++) dst[c] = 0;
        }
    }
}

/* Rows [i0, i0+mc) of one C = op(A)·op(B). */
static void sgemm_rows(const sgemm_impl *im, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                       const float *A, const float *B, float *C, bool accumulate, int64_t i0,
                       int64_t mc) {
    int mr = im->mr, nr = im->nr;
    if (K == 0) {
        if (!accumulate)
            for (int64_t i = i0; i < i0 + mc; i++) memset(C + i * N, 0, (size_t)N * sizeof *C);
        return;
    }
    int64_t mc_pad = (mc + mr - 1) / mr * mr;
    float *ap = pack_buffer(&pack_a, &pack_a_cap, (size_t)(mc_pad * KC));
    float *bp = pack_buffer(&pack_b, &pack_b_cap, (size_t)((NC + nr) * KC));
    if (!ap || !bp) abort(); /* out of memory for a few hundred KiB: nothing sensible to do */
    float edge[MR_MAX * NR_MAX];
    for (int64_t j0 = 0; j0 < N; j0 += NC) {
        int64_t nc = N - j0 < NC ? N - j0 : NC;
        for (int64_t p0 = 0; p0 < K; p0 += KC) {
            int64_t kc = K - p0 < KC ? K - p0 : KC;
            bool add = accumulate || p0 > 0;
            pack_b_block(bp, B, tb, N, K, p0, kc, j0, nc, nr);
            pack_a_block(ap, A, ta, M, K, i0, mc, p0, kc, mr);
            for (int64_t js = 0; js < nc; js += nr) {
                int cols = nc - js < nr ? (int)(nc - js) : nr;
                for (int64_t is = 0; is < mc; is += mr) {
                    int rows = mc - is < mr ? (int)(mc - is) : mr;
                    float *c = C + (i0 + is) * N + j0 + js;
                    const float *a = ap + is * kc, *b = bp + js * kc;
                    if (rows == mr && cols == nr) {
                        im->kernel(kc, a, b, c, N, add);
                        continue;
                    }
                    im->kernel(kc, a, b, edge, nr, false); /* a partial tile, via a full one */
                    for (int r = 0; r < rows; r++)
                        for (int j = 0; j < cols; j++)
                            c[r * N + j] = add ? c[r * N + j] + edge[r * nr + j] : edge[r * nr + j];
                }
            }
        }
    }
}

void gemm_f32(bool ta, bool tb, int64_t batch, int64_t M, int64_t N, int64_t K, const float *A,
              int64_t a_stride, const float *B, int64_t b_stride, float *C, int64_t c_stride,
              bool accumulate) {
    const sgemm_impl *im = choose_impl();
    int64_t blocks = (M + MC - 1) / MC, tasks = batch * blocks;
    double flops = 2.0 * (double)batch * (double)M * (double)N * (double)K;
    (void)flops;
#pragma omp parallel for schedule(static) if (tasks > 1 && flops > 2e5)
    for (int64_t t = 0; t < tasks; t++) {
        int64_t b = t / blocks, i0 = (t % blocks) * MC;
        int64_t mc = M - i0 < MC ? M - i0 : MC;
        sgemm_rows(im, ta, tb, M, N, K, A + b * a_stride, B + b * b_stride, C + b * c_stride,
                   accumulate, i0, mc);
    }
}

void gemm1_f32(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A,
               const float *B, float *C, bool accumulate) {
    sgemm_rows(choose_impl(), ta, tb, M, N, K, A, B, C, accumulate, 0, M);
}

int kernel_threads(void) {
#ifdef QKV_HAVE_OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}
