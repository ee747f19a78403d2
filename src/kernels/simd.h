/* simd.h - the one f32 exp of the kernels, on one lane (vec.h has it on 16, with the same
 * operations in the same order: the same bits), and the two steps it is made of.
 *
 * exp(x) = 2^n·e^r with n = round(x·log2 e), |r| <= ln2/2, and a degree-7 polynomial for e^r
 * (relative error ~1e-7, as expf), every multiply-add fused. Inputs below -87 (and -inf, a
 * masked score) give exactly 0; NaN gives NaN, so that a diverged model's NaN reaches its
 * loss. Callers pass x <= 88 (scores minus their max); larger x is taken as 88. */
#ifndef QKV_SIMD_H
#define QKV_SIMD_H
#include <math.h>
#include <stdint.h>

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

/* x rounded to the nearest integer, ties to even, for |x| < 2^22 (and NaN stays NaN): adding
 * and taking away 1.5·2^23 leaves no fraction bits. */
static inline float round_even_f32(float x) { return (x + 12582912.0f) - 12582912.0f; }

/* 2^n for an integer n in [-126, 127], built in the exponent field; NaN gives 1 (the caller's
 * other factor is NaN then), as converting a NaN to int would be undefined. */
static inline float pow2_f32(float n) {
    union { int32_t i; float f; } two_n = {.i = ((int32_t)(n == n ? n : 0.0f) + 127) * (1 << 23)};
    return two_n.f;
}

static inline float exp_f32(float x) {
    float xc = EXP_LO > x ? EXP_LO : x;
    xc = EXP_HI < xc ? EXP_HI : xc; /* NaN stays NaN */
    float n = round_even_f32(xc * EXP_LOG2E);
    float r = fmaf(-n, EXP_LN2_HI, xc);
    r = fmaf(-n, EXP_LN2_LO, r);
    float p = EXP_P5;
    p = fmaf(p, r, EXP_P4);
    p = fmaf(p, r, EXP_P3);
    p = fmaf(p, r, EXP_P2);
    p = fmaf(p, r, EXP_P1);
    p = fmaf(p, r, EXP_P0);
    p = fmaf(p * r, r, r + 1.0f);
    return x < EXP_LO ? 0.0f : p * pow2_f32(n);
}

#endif
