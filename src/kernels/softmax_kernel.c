/* softmax_kernel.c - row-wise softmax kernels, f32 and f64 from one body. */
#include "kernels.h"

#include <math.h>

#define T float
#define SUF f32
#define EXP expf
#include "softmax_kernel.inc"
#undef T
#undef SUF
#undef EXP

#define T double
#define SUF f64
#define EXP exp
#include "softmax_kernel.inc"
#undef T
#undef SUF
#undef EXP
