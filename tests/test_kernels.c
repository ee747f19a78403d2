/* test_kernels.c - the kernels under every training step.
 *   gemm: gemm_f32 (and gemm1_packed_f32, gemm_f64) against a double-precision reference on many
 *         shapes, every transpose, batched and shared-B, accumulating or not; ctest runs this
 *         file again with QKV_SIMD=scalar, avx2 and avx512, so every path passes it.
 *   determinism: the same bits with one thread and with two (gemm and fused attention).
 *   fused: qkv_attention_fused against qkv_attention_unfused, outputs and gradients, with every
 *          kind of mask; fully masked rows are exactly zero in both.
 *   alloc: a warm training step makes no system allocation in its contexts.
 *   exp: the fused kernel's fast exp, seen through softmax weights (V = I). */
#include "engine/internal.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"

#include "fixtures.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef QKV_HAVE_OPENMP
#include <omp.h>
#endif

/* ---- helpers ------------------------------------------------------------------------------ */

/* ck_assert_msg for inner loops: Check records every passing ck_assert (a write to its pipe),
 * which for millions of elements costs seconds; this one costs nothing until it fails. */
#define REQUIRE(cond, ...)                                                                         \
    do {                                                                                           \
        if (!(cond)) ck_abort_msg(__VA_ARGS__);                                                    \
    } while (0)

/* n floats from a cache line on, as the arena gives tensors: which way a product reads its B
 * can depend on where B starts (sgemm.c, b_in_place), so the cases below take the step's way.
 * Offsets into these vectors test the rest. */
static float *fvec(size_t n) {
    float *p = aligned_alloc(64, ((n ? n : 1) * sizeof *p + 63) / 64 * 64);
    REQUIRE(p, "out of memory");
    return p;
}

static void fill_uniform(float *x, size_t n, qkv_rng *rng) {
    for (size_t i = 0; i < n; i++) x[i] = (float)(2 * qkv_rng_uniform(rng) - 1);
}

/* ---- gemm against a double reference ------------------------------------------------------ */

#define GEMM_TOL 1e-5
#define PAD 7 /* elements between batches, to check strides and catch stray writes */
#define SENTINEL 12345.0f

static double gemm_worst; /* worst |c − ref| / (Σ|a·b| + |c0|) seen by this process */

#define SHARE_B 1 /* b_stride 0: one B for every batch */
#define SHARE_A 2 /* a_stride 0 */
#define NO_GAPS 4 /* batches back to back (no PAD): a shared B's batches may run as one product */

/* C[b] (+)= op(A[b])·op(B[b]) by gemm_f32 (or gemm_pack_f32 + gemm1_packed_f32 when `one`), checked element by
 * element against a double-precision sum: |c − ref| <= 1e-5·(Σ_k |a_ik·b_kj| + |c0_ij|) + 1e-30,
 * where c0 is C's value before (accumulate only). Without accumulate C starts as NaN, so a
 * kernel that reads it fails; the gaps between batches of C must be left alone. */
static void check_gemm(bool ta, bool tb, int64_t batch, int64_t M, int64_t N, int64_t K, int share,
                       bool accumulate, bool one, qkv_rng *rng) {
    int64_t pad = batch > 1 && !(share & NO_GAPS) ? PAD : 0;
    int64_t as = share & SHARE_A ? 0 : M * K + pad, bs = share & SHARE_B ? 0 : K * N + pad,
            cs = M * N + pad;
    size_t na = (size_t)(as ? batch * as : M * K), nb = (size_t)(bs ? batch * bs : K * N),
           nc = (size_t)(batch * cs);
    float *A = fvec(na), *B = fvec(nb), *C = fvec(nc), *C0 = fvec(nc);
    fill_uniform(A, na, rng);
    fill_uniform(B, nb, rng);
    for (int64_t b = 0; b < batch; b++)
        for (int64_t e = 0; e < cs; e++)
            C[b * cs + e] = e >= M * N   ? SENTINEL
                            : accumulate ? (float)(2 * qkv_rng_uniform(rng) - 1)
                                         : NAN;
    memcpy(C0, C, nc * sizeof *C);
    if (one) {
        ck_assert_int_eq(batch, 1);
        float *bp = fvec(gemm_packed_floats_f32(N, K));
        gemm_pack_f32(bp, tb, N, K, B, tb ? K : N);
        gemm1_packed_f32(ta, M, N, K, A, ta ? M : K, bp, N, C, N, accumulate);
        free(bp);
    } else {
        gemm_f32(ta, tb, batch, M, N, K, A, as, B, bs, C, cs, accumulate);
    }
    for (int64_t b = 0; b < batch; b++) {
        const float *a = A + b * as, *bm = B + b * bs;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double c0 = accumulate ? C0[b * cs + i * N + j] : 0, ref = c0, mag = fabs(c0);
                for (int64_t k = 0; k < K; k++) {
                    double x = ta ? a[k * M + i] : a[i * K + k];
                    double y = tb ? bm[j * K + k] : bm[k * N + j];
                    ref += x * y;
                    mag += fabs(x * y);
                }
                double got = C[b * cs + i * N + j], err = fabs(got - ref);
                double tol = GEMM_TOL * mag + 1e-30;
                REQUIRE(err <= tol,
                        "gemm%s %s ta=%d tb=%d batch=%lld M=%lld N=%lld K=%lld share=%d acc=%d: "
                        "C[%lld][%lld][%lld] = %.9g, reference %.9g (tol %.3g)",
                        one ? "1" : "", kernel_isa_name(), ta, tb, (long long)batch, (long long)M,
                        (long long)N, (long long)K, share, accumulate, (long long)b, (long long)i,
                        (long long)j, got, ref, tol);
                if (mag > 0 && err / mag > gemm_worst) gemm_worst = err / mag;
            }
        for (int64_t e = M * N; e < cs; e++)
            REQUIRE(C[b * cs + e] == SENTINEL, "gemm wrote past C[%lld] (M=%lld N=%lld)",
                    (long long)b, (long long)M, (long long)N);
    }
    free(A);
    free(B);
    free(C);
    free(C0);
}

static const int64_t SIZES[] = {1, 2, 5, 11, 12, 13, 16, 17, 31, 32, 33, 64, 65, 100, 257, 300};
#define NSIZES ((int)(sizeof SIZES / sizeof SIZES[0]))

/* Every (M, N, K) from SIZES with M·N·K <= 100000 (3209 shapes, among them every size in every
 * position: K = 257 and 300 cross the KC = 256 depth block, N <= 16 takes the small path, tb
 * with K > 128 leaves it), four transposes each, accumulate alternating. */
START_TEST(test_gemm_sweep) {
    qkv_rng rng = qkv_rng_seed(1);
    long shapes = 0;
    for (int mi = 0; mi < NSIZES; mi++)
        for (int ni = 0; ni < NSIZES; ni++)
            for (int ki = 0; ki < NSIZES; ki++) {
                int64_t M = SIZES[mi], N = SIZES[ni], K = SIZES[ki];
                if (M * N * K > 100000) continue;
                shapes++;
                for (int t = 0; t < 4; t++)
                    check_gemm(t & 1, t >> 1, 1, M, N, K, 0, (mi + ni + ki + t) & 1, false, &rng);
            }
    ck_assert_int_eq(shapes, 3209);
    printf("gemm sweep (%s): %ld shapes x 4 transposes, worst error %.3g of sum |a*b|\n",
           kernel_isa_name(), shapes, gemm_worst);
}
END_TEST

/* Large products: several MC = 96 row blocks, several KC blocks, wide N; the first two are
 * big enough (> 8e6 flops) to be split between threads. */
START_TEST(test_gemm_large) {
    qkv_rng rng = qkv_rng_seed(2);
    static const int64_t shapes[][3] = {
        {257, 300, 257}, {300, 65, 300}, {100, 257, 33}, {17, 300, 300}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            check_gemm(t & 1, t >> 1, 1, shapes[s][0], shapes[s][1], shapes[s][2], 0, t >= 2, false,
                       &rng);
}
END_TEST

/* `batch` products with one B, A and C batches back to back, in one call: the same bits as
 * each batch in a call of its own. */
static void check_batches_alone(bool ta, bool tb, int64_t batch, int64_t M, int64_t N, int64_t K,
                                bool accumulate, qkv_rng *rng) {
    size_t na = (size_t)(batch * M * K), nc = (size_t)(batch * M * N);
    float *A = fvec(na), *B = fvec((size_t)(K * N)), *C = fvec(nc), *alone = fvec(nc);
    fill_uniform(A, na, rng);
    fill_uniform(B, (size_t)(K * N), rng);
    fill_uniform(C, nc, rng);
    memcpy(alone, C, nc * sizeof *C);
    gemm_f32(ta, tb, batch, M, N, K, A, M * K, B, 0, C, M * N, accumulate);
    for (int64_t b = 0; b < batch; b++)
        gemm_f32(ta, tb, 1, M, N, K, A + b * M * K, 0, B, 0, alone + b * M * N, 0, accumulate);
    REQUIRE(memcmp(C, alone, nc * sizeof *C) == 0,
            "gemm %s ta=%d tb=%d M=%lld N=%lld K=%lld acc=%d: %lld batches in one call differ "
            "from each alone", kernel_isa_name(), ta, tb, (long long)M, (long long)N,
            (long long)K, accumulate, (long long)batch);
    free(A);
    free(B);
    free(C);
    free(alone);
}

/* Batches with their own A and B (a_stride/b_stride/c_stride with gaps), with one shared B
 * (b_stride 0) and with one shared A (a_stride 0), accumulating and not, on the small, packed
 * and multi-block paths. */
START_TEST(test_gemm_batched) {
    qkv_rng rng = qkv_rng_seed(3);
    static const int64_t shapes[][3] = {{1, 1, 1},     {5, 16, 300},   {13, 33, 17}, {12, 32, 12},
                                        {17, 100, 65}, {100, 13, 257}, {65, 64, 31}, {31, 17, 130},
                                        {2, 300, 5},   {33, 11, 2},    {97, 31, 64}, {16, 16, 16}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            for (int share = 0; share < 3; share++)
                for (int acc = 0; acc < 2; acc++)
                    check_gemm(t & 1, t >> 1, 3, shapes[s][0], shapes[s][1], shapes[s][2], share,
                               acc, false, &rng);
    /* batches back to back with a shared B: on one thread these run as one product of
     * batch·M rows (when A is not transposed), and each must give what it gives alone, bit
     * for bit (sgemm.c, rows_as_one) */
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            for (int acc = 0; acc < 2; acc++) {
                int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                check_gemm(t & 1, t >> 1, 3, M, N, K, SHARE_B | NO_GAPS, acc, false, &rng);
                check_batches_alone(t & 1, t >> 1, 5, M, N, K, acc, &rng);
            }
    /* big enough to go parallel: one B per batch, and a shared B split by rows */
    for (int t = 0; t < 4; t++) {
        check_gemm(t & 1, t >> 1, 4, 130, 150, 100, 0, t & 1, false, &rng);
        check_gemm(t & 1, t >> 1, 4, 130, 150, 100, SHARE_B, !(t & 1), false, &rng);
        check_gemm(t & 1, t >> 1, 4, 130, 150, 100, SHARE_A, t & 1, false, &rng);
        check_gemm(t & 1, t >> 1, 40, 64, 16, 100, 0, t & 1, false, &rng); /* small, batched */
    }
}
END_TEST

/* rows × width floats from src (rows lds apart) to dst (rows ldd apart) */
static void copy_rows(float *dst, int64_t ldd, const float *src, int64_t lds, int64_t rows,
                      int64_t width) {
    for (int64_t r = 0; r < rows; r++)
        memcpy(dst + r * ldd, src + r * lds, (size_t)width * sizeof *dst);
}

/* gemm1_packed_f32 with A's rows lda apart and C's ldc apart (a head's rows among the others':
 * the fused attention's heads form), and a plain-rows B read in place with rows ldb apart,
 * gives the bits it gives on compact rows and a packed B, and leaves the gaps between C's
 * rows alone. */
static void check_gemm1_strided(bool ta, bool tb, int64_t M, int64_t N, int64_t K, bool accumulate,
                                qkv_rng *rng) {
    int64_t lda = (ta ? M : K) + 3, ldc = N + 7, arows = ta ? K : M;
    bool in_place = !tb && gemm_packed_is_plain_f32(N);
    int64_t ldb = in_place ? N + 2 : tb ? K : N, brows = tb ? N : K;
    float *A = fvec((size_t)(arows * lda)), *A1 = fvec((size_t)(M * K));
    float *B = fvec((size_t)(brows * ldb)), *C = fvec((size_t)(M * ldc));
    float *C1 = fvec((size_t)(M * N));
    float *bp = fvec(gemm_packed_floats_f32(N, K));
    fill_uniform(A, (size_t)(arows * lda), rng);
    fill_uniform(B, (size_t)(brows * ldb), rng);
    copy_rows(A1, ta ? M : K, A, lda, arows, ta ? M : K); /* A1: A's rows without the gaps */
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < ldc; j++)
            C[i * ldc + j] = j >= N ? SENTINEL : (float)(2 * qkv_rng_uniform(rng) - 1);
    copy_rows(C1, N, C, ldc, M, N);
    gemm_pack_f32(bp, tb, N, K, B, ldb);
    gemm1_packed_f32(ta, M, N, K, A, lda, in_place ? B : bp, in_place ? ldb : N, C, ldc,
                     accumulate);
    gemm1_packed_f32(ta, M, N, K, A1, ta ? M : K, bp, N, C1, N, accumulate);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < ldc; j++)
            REQUIRE(j < N ? memcmp(&C[i * ldc + j], &C1[i * N + j], sizeof *C) == 0
                          : C[i * ldc + j] == SENTINEL,
                    "gemm1 %s strided ta=%d tb=%d M=%lld N=%lld K=%lld acc=%d%s: C[%lld][%lld] %s",
                    kernel_isa_name(), ta, tb, (long long)M, (long long)N, (long long)K,
                    accumulate, in_place ? " (B in place)" : "", (long long)i, (long long)j,
                    j < N ? "differs from the compact product's" : "(a gap) was written");
    free(A), free(A1), free(B), free(C), free(C1), free(bp);
}

/* gemm1_packed_f32, the one-thread product inside the attention tiles, on tile shapes and
 * odd ones: small products (one packed sliver) and packed rows; compact, and with gaps
 * between the rows of A and C. */
START_TEST(test_gemm1) {
    qkv_rng rng = qkv_rng_seed(4);
    static const int64_t shapes[][3] = {{64, 64, 64}, {64, 40, 64},  {13, 64, 24}, {64, 24, 13},
                                        {1, 17, 300}, {65, 16, 129}, {33, 129, 5}, {64, 8, 64},
                                        {16, 16, 16}, {16, 16, 32},  {8, 32, 16}, {64, 32, 64}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            for (int acc = 0; acc < 2; acc++) {
                check_gemm(t & 1, t >> 1, 1, shapes[s][0], shapes[s][1], shapes[s][2], 0, acc, true,
                           &rng);
                check_gemm1_strided(t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2], acc,
                                    &rng);
            }
}
END_TEST

/* Every branch of gemm1_packed_f32 (gemm1_branch_f32) on the active path's own tile: widths
 * around its sliver NR (16 on AVX2, NEON and plain C; 32 on AVX-512) and rows around its MR,
 * each against the double reference and, with A, B and C rows apart by more than their width
 * (ldb != N: B read in place with its own stride where its packed form is plain rows), against
 * the compact product bit for bit. Each branch this path has must be reached: a widening of
 * the sliver or of is_small that moved a shape out of a branch fails here, not on a CPU the
 * change never ran on. */
START_TEST(test_gemm1_branches) {
    qkv_rng rng = qkv_rng_seed(6);
    const kernel_isa *im = kernel_isa_active();
    int64_t nr = im->gemm_nr, mr = im->gemm_mr;
    const int64_t widths[] = {1, 5, 16, 17, nr - 3, nr, nr + 5, 2 * nr, 3 * nr + 1};
    const int64_t rows[] = {1, mr - 1, mr, 13, 64};
    const int64_t depths[] = {1, 13, 64, 300};
    int reached[4] = {0}, in_place[4] = {0};
    for (size_t n = 0; n < sizeof widths / sizeof *widths; n++)
        for (size_t m = 0; m < sizeof rows / sizeof *rows; m++)
            for (size_t k = 0; k < sizeof depths / sizeof *depths; k++) {
                int64_t M = rows[m], N = widths[n], K = depths[k];
                if (M * N * K > 200000) continue; /* the reference's time, under valgrind */
                gemm1_branch br = gemm1_branch_f32(M, N, K);
                reached[br]++;
                in_place[br] += gemm_packed_is_plain_f32(N);
                for (int t = 0; t < 4; t++) {
                    bool acc = (n + m + k + (size_t)t) & 1;
                    check_gemm(t & 1, t >> 1, 1, M, N, K, 0, acc, true, &rng);
                    check_gemm1_strided(t & 1, t >> 1, M, N, K, acc, &rng);
                }
            }
    static const char *names[] = {"small product, plain rows", "small product, one sliver",
                                  "tiles, plain rows", "tiles, packed slivers"};
    for (int b = 0; b < 4; b++) {
        if (b == GEMM1_SMALL_SLIVER && nr == 16) continue; /* no width between 16 and NR */
        REQUIRE(reached[b] > 0, "gemm1 %s (NR %lld): no shape took the branch \"%s\"",
                kernel_isa_name(), (long long)nr, names[b]);
        REQUIRE(b == GEMM1_SMALL_SLIVER || b == GEMM1_TILES_PACKED || in_place[b] > 0,
                "gemm1 %s: the branch \"%s\" never read B in place", kernel_isa_name(), names[b]);
        printf("gemm1 %s (NR %lld, MR %lld): %s: %d shapes\n", kernel_isa_name(), (long long)nr,
               (long long)mr, names[b], reached[b]);
    }
}
END_TEST

/* gemm1_packed_f64 (the f64 attention's products) with A, B and C rows apart by more than
 * their width: the bits of the compact product, the gaps left alone. */
START_TEST(test_gemm1_strided_f64) {
    qkv_rng rng = qkv_rng_seed(7);
    static const int64_t shapes[][3] = {{1, 1, 1}, {8, 32, 16}, {13, 17, 64}, {64, 64, 64},
                                        {16, 16, 16}, {5, 40, 300}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++) {
            bool ta = t & 1, acc = t >> 1;
            int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            int64_t lda = (ta ? M : K) + 3, ldb = N + 2, ldc = N + 7, arows = ta ? K : M;
            double *A = malloc((size_t)(arows * lda) * sizeof *A),
                   *A1 = malloc((size_t)(M * K) * sizeof *A),
                   *B = malloc((size_t)(K * ldb) * sizeof *B),
                   *B1 = malloc((size_t)(K * N) * sizeof *B),
                   *C = malloc((size_t)(M * ldc) * sizeof *C),
                   *C1 = malloc((size_t)(M * N) * sizeof *C);
            ck_assert(A && A1 && B && B1 && C && C1);
            for (int64_t e = 0; e < arows * lda; e++) A[e] = 2 * qkv_rng_uniform(&rng) - 1;
            for (int64_t e = 0; e < K * ldb; e++) B[e] = 2 * qkv_rng_uniform(&rng) - 1;
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < ldc; j++)
                    C[i * ldc + j] = j >= N ? SENTINEL : 2 * qkv_rng_uniform(&rng) - 1;
            for (int64_t r = 0; r < arows; r++)
                memcpy(A1 + r * (ta ? M : K), A + r * lda, (size_t)(ta ? M : K) * sizeof *A);
            gemm_pack_f64(B1, false, N, K, B, ldb);
            for (int64_t i = 0; i < M; i++) memcpy(C1 + i * N, C + i * ldc, (size_t)N * sizeof *C);
            gemm1_packed_f64(ta, M, N, K, A, lda, B, ldb, C, ldc, acc);
            gemm1_packed_f64(ta, M, N, K, A1, ta ? M : K, B1, N, C1, N, acc);
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < ldc; j++)
                    REQUIRE(j < N ? memcmp(&C[i * ldc + j], &C1[i * N + j], sizeof *C) == 0
                                  : C[i * ldc + j] == SENTINEL,
                            "gemm1 f64 strided ta=%d M=%lld N=%lld K=%lld acc=%d: C[%lld][%lld] %s",
                            ta, (long long)M, (long long)N, (long long)K, acc, (long long)i,
                            (long long)j, j < N ? "differs from the compact product's"
                                                : "(a gap) was written");
            free(A), free(A1), free(B), free(B1), free(C), free(C1);
        }
}
END_TEST

/* Whether a product reads op(B) in place or packs it never shows in the bits: each element
 * is the same chain of fused multiply-adds (isa.h). B of 128 and 256 columns (rows 512 and
 * 1024 bytes apart: packed, unless C has few rows, L1 many ways and B starts on a cache line;
 * 300 rows, or B 16 bytes past a line, are packed on every CPU) against the same product over
 * strips of 64 and 32 columns (rows 256 and 128 bytes apart: read in place), over several row
 * blocks and depth blocks, stored and accumulated. */
START_TEST(test_gemm_packing_bits) {
    qkv_rng rng = qkv_rng_seed(5);
    static const int64_t shapes[][5] = {{300, 128, 300, 64, 0}, {100, 128, 300, 64, 0},
                                        {100, 128, 300, 64, 4}, {97, 256, 40, 32, 0},
                                        {6, 128, 17, 64, 0}}; /* M, N, K, strip, B's offset */
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int acc = 0; acc < 2; acc++) {
                int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], W = shapes[s][3];
                float *A = fvec((size_t)(M * K)), *b_alloc = fvec((size_t)(K * N + shapes[s][4])),
                      *B = b_alloc + shapes[s][4], *C = fvec((size_t)(M * N)),
                      *strip_b = fvec((size_t)(K * W)), *strip_c = fvec((size_t)(M * W));
                fill_uniform(A, (size_t)(M * K), &rng);
                fill_uniform(B, (size_t)(K * N), &rng);
                fill_uniform(C, (size_t)(M * N), &rng);
                float *whole = fvec((size_t)(M * N));
                memcpy(whole, C, (size_t)(M * N) * sizeof *C);
                gemm_f32(ta, false, 1, M, N, K, A, 0, B, 0, whole, 0, acc);
                for (int64_t j0 = 0; j0 < N; j0 += W) {
                    copy_rows(strip_b, W, B + j0, N, K, W);
                    copy_rows(strip_c, W, C + j0, N, M, W);
                    gemm_f32(ta, false, 1, M, W, K, A, 0, strip_b, 0, strip_c, 0, acc);
                    for (int64_t i = 0; i < M; i++)
                        REQUIRE(!memcmp(strip_c + i * W, whole + i * N + j0,
                                        (size_t)W * sizeof *C),
                                "gemm %s ta=%d M=%lld N=%lld K=%lld acc=%d: row %lld, columns "
                                "%lld.. differ from the same columns as a product of their own",
                                kernel_isa_name(), ta, (long long)M, (long long)N, (long long)K,
                                acc, (long long)i, (long long)j0);
                }
                free(A), free(b_alloc), free(C), free(whole), free(strip_b), free(strip_c);
            }
}
END_TEST

/* Every product to the bit of isa.h's contract, written out here in plain C: per block of
 * GEMM_KC along k, a chain of fmaf in k order from 0, added to C (or stored, for the first
 * block when not accumulating). Among the shapes, the narrow weight gradients (op(A) = Aᵀ,
 * N <= 16) that the tiles compute as Cᵀ (sgemm.c, small_swapped): rows 256 bytes apart, and
 * 512 (where AVX2 keeps the small kernel and AVX-512 swaps), depth past GEMM_KC, N short of a
 * vector; and beside them the small kernel's and the tiles' own shapes. */
START_TEST(test_gemm_contract_bits) {
    qkv_rng rng = qkv_rng_seed(8);
    static const int64_t shapes[][3] = {{64, 16, 512}, {128, 16, 300}, {32, 10, 257},
                                        {256, 5, 40},  {96, 16, 64},   {33, 16, 100},
                                        {16, 16, 16},  {33, 40, 65},   {40, 96, 300}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 8; t++) {
            bool ta = t & 1, tb = (t >> 1) & 1, acc = t >> 2;
            int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            float *A = fvec((size_t)(M * K)), *B = fvec((size_t)(K * N)),
                  *C = fvec((size_t)(M * N)), *want = fvec((size_t)(M * N));
            fill_uniform(A, (size_t)(M * K), &rng);
            fill_uniform(B, (size_t)(K * N), &rng);
            fill_uniform(C, (size_t)(M * N), &rng);
            memcpy(want, C, (size_t)(M * N) * sizeof *C);
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++)
                    for (int64_t p0 = 0; p0 < K; p0 += GEMM_KC) {
                        float sum = 0;
                        for (int64_t k = p0; k < K && k < p0 + GEMM_KC; k++)
                            sum = fmaf(ta ? A[k * M + i] : A[i * K + k],
                                       tb ? B[j * K + k] : B[k * N + j], sum);
                        want[i * N + j] = acc || p0 > 0 ? want[i * N + j] + sum : sum;
                    }
            gemm_f32(ta, tb, 1, M, N, K, A, 0, B, 0, C, 0, acc);
            for (int64_t e = 0; e < M * N; e++)
                REQUIRE(!memcmp(&C[e], &want[e], sizeof *C),
                        "gemm %s ta=%d tb=%d M=%lld N=%lld K=%lld acc=%d: C[%lld][%lld] = %.9g, "
                        "the contract gives %.9g",
                        kernel_isa_name(), ta, tb, (long long)M, (long long)N, (long long)K,
                        acc, (long long)(e / N), (long long)(e % N), C[e], want[e]);
            free(A), free(B), free(C), free(want);
        }
}
END_TEST

/* gemm_f64 (the gradient-check matmul) against a long double sum, to 1e-13. */
START_TEST(test_gemm_f64) {
    qkv_rng rng = qkv_rng_seed(5);
    static const int64_t shapes[][3] = {{1, 1, 1}, {5, 17, 33}, {33, 5, 300}, {64, 65, 31}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 8; t++) {
            bool ta = t & 1, tb = (t >> 1) & 1, acc = t >> 2;
            int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], batch = 2;
            int64_t as = M * K + PAD, cs = M * N + PAD; /* B shared */
            double *A = malloc((size_t)(batch * as) * sizeof *A),
                   *B = malloc((size_t)(K * N) * sizeof *B),
                   *C = malloc((size_t)(batch * cs) * sizeof *C),
                   *C0 = malloc((size_t)(batch * cs) * sizeof *C);
            ck_assert(A && B && C && C0);
            for (int64_t e = 0; e < batch * as; e++) A[e] = 2 * qkv_rng_uniform(&rng) - 1;
            for (int64_t e = 0; e < K * N; e++) B[e] = 2 * qkv_rng_uniform(&rng) - 1;
            for (int64_t e = 0; e < batch * cs; e++)
                C[e] = acc ? 2 * qkv_rng_uniform(&rng) - 1 : NAN;
            memcpy(C0, C, (size_t)(batch * cs) * sizeof *C);
            gemm_f64(ta, tb, batch, M, N, K, A, as, B, 0, C, cs, acc);
            for (int64_t b = 0; b < batch; b++)
                for (int64_t i = 0; i < M; i++)
                    for (int64_t j = 0; j < N; j++) {
                        long double ref = acc ? C0[b * cs + i * N + j] : 0, mag = fabsl(ref);
                        for (int64_t k = 0; k < K; k++) {
                            long double x = ta ? A[b * as + k * M + i] : A[b * as + i * K + k];
                            long double y = tb ? B[j * K + k] : B[k * N + j];
                            ref += x * y;
                            mag += fabsl(x * y);
                        }
                        double got = C[b * cs + i * N + j];
                        REQUIRE(fabsl(got - ref) <= 1e-13L * mag + 1e-300L,
                                "gemm_f64 ta=%d tb=%d M=%lld N=%lld K=%lld: %.17g vs %.17Lg", ta,
                                tb, (long long)M, (long long)N, (long long)K, got, ref);
                    }
            free(A);
            free(B);
            free(C);
            free(C0);
        }
}
END_TEST

/* The path in use is the one QKV_SIMD names when this CPU runs it, else the best it runs
 * natively (an emulated path, in a -DQKV_SIMD_EMULATE=ON build, only when named); the paths it
 * runs are those its CPU has, and AVX-512 emulated on any CPU with AVX2 and FMA. */
START_TEST(test_simd_choice) {
    const char *force = getenv("QKV_SIMD"), *name = kernel_isa_name();
    static const char *const best_first[] = {"avx512", "avx2", "neon", "scalar"};
    printf("kernels: %s (QKV_SIMD=%s)\n", name, force ? force : "unset");
    ck_assert(kernel_isa_runs("scalar"));
    ck_assert(!kernel_isa_runs("portable") && !kernel_isa_runs(""));
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    bool fma = __builtin_cpu_supports("fma"), avx2 = fma && __builtin_cpu_supports("avx2");
    ck_assert(kernel_isa_runs("avx2") == avx2);
    ck_assert(kernel_isa_runs("avx512") == (kernel_isa_emulated("avx512")
                                                ? avx2
                                                : fma && __builtin_cpu_supports("avx512f")));
#ifdef QKV_SIMD_EMULATE
    ck_assert(kernel_isa_emulated("avx512"));
#else
    ck_assert(!kernel_isa_emulated("avx512"));
#endif
    ck_assert(!kernel_isa_emulated("avx2") && !kernel_isa_emulated("scalar"));
    ck_assert(!kernel_isa_runs("neon"));
#elif defined(__aarch64__)
    ck_assert(kernel_isa_runs("neon") && !kernel_isa_runs("avx2"));
#endif
    if (force && *force && kernel_isa_runs(force)) {
        ck_assert_str_eq(name, force);
        return;
    }
    size_t best = 0;
    while (!kernel_isa_runs(best_first[best]) || kernel_isa_emulated(best_first[best])) best++;
    ck_assert_str_eq(name, best_first[best]);
}
END_TEST

/* ---- attention: building one case through the public API ---------------------------------- */

typedef enum { M_NONE, M_CAUSAL, M_PADDING, M_BOOL, M_BOOL_BCAST, M_BOOL_2D } mask_kind;

typedef struct {
    int ndim;                     /* 4: (B, H, N, D); 3: (B, N, D); 2: (N, D) */
    int64_t B, H, Nq, Nk, Dk, Dv; /* H = 1 when ndim is 3, B = H = 1 when it is 2 */
    mask_kind mask;
    int32_t lengths[4]; /* M_PADDING */
    double scale;       /* 0: 1/sqrt(Dk) */
} attn_case;

typedef struct {
    qkv_ctx *ctx;
    qkv_tensor *q, *k, *v, *out, *weights;
} attn_run;

static int case_shape(const attn_case *c, int64_t rows, int64_t cols, int64_t shape[4]) {
    int n = 0;
    if (c->ndim >= 4) shape[n++] = c->B;
    if (c->ndim >= 3) shape[n++] = c->ndim == 4 ? c->H : c->B;
    shape[n++] = rows;
    shape[n++] = cols;
    return n;
}

/* The boolean masks: about 70% of keys kept, every 7th query row masked entirely (a fully
 * masked row in every tile of queries), and every 11th row keeping only its last key. */
static uint8_t *make_keep(const attn_case *c, qkv_rng *rng) {
    int64_t n = c->mask == M_BOOL         ? c->B * c->H * c->Nq * c->Nk
                : c->mask == M_BOOL_BCAST ? c->B * c->Nq * c->Nk
                                          : c->Nq * c->Nk;
    uint8_t *keep = malloc((size_t)n);
    ck_assert_ptr_nonnull(keep);
    for (int64_t r = 0; r < n / c->Nk; r++)
        for (int64_t j = 0; j < c->Nk; j++)
            keep[r * c->Nk + j] = r % 7 == 3    ? 0
                                  : r % 11 == 5 ? j == c->Nk - 1
                                                : qkv_rng_uniform(rng) < 0.7;
    return keep;
}

/* Whether query i of head (b, h) sees key j: the mask's meaning, computed independently. */
static bool kept(const attn_case *c, const uint8_t *keep, int64_t b, int64_t h, int64_t i,
                 int64_t j) {
    switch (c->mask) {
    case M_NONE: return true;
    case M_CAUSAL: return j <= i + (c->Nk - c->Nq);
    case M_PADDING: return j < c->lengths[b];
    case M_BOOL: return keep[((b * c->H + h) * c->Nq + i) * c->Nk + j];
    case M_BOOL_BCAST: return keep[(b * c->Nq + i) * c->Nk + j];
    case M_BOOL_2D: return keep[i * c->Nk + j];
    }
    return true;
}

/* q, k, v ~ U(-1, 1) from `seed` (the same values for the fused and the unfused run), then
 * out = attention(q, k, v, mask) and backward from Σ w ⊙ out with w ~ U(-1, 1). */
static attn_run attn_build(const attn_case *c, qkv_dtype dt, uint64_t seed, bool fused,
                           const uint8_t *keep) {
    attn_run r = {.ctx = qkv_ctx_new(0)};
    ck_assert_ptr_nonnull(r.ctx);
    qkv_rng rng = qkv_rng_seed(seed);
    int64_t sq[4], sk[4], sv[4];
    int n = case_shape(c, c->Nq, c->Dk, sq);
    case_shape(c, c->Nk, c->Dk, sk);
    case_shape(c, c->Nk, c->Dv, sv);
    r.q = qkv_param(r.ctx, qkv_rand(r.ctx, dt, n, sq, -1, 1, &rng));
    r.k = qkv_param(r.ctx, qkv_rand(r.ctx, dt, n, sk, -1, 1, &rng));
    r.v = qkv_param(r.ctx, qkv_rand(r.ctx, dt, n, sv, -1, 1, &rng));
    qkv_tensor *mask = NULL;
    int64_t ms[4];
    switch (c->mask) {
    case M_NONE: break;
    case M_CAUSAL: mask = qkv_mask_causal(r.ctx, dt, c->Nq, c->Nk); break;
    case M_PADDING: mask = qkv_mask_padding(r.ctx, dt, c->B, c->Nk, c->lengths); break;
    case M_BOOL:
        mask = qkv_mask_from_bool(r.ctx, dt, case_shape(c, c->Nq, c->Nk, ms), ms, keep);
        break;
    case M_BOOL_BCAST:
        mask = qkv_mask_from_bool(r.ctx, dt, 4, (int64_t[]){c->B, 1, c->Nq, c->Nk}, keep);
        break;
    case M_BOOL_2D: mask = qkv_mask_from_bool(r.ctx, dt, 2, (int64_t[]){c->Nq, c->Nk}, keep); break;
    }
    r.out = fused ? qkv_attention_fused(r.ctx, r.q, r.k, r.v, mask, c->scale)
                  : qkv_attention_unfused(r.ctx, r.q, r.k, r.v, mask, c->scale, &r.weights);
    ck_assert_int_eq(r.out->op, fused ? QKV_OP_ATTENTION : QKV_OP_MATMUL);
    qkv_tensor *w = qkv_rand(r.ctx, dt, r.out->ndim, r.out->shape, -1, 1, &rng);
    qkv_backward(qkv_sum(r.ctx, qkv_mul(r.ctx, r.out, w)));
    return r;
}

/* ---- fused vs unfused --------------------------------------------------------------------- */

/* The error of one entry, fused a against unfused b: |a − b| / max(|a|, |b|, floor), where the
 * floor is the largest magnitude in either tensor (its ∞-norm). Entries of typical size are
 * judged relative to themselves; an entry that a sum cancelled to nearly zero is judged by its
 * absolute error relative to the tensor's scale. Without the floor such entries differ by up
 * to ~1e-2 relative in f32, and fused and unfused each differ that much from an f64 result on
 * the same inputs: it would measure f32 rounding, not the kernels. */
static double max_rel_diff(const qkv_tensor *a, const qkv_tensor *b, bool grad, const char *what,
                           const char *label) {
    ck_assert_int_eq(a->size, b->size);
    double floor_ = 0, worst = 0;
    for (int64_t i = 0; i < a->size; i++) {
        double x = grad ? qkv_grad_get(a, i) : qkv_get(a, i);
        double y = grad ? qkv_grad_get(b, i) : qkv_get(b, i);
        REQUIRE(isfinite(x) && isfinite(y), "%s %s[%lld]: fused %g, unfused %g", label, what,
                (long long)i, x, y);
        floor_ = fmax(floor_, fmax(fabs(x), fabs(y)));
    }
    if (floor_ == 0) return 0; /* both exactly zero */
    for (int64_t i = 0; i < a->size; i++) {
        double x = grad ? qkv_grad_get(a, i) : qkv_get(a, i);
        double y = grad ? qkv_grad_get(b, i) : qkv_get(b, i);
        double rel = fabs(x - y) / fmax(fmax(fabs(x), fabs(y)), floor_);
        if (rel > worst) worst = rel;
    }
    return worst;
}

static double fused_worst[2]; /* f32, f64 */

/* Fused against unfused on one case: outputs and the gradients of q, k and v agree to 1e-5
 * (f32) or 1e-12 (f64); rows of queries that see no key are exactly 0 in both, and so are
 * the k and v gradients of keys that no query sees. */
static void compare_case(const attn_case *c, uint64_t seed) {
    static const qkv_dtype dts[2] = {QKV_F32, QKV_F64};
    static const double tol[2] = {1e-5, 1e-12};
    char label[160];
    static const char *const mask_names[] = {"none", "causal",           "padding",
                                             "bool", "bool (B,1,Nq,Nk)", "bool (Nq,Nk)"};
    snprintf(label, sizeof label,
             "%d-D B=%lld H=%lld Nq=%lld Nk=%lld Dk=%lld Dv=%lld mask %s scale %g", c->ndim,
             (long long)c->B, (long long)c->H, (long long)c->Nq, (long long)c->Nk, (long long)c->Dk,
             (long long)c->Dv, mask_names[c->mask],
             c->scale > 0 ? c->scale : 1 / sqrt((double)c->Dk));
    qkv_rng krng = qkv_rng_seed(seed ^ 0x5eed);
    uint8_t *keep = c->mask >= M_BOOL ? make_keep(c, &krng) : NULL;
    for (int d = 0; d < 2; d++) {
        attn_run f = attn_build(c, dts[d], seed, true, keep);
        attn_run u = attn_build(c, dts[d], seed, false, keep);
        double e[4] = {max_rel_diff(f.out, u.out, false, "out", label),
                       max_rel_diff(f.q, u.q, true, "dq", label),
                       max_rel_diff(f.k, u.k, true, "dk", label),
                       max_rel_diff(f.v, u.v, true, "dv", label)};
        printf("fused vs unfused %s %s: out %.3g dq %.3g dk %.3g dv %.3g\n", qkv_dtype_name(dts[d]),
               label, e[0], e[1], e[2], e[3]);
        for (int t = 0; t < 4; t++) {
            ck_assert_msg(e[t] <= tol[d], "%s %s: %s differs by %.3g relative (tol %g)",
                          qkv_dtype_name(dts[d]), label,
                          (const char *[]){"out", "dq", "dk", "dv"}[t], e[t], tol[d]);
            if (e[t] > fused_worst[d]) fused_worst[d] = e[t];
        }
        /* exact zeros where nothing is seen */
        int64_t masked_rows = 0;
        for (int64_t b = 0; b < c->B; b++)
            for (int64_t h = 0; h < c->H; h++) {
                int64_t g = b * c->H + h;
                for (int64_t i = 0; i < c->Nq; i++) {
                    bool any = false;
                    for (int64_t j = 0; j < c->Nk && !any; j++) any = kept(c, keep, b, h, i, j);
                    if (any) continue;
                    masked_rows++;
                    for (int64_t x = 0; x < c->Dv; x++) {
                        int64_t at = (g * c->Nq + i) * c->Dv + x;
                        REQUIRE(qkv_get(f.out, at) == 0 && qkv_get(u.out, at) == 0,
                                "%s: masked row %lld of head %lld: out %g / %g", label,
                                (long long)i, (long long)g, qkv_get(f.out, at), qkv_get(u.out, at));
                    }
                    for (int64_t x = 0; x < c->Dk; x++) {
                        int64_t at = (g * c->Nq + i) * c->Dk + x;
                        REQUIRE(qkv_grad_get(f.q, at) == 0 && qkv_grad_get(u.q, at) == 0,
                                "%s: masked row %lld: dq %g / %g", label, (long long)i,
                                qkv_grad_get(f.q, at), qkv_grad_get(u.q, at));
                    }
                }
                for (int64_t j = 0; j < c->Nk; j++) {
                    bool any = false;
                    for (int64_t i = 0; i < c->Nq && !any; i++) any = kept(c, keep, b, h, i, j);
                    if (any) continue;
                    for (int64_t x = 0; x < c->Dk; x++) {
                        int64_t at = (g * c->Nk + j) * c->Dk + x;
                        REQUIRE(qkv_grad_get(f.k, at) == 0 && qkv_grad_get(u.k, at) == 0,
                                "%s: key %lld of head %lld is seen by no query: dk %g / %g", label,
                                (long long)j, (long long)g, qkv_grad_get(f.k, at),
                                qkv_grad_get(u.k, at));
                    }
                    for (int64_t x = 0; x < c->Dv; x++) {
                        int64_t at = (g * c->Nk + j) * c->Dv + x;
                        REQUIRE(qkv_grad_get(f.v, at) == 0 && qkv_grad_get(u.v, at) == 0,
                                "%s: key %lld of head %lld is seen by no query: dv %g / %g", label,
                                (long long)j, (long long)g, qkv_grad_get(f.v, at),
                                qkv_grad_get(u.v, at));
                    }
                }
            }
        /* the cases that promise fully masked rows have them */
        if (c->mask == M_BOOL || c->mask == M_BOOL_BCAST || c->mask == M_BOOL_2D ||
            (c->mask == M_PADDING && c->lengths[0] == 0))
            ck_assert_int_gt(masked_rows, 0);
        qkv_ctx_free(f.ctx);
        qkv_ctx_free(u.ctx);
    }
    free(keep);
}

START_TEST(test_fused_vs_unfused) {
    static const attn_case cases[] = {
        /* cross attention, Dk != Dv, 3 tiles of queries and 4 of keys, few heads (key groups) */
        {4, 2, 3, 130, 200, 24, 40, M_NONE, {0}, 0},
        {4, 2, 3, 130, 200, 24, 40, M_BOOL, {0}, 0},
        {4, 2, 3, 130, 200, 24, 40, M_CAUSAL, {0}, 0},
        /* self attention, 8 heads (head split), causal */
        {4, 2, 4, 130, 130, 32, 32, M_CAUSAL, {0}, 0},
        {4, 2, 4, 130, 130, 32, 16, M_BOOL_BCAST, {0}, 0},
        /* padding with a zero length: batch 0 sees nothing */
        {4, 3, 2, 70, 150, 16, 8, M_PADDING, {0, 77, 150}, 0},
        {4, 3, 4, 65, 65, 16, 16, M_PADDING, {0, 1, 64}, 0},
        /* 3-D and 2-D inputs */
        {3, 3, 1, 100, 64, 8, 24, M_BOOL_2D, {0}, 0},
        {3, 2, 1, 1, 200, 5, 3, M_NONE, {0}, 0},
        {2, 1, 1, 200, 1, 4, 4, M_CAUSAL, {0}, 0},
        {2, 1, 1, 5, 3, 7, 2, M_BOOL, {0}, 0},
        {4, 1, 1, 257, 129, 64, 64, M_CAUSAL, {0}, 0},
        /* sharp softmax: scores up to ±24 and ±72, the running max changing between tiles */
        {4, 2, 2, 130, 200, 24, 40, M_CAUSAL, {0}, 1.0},
        {4, 2, 2, 130, 200, 24, 40, M_BOOL, {0}, 3.0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) compare_case(&cases[i], 100 + i);
    printf("fused vs unfused, worst relative difference (floor: the tensor's largest magnitude): "
           "f32 %.3g, f64 %.3g\n",
           fused_worst[0], fused_worst[1]);
}
END_TEST

/* ---- the fused attention over few keys: the tiles' bits ------------------------------------ */

typedef struct {
    bool heads;                   /* the heads form (q (B, N, H·D)), else (B, H, N, D) */
    int64_t B, H, Nq, Nk, Dk, Dv;
    mask_kind mask;               /* M_NONE, M_CAUSAL or M_BOOL */
    const char *probs;            /* "keep" or "recompute" */
    bool shared_kv;               /* k and v one tensor: their gradients are added, not stored */
    double range;                 /* q, k, v ~ U(-range, range): 2, or 8 for a sharp softmax */
} few_case;

/* One forward and backward pass of c in f32, from the same inputs whichever way it runs. */
static attn_run few_run(const few_case *c, const uint8_t *keep) {
    attn_run r = {.ctx = qkv_ctx_new(0)};
    ck_assert_ptr_nonnull(r.ctx);
    qkv_rng rng = qkv_rng_seed(41);
    double x = c->range;
    int64_t sq[4] = {c->B, c->H, c->Nq, c->Dk}, sk[4] = {c->B, c->H, c->Nk, c->Dk},
            sv[4] = {c->B, c->H, c->Nk, c->Dv};
    if (c->heads) {
        int64_t hq[3] = {c->B, c->Nq, c->H * c->Dk}, hk[3] = {c->B, c->Nk, c->H * c->Dk},
                hv[3] = {c->B, c->Nk, c->H * c->Dv};
        r.q = qkv_param(r.ctx, qkv_rand(r.ctx, QKV_F32, 3, hq, -x, x, &rng));
        r.k = qkv_param(r.ctx, qkv_rand(r.ctx, QKV_F32, 3, hk, -x, x, &rng));
        r.v = c->shared_kv ? r.k : qkv_param(r.ctx, qkv_rand(r.ctx, QKV_F32, 3, hv, -x, x, &rng));
    } else {
        r.q = qkv_param(r.ctx, qkv_rand(r.ctx, QKV_F32, 4, sq, -x, x, &rng));
        r.k = qkv_param(r.ctx, qkv_rand(r.ctx, QKV_F32, 4, sk, -x, x, &rng));
        r.v = c->shared_kv ? r.k : qkv_param(r.ctx, qkv_rand(r.ctx, QKV_F32, 4, sv, -x, x, &rng));
    }
    qkv_tensor *mask = NULL;
    if (c->mask == M_CAUSAL) mask = qkv_mask_causal(r.ctx, QKV_F32, c->Nq, c->Nk);
    if (c->mask == M_BOOL)
        mask = qkv_mask_from_bool(r.ctx, QKV_F32, 4, (int64_t[]){c->B, c->H, c->Nq, c->Nk}, keep);
    ck_assert(qkv_set_attention_probs(c->probs));
    r.out = c->heads ? qkv_attention_heads(r.ctx, r.q, r.k, r.v, mask, (int)c->H, 0)
                     : qkv_attention_fused(r.ctx, r.q, r.k, r.v, mask, 0);
    qkv_tensor *w = qkv_rand(r.ctx, QKV_F32, r.out->ndim, r.out->shape, -1, 1, &rng);
    qkv_backward(qkv_sum(r.ctx, qkv_mul(r.ctx, r.out, w)));
    ck_assert(qkv_set_attention_probs("auto"));
    return r;
}

static void same_bytes(const void *a, const void *b, int64_t n, const char *what, int i) {
    REQUIRE(!memcmp(a, b, (size_t)n * sizeof(float)), "case %d: %s differs from the tiles'", i,
            what);
}

/* Heads of few keys (Nk <= ATTENTION_FEW_KEYS, Nq <= ATTENTION_BR) run head by head with their
 * products written out (attention_kernel_f32.c); every output and gradient has the tiles'
 * bits: both layouts, masks with fully masked rows, P kept and recomputed, gradients stored
 * and added, a depth past GEMM_KC, one key, and 64 queries. */
START_TEST(test_attention_few_keys_bits) {
    static const few_case cases[] = {
        {true, 40, 4, 1, 3, 32, 32, M_NONE, "keep", false, 2}, /* grok's: one query, 3 keys */
        {true, 40, 4, 1, 3, 32, 32, M_NONE, "recompute", false, 2},
        {true, 200, 4, 1, 3, 32, 32, M_NONE, "recompute", false, 8}, /* saturated rows */
        {true, 6, 2, 16, 16, 8, 24, M_CAUSAL, "recompute", false, 2},
        {true, 6, 2, 16, 16, 8, 24, M_CAUSAL, "keep", false, 8},
        {false, 3, 3, 64, 16, 16, 16, M_BOOL, "keep", false, 2},
        {false, 3, 3, 5, 7, 300, 20, M_BOOL, "recompute", false, 2},
        {true, 4, 2, 9, 1, 12, 4, M_NONE, "keep", false, 2},
        {true, 5, 4, 3, 5, 16, 16, M_CAUSAL, "recompute", true, 2},
    };
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        const few_case *c = &cases[i];
        attention_dims d = {.Nq = c->Nq, .Nk = c->Nk};
        ck_assert(attention_few_keys(&d, true));
        uint8_t *keep = NULL;
        if (c->mask == M_BOOL) {
            attn_case shape = {4, c->B, c->H, c->Nq, c->Nk, c->Dk, c->Dv, M_BOOL, {0}, 0};
            qkv_rng krng = qkv_rng_seed(7);
            keep = make_keep(&shape, &krng);
        }
        attn_run few = few_run(c, keep);
        attention_few_keys_off = true;
        attn_run tiles = few_run(c, keep);
        attention_few_keys_off = false;
        same_bytes(few.out->data, tiles.out->data, few.out->size, "the output", i);
        same_bytes(few.q->grad, tiles.q->grad, few.q->size, "dq", i);
        same_bytes(few.k->grad, tiles.k->grad, few.k->size, "dk", i);
        same_bytes(few.v->grad, tiles.v->grad, few.v->size, "dv", i);
        qkv_ctx_free(few.ctx);
        qkv_ctx_free(tiles.ctx);
        free(keep);
    }
}
END_TEST

/* ---- determinism across thread counts ----------------------------------------------------- */

#ifdef QKV_HAVE_OPENMP
/* gemm_f32 gives the bits of one thread on 2, 3, 5, 7, 11 and 16: on several threads a
 * product with one B is cut into equal runs of tile-row × sliver units, which end inside a
 * tile row, cross from one batch to the next and split the columns of a C of few rows (the
 * weight gradients). */
START_TEST(test_gemm_deterministic) {
    static const struct {
        bool ta, tb;
        int64_t batch, M, N, K;
        bool shared, acc;
    } cases[] = {
        {false, false, 1, 512, 512, 64, true, false}, /* rows split in MC blocks */
        {true, true, 1, 512, 512, 64, true, true},
        {false, true, 32, 256, 256, 32, false, false}, /* one batch per task */
        {true, false, 32, 256, 256, 32, false, true},
        {false, false, 8, 200, 300, 40, true, false}, /* shared B, batch × row blocks */
        {false, true, 64, 64, 16, 128, false, true},  /* the small path, batched */
        {false, false, 1, 300, 200, 300, true, true}, /* two KC depth blocks */
        {true, false, 1, 128, 128, 1024, true, false}, /* weight gradients: few rows of C */
        {true, false, 1, 64, 64, 2048, true, true},
        {true, false, 1, 50, 70, 2400, true, false}, /* edges of rows and columns */
        {false, true, 4, 37, 100, 600, true, true},  /* runs across batches, B packed */
        {false, false, 3, 45, 96, 640, true, false}, /* B read in place */
    };
    static const int threads[] = {1, 2, 3, 5, 7, 11, 16};
    enum { RUNS = sizeof threads / sizeof threads[0] };
    int saved = omp_get_max_threads();
    qkv_rng rng = qkv_rng_seed(7);
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        int64_t batch = cases[t].batch, M = cases[t].M, N = cases[t].N, K = cases[t].K;
        ck_assert(2.0 * (double)(batch * M * N * K) > 8e6); /* parallel, not a single thread */
        int64_t bs = cases[t].shared ? 0 : K * N;
        size_t na = (size_t)(batch * M * K), nb = (size_t)(cases[t].shared ? K * N : batch * K * N),
               nc = (size_t)(batch * M * N);
        float *A = fvec(na), *B = fvec(nb), *C0 = fvec(nc), *C[RUNS];
        fill_uniform(A, na, &rng);
        fill_uniform(B, nb, &rng);
        fill_uniform(C0, nc, &rng);
        for (int th = 0; th < RUNS; th++) {
            C[th] = fvec(nc);
            omp_set_num_threads(threads[th]);
            ck_assert_int_eq(kernel_threads(), threads[th]);
            memcpy(C[th], C0, nc * sizeof *C0);
            gemm_f32(cases[t].ta, cases[t].tb, batch, M, N, K, A, M * K, B, bs, C[th], M * N,
                     cases[t].acc);
            ck_assert_msg(!memcmp(C[0], C[th], nc * sizeof *C0),
                          "gemm %lldx%lldx%lldx%lld: 1 and %d threads give different bits",
                          (long long)batch, (long long)M, (long long)N, (long long)K,
                          threads[th]);
        }
        free(A);
        free(B);
        free(C0);
        for (int th = 0; th < RUNS; th++) free(C[th]);
    }
    omp_set_num_threads(saved);
}
END_TEST

static bool same_bits(const qkv_tensor *a, const qkv_tensor *b, bool grad) {
    size_t n = (size_t)a->size * qkv_dtype_size(a->dtype);
    return !memcmp(grad ? a->grad : a->data, grad ? b->grad : b->data, n);
}

/* kernel_team: one thread per share of work, two from one share up, at most every thread,
 * and one inside a parallel region. KERNEL_FOR_STATIC runs its iterations on that many
 * threads (never more than it has iterations), each once, in a region of every thread. */
static void record_thread(int64_t i, int *ran, int *runs, int *region) {
    ran[omp_get_thread_num()] = 1;
#pragma omp atomic update
    runs[i]++;
#pragma omp atomic write
    *region = omp_get_num_threads();
}

START_TEST(test_kernel_team) {
    int saved = omp_get_max_threads();
    omp_set_num_threads(16);
    ck_assert_int_eq(kernel_team(100, 100), 1);
    ck_assert_int_eq(kernel_team(101, 100), 2);
    ck_assert_int_eq(kernel_team(299, 100), 2);
    ck_assert_int_eq(kernel_team(500, 100), 5);
    ck_assert_int_eq(kernel_team(1e9, 100), 16);
    ck_assert(!kernel_parallel(100, 100) && kernel_parallel(101, 100));
    int inside = 0, sizes[3] = {0};
#pragma omp parallel num_threads(2)
    {
#pragma omp single
        inside = kernel_team(1e9, 100);
    }
    ck_assert_int_eq(inside, 1);
    const double work[] = {500, 1e9, 1e9};
    const int64_t n[] = {100, 100, 3};
    for (int c = 0; c < 3; c++) { /* the threads of each loop: 5, every thread, and 3 */
        int ran[16] = {0}, runs[100] = {0}, region = 0;
        KERNEL_FOR_STATIC(kernel_team(work[c], 100), i, n[c],
                          record_thread(i, ran, runs, &region););
        for (int th = 0; th < 16; th++) sizes[c] += ran[th];
        for (int64_t i = 0; i < n[c]; i++) ck_assert_int_eq(runs[i], 1);
        ck_assert_int_eq(region, 16);
    }
    ck_assert_int_eq(sizes[0], 5);
    ck_assert_int_eq(sizes[1], 16);
    ck_assert_int_eq(sizes[2], 3);
    omp_set_num_threads(1);
    ck_assert_int_eq(kernel_team(1e9, 100), 1);
    omp_set_num_threads(saved);
}
END_TEST

/* Fused attention forward and backward: the same bits on 1, 2, 8 and 16 threads, in f32 and
 * f64, on one head of 1024 (the backward by query groups, and from 8 threads on in two passes,
 * queries then keys), two heads of 320 (five query blocks in four groups, one of them empty;
 * two passes on 16) and 32 heads of 256 (the head split). */
START_TEST(test_attention_deterministic) {
    static const attn_case cases[] = {{4, 1, 1, 1024, 1024, 64, 64, M_CAUSAL, {0}, 0},
                                      {4, 1, 2, 320, 320, 32, 32, M_NONE, {0}, 0},
                                      {4, 8, 4, 256, 256, 32, 32, M_CAUSAL, {0}, 0}};
    static const int threads[] = {1, 2, 8, 16};
    enum { RUNS = sizeof threads / sizeof threads[0] };
    int saved = omp_get_max_threads();
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        for (int d = 0; d < 2; d++) {
            qkv_dtype dt = d ? QKV_F64 : QKV_F32;
            attn_run r[RUNS];
            for (int th = 0; th < RUNS; th++) {
                omp_set_num_threads(threads[th]);
                r[th] = attn_build(&cases[t], dt, 31 + t, true, NULL);
            }
            for (int th = 1; th < RUNS; th++) {
                const char *dn = qkv_dtype_name(dt);
                int n = threads[th];
                ck_assert_msg(same_bits(r[0].out, r[th].out, false), "case %zu %s, %d threads: "
                              "output differs", t, dn, n);
                ck_assert_msg(same_bits(r[0].q, r[th].q, true), "case %zu %s, %d threads: dq "
                              "differs", t, dn, n);
                ck_assert_msg(same_bits(r[0].k, r[th].k, true), "case %zu %s, %d threads: dk "
                              "differs", t, dn, n);
                ck_assert_msg(same_bits(r[0].v, r[th].v, true), "case %zu %s, %d threads: dv "
                              "differs", t, dn, n);
            }
            for (int th = 0; th < RUNS; th++) qkv_ctx_free(r[th].ctx);
        }
    }
    omp_set_num_threads(saved);
}
END_TEST
#endif

/* ---- no allocation once warm ---------------------------------------------------------------- */

/* A training step with multi-head fused attention: projections, heads split by reshape and
 * transpose, causal fused attention, output projection, MSE, backward, SGD. After two steps
 * neither context calls malloc again. */
START_TEST(test_no_alloc_when_warm) {
    for (int d = 0; d < 2; d++) {
        qkv_dtype dt = d ? QKV_F64 : QKV_F32;
        const int64_t B = 4, T = 80, C = 32, H = 4, D = C / H;
        qkv_ctx *params = qkv_ctx_new(0), *step = qkv_ctx_new(0);
        ck_assert(params && step);
        qkv_rng rng = qkv_rng_seed(11);
        qkv_tensor *w[4];
        for (int i = 0; i < 4; i++)
            w[i] = qkv_param(params, qkv_randn(params, dt, 2, (int64_t[]){C, C}, 0.2, &rng));
        uint64_t warm_step = 0, warm_params = 0;
        for (int it = 0; it < 10; it++) {
            qkv_ctx_reset(step);
            qkv_tensor *x = qkv_randn(step, dt, 3, (int64_t[]){B, T, C}, 1.0, &rng);
            qkv_tensor *target = qkv_randn(step, dt, 3, (int64_t[]){B, T, C}, 1.0, &rng);
            qkv_tensor *h[3];
            for (int i = 0; i < 3; i++) {
                qkv_tensor *p =
                    qkv_reshape(step, qkv_matmul(step, x, w[i]), 4, (int64_t[]){B, T, H, D});
                h[i] = qkv_transpose(step, p, 1, 2); /* (B, H, T, D) */
            }
            qkv_tensor *mask = qkv_mask_causal(step, dt, T, T);
            qkv_tensor *a = qkv_attention_fused(step, h[0], h[1], h[2], mask, 0.0);
            a = qkv_reshape(step, qkv_transpose(step, a, 1, 2), 3, (int64_t[]){B, T, C});
            qkv_tensor *loss = qkv_mse(step, qkv_matmul(step, a, w[3]), target);
            qkv_zero_grad(params);
            qkv_backward(loss);
            qkv_sgd_step(params, 0.01f);
            ck_assert(isfinite(qkv_get(loss, 0)));
            if (it == 1) {
                warm_step = qkv_ctx_mallocs(step);
                warm_params = qkv_ctx_mallocs(params);
            } else if (it > 1) {
                ck_assert_msg(qkv_ctx_mallocs(step) == warm_step,
                              "%s step %d: the step context called malloc (%llu, warm %llu)",
                              qkv_dtype_name(dt), it, (unsigned long long)qkv_ctx_mallocs(step),
                              (unsigned long long)warm_step);
                ck_assert_uint_eq(qkv_ctx_mallocs(params), warm_params);
            }
        }
        qkv_ctx_free(step);
        qkv_ctx_free(params);
    }
}
END_TEST

/* ---- the fused kernel's exp, through softmax weights ---------------------------------------- */

/* With K = I (Dk = Nk) and scale 1 the scores are Q itself, exactly; with V = I (Dv = Nk) the
 * output is the softmax weights. Scores are multiples of 1/64 in [-80, 80], so that every
 * difference s − max is exact and only exp and the sums can differ. The fused weights must
 * match the unfused ones and a double-precision softmax to 1e-6 relative (f32; 1e-12 in f64),
 * with a floor of 1e-30: weights below e^-69 (where f32 loses digits to underflow, and where
 * the fast exp flushes e^-87 and below to 0) count by their absolute error only. */
START_TEST(test_fast_exp_softmax) {
    enum { NQ = 100, NK = 80 }; /* two tiles of queries and of keys, the last ones partial */
    static double score[NQ][NK];
    static uint8_t keep[NQ][NK];
    qkv_rng rng = qkv_rng_seed(13);
    for (int i = 0; i < NQ; i++)
        for (int j = 0; j < NK; j++) {
            double s;
            if (i < 44)
                s = (2 * qkv_rng_uniform(&rng) - 1) * 80; /* large magnitudes */
            else if (i < 50) /* one weight near 1, the others e^-1 .. e^-65 sweeping exp's reduced
                              * argument, so that its error is not normalised away */
                s = j == 7 * (i - 44) ? 0 : -(double[]){1, 10, 25, 40, 55, 64}[i - 44] - j / 64.0;
            else if (i < 60)
                s = 80 - (150.0 + i - 50) * j / (NK - 1); /* differences 0..159 */
            else if (i < 64)
                s = (i & 1 ? 80 : -80) - (j == i % NK ? 0 : 0.5); /* near ties at ±80 */
            else if (i < 70)
                s = j == (i - 64) * 13 ? 0 : -60 - 0.4 * j; /* s - max near -87 */
            else if (i < 80)
                s = 2 * qkv_rng_uniform(&rng) - 1; /* typical */
            else
                s = (2 * qkv_rng_uniform(&rng) - 1) * 80;
            score[i][j] = round(s * 64) / 64;
            keep[i][j] = i < 80    ? 1
                         : i == 80 ? 0                            /* every key masked */
                         : i == 81 ? j >= 64                      /* the first key tile masked */
                         : i == 82 ? j == NK - 1                  /* one key, in the last tile */
                         : i == 83 ? j < 64                       /* the last key tile masked */
                                   : qkv_rng_uniform(&rng) < 0.5; /* -inf scattered */
        }
    for (int j = 0; j < NK; j++) score[83][j] = j < 64 ? -80 + j : 80; /* max in a masked tile */
    score[84][70] = 80;                                                /* max in the last tile */
    keep[84][70] = 1;

    for (int d = 0; d < 2; d++) {
        qkv_dtype dt = d ? QKV_F64 : QKV_F32;
        double tol = d ? 1e-12 : 1e-6, worst_unfused = 0, worst_exact = 0;
        qkv_ctx *ctx = qkv_ctx_new(0);
        qkv_tensor *q = qkv_new(ctx, dt, 2, (int64_t[]){NQ, NK}),
                   *eye = qkv_zeros(ctx, dt, 2, (int64_t[]){NK, NK});
        for (int i = 0; i < NQ; i++)
            for (int j = 0; j < NK; j++) qkv_set(q, i * NK + j, score[i][j]);
        for (int j = 0; j < NK; j++) qkv_set(eye, j * NK + j, 1);
        qkv_tensor *mask = qkv_mask_from_bool(ctx, dt, 2, (int64_t[]){NQ, NK}, &keep[0][0]);
        qkv_tensor *weights = NULL;
        qkv_tensor *fused = qkv_attention_fused(ctx, q, eye, eye, mask, 1.0);
        qkv_attention_unfused(ctx, q, eye, eye, mask, 1.0, &weights);
        for (int i = 0; i < NQ; i++) {
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j < NK; j++)
                if (keep[i][j]) mx = fmax(mx, score[i][j]);
            for (int j = 0; j < NK; j++)
                if (keep[i][j]) sum += exp(score[i][j] - mx);
            for (int j = 0; j < NK; j++) {
                double exact = keep[i][j] ? exp(score[i][j] - mx) / sum : 0;
                double f = qkv_get(fused, i * NK + j), u = qkv_get(weights, i * NK + j);
                REQUIRE(isfinite(f) && f >= 0, "%s weight (%d, %d) = %g", qkv_dtype_name(dt), i, j,
                        f);
                if (i == 80) REQUIRE(f == 0 && u == 0, "fully masked row: %g, %g", f, u);
                if (!keep[i][j]) REQUIRE(f == 0, "masked weight (%d, %d) = %g", i, j, f);
                double ru = fabs(f - u) / fmax(fmax(fabs(f), fabs(u)), 1e-30);
                double re = fabs(f - exact) / fmax(fmax(fabs(f), exact), 1e-30);
                REQUIRE(ru <= tol && re <= tol,
                        "%s weight (%d, %d), score %.6g (max %.6g): fused %.9g, unfused "
                        "%.9g, exact %.9g",
                        qkv_dtype_name(dt), i, j, score[i][j], mx, f, u, exact);
                worst_unfused = fmax(worst_unfused, ru);
                worst_exact = fmax(worst_exact, re);
            }
        }
        printf("fast exp %s: softmax weights, worst relative difference %.3g vs unfused, %.3g vs "
               "exact\n",
               qkv_dtype_name(dt), worst_unfused, worst_exact);
        qkv_ctx_free(ctx);
    }
}
END_TEST

/* ---- the unfused softmax kernel: the reference the fused kernel is held to --------------- */

/* softmax_forward against a double softmax of the same inputs, on long rows (the long workload
 * has 2048 keys). The reference rounds x − max to the kernel's type first, as the kernel must:
 * what is left is exp, the row sum and the normalisation, within 1e-6 relative in f32 (a float
 * running sum alone loses up to 2e-6 at n = 4096) and 1e-13 in f64. */
START_TEST(test_softmax_kernel_accuracy) {
    static const int64_t ns[] = {64, 1000, 4096};
    qkv_rng rng = qkv_rng_seed(17);
    double worst[2] = {0, 0};
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        int64_t n = ns[t], rows = 8;
        float *x = fvec((size_t)(rows * n)), *y = fvec((size_t)(rows * n));
        double *xd = malloc((size_t)(rows * n) * sizeof *xd),
               *yd = malloc((size_t)(rows * n) * sizeof *yd);
        REQUIRE(xd && yd, "out of memory");
        for (int64_t e = 0; e < rows * n; e++)
            xd[e] = x[e] = (float)(8 * qkv_rng_uniform(&rng) - 4);
        for (int64_t r = 0; r < rows; r += 2)
            x[r * n + r] = xd[r * n + r] = 12; /* a dominant key */
        softmax_forward_f32(y, x, rows, n);
        softmax_forward_f64(yd, xd, rows, n);
        for (int64_t r = 0; r < rows; r++) {
            double mx = -INFINITY, sum32 = 0, sum64 = 0;
            for (int64_t j = 0; j < n; j++) mx = fmax(mx, xd[r * n + j]);
            for (int64_t j = 0; j < n; j++) {
                sum32 += exp((double)(x[r * n + j] - (float)mx));
                sum64 += exp(xd[r * n + j] - mx);
            }
            for (int64_t j = 0; j < n; j++) {
                double want32 = exp((double)(x[r * n + j] - (float)mx)) / sum32;
                double want64 = exp(xd[r * n + j] - mx) / sum64;
                double e32 = fabs(y[r * n + j] - want32) / want32,
                       e64 = fabs(yd[r * n + j] - want64) / want64;
                REQUIRE(e32 <= 1e-6 && e64 <= 1e-13,
                        "softmax n=%lld row %lld key %lld: f32 %.9g (want %.9g), f64 %.17g (want "
                        "%.17g)",
                        (long long)n, (long long)r, (long long)j, y[r * n + j], want32,
                        yd[r * n + j], want64);
                worst[0] = fmax(worst[0], e32);
                worst[1] = fmax(worst[1], e64);
            }
        }
        free(x);
        free(y);
        free(xd);
        free(yd);
    }
    printf("softmax kernel: worst relative error f32 %.3g, f64 %.3g\n", worst[0], worst[1]);
}
END_TEST

/* only_choice: QKV_SIMD names a path this CPU lacks, so the fallback's kernels would run,
 * which their own test runs already (on an AVX2 CPU, test_kernels_avx512 would repeat
 * test_kernels_avx2): only the choice itself is checked. */
static Suite *kernels_suite(bool only_choice) {
    Suite *s = suite_create("kernels");
    TCase *tc = tcase_create("gemm");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_simd_choice);
    suite_add_tcase(s, tc);
    if (only_choice) return s;
    tcase_add_test(tc, test_gemm_large);
    tcase_add_test(tc, test_gemm1);
    tcase_add_test(tc, test_gemm1_strided_f64);
    tcase_add_test(tc, test_gemm_packing_bits);
    tcase_add_test(tc, test_gemm_contract_bits);
    tcase_add_test(tc, test_gemm_f64);

    /* Every shape class and batch form, a product each; then every branch of gemm1 on this
     * path's sliver: "slow", left out by the valgrind stage of .ci/run (CK_EXCLUDE_TAGS=slow),
     * where the first two took 98 s of test_kernels' 164; the packing and tails they reach
     * run there in the cases above and in test_ops, and every other stage runs them */
    tc = tcase_create("shapes");
    tcase_set_tags(tc, "slow");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_gemm_sweep);
    tcase_add_test(tc, test_gemm_batched);
    suite_add_tcase(s, tc);
    tc = tcase_create("gemm1 branches");
    tcase_set_tags(tc, "slow");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_gemm1_branches);
    suite_add_tcase(s, tc);

    tc = tcase_create("attention");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_softmax_kernel_accuracy);
    tcase_add_test(tc, test_fused_vs_unfused);
    tcase_add_test(tc, test_attention_few_keys_bits);
    tcase_add_test(tc, test_fast_exp_softmax);
    tcase_add_test(tc, test_no_alloc_when_warm);
    suite_add_tcase(s, tc);

#ifdef QKV_HAVE_OPENMP
    tc = tcase_create("determinism");
    tcase_set_tags(tc, "threads"); /* left out under qemu-user (.ci/run), where threads crawl */
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_gemm_deterministic);
    tcase_add_test(tc, test_attention_deterministic);
    tcase_add_test(tc, test_kernel_team);
    suite_add_tcase(s, tc);
#endif
    return s;
}

int main(void) {
    const char *force = getenv("QKV_SIMD");
    printf("test_kernels: sgemm kernel %s (QKV_SIMD=%s)\n", kernel_isa_name(),
           force ? force : "unset");
    bool lacks = force && *force && !kernel_isa_runs(force);
    if (lacks) printf("test_kernels: this CPU lacks %s: only the choice of %s is checked\n", force,
                      kernel_isa_name());
    return run_suite(kernels_suite(lacks));
}
