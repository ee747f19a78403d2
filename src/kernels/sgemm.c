/* sgemm.c - the f32 matrix multiply behind every training step: packed, cache-blocked, with
 * AVX-512, AVX2+FMA and portable micro-kernels chosen at run time.
 *
 * C (M×N) (+)= op(A) (M×K) · op(B) (K×N). op(B) is packed once into slivers of NR columns,
 * so a transposed B costs nothing extra; the micro-kernel reads MR rows of op(A) in place
 * (any row and column stride, so a transposed A is free too) and keeps MR×NR sums in
 * registers. Depth is blocked by KC so that a B sliver stays in L1.
 *
 * Threads split the work by blocks of MC rows of C (or by batch, when each batch has its own
 * B). Every element of C is computed by one thread, summing over k in the same order whatever
 * the thread count: results are bit-identical for any number of threads. */
#include "kernels.h"
#include "simd.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define QKV_X86 1
#endif

#define MC 96   /* rows of C per task */
#define KC 256  /* depth of one block: a B sliver of KC×NR floats stays in L1 */
#define MR_MAX 8 
#define PARALLEL_FLOPS 3e6 /* below this (~12 µs on one core) a second thread costs more than it saves */
#define NR_MAX 32

/* A micro-kernel: tile (MR × NR) = Σ_k a(r, k)·b[k][c] for k < kc, where a(r, k) is
 * a[r·rs + k·ks] (rows of A in place, or a packed sliver with rs = 1, ks = MR) and b is a
 * packed sliver (kc×NR); written to c (row stride ldc), or added to it when `add`. */
typedef void (*ukernel_fn)(int64_t kc, const float *a, int64_t rs, int64_t ks, const float *b,
                           float *c, int64_t ldc, bool add);

typedef struct {
    const char *name;
    int mr, nr;
    ukernel_fn kernel;
} sgemm_impl;

/* ---- portable micro-kernel: 4×16, plain C the compiler may vectorise ---- */
static void ukernel_portable(int64_t kc, const float *a, int64_t rs, int64_t ks, const float *b,
                             float *c, int64_t ldc, bool add) {
    float acc[4][16] = {{0}};
    for (int64_t k = 0; k < kc; k++, a += ks, b += 16)
        for (int r = 0; r < 4; r++)
            for (int j = 0; j < 16; j++) acc[r][j] += a[r * rs] * b[j];
    for (int r = 0; r < 4; r++)
        for (int j = 0; j < 16; j++) c[r * ldc + j] = add ? c[r * ldc + j] + acc[r][j] : acc[r][j];
}

#ifdef QKV_X86
/* ---- AVX2 + FMA: 6×16, 12 ymm accumulators ---- */
__attribute__((target("avx2,fma"))) static void
ukernel_avx2(int64_t kc, const float *a, int64_t rs, int64_t ks, const float *b, float *c,
             int64_t ldc, bool add) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int64_t k = 0; k < kc; k++, a += ks, b += 16) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8), x;
        x = _mm256_broadcast_ss(a + 0 * rs); c00 = _mm256_fmadd_ps(x, b0, c00); c01 = _mm256_fmadd_ps(x, b1, c01);
        x = _mm256_broadcast_ss(a + 1 * rs); c10 = _mm256_fmadd_ps(x, b0, c10); c11 = _mm256_fmadd_ps(x, b1, c11);
        x = _mm256_broadcast_ss(a + 2 * rs); c20 = _mm256_fmadd_ps(x, b0, c20); c21 = _mm256_fmadd_ps(x, b1, c21);
        x = _mm256_broadcast_ss(a + 3 * rs); c30 = _mm256_fmadd_ps(x, b0, c30); c31 = _mm256_fmadd_ps(x, b1, c31);
        x = _mm256_broadcast_ss(a + 4 * rs); c40 = _mm256_fmadd_ps(x, b0, c40); c41 = _mm256_fmadd_ps(x, b1, c41);
        x = _mm256_broadcast_ss(a + 5 * rs); c50 = _mm256_fmadd_ps(x, b0, c50); c51 = _mm256_fmadd_ps(x, b1, c51);
    }
    __m256 rows[6][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    for (int r = 0; r < 6; r++)
        for (int h = 0; h < 2; h++) {
            float *p = c + r * ldc + 8 * h;
            _mm256_storeu_ps(p, add ? _mm256_add_ps(_mm256_loadu_ps(p), rows[r][h]) : rows[r][h]);
        }
}

/* ---- AVX-512: 8×32, 16 zmm accumulators (tiles of 64 rows split evenly) ---- */
#define Z_ROW(r)                                                                           \
    x = _mm512_set1_ps(a[r * rs]);                                                         \
    c##r##0 = _mm512_fmadd_ps(x, b0, c##r##0);                                             \
    c##r##1 = _mm512_fmadd_ps(x, b1, c##r##1);

__attribute__((target("avx512f"))) static void
ukernel_avx512(int64_t kc, const float *a, int64_t rs, int64_t ks, const float *b, float *c,
               int64_t ldc, bool add) {
    __m512 z = _mm512_setzero_ps();
    __m512 c00 = z, c01 = z, c10 = z, c11 = z, c20 = z, c21 = z, c30 = z, c31 = z, c40 = z,
           c41 = z, c50 = z, c51 = z, c60 = z, c61 = z, c70 = z, c71 = z;
    for (int64_t k = 0; k < kc; k++, a += ks, b += 32) {
        __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16), x;
        Z_ROW(0) Z_ROW(1) Z_ROW(2) Z_ROW(3) Z_ROW(4) Z_ROW(5) Z_ROW(6) Z_ROW(7)
    }
    __m512 rows[8][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31},
                         {c40, c41}, {c50, c51}, {c60, c61}, {c70, c71}};
    for (int r = 0; r < 8; r++)
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
static const sgemm_impl impl_avx512 = {"avx512", 8, 32, ukernel_avx512};
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
    else if (avx512 && (!force || strcmp(force, "avx2") != 0)) impl = &impl_avx512; /* the best */
    else if (avx2) impl = &impl_avx2;
#else
    (void)force;
#endif
    chosen = impl;
    return impl;
}

const char *sgemm_kernel_name(void) { return choose_impl()->name; }

bool kernel_avx512(void) {
#ifdef QKV_X86
    return choose_impl() == &impl_avx512;
#else
    return false;
#endif
}

/* Small products (the tiles of many-headed attention, 16×16×16) lose more to packing and
 * zero-padded edge tiles than they gain from the micro-kernel: multiply them directly, with
 * op(B) copied to (K, N) rows when transposed, so the inner loop runs along rows of C and B.
 * The compiler vectorises it for each of the clones. */
#define SMALL_K 128
#define SMALL_N 128
static bool is_small(int64_t M, int64_t N, int64_t K, bool tb) {
    if (tb && K > SMALL_K) return false; /* its copy of B must fit on the stack */
    return N <= 16 || (N <= SMALL_N && M * N * K <= 32 * 32 * 32); /* 16: one AVX-512 row */
}


static void sgemm_small_portable(bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                                 const float *restrict A, const float *restrict B, int64_t ldb,
                                 float *restrict C, bool accumulate) {
    float bt[SMALL_K * SMALL_N], acc[SMALL_N > 16 ? SMALL_N : 16];
    if (tb) { /* B is stored (N, K): bt[k][j] = B[j][k] */
        for (int64_t j = 0; j < N; j++)
            for (int64_t k = 0; k < K; k++) bt[k * N + j] = B[j * ldb + k];
        B = bt;
        ldb = N;
    }
    for (int64_t i = 0; i < M; i++) {
        float *restrict c = C + i * N;
        for (int64_t j = 0; j < N; j++) acc[j] = accumulate ? c[j] : 0;
        for (int64_t k = 0; k < K; k++) {
            float a = ta ? A[k * M + i] : A[i * K + k];
            const float *restrict b = B + k * ldb;
            for (int64_t j = 0; j < N; j++) acc[j] += a * b[j];
        }
        for (int64_t j = 0; j < N; j++) c[j] = acc[j];
    }
}

#ifdef QKV_X86
/* The same with AVX-512: C in strips of 16 columns (masked at the edge) and 8 rows, so that
 * eight independent sums are in flight (two FMA units, four cycles each); B rows are read
 * straight from memory. The sums are named variables, not an array, so that they stay in
 * registers: an array indexed at the end is kept on the stack and stored on every k. */
#define SMALL_FMA(r) acc##r = _mm512_fmadd_ps(_mm512_set1_ps(a##r[k * as_k]), b, acc##r);
__attribute__((target("avx512f"))) static void
sgemm_small_avx512(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A,
                   const float *B, int64_t ldb, float *C, bool accumulate) {
    float bt[SMALL_K * SMALL_N];
    if (tb) {
        for (int64_t j = 0; j < N; j++)
            for (int64_t k = 0; k < K; k++) bt[k * N + j] = B[j * ldb + k];
        B = bt;
        ldb = N;
    }
    int64_t as_i = ta ? 1 : K, as_k = ta ? M : 1; /* a(i,k) = A[i·as_i + k·as_k] */
    for (int64_t j0 = 0; j0 < N; j0 += 16) {
        __mmask16 m = lane_mask(j0, N);
        for (int64_t i0 = 0; i0 < M; i0 += 8) {
            int rows = M - i0 < 8 ? (int)(M - i0) : 8;
            int64_t i[8]; /* the last row repeats past the edge; it is computed, not stored */
            for (int r = 0; r < 8; r++) i[r] = i0 + (r < rows ? r : rows - 1);
            const float *a0 = A + i[0] * as_i, *a1 = A + i[1] * as_i, *a2 = A + i[2] * as_i,
                        *a3 = A + i[3] * as_i, *a4 = A + i[4] * as_i, *a5 = A + i[5] * as_i,
                        *a6 = A + i[6] * as_i, *a7 = A + i[7] * as_i;
            __m512 acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7;
            if (accumulate) {
                acc0 = _mm512_maskz_loadu_ps(m, C + i[0] * N + j0);
                acc1 = _mm512_maskz_loadu_ps(m, C + i[1] * N + j0);
                acc2 = _mm512_maskz_loadu_ps(m, C + i[2] * N + j0);
                acc3 = _mm512_maskz_loadu_ps(m, C + i[3] * N + j0);
                acc4 = _mm512_maskz_loadu_ps(m, C + i[4] * N + j0);
                acc5 = _mm512_maskz_loadu_ps(m, C + i[5] * N + j0);
                acc6 = _mm512_maskz_loadu_ps(m, C + i[6] * N + j0);
                acc7 = _mm512_maskz_loadu_ps(m, C + i[7] * N + j0);
            } else {
                acc0 = acc1 = acc2 = acc3 = acc4 = acc5 = acc6 = acc7 = _mm512_setzero_ps();
            }
            for (int64_t k = 0; k < K; k++) {
                __m512 b = _mm512_maskz_loadu_ps(m, B + k * ldb + j0);
                SMALL_FMA(0) SMALL_FMA(1) SMALL_FMA(2) SMALL_FMA(3)
                SMALL_FMA(4) SMALL_FMA(5) SMALL_FMA(6) SMALL_FMA(7)
            }
            __m512 acc[8] = {acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7};
            for (int r = 0; r < rows; r++) _mm512_mask_storeu_ps(C + (i0 + r) * N + j0, m, acc[r]);
        }
    }
}
#undef SMALL_FMA
#endif

static void sgemm_small(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A,
                        const float *B, int64_t ldb, float *C, bool accumulate) {
#ifdef QKV_X86
    if (choose_impl() == &impl_avx512) {
        sgemm_small_avx512(ta, tb, M, N, K, A, B, ldb, C, accumulate);
        return;
    }
#endif
    sgemm_small_portable(ta, tb, M, N, K, A, B, ldb, C, accumulate);
}


/* Per-thread buffers for packed B. They grow to the largest B once and are then reused, so
 * warm training steps allocate nothing. A thread that ends (OpenMP ends the threads a smaller
 * team no longer needs) frees its buffer through the key's destructor. */
static _Thread_local float *pack_b;
static _Thread_local size_t pack_b_cap;
static pthread_key_t pack_b_key;
static pthread_once_t pack_b_once = PTHREAD_ONCE_INIT;

static void pack_b_key_create(void) {
    if (pthread_key_create(&pack_b_key, free) != 0) abort();
}

static float *pack_buffer(size_t floats) {
    if (floats > pack_b_cap) {
        pthread_once(&pack_b_once, pack_b_key_create);
        free(pack_b);
        pack_b = aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
        pack_b_cap = pack_b ? floats : 0;
        if (!pack_b) abort(); /* out of memory for one matrix: nothing sensible to do */
        pthread_setspecific(pack_b_key, pack_b);
    }
    return pack_b;
}

/* op(B) (K×N) into slivers of NR columns over the whole depth, zero-padded at the right edge:
 * bp[s][k][c] = op(B)(k, s·NR + c). B is stored (K, N), or (N, K) when tb, with rows ldb
 * apart. */
static void pack_b_sliver(float *bp, const float *B, bool tb, int64_t N, int64_t K,
                          int64_t ldb, int nr, int64_t s) {
    int cols = N - s < nr ? (int)(N - s) : nr;
    if (!tb) /* each k gives a contiguous row of the sliver */
        for (int64_t k = 0; k < K; k++) {
            memcpy(bp + k * nr, B + k * ldb + s, (size_t)cols * sizeof *bp);
            for (int c = cols; c < nr; c++) bp[k * nr + c] = 0;
        }
    else /* read each column of op(B) along k, write it down the sliver */
        for (int c = 0; c < nr; c++) {
            const float *src = B + (s + c) * ldb;
            for (int64_t k = 0; k < K; k++) bp[k * nr + c] = c < cols ? src[k] : 0;
        }
}

static void pack_b_all(float *bp, const float *B, bool tb, int64_t N, int64_t K, int64_t ldb,
                       int nr) {
    for (int64_t s = 0; s < N; s += nr) pack_b_sliver(bp + s * K, B, tb, N, K, ldb, nr, s);
}

/* Rows [i0, i0+mc) of C = op(A)·op(B), with op(B) already packed in bp. */
static void sgemm_rows(const sgemm_impl *im, bool ta, int64_t M, int64_t N, int64_t K,
                       const float *A, const float *bp, float *C, bool accumulate, int64_t i0,
                       int64_t mc) {
    int mr = im->mr, nr = im->nr;
    if (K == 0) {
        if (!accumulate)
            for (int64_t i = i0; i < i0 + mc; i++) memset(C + i * N, 0, (size_t)N * sizeof *C);
        return;
    }
    float edge[MR_MAX * NR_MAX], sliver[KC * MR_MAX];
    int64_t rs = ta ? 1 : K, ks = ta ? M : 1; /* op(A)(i, k) = A[i·rs + k·ks] */
    for (int64_t p0 = 0; p0 < K; p0 += KC) {
        int64_t kc = K - p0 < KC ? K - p0 : KC;
        bool add = accumulate || p0 > 0;
        for (int64_t js = 0; js < N; js += nr) {
            int cols = N - js < nr ? (int)(N - js) : nr;
            const float *b = bp + (js / nr) * K * nr + p0 * nr;
            for (int64_t is = 0; is < mc; is += mr) {
                int rows = mc - is < mr ? (int)(mc - is) : mr;
                int64_t i = i0 + is;
                float *c = C + i * N + js;
                const float *a = A + i * rs + p0 * ks;
                if (rows == mr && cols == nr) {
                    im->kernel(kc, a, rs, ks, b, c, N, add);
                    continue;
                }
                /* An edge tile: the missing rows of A are zeros in a packed sliver, and the
                 * result goes through a full tile. */
                for (int64_t k = 0; k < kc; k++)
                    for (int r = 0; r < mr; r++) sliver[k * mr + r] = r < rows ? a[r * rs + k * ks] : 0;
                im->kernel(kc, sliver, 1, mr, b, edge, nr, false);
                for (int r = 0; r < rows; r++)
                    for (int j = 0; j < cols; j++)
                        c[r * N + j] = add ? c[r * N + j] + edge[r * nr + j] : edge[r * nr + j];
            }
        }
    }
}

/* Task t of a product with one packed B for every batch: MC rows of C in one batch. */
static void shared_b_task(const sgemm_impl *im, bool ta, int64_t M, int64_t N, int64_t K,
                          const float *A, int64_t a_stride, const float *bp, float *C,
                          int64_t c_stride, bool accumulate, int64_t t) {
    int64_t blocks = (M + MC - 1) / MC, b = t / blocks, i0 = (t % blocks) * MC;
    int64_t mc = M - i0 < MC ? M - i0 : MC;
    sgemm_rows(im, ta, M, N, K, A + b * a_stride, bp, C + b * c_stride, accumulate, i0, mc);
}

static size_t packed_size(const sgemm_impl *im, int64_t N, int64_t K) {
    return (size_t)((N + im->nr - 1) / im->nr * im->nr * K);
}

void gemm_f32(bool ta, bool tb, int64_t batch, int64_t M, int64_t N, int64_t K, const float *A,
              int64_t a_stride, const float *B, int64_t b_stride, float *C, int64_t c_stride,
              bool accumulate) {
    const sgemm_impl *im = choose_impl();
    double flops = 2.0 * (double)batch * (double)M * (double)N * (double)K;
    if (is_small(M, N, K, tb)) {
        KERNEL_FOR_STATIC(batch > 1 && kernel_parallel(flops, PARALLEL_FLOPS), b, batch,
            sgemm_small(ta, tb, M, N, K, A + b * a_stride, B + b * b_stride, tb ? K : N,
                        C + b * c_stride, accumulate););
        return;
    }
    if (batch > 1 && b_stride != 0) { /* each batch its own B: one batch per task */
        KERNEL_FOR_STATIC(kernel_parallel(flops, PARALLEL_FLOPS), b, batch,
            float *bp = pack_buffer(packed_size(im, N, K));
            pack_b_all(bp, B + b * b_stride, tb, N, K, tb ? K : N, im->nr);
            sgemm_rows(im, ta, M, N, K, A + b * a_stride, bp, C + b * c_stride, accumulate, 0, M););
        return;
    }
    /* One B for every batch: pack it once (its slivers shared out among the threads), then
     * split the rows of C; one parallel region for both. */
    float *bp = pack_buffer(packed_size(im, N, K));
    int64_t blocks = (M + MC - 1) / MC, tasks = batch * blocks, slivers = (N + im->nr - 1) / im->nr;
    if (tasks > 1 && kernel_parallel(flops, PARALLEL_FLOPS)) {
#pragma omp parallel
        {
#pragma omp for schedule(static)
            for (int64_t s = 0; s < slivers; s++)
                pack_b_sliver(bp + s * im->nr * K, B, tb, N, K, tb ? K : N, im->nr, s * im->nr);
#pragma omp for schedule(static)
            for (int64_t t = 0; t < tasks; t++)
                shared_b_task(im, ta, M, N, K, A, a_stride, bp, C, c_stride, accumulate, t);
        }
    } else {
        pack_b_all(bp, B, tb, N, K, tb ? K : N, im->nr);
        for (int64_t t = 0; t < tasks; t++)
            shared_b_task(im, ta, M, N, K, A, a_stride, bp, C, c_stride, accumulate, t);
    }
}

/* op(B) up to this narrow is packed as plain rows (K×N, N apart): every product with it takes
 * the small kernel, which reads rows, so a non-transposed B of that width needs no packing. */
#define PLAIN_N 16

size_t gemm_packed_floats_f32(int64_t N, int64_t K) {
    return N <= PLAIN_N ? (size_t)(N * K) : packed_size(choose_impl(), N, K);
}

bool gemm_packed_is_plain_f32(int64_t N) { return N <= PLAIN_N; }

void gemm_pack_f32(float *bp, bool tb, int64_t N, int64_t K, const float *B, int64_t ldb) {
    if (N > PLAIN_N) {
        pack_b_all(bp, B, tb, N, K, ldb, choose_impl()->nr);
        return;
    }
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < N; j++) bp[k * N + j] = tb ? B[j * ldb + k] : B[k * ldb + j];
}

void gemm1_packed_f32(bool ta, int64_t M, int64_t N, int64_t K, const float *A,
                      const float *bp, float *C, bool accumulate) {
    const sgemm_impl *im = choose_impl();
    if (N <= PLAIN_N) { /* plain rows (is_small holds for any M and K) */
        sgemm_small(ta, false, M, N, K, A, bp, N, C, accumulate);
        return;
    }
    if (N <= im->nr && is_small(M, N, K, false)) { /* one sliver: rows NR apart, zero-padded */
        sgemm_small(ta, false, M, N, K, A, bp, im->nr, C, accumulate);
        return;
    }
    sgemm_rows(im, ta, M, N, K, A, bp, C, accumulate, 0, M);
}
