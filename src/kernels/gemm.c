/* gemm.c - the f64 matrix multiply, for gradient checks: simple loops, exact enough to
 * compare with finite differences. (The f32 one, built for speed, is sgemm.c.) */
#include "kernels.h"

/* Row r of the batched C = op(A)·op(B): row r % M of batch r / M. */
static void gemm_row_f64(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double *A,
                         int64_t a_stride, const double *B, int64_t b_stride, double *C,
                         int64_t c_stride, bool accumulate, int64_t r) {
    int64_t b = r / M, i = r % M;
    const double *a = A + b * a_stride, *bm = B + b * b_stride;
    double *c = C + b * c_stride + i * N;
    if (!accumulate)
        for (int64_t j = 0; j < N; j++) c[j] = 0;
    if (!tb) {
        /* c[j] += Σ_k a(i,k) · B[k][j], streaming rows of B */
        for (int64_t k = 0; k < K; k++) {
            double aik = ta ? a[k * M + i] : a[i * K + k];
            const double *brow = bm + k * N;
            for (int64_t j = 0; j < N; j++) c[j] += aik * brow[j];
        }
    } else {
        /* c[j] += Σ_k a(i,k) · B[j][k], a dot product with row j of B */
        for (int64_t j = 0; j < N; j++) {
            const double *brow = bm + j * K;
            double sum = 0;
            if (ta)
                for (int64_t k = 0; k < K; k++) sum += a[k * M + i] * brow[k];
            else
                for (int64_t k = 0; k < K; k++) sum += a[i * K + k] * brow[k];
            c[j] += sum;
        }
    }
}

void gemm_f64(bool ta, bool tb, int64_t batch, int64_t M, int64_t N, int64_t K, const double *A,
              int64_t a_stride, const double *B, int64_t b_stride, double *C, int64_t c_stride,
              bool accumulate) {
    int64_t rows = batch * M;
    profile_part was = profile_enter(PROFILE_PRODUCTS);
    /* One C row per iteration: rows never overlap, so threads never write the same memory. */
    KERNEL_FOR_STATIC(kernel_team((double)(rows * N * K), 32768), r, rows,
                      gemm_row_f64(ta, tb, M, N, K, A, a_stride, B, b_stride, C, c_stride,
                                   accumulate, r););
    profile_enter(was);
}

/* The f64 "packed" op(B) is plain op(B), K rows of N. */
size_t gemm_packed_floats_f64(int64_t N, int64_t K) { return (size_t)(N * K); }

bool gemm_packed_is_plain_f64(int64_t N) {
    (void)N;
    return true;
}

void gemm_pack_f64(double *bp, bool tb, int64_t N, int64_t K, const double *B, int64_t ldb) {
    profile_part was = profile_enter(PROFILE_LAYOUT);
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < N; j++) bp[k * N + j] = tb ? B[j * ldb + k] : B[k * ldb + j];
    profile_enter(was);
}

void gemm1_packed_f64(bool ta, int64_t M, int64_t N, int64_t K, const double *A, int64_t lda,
                      const double *bp, int64_t ldb, double *C, int64_t ldc, bool accumulate) {
    profile_part was = profile_enter(PROFILE_PRODUCTS);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double sum = accumulate ? C[i * ldc + j] : 0;
            for (int64_t k = 0; k < K; k++)
                sum += (ta ? A[k * lda + i] : A[i * lda + k]) * bp[k * ldb + j];
            C[i * ldc + j] = sum;
        }
    profile_enter(was);
}
