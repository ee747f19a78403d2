/* attention_kernel.c - fused attention kernels, f32 and f64 from one body (attention_kernel.inc). */
#include "isa.h"
#include "qkv.h"

#include <math.h>
#include <string.h>
#ifdef QKV_HAVE_OPENMP
#include <omp.h>
#endif

#define BR 64 /* query rows per tile */
#define BC 64 /* keys per tile */
#define MIN_HEADS_FOR_HEAD_SPLIT 8
#define MAX_KEY_GROUPS 4
#define PARALLEL_WORK 5e5 /* below this many multiply-adds a second thread costs more than it saves */

attention_form_kind attention_form = ATTENTION_FORM_D_FROM_P;

static const char *const attention_form_names[ATTENTION_FORM_COUNT + 1] = {
    [ATTENTION_FORM_LEGACY] = "legacy", [ATTENTION_FORM_SPLIT_L] = "split-l",
    [ATTENTION_FORM_WIDE_D] = "wide-d", [ATTENTION_FORM_D_FROM_P] = "d-from-p", NULL};

const char *attention_form_name(attention_form_kind form) {
    return form >= 0 && form < ATTENTION_FORM_COUNT ? attention_form_names[form] : "?";
}

const char *const *qkv_attention_forms(void) { return attention_form_names; }
const char *qkv_attention_form(void) { return attention_form_name(attention_form); }
bool qkv_set_attention_form(const char *name) { return attention_form_parse(name, &attention_form); }

bool attention_form_parse(const char *name, attention_form_kind *form) {
    for (int f = 0; f < ATTENTION_FORM_COUNT; f++)
        if (!strcmp(name, attention_form_names[f])) {
            *form = (attention_form_kind)f;
            return true;
        }
    return false;
}

/* The tile loops of the f64 kernels. (The f32 ones are the ISA's, written over vec.h in
 * isa_kernels.inc with the same meaning.) */

/* s (br×bc) = scale·s + mask for rows i0.., keys j0.. of head g. */
static void scale_and_mask_f64(const attention_dims *d, double *s, int64_t br, int64_t bc,
                               const double *mask, int64_t g, int64_t i0, int64_t j0) {
    double scale = (double)d->scale;
    for (int64_t r = 0; r < br; r++) {
        double *row = s + r * bc;
        if (!mask) {
            for (int64_t c = 0; c < bc; c++) row[c] *= scale;
            continue;
        }
        const double *m = mask + (g / d->H) * d->ms[0] + (g % d->H) * d->ms[1] + (i0 + r) * d->ms[2] +
                     j0 * d->ms[3];
        for (int64_t c = 0; c < bc; c++) row[c] = row[c] * scale + m[c * d->ms[3]];
    }
}

/* Max and sum of a row with 16 partial results, so that the loops vectorise (a single running
 * value would be a serial chain); the order is fixed, so the result is too. */
static inline double row_max_f64(const double *x, int64_t n, double init) {
    double part[16];
    for (int j = 0; j < 16; j++) part[j] = init;
    int64_t c = 0;
    for (; c + 16 <= n; c += 16)
        for (int j = 0; j < 16; j++) part[j] = x[c + j] > part[j] ? x[c + j] : part[j];
    for (; c < n; c++) part[0] = x[c] > part[0] ? x[c] : part[0];
    double mx = part[0];
    for (int j = 1; j < 16; j++) mx = part[j] > mx ? part[j] : mx;
    return mx;
}

static inline double row_sum_f64(const double *x, int64_t n) {
    double part[16] = {0};
    int64_t c = 0;
    for (; c + 16 <= n; c += 16)
        for (int j = 0; j < 16; j++) part[j] += x[c + j];
    for (; c < n; c++) part[0] += x[c];
    double sum = 0;
    for (int j = 0; j < 16; j++) sum += part[j];
    return sum;
}

/* The online softmax over one tile of scores s (br×bc, overwritten by exp(s − new max)):
 * m and l are each row's running max and sum; acc (br×Dv) is rescaled to the new max. */
static void online_softmax_f64(double *s, int64_t br, int64_t bc, double *m, double *l, double *acc,
                                         int64_t Dv) {
    for (int64_t r = 0; r < br; r++) {
        double *row = s + r * bc, mx = row_max_f64(row, bc, m[r]);
        if (mx == -INFINITY) { /* every key so far is masked */
            for (int64_t c = 0; c < bc; c++) row[c] = 0;
            continue;
        }
        double alpha = exp(m[r] - mx); /* exp(-inf) = 0 on the first tile */
        for (int64_t c = 0; c < bc; c++) row[c] = exp(row[c] - mx);
        l[r] = l[r] * alpha + row_sum_f64(row, bc);
        m[r] = mx;
        for (int64_t c = 0; c < Dv; c++) acc[r * Dv + c] *= alpha;
    }
}

/* p (br×bc) = exp((p − L_r) − Llo_r): the probabilities again, from the saved log-sum-exp
 * L + Llo (see attention_forward)). For the keys that carry the weight, p is within a
 * factor of two of L, so p − L is exact and only Llo, a few ulps, is rounded: P is as
 * accurate as exp makes it however large the scores are. lse_lo NULL: Llo taken as 0. */
static void recompute_probs_f64(double *p, int64_t br, int64_t bc, const double *lse,
                                            const double *lse_lo) {
    for (int64_t r = 0; r < br; r++) {
        double *row = p + r * bc, L = lse[r], lo = lse_lo ? lse_lo[r] : 0;
        if (L == -INFINITY) { /* a fully masked row */
            for (int64_t c = 0; c < bc; c++) row[c] = 0;
            continue;
        }
        for (int64_t c = 0; c < bc; c++) row[c] = exp((row[c] - L) - lo);
    }
}

/* forward was: O = P·V with P = softmax(S), S = scale·Q·Kᵀ + M
 *   =>  dS = P ⊙ (dP − D), D_r = Σ_c dO[r,c]·O[r,c] = D_hi + D_lo; dp holds dP and becomes
 * scale·dS. Where attention is saturated, dP at the top key and D agree in all but their last
 * bits: dP − D_hi is then exact, and D_lo puts back what rounding D to double took away. */
static void score_grads_f64(double *dp, const double *p, int64_t br, int64_t bc,
                                        const double *D_hi, const double *D_lo, double scale) {
    for (int64_t r = 0; r < br; r++)
        for (int64_t c = 0; c < bc; c++)
            dp[r * bc + c] = p[r * bc + c] * ((dp[r * bc + c] - D_hi[r]) - D_lo[r]) * scale;
}

/* p (br×bc): row r times s[r] */
static void scale_rows_f64(double *p, int64_t br, int64_t bc, const double *s) {
    for (int64_t r = 0; r < br; r++)
        for (int64_t c = 0; c < bc; c++) p[r * bc + c] *= s[r];
}

/* For each row r of f32 P and dP (rows ≤ BR, of n): Σ_c x[r][c]·y[r][c] and Σ_c x[r][c],
 * each as hi + lo floats: summed in double (the ISA's row_dot_sums), where each product of
 * two floats is exact. */
static void row_terms_f32(const float *x, const float *y, int64_t rows, int64_t n, float *dh,
                          float *dl, float *sh, float *sl) {
    double dot[BR], sum[BR];
    kernel_isa_active()->row_dot_sums(x, y, rows, n, dot, sum);
    for (int64_t r = 0; r < rows; r++) {
        dh[r] = (float)dot[r], dl[r] = (float)(dot[r] - dh[r]);
        sh[r] = (float)sum[r], sl[r] = (float)(sum[r] - sh[r]);
    }
}

#define T float
#define SUF f32
#define LOG logf
#define FMA fmaf
#define GEMM_PACK gemm_pack_f32
#define GEMM_PACKED_FLOATS gemm_packed_floats_f32
#define GEMM_PACKED_IS_PLAIN gemm_packed_is_plain_f32
#define GEMM1_PACKED gemm1_packed_f32
#define SCALE_AND_MASK kernel_isa_active()->scale_and_mask
#define ONLINE_SOFTMAX kernel_isa_active()->online_softmax
#define RECOMPUTE_PROBS kernel_isa_active()->recompute_probs
#define SCORE_GRADS kernel_isa_active()->score_grads
#define SCALE_ROWS kernel_isa_active()->scale_rows
#define ROW_TERMS row_terms_f32
#include "attention_kernel.inc"
#undef T
#undef SUF
#undef LOG
#undef FMA
#undef GEMM_PACK
#undef GEMM_PACKED_FLOATS
#undef GEMM_PACKED_IS_PLAIN
#undef GEMM1_PACKED
#undef SCALE_AND_MASK
#undef ONLINE_SOFTMAX
#undef RECOMPUTE_PROBS
#undef SCORE_GRADS
#undef SCALE_ROWS
#undef ROW_TERMS

#define T double
#define SUF f64
#define LOG log
#define FMA fma
#define GEMM_PACK gemm_pack_f64
#define GEMM_PACKED_FLOATS gemm_packed_floats_f64
#define GEMM_PACKED_IS_PLAIN gemm_packed_is_plain_f64
#define GEMM1_PACKED gemm1_packed_f64
#define SCALE_AND_MASK scale_and_mask_f64
#define ONLINE_SOFTMAX online_softmax_f64
#define RECOMPUTE_PROBS recompute_probs_f64
#define SCORE_GRADS score_grads_f64
#define SCALE_ROWS scale_rows_f64
#define ROW_TERMS row_terms_dot2_f64
#include "attention_kernel.inc"
#undef T
#undef SUF
#undef LOG
#undef FMA
#undef GEMM_PACK
#undef GEMM_PACKED_FLOATS
#undef GEMM_PACKED_IS_PLAIN
#undef GEMM1_PACKED
#undef SCALE_AND_MASK
#undef ONLINE_SOFTMAX
#undef RECOMPUTE_PROBS
#undef SCORE_GRADS
#undef SCALE_ROWS
#undef ROW_TERMS
