/* page.c - `qkv plot DIR --format html`: one self-contained page, DIR/plots/attention.html,
 * from the files a run (or qkv inspect) wrote. The page is the template scripts/attention.html
 * with the data put in as one JSON object: no network, no file outside the page.
 *
 * What goes in: the final attention of every layer and head (attention/), dA and dS
 * (gradients/), the snapshots (snapshots/, at most HTML_MAX_FRAMES of them) and every column of
 * metrics.csv. Each map is a (Nq, Nk) matrix with its query and key labels, so a map of
 * cross-attention (Nq != Nk) is drawn as well as one of self-attention. */
#include "io/io.h"
#include "plot/plot.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HTML_MAX_FRAMES 60   /* snapshots beyond this are thinned evenly, first and last kept */
#define HTML_MAX_TOKENS 512  /* longer maps are left out of the page: it would not draw them */
#define HTML_MARKER "/*QKV_DATA*/null"

/* One map read back from a .dat file (the format of attention.gp). */
typedef struct {
    int nq, nk;
    char (*qlabel)[40], (*klabel)[40];
    float *w; /* (nq, nk) */
} dat_map;

static void dat_free(dat_map *m) {
    free(m->qlabel);
    free(m->klabel);
    free(m->w);
    memset(m, 0, sizeof *m);
}

/* Reads a .dat map: '#' comments, a header "query\key k1 k2 ...", then rows "q w w ...".
 * False (nothing kept) if the file is missing or not of that form. */
static bool dat_read(const char *path, dat_map *m) {
    memset(m, 0, sizeof *m);
    FILE *f;
    if (io_fopen_regular(path, &f) != QKV_OK) return false;
    char *line = NULL;
    size_t cap = 0;
    bool ok = true, header = false;
    int rows_cap = 0;
    while (ok && getline(&line, &cap, f) > 0) {
        if (line[0] == '#' || line[strspn(line, " \t\r\n")] == '\0') continue;
        char *save, *tok = strtok_r(line, " \t\r\n", &save);
        if (!header) {
            header = true;
            for (char *t; (t = strtok_r(NULL, " \t\r\n", &save));) {
                if (m->nk >= HTML_MAX_TOKENS) { ok = false; break; }
                char (*k)[40] = realloc(m->klabel, (size_t)(m->nk + 1) * sizeof *k);
                if (!k) { ok = false; break; }
                m->klabel = k;
                snprintf(m->klabel[m->nk++], 40, "%s", t);
            }
            ok = ok && m->nk > 0;
            continue;
        }
        if (m->nq >= HTML_MAX_TOKENS) { ok = false; break; }
        if (m->nq == rows_cap) {
            rows_cap = rows_cap ? 2 * rows_cap : 16;
            char (*q)[40] = realloc(m->qlabel, (size_t)rows_cap * sizeof *q);
            float *w = q ? realloc(m->w, (size_t)rows_cap * m->nk * sizeof *w) : NULL;
            if (q) m->qlabel = q;
            if (!w) { ok = false; break; }
            m->w = w;
        }
        snprintf(m->qlabel[m->nq], 40, "%s", tok ? tok : "");
        for (int j = 0; j < m->nk && ok; j++) {
            char *t = strtok_r(NULL, " \t\r\n", &save), *end;
            double v = t ? strtod(t, &end) : 0;
            ok = t && *end == '\0';
            if (ok) m->w[(size_t)m->nq * m->nk + j] = (float)v;
        }
        m->nq++;
    }
    free(line);
    fclose(f);
    if (!ok || !header || m->nq == 0) {
        dat_free(m);
        return false;
    }
    return true;
}

/* ---- JSON out ---- */

static void json_string(FILE *out, const char *s) {
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
        else if (c < 0x20 || c == '<' || c == '>' || c == '&') fprintf(out, "\\u%04x", c);
        else fputc(c, out); /* '<' escaped above: the data can never close the <script> */
    }
    fputc('"', out);
}

static void json_number(FILE *out, double v, int digits) {
    if (isfinite(v)) fprintf(out, "%.*g", digits, v);
    else fputs("null", out);
}

/* {"q":[labels],"k":[labels],"w":[[row],...]} */
static void json_map(FILE *out, const dat_map *m, int digits) {
    fputs("{\"q\":[", out);
    for (int i = 0; i < m->nq; i++) {
        if (i) fputc(',', out);
        json_string(out, m->qlabel[i]);
    }
    fputs("],\"k\":[", out);
    for (int j = 0; j < m->nk; j++) {
        if (j) fputc(',', out);
        json_string(out, m->klabel[j]);
    }
    fputs("],\"w\":[", out);
    for (int i = 0; i < m->nq; i++) {
        fputs(i ? ",[" : "[", out);
        for (int j = 0; j < m->nk; j++) {
            if (j) fputc(',', out);
            json_number(out, m->w[(size_t)i * m->nk + j], digits);
        }
        fputc(']', out);
    }
    fputs("]}", out);
}

/* [map of layer 1 head 1, ..., layer L head H] from dir/<pattern with %d %d>, or null when
 * any is missing. */
static void json_maps(FILE *out, const char *dir, const char *fmt, const plot_source *src,
                      int digits) {
    char rel[128], path[PLOT_PATH_LEN + 100];
    for (int pass = 0; pass < 2; pass++) { /* pass 0: are they all there? pass 1: write */
        for (int l = 1; l <= src->layers; l++)
            for (int h = 1; h <= src->heads; h++) {
                snprintf(rel, sizeof rel, fmt, l, h);
                snprintf(path, sizeof path, "%s/%s", dir, rel);
                dat_map m;
                if (!dat_read(path, &m)) {
                    if (pass == 0) {
                        fputs("null", out);
                        return;
                    }
                    fputs(l + h > 2 ? ",null" : "null", out); /* vanished meanwhile */
                    continue;
                }
                if (pass == 1) {
                    fputs(l + h > 2 ? "," : "[", out);
                    json_map(out, &m, digits);
                }
                dat_free(&m);
            }
    }
    fputc(']', out);
}

/* "snapshots":{"steps":[...],"maps":[[per head]...]} or null. */
static void json_snapshots(FILE *out, const char *dir, const plot_source *src) {
    char path[PLOT_PATH_LEN + 100];
    snprintf(path, sizeof path, "%s/snapshots", dir);
    int64_t *steps = NULL;
    int n = plot_snapshot_steps(path, &steps);
    if (n <= 0) { /* none, or out of memory: the page goes without snapshots */
        free(steps);
        fputs("null", out);
        return;
    }
    int frames = n < HTML_MAX_FRAMES ? n : HTML_MAX_FRAMES;
    fputs("{\"steps\":[", out);
    for (int f = 0; f < frames; f++) {
        int i = frames == 1 ? 0 : (int)((int64_t)f * (n - 1) / (frames - 1));
        fprintf(out, "%s%" PRId64, f ? "," : "", steps[i]);
    }
    fputs("],\"maps\":[", out);
    for (int f = 0; f < frames; f++) {
        int i = frames == 1 ? 0 : (int)((int64_t)f * (n - 1) / (frames - 1));
        char fmt[96];
        snprintf(fmt, sizeof fmt, "snapshots/step%" PRId64 "_layer%%d_head%%d.dat", steps[i]);
        if (f) fputc(',', out);
        json_maps(out, dir, fmt, src, 3);
    }
    fputs("]}", out);
    free(steps);
}

/* "metrics":{"columns":[names],"rows":[[numbers or null]...]} from metrics.csv, or null. */
static void json_metrics(FILE *out, const char *dir) {
    char path[PLOT_PATH_LEN + 100], line[4096];
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    FILE *f;
    if (io_fopen_regular(path, &f) != QKV_OK) {
        fputs("null", out);
        return;
    }
    if (!fgets(line, sizeof line, f)) {
        fclose(f);
        fputs("null", out);
        return;
    }
    fputs("{\"columns\":[", out);
    int ncols = 0;
    line[strcspn(line, "\r\n")] = '\0';
    for (char *p = line;; ncols++) {
        size_t len = strcspn(p, ",");
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(len < 63 ? len : 63), p);
        if (ncols) fputc(',', out);
        json_string(out, name);
        if (!p[len]) break;
        p += len + 1;
    }
    ncols++;
    fputs("],\"rows\":[", out);
    int rows = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!*line) continue;
        fputs(rows++ ? ",[" : "[", out);
        char *p = line;
        for (int c = 0; c < ncols; c++) {
            size_t len = strcspn(p, ",");
            char cell[64], *end;
            snprintf(cell, sizeof cell, "%.*s", (int)(len < 63 ? len : 63), p);
            double v = strtod(cell, &end);
            if (c) fputc(',', out);
            if (*cell && *end == '\0') json_number(out, v, 7);
            else fputs("null", out);
            p += len;
            if (*p) p++;
        }
        fputc(']', out);
    }
    fputs("]}", out);
    fclose(f);
}

/* The page's data, one JSON object. */
static void json_page(FILE *out, const char *dir, const plot_source *src) {
    fputs("{\"task\":", out);
    json_string(out, src->task);
    fprintf(out, ",\"layers\":%d,\"heads\":%d,\"causal\":%s,\"inspect\":%s,\n\"attention\":",
            src->layers, src->heads, src->causal ? "true" : "false", src->inspect ? "true" : "false");
    json_maps(out, dir, "attention/layer%d_head%d.dat", src, 4);
    fputs(",\n\"dA\":", out);
    json_maps(out, dir, "gradients/layer%d_head%d_dA.dat", src, 4);
    fputs(",\n\"dS\":", out);
    json_maps(out, dir, "gradients/layer%d_head%d_dS.dat", src, 4);
    fputs(",\n\"snapshots\":", out);
    json_snapshots(out, dir, src);
    fputs(",\n\"metrics\":", out);
    json_metrics(out, dir);
    fputs("}", out);
}

/* The whole of a small regular file, malloc'd and terminated; NULL (with the error set)
 * otherwise. */
static char *read_text(const char *path) {
    int fd;
    size_t size;
    if (io_open_regular(path, &fd, &size) != QKV_OK) {
        qkv_fail(QKV_ERR_IO, "plot: %s", qkv_last_error());
        return NULL;
    }
    char *text = size < (1u << 24) ? malloc(size + 1) : NULL;
    size_t got = 0;
    while (text && got < size) {
        ssize_t r = read(fd, text + got, size - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (!text || got != size) {
        free(text);
        qkv_fail(QKV_ERR_IO, "plot: cannot read %s", path);
        return NULL;
    }
    text[size] = '\0';
    return text;
}

plot_status plot_page(const char *dir, const plot_source *src, plot_made *made) {
    char scripts[PLOT_PATH_LEN], path[PLOT_PATH_LEN + 100], plots[PLOT_PATH_LEN];
    if (!plot_find_scripts(scripts, sizeof scripts))
        return qkv_fail(QKV_ERR_IO, "plot: cannot find qkv's scripts (attention.html); set "
                                    "QKV_SCRIPTS to qkv's scripts/ directory");
    snprintf(path, sizeof path, "%s/attention.html", scripts);
    char *page = read_text(path);
    if (!page) return QKV_ERR_IO;
    char *marker = strstr(page, HTML_MARKER);
    if (!marker) {
        free(page);
        return qkv_fail(QKV_ERR_FORMAT, "plot: %s has no data marker %s", path, HTML_MARKER);
    }
    /* Every head's final map must be there and readable: the page is built around them. */
    for (int l = 1; l <= src->layers; l++)
        for (int h = 1; h <= src->heads; h++) {
            snprintf(path, sizeof path, "%s/attention/layer%d_head%d.dat", dir, l, h);
            struct stat sb;
            dat_map m;
            if (stat(path, &sb) != 0) {
                free(page);
                return qkv_fail(QKV_ERR_IO, "plot: %s is missing (was it written by qkv train "
                                            "--out?)", path);
            }
            if (!dat_read(path, &m)) {
                free(page);
                return qkv_fail(QKV_ERR_FORMAT, "plot: %s is not a map of qkv (or has more than "
                                "%d tokens, too many for the page)", path, HTML_MAX_TOKENS);
            }
            dat_free(&m);
        }
    qkv_status s = io_make_subdir(dir, "plots", plots, sizeof plots);
    atomic_file af;
    snprintf(path, sizeof path, "%s/attention.html", plots);
    if (s == QKV_OK) s = atomic_open(&af, path);
    if (s != QKV_OK) {
        free(page);
        return qkv_fail(s, "plot: %s", qkv_last_error());
    }
    fwrite(page, 1, (size_t)(marker - page), af.f);
    json_page(af.f, dir, src);
    fputs(marker + strlen(HTML_MARKER), af.f);
    free(page);
    if ((s = atomic_commit(&af)) != QKV_OK) return qkv_fail(s, "plot: %s", qkv_last_error());
    made->page = true;
    snprintf(made->path, sizeof made->path, "%s", path);
    return QKV_OK;
}
