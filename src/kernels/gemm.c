/* gemm.c - the f64 matrix multiply, for gradient checks: simple loops, exact enough to
 * compare with finite differences. (The f32 one, built for speed, is sgemm.c.) */
#include "kernels.h"

#define T double
#define SUF f64
#include "gemm.inc"
#undef T
#undef SUF

void gemm1_f64(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double *A,
               const double *B, double *C, bool accumulate) {
    gemm_f64(ta, tb, 1, M, N, K, A, 0, B, 0, C, 0, accumulate);
}
