/* simd.h - what the kernels' vectorised loops share: an exp that vectorises, and the
 * attribute that compiles a loop for AVX-512, AVX2 and the baseline, chosen at load time. */
#ifndef QKV_SIMD_H
#define QKV_SIMD_H
#include <stdint.h>

/* exp for f32 without a library call, so that loops over rows and tiles vectorise:
 * exp(x) = 2^n·e^r with |r| <= ln2/2 and a degree-7 polynomial for e^r (relative error
 * ~1e-7, as expf). Inputs below -87 (and -inf, a masked score) give exactly 0; NaN gives NaN,
 * so that a diverged model's NaN reaches its loss. Callers pass x <= 88 (scores minus their
 * max). */
static inline float fast_expf(float x) {
    float xc = x < -87.0f ? -87.0f : x > 88.0f ? 88.0f : x;
    /* n = round(xc·log2 e) by the 1.5·2^23 trick: plain adds, which vectorise everywhere */
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - n * 0.693359375f + n * 2.12194440e-4f; /* ln2 split in two for accuracy */
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f; /* NaN when x is */
    float e = n == n ? n : 0.0f; /* converting a NaN to int would be undefined */
    union { int32_t i; float f; } two_n = {.i = ((int32_t)e + 127) << 23};
    return x < -87.0f ? 0.0f : p * two_n.f;
}

/* A loop function compiled for AVX-512, AVX2 and the baseline, chosen at load time. */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(__clang__)
#define SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SIMD_CLONES
#endif

#endif
