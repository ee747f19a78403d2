/* gemm.c - the f64 matrix multiply, for gradient checks: simple loops, exact enough to
 * compare with finite differences. (The f32 one, built for speed, is sgemm.c.) */
#include "kernels.h"

#define T double
#define SUF f64
#include "gemm.inc"
#undef T
#undef SUF
