/* attention.c - fused attention kernels, f32 and f64 from one body (attention.inc). */
#include "kernels.h"
#include "simd.h"

#include <math.h>
#include <string.h>
#ifdef QKV_HAVE_OPENMP
#include <omp.h>
#endif

#define BR 64 /* query rows per tile */
#define BC 64 /* keys per tile */
#define MIN_HEADS_FOR_HEAD_SPLIT 8
#define MAX_KEY_GROUPS 4
#define PARALLEL_WORK 5e5 /* below this many multiply-adds a second thread costs more than it saves */

#define T float
#define SUF f32
#define EXP fast_expf
#define LOG logf
#define GEMM1 gemm1_f32
#define GEMM1_LDB gemm1_ldb_f32
#include "attention.inc"
#undef T
#undef SUF
#undef EXP
#undef LOG
#undef GEMM1
#undef GEMM1_LDB

#define T double
#define SUF f64
#define EXP exp
#define LOG log
#define GEMM1 gemm1_f64
#define GEMM1_LDB gemm1_ldb_f64
#include "attention.inc"
#undef T
#undef SUF
#undef EXP
#undef LOG
#undef GEMM1
#undef GEMM1_LDB
