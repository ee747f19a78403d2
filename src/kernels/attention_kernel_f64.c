/* attention_kernel_f64.c - the fused attention kernels for double, for gradient checks and f64
 * models: attention_kernel.inc over the plain products of gemm.c and the tile loops below
 * (plain C; the f32 ones are the ISA's, in isa_kernels.inc, with the same meaning). */
#include "kernels.h"

typedef double T;
#include "attention_kernel.inc"

/* The products: gemm.c's, whose "packed" op(B) is op(B) itself. */
static inline size_t gemm_packed_floats(int64_t N, int64_t K) {
    return gemm_packed_floats_f64(N, K);
}
static inline bool gemm_packed_is_plain(int64_t N) { return gemm_packed_is_plain_f64(N); }
static inline void gemm_pack(double *bp, bool tb, int64_t N, int64_t K, const double *B,
                             int64_t ldb) {
    gemm_pack_f64(bp, tb, N, K, B, ldb);
}
static inline void gemm1_packed(bool ta, int64_t M, int64_t N, int64_t K, const double *A,
                                int64_t lda, const double *bp, int64_t ldb, double *C, int64_t ldc,
                                bool accumulate) {
    gemm1_packed_f64(ta, M, N, K, A, lda, bp, ldb, C, ldc, accumulate);
}

/* ---- the tile loops (attention_kernel.inc says what each does) ---- */

/* Row r of a tile of raw scores as S = scale·s + mask, in place (see attention_kernel.inc). */
static inline void scale_and_mask_row(const attention_dims *d, double *row, int64_t bc,
                                      const double *mask, int64_t g, int64_t i, int64_t j0) {
    double scale = (double)d->scale;
    if (!mask) {
        for (int64_t c = 0; c < bc; c++) row[c] *= scale;
        return;
    }
    const double *m = mask + attention_mask_offset(d, g, i, j0);
    for (int64_t c = 0; c < bc; c++) row[c] = row[c] * scale + m[c * d->ms[3]];
}

/* Max and sum of a row with 16 partial results, so that the loops vectorise (a single running
 * value would be a serial chain); the order is fixed, so the result is too. */
static inline double row_max(const double *x, int64_t n, double init) {
    double part[16];
    for (int j = 0; j < 16; j++) part[j] = init;
    int64_t c = 0;
    for (; c + 16 <= n; c += 16)
        for (int j = 0; j < 16; j++) part[j] = x[c + j] > part[j] ? x[c + j] : part[j];
    for (; c < n; c++) part[0] = x[c] > part[0] ? x[c] : part[0];
    double mx = part[0];
    for (int j = 1; j < 16; j++) mx = part[j] > mx ? part[j] : mx;
    return mx;
}

static inline double row_sum(const double *x, int64_t n) {
    double part[16] = {0};
    int64_t c = 0;
    for (; c + 16 <= n; c += 16)
        for (int j = 0; j < 16; j++) part[j] += x[c + j];
    for (; c < n; c++) part[0] += x[c];
    double sum = 0;
    for (int j = 0; j < 16; j++) sum += part[j];
    return sum;
}

static void online_softmax(const attention_dims *d, double *s, int64_t br, int64_t bc,
                           const double *mask, int64_t g, int64_t i0, int64_t j0, double *m,
                           double *l, double *acc, double *scaled) {
    int64_t Dv = d->Dv;
    for (int64_t r = 0; r < br; r++) {
        double *row = s + r * bc;
        scale_and_mask_row(d, row, bc, mask, g, i0 + r, j0);
        if (scaled) memcpy(scaled + r * bc, row, (size_t)bc * sizeof *row);
        double mx = row_max(row, bc, m[r]);
        if (mx == -INFINITY) { /* every key so far is masked */
            for (int64_t c = 0; c < bc; c++) row[c] = 0;
            continue;
        }
        double alpha = exp(m[r] - mx); /* exp(-inf) = 0 on the first tile */
        for (int64_t c = 0; c < bc; c++) row[c] = exp(row[c] - mx);
        l[r] = l[r] * alpha + row_sum(row, bc);
        m[r] = mx;
        for (int64_t c = 0; c < Dv; c++) acc[r * Dv + c] *= alpha;
    }
}

static void recompute_probs(const attention_dims *d, double *p, int64_t br, int64_t bc,
                            const double *mask, int64_t g, int64_t i0, int64_t j0,
                            const double *lse, const double *lse_lo) {
    for (int64_t r = 0; r < br; r++) {
        double *row = p + r * bc, L = lse[r], lo = lse_lo ? lse_lo[r] : 0;
        if (L == -INFINITY) { /* a fully masked row */
            for (int64_t c = 0; c < bc; c++) row[c] = 0;
            continue;
        }
        scale_and_mask_row(d, row, bc, mask, g, i0 + r, j0);
        for (int64_t c = 0; c < bc; c++) row[c] = exp((row[c] - L) - lo);
    }
}

static void score_grads(double *dp, const double *p, double *p_out, int64_t br, int64_t bc,
                        const double *inv, const double *D_hi, const double *D_lo,
                        double scale) {
    for (int64_t r = 0; r < br; r++) {
        const double *pr = p + r * bc;
        double *dr = dp + r * bc, *po = p_out + r * bc;
        if (inv) {
            for (int64_t c = 0; c < bc; c++) po[c] = pr[c] * inv[r];
            pr = po;
        }
        for (int64_t c = 0; c < bc; c++) dr[c] = pr[c] * ((dr[c] - D_hi[r]) - D_lo[r]) * scale;
    }
}

static void scale_rows(double *p_out, const double *p, int64_t br, int64_t bc, const double *s) {
    for (int64_t r = 0; r < br; r++)
        for (int64_t c = 0; c < bc; c++) p_out[r * bc + c] = p[r * bc + c] * s[r];
}

/* Each row's Σ x·y and Σ x as hi + lo, with Dot2's error terms (dot2, two_sum). */
static inline void row_terms(const double *x, const double *y, int64_t rows, int64_t n,
                             double *dh, double *dl, double *sh, double *sl) {
    for (int64_t r = 0; r < rows; r++, x += n, y += n) {
        double ones_hi = 0, ones_lo = 0;
        dot2(x, y, n, &dh[r], &dl[r]);
        for (int64_t c = 0; c < n; c++) {
            double hi, lo;
            two_sum(ones_hi, x[c], &hi, &lo);
            ones_hi = hi, ones_lo += lo;
        }
        sh[r] = ones_hi, sl[r] = ones_lo;
    }
}

/* ---- the kernels of kernels.h ---- */

size_t attention_scratch_size_f64(const attention_dims *d, int threads, bool backward) {
    return attention_scratch_size(d, threads, backward);
}

void attention_forward_f64(const attention_dims *d, double *o, double *lse, const double *q,
                           const double *k, const double *v, const double *mask, void *scratch) {
    attention_forward(d, o, lse, q, k, v, mask, scratch);
}

void attention_backward_f64(const attention_dims *d, double *dq, double *dk, double *dv,
                            const double *dout, const double *o, const double *lse,
                            const double *q, const double *k, const double *v,
                            const double *mask, void *scratch) {
    attention_backward(d, dq, dk, dv, dout, o, lse, q, k, v, mask, scratch);
}
