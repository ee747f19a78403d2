/* cmd_study.c - `qkv study softmax`: the softmax Jacobian, its O(n) backward pass, and why
 * attention divides its scores by sqrt(d_k).
 *
 * For s = softmax(x), ds_i/dx_j = s_i (δ_ij − s_j), so the Jacobian is J = diag(s) − s·sᵀ
 * (symmetric). The backward pass never builds J: given dy = dLoss/ds it returns
 * dx = Jᵀ·dy = s ⊙ (dy − Σ_k dy_k s_k), in O(n) instead of O(n²). (a) checks both against
 * finite differences; (b) measures how the softmax saturates when q·k grows with d_k. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/io.h"

#define MAX_N 32       /* longest --vector */
#define FD_STEP 1e-5   /* central differences: error ~ h² from the formula, ~1e-16/h rounding */

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

/* Parses "a,b,c" into v; false (with one line) on a bad number or length. With masked_ok,
 * an entry may be -inf: a key the mask dropped. */
static bool parse_list(const char *name, const char *text, double *v, int *n, bool masked_ok) {
    *n = 0;
    const char *p = text;
    for (;;) {
        char *end;
        errno = 0;
        double x = strtod(p, &end);
        bool masked = masked_ok && end != p && x == -INFINITY;
        if (end == p || (errno && !masked) || (!isfinite(x) && !masked) ||
            (*end != ',' && *end != '\0')) {
            cli_error("study: --%s: '%s' is not a comma-separated list of finite numbers%s", name,
                      text, masked_ok ? " (or -inf, a masked entry)" : "");
            return false;
        }
        if (*n == MAX_N) {
            cli_error("study: --%s: more than %d numbers", name, MAX_N);
            return false;
        }
        v[(*n)++] = x;
        if (*end == '\0') return true;
        p = end + 1;
    }
}

static void print_vector(const char *label, const double *v, int n) {
    printf("%-26s (", label);
    for (int i = 0; i < n; i++) printf("%s% .6g", i ? ", " : "", v[i]);
    printf(")\n");
}

static void print_matrix(const double *m, int n) {
    for (int i = 0; i < n; i++) {
        printf("   ");
        for (int j = 0; j < n; j++) printf(" % .6f", m[i * n + j] == 0 ? 0.0 : m[i * n + j]); /* no -0 */
        printf("\n");
    }
}

static double max_diff(const double *a, const double *b, int n) {
    double d = 0;
    for (int i = 0; i < n; i++) d = fmax(d, fabs(a[i] - b[i]));
    return d;
}

/* dx = Jᵀ·dy by qkv's own softmax backward pass (the O(n) formula), in f64: the loss
 * Σ dy ⊙ softmax(x) has gradient exactly Jᵀ·dy with respect to x. */
static void engine_backward(const double *x, const double *dy, int n, double *dx) {
    qkv_ctx *params = qkv_ctx_new(0), *step = qkv_ctx_new(0);
    if (!params || !step) {
        fprintf(stderr, "qkv: out of memory\n");
        exit(EXIT_NOMEM);
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
}

/* (a): the Jacobian three ways. */
static void study_jacobian(const double *x, int n, const double *dy_given, uint64_t seed) {
    /* zeroed: gcc cannot see that the loops below fill the first n*n of each */
    double s[MAX_N], J[MAX_N * MAX_N] = {0}, Jfd[MAX_N * MAX_N] = {0}, rows[MAX_N * MAX_N] = {0};
    double xp[MAX_N], sp[MAX_N], sm[MAX_N];
    softmax(x, s, n);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += s[i];
    printf("softmax Jacobian study, n = %d\n\n", n);
    print_vector("x", x, n);
    print_vector("s = softmax(x)", s, n);
    printf("%-26s %.15g\n\n", "sum of s", sum);

    jacobian(s, n, J);
    printf("J = diag(s) - s s^T   (row i, column j: ds_i/dx_j)\n");
    print_matrix(J, n);

    /* Column j of the finite-difference Jacobian: move x_j by ±h. */
    for (int j = 0; j < n; j++) {
        memcpy(xp, x, (size_t)n * sizeof *xp);
        xp[j] = x[j] + FD_STEP;
        softmax(xp, sp, n);
        xp[j] = x[j] - FD_STEP;
        softmax(xp, sm, n);
        for (int i = 0; i < n; i++) Jfd[i * n + j] = (sp[i] - sm[i]) / (2 * FD_STEP);
    }
    printf("\nfinite differences (s(x + h e_j) - s(x - h e_j)) / 2h, h = %g\n", FD_STEP);
    print_matrix(Jfd, n);
    printf("largest |J - finite differences| = %.3g\n", max_diff(J, Jfd, n * n));

    /* The backward pass with dy = e_i gives Jᵀ e_i, column i of J, which is row i: J is
     * symmetric. So n backward passes rebuild J without ever forming it. */
    double e[MAX_N];
    for (int i = 0; i < n; i++) {
        memset(e, 0, sizeof e);
        e[i] = 1;
        engine_backward(x, e, n, rows + i * n);
    }
    printf("\nbackward pass dx = s * (dy - sum(dy * s)), O(n), qkv's softmax op;\n"
           "row i: dy = e_i (the i-th unit vector), which gives J^T e_i = row i of J\n");
    print_matrix(rows, n);
    printf("largest |J - backward rows| = %.3g\n", max_diff(J, rows, n * n));

    double dy[MAX_N], jt[MAX_N] = {0}, dx[MAX_N], formula[MAX_N], dot = 0;
    qkv_rng rng = qkv_rng_seed(seed);
    for (int i = 0; i < n; i++) dy[i] = dy_given ? dy_given[i] : qkv_rng_normal(&rng);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) jt[i] += J[j * n + i] * dy[j]; /* (Jᵀ·dy)_i, O(n²) */
        dot += dy[i] * s[i];
    }
    for (int i = 0; i < n; i++) formula[i] = s[i] * (dy[i] - dot);
    engine_backward(x, dy, n, dx);
    printf("\n");
    print_vector(dy_given ? "dy (--dy)" : "dy (random, --seed)", dy, n);
    print_vector("J^T dy, O(n^2)", jt, n);
    print_vector("s * (dy - sum(dy * s))", formula, n);
    print_vector("qkv backward", dx, n);
    printf("largest |J^T dy - backward| = %.3g\n",
           fmax(max_diff(jt, dx, n), max_diff(jt, formula, n)));
    for (int i = 0; i < n; i++)
        if (x[i] == -INFINITY)
            printf("x_%d = -inf is a masked entry: s_%d = 0, row and column %d of J are 0, and dx_%d "
                   "= 0 whatever dy is: no gradient reaches a masked key\n", i + 1, i + 1, i + 1, i + 1);
}

/* ---- (b): var(q·k) and the saturation of an unscaled softmax ---- */

typedef struct {
    int dk;
    double var_raw, var_scaled;   /* of q·k and of q·k/sqrt(d_k) */
    double maxw_raw, maxw_scaled; /* mean largest softmax weight */
    double jnorm_raw, jnorm_scaled;/* median Frobenius norm of the softmax Jacobian */
} scaling_row;

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

static int study_scaling(int samples, int n, int max_dk, uint64_t seed, const char *out_dir,
                         const char *format) {
    if (out_dir && (strlen(out_dir) > 900 || !cli_make_dirs("study: ", out_dir))) {
        if (strlen(out_dir) > 900) cli_error("study: %s: path too long", out_dir);
        return EXIT_IO;
    }
    double *scratch = malloc(((size_t)max_dk * 2 + 3 * (size_t)n + 2 * (size_t)samples) *
                             sizeof *scratch);
    scaling_row rows[16];
    int nrows = 0;
    if (!scratch) {
        cli_error("study: out of memory");
        return EXIT_NOMEM;
    }
    qkv_rng rng = qkv_rng_seed(seed);
    printf("softmax scaling study: q, k with N(0,1) entries, %d keys, %d draws per d_k\n\n",
           n, samples);
    printf("%6s %12s %16s   %-19s   %-23s\n", "", "", "", "mean largest weight",
           "median |J| (Frobenius)");
    printf("%6s %12s %16s   %9s %9s   %11s %11s\n", "d_k", "var(q.k)", "var(q.k/sqrt dk)",
           "raw", "scaled", "raw", "scaled");
    for (int dk = 1; dk <= max_dk; dk *= 2) {
        scaling_row r = measure(dk, samples, n, &rng, scratch);
        rows[nrows++] = r;
        printf("%6d %12.3f %16.3f   %9.4f %9.4f   %11.3g %11.3g\n", r.dk, r.var_raw, r.var_scaled,
               r.maxw_raw, r.maxw_scaled, r.jnorm_raw, r.jnorm_scaled);
    }
    free(scratch);
    const scaling_row *first = &rows[0], *last = &rows[nrows - 1];
    printf("\nvar(q.k) grows like d_k (the sum of d_k products of unit variance): at d_k = %d it is "
           "%.1f.\nWithout the scale the softmax saturates: its largest weight goes from %.2f to "
           "%.2f and\nthe gradient through it, |J|, from %.3g to %.3g (%.0fx smaller). With "
           "1/sqrt(d_k) the\nscores keep unit variance and |J| stays near %.3g.\n",
           last->dk, last->var_raw, first->maxw_raw, last->maxw_raw, first->jnorm_raw,
           last->jnorm_raw, last->jnorm_raw > 0 ? first->jnorm_raw / last->jnorm_raw : INFINITY,
           last->jnorm_scaled);
    if (!out_dir) return EXIT_OK;

    char path[1100], plot[1100];
    snprintf(path, sizeof path, "%s/scaling.dat", out_dir);
    atomic_file af;
    qkv_status s = atomic_open(&af, path);
    if (s == QKV_OK) {
        fprintf(af.f, "# qkv study softmax --scaling: %d keys, %d draws per d_k, seed %llu\n"
                "# d_k var_raw var_scaled maxw_raw maxw_scaled jnorm_raw jnorm_scaled\n",
                n, samples, (unsigned long long)seed);
        for (int i = 0; i < nrows; i++)
            fprintf(af.f, "%d %.6g %.6g %.6g %.6g %.6g %.6g\n", rows[i].dk, rows[i].var_raw,
                    rows[i].var_scaled, rows[i].maxw_raw, rows[i].maxw_scaled, rows[i].jnorm_raw,
                    rows[i].jnorm_scaled);
        s = atomic_commit(&af);
    }
    if (s != QKV_OK) {
        cli_error("study: %s", qkv_last_error());
        return cli_exit_for(s);
    }
    char keys[16];
    snprintf(keys, sizeof keys, "%d", n);
    char image[32];
    snprintf(image, sizeof image, "scaling.%s", format);
    snprintf(plot, sizeof plot, "%s/%s", out_dir, image);
    bool no_gnuplot;
    int code = cli_gnuplot("scaling.gp", out_dir, image, format, 2,
                           (const char *[]){"scaling.dat", keys}, &no_gnuplot);
    if (no_gnuplot) return EXIT_OK; /* the study ran and its data is written; the line said so */
    if (code == EXIT_OK) printf("\nwrote %s and %s\n", path, plot);
    return code;
}

typedef struct {
    double x[MAX_N], dy[MAX_N];
    int n, ndy;
    bool vector_set, dy_set, scaling;
    long samples, keys, max_dk;
    uint64_t seed;
    const char *out_dir, *format;
} study_args;

static bool parse_vector(const char *text, void *dest) {
    study_args *a = dest;
    a->vector_set = true;
    return parse_list("vector", text, a->x, &a->n, true);
}

static bool parse_dy(const char *text, void *dest) {
    study_args *a = dest;
    a->dy_set = true;
    return parse_list("dy", text, a->dy, &a->ndy, false);
}

static int study_parse(int argc, char **argv, study_args *a) {
    static const char *const formats[] = {"png", "svg", NULL};
    int format = 0;
    *a = (study_args){.x = {4, -1, 2.1}, .n = 3, .samples = 2000, .keys = 16, .max_dk = 512,
                      .seed = 1};
    cli_option options[] = {
        {.kind = CLI_TEXT, .help = "(a) the Jacobian, shown unless only --scaling is given:"},
        {"vector", CLI_CUSTOM, a, .parse = parse_vector, .arg = "LIST",
         .help = "x, comma-separated, 1..32 numbers (default 4,-1,2.1); -inf is a\n"
                 "masked entry (weight 0, no gradient), as the attention mask makes"},
        {"dy", CLI_CUSTOM, a, .parse = parse_dy, .arg = "LIST",
         .help = "the upstream gradient dLoss/ds compared with J^T dy, as long as\n"
                 "--vector (default: random normal numbers from --seed)"},
        {.kind = CLI_TEXT,
         .help = "    prints J = diag(s) - s s^T, the central finite-difference Jacobian, the O(n) backward\n"
                 "    pass dx = s * (dy - sum(dy * s)) of qkv's softmax op for every unit vector dy = e_i\n"
                 "    (its results are the rows of J) and for dy, each with its largest difference.\n"
                 "(b) --scaling: why attention scales its scores by 1/sqrt(d_k):"},
        {"scaling", CLI_FLAG, &a->scaling, .help = NULL},
        {"samples", CLI_INT, &a->samples, 10, 1000000, .arg = "N",
         .help = "random (q, keys) draws per d_k, 10..1000000 (default 2000)"},
        {"keys", CLI_INT, &a->keys, 2, 4096, .arg = "N",
         .help = "keys per softmax, 2..4096 (default 16)"},
        {"max-dk", CLI_INT, &a->max_dk, 1, 4096, .arg = "N",
         .help = "d_k = 1, 2, 4, ... up to N, a power of two 1..4096 (default 512)"},
        {"out", CLI_STRING, &a->out_dir, .arg = "DIR",
         .help = "also write DIR/scaling.dat and plot it to DIR/scaling.png"},
        {"format", CLI_CHOICE, &format, .choices = formats, .arg = "F",
         .help = "png or svg, for the plot (default png)"},
        {.kind = CLI_TEXT,
         .help = "    q and k have unit-variance normal entries; prints var(q.k) (about d_k), the mean\n"
                 "    largest weight and the median Frobenius norm |J| of the softmax Jacobian over the\n"
                 "    keys, without and with the scale.\n"
                 "common:"},
        {"seed", CLI_U64, &a->seed, .arg = "S", .help = "seed of qkv's random numbers (default 1)"},
        {"help", CLI_HELP, .help = "show this help"},
        {0}};
    const cli_command cmd = {
        .name = "study",
        .usage = "usage: qkv study softmax [options]\n"
                 "       qkv study precision [options]   (see qkv study precision --help)\n"
                 "Studies backpropagation through softmax, s = softmax(x).\n"
                 "\n",
        .options = options,
        .column = 22,
        .epilog = "\n"
                  "Exit codes: 0 done (also when gnuplot is missing: the data is written and one line says\n"
                  "so), 2 bad option or value, 3 DIR cannot be written.\n"};
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        cli_print_usage(&cmd, stdout);
        return EXIT_OK;
    }
    if (argc < 2 || strcmp(argv[1], "softmax")) {
        cli_error(argc < 2 ? "study: what to study? (qkv study softmax, qkv study precision)"
                           : "study: unknown subject (softmax or precision)");
        return EXIT_USAGE;
    }
    int code = cli_parse_options(&cmd, argc - 1, argv + 1, NULL);
    if (code != CLI_RUN) return code;
    a->format = formats[format];
    bool kept = false;
    for (int i = 0; i < a->n; i++) kept = kept || isfinite(a->x[i]);
    if (a->vector_set && !kept) {
        cli_error("study: --vector: every entry is -inf (masked): the softmax has nothing to weigh");
        return EXIT_USAGE;
    }
    if (a->dy_set && a->ndy != a->n) {
        cli_error("study: --dy has %d numbers, --vector %d", a->ndy, a->n);
        return EXIT_USAGE;
    }
    if ((a->max_dk & (a->max_dk - 1)) != 0) {
        cli_error("study: --max-dk: %ld is not a power of two", a->max_dk);
        return EXIT_USAGE;
    }
    if (a->out_dir && !a->scaling) {
        cli_error("study: --out goes with --scaling");
        return EXIT_USAGE;
    }
    return CLI_RUN;
}

static int study_run(const study_args *a) {
    bool jac = !a->scaling || a->vector_set || a->dy_set;
    if (jac) study_jacobian(a->x, a->n, a->dy_set ? a->dy : NULL, a->seed);
    if (!a->scaling) return EXIT_OK;
    if (jac) printf("\n");
    return study_scaling((int)a->samples, (int)a->keys, (int)a->max_dk, a->seed, a->out_dir,
                         a->format);
}

int cmd_study(int argc, char **argv, bool parse_only) {
    if (argc >= 2 && !strcmp(argv[1], "precision"))
        return study_precision(argc - 1, argv + 1, parse_only);
    study_args a;
    int code = study_parse(argc, argv, &a);
    return code != CLI_RUN || parse_only ? code : study_run(&a);
}
