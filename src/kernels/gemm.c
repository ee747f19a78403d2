/* gemm.c - matrix multiply kernels, f32 and f64 from one body. */
#include "kernels.h"

#define T float
#define SUF f32
#include "gemm.inc"
#undef T
#undef SUF

#define T double
#define SUF f64
#include "gemm.inc"
#undef T
#undef SUF
