/* sgemm.c - the f32 matrix multiply behind every training step: packed, cache-blocked, with
 * the tile and small-product kernels of the ISA in use (isa_kernels.inc, chosen by isa.c).
 *
 * C (M×N) (+)= op(A) (M×K) · op(B) (K×N). op(B) is packed once into slivers of NR columns,
 * so a transposed B costs nothing extra; the tile kernel reads MR rows of op(A) in place
 * (any row and column stride, so a transposed A is free too) and keeps MR×NR sums in
 * registers. Depth is blocked by GEMM_KC so that a B sliver stays in L1.
 *
 * Threads split the work into equal runs of tile rows by slivers (shared_b_part; or by batch,
 * when each batch has its own B). Every element of C is computed by one thread, summing over k in the same order whatever
 * the thread count: results are bit-identical for any number of threads, and (isa.h's
 * contract) for any ISA. */
#include "isa.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MC 96   /* rows of C a block of tile rows takes at most */
#define KC GEMM_KC
#define PARALLEL_FLOPS 3e6 /* below this (~12 µs on one core) a second thread costs more than it saves */

/* Small products (the tiles of many-headed attention, 16×16×16) lose more to packing and
 * zero-padded edge tiles than they gain from the tile kernel: they are multiplied directly
 * (isa_kernels.inc), with op(B) copied to (K, N) rows when transposed. */
#define SMALL_K 128
#define SMALL_N 128
static bool is_small(int64_t M, int64_t N, int64_t K, bool tb) {
    if (tb && K > SMALL_K) return false; /* its copy of B must fit on the stack */
    return N <= 16 || (N <= SMALL_N && M * N * K <= 32 * 32 * 32); /* 16: one vector row */
}

/* op(B) as the tiles read it: sliver s (columns s·NR ..) at at + s·sliver_stride, its row k
 * k_stride further on. Packed: (bp, NR, K·NR). B itself, when it is op(B) and its columns fill
 * whole slivers: (B, ldb, NR), and nothing is copied. */
typedef struct {
    const float *at;
    int64_t k_stride, sliver_stride;
} b_view;

static void sgemm_rows(const kernel_isa *im, bool ta, int64_t N, int64_t K, const float *A,
                       int64_t lda, b_view bv, float *C, int64_t ldc, bool accumulate,
                       int64_t i0, int64_t mc);

/* A product of N <= 16 columns with A stored (K, M), M a whole number of slivers: the weight
 * gradient Xᵀ·dY of a layer with 16 outputs or fewer (tiny's unembedding, 64×16×512). The
 * small kernel keeps a sum for each of 8 rows (AVX-512; 4 rows of two halves on AVX2), each k
 * broadcasting 8 elements for 8 multiply-adds, and masks the lanes past N; instead the tiles
 * compute Cᵀ = op(B)ᵀ·A, A's rows read in place as their right-hand side's slivers (16 sums,
 * 2 loads for every 8 broadcasts). One thread, 64×N×512: AVX-512 1.36× as fast at N = 16,
 * 2-5× at N = 4 to 12; AVX2 the same at N = 16, 1.7-4.4× at N = 4 to 12 (Xeon of model 207).
 * A's rows a multiple of 512 bytes apart put a one-line sliver (AVX2's 16 floats) into a few
 * of L1's sets (b_in_place): at M = 128 the swap took AVX2 from 82 to 66 GFLOP/s, so those
 * stay with the small kernel, while AVX-512's two-line slivers still ran 1.36× as fast. */
#define SWAPPED_MIN_M 32 /* one AVX-512 sliver: below it the small kernel is as fast */
#define SWAPPED_COLS 256 /* columns of Cᵀ (rows of C) a pass takes: Cᵀ's 16 KB on the stack */
static bool small_swapped(const kernel_isa *im, bool ta, int64_t M, int64_t N, int64_t lda) {
    bool sets_spread = (lda * (int64_t)sizeof(float)) % 512 != 0;
    bool wide_sliver = im->gemm_nr * (int64_t)sizeof(float) > 64;
    return ta && N <= 16 && M >= SWAPPED_MIN_M && M % im->gemm_nr == 0 &&
           (sets_spread || wide_sliver);
}

/* Cᵀ (N×mc, in ct) from C when accumulating, the tiles' sums added to it (or stored) block
 * by block of GEMM_KC as they are to C itself, and ct back into C: each element is the same
 * chain of fused multiply-adds as in the small kernel (x·y = y·x, exactly), and the same sums
 * in the same order, so the bits are those of every other path. */
static void sgemm_small_swapped(const kernel_isa *im, int64_t M, int64_t N, int64_t K,
                                const float *A, int64_t lda, const float *B, int64_t ldb,
                                float *C, int64_t ldc, bool accumulate) {
    float ct[16 * SWAPPED_COLS];
    for (int64_t m0 = 0; m0 < M; m0 += SWAPPED_COLS) {
        int64_t mc = M - m0 < SWAPPED_COLS ? M - m0 : SWAPPED_COLS;
        if (accumulate) im->transpose(ct, mc, C + m0 * ldc, ldc, mc, N);
        /* op(B)ᵀ (N×K): its element (n, k) is B[k·ldb + n], a transposed A to the tiles */
        sgemm_rows(im, true, mc, K, B, ldb, (b_view){A + m0, lda, im->gemm_nr}, ct, mc,
                   accumulate, 0, N);
        im->transpose(C + m0 * ldc, ldc, ct, mc, N, mc);
    }
}

static void sgemm_small(const kernel_isa *im, bool ta, bool tb, int64_t M, int64_t N,
                        int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                        float *C, int64_t ldc, bool accumulate) {
    float bt[SMALL_K * SMALL_N];
    if (tb) { /* B is stored (N, K): bt[k][j] = B[j][k] */
        im->transpose(bt, N, B, ldb, N, K);
        B = bt;
        ldb = N;
    }
    if (small_swapped(im, ta, M, N, lda))
        sgemm_small_swapped(im, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
    else
        im->gemm_small(ta, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
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

static size_t packed_size(const kernel_isa *im, int64_t N, int64_t K) {
    return (size_t)((N + im->gemm_nr - 1) / im->gemm_nr * im->gemm_nr * K);
}

/* op(B) (K×N) into slivers of NR columns over the whole depth, zero-padded at the right edge:
 * bp[s][k][c] = op(B)(k, s·NR + c). B is stored (K, N), or (N, K) when tb, with rows ldb
 * apart. */
static void pack_b_sliver(const kernel_isa *im, float *bp, const float *B, bool tb, int64_t N,
                          int64_t K, int64_t ldb, int64_t s) {
    int nr = im->gemm_nr, cols = N - s < nr ? (int)(N - s) : nr;
    if (tb) /* B's rows s .. s + cols are the sliver's columns */
        im->transpose(bp, nr, B + s * ldb, ldb, cols, K);
    for (int64_t k = 0; k < K; k++) {
        if (!tb) /* each k gives a contiguous row of the sliver */
            memcpy(bp + k * nr, B + k * ldb + s, (size_t)cols * sizeof *bp);
        for (int c = cols; c < nr; c++) bp[k * nr + c] = 0;
    }
}

static void pack_b_all(const kernel_isa *im, float *bp, const float *B, bool tb, int64_t N,
                       int64_t K, int64_t ldb) {
    for (int64_t s = 0; s < N; s += im->gemm_nr)
        pack_b_sliver(im, bp + s * K, B, tb, N, K, ldb, s);
}

static b_view packed_view(const kernel_isa *im, const float *bp, int64_t K) {
    return (b_view){bp, im->gemm_nr, K * im->gemm_nr};
}

/* The ways of the CPU's L1 data cache (0 where the C library does not say). */
static int l1_ways;
static pthread_once_t l1_ways_once = PTHREAD_ONCE_INIT;

static void l1_ways_read(void) {
#ifdef _SC_LEVEL1_DCACHE_ASSOC
    long ways = sysconf(_SC_LEVEL1_DCACHE_ASSOC);
    l1_ways = ways > 0 && ways < 1024 ? (int)ways : 0;
#endif
}

#define FEW_ROWS 256   /* rows of C that share one B: at most this many, a B read in place... */
#define FEW_ROWS_WAYS 12 /* ...even at rows 512 bytes apart, where L1 has this many ways */

/* Whether op(B) can be read in place: B not transposed, N a whole number of slivers, and
 * either one sliver (B is then its own packed form) or rows that are not a multiple of 512
 * bytes apart. Rows 512 bytes apart put a sliver's kc rows into an eighth of L1's sets (or
 * fewer), where they evict each other, and every tile reads its B from L2: packed, medium's
 * x·W (2048×128×128) took 0.87× the time, its dW = xᵀ·dY (128×128×2048) 0.91× and 512³
 * 0.81× (medians of 21 interleaved rounds, one thread, AVX2, AMD Zen 3: 32 KB of L1 in 8
 * ways), while tiny's and long's x·W (N = 64, rows 256 bytes apart) timed the same either
 * way. But packing copies all of B for the `rows` rows of C that share it, and where they are
 * few that copy costs more than the reads from L2 save on an L1 of 12 ways: on the Xeon of
 * model 207 (48 KB in 12 ways), xᵀ·dY of 64, 128 and 256 rows (N = 128, K = 1024) took 0.79,
 * 0.90 and 0.96× the time in place on one thread (AVX-512; AVX2 0.82, 0.95, 0.98) and 0.56 to
 * 0.88× on two, 512 rows 1.01× (AVX2 1.05×): medians of 31 rounds alternating the two forms.
 * Medium's weight gradients are such products (128 rows). That holds for a B whose rows start
 * on cache lines, as the arena's tensors do; 16 or 32 bytes past one, each sliver's row spans
 * a third line and in place took 1.00 to 1.05× the time: those stay packed. */
static bool b_in_place(const kernel_isa *im, bool tb, int64_t N, const float *B, int64_t rows) {
    bool sets_spread = (N * (int64_t)sizeof(float)) % 512 != 0;
    pthread_once(&l1_ways_once, l1_ways_read);
    bool few_rows = rows <= FEW_ROWS && l1_ways >= FEW_ROWS_WAYS && (uintptr_t)B % 64 == 0;
    return !tb && N % im->gemm_nr == 0 && (N == im->gemm_nr || sets_spread || few_rows);
}

/* Rows [i0, i0+mc) of C (rows ldc apart) = op(A)·op(B): A stored (M, K), or (K, M) when ta,
 * rows lda apart; op(B) read through bv. */
static void sgemm_rows(const kernel_isa *im, bool ta, int64_t N, int64_t K, const float *A,
                       int64_t lda, b_view bv, float *C, int64_t ldc, bool accumulate,
                       int64_t i0, int64_t mc) {
    int mr = im->gemm_mr, nr = im->gemm_nr;
    if (K == 0) {
        if (!accumulate)
            for (int64_t i = i0; i < i0 + mc; i++) memset(C + i * ldc, 0, (size_t)N * sizeof *C);
        return;
    }
    int64_t rs = ta ? 1 : lda, ks = ta ? lda : 1; /* op(A)(i, k) = A[i·rs + k·ks] */
    for (int64_t p0 = 0; p0 < K; p0 += KC) {
        int64_t kc = K - p0 < KC ? K - p0 : KC;
        bool add = accumulate || p0 > 0;
        for (int64_t js = 0; js < N; js += nr) {
            int cols = N - js < nr ? (int)(N - js) : nr;
            const float *b = bv.at + (js / nr) * bv.sliver_stride + p0 * bv.k_stride;
            for (int64_t is = 0; is < mc; is += mr) {
                int rows = mc - is < mr ? (int)(mc - is) : mr;
                int64_t i = i0 + is;
                im->gemm_tile(rows, cols, kc, A + i * rs + p0 * ks, rs, ks, b, bv.k_stride,
                              C + i * ldc + js, ldc, add);
            }
        }
    }
}

/* A product with one B is cut into units of one tile row (MR rows of one batch) by one
 * sliver (NR columns), numbered batch by batch, row by row, sliver by sliver, and each of
 * `parts` threads takes an equal run of them: on one thread, all of them, as blocks of MC rows
 * of one batch over every sliver. Cutting by MC rows on several threads too had left most
 * threads idle where C has few rows: a weight gradient xᵀ·dY of 128 rows was two tasks (96
 * and 32 rows) on any number of threads, one of 64 rows a single task. A run is at most three
 * rectangles: the end of one tile row, whole tile rows (MC rows at a time), the start of
 * another. Each element of C is the same chain of multiply-adds however C is cut, so the bits
 * do not depend on the threads. */
static void shared_b_part(const kernel_isa *im, bool ta, int64_t batch, int64_t M, int64_t N,
                          int64_t K, const float *A, int64_t a_stride, b_view bv, float *C,
                          int64_t c_stride, bool accumulate, int64_t part, int64_t parts) {
    int64_t mr = im->gemm_mr, nr = im->gemm_nr;
    int64_t tile_rows = (M + mr - 1) / mr, slivers = (N + nr - 1) / nr;
    int64_t units = batch * tile_rows * slivers, max_tiles = MC / mr > 0 ? MC / mr : 1;
    int64_t u = units * part / parts, end = units * (part + 1) / parts;
    while (u < end) {
        int64_t row = u / slivers, s0 = u % slivers, b = row / tile_rows, t0 = row % tile_rows;
        int64_t t1 = t0 + 1, s1 = slivers;
        if (s0 > 0 || end - u < slivers) { /* part of one tile row */
            s1 = s0 + (end - u) < slivers ? s0 + (end - u) : slivers;
        } else { /* whole tile rows, within batch b */
            int64_t tiles = (end - u) / slivers;
            if (tiles > tile_rows - t0) tiles = tile_rows - t0;
            if (tiles > max_tiles) tiles = max_tiles;
            t1 = t0 + tiles;
        }
        int64_t i0 = t0 * mr, i1 = t1 * mr < M ? t1 * mr : M;
        int64_t j0 = s0 * nr, j1 = s1 * nr < N ? s1 * nr : N;
        b_view cols = {bv.at + s0 * bv.sliver_stride, bv.k_stride, bv.sliver_stride};
        sgemm_rows(im, ta, j1 - j0, K, A + b * a_stride, ta ? M : K, cols, C + b * c_stride + j0,
                   N, accumulate, i0, i1 - i0);
        u += (t1 - t0) * (s1 - s0);
    }
}

/* Batch b of a product with each batch its own B: read in place, or packed into this thread's
 * buffer. */
static void own_b_task(const kernel_isa *im, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                       const float *A, const float *B, float *C, bool accumulate) {
    b_view bv = {B, N, im->gemm_nr};
    if (!b_in_place(im, tb, N, B, M)) {
        float *bp = pack_buffer(packed_size(im, N, K));
        profile_part was = profile_enter(PROFILE_LAYOUT);
        pack_b_all(im, bp, B, tb, N, K, tb ? K : N);
        profile_enter(was);
        bv = packed_view(im, bp, K);
    }
    sgemm_rows(im, ta, N, K, A, ta ? M : K, bv, C, N, accumulate, 0, M);
}

/* Whether a batch of products with one B is a single product of batch·M rows: op(A) and C
 * stored batch after batch with nothing between them, A not transposed (a transposed A's
 * rows are its columns, which do not run on from one batch to the next). Each element of C
 * is the same chain of fused multiply-adds either way, so the bits do not change; but the
 * tiles then run down all the rows at once. The x·W products of a step are (B, T, C)·(C, N):
 * with T = 16, each batch's 16 rows took three 6-row tiles (18 rows' work) and, for a
 * transposed B, its own copy of B; as one product of 16·B rows they ran 1.15-1.2× faster
 * (tiny, one thread, AVX2, AMD Zen 3). On several threads the batches stay the tasks that
 * split the work: blocks of MC rows would be too few to share evenly. */
static bool rows_as_one(bool ta, int64_t M, int64_t N, int64_t K, int64_t a_stride,
                        int64_t b_stride, int64_t c_stride) {
    return !ta && b_stride == 0 && a_stride == M * K && c_stride == M * N;
}

static void sgemm(bool ta, bool tb, int64_t batch, int64_t M, int64_t N, int64_t K,
                  const float *A, int64_t a_stride, const float *B, int64_t b_stride, float *C,
                  int64_t c_stride, bool accumulate) {
    const kernel_isa *im = kernel_isa_active();
    double flops = 2.0 * (double)batch * (double)M * (double)N * (double)K;
    if (batch > 1 && rows_as_one(ta, M, N, K, a_stride, b_stride, c_stride) &&
        !kernel_parallel(flops, PARALLEL_FLOPS)) { /* on one thread: see rows_as_one */
        M *= batch;
        batch = 1;
    }
    if (is_small(M, N, K, tb)) {
        KERNEL_FOR_STATIC(kernel_team(flops, PARALLEL_FLOPS), b, batch,
                          sgemm_small(im, ta, tb, M, N, K, A + b * a_stride, ta ? M : K,
                                      B + b * b_stride, tb ? K : N, C + b * c_stride, N,
                                      accumulate););
        return;
    }
    if (batch > 1 && b_stride != 0) { /* each batch its own B: one batch per task */
        KERNEL_FOR_STATIC(kernel_team(flops, PARALLEL_FLOPS), b, batch,
                          own_b_task(im, ta, tb, M, N, K, A + b * a_stride, B + b * b_stride,
                                     C + b * c_stride, accumulate););
        return;
    }
    /* One B for every batch: read in place, or packed once (its slivers shared out among the
     * threads); then equal runs of tiles (shared_b_part); one parallel region for both. */
    int team = kernel_team(flops, PARALLEL_FLOPS);
    int64_t slivers = (N + im->gemm_nr - 1) / im->gemm_nr;
    if (b_in_place(im, tb, N, B, batch * M)) {
        b_view bv = {B, N, im->gemm_nr};
        KERNEL_FOR_STATIC(team, p, team,
                          shared_b_part(im, ta, batch, M, N, K, A, a_stride, bv, C, c_stride,
                                        accumulate, p, team););
        return;
    }
    float *bp = pack_buffer(packed_size(im, N, K));
    b_view bv = packed_view(im, bp, K);
    if (team > 1) {
        profile_part was = profile_enter(PROFILE_WAIT); /* as in KERNEL_FOR_ (kernels.h) */
#pragma omp parallel /* every thread (see KERNEL_FOR_): the slivers are shared by all */
        {
            profile_enter(PROFILE_LAYOUT);
#pragma omp for schedule(static) nowait
            for (int64_t s = 0; s < slivers; s++) {
                int64_t col = s * im->gemm_nr;
                pack_b_sliver(im, bp + col * K, B, tb, N, K, tb ? K : N, col);
            }
            profile_enter(PROFILE_WAIT);
#pragma omp barrier
            profile_enter(was);
#pragma omp for schedule(static) nowait
            for (int64_t p = 0; p < team; p++)
                shared_b_part(im, ta, batch, M, N, K, A, a_stride, bv, C, c_stride, accumulate,
                              p, team);
            profile_enter(PROFILE_WAIT);
        }
        profile_enter(was);
    } else {
        profile_part was = profile_enter(PROFILE_LAYOUT);
        pack_b_all(im, bp, B, tb, N, K, tb ? K : N);
        profile_enter(was);
        shared_b_part(im, ta, batch, M, N, K, A, a_stride, bv, C, c_stride, accumulate, 0, 1);
    }
}

void gemm_f32(bool ta, bool tb, int64_t batch, int64_t M, int64_t N, int64_t K, const float *A,
              int64_t a_stride, const float *B, int64_t b_stride, float *C, int64_t c_stride,
              bool accumulate) {
    profile_part was = profile_enter(PROFILE_PRODUCTS);
    sgemm(ta, tb, batch, M, N, K, A, a_stride, B, b_stride, C, c_stride, accumulate);
    profile_enter(was);
}

/* op(B) up to this narrow, or made of whole slivers, is "packed" as plain rows (K×N, N
 * apart): the small kernel reads rows, and so do the tiles (b_in_place), so a non-transposed B
 * of that width needs no packing at all (the fused attention's K_j, V_j, Q_i and dO_i when
 * Dk and Dv are multiples of NR). */
#define PLAIN_N 16

static bool plain_width(const kernel_isa *im, int64_t N) {
    return N <= PLAIN_N || N % im->gemm_nr == 0;
}

size_t gemm_packed_floats_f32(int64_t N, int64_t K) {
    const kernel_isa *im = kernel_isa_active();
    return plain_width(im, N) ? (size_t)(N * K) : packed_size(im, N, K);
}

bool gemm_packed_is_plain_f32(int64_t N) { return plain_width(kernel_isa_active(), N); }

void gemm_pack_f32(float *bp, bool tb, int64_t N, int64_t K, const float *B, int64_t ldb) {
    const kernel_isa *im = kernel_isa_active();
    profile_part was = profile_enter(PROFILE_LAYOUT);
    if (!plain_width(im, N))
        pack_b_all(im, bp, B, tb, N, K, ldb);
    else if (tb) /* bp[k][j] = B[j][k] */
        im->transpose(bp, N, B, ldb, N, K);
    else
        for (int64_t k = 0; k < K; k++) memcpy(bp + k * N, B + k * ldb, (size_t)N * sizeof *bp);
    profile_enter(was);
}

static gemm1_branch branch_of(const kernel_isa *im, int64_t M, int64_t N, int64_t K) {
    if (N <= PLAIN_N) return GEMM1_SMALL_PLAIN; /* is_small holds for any M and K */
    if (N <= im->gemm_nr && is_small(M, N, K, false))
        return plain_width(im, N) ? GEMM1_SMALL_PLAIN : GEMM1_SMALL_SLIVER;
    return plain_width(im, N) ? GEMM1_TILES_PLAIN : GEMM1_TILES_PACKED;
}

gemm1_branch gemm1_branch_f32(int64_t M, int64_t N, int64_t K) {
    return branch_of(kernel_isa_active(), M, N, K);
}

/* The four branches read bp as gemm_pack_f32 wrote it: plain rows ldb apart (N <= PLAIN_N, or
 * whole slivers, which may be B itself in place), or slivers of NR columns, zero-padded, whose
 * one sliver a small product reads as rows NR apart. */
static void gemm1_packed(bool ta, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                         const float *bp, int64_t ldb, float *C, int64_t ldc, bool accumulate) {
    const kernel_isa *im = kernel_isa_active();
    switch (branch_of(im, M, N, K)) {
    case GEMM1_SMALL_PLAIN:
        sgemm_small(im, ta, false, M, N, K, A, lda, bp, ldb, C, ldc, accumulate);
        return;
    case GEMM1_SMALL_SLIVER:
        sgemm_small(im, ta, false, M, N, K, A, lda, bp, im->gemm_nr, C, ldc, accumulate);
        return;
    case GEMM1_TILES_PLAIN:
        sgemm_rows(im, ta, N, K, A, lda, (b_view){bp, ldb, im->gemm_nr}, C, ldc, accumulate, 0, M);
        return;
    case GEMM1_TILES_PACKED:
        sgemm_rows(im, ta, N, K, A, lda, packed_view(im, bp, K), C, ldc, accumulate, 0, M);
        return;
    }
}

void gemm1_packed_f32(bool ta, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                      const float *bp, int64_t ldb, float *C, int64_t ldc, bool accumulate) {
    profile_part was = profile_enter(PROFILE_PRODUCTS);
    gemm1_packed(ta, M, N, K, A, lda, bp, ldb, C, ldc, accumulate);
    profile_enter(was);
}
