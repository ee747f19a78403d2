/* attention_kernel_f32.c - the fused attention kernels for float: attention_kernel.inc over the
 * packed product of sgemm.c and the tile loops of the ISA in use (isa_kernels.inc). */
#include "isa.h"

typedef float T;
#include "attention_kernel.inc"

static inline size_t gemm_packed_floats(int64_t N, int64_t K) {
    return gemm_packed_floats_f32(N, K);
}
static inline bool gemm_packed_is_plain(int64_t N) { return gemm_packed_is_plain_f32(N); }
static inline void gemm_pack(float *bp, bool tb, int64_t N, int64_t K, const float *B,
                             int64_t ldb) {
    gemm_pack_f32(bp, tb, N, K, B, ldb);
}
static inline void gemm1_packed(bool ta, int64_t M, int64_t N, int64_t K, const float *A,
                                int64_t lda, const float *bp, int64_t ldb, float *C, int64_t ldc,
                                bool accumulate) {
    gemm1_packed_f32(ta, M, N, K, A, lda, bp, ldb, C, ldc, accumulate);
}

/* The tile loops: the ISA's, written over vec.h in isa_kernels.inc. */
static inline void online_softmax(const attention_dims *d, float *s, int64_t br, int64_t bc,
                                  const float *mask, int64_t g, int64_t i0, int64_t j0,
                                  float *m, float *l, float *acc, float *scaled) {
    kernel_isa_active()->online_softmax(d, s, br, bc, mask, g, i0, j0, m, l, acc, scaled);
}
static inline void recompute_probs(const attention_dims *d, float *p, int64_t br, int64_t bc,
                                   const float *mask, int64_t g, int64_t i0, int64_t j0,
                                   const float *lse, const float *lse_lo) {
    kernel_isa_active()->recompute_probs(d, p, br, bc, mask, g, i0, j0, lse, lse_lo);
}
static inline void score_grads(float *dp, const float *p, float *p_out, int64_t br, int64_t bc,
                               const float *inv, const float *D_hi, const float *D_lo,
                               float scale) {
    kernel_isa_active()->score_grads(dp, p, p_out, br, bc, inv, D_hi, D_lo, scale);
}
static inline void scale_rows(float *p_out, const float *p, int64_t br, int64_t bc,
                              const float *s) {
    kernel_isa_active()->scale_rows(p_out, p, br, bc, s);
}

/* Each row's Σ x·y and Σ x summed in double (the ISA's row_dot_sums), where each product of
 * two floats is exact, then split into hi + lo floats. */
static void row_terms(const float *x, const float *y, int64_t rows, int64_t n, float *dh,
                      float *dl, float *sh, float *sl) {
    double dot[BR], sum[BR];
    kernel_isa_active()->row_dot_sums(x, y, rows, n, dot, sum);
    for (int64_t r = 0; r < rows; r++) {
        dh[r] = (float)dot[r], dl[r] = (float)(dot[r] - dh[r]);
        sh[r] = (float)sum[r], sl[r] = (float)(sum[r] - sh[r]);
    }
}

/* ---- the kernels of kernels.h ---- */

size_t attention_scratch_size_f32(const attention_dims *d, int threads, bool backward) {
    return attention_scratch_size(d, threads, backward);
}

void attention_forward_f32(const attention_dims *d, float *o, float *lse, const float *q,
                           const float *k, const float *v, const float *mask, void *scratch) {
    attention_forward(d, o, lse, q, k, v, mask, scratch);
}

void attention_backward_f32(const attention_dims *d, float *dq, float *dk, float *dv,
                            const float *dout, const float *o, const float *lse, const float *q,
                            const float *k, const float *v, const float *mask, void *scratch) {
    attention_backward(d, dq, dk, dv, dout, o, lse, q, k, v, mask, scratch);
}
