/* vec_avx512.h - the AVX-512 backend of vec.h: one zmm register, masked loads and stores.
 *
 * Built with QKV_SIMD_EMULATE (CMakeLists.txt: -DQKV_SIMD_EMULATE=ON), the same code runs over
 * SIMDe's AVX-512 (Debian's libsimde-dev) on an AVX2 + FMA CPU, each _mm512_ call becoming
 * its SIMDe form (native aliases) on two ymm registers, so that this path's tests run on a CPU
 * without AVX-512, bit for bit as on one with it (.ci/run's emulated stage). -mfma is what keeps
 * SIMDe's fmadd one rounding. SIMDe 0.7.4 lacks the three intrinsics below marked "emulated":
 * their stand-ins read and write only the lanes the native ones do, and widen exactly. */
#ifdef QKV_SIMD_EMULATE
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#else
#include <immintrin.h>
#endif

typedef __m512 vf;

static inline __mmask16 vf_first_(int n) { /* lanes below n */
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}
static inline vf vf_zero(void) { return _mm512_setzero_ps(); }
static inline vf vf_set1(float s) { return _mm512_set1_ps(s); }
static inline vf vf_load(const float *p) { return _mm512_loadu_ps(p); }
static inline void vf_store(float *p, vf a) { _mm512_storeu_ps(p, a); }
#ifndef QKV_SIMD_EMULATE
static inline vf vf_load_n(const float *p, int n, float fill) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), vf_first_(n), p);
}
static inline void vf_store_n(float *p, vf a, int n) { _mm512_mask_storeu_ps(p, vf_first_(n), a); }
#else /* emulated: lanes < n through a buffer, nothing past p[n-1] read or written */
static inline vf vf_load_n(const float *p, int n, float fill) {
    float lane[16];
    for (int i = 0; i < 16; i++) lane[i] = i < n ? p[i] : fill;
    return _mm512_loadu_ps(lane);
}
static inline void vf_store_n(float *p, vf a, int n) {
    float lane[16];
    _mm512_storeu_ps(lane, a);
    memcpy(p, lane, (size_t)n * sizeof *p);
}
#endif
static inline vf vf_add(vf a, vf b) { return _mm512_add_ps(a, b); }
static inline vf vf_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
static inline vf vf_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
static inline vf vf_div(vf a, vf b) { return _mm512_div_ps(a, b); }
static inline vf vf_sqrt(vf a) { return _mm512_sqrt_ps(a); }
static inline vf vf_max(vf a, vf b) { return _mm512_max_ps(a, b); } /* a > b ? a : b */
static inline vf vf_min(vf a, vf b) { return _mm512_min_ps(a, b); } /* a < b ? a : b */
static inline vf vf_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
static inline vf vf_fnma(vf a, vf b, vf c) { return _mm512_fnmadd_ps(a, b, c); }
static inline vf vf_round(vf a) {
    return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
static inline vf vf_ldexp(vf a, vf n) { return _mm512_scalef_ps(a, n); }
static inline vf vf_zero_below(vf a, vf x, vf s) {
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, s, _CMP_NLT_UQ), a);
}

/* The tree of vec.h: halves of 8, 4, 2, 1 lanes. */
static inline float vf_reduce_add(vf a) {
    __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(a),
                              _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

static inline float vf_reduce_max(vf a) {
    __m256 s8 = _mm256_max_ps(_mm512_castps512_ps256(a),
                              _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    __m128 s4 = _mm_max_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_max_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_max_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

/* 8 double lanes: the widened halves of a vf, for sums in double. */
typedef __m512d vd;
static inline vd vd_zero(void) { return _mm512_setzero_pd(); }
#ifndef QKV_SIMD_EMULATE
static inline vd vd_lo(vf a) { return _mm512_cvtps_pd(_mm512_castps512_ps256(a)); }
static inline vd vd_hi(vf a) {
    return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
}
#else /* emulated: each lane widened (exact, as the native conversion) */
static inline vd vd_widen_(vf a, int first) {
    float f[16];
    double d[8];
    _mm512_storeu_ps(f, a);
    for (int i = 0; i < 8; i++) d[i] = (double)f[first + i];
    return _mm512_loadu_pd(d);
}
static inline vd vd_lo(vf a) { return vd_widen_(a, 0); }
static inline vd vd_hi(vf a) { return vd_widen_(a, 8); }
#endif
static inline vd vd_add(vd a, vd b) { return _mm512_add_pd(a, b); }
static inline vd vd_mul(vd a, vd b) { return _mm512_mul_pd(a, b); }
static inline void vd_store(double *p, vd a) { _mm512_storeu_pd(p, a); }
