/* kernels.h - plain loops over float/double arrays. SIMD and OpenMP live here (the one other
 * parallel region is the trainer's loop over a step's shards, src/train/trainer.c). Every
 * numeric kernel exists as _f32 and _f64, each declared below under its full name and defined
 * under it in a .c file, so that grep finds both.
 *
 * How a body is compiled more than once (the one templating scheme of src/kernels/): a body
 * written once is a .inc file, and each file that includes it is one instance of it:
 *   - before the #include, the includer says what the instance is: `typedef float T;` or
 *     `typedef double T;` for an element type (attention_kernel.inc, optim_part.inc), or its
 *     vector backend and tile sizes for an instruction set (isa_kernels.inc);
 *   - the .inc's functions are static and carry no type or ISA in their names (the type-generic
 *     math they call, log, fma, sqrt, is <tgmath.h>'s); what the body needs from its includer
 *     it declares at its top, and the includer defines;
 *   - after the #include, the includer exports the instance under written-out names: the
 *     _f32/_f64 kernels below, as one-line wrappers (attention_kernel_f32.c, _f64.c), or the
 *     ISA's table, kernel_isa_avx2 and the others of isa.h (isa_avx2.c, ...).
 * A .inc is included once per file, so nothing is #undef'd and no function name is pasted.
 * Short kernels (softmax, cross-entropy, the optimizers' loop over parameters) are simply
 * written out for each type. (An op's own elementwise loops, in src/engine/ops/, bind the
 * same T for each dtype with QKV_TYPED: engine.h.) */
#ifndef QKV_KERNELS_H
#define QKV_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The depth of one block of an f32 product (isa.h's contract): each element's sum restarts at
 * 0 every GEMM_KC along k and is then added to C. */
#define GEMM_KC 256
/* C[b] (+)= op(A[b]) · op(B[b]) for b < batch, where op transposes when asked.
 * A[b] is (M, K), or (K, M) when ta; B[b] is (K, N), or (N, K) when tb; C[b] is (M, N).
 * a_stride/b_stride/c_stride are the element distances between batches (0 shares a matrix).
 * accumulate adds into C instead of overwriting it. Each row of C is computed by one thread
 * in a fixed order, so the result does not depend on the thread count. */
void gemm_f32(bool ta, bool tb, int64_t batch, int64_t M, int64_t N, int64_t K, const float *A,
              int64_t a_stride, const float *B, int64_t b_stride, float *C, int64_t c_stride,
              bool accumulate);
void gemm_f64(bool ta, bool tb, int64_t batch, int64_t M, int64_t N, int64_t K, const double *A,
              int64_t a_stride, const double *B, int64_t b_stride, double *C, int64_t c_stride,
              bool accumulate);
/* For kernels that are already parallel (the attention tiles), a product on the calling
 * thread with op(B) packed beforehand, so that a right-hand side used by many tiles is packed
 * once: gemm_pack_* writes op(B) (K×N; B stored (K, N), or (N, K) when tb, rows ldb apart)
 * into gemm_packed_floats_*(N, K) elements, and gemm1_packed_* computes C (M×N, rows ldc
 * apart) (+)= op(A)·B from it, A stored (M, K), or (K, M) when ta, with rows lda apart (a
 * head's rows inside rows that hold every head: the fused attention's heads form). When
 * gemm_packed_is_plain_*(N), the packed form is op(B) itself in K rows, N apart as
 * gemm_pack_* writes them or ldb apart, so a non-transposed B can be used in place with its
 * own row stride as ldb; otherwise ldb is not read. */
size_t gemm_packed_floats_f32(int64_t N, int64_t K);
bool gemm_packed_is_plain_f32(int64_t N);
void gemm_pack_f32(float *bp, bool tb, int64_t N, int64_t K, const float *B, int64_t ldb);
void gemm1_packed_f32(bool ta, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                      const float *bp, int64_t ldb, float *C, int64_t ldc, bool accumulate);
/* Which of gemm1_packed_f32's four ways the active path takes for an M×N×K product, so that
 * the tests can reach each (for every path's sliver width NR): the small product over plain
 * rows (ldb apart: N <= 16, or one whole sliver) or over one packed sliver (16 < N < NR, rows
 * NR apart); the tiles over plain rows (N a multiple of NR) or over packed slivers. */
typedef enum {
    GEMM1_SMALL_PLAIN,
    GEMM1_SMALL_SLIVER,
    GEMM1_TILES_PLAIN,
    GEMM1_TILES_PACKED,
} gemm1_branch;
gemm1_branch gemm1_branch_f32(int64_t M, int64_t N, int64_t K);
size_t gemm_packed_floats_f64(int64_t N, int64_t K);
bool gemm_packed_is_plain_f64(int64_t N);
void gemm_pack_f64(double *bp, bool tb, int64_t N, int64_t K, const double *B, int64_t ldb);
void gemm1_packed_f64(bool ta, int64_t M, int64_t N, int64_t K, const double *A, int64_t lda,
                      const double *bp, int64_t ldb, double *C, int64_t ldc, bool accumulate);
/* The f32 kernels in use, for the whole process (isa.c): "avx512", "avx2", "neon" or "scalar",
 * the one QKV_SIMD names, else the best this CPU runs. Every path gives the same bits. */
const char *kernel_isa_name(void);
/* False, with a one-line reason in msg, when QKV_SIMD is set (not empty) to a path that is
 * unknown or that this CPU or build cannot run; the library then runs the best path, and the
 * qkv tool refuses to start. */
bool kernel_isa_check_env(char *msg, size_t len);
/* Whether this build has the path `name` and this CPU runs it. */
bool kernel_isa_runs(const char *name);
/* Makes path `name` the one of the whole process, between computations only (the self-test
 * trains on each path in turn); false, changing nothing, when this CPU or build cannot run it. */
bool kernel_isa_select(const char *name);
/* Whether this build's path `name` is emulated over SIMDe (QKV_SIMD_EMULATE). */
bool kernel_isa_emulated(const char *name);
/* Path `name` against the plain C path, bit for bit, on every kernel family (isa_check.c):
 * the full list of shapes (qkv selftest) or the probe's short one. KERNEL_ISA_AGREES when
 * every output agrees; else the first case that differs, and how, in `first`, or the case
 * whose buffers could not be allocated (KERNEL_ISA_NO_MEMORY: nothing is known of the path,
 * which is never a difference). *checked: the cases that agreed. It switches the process's
 * path to each in turn and back: call it only between computations. */
typedef enum { KERNEL_ISA_AGREES, KERNEL_ISA_DIFFERS, KERNEL_ISA_NO_MEMORY } kernel_isa_verdict;
kernel_isa_verdict kernel_isa_check(const char *name, bool full, int *checked, char *first,
                                    size_t len);
/* The start-up probe: the path in use against the plain C one on the short list. NULL when
 * they agree (or the path is plain C, or the probe found no memory for its cases: it then
 * knows nothing against the path, which the command's own memory check speaks for); else
 * the path's name, with one line in `note`: the process now runs the next path, best first,
 * that agrees (the plain C one at worst), or, when QKV_SIMD named the path, still runs it. */
const char *kernel_isa_probe(char *note, size_t len);

/* Row-wise softmax over rows of length n: y = exp(x - max) / sum. A row that is entirely -inf
 * gives zeros. Backward: dx += y ⊙ (dy − Σ dy⊙y), never forming the n×n Jacobian. */
void softmax_forward_f32(float *y, const float *x, int64_t rows, int64_t n);
void softmax_backward_f32(float *dx, const float *y, const float *dy, int64_t rows, int64_t n);
void softmax_forward_f64(double *y, const double *x, int64_t rows, int64_t n);
void softmax_backward_f64(double *dx, const double *y, const double *dy, int64_t rows, int64_t n);

/* Fused attention over G = batch·heads independent heads, O = softmax(scale·Q·Kᵀ + M)·V
 * without forming the Nq×Nk matrix: keys are visited in tiles with an online softmax, and
 * the backward pass recomputes the tiles from the saved row log-sum-exp L.
 *   q (G, Nq, Dk), k (G, Nk, Dk), v (G, Nk, Dv), o (G, Nq, Dv), lse (2, G, Nq): the row
 *   log-sum-exp as a sum of two, lse[0] rounded and lse[1] the rest. With `interleaved`,
 *   q, k, v, o and their gradients hold each batch entry's heads side by side in every row
 *   instead: q (G/H, Nq, H, Dk) and so on (attention_row).
 *   mask: NULL, or 0/-inf values for the scores viewed as (G/H, H, Nq, Nk): element
 *   (b, h, i, j) is at mask[b·ms[0] + h·ms[1] + i·ms[2] + j·ms[3]] (0 on broadcast dims).
 * A row whose keys are all masked gets o = 0, lse = -inf and zero gradients.
 * Backward accumulates into dq, dk, dv (each may be NULL), or stores into those that `store`
 * names (ATTENTION_STORE_*: a gradient nothing has written yet in this backward pass, which
 * then need not be zeroed first); `store` must be 0 unless attention_backward_stores(d) (the
 * other forms, and a head without queries or keys, only add). `scratch` comes from
 * attention_scratch_size (for the pass it is given to: the backward's depends on
 * attention_form). */
typedef struct {
    int64_t G, H, Nq, Nk, Dk, Dv; /* G heads in all, H of them per batch entry */
    double scale;
    const int64_t *ms;            /* mask strides, see above */
    unsigned store;               /* backward: ATTENTION_STORE_* of the gradients it stores */
    bool interleaved;             /* the operands' rows hold all H heads side by side */
    void *probs; /* P as the forward pass keeps it (attention_kept_probs elements, laid out as
                  * attention_probs_at says), or NULL: the backward pass recomputes it */
} attention_dims;
enum { ATTENTION_STORE_DQ = 1, ATTENTION_STORE_DK = 2, ATTENTION_STORE_DV = 4 };
/* Where the mask's score for query row i and key j of head g is: an offset into mask. */
static inline int64_t attention_mask_offset(const attention_dims *d, int64_t g, int64_t i,
                                            int64_t j) {
    return (g / d->H) * d->ms[0] + (g % d->H) * d->ms[1] + i * d->ms[2] + j * d->ms[3];
}
/* Where row i of head g of an operand with N rows of D per head starts (attention_row), and
 * how far apart its rows are (attention_ld): heads one after another, (G, N, D), or side by
 * side in each row, (G/H, N, H, D), when d->interleaved. */
static inline int64_t attention_ld(const attention_dims *d, int64_t D) {
    return d->interleaved ? d->H * D : D;
}
static inline int64_t attention_row(const attention_dims *d, int64_t g, int64_t i, int64_t N,
                                    int64_t D) {
    if (!d->interleaved) return (g * N + i) * D;
    return ((g / d->H * N + i) * d->H + g % d->H) * D;
}
/* Whether the backward pass (of the current attention_form) can store its gradients. */
bool attention_backward_stores(const attention_dims *d);
size_t attention_scratch_size_f32(const attention_dims *d, int threads, bool backward);
void attention_forward_f32(const attention_dims *d, float *o, float *lse, const float *q,
                           const float *k, const float *v, const float *mask, void *scratch);
void attention_backward_f32(const attention_dims *d, float *dq, float *dk, float *dv,
                            const float *dout, const float *o, const float *lse, const float *q,
                            const float *k, const float *v, const float *mask, void *scratch);
size_t attention_scratch_size_f64(const attention_dims *d, int threads, bool backward);
void attention_forward_f64(const attention_dims *d, double *o, double *lse, const double *q,
                           const double *k, const double *v, const double *mask, void *scratch);
void attention_backward_f64(const attention_dims *d, double *dq, double *dk, double *dv,
                            const double *dout, const double *o, const double *lse,
                            const double *q, const double *k, const double *v,
                            const double *mask, void *scratch);
/* How the backward pass forms the softmax's row term D and the recomputed P. Each is exact
 * algebra; they differ in rounding where attention saturates (docs/architecture.md, "The
 * fused backward's precision"). The default is ATTENTION_FORM_D_FROM_P; the others are kept
 * to measure against it (test_attention_precision, `qkv study precision`, `qkv bench
 * --backward-form`). Set it only between passes. */
typedef enum {
    ATTENTION_FORM_LEGACY,   /* "legacy": L rounded to T, D = Σ dO·O in T: the first form */
    ATTENTION_FORM_SPLIT_L,  /* "split-l": L kept as hi + lo; D as legacy */
    ATTENTION_FORM_WIDE_D,   /* "wide-d": L as hi + lo; D = Σ dO·O as hi + lo (Dot2) */
    ATTENTION_FORM_D_FROM_P, /* "d-from-p": L as hi + lo; D = Σ P·dP / Σ P from the
                              * recomputed tiles, hi + lo, and P divided by Σ P */
    ATTENTION_FORM_COUNT
} attention_form_kind;
extern attention_form_kind attention_form;
/* The tiles: BR query rows × BC keys. */
#define ATTENTION_BR 64
#define ATTENTION_BC 64
/* The fused attention over few keys: a head's keys fit one vector of scores (Nk <=
 * ATTENTION_FEW_KEYS) and its queries one block (Nq <= ATTENTION_BR). In f32 it then runs head
 * by head with its products written out (the ISA's few_keys_forward and few_keys_backward; the
 * backward pass in the d-from-p form only), with the bits of the tiles; f64 keeps the tiles.
 * attention_few_keys_off sends every case to the tiles, for the test that compares the two. */
#define ATTENTION_FEW_KEYS 16
extern bool attention_few_keys_off;
bool attention_few_keys(const attention_dims *d, bool backward);
/* The floats of one thread's scratch for a head of d in the few-keys forward or backward. */
size_t attention_few_floats(const attention_dims *d, bool backward);
/* Whether the forward pass keeps P for the backward pass (d->probs), which then skips the
 * recompute of every tile: one tile product of the seven and the backward's exps. Kept, P is
 * the very tile the recompute gives (the same product, then recompute_probs with the same L),
 * so the gradients have the same bits either way. ATTENTION_PROBS_AUTO keeps it by
 * attention_kept_probs's rule. Only the default form (d-from-p) reads a kept P. Set it only
 * between passes. */
typedef enum {
    ATTENTION_PROBS_AUTO,      /* "auto": kept when the rule allows */
    ATTENTION_PROBS_KEEP,      /* "keep": always kept */
    ATTENTION_PROBS_RECOMPUTE, /* "recompute": never kept */
    ATTENTION_PROBS_COUNT
} attention_probs_kind;
extern attention_probs_kind attention_probs;
/* The rule: the forward pass of d keeps P, G·Nq·Nk elements of elem_size bytes, when it is at
 * most ATTENTION_PROBS_PER_OPERANDS times the op's operands and output together (q, k, v and
 * o: for Nq = Nk = N, when N <= 2·ATTENTION_PROBS_PER_OPERANDS·(Dk + Dv)), and at most
 * ATTENTION_PROBS_CEILING bytes, a share of one core's L2 that the backward pass may still
 * find there. Returns the elements kept, or 0 (recomputed; and always 0 for a form other
 * than d-from-p, or with attention_probs "recompute"). Why so small: attention_kernel.c. */
#define ATTENTION_PROBS_PER_OPERANDS 4
#define ATTENTION_PROBS_CEILING ((size_t)1 << 20)
size_t attention_kept_probs(const attention_dims *d, size_t elem_size);
/* Where tile (ib, jb) of head g of a kept P starts: the rows of query block ib (br of them)
 * hold all Nk keys, tile after tile, each br × bc with rows bc apart. */
static inline size_t attention_probs_at(const attention_dims *d, int64_t g, int64_t ib,
                                        int64_t jb) {
    int64_t i0 = ib * ATTENTION_BR, br = d->Nq - i0 < ATTENTION_BR ? d->Nq - i0 : ATTENTION_BR;
    return (size_t)((g * d->Nq + i0) * d->Nk + br * jb * ATTENTION_BC);
}
const char *attention_form_name(attention_form_kind form); /* static; "?" if unknown */
bool attention_form_parse(const char *name, attention_form_kind *form); /* false if unknown */
/* Cross-entropy over rows of n logits, skipping rows whose target is `ignore`. Forward:
 * lse[r] = log Σ_j exp(x[r,j]) (stable; summed in double), *count = rows with a target, and
 * the return value Σ_r (lse[r] − x[r, t_r]). Backward: dx[r,j] += g·(softmax_j − [j = t_r]). */
double cross_entropy_forward_f32(const float *x, const int32_t *targets, int32_t ignore,
                                 int64_t rows, int64_t n, double *lse, int64_t *count);
void cross_entropy_backward_f32(float *dx, const float *x, const int32_t *targets,
                                int32_t ignore, int64_t rows, int64_t n, const double *lse,
                                double g);
double cross_entropy_forward_f64(const double *x, const int32_t *targets, int32_t ignore,
                                 int64_t rows, int64_t n, double *lse, int64_t *count);
void cross_entropy_backward_f64(double *dx, const double *x, const int32_t *targets,
                                int32_t ignore, int64_t rows, int64_t n, const double *lse,
                                double g);
/* The MLP's activations over n elements, elementwise (activation_kernel.c), as PyTorch defines
 * them: relu y = max(x, 0) (NaN stays NaN), dx = dy where x > 0, else 0; gelu in its erf form
 * (tanh_form false) y = x·Φ(x), dx = dy·(Φ(x) + x·φ(x)), or its tanh form y = 0.5·x·(1 +
 * tanh(√(2/π)·(x + 0.044715·x³))), dx = dy·(its exact derivative); Φ through erfc and the
 * tanh through exp (activation_kernel.c says why). f32 in float, f64 in double. The backward adds into dx, or stores 0 + value when `store`
 * (a gradient nothing has written yet in the pass: grad_first_write). */
void relu_forward_f32(float *y, const float *x, int64_t n);
void relu_backward_f32(float *dx, const float *dy, const float *x, int64_t n, bool store);
void relu_forward_f64(double *y, const double *x, int64_t n);
void relu_backward_f64(double *dx, const double *dy, const double *x, int64_t n, bool store);
void gelu_forward_f32(float *y, const float *x, int64_t n, bool tanh_form);
void gelu_backward_f32(float *dx, const float *dy, const float *x, int64_t n, bool tanh_form,
                       bool store);
void gelu_forward_f64(double *y, const double *x, int64_t n, bool tanh_form);
void gelu_backward_f64(double *dx, const double *dy, const double *x, int64_t n,
                       bool tanh_form, bool store);
/* LayerNorm over rows of C as two ops (layernorm_kernel.c); both types sum the rows in double.
 * layernorm_scale: s[r] = 1/√(var + eps), var the biased variance of row r; its mean and s in
 * double into mean[r], rs[r] when they are not NULL (the backward's). Backward:
 *   dx = ds·(−rs³·(x − mean)/C), added into dx or stored (0 + value) when `store`.
 * layernorm_apply: y = (x − mean)·s·gain + bias, s (rows) given; each row's mean into mean[r]
 * when it is not NULL. Backward, s held, with x̂ = (x − mean)·s and g = dy·gain:
 *   dx = s·(g − mean_row(g)), ds = Σ_row g·(x − mean), dgain = Σ_rows dy·x̂, dbias = Σ_rows dy,
 * into dx, ds, dgain, dbias (each may be NULL), added, or stored (0 + value) for those `store`
 * names (LAYERNORM_STORE_*: written first in this pass), in the order dx and ds (row by row),
 * dgain, dbias. The sums over rows run in layernorm_blocks(rows) blocks of rows, a number that
 * depends on the rows only, each block's partial sums in `scratch`
 * (layernorm_scratch_doubles), then added in block order: the bits do not depend on the
 * thread count. */
enum {
    LAYERNORM_STORE_DX = 1,
    LAYERNORM_STORE_DS = 2,
    LAYERNORM_STORE_DGAIN = 4,
    LAYERNORM_STORE_DBIAS = 8
};
int64_t layernorm_blocks(int64_t rows);
size_t layernorm_scratch_doubles(int64_t rows, int64_t C);
void layernorm_scale_forward_f32(float *s, double *mean, double *rs, const float *x,
                                 int64_t rows, int64_t C, double eps);
void layernorm_scale_backward_f32(float *dx, bool store, const float *ds, const float *x,
                                  const double *mean, const double *rs, int64_t rows,
                                  int64_t C);
void layernorm_scale_forward_f64(double *s, double *mean, double *rs, const double *x,
                                 int64_t rows, int64_t C, double eps);
void layernorm_scale_backward_f64(double *dx, bool store, const double *ds, const double *x,
                                  const double *mean, const double *rs, int64_t rows,
                                  int64_t C);
void layernorm_apply_forward_f32(float *y, double *mean, const float *x, const float *s,
                                 const float *gain, const float *bias, int64_t rows, int64_t C);
void layernorm_apply_backward_f32(float *dx, float *ds, float *dgain, float *dbias,
                                  unsigned store, const float *dy, const float *x,
                                  const float *s, const float *gain, const double *mean,
                                  int64_t rows, int64_t C, double *scratch);
void layernorm_apply_forward_f64(double *y, double *mean, const double *x, const double *s,
                                 const double *gain, const double *bias, int64_t rows,
                                 int64_t C);
void layernorm_apply_backward_f64(double *dx, double *ds, double *dgain, double *dbias,
                                  unsigned store, const double *dy, const double *x,
                                  const double *s, const double *gain, const double *mean,
                                  int64_t rows, int64_t C, double *scratch);
/* The optimizers over n parameters at once (w[i], g[i], and the state m[i], v[i] where the
 * rule has it; NULL otherwise), each of size[i] elements. optim_grad_sq_* returns Σ g² (summed
 * in double), the same for any thread count; optim_update_* applies one step of rule r to
 * every element, its numbers rounded to the parameters' type first. */
#define OPTIM_MAX_PARAMS 128
typedef enum { OPTIM_SGD, OPTIM_MOMENTUM, OPTIM_ADAM } optim_kind;
typedef struct {
    optim_kind kind;
    double lr, weight_decay, grad_scale; /* grad_scale: clipping's factor, 1 without */
    double momentum;                     /* momentum */
    double beta1, beta2, eps, bias1, bias2; /* Adam; bias_k = 1 − beta_k^step */
} optim_rule;
double optim_grad_sq_f32(int n, const float *const *g, const int64_t *size);
void optim_update_f32(const optim_rule *r, int n, float *const *w, const float *const *g,
                      float *const *m, float *const *v, const int64_t *size);
double optim_grad_sq_f64(int n, const double *const *g, const int64_t *size);
void optim_update_f64(const optim_rule *r, int n, double *const *w, const double *const *g,
                      double *const *m, double *const *v, const int64_t *size);
/* How many threads the kernels may use (1 without OpenMP). */
int kernel_threads(void);
/* How many threads a loop of `work` should take: one for each `per_thread` of it (two when
 * the work is between one and two shares), at most every thread. 1, the calling thread alone,
 * when the work is at most one share, when there is one thread, and inside a parallel region
 * (a training step's shards run side by side), where OpenMP would build a team for it (a
 * malloc and a wake-up) only to run it on one thread. A short loop cut into a sliver per core
 * of a many-core machine would give each thread less work than the region costs it. */
int kernel_team(double work, double per_thread);
/* The share of an elementwise loop (elements, or logits of a row loop) a thread is worth:
 * fewer take a few µs, less than the region costs. */
#define KERNEL_PARALLEL_ELEMS 16384
/* Whether such a loop forks at all: kernel_team(work, per_thread) > 1. */
bool kernel_parallel(double work, double per_thread);

/* Where a training step's time goes (profile.c, `qkv bench --profile`): the part of the step
 * the profiling thread is in. Each part's time runs from its profile_enter to the next one;
 * a kernel that refines its caller's part (a product inside an op) enters its own and, when
 * done, the caller's again. Off unless profile_start was called; never changes results. */
typedef enum {
    PROFILE_PRODUCTS,    /* matrix products: the gemm kernels and the attention's tiles */
    PROFILE_SOFTMAX,     /* exp and softmax: the softmax op, the attention's scores, online
                          * softmax, recomputed P and the backward's row terms */
    PROFILE_LAYOUT,      /* packing, transposes, reshapes, zeroing and staging gradients */
    PROFILE_ELEMENTWISE, /* add, multiply, scale, mask, sums and means */
    PROFILE_EMBEDDING,   /* the embedding's gather and its scatter-add */
    PROFILE_LOSS,        /* cross-entropy and counting the right predictions */
    PROFILE_OPTIMIZER,   /* the shards' gradients summed, clipping, the update */
    PROFILE_WAIT,        /* forking a team of threads and waiting for it at the end */
    PROFILE_OTHER,       /* what no part above names: the step's own calls and bookkeeping */
    PROFILE_PART_COUNT
} profile_part;
extern bool profile_on;
/* Moves the timeline to part p and returns the part it was in (p itself on a thread that
 * keeps no time: any but thread 0 of a team). */
profile_part profile_switch(profile_part p);
static inline profile_part profile_enter(profile_part p) {
    return profile_on ? profile_switch(p) : p;
}
void profile_start(void); /* clears the parts; the calling thread's timeline starts */
/* The seconds spent in each part, into seconds; returns their sum, the time from
 * profile_start's clock reading to profile_stop's. */
double profile_stop(double seconds[PROFILE_PART_COUNT]);
const char *profile_part_name(profile_part p);          /* "products", ...; "?" if unknown */

/* This thread's share [*lo, *hi) of n iterations dealt to threads 0 .. team−1 of the current
 * region as OpenMP's static schedule deals them (contiguous, the first n % team one longer);
 * empty for the region's other threads. */
void kernel_share(int64_t n, int64_t team, int64_t *lo, int64_t *hi);

/* for (int64_t i = 0; i < n; i++) { body } on `team` threads (kernel_team), or on the calling
 * thread when `team` is 1: deciding before the region, not in an if() clause, because a
 * region that runs on one thread still costs one.
 * - KERNEL_FOR_STATIC: threads 0 .. team−1 each take one contiguous share of the iterations,
 *   as OpenMP's static schedule deals them; KERNEL_FOR_DYNAMIC: every thread of the region
 *   takes one iteration at a time.
 * - The region itself always has every thread: the others pass straight through. libgomp
 *   ends the pooled threads that a smaller team leaves out and starts new ones for the next
 *   larger team, so a team sized by num_threads() made a thread start per region (527 in
 *   20 medium steps on 16 threads, against none once warm; the step took 2× as long).
 * For the profile, thread 0 works in its caller's part and waits (forks the team, meets it at
 * the end) in PROFILE_WAIT. */
#define KERNEL_FOR_STATIC(team, i, n, ...) KERNEL_FOR_((team), false, i, n, __VA_ARGS__)
#define KERNEL_FOR_DYNAMIC(team, i, n, ...) KERNEL_FOR_((team), true, i, n, __VA_ARGS__)
#define KERNEL_FOR_(team, dynamic, i, n, ...)                                               \
    do {                                                                                  \
        int64_t kernel_for_team_ = (team), kernel_for_n_ = (n);                           \
        if (kernel_for_team_ > kernel_for_n_) kernel_for_team_ = kernel_for_n_;           \
        if (kernel_for_team_ > 1) {                                                       \
            profile_part kernel_for_part_ = profile_enter(PROFILE_WAIT);                  \
            _Pragma("omp parallel")                                                       \
            {                                                                             \
                profile_enter(kernel_for_part_);                                          \
                if (dynamic) {                                                            \
                    _Pragma("omp for schedule(dynamic, 1) nowait")                       \
                    for (int64_t i = 0; i < kernel_for_n_; i++) { __VA_ARGS__ }           \
                } else {                                                                  \
                    int64_t kernel_for_lo_, kernel_for_hi_;                               \
                    kernel_share(kernel_for_n_, kernel_for_team_, &kernel_for_lo_,        \
                                 &kernel_for_hi_);                                        \
                    for (int64_t i = kernel_for_lo_; i < kernel_for_hi_; i++) { __VA_ARGS__ } \
                }                                                                         \
                profile_enter(PROFILE_WAIT);                                              \
            }                                                                             \
            profile_enter(kernel_for_part_);                                              \
        } else {                                                                          \
            for (int64_t i = 0; i < kernel_for_n_; i++) { __VA_ARGS__ }                   \
        }                                                                                 \
    } while (0)

#endif
