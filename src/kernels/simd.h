/* simd.h - what the kernels' vectorised loops share: an exp that vectorises (and its
 * constants, for the 16-lane form in attention_kernel.c), the lanes of a 16-wide step, and the
 * attribute that compiles a loop for AVX-512, AVX2 and the baseline, chosen at load time. */
#ifndef QKV_SIMD_H
#define QKV_SIMD_H
#include <stdint.h>

/* exp for f32 without a library call, so that loops over rows and tiles vectorise:
 * exp(x) = 2^n·e^r with |r| <= ln2/2 and a degree-7 polynomial for e^r (relative error
 * ~1e-7, as expf). Inputs below -87 (and -inf, a masked score) give exactly 0; NaN gives NaN,
 * so that a diverged model's NaN reaches its loss. Callers pass x <= 88 (scores minus their
 * max). */
#define EXP_LO (-87.0f) /* below: 0 */
#define EXP_HI 88.0f
#define EXP_LOG2E 1.44269504088896341f
#define EXP_LN2_HI 0.693359375f    /* ln 2 in two parts, so that n·ln2 is subtracted exactly */
#define EXP_LN2_LO (-2.12194440e-4f)
#define EXP_P5 1.9875691500e-4f    /* e^r ≈ 1 + r + r²·(P0 + P1·r + … + P5·r⁵) */
#define EXP_P4 1.3981999507e-3f
#define EXP_P3 8.3334519073e-3f
#define EXP_P2 4.1665795894e-2f
#define EXP_P1 1.6666665459e-1f
#define EXP_P0 5.0000001201e-1f

static inline float fast_expf(float x) {
    float xc = x < EXP_LO ? EXP_LO : x > EXP_HI ? EXP_HI : x;
    /* n = round(xc·log2 e) by the 1.5·2^23 trick: plain adds, which vectorise everywhere */
    float n = (xc * EXP_LOG2E + 12582912.0f) - 12582912.0f;
    float r = xc - n * EXP_LN2_HI - n * EXP_LN2_LO;
    float p = EXP_P5;
    p = p * r + EXP_P4;
    p = p * r + EXP_P3;
    p = p * r + EXP_P2;
    p = p * r + EXP_P1;
    p = p * r + EXP_P0;
    p = p * r * r + r + 1.0f; /* NaN when x is */
    float e = n == n ? n : 0.0f; /* converting a NaN to int would be undefined */
    union { int32_t i; float f; } two_n = {.i = ((int32_t)e + 127) << 23};
    return x < EXP_LO ? 0.0f : p * two_n.f;
}

/* The lanes [c, min(c + 16, n)) of a 16-wide step along n elements, as a bit mask. */
static inline uint16_t lane_mask(int64_t c, int64_t n) {
    return n - c >= 16 ? (uint16_t)0xffff : (uint16_t)((1u << (n - c)) - 1);
}

/* A loop function compiled for AVX-512, AVX2 and the baseline, chosen at load time. */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(__clang__)
#define SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SIMD_CLONES
#endif

#endif
