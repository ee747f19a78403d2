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

void gemm1_ldb_f64(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double *A,
                   const double *B, int64_t ldb, double *C, bool accumulate) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double sum = accumulate ? C[i * N + j] : 0;
            for (int64_t k = 0; k < K; k++)
                sum += (ta ? A[k * M + i] : A[i * K + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]);
            C[i * N + j] = sum;
        }
}
