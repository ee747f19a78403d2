/* isa_avx2.c - the f32 kernels (isa_kernels.inc) for AVX2 + FMA (compiled with -mavx2 -mfma:
 * CMakeLists.txt); 4×16 tiles in 8 ymm sums. */
#if defined(__x86_64__) || defined(__i386__)
#define VEC_AVX2 1
#define ISA_NAME "avx2"
#define ISA_TABLE kernel_isa_avx2
#define TILE_MR 4
#define TILE_NV 1
#include "isa_kernels.inc"
#else
typedef int isa_avx2_absent; /* not this architecture: an empty file */
#endif
