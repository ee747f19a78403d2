/* softmax_study.c - `qkv study softmax`'s numbers (softmax_study.h says what they show). */
#include "explore/softmax_study.h"
#include "io/io.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Max-subtracted softmax of x[n] into s[n]. */
static void softmax(const double *x, double *s, int n) {
    double max = x[0], sum = 0;
    for (int i = 1; i < n; i++) max = x[i] > max ? x[i] : max;
    for (int i = 0; i < n; i++) sum += s[i] = exp(x[i] - max);
    for (int i = 0; i < n; i++) s[i] /= sum;
}

/* J[i][j] = ds_i/dx_j = s_i (δ_ij − s_j), for a softmax output s[n]; J is n×n, row-major. */
static void jacobian(const double *s, int n, double *J) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) J[i * n + j] = s[i] * ((i == j) - s[j]);
}

static double max_diff(const double *a, const double *b, int n) {
    double d = 0;
    for (int i = 0; i < n; i++) d = fmax(d, fabs(a[i] - b[i]));
    return d;
}

/* dx = Jᵀ·dy by qkv's own softmax backward pass (the O(n) formula), in f64: the loss
 * Σ dy ⊙ softmax(x) has gradient exactly Jᵀ·dy with respect to x. */
static qkv_status engine_backward(const double *x, const double *dy, int n, double *dx) {
    qkv_ctx *params = qkv_ctx_new(0), *step = qkv_ctx_new(0);
    if (!params || !step) {
        qkv_ctx_free(step);
        qkv_ctx_free(params);
        return qkv_fail(QKV_ERR_NOMEM, "out of memory");
    }
    int64_t shape[1] = {n};
    qkv_tensor *xt = qkv_param(params, qkv_from_array(params, QKV_F64, 1, shape, x));
    qkv_tensor *w = qkv_from_array(step, QKV_F64, 1, shape, dy);
    qkv_tensor *loss = qkv_sum(step, qkv_mul(step, qkv_softmax(step, xt), w));
    qkv_zero_grad(params);
    qkv_backward(loss);
    for (int i = 0; i < n; i++) dx[i] = qkv_grad_get(xt, i);
    qkv_ctx_free(step);
    qkv_ctx_free(params);
    return QKV_OK;
}

qkv_status study_jacobian(const double *x, int n, const double *dy_given, uint64_t seed,
                          jacobian_study *out) {
    jacobian_study *r = out;
    memset(r, 0, sizeof *r); /* the matrices' first n·n entries are filled below */
    r->n = n;
    double xp[STUDY_MAX_N], sp[STUDY_MAX_N], sm[STUDY_MAX_N];
    softmax(x, r->s, n);
    for (int i = 0; i < n; i++) r->sum += r->s[i];
    jacobian(r->s, n, r->J);
    /* Column j of the finite-difference Jacobian: move x_j by ±h. */
    for (int j = 0; j < n; j++) {
        memcpy(xp, x, (size_t)n * sizeof *xp);
        xp[j] = x[j] + STUDY_FD_STEP;
        softmax(xp, sp, n);
        xp[j] = x[j] - STUDY_FD_STEP;
        softmax(xp, sm, n);
        for (int i = 0; i < n; i++) r->Jfd[i * n + j] = (sp[i] - sm[i]) / (2 * STUDY_FD_STEP);
    }
    r->err_fd = max_diff(r->J, r->Jfd, n * n);
    /* The backward pass with dy = e_i gives Jᵀ e_i, column i of J, which is row i: J is
     * symmetric. So n backward passes rebuild J without ever forming it. */
    double e[STUDY_MAX_N];
    for (int i = 0; i < n; i++) {
        memset(e, 0, sizeof e);
        e[i] = 1;
        if (engine_backward(x, e, n, r->rows + i * n) != QKV_OK) return QKV_ERR_NOMEM;
    }
    r->err_rows = max_diff(r->J, r->rows, n * n);
    double dot = 0;
    qkv_rng rng = qkv_rng_seed(seed);
    for (int i = 0; i < n; i++) r->dy[i] = dy_given ? dy_given[i] : qkv_rng_normal(&rng);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) r->jt[i] += r->J[j * n + i] * r->dy[j]; /* (Jᵀ·dy)_i, O(n²) */
        dot += r->dy[i] * r->s[i];
    }
    for (int i = 0; i < n; i++) r->formula[i] = r->s[i] * (r->dy[i] - dot);
    if (engine_backward(x, r->dy, n, r->dx) != QKV_OK) return QKV_ERR_NOMEM;
    r->err_dy = fmax(max_diff(r->jt, r->dx, n), max_diff(r->jt, r->formula, n));
    return QKV_OK;
}

/* ---- (b): var(q·k) and the saturation of an unscaled softmax ---- */

/* |J|_F for J = diag(p) − p·pᵀ: Σ_ij (p_i δ_ij − p_i p_j)², written out. */
static double jacobian_norm(const double *p, int n) {
    double sum = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double v = p[i] * ((i == j) - p[j]);
            sum += v * v;
        }
    return sqrt(sum);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One d_k: `samples` draws of q (d_k) and `n` keys (n, d_k), all entries N(0, 1). The median
 * |J| is the typical gradient; a mean would be ruled by the rare draws whose two largest
 * scores happen to be close. scratch holds 2·d_k + 3·n + 2·samples doubles. */
static scaling_row measure(int dk, int samples, int n, qkv_rng *rng, double *scratch) {
    double *q = scratch, *z = q + dk, *zs = z + n, *p = zs + n, *k = p + n;
    double *jraw = k + dk, *jscaled = jraw + samples; /* |J| of every draw, (samples) each */
    double mean = 0, m2 = 0, count = 0;
    scaling_row r = {.dk = dk};
    double scale = 1 / sqrt((double)dk);
    for (int s = 0; s < samples; s++) {
        for (int i = 0; i < dk; i++) q[i] = qkv_rng_normal(rng);
        for (int j = 0; j < n; j++) {
            double dot = 0;
            for (int i = 0; i < dk; i++) {
                k[i] = qkv_rng_normal(rng);
                dot += q[i] * k[i];
            }
            z[j] = dot;
            zs[j] = dot * scale;
            count++; /* Welford's running variance of q·k */
            double delta = dot - mean;
            mean += delta / count;
            m2 += delta * (dot - mean);
        }
        for (int pass = 0; pass < 2; pass++) {
            softmax(pass ? zs : z, p, n);
            double maxw = 0;
            for (int j = 0; j < n; j++) maxw = fmax(maxw, p[j]);
            *(pass ? &r.maxw_scaled : &r.maxw_raw) += maxw / samples;
            (pass ? jscaled : jraw)[s] = jacobian_norm(p, n);
        }
    }
    r.jnorm_raw = median(jraw, samples);
    r.jnorm_scaled = median(jscaled, samples);
    r.var_raw = m2 / (count - 1);
    r.var_scaled = r.var_raw / dk;
    return r;
}

qkv_status study_scaling(int samples, int n, int max_dk, uint64_t seed, scaling_row *rows,
                         int *nrows) {
    double *scratch = malloc(((size_t)max_dk * 2 + 3 * (size_t)n + 2 * (size_t)samples) *
                             sizeof *scratch);
    if (!scratch) return qkv_fail(QKV_ERR_NOMEM, "study: out of memory");
    qkv_rng rng = qkv_rng_seed(seed);
    *nrows = 0;
    for (int dk = 1; dk <= max_dk && *nrows < STUDY_MAX_ROWS; dk *= 2)
        rows[(*nrows)++] = measure(dk, samples, n, &rng, scratch);
    free(scratch);
    return QKV_OK;
}

qkv_status study_scaling_save(const char *path, const scaling_row *rows, int nrows, int n,
                              int samples, uint64_t seed) {
    atomic_file af;
    qkv_status s = atomic_open(&af, path);
    if (s != QKV_OK) return s;
    fprintf(af.f, "# qkv study softmax --scaling: %d keys, %d draws per d_k, seed %llu\n"
            "# d_k var_raw var_scaled maxw_raw maxw_scaled jnorm_raw jnorm_scaled\n",
            n, samples, (unsigned long long)seed);
    for (int i = 0; i < nrows; i++)
        fprintf(af.f, "%d %.6g %.6g %.6g %.6g %.6g %.6g\n", rows[i].dk, rows[i].var_raw,
                rows[i].var_scaled, rows[i].maxw_raw, rows[i].maxw_scaled, rows[i].jnorm_raw,
                rows[i].jnorm_scaled);
    return atomic_commit(&af);
}
