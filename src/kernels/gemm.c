/* gemm.c - the f64 matrix multiply, for gradient checks: simple loops, exact enough to
 * compare with finite differences. (The f32 one, built for speed, is sgemm.c.) */
#include "kernels.h"

#define T double
#define SUF f64
#include "gemm.inc"
#undef T
#undef SUF

/* The f64 "packed" op(B) is plain op(B), K rows of N. */
size_t gemm_packed_floats_f64(int64_t N, int64_t K) { return (size_t)(N * K); }

bool gemm_packed_is_plain_f64(int64_t N) {
    (void)N;
    return true;
}

void gemm_pack_f64(double *bp, bool tb, int64_t N, int64_t K, const double *B, int64_t ldb) {
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < N; j++) bp[k * N + j] = tb ? B[j * ldb + k] : B[k * ldb + j];
}

void gemm1_packed_f64(bool ta, int64_t M, int64_t N, int64_t K, const double *A,
                      const double *bp, double *C, bool accumulate) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double sum = accumulate ? C[i * N + j] : 0;
            for (int64_t k = 0; k < K; k++) sum += (ta ? A[k * M + i] : A[i * K + k]) * bp[k * N + j];
            C[i * N + j] = sum;
        }
}
