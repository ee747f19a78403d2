/* softmax_kernel.c - row-wise softmax kernels: the loop over rows for f32 and f64, the rows
 * themselves from the ISA in use for f32 (isa_kernels.inc) and from here for f64. */
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

/* One row per task; f32 takes each row from the ISA table in use (kernel_isa_active() is one
 * atomic load). */
void softmax_forward_f32(float *y, const float *x, int64_t rows, int64_t n) {
    KERNEL_FOR_STATIC(kernel_team((double)(rows * n), 16384), r, rows,
                      kernel_isa_active()->softmax_row(y + r * n, x + r * n, n););
}

void softmax_backward_f32(float *dx, const float *y, const float *dy, int64_t rows, int64_t n) {
    KERNEL_FOR_STATIC(kernel_team((double)(rows * n), 16384), r, rows,
                      kernel_isa_active()->softmax_backward_row(dx + r * n, y + r * n,
                                                                dy + r * n, n););
}

void softmax_forward_f64(double *y, const double *x, int64_t rows, int64_t n) {
    KERNEL_FOR_STATIC(kernel_team((double)(rows * n), 16384), r, rows,
                      softmax_row_f64(y + r * n, x + r * n, n););
}

void softmax_backward_f64(double *dx, const double *y, const double *dy, int64_t rows,
                          int64_t n) {
    KERNEL_FOR_STATIC(kernel_team((double)(rows * n), 16384), r, rows,
                      softmax_backward_row_f64(dx + r * n, y + r * n, dy + r * n, n););
}
