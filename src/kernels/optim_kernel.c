/* optim_kernel.c - the optimizers' loops, over every parameter in one call: the squared gradient
 * norm, and the SGD, momentum and Adam updates.
 *
 * Each parameter is cut into OPTIM_PARTS fixed parts, and the parts are the parallel work:
 * one call forks once for the whole model, not once per parameter. A part's sum of squares is
 * taken by one thread and the parts are added in order, so the norm (and with clipping the
 * update) is the same for any thread count; the updates are elementwise. */
#include "isa.h"

#include <math.h>

#define OPTIM_PARTS 8
#define PARALLEL_ELEMS 16384 /* below this the loops take a few µs: not worth a fork */

/* Part p of n elements: [lo, hi). */
static void part_range(int64_t n, int p, int64_t *lo, int64_t *hi) {
    *lo = n * p / OPTIM_PARTS;
    *hi = n * (p + 1) / OPTIM_PARTS;
}

/* f32: the loops of the ISA in use (isa_kernels.inc) */
#define T float
#define SUF f32
#define SUM_SQUARES kernel_isa_active()->sum_squares
#define UPDATE_PART kernel_isa_active()->optim_update_part
#include "optim_kernel.inc"
#undef T
#undef SUF
#undef SUM_SQUARES
#undef UPDATE_PART

/* f64: the same loops, compiled here */
#define T double
#define SQRT sqrt
#define OPT(name) name##_f64
#include "optim_part.inc"
#undef OPT
#define SUF f64
#define SUM_SQUARES sum_squares_f64
#define UPDATE_PART update_part_f64
#include "optim_kernel.inc"
#undef T
#undef SUF
#undef SQRT
#undef SUM_SQUARES
#undef UPDATE_PART
