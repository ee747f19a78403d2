/* cross_entropy_kernel.c - the row loops of the cross-entropy op, f32 and f64 from one body
 * (cross_entropy_kernel.inc): a stable log-sum-exp per row, and the softmax-minus-one-hot gradient. */
#include "kernels.h"
#include "simd.h"

#include <math.h>

#define T float
#define SUF f32
#define EXP fast_expf
#include "cross_entropy_kernel.inc"
#undef T
#undef SUF
#undef EXP

#define T double
#define SUF f64
#define EXP exp
#include "cross_entropy_kernel.inc"
#undef T
#undef SUF
#undef EXP
