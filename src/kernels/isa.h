/* isa.h - the f32 kernels of one instruction set, as a table of functions. isa_kernels.inc
 * writes them once over vec.h; isa_scalar.c, isa_avx2.c, isa_avx512.c and isa_neon.c compile
 * it once each, and isa.c picks one table for the whole process (QKV_SIMD, or the best the
 * CPU runs). Every table gives the same bits for the same input. */
#ifndef QKV_ISA_H
#define QKV_ISA_H

#include "kernels.h"


typedef struct kernel_isa {
    const char *name; /* "scalar", "avx2", "avx512", "neon" */
    /* built over SIMDe on a narrower ISA (QKV_SIMD_EMULATE): run only when QKV_SIMD or the
     * self-test names it, never chosen as the best */
    bool emulated;
    /* Products, by one contract: each element of C is, per block of GEMM_KC along k, a chain
     * of fused multiply-adds in k order starting from 0, added to C (or stored, for the first
     * block when not accumulating). So the tile and the small product agree to the bit. */
    int gemm_mr, gemm_nr; /* the tile: rows, and columns (a multiple of 16) */
    /* tile (rows × cols, at most mr × nr) = Σ_k a(r, k)·b[k·bs + c], k < kc <= GEMM_KC,
     * a(r, k) = a[r·rs + k·ks], b a sliver (kc rows of nr, bs apart: packed, bs = nr, or B
     * itself; zero past cols); stored to c (rows ldc apart), or added to it when `add` */
    void (*gemm_tile)(int rows, int cols, int64_t kc, const float *a, int64_t rs, int64_t ks,
                      const float *b, int64_t bs, float *c, int64_t ldc, bool add);
    /* C (M×N, rows ldc apart) (+)= op(A)·B: A stored (M, K), or (K, M) when ta, rows lda
     * apart; B in K rows ldb apart */
    void (*gemm_small)(bool ta, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                       const float *B, int64_t ldb, float *C, int64_t ldc, bool accumulate);
    /* dst[c·ldd + r] = src[r·lds + c], r < rows, c < cols: a transposed operand's packing */
    void (*transpose)(float *dst, int64_t ldd, const float *src, int64_t lds, int64_t rows,
                      int64_t cols);
    /* y[i] = exp_f32(x[i]) (simd.h), for the tests */
    void (*exp)(float *y, const float *x, int64_t n);
    /* the fused attention's tile loops (attention_kernel.inc says what each does) */
    void (*online_softmax)(const attention_dims *d, float *s, int64_t br, int64_t bc,
                           const float *mask, int64_t g, int64_t i0, int64_t j0, float *m,
                           float *l, float *acc, float *scaled);
    void (*recompute_probs)(const attention_dims *d, float *p, int64_t br, int64_t bc,
                            const float *mask, int64_t g, int64_t i0, int64_t j0,
                            const float *lse, const float *lse_lo);
    void (*score_grads)(float *dp, const float *p, float *p_out, int64_t br, int64_t bc,
                        const float *inv, const float *D_hi, const float *D_lo, float scale);
    /* p_out (br×bc, may be p) = p's row r times s[r] */
    void (*scale_rows)(float *p_out, const float *p, int64_t br, int64_t bc, const float *s);
    /* each row r of x and y (rows × n): Σ x[r][c]·y[r][c] and Σ x[r][c] in double, in 8
     * fixed partial sums (c mod 8) added in order, into dot[r] and sum[r] */
    void (*row_dot_sums)(const float *x, const float *y, int64_t rows, int64_t n, double *dot,
                         double *sum);
    /* the fused attention over few keys (attention_few_keys): head g's forward pass, and its
     * backward pass in the d-from-p form, with the bits of the tiled one (attention_kernel.inc);
     * scratch: attention_few_floats(d, backward) floats */
    void (*few_keys_forward)(const attention_dims *d, float *o, float *lse, const float *q,
                             const float *k, const float *v, const float *mask, int64_t g,
                             float *scratch);
    void (*few_keys_backward)(const attention_dims *d, float *dq, float *dk, float *dv,
                              const float *dout, const float *lse, const float *q,
                              const float *k, const float *v, const float *mask, int64_t g,
                              float *scratch);
    /* one row of softmax_forward_f32 / softmax_backward_f32 */
    void (*softmax_row)(float *y, const float *x, int64_t n);
    void (*softmax_backward_row)(float *dx, const float *y, const float *dy, int64_t n);
    /* one row of cross_entropy_forward_f32: its max (returned) and the 16 partial sums of
     * exp(x − max) (into part), which that loop adds in double; and one row of the backward */
    float (*cross_entropy_parts)(const float *x, int64_t n, float part[16]);
    void (*cross_entropy_backward_row)(float *dx, const float *x, int64_t n, int32_t target,
                                       double lse, float g);
    /* one part of optim_update_f32 and of optim_grad_sq_f32 */
    void (*optim_update_part)(const optim_rule *r, float *w, const float *g, float *m,
                              float *v, int64_t n);
    double (*sum_squares)(const float *g, int64_t n);
    /* `rounds` rounds of register-only FMA chains, as many as the packed product keeps
     * (isa_kernels.inc): the path's FMA peak. fma_peak_flops: the flops of one round. */
    double (*fma_peak)(int64_t rounds);
    int fma_peak_flops;
} kernel_isa;

extern const kernel_isa kernel_isa_scalar;
#if defined(__x86_64__) || defined(__i386__)
#define QKV_ISA_X86 1
extern const kernel_isa kernel_isa_avx2, kernel_isa_avx512;
#endif
#if defined(__aarch64__)
#define QKV_ISA_NEON 1
extern const kernel_isa kernel_isa_neon;
#endif

/* The table in use: chosen on the first call (isa.c), the same for the whole process. */
const kernel_isa *kernel_isa_active(void);
/* The table named `name`, if this build has it and this CPU runs it; else NULL. */
const kernel_isa *kernel_isa_find(const char *name);
/* The best table this CPU runs (never an emulated one). */
const kernel_isa *kernel_isa_best(void);
/* ---- the FMA units' width (peak.c): the AVX-512 path's peak over the AVX2 path's, on one
 * thread, is about 2 where the units are 512 bits wide (two 512-bit FMA ports: Intel Xeons,
 * AMD Zen 5) and about 1 where each 512-bit FMA runs in two 256-bit halves (AMD Zen 4). ---- */
typedef enum {
    FMA_WIDTH_UNTOLD, /* the trials disagree: the machine was too busy to tell */
    FMA_WIDTH_HALF,   /* ratio below FMA_HALF_MAX: 512-bit FMAs on 256-bit units */
    FMA_WIDTH_FULL,   /* ratio FMA_FULL_MIN or more: 512-bit FMA units */
} fma_width;
#define FMA_HALF_MAX 1.3
#define FMA_FULL_MIN 1.5
/* Trials of each path, taken in turn, and how close to its best a second trial must come. */
#define FMA_WIDTH_TRIALS 8
#define FMA_WIDTH_AGREE 0.05
typedef struct {
    double wide, narrow; /* GFLOP/s on one thread: each path's best trial */
    double ratio;        /* wide / narrow; 0 when either is unknown */
    fma_width width;
} fma_width_result;
/* The width from `trials` trials of each path (GFLOP/s per second of the thread's CPU time):
 * each path's best trial, since load only ever slows a trial, and told only where a second
 * trial of each path comes within FMA_WIDTH_AGREE of its best, and the ratio is near 1 or 2
 * (below FMA_HALF_MAX, or FMA_FULL_MIN and above); else FMA_WIDTH_UNTOLD. */
fma_width_result fma_width_decide(const double *wide, const double *narrow, int trials);
/* Measures and decides: FMA_WIDTH_TRIALS trials of path `wide` and of path `narrow`
 * ("avx512", "avx2") in turn on the calling thread, over about `seconds` in all, each timed
 * by the thread's CPU clock, so that time the thread spent waiting for a core is not counted.
 * Rates 0 and FMA_WIDTH_UNTOLD when this CPU runs either path not. */
fma_width_result fma_width_measure(const char *wide, const char *narrow, double seconds);

/* Makes isa the table of the whole process: only between computations (isa_check.c). */
void kernel_isa_use(const kernel_isa *isa);
/* The same, for the start-up probe leaving a path whose bits differ: when that leaves the
 * plain C path, qkv_simd_slow_reason says why. */
void kernel_isa_fall_back(const kernel_isa *isa);

#endif
