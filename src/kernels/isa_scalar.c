/* isa_scalar.c - the f32 kernels (isa_kernels.inc) for plain C, for any CPU (fmaf for the
 * fused multiply-add). */
#define TILE_MR 4
#define TILE_NV 1
#define SMALL_MR 4
#include "isa_kernels.inc"

const kernel_isa kernel_isa_scalar = ISA_KERNELS("scalar");
