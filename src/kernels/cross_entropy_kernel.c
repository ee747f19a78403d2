/* cross_entropy_kernel.c - the row loops of the cross-entropy op: a stable log-sum-exp per row,
 * and the softmax-minus-one-hot gradient. The loop over rows for f32 and f64; the rows
 * themselves from the ISA in use for f32 (isa_kernels.inc) and from here for f64. */
#include "isa.h"
#include "kernels.h"

#include <math.h>

/* log Σ_j exp(x_j), the max taken out */
static double cross_entropy_row_f64(const double *x, int64_t n) {
    double max = -INFINITY, sum = 0;
    for (int64_t j = 0; j < n; j++) max = x[j] > max ? x[j] : max;
    for (int64_t j = 0; j < n; j++) sum += exp(x[j] - max);
    return max + log(sum);
}

/* dx += g·(softmax_j − [j = t]), in one expression: exact where softmax_j ≈ 1 cancels */
static void cross_entropy_backward_row_f64(double *dx, const double *x, int64_t n,
                                           int32_t target, double lse, double g) {
    for (int64_t j = 0; j < n; j++) dx[j] += g * (exp(x[j] - lse) - (double)(j == target));
}

/* Rows with a target, CE_BLOCK at a time: each row's max and 16 partial sums (the ISA's
 * cross_entropy_parts), then L = max + log Σ partials, the partials added in double in lane
 * order. Each row's sum is a chain of 16 dependent adds; a block's chains run side by side
 * (one row at a time, tiny's 256 rows of 16 logits took 51 ns a row, most of it that chain). */
#define CE_BLOCK 8
static void lse_block_f32(const kernel_isa *im, const float *x, const int32_t *targets,
                          int32_t ignore, int64_t rows, int64_t n, double *lse, int64_t r0) {
    float part[CE_BLOCK][16], max[CE_BLOCK];
    double sum[CE_BLOCK] = {0};
    int64_t row[CE_BLOCK];
    int k = 0;
    for (int64_t r = r0; r < rows && r < r0 + CE_BLOCK; r++)
        if (targets[r] != ignore) {
            row[k] = r;
            max[k] = im->cross_entropy_parts(x + r * n, n, part[k]);
            k++;
        }
    for (int e = 0; e < 16; e++)
        for (int i = 0; i < k; i++) sum[i] += (double)part[i][e];
    for (int i = 0; i < k; i++) lse[row[i]] = (double)max[i] + log(sum[i]);
}

/* The mean's numerator, Σ (L − x[target]) over the rows with a target, added in row order
 * (the rows' L come from several threads; the sum from one, so its bits do not depend on
 * them). */
static double total_loss(const float *xf, const double *xd, const int32_t *targets,
                         int32_t ignore, int64_t rows, int64_t n, const double *lse,
                         int64_t *count) { /* x: xf (f32) or xd (f64) */
    double total = 0;
    *count = 0;
    for (int64_t r = 0; r < rows; r++)
        if (targets[r] != ignore) {
            int64_t at = r * n + targets[r];
            total += lse[r] - (xf ? (double)xf[at] : xd[at]); /* -log p[target] */
            ++*count;
        }
    return total;
}

double cross_entropy_forward_f32(const float *x, const int32_t *targets, int32_t ignore,
                                 int64_t rows, int64_t n, double *lse, int64_t *count) {
    const kernel_isa *im = kernel_isa_active();
    KERNEL_FOR_STATIC(kernel_team((double)(rows * n), KERNEL_PARALLEL_ELEMS), b,
                      (rows + CE_BLOCK - 1) / CE_BLOCK,
                      lse_block_f32(im, x, targets, ignore, rows, n, lse, b * CE_BLOCK););
    return total_loss(x, NULL, targets, ignore, rows, n, lse, count);
}

void cross_entropy_backward_f32(float *dx, const float *x, const int32_t *targets,
                                int32_t ignore, int64_t rows, int64_t n, const double *lse,
                                double g) {
    const kernel_isa *im = kernel_isa_active();
    KERNEL_FOR_STATIC(kernel_team((double)(rows * n), KERNEL_PARALLEL_ELEMS), r, rows,
                      if (targets[r] != ignore)
                          im->cross_entropy_backward_row(dx + r * n, x + r * n, n, targets[r],
                                                         lse[r], (float)g););
}

double cross_entropy_forward_f64(const double *x, const int32_t *targets, int32_t ignore,
                                 int64_t rows, int64_t n, double *lse, int64_t *count) {
    KERNEL_FOR_STATIC(kernel_team((double)(rows * n), KERNEL_PARALLEL_ELEMS), r, rows,
                      if (targets[r] != ignore) lse[r] = cross_entropy_row_f64(x + r * n, n););
    return total_loss(NULL, x, targets, ignore, rows, n, lse, count);
}

void cross_entropy_backward_f64(double *dx, const double *x, const int32_t *targets,
                                int32_t ignore, int64_t rows, int64_t n, const double *lse,
                                double g) {
    KERNEL_FOR_STATIC(kernel_team((double)(rows * n), KERNEL_PARALLEL_ELEMS), r, rows,
                      if (targets[r] != ignore)
                          cross_entropy_backward_row_f64(dx + r * n, x + r * n, n, targets[r],
                                                         lse[r], g););
}
