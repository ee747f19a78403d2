/* isa_avx2.c - the f32 kernels (isa_kernels.inc) for AVX2 + FMA (compiled with -mavx2 -mfma:
 * CMakeLists.txt). The packed product's tiles are 6×16, in 12 ymm sums: 4×16 tiles (8 sums)
 * ran at 0.87-0.94× of them in build/tests/bench_gemm (QKV_SIMD=avx2, AMD Zen 5, one
 * thread), two FMA pipes of 4 cycles' latency leaving 8 chains no slack; but the 4 rows a
 * 16- or 64-row block leaves run as a 4-row tile (gemm_tile), as they took a 6-row tile's
 * time. Small products take 4 rows at once (6 ran the 16×16×16 attention tiles slower: a
 * third 6-row strip for 4 rows). */
#if defined(__x86_64__) || defined(__i386__)
#define VEC_AVX2 1
#define TILE_MR 6
#define TILE_NV 1
#define SMALL_MR 4
#include "isa_kernels.inc"

const kernel_isa kernel_isa_avx2 = ISA_KERNELS("avx2");
#else
typedef int isa_avx2_absent; /* not this architecture: an empty file */
#endif
