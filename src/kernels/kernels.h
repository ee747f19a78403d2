/* kernels.h - plain loops over float/double arrays. SIMD and OpenMP live here and nowhere else.
 * Every kernel exists as _f32 and _f64, compiled from one body (the .inc beside it). */
#ifndef QKV_KERNELS_H
#define QKV_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

/* C[b] (+)= op(A[b]) · op(B[b]) for b < batch, where op transposes when asked.
 * A[b] is (M, K), or (K, M) when ta; B[b] is (K, N), or (N, K) when tb; C[b] is (M, N).
 * a_stride/b_stride/c_stride are the element distances between batches (0 shares a matrix).
 * accumulate adds into C instead of overwriting it. Each row of C is computed by one thread
 * in a fixed order, so the result does not depend on the thread count. */
#define GEMM_DECL(T, SUF)                                                                  \
    void gemm_##SUF(bool ta, bool tb, int64_t batch, int64_t M, int64_t N, int64_t K,     \
                    const T *A, int64_t a_stride, const T *B, int64_t b_stride, T *C,      \
                    int64_t c_stride, bool accumulate);
GEMM_DECL(float, f32)
GEMM_DECL(double, f64)
/* The f32 micro-kernel in use: "avx512", "avx2" or "portable" (QKV_SIMD forces one). */
const char *sgemm_kernel_name(void);

/* Row-wise softmax over rows of length n: y = exp(x - max) / sum. A row that is entirely -inf
 * gives zeros. Backward: dx += y ⊙ (dy − Σ dy⊙y), never forming the n×n Jacobian. */
#define SOFTMAX_DECL(T, SUF)                                                               \
    void softmax_forward_##SUF(T *y, const T *x, int64_t rows, int64_t n);                 \
    void softmax_backward_##SUF(T *dx, const T *y, const T *dy, int64_t rows, int64_t n);
SOFTMAX_DECL(float, f32)
SOFTMAX_DECL(double, f64)

#endif
