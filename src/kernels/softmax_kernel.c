/* softmax_kernel.c - row-wise softmax kernels: f32 from the ISA in use (isa_kernels.inc), f64
 * here; the same loop over rows for both (softmax_kernel.inc). */
#include "isa.h"

#include <math.h>

static void softmax_row_f64(double *y, const double *x, int64_t n) {
    double max = -INFINITY;
    for (int64_t j = 0; j < n; j++) max = x[j] > max ? x[j] : max;
    if (max == -INFINITY) { /* fully masked row: zero weights, not 0/0 */
        for (int64_t j = 0; j < n; j++) y[j] = 0;
        return;
    }
    double sum = 0;
    for (int64_t j = 0; j < n; j++) sum += (y[j] = exp(x[j] - max));
    double inv = 1 / sum;
    for (int64_t j = 0; j < n; j++) y[j] *= inv;
}

/* forward was: y = softmax(x)  =>  dx += y ⊙ (dy − <dy, y>) */
static void softmax_backward_row_f64(double *dx, const double *y, const double *dy, int64_t n) {
    double dot = 0;
    for (int64_t j = 0; j < n; j++) dot += dy[j] * y[j];
    for (int64_t j = 0; j < n; j++) dx[j] += y[j] * (dy[j] - dot);
}

#define T float
#define SUF f32
#define SOFTMAX_ROW kernel_isa_active()->softmax_row
#define SOFTMAX_BACKWARD_ROW kernel_isa_active()->softmax_backward_row
#include "softmax_kernel.inc"
#undef T
#undef SUF
#undef SOFTMAX_ROW
#undef SOFTMAX_BACKWARD_ROW

#define T double
#define SUF f64
#define SOFTMAX_ROW softmax_row_f64
#define SOFTMAX_BACKWARD_ROW softmax_backward_row_f64
#include "softmax_kernel.inc"
#undef T
#undef SUF
#undef SOFTMAX_ROW
#undef SOFTMAX_BACKWARD_ROW
