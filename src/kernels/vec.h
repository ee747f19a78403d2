/* vec.h - the SIMD layer the f32 kernels are written over: one vector type, vf, of 16 float
 * lanes on every backend (one zmm with AVX-512, two ymm with AVX2, four q registers with NEON,
 * a plain array in C), so that a loop strides 16 and a reduction adds 16 partial results in
 * the same tree whatever the hardware. Each backend gives the same bits for every operation:
 * vf_fma is always fused (fmaf in plain C), vf_max(a, b) is a > b ? a : b (NaN in a gives b),
 * vf_round rounds to nearest even, and vf_reduce_add sums lanes i and i + 8, then i and i + 4,
 * i and i + 2, and the last two. That is what makes a model trained on one path equal, bit for
 * bit, to one trained on another (tests/isa_bits_test.sh).
 *
 * Included by the isa_*.c files with one of VEC_AVX512, VEC_AVX2, VEC_NEON defined (plain C
 * otherwise); each of those files is compiled for its ISA (CMakeLists.txt).
 *
 * Backend operations (vf a, b, c, x; float *p; int n in [0, 16]):
 *   vf_zero() vf_set1(s) vf_load(p) vf_store(p, a)
 *   vf_load_n(p, n, fill)  lanes < n from p, the others `fill` (nothing read past p[n-1])
 *   vf_store_n(p, a, n)    lanes < n to p (nothing written past p[n-1])
 *   vf_add vf_sub vf_mul vf_div vf_sqrt vf_max vf_min
 *   vf_fma(a, b, c) = a·b + c, vf_fnma(a, b, c) = c − a·b, each rounded once
 *   vf_round(a)            to the nearest integer, ties to even
 *   vf_ldexp(a, n)         a·2^n for integer n in [-126, 127]
 *   vf_zero_below(a, x, s) lanes where x < s (not NaN) become 0
 *   vf_reduce_add(a), vf_reduce_max(a): the fixed tree above
 * and vd, 8 double lanes, for sums in double (vd d, e; double *q):
 *   vd_zero() vd_lo(a) vd_hi(a)   lanes 0-7 and 8-15 of a, widened
 *   vd_add(d, e) vd_mul(d, e) vd_store(q, d) */
#ifndef QKV_VEC_H
#define QKV_VEC_H

#include "simd.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(VEC_AVX512)
#include "vec_avx512.h"
#elif defined(VEC_AVX2)
#include "vec_avx2.h"
#elif defined(VEC_NEON)
#include "vec_neon.h"
#else
#include "vec_scalar.h"
#endif

/* exp_f32 (simd.h) on 16 lanes: the same operations in the same order, so the same bits. */
static inline vf vf_exp(vf x) {
    vf xc = vf_min(vf_set1(EXP_HI), vf_max(vf_set1(EXP_LO), x)); /* NaN stays NaN */
    vf n = vf_round(vf_mul(xc, vf_set1(EXP_LOG2E)));
    vf r = vf_fnma(n, vf_set1(EXP_LN2_HI), xc);
    r = vf_fnma(n, vf_set1(EXP_LN2_LO), r);
    vf p = vf_set1(EXP_P5);
    p = vf_fma(p, r, vf_set1(EXP_P4));
    p = vf_fma(p, r, vf_set1(EXP_P3));
    p = vf_fma(p, r, vf_set1(EXP_P2));
    p = vf_fma(p, r, vf_set1(EXP_P1));
    p = vf_fma(p, r, vf_set1(EXP_P0));
    p = vf_fma(vf_mul(p, r), r, vf_add(r, vf_set1(1.0f)));
    return vf_zero_below(vf_ldexp(p, n), x, vf_set1(EXP_LO));
}

#endif
