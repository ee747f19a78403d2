/* metrics.c - metrics.csv in memory and on disk. */
#include "io/metrics.h"

#include "io/io.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void metrics_init(metrics_table *m, int layers, int heads) {
    int first = layers + 3 * layers * heads;
    int comp = layers > 1 && heads <= METRICS_MAX_COMPOSED_HEADS
                   ? 3 * (layers - 1) * heads * heads
                   : 0;
    *m = (metrics_table){.layers = layers, .heads = heads, .first_head_column = first,
                         .n_composition = comp, .n_scores = first + 2 * layers * heads + comp,
                         .icl_column = -1, .first_fourier_column = -1};
}

const char *const metrics_fourier_names[FOURIER_COLUMNS] = {
    "train_set_loss", "train_set_acc", "sum_squared_weights", "restricted_loss", "restricted_acc",
    "excluded_loss",
    "gini_embed", "gini_neuron_logits", "logit_share", "key_count"};

void metrics_add_fourier_columns(metrics_table *m) {
    m->first_fourier_column = m->n_scores;
    m->n_scores += FOURIER_COLUMNS;
}

static bool fourier_column_of(const metrics_table *m, int k) {
    return m->first_fourier_column >= 0 && k >= m->first_fourier_column &&
           k < m->first_fourier_column + FOURIER_COLUMNS;
}

void metrics_add_icl_column(metrics_table *m) {
    m->icl_column = m->n_scores++;
}

void metrics_column_name(const metrics_table *m, int k, char *buf, size_t len) {
    static const char *const per_head[] = {"prev", "dup", "ind"}, kinds[] = "qkv";
    int L = m->layers, H = m->heads;
    if (k == m->icl_column) {
        snprintf(buf, len, "icl_score");
    } else if (fourier_column_of(m, k)) {
        snprintf(buf, len, "%s", metrics_fourier_names[k - m->first_fourier_column]);
    } else if (k < L) {
        snprintf(buf, len, "mass_l%d", k + 1);
    } else if (k < m->first_head_column) {
        int i = (k - L) / 3; /* layer * H + head */
        snprintf(buf, len, "%s_l%dh%d", per_head[(k - L) % 3], i / H + 1, i % H + 1);
    } else if (k < m->first_head_column + 2 * L * H) {
        int i = (k - m->first_head_column) / 2;
        snprintf(buf, len, "%s_l%dh%d", (k - m->first_head_column) % 2 ? "copy" : "entropy",
                 i / H + 1, i % H + 1);
    } else { /* [layer][kind][from][to], as qkv_composition_scores */
        int i = k - m->first_head_column - 2 * L * H;
        int to = i % H, from = i / H % H, kind = i / (H * H) % 3, l = i / (3 * H * H);
        snprintf(buf, len, "comp%c_l%dh%d_l%dh%d", kinds[kind], l + 1, from + 1, l + 2, to + 1);
    }
}

void metrics_free(metrics_table *m) {
    for (int i = 0; i < m->n; i++) free(m->rows[i].scores);
    free(m->rows);
    m->rows = NULL;
    m->n = m->cap = 0;
}

double *metrics_new_scores(const metrics_table *m) {
    double *s = malloc((size_t)(m->n_scores ? m->n_scores : 1) * sizeof *s);
    for (int i = 0; s && i < m->n_scores; i++) s[i] = NAN;
    return s;
}

void metrics_add(metrics_table *m, metrics_row r) {
    if (m->n == m->cap) {
        int cap = m->cap ? 2 * m->cap : 64;
        metrics_row *p = realloc(m->rows, (size_t)cap * sizeof *p);
        if (!p) {
            free(r.scores);
            return;
        }
        m->rows = p;
        m->cap = cap;
    }
    m->rows[m->n++] = r;
}

int metrics_induction_column(const metrics_table *m, int l, int h) {
    return m->layers + 3 * (l * m->heads + h) + 2;
}

qkv_status metrics_read(metrics_table *m, const char *path, int64_t upto) {
    FILE *f;
    if (io_absent(path)) return QKV_OK;
    qkv_status s = io_fopen_regular(path, &f);
    if (s != QKV_OK) return s;
    static char line[1 << 20]; /* up to 8 layers x 64 heads x 5 scores, and comp columns */
    while (fgets(line, sizeof line, f)) {
        metrics_row r = {.heldout_loss = NAN}; /* files older than heldout_loss have 5 columns */
        if (sscanf(line, "%" SCNd64 ",%lf,%lf,%lf,%lf,%lf", &r.step, &r.loss, &r.train_acc,
                   &r.heldout_acc, &r.lr, &r.heldout_loss) >= 5 && r.step <= upto) {
            /* the attention columns after the sixth: empty or missing ones stay NaN */
            r.scores = metrics_new_scores(m);
            char *p = line;
            for (int comma = 0; comma < 6 && p; comma++) p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
            for (int k = 0; r.scores && p && k < m->n_scores; k++) {
                char *end;
                double v = strtod(p, &end);
                if (end != p && (*end == ',' || *end == '\n' || *end == '\0')) r.scores[k] = v;
                p = strchr(p, ',');
                if (p) p++;
            }
            metrics_add(m, r);
        }
    }
    s = ferror(f) ? qkv_fail(QKV_ERR_IO, "cannot read %s", path) : QKV_OK;
    fclose(f);
    return s;
}

qkv_status metrics_write(const metrics_table *m, const char *path) {
    atomic_file af;
    qkv_status s = atomic_open(&af, path);
    if (s != QKV_OK) return s;
    fprintf(af.f, "step,loss,train_acc,heldout_acc,lr,heldout_loss");
    for (int k = 0; k < m->n_scores; k++) {
        char name[64];
        metrics_column_name(m, k, name, sizeof name);
        fprintf(af.f, ",%s", name);
    }
    fputc('\n', af.f);
    for (int i = 0; i < m->n; i++) {
        const metrics_row *r = &m->rows[i];
        /* losses in %g: a trained model's loss is far below the 1e-6 that %f would show */
        fprintf(af.f, "%" PRId64 ",%.6g,%.6f,%.6f,%.6g,", r->step, r->loss, r->train_acc,
                r->heldout_acc, r->lr);
        if (isfinite(r->heldout_loss)) fprintf(af.f, "%.6g", r->heldout_loss); /* else empty */
        for (int k = 0; k < m->n_scores; k++) {
            fputc(',', af.f);
            if (r->scores && isfinite(r->scores[k]))
                fprintf(af.f, fourier_column_of(m, k) ? "%.6g" : "%.4f", r->scores[k]);
        }
        fputc('\n', af.f);
    }
    return atomic_commit(&af);
}
