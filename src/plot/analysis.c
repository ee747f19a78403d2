/* analysis.c - the pictures of the analysis commands' files in a run directory, when it holds
 * them: circuits.json (qkv circuits --out: each head's QK and OV circuits over the vocabulary,
 * the composition scores), ablate.json (the loss increase of each head knocked out, layers x
 * heads), patch.json (the share recovered by patching each head, or head and position) and
 * attribute.json (the logit's parts, as bars). Each JSON file is turned into plain text
 * matrices under DIR/plots/ (labelled rows and columns, as the attention maps are), which
 * matrix.gp and bars.gp draw; so the pictures can be redrawn from those files by hand. */
#include "io/io.h"
#include "plot/plot.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_JSON_BYTES (256 << 20) /* a larger analysis file is refused, not read */
#define LABEL_LEN 48

/* DIR/NAME parsed, NULL when there is none (*s QKV_OK) or it cannot be read or parsed (*s set). */
cJSON *plot_read_json(const char *dir, const char *name, qkv_status *s) {
    char path[PLOT_PATH_LEN + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    *s = QKV_OK;
    if (!plot_is_file(path)) return NULL;
    int fd;
    size_t size;
    if ((*s = io_open_regular(path, &fd, &size)) != QKV_OK) return NULL;
    if (size > MAX_JSON_BYTES) {
        close(fd);
        *s = qkv_fail(QKV_ERR_FORMAT, "plot: %s is larger than %d MiB", path, MAX_JSON_BYTES >> 20);
        return NULL;
    }
    char *text = malloc(size + 1);
    size_t got = 0;
    ssize_t n = 1;
    while (text && got < size && (n = read(fd, text + got, size - got)) > 0) got += (size_t)n;
    close(fd);
    if (!text || got != size) {
        free(text);
        *s = text ? qkv_fail(QKV_ERR_IO, "plot: cannot read %s", path)
                  : qkv_fail(QKV_ERR_NOMEM, "plot: out of memory");
        return NULL;
    }
    cJSON *j = cJSON_ParseWithLength(text, size);
    free(text);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        *s = qkv_fail(QKV_ERR_FORMAT, "plot: %s is not a JSON object", path);
    }
    return cJSON_IsObject(j) ? j : NULL;
}

/* A label gnuplot reads as one word: spaces and quotes become '_'. */
static void clean_label(char *dst, const char *src) {
    snprintf(dst, LABEL_LEN, "%s", src && *src ? src : "_");
    for (char *p = dst; *p; p++)
        if (*p == ' ' || *p == '"' || *p == '\'' || *p == '#' || (unsigned char)*p < 32)
            *p = '_';
}

/* A matrix (rows, cols) with labelled rows and columns as DIR/REL, the layout of the attention
 * maps: a '#' comment, "row\col c1 c2 ...", then "r v v ...". NaN for a missing value. */
typedef struct {
    int rows, cols;
    char (*row_label)[LABEL_LEN], (*col_label)[LABEL_LEN];
    double *v;
} matrix;

static bool matrix_new(matrix *m, int rows, int cols) {
    *m = (matrix){rows, cols, calloc((size_t)rows, LABEL_LEN), calloc((size_t)cols, LABEL_LEN),
                  malloc((size_t)rows * cols * sizeof(double))};
    for (int64_t i = 0; m->v && i < (int64_t)rows * cols; i++) m->v[i] = NAN;
    return m->row_label && m->col_label && m->v;
}

static void matrix_free(matrix *m) {
    free(m->row_label), free(m->col_label), free(m->v);
    *m = (matrix){0};
}

static qkv_status matrix_write(const matrix *m, const char *dir, const char *rel,
                               const char *what) {
    char path[PLOT_PATH_LEN + 64];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    atomic_file af;
    qkv_status s = atomic_open(&af, path);
    if (s != QKV_OK) return s;
    fprintf(af.f, "# qkv %s\nrow\\column", what);
    for (int j = 0; j < m->cols; j++) fprintf(af.f, " %s", m->col_label[j]);
    fputc('\n', af.f);
    for (int i = 0; i < m->rows; i++) {
        fprintf(af.f, "%s", m->row_label[i]);
        for (int j = 0; j < m->cols; j++) {
            double v = m->v[(int64_t)i * m->cols + j];
            if (isfinite(v)) fprintf(af.f, " %.6g", v);
            else fputs(" NaN", af.f);
        }
        fputc('\n', af.f);
    }
    return atomic_commit(&af);
}

/* The member `key` of o that is an array (a file may also carry a count of that name). */
static const cJSON *array_item(const cJSON *o, const char *key) {
    const cJSON *c;
    cJSON_ArrayForEach(c, o) if (c->string && !strcmp(c->string, key) && cJSON_IsArray(c)) return c;
    return NULL;
}

static double number(const cJSON *o, const char *key) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(n) ? n->valuedouble : NAN;
}

static int whole(const cJSON *o, const char *key) {
    double v = number(o, key);
    return isfinite(v) && v >= 0 && v < 1e6 ? (int)v : -1;
}

/* The format's error for a file that is JSON but not what its command writes. */
static qkv_status not_like(const char *dir, const char *name, const char *why) {
    return qkv_fail(QKV_ERR_FORMAT, "plot: %s/%s: %s", dir, name, why);
}

/* The length of m's longest label, rows or columns. */
static size_t longest_label(const matrix *m) {
    size_t n = 0;
    for (int i = 0; i < m->rows; i++) n = strlen(m->row_label[i]) > n ? strlen(m->row_label[i]) : n;
    for (int j = 0; j < m->cols; j++) n = strlen(m->col_label[j]) > n ? strlen(m->col_label[j]) : n;
    return n;
}

/* Draws DATA (under plots/), the matrix m, with matrix.gp into plots/OUT.FORMAT. */
static plot_status draw_matrix(plotter *p, const char *dir, const char *data, const matrix *m,
                               const char *out, const char *format, const char *title,
                               const char *xlabel, const char *ylabel, const char *cblabel,
                               const char *mode) {
    char image[160], values[32];
    snprintf(image, sizeof image, "plots/%s.%s", out, format);
    snprintf(values, sizeof values, "1 %zu", longest_label(m));
    return plotter_run(p, dir, "matrix.gp", image, format, 7,
                       (const char *[]){data, title, xlabel, ylabel, cblabel, mode, values});
}

/* circuits.json: each head's QK and OV circuits, and the composition scores of each kind. */
static plot_status plot_circuits(plotter *p, const char *dir, const char *format,
                                 const cJSON *j) {
    static const char name[] = "circuits.json";
    const cJSON *vocab = array_item(j, "vocab");
    const cJSON *qrows = array_item(j, "query_labels");
    const cJSON *heads = array_item(j, "heads");
    int V = cJSON_GetArraySize(vocab), R = cJSON_GetArraySize(qrows);
    int H = whole(j, "heads_per_layer");
    if (!cJSON_IsArray(vocab) || !cJSON_IsArray(qrows) || !cJSON_IsArray(heads) || V < 1 ||
        R < 1 || H < 1)
        return not_like(dir, name, "no vocab, query_labels, heads_per_layer or heads");
    bool decoder = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "encoder_decoder"));
    plot_status code = QKV_OK;
    const cJSON *head;
    cJSON_ArrayForEach(head, heads) {
        int l = whole(head, "layer"), h = whole(head, "head");
        if (l < 1 || h < 1) return not_like(dir, name, "a head without its layer and head");
        static const char *const kinds[] = {"qk", "ov"};
        for (int k = 0; k < 2 && code == QKV_OK; k++) {
            const cJSON *rows = cJSON_GetObjectItemCaseSensitive(head, kinds[k]);
            int nr = k == 0 ? R : V;
            if (cJSON_GetArraySize(rows) != nr)
                return not_like(dir, name, "a circuit of another size");
            matrix m;
            if (!matrix_new(&m, nr, V)) {
                matrix_free(&m);
                return qkv_fail(QKV_ERR_NOMEM, "plot: out of memory");
            }
            for (int i = 0; i < nr; i++) {
                const cJSON *lab = cJSON_GetArrayItem(k == 0 ? qrows : vocab, i);
                clean_label(m.row_label[i], cJSON_IsString(lab) ? lab->valuestring : NULL);
                const cJSON *row = cJSON_GetArrayItem(rows, i);
                for (int c = 0; c < V && cJSON_GetArraySize(row) == V; c++)
                    m.v[(int64_t)i * V + c] = cJSON_GetArrayItem(row, c)->valuedouble;
            }
            for (int c = 0; c < V; c++) {
                const cJSON *lab = cJSON_GetArrayItem(vocab, c);
                clean_label(m.col_label[c], cJSON_IsString(lab) ? lab->valuestring : NULL);
            }
            /* a data file's vocabulary starts with its padding token, which no example
             * attends to: no value (drawn grey), in its column and in its row */
            if (!strcmp(m.col_label[0], DAT_PAD_TOKEN)) {
                for (int i = 0; i < nr; i++) m.v[(int64_t)i * V] = NAN;
                if (!strcmp(m.row_label[0], DAT_PAD_TOKEN))
                    for (int c = 0; c < V; c++) m.v[c] = NAN;
            }
            char data[96], out[96], title[160];
            snprintf(data, sizeof data, "plots/circuit_%s_layer%d_head%d.dat", kinds[k], l, h);
            snprintf(out, sizeof out, "circuit_%s_layer%d_head%d", kinds[k], l, h);
            code = matrix_write(&m, dir, data, k == 0 ? "QK circuit (qkv circuits)"
                                                      : "OV circuit (qkv circuits)");
            if (code != QKV_OK) {
                matrix_free(&m);
                return code;
            }
            double score = number(head, "copying_score");
            if (k == 0)
                snprintf(title, sizeof title, "QK circuit of layer %d, head %d (scaled scores)",
                         l, h);
            else if (isfinite(score))
                snprintf(title, sizeof title,
                         "OV circuit of layer %d, head %d (copying score %.3f)", l, h, score);
            else
                snprintf(title, sizeof title, "OV circuit of layer %d, head %d", l, h);
            code = k == 0 ? draw_matrix(p, dir, data, &m, out, format, title, "key token",
                                        decoder ? "decoder position" : "query token",
                                        "score", "diverging")
                          : draw_matrix(p, dir, data, &m, out, format, title, "logit of token",
                                        "token attended to", "logit", "diverging");
            matrix_free(&m);
        }
        if (code != QKV_OK) return code;
    }
    /* composition: one matrix per kind, heads of layer L (rows) by heads of layer L+1 */
    const cJSON *comp = array_item(j, "composition");
    int L = whole(j, "layers");
    if (!cJSON_IsArray(comp) || cJSON_GetArraySize(comp) == 0 || L < 2) return code;
    static const char kinds[] = "qkv";
    for (int k = 0; k < 3 && code == QKV_OK; k++) {
        matrix m;
        if (!matrix_new(&m, (L - 1) * H, (L - 1) * H)) {
            matrix_free(&m);
            return qkv_fail(QKV_ERR_NOMEM, "plot: out of memory");
        }
        for (int i = 0; i < (L - 1) * H; i++) {
            snprintf(m.row_label[i], LABEL_LEN, "%d.%d", i / H + 1, i % H + 1);
            snprintf(m.col_label[i], LABEL_LEN, "%d.%d", i / H + 2, i % H + 1);
        }
        int found = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, comp) {
            const cJSON *kind = cJSON_GetObjectItemCaseSensitive(e, "kind");
            const cJSON *from = cJSON_GetObjectItemCaseSensitive(e, "from");
            const cJSON *to = cJSON_GetObjectItemCaseSensitive(e, "to");
            int la, ha, lb, hb;
            if (!cJSON_IsString(kind) || kind->valuestring[0] != kinds[k] ||
                !cJSON_IsString(from) ||
                !cJSON_IsString(to) || sscanf(from->valuestring, "%d.%d", &la, &ha) != 2 ||
                sscanf(to->valuestring, "%d.%d", &lb, &hb) != 2)
                continue;
            if (la < 1 || la >= L || lb != la + 1 || ha < 1 || ha > H || hb < 1 || hb > H) continue;
            /* rows: (la, ha); columns: (lb, hb); only consecutive layers have a score */
            int64_t at = (int64_t)((la - 1) * H + ha - 1) * m.cols + (lb - 2) * H + hb - 1;
            m.v[at] = number(e, "score");
            found++;
        }
        char data[64], out[64], title[160];
        snprintf(data, sizeof data, "plots/composition_%c.dat", kinds[k]);
        snprintf(out, sizeof out, "composition_%c", kinds[k]);
        snprintf(title, sizeof title, "%c-composition: how much a head reads what one before wrote",
                 kinds[k] - 32);
        if (found) code = matrix_write(&m, dir, data, "composition scores (qkv circuits)");
        if (found && code == QKV_OK)
            code = draw_matrix(p, dir, data, &m, out, format, title, "later head (layer.head)",
                               "earlier head (layer.head)", "score", "sequential");
        matrix_free(&m);
    }
    return code;
}

/* ablate.json: the loss increase of each head removed, as a grid of layers by heads. */
static plot_status plot_ablate(plotter *p, const char *dir, const char *format, const cJSON *j) {
    const cJSON *heads = array_item(j, "heads");
    double base = number(cJSON_GetObjectItemCaseSensitive(j, "baseline"), "loss");
    if (!cJSON_IsArray(heads) || !isfinite(base))
        return not_like(dir, "ablate.json", "no baseline loss or heads");
    int L = 0, H = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, heads) {
        int l = whole(e, "layer"), h = whole(e, "head");
        if (l < 1 || h < 1 || l > QKV_MAX_LAYERS || h > QKV_MAX_HEADS)
            return not_like(dir, "ablate.json", "a head without its layer and head");
        L = l > L ? l : L, H = h > H ? h : H;
    }
    if (L == 0) return QKV_OK;
    matrix m;
    if (!matrix_new(&m, L, H)) {
        matrix_free(&m);
        return qkv_fail(QKV_ERR_NOMEM, "plot: out of memory");
    }
    for (int l = 0; l < L; l++) snprintf(m.row_label[l], LABEL_LEN, "layer_%d", l + 1);
    for (int h = 0; h < H; h++) snprintf(m.col_label[h], LABEL_LEN, "%d", h + 1);
    cJSON_ArrayForEach(e, heads)
        m.v[(int64_t)(whole(e, "layer") - 1) * H + whole(e, "head") - 1] = number(e, "loss") - base;
    plot_status code = matrix_write(&m, dir, "plots/ablate.dat",
                                    "ablation: loss increase (qkv ablate)");
    char title[160];
    snprintf(title, sizeof title,
             "ablation: loss increase with each head removed (baseline %.4g)", base);
    if (code == QKV_OK)
        code = draw_matrix(p, dir, "plots/ablate.dat", &m, "ablate", format, title, "head",
                           "layer", "loss increase", "diverging");
    matrix_free(&m);
    return code;
}

/* patch.json: the share recovered by patching each head (layer x head), or each head at each
 * position (head x position); the exact share where there is one, else the attribution. */
static plot_status plot_patch(plotter *p, const char *dir, const char *format, const cJSON *j) {
    const cJSON *results = array_item(j, "results");
    if (!cJSON_IsArray(results)) return not_like(dir, "patch.json", "no results");
    int L = 0, H = 0, T = 0;
    bool positions = false;
    const cJSON *e;
    cJSON_ArrayForEach(e, results) {
        int l = whole(e, "layer"), h = whole(e, "head"), t = whole(e, "position");
        if (l < 1 || h < 1 || l > QKV_MAX_LAYERS || h > QKV_MAX_HEADS || t >= QKV_MAX_SEQ_LEN)
            return not_like(dir, "patch.json", "a result without its layer and head");
        L = l > L ? l : L, H = h > H ? h : H;
        if (t >= 0) positions = true, T = t + 1 > T ? t + 1 : T;
    }
    if (L == 0) return QKV_OK;
    matrix m;
    if (!matrix_new(&m, positions ? L * H : L, positions ? T : H)) {
        matrix_free(&m);
        return qkv_fail(QKV_ERR_NOMEM, "plot: out of memory");
    }
    for (int i = 0; i < m.rows; i++)
        if (positions) snprintf(m.row_label[i], LABEL_LEN, "%d.%d", i / H + 1, i % H + 1);
        else snprintf(m.row_label[i], LABEL_LEN, "layer_%d", i + 1);
    for (int c = 0; c < m.cols; c++)
        snprintf(m.col_label[c], LABEL_LEN, "%d", positions ? c : c + 1);
    bool exact = false;
    cJSON_ArrayForEach(e, results) {
        int l = whole(e, "layer") - 1, h = whole(e, "head") - 1, t = whole(e, "position");
        double v = number(e, "exact");
        exact |= isfinite(v);
        if (!isfinite(v)) v = number(e, "attribution");
        if (positions && t < 0) continue;
        m.v[positions ? (int64_t)(l * H + h) * T + t : (int64_t)l * H + h] = v;
    }
    plot_status code = matrix_write(&m, dir, "plots/patch.dat",
                                    "activation patching: share recovered (qkv patch)");
    char title[160];
    snprintf(title, sizeof title, "patching: share of the clean-corrupt difference recovered%s",
             exact ? "" : " (attribution)");
    if (code == QKV_OK)
        code = draw_matrix(p, dir, "plots/patch.dat", &m, "patch", format, title,
                           positions ? "position" : "head", positions ? "layer.head" : "layer",
                           "share recovered", "diverging");
    matrix_free(&m);
    return code;
}

/* attribute.json: the logit's parts as bars (embedding path, each head, bias). */
static plot_status plot_attribute(plotter *p, const char *dir, const char *format, const cJSON *j) {
    const cJSON *parts = array_item(j, "parts");
    if (!cJSON_IsArray(parts)) return not_like(dir, "attribute.json", "no parts");
    char path[PLOT_PATH_LEN + 64];
    snprintf(path, sizeof path, "%s/plots/attribute.dat", dir);
    atomic_file af;
    qkv_status s = atomic_open(&af, path);
    if (s != QKV_OK) return s;
    fprintf(af.f, "# qkv direct logit attribution (qkv attribute): part value\n");
    const cJSON *e;
    cJSON_ArrayForEach(e, parts) {
        char label[LABEL_LEN];
        int l = whole(e, "layer"), h = whole(e, "head");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (l >= 1 && h >= 1) snprintf(label, sizeof label, "%d.%d", l, h);
        else clean_label(label, cJSON_IsString(name) ? name->valuestring : NULL);
        double v = number(e, "value");
        if (isfinite(v)) fprintf(af.f, "%s %.6g\n", label, v);
        else fprintf(af.f, "%s NaN\n", label);
    }
    if ((s = atomic_commit(&af)) != QKV_OK) return s;
    char title[160], image[64];
    double logit = number(j, "logit");
    snprintf(title, sizeof title, "direct logit attribution: the parts of the logit %.4g", logit);
    snprintf(image, sizeof image, "plots/attribute.%s", format);
    return plotter_run(p, dir, "bars.gp", image, format, 3,
                       (const char *[]){"plots/attribute.dat", title, "logit"});
}

plot_status plot_analysis(plotter *p, const char *dir, const char *format) {
    static const struct {
        const char *file;
        plot_status (*draw)(plotter *, const char *, const char *, const cJSON *);
    } files[] = {{"circuits.json", plot_circuits},
                 {"ablate.json", plot_ablate},
                 {"patch.json", plot_patch},
                 {"attribute.json", plot_attribute}};
    plot_status code = QKV_OK;
    for (size_t i = 0; i < sizeof files / sizeof files[0] && code == QKV_OK; i++) {
        qkv_status s;
        cJSON *j = plot_read_json(dir, files[i].file, &s);
        if (s != QKV_OK) return s;
        if (j) code = files[i].draw(p, dir, format, j);
        cJSON_Delete(j);
    }
    return code;
}
