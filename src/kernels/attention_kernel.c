/* attention_kernel.c - fused attention kernels, f32 and f64 from one body (attention_kernel.inc). */
#include "kernels.h"
#include "simd.h"

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

static const char *const attention_form_names[ATTENTION_FORM_COUNT] = {
    [ATTENTION_FORM_LEGACY] = "legacy", [ATTENTION_FORM_SPLIT_L] = "split-l",
    [ATTENTION_FORM_WIDE_D] = "wide-d", [ATTENTION_FORM_D_FROM_P] = "d-from-p"};

const char *attention_form_name(attention_form_kind form) {
    return form >= 0 && form < ATTENTION_FORM_COUNT ? attention_form_names[form] : "?";
}

bool attention_form_parse(const char *name, attention_form_kind *form) {
    for (int f = 0; f < ATTENTION_FORM_COUNT; f++)
        if (!strcmp(name, attention_form_names[f])) {
            *form = (attention_form_kind)f;
            return true;
        }
    return false;
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define AVX512_TILES 1

/* fast_expf on 16 lanes: the same reduction and polynomial, 2^n applied by scalef (which
 * takes a NaN n without complaint and gives NaN). */
__attribute__((target("avx512f"))) static inline __m512 exp16(__m512 x) {
    /* clamped to [-87, 88]; max and min return their second operand when one is NaN */
    __m512 xc = _mm512_min_ps(_mm512_set1_ps(EXP_HI), _mm512_max_ps(_mm512_set1_ps(EXP_LO), x));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(EXP_LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_LN2_HI), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(EXP_P5);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P0));
    p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    /* below -87: 0; NaN (unordered, so "not less than") stays NaN, as in fast_expf */
    __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(EXP_LO), _CMP_NLT_UQ);
    return _mm512_maskz_mov_ps(keep, _mm512_scalef_ps(p, n));
}

/* online_softmax_f32 (attention_kernel.inc) in 16-lane steps: the generic loops, compiled, spend
 * more on masked epilogues and 16-way scalar reductions than on the exps (measured: 12% of
 * the long workload's step on one thread, 6% with this). */
__attribute__((target("avx512f"))) static void
online_softmax_avx512(float *s, int64_t br, int64_t bc, float *m, float *l, float *acc,
                      int64_t Dv) {
    for (int64_t r = 0; r < br; r++) {
        float *row = s + r * bc;
        __m512 vmax = _mm512_set1_ps(m[r]);
        for (int64_t c = 0; c < bc; c += 16) {
            __mmask16 k = lane_mask(c, bc);
            vmax = _mm512_mask_max_ps(vmax, k, vmax, _mm512_maskz_loadu_ps(k, row + c));
        }
        float mx = _mm512_reduce_max_ps(vmax);
        if (mx == -INFINITY) { /* every key so far is masked */
            for (int64_t c = 0; c < bc; c++) row[c] = 0;
            continue;
        }
        float alpha = fast_expf(m[r] - mx); /* exp(-inf) = 0 on the first tile */
        __m512 vmx = _mm512_set1_ps(mx), sum = _mm512_setzero_ps();
        for (int64_t c = 0; c < bc; c += 16) {
            __mmask16 k = lane_mask(c, bc);
            __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, row + c), vmx));
            _mm512_mask_storeu_ps(row + c, k, e);
            sum = _mm512_mask_add_ps(sum, k, sum, e);
        }
        l[r] = l[r] * alpha + _mm512_reduce_add_ps(sum);
        m[r] = mx;
        __m512 va = _mm512_set1_ps(alpha);
        float *ar = acc + r * Dv;
        for (int64_t c = 0; c < Dv; c += 16) {
            __mmask16 k = lane_mask(c, Dv);
            _mm512_mask_storeu_ps(ar + c, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, ar + c), va));
        }
    }
}

/* recompute_probs_f32 (attention_kernel.inc) in 16-lane steps. */
__attribute__((target("avx512f"))) static void recompute_probs_avx512(float *p, int64_t br,
                                                                      int64_t bc,
                                                                      const float *lse,
                                                                      const float *lse_lo) {
    for (int64_t r = 0; r < br; r++) {
        float *row = p + r * bc;
        if (lse[r] == -INFINITY) { /* a fully masked row */
            for (int64_t c = 0; c < bc; c++) row[c] = 0;
            continue;
        }
        __m512 L = _mm512_set1_ps(lse[r]), lo = _mm512_set1_ps(lse_lo ? lse_lo[r] : 0.0f);
        for (int64_t c = 0; c < bc; c += 16) {
            __mmask16 k = lane_mask(c, bc);
            __m512 x = _mm512_maskz_loadu_ps(k, row + c);
            _mm512_mask_storeu_ps(row + c, k, exp16(_mm512_sub_ps(_mm512_sub_ps(x, L), lo)));
        }
    }
}
#endif

#define T float
#define SUF f32
#define EXP fast_expf
#define LOG logf
#define FMA fmaf
#define GEMM_PACK gemm_pack_f32
#define GEMM_PACKED_FLOATS gemm_packed_floats_f32
#define GEMM_PACKED_IS_PLAIN gemm_packed_is_plain_f32
#define GEMM1_PACKED gemm1_packed_f32
#ifdef AVX512_TILES
#define ONLINE_SOFTMAX(...) \
    (kernel_avx512() ? online_softmax_avx512(__VA_ARGS__) : online_softmax_f32(__VA_ARGS__))
#define RECOMPUTE_PROBS(...) \
    (kernel_avx512() ? recompute_probs_avx512(__VA_ARGS__) : recompute_probs_f32(__VA_ARGS__))
#else
#define ONLINE_SOFTMAX online_softmax_f32
#define RECOMPUTE_PROBS recompute_probs_f32
#endif
#include "attention_kernel.inc"
#undef T
#undef SUF
#undef EXP
#undef LOG
#undef FMA
#undef GEMM_PACK
#undef GEMM_PACKED_FLOATS
#undef GEMM_PACKED_IS_PLAIN
#undef GEMM1_PACKED
#undef ONLINE_SOFTMAX
#undef RECOMPUTE_PROBS

#define T double
#define SUF f64
#define EXP exp
#define LOG log
#define FMA fma
#define GEMM_PACK gemm_pack_f64
#define GEMM_PACKED_FLOATS gemm_packed_floats_f64
#define GEMM_PACKED_IS_PLAIN gemm_packed_is_plain_f64
#define GEMM1_PACKED gemm1_packed_f64
#define ONLINE_SOFTMAX online_softmax_f64
#define RECOMPUTE_PROBS recompute_probs_f64
#include "attention_kernel.inc"
#undef T
#undef SUF
#undef EXP
#undef LOG
#undef FMA
#undef GEMM_PACK
#undef GEMM_PACKED_FLOATS
#undef GEMM_PACKED_IS_PLAIN
#undef GEMM1_PACKED
#undef ONLINE_SOFTMAX
#undef RECOMPUTE_PROBS
