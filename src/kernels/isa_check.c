/* isa_check.c - one SIMD path against the plain C path, bit for bit, inside this process: the
 * kernels of every family run on both over the same inputs, and every output is compared
 * byte for byte. `qkv selftest` runs the full list on every path this CPU runs; the commands
 * that compute run the short list (the probe) on the path they chose, and leave a path that
 * disagrees for the next one that agrees (kernel_isa_probe).
 *
 * The shapes are chosen to take every branch of the products on every path's tile: products
 * small and packed, B read in place and packed (plain rows ldb apart, one sliver, slivers),
 * narrow weight gradients (Aᵀ, N <= 16) computed by the tiles as Cᵀ, every transpose, depth
 * past GEMM_KC, batches with their own B and with one shared, work big enough to be split
 * between threads; widths around 16 and 32 (the slivers of AVX2, NEON and plain C, and of
 * AVX-512), heads 32 wide side by side in each row (the fused attention's heads form, where
 * an AVX-512 stride bug once hid). */
#include "isa.h"
#include "qkv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- inputs: the same numbers on every path, from a small generator of their own ---- */

static uint64_t next_bits(uint64_t *s) { /* xorshift64*: enough for test data */
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}
static float uniform(uint64_t *s) { /* in [-1, 1), 24 bits */
    return (float)(next_bits(s) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}
static float *fill(float *x, size_t n, uint64_t *s, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = scale * uniform(s);
    return x;
}

/* ---- a case's outputs, kept from the plain C run and compared with the path's ---- */

typedef struct {
    float *at;
    size_t n, cap;
    bool failed; /* out of memory */
} record;

static void put(record *r, const void *x, size_t bytes) {
    size_t floats = (bytes + sizeof(float) - 1) / sizeof(float);
    if (r->n + floats > r->cap) {
        size_t cap = (r->n + floats) * 2;
        float *at = realloc(r->at, cap * sizeof *at);
        if (!at) {
            r->failed = true;
            return;
        }
        r->at = at, r->cap = cap;
    }
    memset(r->at + r->n, 0, floats * sizeof(float)); /* a double's padding */
    memcpy(r->at + r->n, x, bytes);
    r->n += floats;
}

static float *buffer(size_t n) { return malloc((n ? n : 1) * sizeof(float)); }

/* ---- the cases ---- */

typedef enum { GEMM, GEMM1, SOFTMAX, CROSS_ENTROPY, ATTENTION, OPTIMIZER, EXP } family;

typedef struct {
    family kind;
    int64_t a, b, c, d, e, f; /* the family's sizes (each case_* says which) */
    int flags;
} check_case;

/* gemm_f32: a = batch, b = M, c = N, d = K, flags: bit 0 ta, 1 tb, 2 accumulate, 3 B shared
 * by the batches, 4 A shared */
static void case_gemm(const check_case *k, uint64_t *s, record *out, char *what, size_t len) {
    bool ta = k->flags & 1, tb = k->flags & 2, acc = k->flags & 4;
    int64_t batch = k->a, M = k->b, N = k->c, K = k->d;
    int64_t as = k->flags & 16 ? 0 : M * K, bs = k->flags & 8 ? 0 : K * N, cs = M * N;
    snprintf(what, len, "gemm batch=%lld M=%lld N=%lld K=%lld ta=%d tb=%d%s%s%s", (long long)batch,
             (long long)M, (long long)N, (long long)K, ta, tb, acc ? " accumulate" : "",
             bs ? "" : " shared-B", as ? "" : " shared-A");
    size_t na = (size_t)(as ? batch * as : M * K), nb = (size_t)(bs ? batch * bs : K * N),
           nc = (size_t)(batch * cs);
    float *A = buffer(na), *B = buffer(nb), *C = buffer(nc);
    if (A && B && C) {
        fill(A, na, s, 1), fill(B, nb, s, 1), fill(C, nc, s, 1);
        gemm_f32(ta, tb, batch, M, N, K, A, as, B, bs, C, cs, acc);
        put(out, C, nc * sizeof *C);
    } else {
        out->failed = true;
    }
    free(A), free(B), free(C);
}

/* gemm1_packed_f32, A, B and C rows apart by more than their width: a = M, b = N, c = K,
 * flags as gemm's. A non-transposed B whose packed form is plain rows is read in place. */
static void case_gemm1(const check_case *k, uint64_t *s, record *out, char *what, size_t len) {
    bool ta = k->flags & 1, tb = k->flags & 2, acc = k->flags & 4;
    int64_t M = k->a, N = k->b, K = k->c;
    bool in_place = !tb && gemm_packed_is_plain_f32(N);
    int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 7;
    int64_t arows = ta ? K : M, brows = tb ? N : K;
    snprintf(what, len, "gemm1 M=%lld N=%lld K=%lld ta=%d tb=%d%s (B %s)", (long long)M,
             (long long)N, (long long)K, ta, tb, acc ? " accumulate" : "",
             in_place ? "in place" : "packed");
    float *A = buffer((size_t)(arows * lda)), *B = buffer((size_t)(brows * ldb)),
          *C = buffer((size_t)(M * ldc)), *bp = buffer(gemm_packed_floats_f32(N, K));
    if (A && B && C && bp) {
        fill(A, (size_t)(arows * lda), s, 1), fill(B, (size_t)(brows * ldb), s, 1);
        fill(C, (size_t)(M * ldc), s, 1);
        if (!in_place) gemm_pack_f32(bp, tb, N, K, B, ldb);
        gemm1_packed_f32(ta, M, N, K, A, lda, in_place ? B : bp, in_place ? ldb : N, C, ldc, acc);
        put(out, C, (size_t)(M * ldc) * sizeof *C); /* the gaps too: nothing may touch them */
    } else {
        out->failed = true;
    }
    free(A), free(B), free(C), free(bp);
}

/* softmax forward and backward: a = rows, b = n; every third row has -inf scores, one row is
 * entirely -inf (zeros) */
static void case_softmax(const check_case *k, uint64_t *s, record *out, char *what, size_t len) {
    int64_t rows = k->a, n = k->b;
    snprintf(what, len, "softmax rows=%lld n=%lld", (long long)rows, (long long)n);
    size_t e = (size_t)(rows * n);
    float *x = buffer(e), *y = buffer(e), *dy = buffer(e), *dx = buffer(e);
    if (x && y && dy && dx) {
        fill(x, e, s, 8), fill(dy, e, s, 1), fill(dx, e, s, 1);
        for (int64_t r = 0; r < rows; r += 3)
            for (int64_t c = r % 5; c < n; c += 4) x[r * n + c] = -INFINITY;
        for (int64_t c = 0; c < n; c++) x[(rows - 1) * n + c] = -INFINITY;
        softmax_forward_f32(y, x, rows, n);
        softmax_backward_f32(dx, y, dy, rows, n);
        put(out, y, e * sizeof *y), put(out, dx, e * sizeof *dx);
    } else {
        out->failed = true;
    }
    free(x), free(y), free(dy), free(dx);
}

/* cross-entropy forward and backward: a = rows, b = n; every fourth row has no target */
static void case_cross_entropy(const check_case *k, uint64_t *s, record *out, char *what,
                               size_t len) {
    int64_t rows = k->a, n = k->b;
    snprintf(what, len, "cross-entropy rows=%lld n=%lld", (long long)rows, (long long)n);
    size_t e = (size_t)(rows * n);
    float *x = buffer(e), *dx = buffer(e);
    int32_t *t = malloc((size_t)rows * sizeof *t);
    double *lse = malloc((size_t)rows * sizeof *lse);
    if (x && dx && t && lse) {
        fill(x, e, s, 20), fill(dx, e, s, 1);
        for (int64_t r = 0; r < rows; r++) t[r] = r % 4 == 3 ? -1 : (int32_t)(next_bits(s) % (uint64_t)n);
        int64_t count = 0;
        for (int64_t r = 0; r < rows; r++) lse[r] = 0; /* a row without a target has none */
        double loss = cross_entropy_forward_f32(x, t, -1, rows, n, lse, &count);
        cross_entropy_backward_f32(dx, x, t, -1, rows, n, lse, 0.37);
        put(out, &loss, sizeof loss), put(out, &count, sizeof count);
        put(out, lse, (size_t)rows * sizeof *lse), put(out, dx, e * sizeof *dx);
    } else {
        out->failed = true;
    }
    free(x), free(dx), free(t), free(lse);
}

/* the fused attention, forward and backward in every backward form (only the one in use with
 * flag 4): a = batch, b = heads, c = Nq, d = Nk, e = Dk, f = Dv; flags: bit 0 causal mask,
 * 1 heads side by side in each row (the training step's form) */
static void case_attention(const check_case *k, uint64_t *s, record *out, char *what,
                           size_t len) {
    int64_t batch = k->a, H = k->b, Nq = k->c, Nk = k->d, Dk = k->e, Dv = k->f, G = batch * H;
    bool causal = k->flags & 1, interleaved = k->flags & 2;
    snprintf(what, len, "attention batch=%lld heads=%lld Nq=%lld Nk=%lld Dk=%lld Dv=%lld%s%s",
             (long long)batch, (long long)H, (long long)Nq, (long long)Nk, (long long)Dk,
             (long long)Dv, causal ? " causal" : "", interleaved ? " heads-in-rows" : "");
    int64_t ms[4] = {0, 0, Nk, 1};
    size_t nq = (size_t)(G * Nq * Dk), nk = (size_t)(G * Nk * Dk), nv = (size_t)(G * Nk * Dv),
           no = (size_t)(G * Nq * Dv);
    float *q = buffer(nq), *kk = buffer(nk), *v = buffer(nv), *o = buffer(no), *dout = buffer(no),
          *lse = buffer((size_t)(2 * G * Nq)), *mask = buffer((size_t)(Nq * Nk)),
          *dq = buffer(nq), *dk = buffer(nk), *dv = buffer(nv);
    attention_form_kind form_was = attention_form;
    bool ok = q && kk && v && o && dout && lse && mask && dq && dk && dv;
    if (ok) {
        fill(q, nq, s, 2), fill(kk, nk, s, 2), fill(v, nv, s, 1), fill(dout, no, s, 1);
        for (int64_t i = 0; i < Nq; i++)
            for (int64_t j = 0; j < Nk; j++) mask[i * Nk + j] = j > i ? -INFINITY : 0.0f;
    }
    int forms = k->flags & 4 ? 1 : ATTENTION_FORM_COUNT;
    for (int form = 0; ok && form < forms; form++) {
        if (forms > 1) attention_form = (attention_form_kind)form;
        attention_dims d = {.G = G, .H = H, .Nq = Nq, .Nk = Nk, .Dk = Dk, .Dv = Dv,
                            .scale = 1 / sqrt((double)Dk), .ms = ms, .interleaved = interleaved};
        int threads = kernel_threads();
        size_t bytes = attention_scratch_size_f32(&d, threads, true);
        size_t fwd = attention_scratch_size_f32(&d, threads, false);
        void *scratch = malloc(bytes > fwd ? bytes : fwd);
        if (!scratch) {
            ok = false;
            break;
        }
        attention_forward_f32(&d, o, lse, q, kk, v, causal ? mask : NULL, scratch);
        memset(dq, 0, nq * sizeof *dq), memset(dk, 0, nk * sizeof *dk);
        memset(dv, 0, nv * sizeof *dv);
        attention_backward_f32(&d, dq, dk, dv, dout, o, lse, q, kk, v, causal ? mask : NULL,
                               scratch);
        free(scratch);
        if (form == 0) put(out, o, no * sizeof *o), put(out, lse, (size_t)(2 * G * Nq) * sizeof *lse);
        put(out, dq, nq * sizeof *dq), put(out, dk, nk * sizeof *dk), put(out, dv, nv * sizeof *dv);
    }
    attention_form = form_was;
    if (!ok) out->failed = true;
    free(q), free(kk), free(v), free(o), free(dout), free(lse), free(mask);
    free(dq), free(dk), free(dv);
}

/* one step of each optimizer over three parameters of a, b and c elements, and Σ g² */
static void case_optimizer(const check_case *k, uint64_t *s, record *out, char *what,
                           size_t len) {
    int64_t size[3] = {k->a, k->b, k->c};
    snprintf(what, len, "optimizer sizes=%lld,%lld,%lld", (long long)size[0], (long long)size[1],
             (long long)size[2]);
    float *w[3] = {0}, *g[3] = {0}, *m[3] = {0}, *v[3] = {0};
    bool ok = true;
    for (int i = 0; i < 3; i++) {
        w[i] = buffer((size_t)size[i]), g[i] = buffer((size_t)size[i]);
        m[i] = buffer((size_t)size[i]), v[i] = buffer((size_t)size[i]);
        ok = ok && w[i] && g[i] && m[i] && v[i];
    }
    for (int kind = OPTIM_SGD; ok && kind <= OPTIM_ADAM; kind++) {
        for (int i = 0; i < 3; i++) {
            fill(w[i], (size_t)size[i], s, 1), fill(g[i], (size_t)size[i], s, 3);
            fill(m[i], (size_t)size[i], s, 1);
            for (int64_t e = 0; e < size[i]; e++) v[i][e] = fabsf(uniform(s));
        }
        optim_rule r = {.kind = (optim_kind)kind, .lr = 0.01, .weight_decay = 0.1,
                        .grad_scale = 0.75, .momentum = 0.9, .beta1 = 0.9, .beta2 = 0.999,
                        .eps = 1e-8, .bias1 = 0.1, .bias2 = 0.002};
        double sq = optim_grad_sq_f32(3, (const float *const *)g, size);
        bool state = kind != OPTIM_SGD;
        optim_update_f32(&r, 3, w, (const float *const *)g, state ? m : (float *const[3]){0},
                         kind == OPTIM_ADAM ? v : (float *const[3]){0}, size);
        put(out, &sq, sizeof sq);
        for (int i = 0; i < 3; i++) {
            put(out, w[i], (size_t)size[i] * sizeof(float));
            if (state) put(out, m[i], (size_t)size[i] * sizeof(float));
            if (kind == OPTIM_ADAM) put(out, v[i], (size_t)size[i] * sizeof(float));
        }
    }
    if (!ok) out->failed = true;
    for (int i = 0; i < 3; i++) free(w[i]), free(g[i]), free(m[i]), free(v[i]);
}

/* the exp of every kernel over a wide range, the edges, -inf and NaN: a = n */
static void case_exp(const check_case *k, uint64_t *s, record *out, char *what, size_t len) {
    int64_t n = k->a;
    snprintf(what, len, "exp n=%lld", (long long)n);
    float *x = buffer((size_t)n), *y = buffer((size_t)n);
    if (x && y) {
        fill(x, (size_t)n, s, 100);
        static const float edges[] = {-INFINITY, NAN, -87.0f, -87.5f, 88.0f, 88.5f, 0.0f, -0.0f};
        for (int64_t i = 0; i < n && i < 8; i++) x[i] = edges[i];
        kernel_isa_active()->exp(y, x, n);
        put(out, y, (size_t)n * sizeof *y);
    } else {
        out->failed = true;
    }
    free(x), free(y);
}

static void run_case(const check_case *k, record *out, char *what, size_t len) {
    uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)(k->kind * 1000003 + k->a * 7919 +
                                                       k->b * 131 + k->c * 17 + k->d + k->flags);
    switch (k->kind) {
    case GEMM: case_gemm(k, &seed, out, what, len); break;
    case GEMM1: case_gemm1(k, &seed, out, what, len); break;
    case SOFTMAX: case_softmax(k, &seed, out, what, len); break;
    case CROSS_ENTROPY: case_cross_entropy(k, &seed, out, what, len); break;
    case ATTENTION: case_attention(k, &seed, out, what, len); break;
    case OPTIMIZER: case_optimizer(k, &seed, out, what, len); break;
    case EXP: case_exp(k, &seed, out, what, len); break;
    }
}

/* ---- the lists ---- */

/* The probe: each product branch on both slivers' widths, the heads form at 32 wide, the
 * rows, the optimizer and the exp, each as small as reaches its branch: about a millisecond,
 * plain C path included (whose fmaf is a library call on x86-64). */
static const check_case probe_cases[] = {
    {GEMM1, 5, 32, 16, 0, 0, 0, 0},   /* one whole sliver of 32 (AVX-512), in place */
    {GEMM1, 5, 24, 16, 0, 0, 0, 0},   /* one packed sliver of 24 */
    {GEMM1, 5, 64, 16, 0, 0, 0, 4},   /* tiles over plain rows, in place */
    {GEMM1, 5, 40, 16, 0, 0, 0, 1},   /* tiles over packed slivers, A transposed */
    {GEMM1, 5, 16, 16, 0, 0, 0, 2},   /* small, B transposed */
    {GEMM, 2, 4, 16, 16, 0, 0, 2},    /* small, B transposed, a B per batch */
    {GEMM, 1, 9, 64, 64, 0, 0, 5},    /* tiles, B in place, A transposed, accumulating */
    {GEMM, 1, 9, 40, 96, 0, 0, 2},    /* tiles, B packed from its transpose */
    {SOFTMAX, 3, 33, 0, 0, 0, 0, 0},
    {CROSS_ENTROPY, 4, 19, 0, 0, 0, 0, 0},
    {ATTENTION, 1, 2, 8, 8, 32, 32, 7}, /* two heads of 32 in each row, causal; the form in use */
    {OPTIMIZER, 5, 40, 3, 0, 0, 0, 0},
    {EXP, 40, 0, 0, 0, 0, 0, 0},
};
#define N_SHAPES_GEMM1 (sizeof gemm1_shapes / sizeof gemm1_shapes[0])
static const int64_t gemm1_shapes[][3] = {
    {1, 1, 1},   {8, 5, 16},   {8, 16, 16},  {16, 16, 300}, {8, 24, 16},  {8, 32, 16},
    {1, 32, 13}, {13, 48, 40}, {64, 32, 64}, {13, 64, 64},  {64, 64, 64}, {13, 65, 24},
    {64, 96, 16}, {33, 129, 5}, {6, 40, 300}, {64, 16, 300},
};
static const int64_t gemm_shapes[][4] = { /* batch, M, N, K */
    {1, 16, 16, 16},  {1, 5, 13, 7},    {1, 8, 32, 16},   {1, 32, 24, 40},  {1, 64, 64, 64},
    {1, 100, 128, 40}, {1, 33, 40, 65}, {1, 13, 96, 300}, {1, 130, 150, 100}, {3, 16, 64, 16},
    {3, 17, 100, 65}, {3, 31, 17, 130}, {4, 130, 150, 100},
    {1, 64, 16, 300}, {1, 128, 12, 40}, {2, 32, 5, 20}, /* Aᵀ, N <= 16: the tiles on Cᵀ */
};

/* The whole list: built once into `cases` (at most CASES_MAX). */
#define CASES_MAX 1024
static int full_cases(check_case *cases) {
    int n = 0;
    for (size_t s = 0; s < N_SHAPES_GEMM1; s++)
        for (int form = 0; form < 4; form++)
            cases[n++] = (check_case){GEMM1, gemm1_shapes[s][0], gemm1_shapes[s][1],
                                      gemm1_shapes[s][2], 0, 0, 0, form | (int)(s + form) % 2 * 4};
    for (size_t s = 0; s < sizeof gemm_shapes / sizeof gemm_shapes[0]; s++)
        for (int form = 0; form < 4; form++) {
            int shares = gemm_shapes[s][0] > 1 ? 3 : 1; /* own B, shared B, shared A */
            for (int share = 0; share < shares; share++)
                cases[n++] = (check_case){GEMM, gemm_shapes[s][0], gemm_shapes[s][1],
                                          gemm_shapes[s][2], gemm_shapes[s][3], 0, 0,
                                          form | (int)(s + form + share) % 2 * 4 | share << 3};
        }
    static const int64_t rows[][2] = {{1, 1}, {3, 7}, {4, 16}, {5, 33}, {3, 100}, {2, 257}};
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        cases[n++] = (check_case){SOFTMAX, rows[r][0], rows[r][1], 0, 0, 0, 0, 0};
        cases[n++] = (check_case){CROSS_ENTROPY, rows[r][0] + 3, rows[r][1], 0, 0, 0, 0, 0};
    }
    static const int64_t att[][7] = { /* batch, heads, Nq, Nk, Dk, Dv, flags */
        {2, 1, 17, 17, 16, 16, 1}, {2, 2, 16, 16, 32, 32, 3}, {1, 2, 16, 16, 32, 32, 2},
        {1, 1, 130, 80, 24, 40, 0}, {1, 2, 64, 64, 64, 64, 3}, {2, 4, 16, 16, 16, 16, 3},
        {1, 1, 5, 3, 7, 2, 0},
    };
    for (size_t a = 0; a < sizeof att / sizeof att[0]; a++)
        cases[n++] = (check_case){ATTENTION, att[a][0], att[a][1], att[a][2], att[a][3],
                                  att[a][4], att[a][5], (int)att[a][6]};
    cases[n++] = (check_case){OPTIMIZER, 1, 37, 1000, 0, 0, 0, 0};
    cases[n++] = (check_case){OPTIMIZER, 70000, 5, 16, 0, 0, 0, 0}; /* split between threads */
    cases[n++] = (check_case){EXP, 1000, 0, 0, 0, 0, 0, 0};
    return n;
}

/* ---- the comparison ---- */

/* The first difference of `got` from `want`, described into `first`: the case, and the first
 * element whose bits differ. A NaN matches any NaN: vec.h promises NaN for NaN (the exp of a
 * NaN score), not its sign, which the FMA units and the C library's fmaf propagate each their
 * own way; every other value, ±0 and ±inf included, must match bit for bit. */
static kernel_isa_verdict same(const record *want, const record *got, const char *what,
                               char *first, size_t len) {
    if (want->failed || got->failed) { /* no answer, not a wrong one */
        snprintf(first, len, "%s: out of memory", what);
        return KERNEL_ISA_NO_MEMORY;
    }
    if (want->n != got->n) {
        snprintf(first, len, "%s: %zu outputs, the plain C path's %zu", what, got->n, want->n);
        return KERNEL_ISA_DIFFERS;
    }
    for (size_t i = 0; i < want->n; i++)
        if (memcmp(&want->at[i], &got->at[i], sizeof(float)) &&
            !(isnan(want->at[i]) && isnan(got->at[i]))) {
            snprintf(first, len, "%s: output %zu is %.9g, the plain C path's %.9g", what, i,
                     (double)got->at[i], (double)want->at[i]);
            return KERNEL_ISA_DIFFERS;
        }
    return KERNEL_ISA_AGREES;
}

kernel_isa_verdict kernel_isa_check(const char *name, bool full, int *checked, char *first,
                                    size_t len) {
    const kernel_isa *isa = kernel_isa_find(name), *was = kernel_isa_active();
    *checked = 0;
    if (first && len) *first = '\0';
    if (!isa) {
        snprintf(first, len, "this CPU or build cannot run %s", name);
        return KERNEL_ISA_DIFFERS;
    }
    static check_case list[CASES_MAX];
    const check_case *cases = probe_cases;
    int n = (int)(sizeof probe_cases / sizeof probe_cases[0]);
    if (full) n = full_cases(list), cases = list;
    kernel_isa_verdict verdict = KERNEL_ISA_AGREES;
    for (int c = 0; c < n && verdict == KERNEL_ISA_AGREES; c++) {
        record want = {0}, got = {0};
        char what[160];
        kernel_isa_use(&kernel_isa_scalar);
        run_case(&cases[c], &want, what, sizeof what);
        kernel_isa_use(isa);
        run_case(&cases[c], &got, what, sizeof what);
        verdict = same(&want, &got, what, first, len);
        *checked += verdict == KERNEL_ISA_AGREES;
        free(want.at), free(got.at);
    }
    kernel_isa_use(was);
    return verdict;
}

const char *kernel_isa_probe(char *note, size_t len) {
    const kernel_isa *chosen = kernel_isa_active();
    char first[256];
    int checked;
    *note = '\0';
    if (chosen == &kernel_isa_scalar ||
        kernel_isa_check(chosen->name, false, &checked, first, sizeof first) != KERNEL_ISA_DIFFERS)
        return NULL; /* agrees, or no memory to tell: nothing found against the path */
    if (qkv_simd_forced()) { /* asked for by name: run it, and say so */
        snprintf(note, len, "QKV_SIMD=%s: this path's bits differ from the plain C path's (%s); "
                 "running it as QKV_SIMD asks (qkv selftest checks every path)", chosen->name, first);
        return chosen->name;
    }
    /* the next path, best first, that runs here natively and agrees; plain C at worst */
    const kernel_isa *next = &kernel_isa_scalar;
    char ignored[256];
    bool after = false;
    for (const char *const *name = qkv_simd_paths(); *name; name++) {
        const kernel_isa *isa = kernel_isa_find(*name);
        if (isa == chosen) after = true;
        else if (after && isa && isa != &kernel_isa_scalar && !isa->emulated &&
                 kernel_isa_check(isa->name, false, &checked, ignored, sizeof ignored) ==
                     KERNEL_ISA_AGREES) {
            next = isa;
            break;
        }
    }
    kernel_isa_fall_back(next);
    snprintf(note, len, "the %s path's bits differ from the plain C path's (%s): running %s "
             "instead, which agrees (qkv selftest checks every path)", chosen->name, first,
             next->name);
    return chosen->name;
}

bool qkv_simd_probe(char *note, size_t len) { return kernel_isa_probe(note, len) == NULL; }
