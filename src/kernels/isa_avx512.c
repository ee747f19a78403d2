/* isa_avx512.c - the f32 kernels (isa_kernels.inc) for AVX-512F (compiled with -mavx512f
 * -mfma: CMakeLists.txt); 8×32 tiles in 16 zmm sums. With QKV_SIMD_EMULATE, the same kernels
 * over SIMDe on AVX2 + FMA (vec_avx512.h): a build for testing this path on any x86-64 CPU. */
#if defined(__x86_64__) || defined(__i386__)
#define VEC_AVX512 1
#define TILE_MR 8
#define TILE_NV 2
#define SMALL_MR 8
#ifdef QKV_SIMD_EMULATE
#define ISA_EMULATED true
#endif
#include "isa_kernels.inc"

const kernel_isa kernel_isa_avx512 = ISA_KERNELS("avx512");
#else
typedef int isa_avx512_absent; /* not this architecture: an empty file */
#endif
