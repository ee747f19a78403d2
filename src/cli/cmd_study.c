/* cmd_study.c - `qkv study softmax`: the softmax Jacobian, its O(n) backward pass, and why
 * attention divides its scores by sqrt(d_k) (the numbers: src/explore/softmax_study.c). */
#include "cli.h"
#include "io/paths.h"
#include "explore/softmax_study.h"
#include "engine/engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses "a,b,c" into v; false (with one line) on a bad number or length. Each entry is a
 * number by the syntax of engine/numbers.c; with masked_ok, it may also be -inf: a key the
 * mask dropped. */
static bool parse_list(const char *name, const char *text, double *v, int *n, bool masked_ok) {
    *n = 0;
    for (const char *p = text;;) {
        size_t len = strcspn(p, ",");
        char entry[64];
        double x = 0;
        bool masked = masked_ok && len == 4 && !strncmp(p, "-inf", 4);
        snprintf(entry, sizeof entry, "%.*s", (int)(len < sizeof entry ? len : 0), p);
        if (masked) x = -INFINITY;
        else if (len >= sizeof entry || number_real(entry, &x) != NUMBER_OK) {
            cli_error("study: --%s: '%s' is not a comma-separated list of finite numbers%s", name,
                      text, masked_ok ? " (or -inf, a masked entry)" : "");
            return false;
        }
        if (*n == STUDY_MAX_N) {
            cli_error("study: --%s: more than %d numbers", name, STUDY_MAX_N);
            return false;
        }
        v[(*n)++] = x;
        if (p[len] == '\0') return true;
        p += len + 1;
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

/* (a): the Jacobian three ways, as study_jacobian found them. */
static void print_jacobian(const double *x, const jacobian_study *r, bool dy_given) {
    int n = r->n;
    printf("softmax Jacobian study, n = %d\n\n", n);
    print_vector("x", x, n);
    print_vector("s = softmax(x)", r->s, n);
    printf("%-26s %.15g\n\n", "sum of s", r->sum);
    printf("J = diag(s) - s s^T   (row i, column j: ds_i/dx_j)\n");
    print_matrix(r->J, n);
    printf("\nfinite differences (s(x + h e_j) - s(x - h e_j)) / 2h, h = %g\n", STUDY_FD_STEP);
    print_matrix(r->Jfd, n);
    printf("largest |J - finite differences| = %.3g\n", r->err_fd);
    printf("\nbackward pass dx = s * (dy - sum(dy * s)), O(n), qkv's softmax op;\n"
           "row i: dy = e_i (the i-th unit vector), which gives J^T e_i = row i of J\n");
    print_matrix(r->rows, n);
    printf("largest |J - backward rows| = %.3g\n", r->err_rows);
    printf("\n");
    print_vector(dy_given ? "dy (--dy)" : "dy (random, --seed)", r->dy, n);
    print_vector("J^T dy, O(n^2)", r->jt, n);
    print_vector("s * (dy - sum(dy * s))", r->formula, n);
    print_vector("qkv backward", r->dx, n);
    printf("largest |J^T dy - backward| = %.3g\n", r->err_dy);
    for (int i = 0; i < n; i++)
        if (x[i] == -INFINITY)
            printf("x_%d = -inf is a masked entry: s_%d = 0, row and column %d of J are 0, and dx_%d "
                   "= 0 whatever dy is: no gradient reaches a masked key\n", i + 1, i + 1, i + 1, i + 1);
}

/* (b)'s table and what it shows. */
static void print_scaling(const scaling_row *rows, int nrows, int n, int samples) {
    printf("softmax scaling study: q, k with N(0,1) entries, %d keys, %d draws per d_k\n\n",
           n, samples);
    printf("%6s %12s %16s   %-19s   %-23s\n", "", "", "", "mean largest weight",
           "median |J| (Frobenius)");
    printf("%6s %12s %16s   %9s %9s   %11s %11s\n", "d_k", "var(q.k)", "var(q.k/sqrt dk)",
           "raw", "scaled", "raw", "scaled");
    for (int i = 0; i < nrows; i++) {
        const scaling_row *r = &rows[i];
        printf("%6d %12.3f %16.3f   %9.4f %9.4f   %11.3g %11.3g\n", r->dk, r->var_raw,
               r->var_scaled, r->maxw_raw, r->maxw_scaled, r->jnorm_raw, r->jnorm_scaled);
    }
    const scaling_row *first = &rows[0], *last = &rows[nrows - 1];
    printf("\nvar(q.k) grows like d_k (the sum of d_k products of unit variance): at d_k = %d it is "
           "%.1f.\nWithout the scale the softmax saturates: its largest weight goes from %.2f to "
           "%.2f and\nthe gradient through it, |J|, from %.3g to %.3g (%.0fx smaller). With "
           "1/sqrt(d_k) the\nscores keep unit variance and |J| stays near %.3g.\n",
           last->dk, last->var_raw, first->maxw_raw, last->maxw_raw, first->jnorm_raw,
           last->jnorm_raw, last->jnorm_raw > 0 ? first->jnorm_raw / last->jnorm_raw : INFINITY,
           last->jnorm_scaled);
}

/* (b): the table of study_scaling, and with `out_dir` its data file and plot. The files come
 * first: a command that fails prints its one line and nothing else (a full disk must not leave
 * a table on stdout and then an error). */
static int scaling_run(int samples, int n, int max_dk, uint64_t seed, const char *out_dir,
                       const char *format) {
    if (out_dir && (strlen(out_dir) > 900 || !cli_make_dirs("study: ", out_dir))) {
        if (strlen(out_dir) > 900) cli_error("study: %s: path too long", out_dir);
        return EXIT_IO;
    }
    char path[RUN_PATH_LEN], plot[RUN_PATH_LEN], image[32];
    snprintf(image, sizeof image, "scaling.%s", format);
    if (out_dir) { /* both files checked before either is written */
        snprintf(path, sizeof path, "%s/scaling.dat", out_dir);
        snprintf(plot, sizeof plot, "%s/%s", out_dir, image);
        int code = cli_check_outputs("study", (cli_output[]){{"out", path}, {"out", plot}, {0}},
                                     NULL);
        if (code != EXIT_OK) return code;
    }
    scaling_row rows[STUDY_MAX_ROWS];
    int nrows;
    qkv_status s = study_scaling(samples, n, max_dk, seed, rows, &nrows);
    if (s != QKV_OK) {
        cli_error("%s", qkv_last_error());
        return cli_exit_for(s);
    }
    if (!out_dir) {
        print_scaling(rows, nrows, n, samples);
        return EXIT_OK;
    }

    if ((s = study_scaling_save(path, rows, nrows, n, samples, seed)) != QKV_OK) {
        cli_error("study: %s", qkv_last_error());
        return cli_exit_for(s);
    }
    char keys[16];
    snprintf(keys, sizeof keys, "%d", n);
    bool no_gnuplot;
    int code = cli_gnuplot("scaling.gp", out_dir, image, format, 2,
                           (const char *[]){"scaling.dat", keys}, &no_gnuplot);
    if (code != EXIT_OK && !no_gnuplot) return code;
    print_scaling(rows, nrows, n, samples);
    if (no_gnuplot) return EXIT_OK; /* the study ran and its data is written; the line said so */
    printf("\nwrote %s and %s\n", path, plot);
    return code;
}

typedef struct {
    double x[STUDY_MAX_N], dy[STUDY_MAX_N];
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
        CLI_NO_SELFTEST_ROW,
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
    if (jac) {
        jacobian_study *r = malloc(sizeof *r);
        qkv_status s = r ? study_jacobian(a->x, a->n, a->dy_set ? a->dy : NULL, a->seed, r)
                         : QKV_ERR_NOMEM;
        if (s != QKV_OK) {
            free(r);
            cli_error("out of memory");
            return EXIT_NOMEM;
        }
        print_jacobian(a->x, r, a->dy_set);
        free(r);
    }
    if (!a->scaling) return EXIT_OK;
    if (jac) printf("\n");
    return scaling_run((int)a->samples, (int)a->keys, (int)a->max_dk, a->seed, a->out_dir,
                       a->format);
}

int cmd_study(int argc, char **argv, bool parse_only) {
    if (argc >= 2 && !strcmp(argv[1], "precision"))
        return study_precision(argc - 1, argv + 1, parse_only);
    study_args a;
    int code = study_parse(argc, argv, &a);
    return code != CLI_RUN || parse_only ? code : study_run(&a);
}
