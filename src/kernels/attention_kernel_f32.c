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

/* ---- few keys: head by head (attention_few_keys) ---- */

#define FEW_KEYS_HEADS 64 /* heads a task takes: one head is well under a microsecond */

/* Every head of d through the ISA's few-keys forward (backward: false) or backward pass, in
 * tasks of FEW_KEYS_HEADS heads, each thread with its own scratch. The heads write disjoint
 * rows, so the bits do not depend on the threads. */
static void few_keys_heads(const attention_dims *d, bool backward, float *dq, float *dk,
                           float *dv, const float *dout, float *o, float *lse, const float *q,
                           const float *k, const float *v, const float *mask, void *scratch) {
    const kernel_isa *im = kernel_isa_active();
    double work = (double)d->G * (double)d->Nq * (double)d->Nk * (double)(d->Dk + d->Dv);
    int team = kernel_team(work, PARALLEL_WORK);
    int64_t tasks = (d->G + FEW_KEYS_HEADS - 1) / FEW_KEYS_HEADS;
    size_t per = attention_few_floats(d, backward);
    bool par = team > 1 && tasks > 1;
    KERNEL_FOR_DYNAMIC(team, t, tasks, {
        float *own = (float *)scratch + (size_t)thread_id(par) * per;
        int64_t end = (t + 1) * FEW_KEYS_HEADS < d->G ? (t + 1) * FEW_KEYS_HEADS : d->G;
        for (int64_t g = t * FEW_KEYS_HEADS; g < end; g++) {
            if (backward)
                im->few_keys_backward(d, dq, dk, dv, dout, lse, q, k, v, mask, g, own);
            else
                im->few_keys_forward(d, o, lse, q, k, v, mask, g, own);
        }
    });
}

/* ---- the kernels of kernels.h ---- */

size_t attention_scratch_size_f32(const attention_dims *d, int threads, bool backward) {
    if (attention_few_keys(d, backward))
        return (size_t)threads * attention_few_floats(d, backward) * sizeof(float);
    return attention_scratch_size(d, threads, backward);
}

void attention_forward_f32(const attention_dims *d, float *o, float *lse, const float *q,
                           const float *k, const float *v, const float *mask, void *scratch) {
    if (attention_few_keys(d, false))
        few_keys_heads(d, false, NULL, NULL, NULL, NULL, o, lse, q, k, v, mask, scratch);
    else
        attention_forward(d, o, lse, q, k, v, mask, scratch);
}

void attention_backward_f32(const attention_dims *d, float *dq, float *dk, float *dv,
                            const float *dout, const float *o, const float *lse, const float *q,
                            const float *k, const float *v, const float *mask, void *scratch) {
    if (attention_few_keys(d, true))
        few_keys_heads(d, true, dq, dk, dv, dout, NULL, (float *)lse, q, k, v, mask, scratch);
    else
        attention_backward(d, dq, dk, dv, dout, o, lse, q, k, v, mask, scratch);
}
