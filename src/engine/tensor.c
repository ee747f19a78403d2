/* tensor.c - tensor creation, element access, printing (with the op names of op_table.c)
 * and the portable RNG. */
#include "engine/internal.h"
#include "kernels/kernels.h"

/* ---- op names: each op's row of op_table (op_table.c) ---- */
const char *qkv_op_name(qkv_op op) {
    return op >= 0 && op < QKV_OP_COUNT ? op_table[op].name : "?";
}

/* ---- random numbers ---- */
/* xoshiro256** seeded through splitmix64: integer-only, so the same seed gives the same
 * stream on every machine. */
static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

qkv_rng qkv_rng_seed(uint64_t seed) {
    qkv_rng r;
    for (int i = 0; i < 4; i++) r.s[i] = splitmix64(&seed);
    return r;
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t qkv_rng_u64(qkv_rng *rng) {
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double qkv_rng_uniform(qkv_rng *rng) { return (double)(qkv_rng_u64(rng) >> 11) * 0x1.0p-53; }

uint32_t qkv_rng_below(qkv_rng *rng, uint32_t n) {
    /* Rejection keeps every value equally likely. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = qkv_rng_u64(rng);
    while (x >= limit);
    return (uint32_t)(x % n);
}

double qkv_rng_normal(qkv_rng *rng) {
    /* Marsaglia's polar method: one pair per accepted point; the second value is dropped so
     * that the generator carries no hidden state besides rng. */
    double u, v, s;
    do {
        u = 2.0 * qkv_rng_uniform(rng) - 1.0;
        v = 2.0 * qkv_rng_uniform(rng) - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    return u * sqrt(-2.0 * log(s) / s);
}

/* ---- creation ---- */
size_t qkv_dtype_size(qkv_dtype dtype) { return dtype == QKV_F64 ? 8 : 4; }

const char *qkv_dtype_name(qkv_dtype dtype) {
    switch (dtype) {
    case QKV_F32: return "f32";
    case QKV_F64: return "f64";
    case QKV_I32: return "i32";
    }
    return "?";
}

/* A tensor recorded on ctx's tape; its data is zeroed unless `raw`. */
static qkv_tensor *tensor_alloc(qkv_ctx *ctx, qkv_dtype dtype, int ndim, const int64_t *shape,
                                bool raw) {
    QKV_CHECK(ctx, "tensor", "NULL context");
    QKV_CHECK(ndim >= 0 && ndim <= QKV_MAX_DIMS, "tensor", "%d dims (at most %d)", ndim,
              QKV_MAX_DIMS);
    QKV_CHECK(dtype == QKV_F32 || dtype == QKV_F64 || dtype == QKV_I32, "tensor",
              "unknown dtype %d", (int)dtype);
    qkv_tensor *t = qkv_ctx_alloc(ctx, sizeof *t);
    t->dtype = dtype;
    t->ndim = ndim;
    t->size = 1;
    for (int i = 0; i < ndim; i++) {
        QKV_CHECK(shape && shape[i] >= 1, "tensor", "dim %d has size %lld", i,
                  shape ? (long long)shape[i] : 0LL);
        t->shape[i] = shape[i];
        t->size *= shape[i];
    }
    size_t bytes = (size_t)t->size * qkv_dtype_size(dtype);
    t->data = raw ? arena_alloc_raw(ctx, bytes) : qkv_ctx_alloc(ctx, bytes);
    t->ctx = ctx;
    t->tape_prev = ctx->tape;
    ctx->tape = t;
    return t;
}

qkv_tensor *tensor_new_op(qkv_ctx *ctx, qkv_op op, qkv_dtype dtype, int ndim,
                          const int64_t *shape, qkv_tensor *s0, qkv_tensor *s1, qkv_tensor *s2) {
    qkv_tensor *t = tensor_alloc(ctx, dtype, ndim, shape, true); /* the op writes it all */
    profile_enter(op_table[op].part); /* the op's forward follows: its part */
    t->op = op;
    t->src[0] = s0;
    t->src[1] = s1;
    t->src[2] = s2;
    bool needs = (s0 && s0->requires_grad) || (s1 && s1->requires_grad) ||
                 (s2 && s2->requires_grad);
    if (needs && !ctx->no_grad) {
        t->requires_grad = true;
        t->grad = arena_alloc_raw(ctx, (size_t)t->size * qkv_dtype_size(dtype)); /* see grad_first_write */
    }
    return t;
}

void tensor_add_fourth_src(qkv_tensor *t, qkv_tensor *s) {
    t->src[3] = s;
    if (s && s->requires_grad && !t->requires_grad && !t->ctx->no_grad) {
        t->requires_grad = true;
        t->grad = arena_alloc_raw(t->ctx, (size_t)t->size * qkv_dtype_size(t->dtype));
    }
}

qkv_tensor *tensor_new_view(qkv_ctx *ctx, qkv_op op, qkv_tensor *x, int ndim,
                            const int64_t *shape) {
    qkv_tensor *t = qkv_ctx_alloc(ctx, sizeof *t);
    t->dtype = x->dtype;
    t->ndim = ndim;
    t->size = 1;
    for (int i = 0; i < ndim; i++) t->size *= (t->shape[i] = shape[i]);
    t->data = x->data;
    t->op = op;
    t->src[0] = x;
    t->ctx = ctx;
    t->tape_prev = ctx->tape;
    ctx->tape = t;
    if (x->requires_grad && !ctx->no_grad) {
        t->requires_grad = true;
        /* An intermediate x lends its gradient too: what flows into the view lands in x.
         * A leaf's gradient is swapped during backward, so a view of a leaf keeps its own. */
        t->grad = x->op != QKV_OP_NONE ? x->grad
                                       : arena_alloc_raw(ctx, (size_t)t->size * qkv_dtype_size(t->dtype));
    }
    return t;
}

qkv_tensor *tensor_share(qkv_ctx *ctx, const qkv_tensor *x) {
    qkv_tensor *t = qkv_ctx_alloc(ctx, sizeof *t);
    t->dtype = x->dtype;
    t->ndim = x->ndim;
    t->size = x->size;
    memcpy(t->shape, x->shape, sizeof t->shape);
    t->data = x->data;
    t->name = x->name;
    t->ctx = ctx;
    t->tape_prev = ctx->tape;
    ctx->tape = t;
    return t;
}

qkv_tensor *qkv_new(qkv_ctx *ctx, qkv_dtype dtype, int ndim, const int64_t *shape) {
    return tensor_alloc(ctx, dtype, ndim, shape, false);
}

qkv_tensor *qkv_zeros(qkv_ctx *ctx, qkv_dtype dtype, int ndim, const int64_t *shape) {
    return tensor_alloc(ctx, dtype, ndim, shape, false); /* arena memory comes zeroed */
}

qkv_tensor *qkv_ones(qkv_ctx *ctx, qkv_dtype dtype, int ndim, const int64_t *shape) {
    qkv_tensor *t = tensor_alloc(ctx, dtype, ndim, shape, false);
    for (int64_t i = 0; i < t->size; i++) qkv_set(t, i, 1.0);
    return t;
}

qkv_tensor *qkv_scalar(qkv_ctx *ctx, qkv_dtype dtype, double value) {
    qkv_tensor *t = tensor_alloc(ctx, dtype, 0, NULL, false);
    qkv_set(t, 0, value);
    return t;
}

qkv_tensor *qkv_from_array(qkv_ctx *ctx, qkv_dtype dtype, int ndim, const int64_t *shape,
                           const void *values) {
    qkv_tensor *t = tensor_alloc(ctx, dtype, ndim, shape, false);
    QKV_CHECK(values, "from_array", "NULL values");
    memcpy(t->data, values, (size_t)t->size * qkv_dtype_size(dtype));
    return t;
}

qkv_tensor *qkv_rand(qkv_ctx *ctx, qkv_dtype dtype, int ndim, const int64_t *shape, double lo,
                     double hi, qkv_rng *rng) {
    qkv_tensor *t = tensor_alloc(ctx, dtype, ndim, shape, false);
    for (int64_t i = 0; i < t->size; i++) qkv_set(t, i, lo + (hi - lo) * qkv_rng_uniform(rng));
    return t;
}

qkv_tensor *qkv_randn(qkv_ctx *ctx, qkv_dtype dtype, int ndim, const int64_t *shape, double std,
                      qkv_rng *rng) {
    qkv_tensor *t = tensor_alloc(ctx, dtype, ndim, shape, false);
    for (int64_t i = 0; i < t->size; i++) qkv_set(t, i, std * qkv_rng_normal(rng));
    return t;
}

qkv_tensor *qkv_param(qkv_ctx *ctx, qkv_tensor *t) {
    QKV_CHECK(t && t->op == QKV_OP_NONE && t->ctx == ctx, "param",
              "a parameter must be a leaf created in the same context");
    tensor_check_float(t, "param", "t");
    if (!t->requires_grad) {
        t->requires_grad = true;
        t->grad = qkv_ctx_alloc(ctx, (size_t)t->size * qkv_dtype_size(t->dtype));
        if (ctx->nparams == ctx->cap_params) {
            int cap = ctx->cap_params ? 2 * ctx->cap_params : 16;
            qkv_tensor **p = realloc(ctx->params, (size_t)cap * sizeof *p);
            QKV_CHECK(p, "param", "out of memory");
            ctx->params = p;
            ctx->cap_params = cap;
        }
        ctx->params[ctx->nparams++] = t;
    }
    return t;
}

/* ---- element access and printing ---- */
double qkv_get(const qkv_tensor *t, int64_t i) {
    switch (t->dtype) {
    case QKV_F32: return ((const float *)t->data)[i];
    case QKV_F64: return ((const double *)t->data)[i];
    case QKV_I32: return ((const int32_t *)t->data)[i];
    }
    return 0;
}

int64_t qkv_argmax(const qkv_tensor *x, int64_t offset, int64_t n) {
    int64_t best = 0;
    QKV_TYPED(x->dtype,
        const T *row = (const T *)x->data + offset;
        for (int64_t j = 1; j < n; j++)
            if (row[j] > row[best]) best = j;);
    return best;
}

void qkv_set(qkv_tensor *t, int64_t i, double value) {
    switch (t->dtype) {
    case QKV_F32: ((float *)t->data)[i] = (float)value; break;
    case QKV_F64: ((double *)t->data)[i] = value; break;
    case QKV_I32: ((int32_t *)t->data)[i] = (int32_t)value; break;
    }
}

double qkv_grad_get(const qkv_tensor *t, int64_t i) {
    if (!t->grad) return 0.0;
    return t->dtype == QKV_F32 ? ((const float *)t->grad)[i] : ((const double *)t->grad)[i];
}

char *qkv_shape_str(const qkv_tensor *t, char *buf, size_t len) {
    size_t n = (size_t)snprintf(buf, len, "(");
    for (int i = 0; i < t->ndim && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, i ? ",%lld" : "%lld", (long long)t->shape[i]);
    if (n < len) snprintf(buf + n, len - n, ")");
    return buf;
}

void qkv_print(FILE *out, const qkv_tensor *t, const char *label, int64_t max_values) {
    fprintf(out, "%s %s %s%s%s\n", label ? label : "tensor", qkv_dtype_name(t->dtype),
            SHAPE(t), t->op ? " op=" : "",
            t->op ? qkv_op_name(t->op) : "");
    int64_t row = t->ndim ? t->shape[t->ndim - 1] : 1;
    int64_t n = max_values > 0 && max_values < t->size ? max_values : t->size;
    for (int64_t i = 0; i < n; i++) {
        fprintf(out, t->dtype == QKV_I32 ? "%6.0f" : "% .4f", qkv_get(t, i));
        fputs((i + 1) % row == 0 || i + 1 == n ? "\n" : " ", out);
    }
    if (n < t->size) fprintf(out, "... (%lld more)\n", (long long)(t->size - n));
}

/* ---- shape helpers for ops ---- */
void tensor_check_float(const qkv_tensor *t, const char *op, const char *what) {
    QKV_CHECK(t, op, "%s is NULL", what);
    QKV_CHECK(t->dtype == QKV_F32 || t->dtype == QKV_F64, op, "%s has dtype %s, need f32 or f64",
              what, qkv_dtype_name(t->dtype));
}

bool tensor_same_shape(const qkv_tensor *a, const qkv_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

void tensor_shape4(const qkv_tensor *t, int64_t shape[4]) {
    int pad = 4 - t->ndim;
    for (int i = 0; i < 4; i++) shape[i] = i < pad ? 1 : t->shape[i - pad];
}

bool tensor_broadcast_strides(const qkv_tensor *a, const qkv_tensor *b, int64_t bstride[4]) {
    if (b->ndim > a->ndim) return false;
    int64_t as[4], bs[4];
    tensor_shape4(a, as);
    tensor_shape4(b, bs);
    int64_t stride = 1;
    for (int i = 3; i >= 0; i--) {
        if (bs[i] != as[i] && bs[i] != 1) return false;
        bstride[i] = bs[i] == 1 ? 0 : stride;
        stride *= bs[i];
    }
    return true;
}
