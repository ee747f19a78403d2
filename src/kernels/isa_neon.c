/* isa_neon.c - the f32 kernels (isa_kernels.inc) for NEON, the baseline of AArch64; 4×16 tiles
 * in 16 q sums. */
#if defined(__aarch64__)
#define VEC_NEON 1
#define TILE_MR 4
#define TILE_NV 1
#define SMALL_MR 4
#include "isa_kernels.inc"

const kernel_isa kernel_isa_neon = ISA_KERNELS("neon");
#else
typedef int isa_neon_absent; /* not this architecture: an empty file */
#endif
