/* collect.c - a sweep's results: every cell's summary.json gathered into DIR/sweep.csv and
 * DIR/sweep.md, and one metric against a grid option into DIR/sweep_plot.dat, the data of
 * scripts/sweep.gp (sweep.h). */
#include "sweep/sweep.h"
#include "engine/engine.h"
#include "io/io.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const sweep_metric_names[] = {"heldout_acc", "heldout_loss", "attention_mass",
                                          "best_head",   "loss",         "train_acc",
                                          "wall_seconds", NULL};

typedef struct {
    char *name;          /* the cell's directory name */
    const char *status;  /* done, failed, diverged, interrupted, running or missing */
    cJSON *summary;      /* NULL if missing */
    char **values;       /* per grid option, as text (from the summary's config if there) */
    double x, y;         /* for the plot (NaN when unknown) */
    int line;            /* index of its --lines value */
    long group;          /* with --average: the cells of one group differ only in that option */
} collected_cell;

/* One point of the figure: a cell's (x, y), or with --average a group's mean and range. */
typedef struct {
    double x, mean, lo, hi;
    long n; /* cells averaged */
} plot_point;

static int cmp_point_x(const void *a, const void *b) {
    const plot_point *x = a, *y = b;
    return (x->x > y->x) - (x->x < y->x);
}

/* Writes a config value as text: numbers in their shortest exact form. */
static char *value_text(const cJSON *v) {
    char buf[64];
    if (cJSON_IsString(v)) return strdup(v->valuestring);
    if (cJSON_IsBool(v)) return strdup(cJSON_IsTrue(v) ? "true" : "false");
    if (!cJSON_IsNumber(v)) return strdup("");
    snprintf(buf, sizeof buf, "%.15g", v->valuedouble);
    if (strtod(buf, NULL) != v->valuedouble) snprintf(buf, sizeof buf, "%.17g", v->valuedouble);
    return strdup(buf);
}

static void config_key(const char *option, char *key, size_t len) {
    size_t i = 0;
    for (; option[i] && i + 1 < len; i++) key[i] = option[i] == '-' ? '_' : option[i];
    key[i] = '\0';
}

/* A metric of a summary ("step" and "wall_seconds" are the summary's own), NaN if absent. */
static double summary_number(const cJSON *summary, const char *metric) {
    bool top = !strcmp(metric, "wall_seconds") || !strcmp(metric, "step");
    const cJSON *from = top ? summary : cJSON_GetObjectItemCaseSensitive(summary, "metrics");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(from, metric);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static double d_k_of(const cJSON *summary) {
    const cJSON *config = cJSON_GetObjectItemCaseSensitive(summary, "config");
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(config, "d_model");
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(config, "heads");
    return cJSON_IsNumber(d) && cJSON_IsNumber(h) && h->valuedouble > 0
               ? d->valuedouble / h->valuedouble : NAN;
}

/* A number for a table: empty when unknown. */
static void number_text(double v, char *out, size_t len) {
    if (isfinite(v)) snprintf(out, len, "%.6g", v);
    else out[0] = '\0';
}

/* Writes a CSV field: quoted when it holds a comma, a quote or a line break. */
static void csv_field(FILE *f, const char *s) {
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (const char *p = s; *p; p++) {
        if (*p == '"') fputc('"', f);
        fputc(*p, f);
    }
    fputc('"', f);
}

static void md_field(FILE *f, const char *s) {
    for (const char *p = s; *p; p++) {
        if (*p == '|') fputc('\\', f);
        fputc(iscntrl((unsigned char)*p) ? ' ' : *p, f);
    }
}

/* The grid option named `name` (either spelling), or -1. */
static int find_param(const sweep *sw, const char *name) {
    char dashed[64];
    size_t i = 0;
    for (; name[i] && i + 1 < sizeof dashed; i++) dashed[i] = name[i] == '_' ? '-' : name[i];
    dashed[i] = '\0';
    for (int p = 0; p < sw->nparams; p++)
        if (!strcmp(sw->param[p].name, dashed)) return p;
    return -1;
}

/* The files --collect writes in the sweep's directory (their temporaries are its own). */
static const char *const collect_outputs[] = {"sweep.csv", "sweep.md", "sweep_plot.dat",
                                              "sweep.png", "sweep.svg", NULL};

/* A value as a number (engine/numbers.c), or NaN when it is not one (a text option, or an
 * odd value). */
static double number_of(const char *text) {
    double v;
    return number_real(text, &v) == NUMBER_OK ? v : NAN;
}

static bool all_numbers(const sweep_param *p) {
    for (int i = 0; i < p->n; i++)
        if (!isfinite(number_of(p->values[i]))) return false;
    return p->n > 0;
}

/* Notes a cell the figure leaves out: "NAME (--x OPTION 'VALUE')", listed in out->left_out
 * while it has room, counted in out->nleft. */
static void left_out(sweep_collected *out, const char *cell, const char *option,
                     const char *value) {
    size_t used = strlen(out->left_out);
    char one[SWEEP_CELL_NAME_MAX + 160];
    snprintf(one, sizeof one, "%s%s (%s '%.60s' is not a number)", out->nleft ? ", " : "", cell,
             option, value);
    if (used + strlen(one) + 8 < sizeof out->left_out) memcpy(out->left_out + used, one, strlen(one) + 1);
    else if (!strstr(out->left_out, ", ...")) memcpy(out->left_out + used, ", ...", 6);
    out->nleft++;
}

/* DIR/sweep.csv and DIR/sweep.md: one row per cell. */
static qkv_status write_table_files(const sweep *sw, collected_cell *cells) {
    static const char *const tail[] = {"step", "heldout_acc", "heldout_loss", "attention_mass",
                                       "best_head", "loss", "train_acc", "wall_seconds"};
    const size_t ntail = sizeof tail / sizeof tail[0];
    for (int md = 0; md < 2; md++) {
        char *path = sweep_path_join(sw->dir, md ? "sweep.md" : "sweep.csv");
        atomic_file af;
        qkv_status s = path ? atomic_open(&af, path) : qkv_fail(QKV_ERR_NOMEM, "out of memory");
        free(path);
        if (s != QKV_OK) return qkv_fail(s, "sweep: %s", qkv_last_error());
        /* the header */
        fputs(md ? "| cell | status" : "cell,status", af.f);
        for (int p = 0; p < sw->nparams; p++) {
            char key[64];
            config_key(sw->param[p].name, key, sizeof key);
            fprintf(af.f, md ? " | %s" : ",%s", key);
        }
        fputs(md ? " | d_k" : ",d_k", af.f);
        for (size_t t = 0; t < ntail; t++) fprintf(af.f, md ? " | %s" : ",%s", tail[t]);
        fputs(md ? " |\n|---|---" : "\n", af.f);
        if (md) {
            for (size_t k = 0; k < (size_t)sw->nparams + 1 + ntail; k++) fputs("|---", af.f);
            fputs("|\n", af.f);
        }
        for (long c = 0; c < sw->ncells; c++) {
            const collected_cell *cell = &cells[c];
            char num[64];
            if (md) {
                fputs("| ", af.f);
                md_field(af.f, cell->name);
                fprintf(af.f, " | %s", cell->status);
            } else {
                csv_field(af.f, cell->name);
                fprintf(af.f, ",%s", cell->status);
            }
            for (int p = 0; p < sw->nparams; p++) {
                fputs(md ? " | " : ",", af.f);
                if (md) md_field(af.f, cell->values[p]);
                else csv_field(af.f, cell->values[p]);
            }
            number_text(d_k_of(cell->summary), num, sizeof num);
            fprintf(af.f, md ? " | %s" : ",%s", num);
            for (size_t t = 0; t < ntail; t++) {
                number_text(summary_number(cell->summary, tail[t]), num, sizeof num);
                fprintf(af.f, md ? " | %s" : ",%s", num);
            }
            fputs(md ? " |\n" : "\n", af.f);
        }
        if ((s = atomic_commit(&af)) != QKV_OK) return qkv_fail(s, "sweep: %s", qkv_last_error());
    }
    return QKV_OK;
}

sweep_status sweep_collect(const char *dir, const char *x_name, const char *lines_name,
                           const char *average_name, const char *metric,
                           sweep_option_kind option_kind, sweep_collected *out) {
    memset(out, 0, sizeof *out);
    sweep sw;
    sweep_status code = sweep_load(&sw, dir, option_kind);
    if (code != QKV_OK) {
        sweep_free(&sw);
        return code;
    }
    /* the axes; by default x is the grid's first option whose values are numbers */
    bool x_is_dk = x_name && !strcmp(x_name, "d_k");
    int xp = x_name && !x_is_dk ? find_param(&sw, x_name) : -1, lp = -1;
    for (int p = 0; !x_name && p < sw.nparams && xp < 0; p++)
        if (all_numbers(&sw.param[p])) xp = p;
    out->figure = x_name || xp >= 0;
    if (x_name && !x_is_dk && xp < 0) {
        sweep_free(&sw);
        return qkv_fail(QKV_ERR_VALUE, "sweep: --x %s is not an option of the grid (nor d_k)",
                        x_name);
    }
    int ap = -1; /* --average: the option whose cells are averaged into one point */
    if (average_name && ((ap = find_param(&sw, average_name)) < 0 || ap == xp)) {
        sweep_free(&sw);
        return qkv_fail(QKV_ERR_VALUE,
                        ap < 0 ? "sweep: --average %s is not an option of the grid"
                               : "sweep: --average %s is the x axis too", average_name);
    }
    if (lines_name) {
        if ((lp = find_param(&sw, lines_name)) < 0 || lp == xp || lp == ap) {
            sweep_free(&sw);
            return qkv_fail(QKV_ERR_VALUE,
                            lp < 0 ? "sweep: --lines %s is not an option of the grid"
                            : lp == xp ? "sweep: --lines %s is the x axis too"
                                       : "sweep: --lines %s is the averaged option too",
                            lines_name);
        }
    } else {
        /* not an option d_k is made of, when it is the x axis */
        for (int p = 0; p < sw.nparams && lp < 0; p++)
            if (p != xp && p != ap && !(x_is_dk && (!strcmp(sw.param[p].name, "d-model") ||
                                                    !strcmp(sw.param[p].name, "heads"))))
                lp = p;
    }
    collected_cell *cells = calloc((size_t)sw.ncells, sizeof *cells);
    if (!cells) {
        sweep_free(&sw);
        return qkv_fail(QKV_ERR_NOMEM, "out of memory");
    }
    long plotted = 0;
    for (long c = 0; c < sw.ncells && code == QKV_OK; c++) {
        collected_cell *cell = &cells[c];
        char name[SWEEP_CELL_NAME_MAX + 64];
        sweep_cell_name(&sw, c, name, sizeof name);
        cell->name = strdup(name);
        char *cell_dir = sweep_path_join(dir, name);
        /* a cell never run is "missing"; a summary there but corrupt stops the collect before
         * anything is written (exit 4, naming it): its run is not known to have failed */
        code = cell_dir ? sweep_cell_summary(cell_dir, &cell->summary)
                        : qkv_fail(QKV_ERR_NOMEM, "out of memory");
        free(cell_dir);
        if (code != QKV_OK) break;
        bool done = sweep_summary_done(cell->summary);
        const cJSON *status = cJSON_GetObjectItemCaseSensitive(cell->summary, "status");
        const char *said = cJSON_IsString(status) ? status->valuestring : "";
        cell->status = done ? "done" : !cell->summary ? "missing"
                       : !strcmp(said, "running") ? "running"
                       : !strcmp(said, "diverged") ? "diverged"
                       : !strcmp(said, "interrupted") ? "interrupted" : "failed";
        const cJSON *config = cJSON_GetObjectItemCaseSensitive(cell->summary, "config");
        int idx[SWEEP_MAX_PARAMS];
        sweep_cell_indices(&sw, c, idx);
        cell->values = calloc((size_t)sw.nparams, sizeof *cell->values);
        if (!cell->name || !cell->values) {
            code = QKV_ERR_NOMEM;
            break;
        }
        for (int p = 0; p < sw.nparams; p++) {
            char key[64];
            config_key(sw.param[p].name, key, sizeof key);
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(config, key);
            cell->values[p] = v ? value_text(v) : strdup(sw.param[p].values[idx[p]]);
            if (!cell->values[p]) code = QKV_ERR_NOMEM;
        }
        if (code != QKV_OK) break;
        cell->x = x_is_dk ? d_k_of(cell->summary) : xp >= 0 ? number_of(cell->values[xp]) : NAN;
        if (out->figure && !isfinite(cell->x)) /* a text value, or an odd one in its config */
            left_out(out, cell->name, x_is_dk ? "d_k" : sw.param[xp].name,
                     x_is_dk ? "" : cell->values[xp]);
        cell->y = done ? summary_number(cell->summary, metric) : NAN;
        cell->line = lp >= 0 ? idx[lp] : 0;
        cell->group = c;
        if (ap >= 0) { /* its index in the grid with the averaged option at its first value */
            cell->group = 0;
            for (int p = 0; p < sw.nparams; p++)
                cell->group = cell->group * sw.param[p].n + (p == ap ? 0 : idx[p]);
        }
        plotted += isfinite(cell->x) && isfinite(cell->y);
    }
    if (code == QKV_ERR_NOMEM) qkv_fail(code, "out of memory");
    /* what a killed --collect left: its temporaries, if their process is gone */
    if (code == QKV_OK) io_remove_stale_temporaries(dir, collect_outputs);
    if (code == QKV_OK) code = write_table_files(&sw, cells);
    out->tables = code == QKV_OK;

    /* the figure's data: one block per --lines value, sorted by x, then gnuplot in DIR */
    if (code == QKV_OK && out->figure && plotted == 0) {
        if (out->nleft == sw.ncells)
            qkv_fail(QKV_ERR_VALUE, "sweep: --x %s: no cell's value is a number (%s): the tables "
                     "are written, the figure is not", x_is_dk ? "d_k" : sw.param[xp].name,
                     out->left_out);
        else
            qkv_fail(QKV_ERR_VALUE, "sweep: no finished cell has %s to plot", metric);
        code = SWEEP_FAILED;
    }
    bool draw = code == QKV_OK && out->figure;
    char *data = draw ? sweep_path_join(dir, "sweep_plot.dat") : NULL;
    plot_point *points = draw ? malloc((size_t)sw.ncells * sizeof *points) : NULL;
    long *group_of = draw ? malloc((size_t)sw.ncells * sizeof *group_of) : NULL; /* points' */
    atomic_file af;
    qkv_status s = QKV_OK;
    if (draw && (!data || !points || !group_of)) code = qkv_fail(QKV_ERR_NOMEM, "out of memory");
    if (draw && code == QKV_OK && (s = atomic_open(&af, data)) != QKV_OK)
        code = qkv_fail(s, "sweep: %s", qkv_last_error());
    double xmin = INFINITY, xmax = -INFINITY;
    int blocks = 0;
    if (draw && code == QKV_OK) {
        char xlabel[64];
        config_key(x_is_dk ? "d_k" : sw.param[xp].name, xlabel, sizeof xlabel);
        fprintf(af.f, "# qkv sweep --collect: %s against %s, one block per value of %s", metric,
                xlabel, lp >= 0 ? sw.param[lp].name : "(none)");
        if (ap >= 0)
            fprintf(af.f, "; x, the mean over %s, its minimum, its maximum, the cells", sw.param[ap].name);
        fputc('\n', af.f);
        int nlines = lp >= 0 ? sw.param[lp].n : 1;
        for (int l = 0; l < nlines; l++) {
            /* the line's points: each cell's, or each group's mean, minimum and maximum */
            long n = 0;
            for (long c = 0; c < sw.ncells; c++) {
                const collected_cell *cell = &cells[c];
                if (cell->line != l || !isfinite(cell->x) || !isfinite(cell->y)) continue;
                plot_point *p = NULL;
                for (long i = 0; i < n && !p; i++)
                    if (group_of[i] == cell->group) p = &points[i];
                if (!p) {
                    group_of[n] = cell->group;
                    p = &points[n++];
                    *p = (plot_point){cell->x, 0, cell->y, cell->y, 0};
                }
                p->mean += cell->y;
                p->lo = cell->y < p->lo ? cell->y : p->lo;
                p->hi = cell->y > p->hi ? cell->y : p->hi;
                p->n++;
            }
            if (n == 0) continue;
            qsort(points, (size_t)n, sizeof *points, cmp_point_x);
            fprintf(af.f, "%s\"", blocks++ ? "\n\n" : "");
            if (lp >= 0) fputs(sw.param[lp].values[l], af.f);
            else fputs(metric, af.f);
            fputs("\"\n", af.f);
            for (long i = 0; i < n; i++) {
                const plot_point *p = &points[i];
                if (ap >= 0)
                    fprintf(af.f, "%.17g %.17g %.17g %.17g %ld\n", p->x, p->mean / (double)p->n,
                            p->lo, p->hi, p->n);
                else
                    fprintf(af.f, "%.17g %.17g\n", p->x, p->mean);
                if (p->x < xmin) xmin = p->x;
                if (p->x > xmax) xmax = p->x;
                if (p->n > out->most_averaged) out->most_averaged = p->n;
                if (out->least_averaged == 0 || p->n < out->least_averaged)
                    out->least_averaged = p->n;
            }
        }
        if ((s = atomic_commit(&af)) != QKV_OK) code = qkv_fail(s, "sweep: %s", qkv_last_error());
    }
    if (draw && code == QKV_OK) { /* what the plot of the data needs */
        config_key(x_is_dk ? "d_k" : sw.param[xp].name, out->xlabel, sizeof out->xlabel);
        snprintf(out->lines, sizeof out->lines, "%s", lp >= 0 ? sw.param[lp].name : "");
        if (ap >= 0) config_key(sw.param[ap].name, out->averaged, sizeof out->averaged);
        out->logx = xmin > 0 && xmax >= 8 * xmin;
        out->blocks = blocks;
    }
    free(points);
    free(group_of);
    free(data);
    for (long c = 0; c < sw.ncells; c++) {
        free(cells[c].name);
        cJSON_Delete(cells[c].summary);
        for (int p = 0; cells[c].values && p < sw.nparams; p++) free(cells[c].values[p]);
        free(cells[c].values);
    }
    free(cells);
    sweep_free(&sw);
    return code;
}

