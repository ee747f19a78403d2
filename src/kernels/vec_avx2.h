/* vec_avx2.h - the AVX2 + FMA backend of vec.h: 16 lanes as two ymm registers, lanes 0-7 in
 * lo and 8-15 in hi; masked tails through maskload and maskstore. */
#include <immintrin.h>

typedef struct {
    __m256 lo, hi;
} vf;

/* -1 for lanes below n: 16 - n words into {-1 ×16, 0 ×16} */
static const int32_t vf_mask_words_[32] = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                           -1, -1, -1, -1, -1};
static inline __m256i vf_mask_lo_(int n) {
    return _mm256_loadu_si256((const __m256i *)(vf_mask_words_ + 16 - n));
}
static inline __m256i vf_mask_hi_(int n) {
    return _mm256_loadu_si256((const __m256i *)(vf_mask_words_ + 24 - n));
}

static inline vf vf_zero(void) { return (vf){_mm256_setzero_ps(), _mm256_setzero_ps()}; }
static inline vf vf_set1(float s) { return (vf){_mm256_set1_ps(s), _mm256_set1_ps(s)}; }
static inline vf vf_load(const float *p) { return (vf){_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
static inline void vf_store(float *p, vf a) {
    _mm256_storeu_ps(p, a.lo);
    _mm256_storeu_ps(p + 8, a.hi);
}
static inline vf vf_load_n(const float *p, int n, float fill) {
    __m256i ml = vf_mask_lo_(n), mh = vf_mask_hi_(n);
    __m256 f = _mm256_set1_ps(fill);
    return (vf){_mm256_blendv_ps(f, _mm256_maskload_ps(p, ml), _mm256_castsi256_ps(ml)),
                _mm256_blendv_ps(f, _mm256_maskload_ps(p + 8, mh), _mm256_castsi256_ps(mh))};
}
static inline void vf_store_n(float *p, vf a, int n) {
    _mm256_maskstore_ps(p, vf_mask_lo_(n), a.lo);
    _mm256_maskstore_ps(p + 8, vf_mask_hi_(n), a.hi);
}
static inline vf vf_add(vf a, vf b) {
    return (vf){_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)};
}
static inline vf vf_sub(vf a, vf b) {
    return (vf){_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)};
}
static inline vf vf_mul(vf a, vf b) {
    return (vf){_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)};
}
static inline vf vf_div(vf a, vf b) {
    return (vf){_mm256_div_ps(a.lo, b.lo), _mm256_div_ps(a.hi, b.hi)};
}
static inline vf vf_sqrt(vf a) { return (vf){_mm256_sqrt_ps(a.lo), _mm256_sqrt_ps(a.hi)}; }
static inline vf vf_max(vf a, vf b) {
    return (vf){_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)};
}
static inline vf vf_min(vf a, vf b) {
    return (vf){_mm256_min_ps(a.lo, b.lo), _mm256_min_ps(a.hi, b.hi)};
}
static inline vf vf_fma(vf a, vf b, vf c) {
    return (vf){_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
static inline vf vf_fnma(vf a, vf b, vf c) {
    return (vf){_mm256_fnmadd_ps(a.lo, b.lo, c.lo), _mm256_fnmadd_ps(a.hi, b.hi, c.hi)};
}
#define VF_NEAREST (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
static inline vf vf_round(vf a) {
    return (vf){_mm256_round_ps(a.lo, VF_NEAREST), _mm256_round_ps(a.hi, VF_NEAREST)};
}
#undef VF_NEAREST
/* 2^n built in the exponent field; a NaN n gives some finite power, and a NaN a stays NaN */
static inline __m256 vf_pow2_(__m256 n) {
    __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
}
static inline vf vf_ldexp(vf a, vf n) {
    return (vf){_mm256_mul_ps(a.lo, vf_pow2_(n.lo)), _mm256_mul_ps(a.hi, vf_pow2_(n.hi))};
}
static inline vf vf_zero_below(vf a, vf x, vf s) {
    return (vf){_mm256_andnot_ps(_mm256_cmp_ps(x.lo, s.lo, _CMP_LT_OQ), a.lo),
                _mm256_andnot_ps(_mm256_cmp_ps(x.hi, s.hi, _CMP_LT_OQ), a.hi)};
}

/* The tree of vec.h: halves of 8 (lo + hi), 4, 2, 1 lanes. */
static inline float vf_reduce_add(vf a) {
    __m256 s8 = _mm256_add_ps(a.lo, a.hi);
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

static inline float vf_reduce_max(vf a) {
    __m256 s8 = _mm256_max_ps(a.lo, a.hi);
    __m128 s4 = _mm_max_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_max_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_max_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

/* 8 double lanes (lo: 0-3, hi: 4-7): the widened halves of a vf, for sums in double. */
typedef struct {
    __m256d lo, hi;
} vd;
static inline vd vd_zero(void) { return (vd){_mm256_setzero_pd(), _mm256_setzero_pd()}; }
static inline vd vd_widen_(__m256 a) {
    return (vd){_mm256_cvtps_pd(_mm256_castps256_ps128(a)),
                _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1))};
}
static inline vd vd_lo(vf a) { return vd_widen_(a.lo); }
static inline vd vd_hi(vf a) { return vd_widen_(a.hi); }
static inline vd vd_add(vd a, vd b) {
    return (vd){_mm256_add_pd(a.lo, b.lo), _mm256_add_pd(a.hi, b.hi)};
}
static inline vd vd_mul(vd a, vd b) {
    return (vd){_mm256_mul_pd(a.lo, b.lo), _mm256_mul_pd(a.hi, b.hi)};
}
static inline void vd_store(double *p, vd a) {
    _mm256_storeu_pd(p, a.lo);
    _mm256_storeu_pd(p + 4, a.hi);
}
