/* cross_entropy_kernel.c - the row loops of the cross-entropy op: a stable log-sum-exp per row,
 * and the softmax-minus-one-hot gradient. f32 from the ISA in use (isa_kernels.inc), f64 here;
 * the same loop over rows for both (cross_entropy_kernel.inc). */
#include "isa.h"

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

#define T float
#define SUF f32
#define CE_ROW kernel_isa_active()->cross_entropy_row
#define CE_BACKWARD_ROW kernel_isa_active()->cross_entropy_backward_row
#include "cross_entropy_kernel.inc"
#undef T
#undef SUF
#undef CE_ROW
#undef CE_BACKWARD_ROW

#define T double
#define SUF f64
#define CE_ROW cross_entropy_row_f64
#define CE_BACKWARD_ROW cross_entropy_backward_row_f64
#include "cross_entropy_kernel.inc"
#undef T
#undef SUF
#undef CE_ROW
#undef CE_BACKWARD_ROW
