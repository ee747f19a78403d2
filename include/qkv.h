/* qkv.h - tensors, reverse-mode autograd and scaled dot-product attention.
 *
 * A complete training step, in 20 lines:
 *
 *     qkv_ctx *params = qkv_ctx_new(0);            // long-lived: weights, grads
 *     qkv_ctx *step   = qkv_ctx_new(0);            // per step: graph + activations
 *     qkv_rng rng = qkv_rng_seed(42);
 *     qkv_tensor *wq = qkv_param(params, qkv_randn(params, QKV_F32, 2, (int64_t[]){4, 2}, 0.5, &rng));
 *     qkv_tensor *wk = qkv_param(params, qkv_randn(params, QKV_F32, 2, (int64_t[]){4, 2}, 0.5, &rng));
 *     qkv_tensor *wv = qkv_param(params, qkv_randn(params, QKV_F32, 2, (int64_t[]){4, 2}, 0.5, &rng));
 *     for (int it = 0; it < 100; it++) {
 *         qkv_ctx_reset(step);                     // frees last step's graph in O(1)
 *         qkv_tensor *x = qkv_randn(step, QKV_F32, 2, (int64_t[]){3, 4}, 1.0, &rng);
 *         qkv_tensor *q = qkv_matmul(step, x, wq), *k = qkv_matmul(step, x, wk),
 *                    *v = qkv_matmul(step, x, wv);
 *         qkv_tensor *y = qkv_attention(step, q, k, v, NULL, 0.0, NULL);  // 0 => 1/sqrt(d_k)
 *         qkv_tensor *loss = qkv_mse(step, y, target);
 *         qkv_zero_grad(params);                   // explicit: backward accumulates
 *         qkv_backward(loss);
 *         qkv_sgd_step(params, 0.1f);
 *     }
 *     qkv_ctx_free(step); qkv_ctx_free(params);
 *
 * Shape letters used in comments throughout: B batch, H heads, Nq query length, Nk key
 * length, T sequence length (Nq = Nk = T in self-attention), C = d_model, Dk key/query
 * width, Dv value width, V vocabulary size.
 *
 * Ownership: every tensor belongs to the context that created it and lives until that
 * context is reset or freed. There is no per-tensor free.
 *
 * Errors: misuse of the API (shape mismatch, wrong dtype, NULL) is a programming error and
 * stops the process with one line naming the op and the shapes. Errors from the outside
 * world (files, user values) come back as a qkv_status; qkv_last_error() says what failed.
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
#define QKV_VERSION_MINOR 1
#define QKV_VERSION_PATCH 0
#define QKV_VERSION_STRING "0.1.0"

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

/* The message of the last error on this thread: one line, no trailing newline. */
QKV_API const char *qkv_last_error(void);
/* Sets the last error (printf-style) and returns `status`, for `return qkv_fail(...)`. */
QKV_API qkv_status qkv_fail(qkv_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---- random numbers: portable, seeded (xoshiro256**, seeded by splitmix64) --------------- */
typedef struct { uint64_t s[4]; } qkv_rng;
QKV_API qkv_rng qkv_rng_seed(uint64_t seed);
QKV_API uint64_t qkv_rng_u64(qkv_rng *rng);
QKV_API double qkv_rng_uniform(qkv_rng *rng);          /* in [0, 1), 53 random bits */
QKV_API double qkv_rng_normal(qkv_rng *rng);           /* mean 0, variance 1 */
QKV_API uint32_t qkv_rng_below(qkv_rng *rng, uint32_t n); /* uniform in [0, n), unbiased */

/* ---- contexts: arenas that own tensors and the graph ------------------------------------ */
typedef struct qkv_ctx qkv_ctx;
/* A new context. `capacity` bytes are reserved up front (0 for a default); it grows when
 * needed. Returns NULL when out of memory. */
QKV_API qkv_ctx *qkv_ctx_new(size_t capacity);
QKV_API void qkv_ctx_free(qkv_ctx *ctx);
/* Forgets every tensor of the context at once. After the first reset that follows growth, the
 * context holds one block big enough for the whole step, so warm steps never call malloc. */
QKV_API void qkv_ctx_reset(qkv_ctx *ctx);
/* No-grad mode: ops built in this context record no graph and need no gradient memory. */
QKV_API void qkv_ctx_set_no_grad(qkv_ctx *ctx, bool no_grad);
QKV_API bool qkv_ctx_no_grad(const qkv_ctx *ctx);
QKV_API size_t qkv_ctx_used(const qkv_ctx *ctx);     /* bytes in use */
QKV_API size_t qkv_ctx_capacity(const qkv_ctx *ctx); /* bytes reserved */
QKV_API uint64_t qkv_ctx_mallocs(const qkv_ctx *ctx);/* system allocations made so far */
/* Raw memory from the context, 64-byte aligned, zeroed. Aborts when the system is out of memory. */
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
};

QKV_API size_t qkv_dtype_size(qkv_dtype dtype);
QKV_API const char *qkv_dtype_name(qkv_dtype dtype);
QKV_API const char *qkv_op_name(qkv_op op);

/* Creation: `shape` has `ndim` entries, each >= 1. Data is owned by `ctx`. */
QKV_API qkv_tensor *qkv_new(qkv_ctx *ctx, qkv_dtype dtype, int ndim, const int64_t *shape);
QKV_API qkv_tensor *qkv_zeros(qkv_ctx *ctx, qkv_dtype dtype, int ndim, const int64_t *shape);
QKV_API qkv_tensor *qkv_ones(qkv_ctx *ctx, qkv_dtype dtype, int ndim, const int64_t *shape);
QKV_API qkv_tensor *qkv_scalar(qkv_ctx *ctx, qkv_dtype dtype, double value);
/* Copies `size` elements from `values`, which must be of the C type of `dtype`. */
QKV_API qkv_tensor *qkv_from_array(qkv_ctx *ctx, qkv_dtype dtype, int ndim, const int64_t *shape,
                                   const void *values);
/* Uniform in [lo, hi) and normal with mean 0 and standard deviation `std`. */
QKV_API qkv_tensor *qkv_rand(qkv_ctx *ctx, qkv_dtype dtype, int ndim, const int64_t *shape,
                             double lo, double hi, qkv_rng *rng);
QKV_API qkv_tensor *qkv_randn(qkv_ctx *ctx, qkv_dtype dtype, int ndim, const int64_t *shape,
                              double std, qkv_rng *rng);
/* Marks a leaf as a trainable parameter: gets a zeroed gradient buffer in its context. */
QKV_API qkv_tensor *qkv_param(qkv_ctx *ctx, qkv_tensor *t);
/* Element i (flat index) as a double, and setting it; for tests and printing. */
QKV_API double qkv_get(const qkv_tensor *t, int64_t i);
QKV_API void qkv_set(qkv_tensor *t, int64_t i, double value);
QKV_API double qkv_grad_get(const qkv_tensor *t, int64_t i);
/* Prints shape, dtype and values (at most `max_values`; 0 prints all). */
QKV_API void qkv_print(FILE *out, const qkv_tensor *t, const char *label, int64_t max_values);
/* "(2,3,4)" into buf; returns buf. */
QKV_API char *qkv_shape_str(const qkv_tensor *t, char *buf, size_t len);

/* ---- autograd ----------------------------------------------------------------------------- */
/* Runs the backward pass from `loss` (a scalar) through every op recorded in its context, in
 * reverse order of creation, which is a topological order. Gradients of leaves ACCUMULATE:
 * calling qkv_backward twice without qkv_zero_grad adds the two gradients, which is what makes
 * a tensor used several times (X feeding Q, K and V) correct, and lets users sum gradients
 * over micro-batches. Gradients of intermediate tensors are recomputed on every call. */
QKV_API void qkv_backward(qkv_tensor *loss);
/* Sets the gradient of every parameter of `ctx` to zero. */
QKV_API void qkv_zero_grad(qkv_ctx *ctx);
/* Plain SGD over every parameter of `ctx`: p -= lr * grad. */
QKV_API void qkv_sgd_step(qkv_ctx *ctx, float lr);
/* Calls fn on every parameter of `ctx`, in order of creation. */
QKV_API void qkv_ctx_for_params(qkv_ctx *ctx, void (*fn)(qkv_tensor *p, void *user), void *user);

/* ---- ops: each checks shapes when it is built and computes its output at once ---------- */
/* C = op(A)·op(B), op transposing the last two dims when asked, without a copy.
 * A is (..., M, K) [or (..., K, M) when trans_a], B is (..., K, N) [or (..., N, K)].
 * Leading (batch) dims must match, or B may be 2-D and is then shared by every batch. */
QKV_API qkv_tensor *qkv_matmul_ex(qkv_ctx *ctx, qkv_tensor *a, bool trans_a, qkv_tensor *b,
                                  bool trans_b);
QKV_API qkv_tensor *qkv_matmul(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b);
QKV_API qkv_tensor *qkv_scale(qkv_ctx *ctx, qkv_tensor *x, double s);
/* y = x + M, where `mask` holds 0 (keep) or -inf (drop) and broadcasts to x's shape. Entries
 * dropped have zero gradient. Build masks with the helpers below. */
QKV_API qkv_tensor *qkv_mask(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *mask);
/* Row-wise over the last dim, max subtracted. A row that is entirely -inf gives all zeros
 * (no NaN), and its gradient is zero. */
QKV_API qkv_tensor *qkv_softmax(qkv_ctx *ctx, qkv_tensor *x);
/* a + b and a * b, where b broadcasts to a's shape (trailing dims aligned; b's dims are 1 or equal). */
QKV_API qkv_tensor *qkv_add(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b);
QKV_API qkv_tensor *qkv_mul(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b);
/* table is (V, D), idx is I32 of any shape; the result has shape idx.shape + (D). */
QKV_API qkv_tensor *qkv_embedding(qkv_ctx *ctx, qkv_tensor *table, qkv_tensor *idx);
/* Same data, new shape of the same size. */
QKV_API qkv_tensor *qkv_reshape(qkv_ctx *ctx, qkv_tensor *x, int ndim, const int64_t *shape);
/* Swaps two dims (a copy). */
QKV_API qkv_tensor *qkv_transpose(qkv_ctx *ctx, qkv_tensor *x, int dim0, int dim1);
/* Mean over rows of -log softmax(logits)[target]. logits is (..., V), targets is I32 with
 * logits' shape minus the last dim; rows whose target is `ignore_index` count for nothing.
 * If every row is ignored the loss is 0. */
QKV_API qkv_tensor *qkv_cross_entropy(qkv_ctx *ctx, qkv_tensor *logits, qkv_tensor *targets,
                                      int32_t ignore_index);
QKV_API qkv_tensor *qkv_mse(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b); /* mean((a-b)^2) */
QKV_API qkv_tensor *qkv_sum(qkv_ctx *ctx, qkv_tensor *x);                /* scalar */
QKV_API qkv_tensor *qkv_mean(qkv_ctx *ctx, qkv_tensor *x);               /* scalar */

/* ---- masks: 0 where kept, -inf where dropped, in the dtype of the scores -------------- */
/* (Nq, Nk): query i sees keys j <= i + (Nk - Nq), so that the last query sees every key. */
QKV_API qkv_tensor *qkv_mask_causal(qkv_ctx *ctx, qkv_dtype dtype, int64_t nq, int64_t nk);
/* (B, 1, 1, Nk): batch b sees keys j < lengths[b]. */
QKV_API qkv_tensor *qkv_mask_padding(qkv_ctx *ctx, qkv_dtype dtype, int64_t batch, int64_t nk,
                                     const int32_t *lengths);
/* Any boolean mask: keep[i] != 0 keeps element i. Shape must broadcast to the scores. */
QKV_API qkv_tensor *qkv_mask_from_bool(qkv_ctx *ctx, qkv_dtype dtype, int ndim,
                                       const int64_t *shape, const uint8_t *keep);

/* ---- attention --------------------------------------------------------------------------- */
/* softmax(scale · Q·Kᵀ + M)·V over batch × heads.
 * Q is (..., Nq, Dk), K is (..., Nk, Dk), V is (..., Nk, Dv); the result is (..., Nq, Dv).
 * mask may be NULL; scale <= 0 means 1/sqrt(Dk). A query whose keys are all masked gets
 * zero weights, zero output and zero gradient.
 * If `weights` is NULL this is the fused op; otherwise the composed one, and *weights
 * receives the attention weights (..., Nq, Nk). */
QKV_API qkv_tensor *qkv_attention(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k, qkv_tensor *v,
                                  qkv_tensor *mask, double scale, qkv_tensor **weights);
/* Composed from matmul (Kᵀ without a copy), scale, mask, softmax and matmul; every
 * intermediate is a tensor of the graph, so the (..., Nq, Nk) weights exist. */
QKV_API qkv_tensor *qkv_attention_unfused(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k,
                                          qkv_tensor *v, qkv_tensor *mask, double scale,
                                          qkv_tensor **weights);
/* One op: keys in tiles with an online softmax, and a backward pass that recomputes the tiles
 * from the row log-sum-exp, so the (..., Nq, Nk) matrix is never stored. Leading dims of
 * Q, K and V must be equal; mask must broadcast to (..., Nq, Nk). */
QKV_API qkv_tensor *qkv_attention_fused(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k,
                                        qkv_tensor *v, qkv_tensor *mask, double scale);

/* ---- toy tasks ------------------------------------------------------------------------- */
typedef enum {
    QKV_TASK_COPY,    /* y[i] = x[i]; ideal attention: the diagonal */
    QKV_TASK_REVERSE, /* y[i] = x[T-1-i]; the anti-diagonal */
    QKV_TASK_SHIFT,   /* y[i] = x[i-1] under a causal mask; the sub-diagonal */
    QKV_TASK_LOOKUP,  /* (key,value) pair tokens, then a query naming a key; y[T-1] = its value */
    QKV_TASK_MAX,     /* y[i] = max(x); every position attends to the maximum */
    QKV_TASK_COUNT
} qkv_task_kind;

typedef struct {
    qkv_task_kind kind;
    int seq_len, vocab;
    bool causal;          /* the task is defined under a causal mask */
    int n_keys, n_values; /* lookup only: pair token = key·n_values + value, query = n_keys·n_values + key */
} qkv_task;

/* Names are "copy", "reverse", "shift", "lookup", "max". */
QKV_API const char *qkv_task_name(qkv_task_kind kind);
/* The default vocabulary of a task at a given length (0 if the length is invalid). */
QKV_API int qkv_task_default_vocab(qkv_task_kind kind, int seq_len);
/* Validates name, seq_len and vocab: QKV_ERR_VALUE with a message naming the problem. */
QKV_API qkv_status qkv_task_init(qkv_task *task, const char *name, int seq_len, int vocab);
/* Draws one sequence: tokens[T] and targets[T] (-1 where a position carries no target).
 * Held-out sequences (a fixed eighth of all sequences, by hash) are drawn only when
 * `heldout` is true, and never otherwise, so training never sees them. */
QKV_API void qkv_task_sample(const qkv_task *task, qkv_rng *rng, bool heldout, int32_t *tokens,
                             int32_t *targets);
QKV_API bool qkv_task_is_heldout(const qkv_task *task, const int32_t *tokens);
/* ideal[i*T + j] = 1 where query i ideally attends to key j (rows without a target are 0). */
QKV_API void qkv_task_ideal(const qkv_task *task, const int32_t *tokens, uint8_t *ideal);
/* A short printable label of a token, e.g. "7", "k2:v1" or "?k2". */
QKV_API void qkv_task_token_label(const qkv_task *task, int32_t token, char *buf, size_t len);

/* ---- the model: embeddings, L layers of multi-head self-attention, a vocabulary head ---- */
#define QKV_MAX_LAYERS 8
typedef struct {
    int vocab, seq_len, d_model, heads, layers;
    bool residual;      /* x + attention(x) around each layer */
    bool causal;        /* causal mask on every layer */
    double init_scale;  /* weights ~ N(0, init_scale² / fan_in) */
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
    int nparams;
    qkv_tensor *param[4 + 4 * QKV_MAX_LAYERS];
    char param_name[4 + 4 * QKV_MAX_LAYERS][32];
} qkv_model;

/* Checks the config (QKV_ERR_VALUE naming the culprit) and the memory it needs
 * (QKV_ERR_NOMEM), then draws the weights from `seed`. */
QKV_API qkv_status qkv_model_init(qkv_model *m, const qkv_model_config *cfg, uint64_t seed);
QKV_API void qkv_model_free(qkv_model *m);
/* Builds the forward pass for tokens (B, T) in `step` and returns the logits (B, T, V).
 * If attn is not NULL, attn[l] receives layer l's attention weights (B, H, T, T). */
QKV_API qkv_tensor *qkv_model_forward(qkv_model *m, qkv_ctx *step, const int32_t *tokens,
                                      int batch, qkv_tensor **attn);
/* Bytes of parameters, gradients and Adam state, and of one step's arena, for a batch. */
QKV_API double qkv_model_param_bytes(const qkv_model_config *cfg);
QKV_API double qkv_model_step_bytes(const qkv_model_config *cfg, int batch);

/* ---- optimizers ---------------------------------------------------------------------------- */
typedef enum { QKV_SGD, QKV_MOMENTUM, QKV_ADAM } qkv_optim_kind;
typedef struct {
    qkv_optim_kind kind;
    double lr, momentum, beta1, beta2, eps, weight_decay;
    double clip;                 /* clip the global gradient norm to this; 0 = off */
    int64_t step;                /* updates made so far */
    int n;
    qkv_tensor *param[4 + 4 * QKV_MAX_LAYERS];
    qkv_tensor *m[4 + 4 * QKV_MAX_LAYERS]; /* momentum buffer / Adam first moment */
    qkv_tensor *v[4 + 4 * QKV_MAX_LAYERS]; /* Adam second moment */
} qkv_optim;

QKV_API const char *qkv_optim_name(qkv_optim_kind kind);
/* Allocates the state for every parameter of `model` in the model's parameter context. */
QKV_API void qkv_optim_init(qkv_optim *o, qkv_model *model, qkv_optim_kind kind, double lr);
/* One update from the accumulated gradients; returns the gradient norm before clipping. */
QKV_API double qkv_optim_step(qkv_optim *o);

/* ---- safetensors files ----------------------------------------------------------------- */
/* The standard layout: an 8-byte little-endian header length, a JSON header naming each
 * tensor's dtype, shape and byte range, then the raw little-endian data. __metadata__ holds
 * string pairs. Writing is atomic: a temporary file is renamed over the target. */
typedef struct qkv_st qkv_st;
/* Writes `n` tensors (names[i] -> tensors[i]) and `nmeta` metadata pairs (meta[2i] = key,
 * meta[2i+1] = value) to `path`. */
QKV_API qkv_status qkv_st_save(const char *path, int n, const char *const *names,
                               const qkv_tensor *const *tensors, int nmeta,
                               const char *const *meta);
/* Reads and validates a whole file: header length within the file, known dtypes (F32, F64,
 * I32), byte ranges that match the shapes and tile the data exactly, no NaN or Inf in float
 * data. On success *out owns the file's contents; free it with qkv_st_free. */
QKV_API qkv_status qkv_st_load(const char *path, qkv_st **out);
QKV_API void qkv_st_free(qkv_st *st);
QKV_API int qkv_st_count(const qkv_st *st);
QKV_API const char *qkv_st_name(const qkv_st *st, int i);
/* The metadata value for `key`, or NULL. */
QKV_API const char *qkv_st_meta(const qkv_st *st, const char *key);
/* Copies tensor `name` into `dst` after checking that it exists and has exactly `dtype` and
 * `dst`'s shape; QKV_ERR_MISMATCH with a message naming the tensor otherwise. */
QKV_API qkv_status qkv_st_read(const qkv_st *st, const char *name, qkv_tensor *dst);
/* Looks a tensor up: its dtype and shape. False if absent. */
QKV_API bool qkv_st_info(const qkv_st *st, const char *name, qkv_dtype *dtype, int *ndim,
                         int64_t shape[QKV_MAX_DIMS]);

/* ---- gradient checks ---------------------------------------------------------------------- */
/* Each op (and attention) is checked in f64 against central finite differences, on several
 * shapes, with the loss Σ w ⊙ op(inputs) for random weights w. The error of one gradient
 * entry, analytic a against numeric n, is |a − n| absolute and |a − n| / max(|a|, |n|, 1e-3)
 * relative (the floor keeps entries that are zero up to rounding from dividing by ~0). */
typedef struct {
    const char *op;
    char shapes[200];      /* the shapes tried, e.g. "(3,4)x(4,5) (2,3,4)x(4,5)" */
    int cases;
    int64_t entries;       /* gradient entries compared */
    double max_abs_err;
    double max_rel_err;
    bool passed;           /* max_rel_err <= tol */
} qkv_gradcheck_result;
/* How many ops the check covers; they are numbered 0 .. count-1. */
QKV_API int qkv_gradcheck_count(void);
/* Checks op `index` (every case of it) and reports the worst errors. */
QKV_API qkv_gradcheck_result qkv_gradcheck_run(int index, double tol, uint64_t seed);

#ifdef __cplusplus
}
#endif
#endif /* QKV_H */
