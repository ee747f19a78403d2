/* qkv.h - tensors, reverse-mode autograd and scaled dot-product attention, in C11.
 *
 * A complete training loop: W_Q, W_K and W_V learn, by plain SGD, to make attention over a
 * fixed input X give a fixed target. examples/header_example.c is this code, built and run
 * as a test (it checks that the loss falls):
 *
 *     qkv_ctx *params = qkv_ctx_new(0);            // long-lived: weights, grads, fixed data
 *     qkv_ctx *step   = qkv_ctx_new(0);            // per step: graph + activations
 *     if (!params || !step) return 1;              // the only failure: out of memory
 *     qkv_rng rng = qkv_rng_seed(42);
 *     const int64_t w_shape[2] = {4, 2}, x_shape[2] = {3, 4}, y_shape[2] = {3, 2};
 *     qkv_tensor *wq = qkv_param(params, qkv_randn(params, QKV_F32, 2, w_shape, 0.5, &rng));
 *     qkv_tensor *wk = qkv_param(params, qkv_randn(params, QKV_F32, 2, w_shape, 0.5, &rng));
 *     qkv_tensor *wv = qkv_param(params, qkv_randn(params, QKV_F32, 2, w_shape, 0.5, &rng));
 *     qkv_tensor *x = qkv_randn(params, QKV_F32, 2, x_shape, 1.0, &rng);       // 3 tokens, C = 4
 *     qkv_tensor *target = qkv_randn(params, QKV_F32, 2, y_shape, 1.0, &rng);  // (Nq, Dv)
 *     double first = 0, last = 0;                  // the loss at the first and the last step
 *     for (int it = 0; it < 100; it++) {
 *         qkv_ctx_reset(step);                     // frees last step's graph in O(1)
 *         qkv_tensor *q = qkv_matmul(step, x, wq), *k = qkv_matmul(step, x, wk),
 *                    *v = qkv_matmul(step, x, wv);
 *         qkv_tensor *y = qkv_attention(step, q, k, v, NULL, 0.0, NULL);  // 0 => 1/sqrt(d_k)
 *         qkv_tensor *loss = qkv_mse(step, y, target);                     // a scalar
 *         qkv_zero_grad(params);                   // explicit: backward accumulates
 *         qkv_backward(loss);                      // wq->grad, wk->grad, wv->grad
 *         qkv_sgd_step(params, 0.1f);              // every parameter of `params`
 *         if (it == 0) first = qkv_get(loss, 0);
 *         last = qkv_get(loss, 0);
 *     }
 *     qkv_ctx_free(step); qkv_ctx_free(params);
 *
 * Build against an installed qkv with CMake, `find_package(qkv)` and the target qkv::qkv (or
 * qkv::qkv_static), or with `cc app.c $(pkg-config --cflags --libs qkv)`. docs/api.md is the
 * overview of the library; docs/architecture.md says how it is built.
 *
 * Shape letters used in comments throughout: B batch, H heads, Nq query length, Nk key
 * length, T sequence length (Nq = Nk = T in self-attention), C = d_model, Dk key/query
 * width, Dv value width, V vocabulary size.
 *
 * Ownership: every tensor belongs to the context that created it and lives until that
 * context is reset or freed. There is no per-tensor free. The library frees nothing it is
 * given, and keeps only the links said below: a tensor its inputs (which must live as long as
 * it does), a context its parameters, an optimizer the model's parameters. Strings it returns
 * are static, or owned by the object they came from, and must not be freed.
 *
 * Errors come back in one of two ways:
 *   - Misuse of the API (a shape mismatch, a wrong dtype, a NULL, an index outside a table)
 *     is a programming error. The process stops (abort) after one line on stderr naming the
 *     op and the shapes: "qkv: matmul: inner sizes differ: a is (3,4), b is (5,2) [file:line]".
 *     These checks stay on in release builds; "dies" below marks them.
 *   - Errors from the outside world (files, user values, memory limits) come back as a
 *     qkv_status, and qkv_last_error() says what failed.
 *
 * Threads: a context and its tensors are used by one thread at a time; different contexts
 * may be used by different threads at once. Inside an op, OpenMP threads split the work so
 * that no result depends on their number (OMP_NUM_THREADS).
 */
#ifndef QKV_H
#define QKV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define QKV_VERSION_MAJOR 0
#define QKV_VERSION_MINOR 2
#define QKV_VERSION_PATCH 0
#define QKV_VERSION_STRING "0.2.0"

#if defined(__GNUC__)
#define QKV_API __attribute__((visibility("default")))
#else
#define QKV_API
#endif

#define QKV_MAX_DIMS 4

/* ---- status: errors from the outside world ------------------------------------------- */
typedef enum {
    QKV_OK = 0,
    QKV_ERR_IO = 1,      /* a file could not be opened, read, written or renamed */
    QKV_ERR_FORMAT = 2,  /* a file is truncated, corrupt or not what it claims to be */
    QKV_ERR_MISMATCH = 3,/* a file is valid but does not fit: shape, dtype, missing tensor */
    QKV_ERR_VALUE = 4,   /* a user value is out of range */
    QKV_ERR_NOMEM = 5,   /* an allocation failed or would exceed the memory limit */
    QKV_ERR_NUMERIC = 6, /* a NaN or Inf appeared where it must not */
} qkv_status;

/* The message of the last error on this thread: one line, no trailing newline, "" before
 * the first. A success does not clear it, so read it only right after a call failed. The
 * string is thread-local storage of the library; do not free it. */
QKV_API const char *qkv_last_error(void);
/* Sets this thread's last error (printf-style, cut at 511 bytes) and returns `status`, for
 * `return qkv_fail(QKV_ERR_VALUE, "...", ...)` in code built on qkv. */
QKV_API qkv_status qkv_fail(qkv_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Messages about a config name its fields as C does: "seq_len 5000 is out of range for copy
 * (2..4096)", "heads 3 does not divide d_model 32". A front end with its own names for them
 * passes a function from a field ("seq_len") to its name ("--seq-len"; NULL: the field's
 * own); `names` NULL restores the fields. Set it once, before other threads call qkv. */
QKV_API void qkv_set_field_names(const char *(*names)(const char *field));

/* ---- limits: every bound that qkv puts on a config, each in one place ----------------------- */
#define QKV_MAX_SEQ_LEN 65536      /* a model's sequence (seq_len) and decoder (target_len) */
#define QKV_MIN_TASK_SEQ_LEN 2     /* a task's sequence: generated, or the longest of a data file */
#define QKV_MAX_TASK_SEQ_LEN 4096
#define QKV_MAX_VOCAB 1000000      /* vocab: at least 2 */
#define QKV_MAX_D_MODEL 8192
#define QKV_MAX_HEADS QKV_MAX_D_MODEL /* and at most d_model, which they divide */
#define QKV_MAX_LAYERS 8
#define QKV_MAX_INIT_SCALE 100.0   /* init_scale: above 0 */
#define QKV_MAX_THREADS 1024       /* threads a command may ask for */
#define QKV_MAX_MLP 65536          /* an MLP's hidden units (mlp; 0: no MLP) */
/* modular's modulus P: its P² pairs are all held in memory, and every held-out pair is
 * evaluated, so at most about a million pairs (a vocabulary of P + 1 tokens) */
#define QKV_MAX_MODULUS 1024
/* The parameter table of a model (and of its optimizer): tok_emb, pos_emb, head.w, head.b,
 * dec_pos_emb, the final LayerNorm's gain and bias, and of each layer w_q, w_k, w_v, w_o, the
 * MLP's w_in, b_in, w_out, b_out and the two LayerNorms' gains and biases. */
#define QKV_MAX_PARAMS (7 + 12 * QKV_MAX_LAYERS)

/* ---- the machine: SIMD path, threads, the fused backward's form ------------------------- */
/* Every SIMD path's name, best first, NULL-ended: "avx512", "avx2", "neon", "scalar". */
QKV_API const char *const *qkv_simd_paths(void);
/* The path in use for the whole process: the one QKV_SIMD names, else the best this CPU
 * runs. Every path gives the same bits. */
QKV_API const char *qkv_simd_path(void);
/* Why the path in use is the plain C one, which runs many times slower than SIMD: QKV_SIMD
 * forced it, or this CPU has no AVX2 with FMA (or the build no SIMD path for it); NULL when
 * a SIMD path runs. */
QKV_API const char *qkv_simd_slow_reason(void);
/* The f32 FMA peak of the path in use on `threads` threads, in GFLOP/s: independent FMA
 * chains held in registers (as many as the packed matrix product keeps), no load or store,
 * the best of five trials over about `seconds` (src/kernels/peak.c). What `qkv bench --peak`
 * measures a training step against. */
QKV_API double qkv_fma_peak(int threads, double seconds);
/* The same for the path named `path` (qkv_simd_paths), whichever is in use; 0 when this CPU
 * does not run it. On x86 the AVX-512 path's over the AVX2 path's, on one thread, tells the
 * CPU's FMA units: about 2 where they are 512 bits wide (two 512-bit FMA ports, as on Intel
 * Xeons and AMD Zen 5), about 1 where 512-bit FMAs run on 256-bit units (AMD Zen 4). */
QKV_API double qkv_fma_peak_of(const char *path, int threads, double seconds);
/* Whether QKV_SIMD chose the path (set and not empty). */
QKV_API bool qkv_simd_forced(void);
/* Whether this build has the path and this CPU runs it. */
QKV_API bool qkv_simd_runs(const char *path);
/* False, with a one-line reason in msg, when QKV_SIMD names a path that is unknown or that
 * this CPU or build cannot run (the library then runs the best path). */
QKV_API bool qkv_simd_check_env(char *msg, size_t len);
/* Whether this build's `path` runs emulated over SIMDe (a -DQKV_SIMD_EMULATE=ON build's avx512,
 * for testing that path on a CPU without it). */
QKV_API bool qkv_simd_emulated(const char *path);
/* The start-up probe of the commands that compute: the path in use against the plain C path,
 * bit for bit, on a few products, rows, a fused attention and an optimizer step (about a
 * millisecond). True when they agree. Else false, with one line in `note`: the process now
 * runs the next path that agrees, or, when QKV_SIMD named the path, still runs it. Call it
 * before anything computes. */
QKV_API bool qkv_simd_probe(char *note, size_t len);
/* The threads the kernels use (1 in a build without OpenMP), and setting them (n >= 1;
 * results do not depend on it). */
QKV_API int qkv_threads(void);
QKV_API void qkv_set_threads(int n);
QKV_API bool qkv_has_openmp(void); /* whether this build runs on more than one thread */
/* How the fused attention's backward forms its softmax row term (docs/architecture.md, "The
 * fused backward's precision"): every form's name in order, NULL-ended ("legacy", "split-l",
 * "wide-d", "d-from-p", the default); the form in use; setting one by name (false if
 * unknown). Set it only between passes: it holds for the whole process. */
QKV_API const char *const *qkv_attention_forms(void);
QKV_API const char *qkv_attention_form(void);
QKV_API bool qkv_set_attention_form(const char *name);
/* Whether the fused attention's forward pass keeps the probabilities P for its backward pass,
 * which then skips recomputing them: "auto" (the default: kept when P takes at most 4× the
 * op's q, k, v and output, and at most 1 MiB), "keep" or "recompute". The gradients have the
 * same bits either way. NULL-terminated names; set returns false for an unknown name. */
QKV_API const char *const *qkv_attention_probs_modes(void);
QKV_API const char *qkv_attention_probs(void);
QKV_API bool qkv_set_attention_probs(const char *name);

/* ---- random numbers: portable, seeded (xoshiro256**, seeded by splitmix64) --------------- */
/* A generator is a plain value: a copy replays the same stream; keep one per thread. The
 * same seed gives the same numbers on every machine (integer arithmetic only). */
typedef struct { uint64_t s[4]; } qkv_rng;
QKV_API qkv_rng qkv_rng_seed(uint64_t seed);
QKV_API uint64_t qkv_rng_u64(qkv_rng *rng);            /* all 64 bits random */
QKV_API double qkv_rng_uniform(qkv_rng *rng);          /* in [0, 1), 53 random bits */
QKV_API double qkv_rng_normal(qkv_rng *rng);           /* mean 0, variance 1 */
/* Uniform in [0, n), unbiased (rejection sampling); n >= 1. */
QKV_API uint32_t qkv_rng_below(qkv_rng *rng, uint32_t n);

/* ---- contexts: arenas that own tensors and the graph ------------------------------------ */
typedef struct qkv_ctx qkv_ctx;
/* A new context. `capacity` bytes are reserved up front (0 for a default of 1 MiB); it grows
 * when needed. Returns NULL when out of memory (the only error). The caller owns it and frees
 * it with qkv_ctx_free. */
QKV_API qkv_ctx *qkv_ctx_new(size_t capacity);
/* Frees the context and every tensor, gradient and buffer it holds. NULL is a no-op. */
QKV_API void qkv_ctx_free(qkv_ctx *ctx);
/* Forgets every tensor of the context at once, parameters included (they are no longer
 * visited by qkv_zero_grad / qkv_sgd_step): pointers into it become invalid. After the first
 * reset that follows growth, the context holds one block big enough for the whole step, so
 * warm steps never call malloc. Dies if growing it then runs out of memory. */
QKV_API void qkv_ctx_reset(qkv_ctx *ctx);
/* No-grad mode: ops built in this context from now on record no gradient and need no gradient
 * memory, even when their inputs require one (evaluation). Off by default. */
QKV_API void qkv_ctx_set_no_grad(qkv_ctx *ctx, bool no_grad);
QKV_API bool qkv_ctx_no_grad(const qkv_ctx *ctx);
QKV_API size_t qkv_ctx_used(const qkv_ctx *ctx);     /* bytes in use */
QKV_API size_t qkv_ctx_capacity(const qkv_ctx *ctx); /* bytes reserved */
QKV_API uint64_t qkv_ctx_mallocs(const qkv_ctx *ctx);/* system allocations made so far */
/* Raw memory from the context, 64-byte aligned, zeroed, owned by the context (freed by its
 * reset or free). Dies when the system is out of memory. */
QKV_API void *qkv_ctx_alloc(qkv_ctx *ctx, size_t bytes);

/* ---- tensors ----------------------------------------------------------------------------- */
typedef enum { QKV_F32 = 0, QKV_F64 = 1, QKV_I32 = 2 } qkv_dtype;

typedef enum {
    QKV_OP_NONE = 0, /* a leaf: input or parameter */
    QKV_OP_MATMUL,
    QKV_OP_SCALE,
    QKV_OP_MASK,
    QKV_OP_SOFTMAX,
    QKV_OP_ADD,
    QKV_OP_MUL,
    QKV_OP_EMBEDDING,
    QKV_OP_RESHAPE,
    QKV_OP_TRANSPOSE,
    QKV_OP_CROSS_ENTROPY,
    QKV_OP_MSE,
    QKV_OP_SUM,
    QKV_OP_MEAN,
    QKV_OP_ATTENTION, /* fused attention, one node */
    QKV_OP_RELU,
    QKV_OP_GELU,      /* iparam[0]: the form (qkv_act: QKV_ACT_GELU or QKV_ACT_GELU_TANH) */
    QKV_OP_LAYERNORM_SCALE, /* a LayerNorm's 1/sqrt(var + eps) per row, (..., 1) */
    QKV_OP_LAYERNORM_APPLY, /* (x - mean)·s·gain + bias, s given: src[3] is the bias */
    QKV_OP_SELECT_ROWS, /* rows of each matrix (positions of each sequence): saved, iparam[0] */
    QKV_OP_COUNT
} qkv_op;

typedef struct qkv_tensor qkv_tensor;
struct qkv_tensor {
    qkv_dtype dtype;
    int ndim;                      /* 0 (a scalar) to QKV_MAX_DIMS */
    int64_t shape[QKV_MAX_DIMS];   /* row-major, contiguous */
    int64_t size;                  /* number of elements */
    void *data;
    void *grad;                    /* same dtype and shape as data; NULL if not needed */
    bool requires_grad;
    /* graph: what made this tensor (read-only for users) */
    qkv_op op;
    qkv_tensor *src[4];
    double fparam[2];              /* scalar parameters of the op */
    int64_t iparam[4];
    void *saved;                   /* what the backward pass needs besides inputs/output */
    qkv_ctx *ctx;                  /* owner */
    qkv_tensor *tape_prev;         /* previous tensor recorded in the same context */
    const char *name;              /* optional, for printing and checkpoints */
    uint32_t mark;                 /* internal: which backward pass reached this tensor */
    uint32_t grad_written;         /* internal: the backward pass that wrote this gradient */
};

QKV_API size_t qkv_dtype_size(qkv_dtype dtype);       /* bytes per element: 4 or 8 */
QKV_API const char *qkv_dtype_name(qkv_dtype dtype);  /* "f32", "f64", "i32"; static */
QKV_API const char *qkv_op_name(qkv_op op);           /* "matmul", ...; "?" if unknown; static */

/* Creation: a leaf (no graph, no gradient) of `ndim` (0..QKV_MAX_DIMS) dims whose sizes are
 * `shape[0..ndim-1]`, each >= 1; `shape` is copied and may be NULL when ndim is 0. The tensor
 * and its data are owned by `ctx`. Dies on a NULL ctx, a bad dtype, ndim or size; aborts when
 * out of memory. qkv_new and qkv_zeros both give zeros. */
QKV_API qkv_tensor *qkv_new(qkv_ctx *ctx, qkv_dtype dtype, int ndim, const int64_t *shape);
QKV_API qkv_tensor *qkv_zeros(qkv_ctx *ctx, qkv_dtype dtype, int ndim, const int64_t *shape);
QKV_API qkv_tensor *qkv_ones(qkv_ctx *ctx, qkv_dtype dtype, int ndim, const int64_t *shape);
QKV_API qkv_tensor *qkv_scalar(qkv_ctx *ctx, qkv_dtype dtype, double value);
/* Copies `size` elements from `values` (float, double or int32_t for f32, f64, i32), which
 * the caller keeps. Dies if `values` is NULL. */
QKV_API qkv_tensor *qkv_from_array(qkv_ctx *ctx, qkv_dtype dtype, int ndim, const int64_t *shape,
                                   const void *values);
/* Uniform in [lo, hi) and normal with mean 0 and standard deviation `std`, drawn from `rng`
 * in element order (so the same seed gives the same tensor everywhere). */
QKV_API qkv_tensor *qkv_rand(qkv_ctx *ctx, qkv_dtype dtype, int ndim, const int64_t *shape,
                             double lo, double hi, qkv_rng *rng);
QKV_API qkv_tensor *qkv_randn(qkv_ctx *ctx, qkv_dtype dtype, int ndim, const int64_t *shape,
                              double std, qkv_rng *rng);
/* Marks a leaf as a trainable parameter of `ctx` and returns it: it gets a zeroed gradient
 * buffer in its context and joins the context's parameter list (qkv_zero_grad, qkv_sgd_step,
 * qkv_ctx_for_params). Marking it twice does nothing. Dies unless t is a float leaf created
 * in `ctx`. */
QKV_API qkv_tensor *qkv_param(qkv_ctx *ctx, qkv_tensor *t);
/* Element i (flat, row-major index; 0 <= i < size, not checked) as a double, and setting it
 * (rounded to the dtype); for tests and printing. qkv_grad_get reads the gradient, or 0 when
 * the tensor has none. */
QKV_API double qkv_get(const qkv_tensor *t, int64_t i);
/* The index (from 0) of the largest of x[offset .. offset + n), the first of equal largest:
 * the prediction of a row of logits, everywhere qkv predicts (accuracy, examples, analyses). */
QKV_API int64_t qkv_argmax(const qkv_tensor *x, int64_t offset, int64_t n);
QKV_API void qkv_set(qkv_tensor *t, int64_t i, double value);
QKV_API double qkv_grad_get(const qkv_tensor *t, int64_t i);
/* Prints label (or "tensor"), dtype, shape, op and values to `out` (at most `max_values`;
 * 0 prints all), one row of the last dim per line. */
QKV_API void qkv_print(FILE *out, const qkv_tensor *t, const char *label, int64_t max_values);
/* "(2,3,4)" into buf (cut to `len` bytes, always terminated); returns buf. */
QKV_API char *qkv_shape_str(const qkv_tensor *t, char *buf, size_t len);

/* ---- autograd ----------------------------------------------------------------------------- */
/* Runs the backward pass from `loss` (a scalar) through the ops it depends on, in reverse
 * order of creation, which is a topological order. Only ops recorded in the loss's own
 * context are visited: build the whole graph in one context (leaves and parameters may live
 * in others). Gradients of leaves ACCUMULATE: calling qkv_backward twice without
 * qkv_zero_grad adds the two gradients, which is what makes a tensor used several times
 * (X feeding Q, K and V) correct, and lets users sum gradients over micro-batches. Gradients
 * of intermediate tensors are recomputed on every call. Dies if loss is NULL, not a scalar,
 * or depends on no parameter (or was built in no-grad mode). */
QKV_API void qkv_backward(qkv_tensor *loss);
/* Sets the gradient of every parameter of `ctx` (qkv_param) to zero. */
QKV_API void qkv_zero_grad(qkv_ctx *ctx);
/* Plain SGD over every parameter of `ctx`: p -= lr * grad. It does not zero the gradients. */
QKV_API void qkv_sgd_step(qkv_ctx *ctx, float lr);
/* Calls fn on every parameter of `ctx`, in order of creation. */
QKV_API void qkv_ctx_for_params(qkv_ctx *ctx, void (*fn)(qkv_tensor *p, void *user), void *user);

/* ---- ops: each checks shapes when it is built and computes its output at once ---------- */
/* Every op returns a new tensor owned by `ctx`, which records the op and its inputs for
 * qkv_backward unless `ctx` is in no-grad mode or no input requires a gradient. Inputs are
 * never modified, may belong to any context, and must outlive the result. Inputs are f32 or
 * f64 (only indices are i32), all of one dtype, and the result has that dtype. Each op dies
 * (one line naming it and the shapes) on a NULL input, a wrong dtype or shapes that do not
 * fit as described; out of memory aborts. */
/* C = op(A)·op(B), op transposing the last two dims when asked, without a copy.
 * A is (..., M, K) [or (..., K, M) when trans_a], B is (..., K, N) [or (..., N, K)].
 * Leading (batch) dims must match, or B may be 2-D and is then shared by every batch. */
QKV_API qkv_tensor *qkv_matmul_ex(qkv_ctx *ctx, qkv_tensor *a, bool trans_a, qkv_tensor *b,
                                  bool trans_b);
QKV_API qkv_tensor *qkv_matmul(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b);
/* qkv_matmul(a, b) where a (..., n, K) holds positions at[0] < at[1] < ... < at[n-1] of
 * sequences of seq_len positions (as qkv_select_rows picks them) and b is 2-D (K, N), shared:
 * the same product, and the same gradient of a. b's gradient, a sum over a's rows, is summed
 * in the depth blocks of that product over the whole sequences, so that it has the bits of
 * qkv_matmul on them wherever the other positions' gradients are zero (their rows would add
 * nothing): a model that computes only the positions with a target trains to the bits of one
 * that computes them all. */
QKV_API qkv_tensor *qkv_matmul_rows(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b, int seq_len,
                                    int n, const int32_t *at);
QKV_API qkv_tensor *qkv_scale(qkv_ctx *ctx, qkv_tensor *x, double s); /* s·x */
/* y = x + M, where `mask` holds 0 (keep) or -inf (drop) and broadcasts to x's shape. Entries
 * dropped have zero gradient. Build masks with the helpers below. */
QKV_API qkv_tensor *qkv_mask(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *mask);
/* Row-wise over the last dim, max subtracted. A row that is entirely -inf gives all zeros
 * (no NaN), and its gradient is zero. */
QKV_API qkv_tensor *qkv_softmax(qkv_ctx *ctx, qkv_tensor *x);
/* a + b and a * b, where b broadcasts to a's shape (trailing dims aligned; b's dims are 1 or equal). */
QKV_API qkv_tensor *qkv_add(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b);
QKV_API qkv_tensor *qkv_mul(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b);
/* Rows of `table` (V, D) picked by `idx`, I32 of up to 3 dims; the result has shape
 * idx.shape + (D). Dies on an index outside [0, V). The gradient of a row hit several times
 * is the sum. */
QKV_API qkv_tensor *qkv_embedding(qkv_ctx *ctx, qkv_tensor *table, qkv_tensor *idx);
/* A view: the same data under a new shape of the same size, no copy (writes to one show in
 * the other). Dies if the sizes differ. */
QKV_API qkv_tensor *qkv_reshape(qkv_ctx *ctx, qkv_tensor *x, int ndim, const int64_t *shape);
/* Swaps dims dim0 and dim1 (0-based), as a copy. */
QKV_API qkv_tensor *qkv_transpose(qkv_ctx *ctx, qkv_tensor *x, int dim0, int dim1);
/* Rows at[0..n) of each (T, C) matrix of x (..., T, C), as a copy (..., n, C): positions of
 * each sequence. Each at[i] in [0, T); the array is copied. A row picked twice gets the sum
 * of its gradients. */
QKV_API qkv_tensor *qkv_select_rows(qkv_ctx *ctx, qkv_tensor *x, int n, const int32_t *at);
/* Mean over rows of -log softmax(logits)[target], a scalar. logits is (..., V), targets is
 * I32 with logits' shape minus the last dim; rows whose target is `ignore_index` count for
 * nothing. If every row is ignored the loss is 0. Dies on a target outside [0, V) that is
 * not ignore_index. Gradients flow to logits only. */
QKV_API qkv_tensor *qkv_cross_entropy(qkv_ctx *ctx, qkv_tensor *logits, qkv_tensor *targets,
                                      int32_t ignore_index);
/* Scalars: mean((a-b)^2) over a and b of the same shape; the sum and the mean of x. */
QKV_API qkv_tensor *qkv_mse(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b);
QKV_API qkv_tensor *qkv_sum(qkv_ctx *ctx, qkv_tensor *x);
QKV_API qkv_tensor *qkv_mean(qkv_ctx *ctx, qkv_tensor *x);

/* ---- the MLP's activations and LayerNorm ---- */
/* An MLP's nonlinearity: ReLU, GELU as x·Φ(x) with the erf, or GELU's tanh approximation
 * 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), as PyTorch's relu, gelu and
 * gelu(approximate='tanh') define them. */
typedef enum { QKV_ACT_RELU, QKV_ACT_GELU, QKV_ACT_GELU_TANH } qkv_act;
#define QKV_ACTS 3
QKV_API const char *qkv_act_name(qkv_act act); /* "relu", "gelu", "gelu-tanh"; "?" if unknown */
/* Elementwise max(x, 0) (NaN stays NaN); the gradient is dy where x > 0, else 0 (at 0 too, as
 * PyTorch). */
QKV_API qkv_tensor *qkv_relu(qkv_ctx *ctx, qkv_tensor *x);
/* Elementwise GELU in the form `act` (QKV_ACT_GELU or QKV_ACT_GELU_TANH; dies on another). */
QKV_API qkv_tensor *qkv_gelu(qkv_ctx *ctx, qkv_tensor *x, qkv_act act);
/* qkv_relu or qkv_gelu, as `act` says (dies on an unknown act). */
QKV_API qkv_tensor *qkv_activation(qkv_ctx *ctx, qkv_tensor *x, qkv_act act);
/* LayerNorm over the last dim C of x (..., C): y = (x - mean)/sqrt(var + eps)·gain + bias,
 * var the biased variance (divided by C), gain and bias of shape (C) and x's dtype (neither
 * NULL), eps finite and >= 0, as PyTorch's layer_norm. It is two ops, so that the scale is a
 * tensor of the graph (and an analysis can edit it):
 *   s = qkv_layernorm_scale(x, eps): (..., 1), each row's 1/sqrt(var + eps);
 *   y = qkv_layernorm_apply(x, s, gain, bias): (x - mean)·s·gain + bias, with s as given
 *       (x's shape with a last dim of 1), its gradient taken with s held (ds its own);
 * qkv_layernorm is the one then the other. When an output takes a gradient, the scale keeps
 * each row's mean and scale in double for its backward, and the apply each row's mean, in
 * `ctx`. */
QKV_API qkv_tensor *qkv_layernorm_scale(qkv_ctx *ctx, qkv_tensor *x, double eps);
QKV_API qkv_tensor *qkv_layernorm_apply(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *s,
                                        qkv_tensor *gain, qkv_tensor *bias);
QKV_API qkv_tensor *qkv_layernorm(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *gain,
                                  qkv_tensor *bias, double eps);
#define QKV_LAYERNORM_EPS 1e-5 /* the model's eps, as PyTorch's default */

/* ---- masks: 0 where kept, -inf where dropped, in the dtype of the scores -------------- */
/* Each returns a new leaf of `dtype` (f32 or f64) owned by `ctx`, for qkv_mask and the
 * `mask` of attention; the arrays passed are copied. */
/* (Nq, Nk): query i sees keys j <= i + (Nk - Nq), so that the last query sees every key. */
QKV_API qkv_tensor *qkv_mask_causal(qkv_ctx *ctx, qkv_dtype dtype, int64_t nq, int64_t nk);
/* (B, 1, 1, Nk): batch b sees keys j < lengths[b]; `lengths` has B entries, each in 0..Nk
 * (0 masks every key: zero output). Dies otherwise. */
QKV_API qkv_tensor *qkv_mask_padding(qkv_ctx *ctx, qkv_dtype dtype, int64_t batch, int64_t nk,
                                     const int32_t *lengths);
/* Any boolean mask of the given shape: keep[i] != 0 keeps element i (row-major, `size`
 * entries). The shape must broadcast to the scores it is used with. Dies if keep is NULL. */
QKV_API qkv_tensor *qkv_mask_from_bool(qkv_ctx *ctx, qkv_dtype dtype, int ndim,
                                       const int64_t *shape, const uint8_t *keep);

/* ---- attention --------------------------------------------------------------------------- */
/* softmax(scale · Q·Kᵀ + M)·V over batch × heads.
 * Q is (..., Nq, Dk), K is (..., Nk, Dk), V is (..., Nk, Dv); the result is (..., Nq, Dv),
 * owned by `ctx` like any op's. mask may be NULL; scale <= 0 means 1/sqrt(Dk). A query whose
 * keys are all masked gets zero weights, zero output and zero gradient, never a NaN.
 * If `weights` is NULL this is the fused op; otherwise the composed one, and *weights
 * receives the attention weights (..., Nq, Nk), a tensor of `ctx`. Both give the same values
 * and gradients up to rounding. Dies when the shapes do not fit. */
QKV_API qkv_tensor *qkv_attention(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k, qkv_tensor *v,
                                  qkv_tensor *mask, double scale, qkv_tensor **weights);
/* Composed from matmul (Kᵀ without a copy), scale, mask, softmax and matmul; every
 * intermediate is a tensor of the graph, so the (..., Nq, Nk) weights exist. */
QKV_API qkv_tensor *qkv_attention_unfused(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k,
                                          qkv_tensor *v, qkv_tensor *mask, double scale,
                                          qkv_tensor **weights);
/* One op: keys in tiles with an online softmax, and a backward pass that recomputes the tiles
 * from the row log-sum-exp, so the (..., Nq, Nk) matrix is never stored (only a small one is
 * kept: qkv_set_attention_probs). Leading dims of
 * Q, K and V must be equal (no broadcasting); mask must broadcast to (..., Nq, Nk). */
QKV_API qkv_tensor *qkv_attention_fused(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k,
                                        qkv_tensor *v, qkv_tensor *mask, double scale);
/* The fused op over `heads` heads laid side by side in each row, as x·W_Q gives them:
 * q (..., Nq, H·Dk), k (..., Nk, H·Dk), v (..., Nk, H·Dv) -> (..., Nq, H·Dv), head h in
 * columns h·D .. h·D + D − 1 of each. The same values and gradients, to the bit, as splitting
 * the heads out ((..., N, H, D) transposed to (..., H, N, D)), qkv_attention_fused and merging
 * them back, without those copies. q has at most 3 dims; mask must broadcast to
 * (..., H, Nq, Nk); scale <= 0 means 1/sqrt(Dk). */
QKV_API qkv_tensor *qkv_attention_heads(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k,
                                        qkv_tensor *v, qkv_tensor *mask, int heads,
                                        double scale);

/* ---- toy tasks ------------------------------------------------------------------------- */
typedef enum {
    QKV_TASK_COPY,    /* y[i] = x[i]; ideal attention: the diagonal */
    QKV_TASK_REVERSE, /* y[i] = x[T-1-i]; the anti-diagonal */
    QKV_TASK_SHIFT,   /* y[i] = x[i-1] under a causal mask; the sub-diagonal */
    QKV_TASK_LOOKUP,  /* (key,value) pair tokens, then a query naming a key; y[T-1] = its value */
    QKV_TASK_MAX,     /* y[i] = max(x); every position attends to the maximum */
    QKV_TASK_INDUCTION, /* a segment of n distinct tokens, then the same again (causal); in the
                           repeat y[i] = x[i+1]: layer 1 previous token, last layer induction */
    QKV_TASK_RECALL,  /* key-value token pairs, then queried keys (causal); y = the key's value */
    QKV_TASK_SORT,    /* n distinct tokens, a separator, then the tokens in ascending order
                         (causal); each output position predicts the next larger token */
    QKV_TASK_TRANSLATE, /* cross-attention: T source tokens, T/2 targets; target i is source
                           token 2i+1 through a fixed dictionary into a second vocabulary */
    QKV_TASK_MODULAR, /* a b = with one target, (a op b) mod P, at `=`; every pair a, b below P:
                         a fixed share trains, the rest is held out (qkv_task_modular) */
    QKV_TASK_DATA,    /* a user's examples from a file (qkv train --data); no ideal pattern */
    QKV_TASK_COUNT
} qkv_task_kind;

/* modular's operation: (a + b), (a - b) or (a · b) mod P */
typedef enum { QKV_MODULAR_ADD, QKV_MODULAR_SUB, QKV_MODULAR_MUL, QKV_MODULAR_OPS } qkv_modular_op;
#define QKV_MODULAR_SEQ_LEN 3 /* a b = */

typedef struct {
    qkv_task_kind kind;
    int seq_len, vocab;
    bool causal;          /* the task is defined under a causal mask */
    int n_keys, n_values; /* lookup: pair token = key·n_values + value, query = n_keys·n_values + key;
                             recall: key tokens 0..n_keys-1, value tokens n_keys..n_keys+n_values-1 */
    int n_pairs;          /* recall: key-value pairs before the queries */
    int n_outputs;        /* data: the distinct output tokens (for the chance level) */
    int target_len;       /* 0: one target per position; translate: T/2 targets, and the model
                             is an encoder-decoder (qkv_model_config.target_len) */
    /* modular: tokens 0..modulus-1 are the numbers, token `modulus` is `=` (vocab = modulus + 1);
     * n_train = floor(train_frac · modulus²) pairs train, split by data_seed */
    int modulus, n_train;
    qkv_modular_op op;
    double train_frac;
    uint64_t data_seed;
} qkv_task;

/* Names are "copy", "reverse", "shift", "lookup", "max", ..., "modular" (static; "?" if
 * unknown). */
QKV_API const char *qkv_task_name(qkv_task_kind kind);
/* modular's operations by name: "add", "sub", "mul" (static; "?" if unknown). */
QKV_API const char *qkv_modular_op_name(qkv_modular_op op);
/* The default vocabulary of a task at a given length (0 if the length is invalid). */
QKV_API int qkv_task_default_vocab(qkv_task_kind kind, int seq_len);
/* Fills *task from a name, a length and a vocabulary (0 for the default), after checking
 * them: QKV_ERR_VALUE with a message naming the problem (an unknown name, a length outside
 * QKV_MIN_TASK_SEQ_LEN..QKV_MAX_TASK_SEQ_LEN or too long for lookup, a vocabulary allowing fewer than 4096 sequences). */
QKV_API qkv_status qkv_task_init(qkv_task *task, const char *name, int seq_len, int vocab);
/* Fills *task as the modular task: inputs `a b =` for every pair a, b in 0..modulus-1, target
 * (a op b) mod modulus at `=`; floor(train_frac · modulus²) pairs train and the others are
 * held out, chosen by data_seed (qkv_task_modular_split). QKV_ERR_VALUE naming the problem: a
 * modulus outside 2..QKV_MAX_MODULUS, an unknown op, train_frac outside (0, 1) or leaving no
 * training or no held-out pair. qkv_task_init("modular", 3, vocab) is this with modulus
 * vocab - 1 (vocab 0: 113), add, 0.3 and data seed 0. */
QKV_API qkv_status qkv_task_modular(qkv_task *task, int modulus, qkv_modular_op op,
                                    double train_frac, uint64_t data_seed);
/* modular's split: order[modulus²] receives the pairs' indices a·modulus + b shuffled by the
 * data seed, the training pairs first: order[0 .. n_train-1] train, the rest are held out.
 * The shuffle (docs/training.md): order[k] = k, then for i = 0 .. n_train-1, j = i +
 * below(N - i) and order[i], order[j] swapped, below() drawn from qkv_rng_seed(data_seed ^
 * QKV_MODULAR_SPLIT_XOR). */
#define QKV_MODULAR_SPLIT_XOR 0x6d6f64756c617200ull /* "modular\0" */
QKV_API void qkv_task_modular_split(const qkv_task *task, int32_t *order);
/* Draws one sequence into the caller's arrays tokens[T] and targets[T] (targets[T/2] for
 * translate: task.target_len when it is not 0; -1 where a position
 * carries no target). Held-out sequences (a fixed eighth of all sequences, by hash; modular:
 * the pairs its split holds out) are drawn only when `heldout` is true, and never otherwise,
 * so training never sees them. */
QKV_API void qkv_task_sample(const qkv_task *task, qkv_rng *rng, bool heldout, int32_t *tokens,
                             int32_t *targets);
/* The targets of any input tokens[T] (not only one the task draws), as qkv_task_sample gives
 * them: into targets[T] (targets[T/2] for translate), -1 where a position carries none
 * (induction: none before the first token comes back; lookup: none unless the last token
 * queries a key of the pairs). QKV_ERR_VALUE, naming the position and the token ("position
 * 1 holds 'w1', a target word: ..."), when a token leaves a target undefined: a token outside
 * 0..vocab-1; translate: a target word in the input, which holds source words; recall: a
 * query of a key no pair holds; recall and lookup: a query of a key two pairs give different
 * values. targets is then not written. */
QKV_API qkv_status qkv_task_targets(const qkv_task *task, const int32_t *tokens, int32_t *targets);
/* Whether tokens[T] is held out: a hash of the tokens (1 in 8) for the generated tasks;
 * modular: the pair's place in qkv_task_modular_split (O(n_train) draws, no memory), and an
 * input that is no pair (`a b =`) is not. */
QKV_API bool qkv_task_is_heldout(const qkv_task *task, const int32_t *tokens); /* tokens[T] */
/* ideal[i*T + j] = 1 where query i ideally attends to key j, else 0 (rows without a target
 * are all 0); `ideal` is the caller's array of T*T bytes. */
QKV_API void qkv_task_ideal(const qkv_task *task, const int32_t *tokens, uint8_t *ideal);
/* Layer `layer`'s ideal pattern in a model of `layers` layers, as qkv_task_ideal: the same
 * pattern in every layer, except for induction and recall, whose last layer has the task's
 * pattern and whose earlier layers the previous-token pattern. */
QKV_API void qkv_task_ideal_layer(const qkv_task *task, const int32_t *tokens, int layer,
                                  int layers, uint8_t *ideal);
/* The least number of layers (with the residual stream) that can solve the task: 2 for
 * induction and recall, else 1. */
QKV_API int qkv_task_min_layers(const qkv_task *task);
/* The held-out accuracy of guessing: 1 / the number of tokens a target can be. */
QKV_API double qkv_task_chance(const qkv_task *task);
/* A short printable label of a token, e.g. "7", "k2:v1" or "?k2", into buf (cut to len). */
QKV_API void qkv_task_token_label(const qkv_task *task, int32_t token, char *buf, size_t len);

/* How a model's weights are drawn from its seed (qkv_model_config.init), each element as
 * std·normal() in the one order of docs/model.md, s = init_scale; biases start at 0 and
 * LayerNorm gains at 1 under both:
 *   QKV_INIT_QKV   (0) embeddings std s, each weight matrix s/√fan_in: W_Q, W_K, W_V, W_O,
 *                  W_in and the head s/√C, W_out s/√N (N the MLP's width)
 *   QKV_INIT_PAPER (1) as Nanda et al. (2023) drew their grokking model: every tensor s/√C,
 *                  the embeddings and W_out too, but the head s/√V (V its outputs); s = 1 is
 *                  theirs */
typedef enum { QKV_INIT_QKV, QKV_INIT_PAPER } qkv_init;
#define QKV_INITS 2

/* What `qkv train` takes for the options not given, by task: one layer of width 64 solves the
 * first five tasks in 3000 steps; induction and recall need a second layer and the residual
 * stream (layer 1 copies each token's predecessor into its position, layer 2 matches on it). */
typedef struct {
    int seq_len, d_model, heads, layers;
    bool residual;
    int64_t steps;
    double lr[3]; /* the peak learning rate by optimizer: lr[QKV_SGD], [QKV_MOMENTUM], [QKV_ADAM] */
    /* modular's training, as Nanda et al. (2023) trained it; the other tasks take the first
     * values: */
    int mlp;             /* 0 (modular 512) */
    int batch;           /* 32 (modular 0: the full batch, every training pair each step) */
    double weight_decay; /* 0 (modular 1) */
    double clip;         /* 1 (modular 0: off) */
    double beta2;        /* Adam's: 0.999 (modular 0.98) */
    bool cosine;         /* the schedule: cosine (modular constant) */
    int64_t warmup;      /* -1: steps/20 (modular 10) */
    qkv_init init;       /* how the weights are drawn: QKV_INIT_QKV (modular QKV_INIT_PAPER) */
} qkv_task_defaults;
/* The defaults of a task by name ("copy" ... "translate", or "data" for a run on a data
 * file); an unknown name gets copy's. */
QKV_API qkv_task_defaults qkv_train_defaults(const char *task);

/* ---- the model: embeddings, L layers of multi-head self-attention, a vocabulary head ---- */
/* Where a model normalizes its stream: nowhere, or LayerNorm before each attention and each
 * MLP (pre-LN) and once more before the vocabulary head. */
typedef enum { QKV_NORM_NONE, QKV_NORM_LAYERNORM } qkv_norm;
QKV_API const char *qkv_norm_name(qkv_norm norm); /* "none", "layernorm"; "?" if unknown */
typedef struct {
    int vocab, seq_len, d_model, heads, layers;
    bool residual;      /* x + attention(x) around each layer */
    bool causal;        /* causal mask on every layer */
    double init_scale;  /* s of `init`: QKV_INIT_QKV's weights ~ N(0, s² / fan_in) */
    qkv_dtype dtype;    /* of the weights and every activation: QKV_F32 (0, the default) or
                         * QKV_F64; both draw the same normals, f32 rounds them */
    int target_len;     /* 0: self-attention, one output per input position. Otherwise an
                         * encoder-decoder: To = target_len decoder positions (their own learned
                         * embedding "dec_pos_emb") are the queries of every layer, and attend by
                         * cross-attention to the keys and values of the T embedded inputs */
    int mlp;            /* 0: attention only. Otherwise an MLP of `mlp` hidden units after each
                         * attention layer, in the residual stream: x + W_out·act(W_in·x + b_in)
                         * + b_out (needs `residual`) */
    qkv_act act;        /* the MLP's activation (QKV_ACT_RELU, 0, the default) */
    qkv_norm norm;      /* QKV_NORM_NONE (0, the default) or QKV_NORM_LAYERNORM (needs
                         * `residual`) */
    qkv_init init;      /* how the weights are drawn (qkv_init): QKV_INIT_QKV (0, the default)
                         * or QKV_INIT_PAPER; both draw the same normals in the same order,
                         * only their scales differ */
} qkv_model_config;

typedef struct {
    qkv_model_config cfg;
    qkv_ctx *params;            /* owns every parameter, its gradient and optimizer state */
    qkv_tensor *tok_emb;        /* (V, C)  "tok_emb" */
    qkv_tensor *pos_emb;        /* (T, C)  "pos_emb" */
    qkv_tensor *w_q[QKV_MAX_LAYERS], *w_k[QKV_MAX_LAYERS], *w_v[QKV_MAX_LAYERS],
        *w_o[QKV_MAX_LAYERS];   /* (C, C), (in, out): y = x·W; "attn.<l>.w_q" ... */
    qkv_tensor *head_w;         /* (C, V)  "head.w" */
    qkv_tensor *head_b;         /* (V)     "head.b" */
    qkv_tensor *dec_pos_emb;    /* (To, C) "dec_pos_emb", encoder-decoder models only */
    /* With an MLP (cfg.mlp = N > 0), each layer's: */
    qkv_tensor *mlp_w_in[QKV_MAX_LAYERS];  /* (C, N) "mlp.<l>.w_in" */
    qkv_tensor *mlp_b_in[QKV_MAX_LAYERS];  /* (N)    "mlp.<l>.b_in" */
    qkv_tensor *mlp_w_out[QKV_MAX_LAYERS]; /* (N, C) "mlp.<l>.w_out" */
    qkv_tensor *mlp_b_out[QKV_MAX_LAYERS]; /* (C)    "mlp.<l>.b_out" */
    /* With LayerNorm, the gain and bias (C) before each layer's attention ("attn.<l>.ln.gain",
     * "attn.<l>.ln.bias"), before its MLP ("mlp.<l>.ln.gain", ...) and before the head
     * ("ln_final.gain", "ln_final.bias"). */
    qkv_tensor *ln_attn_gain[QKV_MAX_LAYERS], *ln_attn_bias[QKV_MAX_LAYERS];
    qkv_tensor *ln_mlp_gain[QKV_MAX_LAYERS], *ln_mlp_bias[QKV_MAX_LAYERS];
    qkv_tensor *ln_final_gain, *ln_final_bias;
    int nparams;
    qkv_tensor *param[QKV_MAX_PARAMS];
    char param_name[QKV_MAX_PARAMS][32];
} qkv_model;

/* The one check of a model config: every field within its limits (above), heads dividing
 * d_model, a known dtype. QKV_ERR_VALUE names the first field out of place, e.g. "vocab 1 is
 * out of range (2..1000000)"; allocates nothing. */
QKV_API qkv_status qkv_model_config_check(const qkv_model_config *cfg);
/* Checks the config (qkv_model_config_check) and the memory it needs
 * (QKV_ERR_NOMEM: over half of the memory qkv may use, the smallest of the physical memory,
 * the cgroup's limit and ulimit -v/-d; or an allocation failed), then draws the
 * weights from `seed`. On success *m owns a parameter context (m->params) that the caller
 * releases with qkv_model_free; on failure there is nothing to free (qkv_model_free is
 * harmless). */
QKV_API qkv_status qkv_model_init(qkv_model *m, const qkv_model_config *cfg, uint64_t seed);
QKV_API void qkv_model_free(qkv_model *m); /* frees m->params: weights, grads, optimizer state */
/* Loads the model a `qkv train` run saved (its model.safetensors): the config from the file's
 * metadata, then the weights, in the file's dtype; the optimizer state is not read. On success
 * *m is as qkv_model_init leaves it (free it with qkv_model_free) and, if task is not NULL,
 * *task is the task it was trained on: a built-in task as qkv_task_init makes it, or for a
 * model of a data file kind QKV_TASK_DATA with its seq_len, vocab and target_len (n_outputs
 * 0: the data file is not read). Fails, with nothing to free, with QKV_ERR_IO, QKV_ERR_FORMAT
 * (not a qkv model, a metadata value missing, out of range or unknown, a weight that is NaN)
 * or QKV_ERR_MISMATCH (a weight of another shape or dtype), the message naming the file. */
QKV_API qkv_status qkv_model_load(qkv_model *m, qkv_task *task, const char *path);
/* Builds the forward pass for tokens (B, T) in `step` and returns the logits (B, T, V), a
 * tensor of `step`; `tokens` (B·T entries in [0, V)) is copied. If attn is not NULL (an
 * array of cfg.layers pointers), attn[l] receives layer l's attention weights (B, H, T, T)
 * and the composed attention is used. Dies on a token outside the vocabulary. */
QKV_API qkv_tensor *qkv_model_forward(qkv_model *m, qkv_ctx *step, const int32_t *tokens,
                                      int batch, qkv_tensor **attn);
/* The same with a padding mask: sequence b holds lengths[b] real tokens (1..T), and keys at
 * positions >= lengths[b] get exactly zero weight in every layer (lengths NULL: none padded).
 * In an encoder-decoder model the logits are (B, To, V) and attn[l] is (B, H, To, T). */
QKV_API qkv_tensor *qkv_model_forward_padded(qkv_model *m, qkv_ctx *step, const int32_t *tokens,
                                             const int32_t *lengths, int batch, qkv_tensor **attn);
/* The logits at positions at[0] < at[1] < ... < at[n-1] of each sequence only, (B, n, V), of
 * qkv_model_forward_padded: the rows of its logits there, bit for bit. What training reads
 * where only those positions have a target. In a self-attention model without LayerNorm,
 * everything past the last layer's keys and values (its queries, W_O, its MLP, the head) is
 * computed at those positions only (qkv_select_rows, qkv_matmul_rows), and a backward pass
 * from a loss on them gives the bits of qkv_model_forward_padded's wherever the other
 * positions' logits take no gradient; elsewhere every position is computed and the rows
 * picked. */
QKV_API qkv_tensor *qkv_model_forward_at(qkv_model *m, qkv_ctx *step, const int32_t *tokens,
                                         const int32_t *lengths, int batch, int n,
                                         const int32_t *at);
/* What one attention layer computed, every part a tensor of the step's graph (so that after
 * qkv_backward each holds its gradient too). Shapes for tokens (B, T), Dk = d_model / heads;
 * in an encoder-decoder model the query side has To rows: Q (B, H, To, Dk), the (B, H, To, T)
 * scores and weights, head_out (B, H, To, Dk). */
typedef struct {
    qkv_tensor *q, *k, *v;  /* (B, H, T, Dk): the projections, split into heads */
    qkv_tensor *scores;     /* (B, H, T, T): S = Q·Kᵀ */
    qkv_tensor *scaled;     /* (B, H, T, T): S / sqrt(Dk) */
    qkv_tensor *masked;     /* (B, H, T, T): S / sqrt(Dk) + M, what enters the softmax (-inf
                               where the causal or padding mask drops a key; `scaled` itself
                               without one) */
    qkv_tensor *weights;    /* (B, H, T, T): A = softmax(masked) */
    qkv_tensor *head_out;   /* (B, H, T, Dk): A·V, each head's output before W_O */
} qkv_layer_trace;
/* qkv_model_forward with the composed attention, keeping every layer's parts in
 * trace[0 .. cfg.layers-1] (the caller's array): qkv_model_forward_probe without edits, its
 * probe's layers copied out. Same logits as qkv_model_forward with attn. */
QKV_API qkv_tensor *qkv_model_forward_trace(qkv_model *m, qkv_ctx *step, const int32_t *tokens,
                                            int batch, qkv_layer_trace *trace);
/* The same with a padding mask, as qkv_model_forward_padded (lengths NULL: none padded). */
QKV_API qkv_tensor *qkv_model_forward_trace_padded(qkv_model *m, qkv_ctx *step,
                                                   const int32_t *tokens, const int32_t *lengths,
                                                   int batch, qkv_layer_trace *trace);
/* ---- explaining a model: one intervention point ----
 * Without layer norm or MLP the logits are linear in each head's output z = A·V given the
 * attention weights, so removing, replacing or differentiating a part of the forward answers
 * which heads matter (ablation), which path carries an answer (patching) and how much each
 * head adds to a logit (attribution). Layers, heads and positions are counted from 0 here.
 *
 * The sites an edit can change, each a tensor of the forward (shapes for tokens (B, T), Dk =
 * d_model / heads, To = T or an encoder-decoder's decoder positions):
 *   z        (B, H, To, Dk)  a head's output A·V, before W_O
 *   q        (B, H, To, Dk)  a head's queries
 *   k, v     (B, H, T, Dk)   a head's keys and values (rows: key positions)
 *   pattern  (B, H, To, T)   a head's attention weights A (after the softmax: an edited row
 *                            need not sum to 1)
 *   resid_pre, resid_post (B, To, C)  the stream entering and leaving a layer (the decoder's
 *                            in an encoder-decoder; without the residual stream, the layer's
 *                            input and output; with an MLP, resid_post is after it)
 * and in a model with an MLP of N units (cfg.mlp):
 *   resid_mid (B, To, C)     the stream between the layer's attention and its MLP
 *   mlp_pre, mlp_post (B, To, N)  each neuron before and after the activation (columns:
 *                            neurons)
 *   mlp_out  (B, To, C)      what the MLP adds to the stream (b_out included)
 * and in a model with LayerNorm (cfg.norm):
 *   ln_scale (B, To, 1)      one LayerNorm's scale 1/sqrt(var + eps) of each row, before
 *                            qkv_layernorm_apply reads it; the edit's `ln` says which of
 *                            layer l's: QKV_LN_ATTN (before its attention), QKV_LN_MLP (before
 *                            its MLP, in a model with one), or QKV_LN_FINAL (the final
 *                            LayerNorm, before the vocabulary head: layer = the last layer) */
typedef enum {
    QKV_SITE_Z,
    QKV_SITE_Q,
    QKV_SITE_K,
    QKV_SITE_V,
    QKV_SITE_PATTERN,
    QKV_SITE_RESID_PRE,
    QKV_SITE_RESID_POST,
    QKV_SITE_RESID_MID,
    QKV_SITE_MLP_PRE,
    QKV_SITE_MLP_POST,
    QKV_SITE_MLP_OUT,
    QKV_SITE_LN_SCALE,
} qkv_site;
#define QKV_SITES 12
/* Which LayerNorm of a layer an ln_scale edit or probe entry is (the final one: the last
 * layer's QKV_LN_FINAL). */
typedef enum { QKV_LN_ATTN, QKV_LN_MLP, QKV_LN_FINAL } qkv_ln;
#define QKV_LNS 3
typedef enum {
    QKV_HEAD_KEEP,    /* the site as computed (an edit that changes nothing) */
    QKV_HEAD_ZERO,    /* 0 */
    QKV_HEAD_MEAN,    /* value (1, ...): one value for every sequence (a mean) */
    QKV_HEAD_REPLACE, /* value (B, ...): sequence b's from another run */
} qkv_head_edit_kind;
/* One edit of one site: the entries of head `head` (ignored for the sites without heads: the
 * stream's, the MLP's, ln_scale) in row `position` (a query position; for k and v a key
 * position; -1: every row) and, for the pattern, column `key_position` (-1: every key), for
 * mlp_pre and mlp_post, neuron `key_position` (-1: every neuron); for ln_scale, of LayerNorm
 * `ln` of the layer. value has the site's full shape (its first dim 1 for MEAN; for ln_scale
 * (B, To, 1), that LayerNorm's) and is read only at those entries. */
typedef struct {
    qkv_head_edit_kind kind;
    int layer, head;
    int position;
    const qkv_tensor *value;
    qkv_site site;    /* QKV_SITE_Z when not set */
    int key_position; /* the pattern's key column, mlp_pre's and mlp_post's neuron; ignored
                         for the other sites */
    qkv_ln ln;        /* ln_scale: which LayerNorm of the layer; ignored for the other sites */
} qkv_head_edit;
/* A probe's hook (qkv_probe.hook), for edits that depend on the run itself (a caller's code
 * at each site, as the Python package's run_with_hooks): called at every site the forward
 * passes, in the forward's order, after the probe's edits of that site, with `user` the
 * probe's hook_user, the site's tensor y (the shapes above), `ln` its LayerNorm for ln_scale
 * (else QKV_LN_ATTN) and the step's context. It returns NULL to leave the site as it is, or
 * a tensor of y's dtype and shape (made in `step`, e.g. by qkv_from_array) that replaces y
 * where its bits differ from y's: the one edit of every site, y·keep + put, with keep 0 and
 * put the new value at those entries and keep 1, put 0 elsewhere (so an entry the hook leaves
 * alone is y exactly, and the gradient reaching y is dz·keep). y must not be changed or kept
 * past the call. Any other tensor dies, as a misuse does. */
typedef const qkv_tensor *(*qkv_probe_hook)(void *user, qkv_site site, int layer, qkv_ln ln,
                                            const qkv_tensor *y, qkv_ctx *step);
/* What qkv_model_forward_probe changes and keeps. Tensors it keeps belong to the step's
 * graph: after qkv_backward each holds the gradient of the loss by that part. Every tensor
 * kept is the one the forward used, after the edits. */
typedef struct {
    const qkv_head_edit *edits; /* applied in order (a later edit of the same entry wins) */
    int n_edits;
    qkv_layer_trace layer[QKV_MAX_LAYERS];  /* out: every part of each layer's attention (its
                                               head_out is z, its weights the pattern) */
    qkv_tensor *z[QKV_MAX_LAYERS];          /* out: layer[l].head_out */
    qkv_tensor *stream[QKV_MAX_LAYERS + 1]; /* out: (B, To, C), the stream entering layer l
                                               (after its resid_pre edits); [layers] is what
                                               the vocabulary head reads (after the last
                                               layer's resid_post edits) */
    qkv_tensor *resid_post[QKV_MAX_LAYERS]; /* out: (B, To, C), the stream leaving layer l
                                               after its resid_post edits (before layer l+1's
                                               resid_pre edits) */
    qkv_tensor *attn[QKV_MAX_LAYERS];       /* out: layer[l].weights */
    /* out, in a model with an MLP (cfg.mlp = N): layer l's */
    qkv_tensor *resid_mid[QKV_MAX_LAYERS];  /* (B, To, C): the stream between its attention
                                               and its MLP */
    qkv_tensor *mlp_pre[QKV_MAX_LAYERS];    /* (B, To, N): each neuron before the activation */
    qkv_tensor *mlp_post[QKV_MAX_LAYERS];   /* (B, To, N): each neuron after it */
    qkv_tensor *mlp_out[QKV_MAX_LAYERS];    /* (B, To, C): what the MLP adds to the stream */
    /* out, in a model with LayerNorm: (B, To, 1), each LayerNorm's scale 1/sqrt(var + eps)
     * after its edits, the one its apply read: [l][QKV_LN_ATTN] before layer l's attention,
     * [l][QKV_LN_MLP] before its MLP (with an MLP), [layers - 1][QKV_LN_FINAL] the final
     * LayerNorm's; NULL where there is none */
    qkv_tensor *ln_scale[QKV_MAX_LAYERS][QKV_LNS];
    /* in, optional: a hook called at every site (above; NULL: none), and what it is given */
    qkv_probe_hook hook;
    void *hook_user;
    /* out: (B, To, C), what layer l's attention adds to the stream, merge(z)·W_O (before the
     * residual sum; without the residual stream, the layer's output) */
    qkv_tensor *attn_out[QKV_MAX_LAYERS];
} qkv_probe;
/* qkv_model_forward_padded with the composed attention (training's fused path is
 * untouched), every site edited as probe->edits say, and every part of every layer kept in
 * *probe. With no edits, the same logits as qkv_model_forward_padded asking for the weights.
 * A misuse (a site, layer, head or position out of range, a value of another shape or dtype)
 * dies with one line, as a wrong shape does. */
QKV_API qkv_tensor *qkv_model_forward_probe(qkv_model *m, qkv_ctx *step, const int32_t *tokens,
                                            const int32_t *lengths, int batch, qkv_probe *probe);
/* The tensor of `site` at layer l that a probe kept (resid_pre: stream[l], resid_post:
 * resid_post[l], the MLP's sites: resid_mid[l] ... mlp_out[l]; NULL for those in a model
 * without an MLP). ln_scale has one a LayerNorm: probe->ln_scale[l][ln] (NULL here). */
QKV_API qkv_tensor *qkv_probe_site(const qkv_probe *probe, qkv_site site, int layer);
/* Bytes of parameters, gradients and Adam state, and of one training step's arena for a
 * batch: upper bounds, for memory checks before allocating (docs/errors.md). */
QKV_API double qkv_model_param_bytes(const qkv_model_config *cfg);
QKV_API double qkv_model_step_bytes(const qkv_model_config *cfg, int batch);

/* The size in bytes of the public struct named `name` ("qkv_tensor", "qkv_rng",
 * "qkv_model_config", "qkv_model", "qkv_task", "qkv_layer_trace", "qkv_head_edit",
 * "qkv_probe"), 0 for any other name: for bindings from other languages, which hold their own
 * copies of these layouts (the Python package checks its copies against them at import). */
QKV_API size_t qkv_struct_size(const char *name);

/* ---- circuits: what each head computes, read from the weights alone (docs/explain.md) ---- */
/* Layers and heads are 0-based; Dk = d_model / heads; every number is computed in double.
 * A head's circuits are its direct paths: in a model with an MLP they leave the MLPs out (the
 * MLPs are beside the heads, in the stream). In a model with LayerNorm they are the circuits
 * of its weights with the LayerNorms folded (docs/explain.md, "Circuits"): each gain into the
 * weights that read the stream, the centring into those that write it; the biases and the
 * division by sigma are left out. */
typedef enum { QKV_COMPOSE_Q, QKV_COMPOSE_K, QKV_COMPOSE_V } qkv_composition_kind;
/* Head `head` of layer `layer`, into the caller's arrays (any may be NULL), scaled as the
 * model scales its scores (1/sqrt(Dk)):
 *   qk (Rq, V): the token part of its attention scores, E_q W_Q W_Kᵀ Eᵀ, row a query, column
 *     a key token; the query rows are the V tokens, or an encoder-decoder's To decoder
 *     positions (E_q = tok_emb, or dec_pos_emb);
 *   qk_pos (Tq, T): the positional part, P_q W_Q W_Kᵀ Pᵀ (P_q = pos_emb, or dec_pos_emb);
 *   ov (V, V): E W_V W_O W_U, row t the logits the head adds when it attends to token t.
 * QKV_ERR_NOMEM when out of memory. */
QKV_API qkv_status qkv_head_circuits(const qkv_model *m, int layer, int head, double *qk,
                                     double *qk_pos, double *ov);
/* Every head's copying score, (L, H) into scores: Σ Re λ / Σ |λ| over the eigenvalues of its
 * OV circuit (1 for a head that copies, -1 for one that writes the opposite); NaN where every
 * eigenvalue is 0. QKV_ERR_NUMERIC if LAPACK's eigenvalues do not converge. libqkv links no
 * LAPACK: the first call loads it (dlopen; OPENBLAS_NUM_THREADS is 1 while it loads, then
 * put back), QKV_ERR_IO when it cannot be found, QKV_ERR_NOMEM when there is no memory to
 * load it or for OpenBLAS's workspace. */
QKV_API qkv_status qkv_copying_scores(const qkv_model *m, double *scores);
/* Composition scores between heads of consecutive layers, (L-1, 3, H, H) into scores, at
 * [l][kind][h1][h2] for head h1 of layer l and head h2 of layer l+1: ‖A·B‖ / (‖A‖ ‖B‖)
 * (Frobenius norms) with A = h1's W_V W_O and B = h2's W_Q W_Kᵀ (Q), W_K W_Qᵀ (K) or W_V W_O
 * (V). NaN where a norm is 0, and for K and V in an encoder-decoder (its keys and values
 * read the embeddings). Writes nothing for one layer. */
QKV_API qkv_status qkv_composition_scores(const qkv_model *m, double *scores);
/* The same between heads of every earlier layer l1 and later layer l2 (l1 < l2), consecutive
 * or not: (L(L-1)/2, 3, H, H) into scores, one (3, H, H) block per pair of layers in the order
 * (0, 1), (0, 2), .., (0, L-1), (1, 2), .., (L-2, L-1), [kind][h1][h2] in each as above; the
 * consecutive pairs' blocks are qkv_composition_scores's, bit for bit. Without the residual
 * stream a head reads only the layer before it: the other pairs' scores are of the weights
 * alone. Writes nothing for one layer. */
QKV_API qkv_status qkv_composition_scores_all(const qkv_model *m, double *scores);
/* The neuron-logit map of layer `layer`'s MLP, (N, V) into out: W_out·head.w, row n the
 * logits neuron n adds to the stream's direct path per unit of its activation (its part of
 * a logit is post_n times its row). QKV_ERR_VALUE for a model without an MLP. */
QKV_API qkv_status qkv_neuron_logits(const qkv_model *m, int layer, double *out);

/* ---- optimizers ---------------------------------------------------------------------------- */
typedef enum { QKV_SGD, QKV_MOMENTUM, QKV_ADAM } qkv_optim_kind;
typedef struct {
    qkv_optim_kind kind;
    double lr, momentum, beta1, beta2, eps, weight_decay;
    double clip;                 /* clip the global gradient norm to this; 0 = off */
    int64_t step;                /* updates made so far */
    int n;
    qkv_tensor *param[QKV_MAX_PARAMS];
    qkv_tensor *m[QKV_MAX_PARAMS]; /* momentum buffer / Adam first moment */
    qkv_tensor *v[QKV_MAX_PARAMS]; /* Adam second moment */
} qkv_optim;

QKV_API const char *qkv_optim_name(qkv_optim_kind kind); /* "sgd", "momentum", "adam"; static */
/* Sets *o to `kind` with learning rate `lr` and defaults momentum 0.9, beta1 0.9, beta2 0.999,
 * eps 1e-8, no weight decay, no clipping (change the fields afterwards), and allocates the
 * state of every parameter of `model` in the model's parameter context, so it lives and dies
 * with the model. The state has the parameters' dtype (f32 or f64). */
QKV_API void qkv_optim_init(qkv_optim *o, qkv_model *model, qkv_optim_kind kind, double lr);
/* One update of every parameter from its accumulated gradient (weight decay: L2 for SGD and
 * momentum, decoupled for Adam); returns the global gradient norm before clipping. The
 * gradients are left as they are: zero them before the next backward. */
QKV_API double qkv_optim_step(qkv_optim *o);

/* ---- safetensors files ----------------------------------------------------------------- */
/* The standard layout: an 8-byte little-endian header length, a JSON header naming each
 * tensor's dtype, shape and byte range, then the raw little-endian data. __metadata__ holds
 * string pairs. Writing is atomic: a temporary file is renamed over the target. */
typedef struct qkv_st qkv_st;
/* Writes `n` tensors (names[i] -> tensors[i], distinct names) and `nmeta` metadata pairs
 * (meta[2i] = key, meta[2i+1] = value) to `path`; nothing is kept. Returns QKV_OK, or
 * QKV_ERR_IO (the file or its temporary could not be written; the old file is untouched) or
 * QKV_ERR_NOMEM, with qkv_last_error() naming the path. */
QKV_API qkv_status qkv_st_save(const char *path, int n, const char *const *names,
                               const qkv_tensor *const *tensors, int nmeta,
                               const char *const *meta);
/* Reads and validates a whole file: header length within the file, known dtypes (F32, F64,
 * I32), distinct tensor names, byte ranges that match the shapes and tile the data exactly,
 * no NaN or Inf in float data. On success *out owns the file's contents; free it with qkv_st_free. On failure *out
 * is NULL and the status says why: QKV_ERR_IO (cannot open or read), QKV_ERR_FORMAT (not a
 * valid file), QKV_ERR_MISMATCH (a dtype or rank qkv does not read), QKV_ERR_NOMEM. */
QKV_API qkv_status qkv_st_load(const char *path, qkv_st **out);
QKV_API void qkv_st_free(qkv_st *st); /* NULL is a no-op */
/* The tensors in the file, and the name of tensor i in file order (NULL outside
 * 0..count-1). Returned strings belong to `st` and die with it. */
QKV_API int qkv_st_count(const qkv_st *st);
QKV_API const char *qkv_st_name(const qkv_st *st, int i);
/* The metadata value for `key`, or NULL; owned by `st`. */
QKV_API const char *qkv_st_meta(const qkv_st *st, const char *key);
/* Copies tensor `name` into dst->data after checking that it exists and has exactly dst's
 * dtype and shape; QKV_ERR_MISMATCH with a message naming the tensor otherwise (dst is then
 * untouched). dst's gradient and graph are not touched. */
QKV_API qkv_status qkv_st_read(const qkv_st *st, const char *name, qkv_tensor *dst);
/* Looks a tensor up: its dtype, ndim and shape, into whichever of the three pointers is not
 * NULL. False if absent. */
QKV_API bool qkv_st_info(const qkv_st *st, const char *name, qkv_dtype *dtype, int *ndim,
                         int64_t shape[QKV_MAX_DIMS]);

/* ---- gradient checks ---------------------------------------------------------------------- */
/* Each op (and attention) is checked in f64 against central finite differences, on several
 * shapes, with the loss Σ w ⊙ op(inputs) for random weights w. The error of one gradient
 * entry, analytic a against numeric n, is |a − n| absolute and |a − n| / max(|a|, |n|, 1e-3)
 * relative (the floor keeps entries that are zero up to rounding from dividing by ~0). */
typedef struct {
    const char *op;
    char shapes[400];      /* the shapes tried, e.g. "(3,4),(4,5) (2,3,4),(4,5)"; whole shapes */
    int cases;
    int64_t entries;       /* gradient entries compared */
    double max_abs_err;
    double max_rel_err;
    bool passed;           /* max_rel_err <= tol */
    bool out_of_memory;    /* a case found no memory for its contexts: not passed, no answer */
} qkv_gradcheck_result;
/* How many ops the check covers; they are numbered 0 .. count-1. */
QKV_API int qkv_gradcheck_count(void);
/* The name of op `index` as qkv_gradcheck_run reports it (static; NULL outside 0..count-1):
 * every op of qkv_op by its qkv_op_name, "attention", the composed attention, and "layernorm",
 * the LayerNorm composed of its two ops. */
QKV_API const char *qkv_gradcheck_op(int index);
/* Checks op `index` (every case of it, inputs drawn from `seed`) and reports the worst
 * errors; `op` points to a static name. Uses and frees its own contexts (out_of_memory when
 * they cannot be made). Dies on an index outside 0..count-1. */
QKV_API qkv_gradcheck_result qkv_gradcheck_run(int index, double tol, uint64_t seed);

#ifdef __cplusplus
}
#endif
#endif /* QKV_H */
