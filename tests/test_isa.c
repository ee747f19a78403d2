/* test_isa.c - every ISA path this CPU runs gives the same bits as the plain C one.
 *   exp: each path's vector exp equals exp_f32 (simd.h) bit for bit, on special values and a
 *        sweep, and is within 2.5e-7 of exp in double where it is not 0.
 *   products: each path's tile and small product equal, bit for bit, the contract of isa.h
 *        written here as plain fmaf chains, on shapes with edges, transposes and K > GEMM_KC.
 *   transpose: each path's 8×8 blocks and edges put every element where it belongs.
 *   rows: every other kernel of the table (attention tiles, softmax, cross-entropy, optimizer
 *        parts) equals the plain C path's bit for bit, on rows with and without a tail.
 * (isa_bits_test.sh then trains under each path and compares the saved models.) */
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"
#include "qkv.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* every path the library knows (qkv_simd_paths, NULL-ended) */
#define path_names (qkv_simd_paths())
#define N_PATHS ((size_t)count_paths())
static int count_paths(void) {
    int n = 0;
    while (qkv_simd_paths()[n]) n++;
    return n;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static float uniform(float lo, float hi) { /* xorshift64*: the same numbers on every machine */
    rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
    uint64_t x = rng_state * 0x2545f4914f6cdd1du;
    return lo + (hi - lo) * (float)((double)(x >> 40) / (double)(1u << 24));
}
static void fill(float *x, int64_t n, float lo, float hi) {
    for (int64_t i = 0; i < n; i++) x[i] = uniform(lo, hi);
}
static float *alloc(int64_t n) {
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    ck_assert_ptr_nonnull(p);
    return p;
}
/* equal bits (0 differs from -0), where a NaN equals any NaN: the hardware picks a NaN's sign
 * and payload, and a NaN ends training whatever its bits */
static bool same_bits(const float *a, const float *b, int64_t n, int64_t *at) {
    for (int64_t i = 0; i < n; i++)
        if (memcmp(a + i, b + i, sizeof *a) && !(isnan(a[i]) && isnan(b[i]))) {
            *at = i;
            return false;
        }
    return true;
}
#define ASSERT_SAME(a, b, n, what, isa)                                                     \
    do {                                                                                  \
        int64_t at_;                                                                      \
        if (!same_bits(a, b, n, &at_))                                                    \
            ck_abort_msg("%s on %s: element %lld is %.9g, plain C gives %.9g", what,      \
                         (isa)->name, (long long)at_, (double)(a)[at_], (double)(b)[at_]); \
    } while (0)

static bool same_float(float a, float b) { return !memcmp(&a, &b, sizeof a); }

/* The largest of a row, NaN aside. */
static float row_max_of(const float *x, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    return mx;
}

/* ---- exp ---- */

START_TEST(test_exp_bits) {
    enum { N = 40000 };
    float *x = alloc(N), *want = alloc(N), *got = alloc(N);
    int64_t n = 0;
    const float special[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, -87.0f, -87.00001f,
                             -86.99999f, 88.0f, 88.00001f, 100.0f, -100.0f, 1e-30f, -1e-30f,
                             1e-45f, 0.5f, -0.5f, 0.34657359f, -0.34657359f, 1.0f, -1.0f,
                             12582912.0f, -12582912.0f, 3e38f, -3e38f};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) x[n++] = special[i];
    for (float v = -90.0f; v < 90.0f && n < N / 2; v += 0.0137f) x[n++] = v;
    while (n < N) x[n++] = uniform(-88.0f, 88.0f);
    for (int64_t i = 0; i < N; i++) want[i] = exp_f32(x[i]);
    for (int64_t i = 0; i < N; i++) {
        if (isnan(x[i])) {
            ck_assert(isnan(want[i]));
            continue;
        }
        if (x[i] < EXP_LO) {
            ck_assert_msg(want[i] == 0, "exp(%g) = %g, expected 0", x[i], want[i]);
            continue;
        }
        double e = exp((double)(x[i] > EXP_HI ? EXP_HI : x[i]));
        if (e < 1.2e-38) continue; /* subnormal results: absolute, not relative, accuracy */
        ck_assert_msg(fabs(want[i] - e) <= 2.5e-7 * e, "exp_f32(%.9g) = %.9g, exp %.9g", x[i],
                      want[i], e);
    }
    for (size_t p = 0; p < N_PATHS; p++) {
        const kernel_isa *isa = kernel_isa_find(path_names[p]);
        if (!isa) continue;
        for (int64_t len = 1; len <= 40; len += 13) { /* tails of every length mod 16 */
            memset(got, 0, N * sizeof *got);
            for (int64_t at = 0; at + len <= N; at += len) isa->exp(got + at, x + at, len);
            int64_t whole = N / len * len;
            ASSERT_SAME(got, want, whole, "exp", isa);
        }
    }
    free(x), free(want), free(got);
}
END_TEST

/* ---- products, against isa.h's contract ---- */

/* C (M×N) (+)= op(A)·B, B (K, N) rows ldb apart: per GEMM_KC block a chain of fmaf from 0,
 * added to C. */
static void contract_product(bool ta, int64_t M, int64_t N, int64_t K, const float *A,
                             int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc,
                             bool accumulate) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float c = accumulate ? C[i * ldc + j] : 0.0f;
            if (K == 0) C[i * ldc + j] = c;
            for (int64_t p0 = 0; p0 < K; p0 += GEMM_KC) {
                float acc = 0.0f;
                for (int64_t k = p0; k < K && k < p0 + GEMM_KC; k++)
                    acc = fmaf(ta ? A[k * lda + i] : A[i * lda + k], B[k * ldb + j], acc);
                c = (accumulate || p0 > 0) ? c + acc : acc;
                C[i * ldc + j] = c;
            }
        }
}

START_TEST(test_product_bits) {
    const int64_t shapes[][3] = {{1, 1, 1},   {16, 16, 16}, {64, 16, 64},  {5, 3, 7},
                                 {17, 33, 9}, {8, 40, 300}, {64, 64, 16},  {3, 16, 520},
                                 {16, 5, 0},  {9, 128, 64}, {32, 17, 256}, {4, 20, 257}};
    for (size_t p = 0; p < N_PATHS; p++) {
        const kernel_isa *isa = kernel_isa_find(path_names[p]);
        if (!isa) continue;
        ck_assert_int_eq(isa->gemm_nr % 16, 0);
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int f = 0; f < 4; f++) {
                bool ta = f & 1, accumulate = f & 2;
                /* A's rows (lda) and C's (ldc) with gaps, as a head's rows among others
                 * (the heads form of the fused attention): the gaps of C stay as they were */
                int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], ldb = N + 3;
                int64_t lda = (ta ? M : K) + 2, ldc = N + 5, na = (ta ? K : M) * lda;
                float *A = alloc(na), *B = alloc(K * ldb), *C = alloc(M * ldc),
                      *want = alloc(M * ldc);
                fill(A, na, -1, 1), fill(B, K * ldb, -1, 1), fill(C, M * ldc, -1, 1);
                memcpy(want, C, (size_t)(M * ldc) * sizeof *C);
                contract_product(ta, M, N, K, A, lda, B, ldb, want, ldc, accumulate);
                isa->gemm_small(ta, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
                char what[96];
                snprintf(what, sizeof what, "small product %lldx%lldx%lld ta %d acc %d",
                         (long long)M, (long long)N, (long long)K, ta, accumulate);
                ASSERT_SAME(C, want, M * ldc, what, isa);
                free(A), free(B), free(C), free(want);
            }
        /* the tile: up to mr rows of A with strides (rs, ks), a packed sliver kc × nr that is
         * zero past `cols`; rows and columns past the edge must not be written */
        int mr = isa->gemm_mr, nr = isa->gemm_nr;
        const int edges[][2] = {{mr, nr}, {mr - 1, nr}, {1, nr}, {mr, nr - 3}, {mr, 1},
                                {mr - 2, 17}, {mr / 2, 16}, {1, 1}};
        for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++)
            for (int64_t kc = 1; kc <= GEMM_KC; kc = kc * 3 + 2)
                for (int f = 0; f < 4; f++) {
                    int rows = edges[e][0], cols = edges[e][1] < nr ? edges[e][1] : nr;
                    bool ta = f & 1, add = f & 2;
                    int64_t ldc = nr + 5, rs = ta ? 1 : kc, ks = ta ? rows : 1;
                    float *a = alloc(rows * kc), *b = alloc(kc * nr), *c = alloc(mr * ldc),
                          *want = alloc(mr * ldc);
                    fill(a, rows * kc, -1, 1), fill(b, kc * nr, -1, 1), fill(c, mr * ldc, -1, 1);
                    for (int64_t k = 0; k < kc; k++)
                        for (int j = cols; j < nr; j++) b[k * nr + j] = 0;
                    memcpy(want, c, (size_t)(mr * ldc) * sizeof *c);
                    for (int r = 0; r < rows; r++)
                        for (int j = 0; j < cols; j++) {
                            float acc = 0.0f;
                            for (int64_t k = 0; k < kc; k++)
                                acc = fmaf(a[r * rs + k * ks], b[k * nr + j], acc);
                            want[r * ldc + j] = add ? want[r * ldc + j] + acc : acc;
                        }
                    isa->gemm_tile(rows, cols, kc, a, rs, ks, b, nr, c, ldc, add);
                    char what[64];
                    snprintf(what, sizeof what, "tile %dx%d of %dx%d, kc %lld", rows, cols, mr,
                             nr, (long long)kc);
                    ASSERT_SAME(c, want, mr * ldc, what, isa);
                    free(a), free(b), free(c), free(want);
                }
    }
}
END_TEST

/* ---- every other kernel, against the plain C path ---- */

static const int64_t widths[] = {1, 5, 16, 17, 40, 64, 100};
#define N_WIDTHS (sizeof widths / sizeof widths[0])

START_TEST(test_attention_tile_bits) {
    const kernel_isa *plain = &kernel_isa_scalar;
    for (size_t p = 0; p < N_PATHS; p++) {
        const kernel_isa *isa = kernel_isa_find(path_names[p]);
        if (!isa || isa == plain) continue;
        for (size_t w = 0; w < N_WIDTHS; w++) {
            int64_t br = 7, bc = widths[w], Dv = widths[(w + 3) % N_WIDTHS];
            float *s = alloc(br * bc), *s2 = alloc(br * bc), *acc = alloc(br * Dv),
                  *acc2 = alloc(br * Dv), m[7], m2[7], l[7], l2[7], lse[7], lo[7];
            /* the mask twice as wide as the tile: read with ms[3] = 1, or every other column */
            float *mask = alloc(2 * br * bc), *dp = alloc(br * bc), *dp2 = alloc(br * bc);
            float *raw = alloc(br * bc), *s3 = alloc(br * bc);
            fill(raw, br * bc, -30, 30), fill(acc, br * Dv, -2, 2), fill(dp, br * bc, -1, 1);
            for (int64_t i = 0; i < 2 * br * bc; i++)
                mask[i] = uniform(0, 1) < 0.3f ? -INFINITY : 0;
            for (int r = 0; r < br; r++) m[r] = r == 2 ? -INFINITY : uniform(-5, 5), l[r] = uniform(0, 3);
            for (int r = 0; r < br; r++) lse[r] = r == 4 ? -INFINITY : uniform(0, 20), lo[r] = uniform(-1e-6f, 1e-6f);
            raw[3 * bc] = NAN; /* NaN in a row reaches its sum */
            for (int c = 0; c < 2 * bc; c++) mask[5 * 2 * bc + c] = -INFINITY; /* a masked row */
            for (int form = 0; form < 3; form++) { /* no mask, a mask's rows, every other column */
                int64_t ms[4] = {0, 0, 2 * bc, form == 2 ? 2 : 1};
                const float *mk = form ? mask : NULL;
                attention_dims d = {.G = 1, .H = 1, .Nq = br, .Nk = bc, .Dk = 8, .Dv = Dv,
                                    .scale = 0.35355339059327373, .ms = ms};
                float m1[7], l1[7], *acc1 = alloc(br * Dv);
                memcpy(s, raw, (size_t)(br * bc) * sizeof *s);
                memcpy(s2, raw, (size_t)(br * bc) * sizeof *s);
                memcpy(acc1, acc, (size_t)(br * Dv) * sizeof *acc);
                memcpy(acc2, acc, (size_t)(br * Dv) * sizeof *acc);
                memcpy(m1, m, sizeof m), memcpy(l1, l, sizeof l);
                memcpy(m2, m, sizeof m), memcpy(l2, l, sizeof l);
                isa->online_softmax(&d, s, br, bc, mk, 0, 0, 0, m1, l1, acc1, NULL);
                plain->online_softmax(&d, s2, br, bc, mk, 0, 0, 0, m2, l2, acc2, NULL);
                ASSERT_SAME(s, s2, br * bc, "online_softmax (tile)", isa);
                ASSERT_SAME(acc1, acc2, br * Dv, "online_softmax (accumulator)", isa);
                ASSERT_SAME(m1, m2, br, "online_softmax (max)", isa);
                ASSERT_SAME(l1, l2, br, "online_softmax (sum)", isa);
                /* the scores as plain C reads them: scale·s + mask, each rounded */
                for (int r = 0; r < br; r++)
                    for (int c = 0; c < bc; c++) {
                        float x = raw[r * bc + c] * (float)d.scale;
                        s3[r * bc + c] = mk ? x + mk[r * ms[2] + c * ms[3]] : x;
                    }
                for (int r = 0; r < br; r++)
                    if (r != 2 && r != 3 && !(form && r == 5)) /* finite running max, no NaN */
                        ck_assert_msg(m1[r] == fmaxf(m[r], row_max_of(s3 + r * bc, bc)),
                                      "online_softmax on %s: row %d's max %g", isa->name, r,
                                      (double)m1[r]);
                memcpy(s, raw, (size_t)(br * bc) * sizeof *s);
                memcpy(s2, raw, (size_t)(br * bc) * sizeof *s);
                isa->recompute_probs(&d, s, br, bc, mk, 0, 0, 0, lse, lo);
                plain->recompute_probs(&d, s2, br, bc, mk, 0, 0, 0, lse, lo);
                ASSERT_SAME(s, s2, br * bc, "recompute_probs", isa);
                for (int r = 0; r < br; r++) /* exp((S − L) − lo), S as above */
                    for (int c = 0; r != 4 && c < bc; c++) {
                        float x = s3[r * bc + c], want;
                        isa->exp(&want, &(float){(x - lse[r]) - lo[r]}, 1);
                        ck_assert_msg(!memcmp(&want, &s[r * bc + c], sizeof want) || x != x,
                                      "recompute_probs on %s: (%d, %d) is %g, not %g", isa->name,
                                      r, c, (double)s[r * bc + c], (double)want);
                    }
                free(acc1);
            }
            for (int with_inv = 0; with_inv < 2; with_inv++) { /* score_grads, scaling P or not */
                const float *inv = with_inv ? l : NULL;
                memcpy(s2, s, (size_t)(br * bc) * sizeof *s);
                memcpy(s3, s, (size_t)(br * bc) * sizeof *s);
                memcpy(dp2, dp, (size_t)(br * bc) * sizeof *dp);
                memcpy(raw, dp, (size_t)(br * bc) * sizeof *dp);
                isa->score_grads(dp, s, s, br, bc, inv, lse, lo, 0.125f);
                plain->score_grads(dp2, s2, s2, br, bc, inv, lse, lo, 0.125f);
                ASSERT_SAME(dp, dp2, br * bc, "score_grads (dS)", isa);
                ASSERT_SAME(s, s2, br * bc, "score_grads (P)", isa);
                for (int r = 0; r < br; r++) /* P·inv stored, and dS from it */
                    for (int c = 0; c < bc; c++) {
                        float p = inv ? s3[r * bc + c] * inv[r] : s3[r * bc + c];
                        float want = p * ((raw[r * bc + c] - lse[r]) - lo[r]) * 0.125f;
                        ck_assert_msg(same_float(s[r * bc + c], p) &&
                                          same_float(dp[r * bc + c], want),
                                      "score_grads on %s: (%d, %d)", isa->name, r, c);
                    }
            }
            memcpy(s2, s, (size_t)(br * bc) * sizeof *s);
            isa->scale_rows(s, s, br, bc, lse); /* a factor a row, -inf among them */
            plain->scale_rows(s2, s2, br, bc, lse);
            ASSERT_SAME(s, s2, br * bc, "scale_rows", isa);
            for (int rows = 1; rows <= br; rows += 2) { /* 2 rows at a time, and an odd last one */
                double dot[2][7], sum[2][7];
                isa->row_dot_sums(s, dp, rows, bc, dot[0], sum[0]);
                plain->row_dot_sums(s, dp, rows, bc, dot[1], sum[1]);
                for (int r = 0; r < rows; r++)
                    ck_assert_msg(!memcmp(&dot[0][r], &dot[1][r], sizeof(double)) &&
                                      !memcmp(&sum[0][r], &sum[1][r], sizeof(double)),
                                  "row_dot_sums on %s: row %d of %dx%lld gives %.17g, %.17g; "
                                  "plain C %.17g, %.17g", isa->name, r, rows, (long long)bc,
                                  dot[0][r], sum[0][r], dot[1][r], sum[1][r]);
            }
            free(s), free(s2), free(acc), free(acc2), free(mask), free(dp), free(dp2);
            free(raw), free(s3);
        }
    }
}
END_TEST

START_TEST(test_row_bits) {
    const kernel_isa *plain = &kernel_isa_scalar;
    for (size_t p = 0; p < N_PATHS; p++) {
        const kernel_isa *isa = kernel_isa_find(path_names[p]);
        if (!isa || isa == plain) continue;
        for (size_t w = 0; w < N_WIDTHS; w++) {
            int64_t n = widths[w] * 3;
            float *x = alloc(n), *y = alloc(n), *y2 = alloc(n), *dy = alloc(n), *dx = alloc(n),
                  *dx2 = alloc(n);
            fill(x, n, -20, 20), fill(dy, n, -1, 1), fill(dx, n, -1, 1);
            if (n > 4) x[3] = -INFINITY;
            isa->softmax_row(y, x, n);
            plain->softmax_row(y2, x, n);
            ASSERT_SAME(y, y2, n, "softmax_row", isa);
            memcpy(dx2, dx, (size_t)n * sizeof *dx);
            isa->softmax_backward_row(dx, y, dy, n);
            plain->softmax_backward_row(dx2, y, dy, n);
            ASSERT_SAME(dx, dx2, n, "softmax_backward_row", isa);
            fill(x, n, -20, 20);
            float part[16], part2[16];
            float max = isa->cross_entropy_parts(x, n, part), max2 = plain->cross_entropy_parts(x, n, part2);
            ck_assert_msg(!memcmp(&max, &max2, sizeof max), "cross_entropy_parts on %s: max %.9g, plain C %.9g",
                          isa->name, max, max2);
            ASSERT_SAME(part, part2, 16, "cross_entropy_parts", isa);
            double sum = 0;
            for (int e = 0; e < 16; e++) sum += (double)part[e];
            double lse = (double)max + log(sum);
            memcpy(dx2, dx, (size_t)n * sizeof *dx);
            isa->cross_entropy_backward_row(dx, x, n, (int32_t)(n / 2), lse, 0.03125f);
            plain->cross_entropy_backward_row(dx2, x, n, (int32_t)(n / 2), lse, 0.03125f);
            ASSERT_SAME(dx, dx2, n, "cross_entropy_backward_row", isa);
            double sq = isa->sum_squares(x, n), sq2 = plain->sum_squares(x, n);
            ck_assert(!memcmp(&sq, &sq2, sizeof sq));
            for (int kind = OPTIM_SGD; kind <= OPTIM_ADAM; kind++) {
                optim_rule r = {.kind = (optim_kind)kind, .lr = 0.01, .weight_decay = 0.1,
                                .grad_scale = 0.7, .momentum = 0.9, .beta1 = 0.9,
                                .beta2 = 0.999, .eps = 1e-8, .bias1 = 0.1, .bias2 = 0.001};
                float *w1 = alloc(n), *w2 = alloc(n), *m1 = alloc(n), *m2 = alloc(n),
                      *v1 = alloc(n), *v2 = alloc(n);
                fill(w1, n, -1, 1), fill(m1, n, -1, 1), fill(v1, n, 0, 1);
                memcpy(w2, w1, (size_t)n * 4), memcpy(m2, m1, (size_t)n * 4), memcpy(v2, v1, (size_t)n * 4);
                isa->optim_update_part(&r, w1, dy, m1, v1, n);
                plain->optim_update_part(&r, w2, dy, m2, v2, n);
                ASSERT_SAME(w1, w2, n, "optim_update_part (weights)", isa);
                ASSERT_SAME(m1, m2, n, "optim_update_part (first moment)", isa);
                ASSERT_SAME(v1, v2, n, "optim_update_part (second moment)", isa);
                free(w1), free(w2), free(m1), free(m2), free(v1), free(v2);
            }
            free(x), free(y), free(y2), free(dy), free(dx), free(dx2);
        }
    }
}
END_TEST

/* The transpose behind every transposed operand's packing: on every path, each element lands
 * where the plain definition puts it, and nothing past the destination's rows and columns is
 * written; shapes with and without whole 8×8 blocks, strides wider than the rows. */
START_TEST(test_transpose) {
    static const int64_t sizes[] = {1, 3, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 64, 70};
    const size_t n_sizes = sizeof sizes / sizeof sizes[0];
    for (size_t p = 0; p < N_PATHS; p++) {
        const kernel_isa *isa = kernel_isa_find(path_names[p]);
        if (!isa) continue;
        for (size_t a = 0; a < n_sizes; a++)
            for (size_t b = 0; b < n_sizes; b++) {
                int64_t rows = sizes[a], cols = sizes[b], lds = cols + (int64_t)(a % 3),
                        ldd = rows + (int64_t)(b % 2) * 5;
                float *src = alloc(rows * lds), *dst = alloc(cols * ldd);
                fill(src, rows * lds, -1, 1);
                for (int64_t i = 0; i < cols * ldd; i++) dst[i] = 42.0f;
                isa->transpose(dst, ldd, src, lds, rows, cols);
                for (int64_t c = 0; c < cols; c++)
                    for (int64_t r = 0; r < ldd; r++) {
                        float want = r < rows ? src[r * lds + c] : 42.0f;
                        ck_assert_msg(!memcmp(&dst[c * ldd + r], &want, sizeof want),
                                      "transpose on %s, %lld×%lld: element (%lld, %lld) is %g, "
                                      "not %g", isa->name, (long long)rows, (long long)cols,
                                      (long long)c, (long long)r, (double)dst[c * ldd + r],
                                      (double)want);
                    }
                free(src);
                free(dst);
            }
    }
}
END_TEST

/* The FMA peak: on every path a round is one FMA on each of the packed product's sums, the
 * chains stay finite, and the measured peak is a positive number. No speed is asserted here:
 * qkv bench measures it. */
START_TEST(test_fma_peak) {
    for (size_t p = 0; p < N_PATHS; p++) {
        const kernel_isa *isa = kernel_isa_find(path_names[p]);
        if (!isa) continue;
        ck_assert_int_eq(isa->fma_peak_flops, 2 * isa->gemm_mr * isa->gemm_nr);
        double sum = isa->fma_peak(1000);
        ck_assert_msg(isfinite(sum) && sum > 0, "fma_peak on %s: %g", isa->name, sum);
    }
    double gflops = qkv_fma_peak(1, 0.05);
    ck_assert_msg(isfinite(gflops) && gflops > 0, "qkv_fma_peak: %g", gflops);
}
END_TEST

/* The FMA units' width from made-up trials (GFLOP/s per CPU second, the AVX-512 path's and
 * the AVX2 path's in turn): each path's best trial counts, load only ever lowering a trial; a
 * best that no second trial comes within 5% of, or a ratio neither near 1 nor near 2, tells
 * nothing. */
START_TEST(test_fma_width_decide) {
    struct {
        double wide[4], narrow[4];
        fma_width width;
        double ratio;
    } cases[] = {
        {{225, 224, 223, 225}, {112, 111, 112, 110}, FMA_WIDTH_FULL, 225.0 / 112}, /* quiet, Zen 5 */
        {{110, 109, 108, 110}, {112, 111, 112, 110}, FMA_WIDTH_HALF, 110.0 / 112}, /* Zen 4 */
        /* load slowed half the trials of each path, and a different half: still told */
        {{60, 224, 90, 220}, {112, 40, 110, 70}, FMA_WIDTH_FULL, 224.0 / 112},
        {{55, 110, 107, 30}, {112, 20, 60, 109}, FMA_WIDTH_HALF, 110.0 / 112},
        /* one fast trial of a path and no other near it: too busy to tell */
        {{225, 150, 120, 130}, {112, 111, 110, 112}, FMA_WIDTH_UNTOLD, 225.0 / 112},
        {{225, 224, 223, 225}, {112, 60, 50, 70}, FMA_WIDTH_UNTOLD, 225.0 / 112},
        /* 5% from the best is near enough, 6% is not */
        {{200, 190, 100, 100}, {100, 95, 50, 50}, FMA_WIDTH_FULL, 2},
        {{200, 188, 100, 100}, {100, 95, 50, 50}, FMA_WIDTH_UNTOLD, 2},
        /* agreeing trials whose ratio is neither about 1 nor about 2 */
        {{140, 139, 140, 138}, {100, 99, 100, 98}, FMA_WIDTH_UNTOLD, 1.4},
        {{150, 150, 149, 150}, {100, 100, 99, 100}, FMA_WIDTH_FULL, 1.5},
        {{129, 129, 128, 129}, {100, 100, 99, 100}, FMA_WIDTH_HALF, 1.29},
        /* a path with no rate: nothing to compare */
        {{225, 224, 223, 225}, {0, 0, 0, 0}, FMA_WIDTH_UNTOLD, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        fma_width_result r = fma_width_decide(cases[k].wide, cases[k].narrow, 4);
        ck_assert_msg(r.width == cases[k].width, "case %zu: width %d", k, (int)r.width);
        ck_assert_msg(fabs(r.ratio - cases[k].ratio) < 1e-12, "case %zu: ratio %g", k, r.ratio);
    }
    /* measured: each rate positive, and on an AVX-512 CPU a ratio; no width is asserted */
    fma_width_result m = fma_width_measure("avx512", "avx2", 0.05);
    if (kernel_isa_find("avx512") && kernel_isa_find("avx2"))
        ck_assert_msg(m.wide > 0 && m.narrow > 0 && m.ratio > 0, "%g %g", m.wide, m.narrow);
    else
        ck_assert(m.ratio == 0 && m.width == FMA_WIDTH_UNTOLD);
}
END_TEST

/* The process's address space in bytes (VmSize), 0 if unknown. */
static double address_space(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmSize:", 7)) kb = atof(line + 7);
    if (f) fclose(f);
    return kb * 1024;
}

/* A kernel case whose buffers cannot be allocated is no answer, never a difference: under an
 * address-space limit 1 MB above what the process holds, the full list's larger cases find no
 * memory, and the check says so (qkv selftest then exits 6, not 1 naming a path). Check runs
 * each test in a child of its own, so the limit ends with it. Not under a sanitizer, whose
 * allocator reserves its own address space. */
START_TEST(test_check_without_memory) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    return;
#endif
    qkv_set_threads(1); /* no thread to start under the limit */
    double held = address_space();
    if (held <= 0) return; /* no /proc: nothing to limit against */
    struct rlimit lim = {(rlim_t)(held + (1 << 20)), (rlim_t)(held + (1 << 20))};
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &lim), 0);
    void *volatile probe = malloc(64u << 20); /* past the limit: refused where it holds */
    if (probe) { /* qemu-user keeps RLIMIT_AS for itself: the guest's memory is not limited */
        free(probe);
        return;
    }
    const char *path = "scalar"; /* a path this CPU and build run (avx512 on x86-64 CPUs
                                      * that have it, neon on aarch64) */
    for (size_t p = 0; p < N_PATHS; p++)
        if (kernel_isa_find(path_names[p]) && strcmp(path_names[p], "scalar")) path = path_names[p];
    char first[320];
    int checked;
    kernel_isa_verdict v = kernel_isa_check(path, true, &checked, first, sizeof first);
    ck_assert_msg(v == KERNEL_ISA_NO_MEMORY && strstr(first, "out of memory"),
                  "verdict %d after %d cases: %s", (int)v, checked, first);
}
END_TEST

int main(void) {
    printf("test_isa: paths this CPU runs:");
    for (size_t p = 0; p < N_PATHS; p++)
        if (kernel_isa_find(path_names[p])) printf(" %s", path_names[p]);
    printf("\n");
    Suite *s = suite_create("isa");
    TCase *tc = tcase_create("bits");
    tcase_add_test(tc, test_exp_bits);
    tcase_add_test(tc, test_product_bits);
    tcase_add_test(tc, test_attention_tile_bits);
    tcase_add_test(tc, test_row_bits);
    tcase_add_test(tc, test_fma_peak);
    tcase_add_test(tc, test_fma_width_decide);
    tcase_add_test(tc, test_transpose);
    tcase_add_test(tc, test_check_without_memory);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
