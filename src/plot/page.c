/* page.c - `qkv plot DIR --format html`: one self-contained page, DIR/plots/attention.html,
 * from the files a run (or qkv inspect) wrote. The page is the template scripts/attention.html
 * with the data put in as one JSON object: no network, no file outside the page.
 *
 * What goes in: the final attention of every layer and head (attention/), dA and dS
 * (gradients/), the snapshots (snapshots/, at most HTML_MAX_FRAMES of them) and every column of
 * metrics.csv. Each map is a (Nq, Nk) matrix with its query and key labels, so a map of
 * cross-attention (Nq != Nk) is drawn as well as one of self-attention. Which queries and
 * keys are padding (dat_padding) goes with them, and so do the files of the analysis commands
 * (ablate.json, patch.json, attribute.json, circuits.json, lens.json), as they are but for the
 * positional part of the QK circuits, which the page does not draw. A modular run's page adds
 * its grokking views (grokking.c's object, drawn by scripts/grokking.js, which goes into the
 * template at its marker). */
#include "engine/engine.h"
#include "io/io.h"
#include "plot/plot.h"

#include <cjson/cJSON.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HTML_MAX_FRAMES 60   /* snapshots beyond this are thinned evenly, first and last kept */
#define HTML_MARKER "/*QKV_DATA*/null"
#define GROK_MARKER "/*QKV_GROKKING*/" /* where scripts/grokking.js goes */
#define HTML_MAX_VOCAB 256 /* larger circuits stay out of the page (qkv plot draws them) */
#define HTML_MAX_CIRCUIT_CELLS (1 << 20) /* and so do all circuits beyond this many numbers */
#define HTML_DIGITS 4 /* significant digits of the analysis numbers in the page */

/* The analysis files the page shows when the directory holds them, as the page names them. */
static const char *const ANALYSES[] = {"ablate", "patch", "attribute", "circuits", "lens"};
#define N_ANALYSES (sizeof ANALYSES / sizeof ANALYSES[0])

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
    char path[PLOT_PATH_LEN + 100], *line = NULL; /* a whole line, however long (8 layers x
                                                   * 64 heads of head columns are over 100 KB) */
    size_t cap = 0;
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    FILE *f;
    if (io_fopen_regular(path, &f) != QKV_OK) {
        fputs("null", out);
        return;
    }
    if (getline(&line, &cap, f) < 0) {
        free(line);
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
    while (getline(&line, &cap, f) >= 0) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!*line) continue;
        fputs(rows++ ? ",[" : "[", out);
        char *p = line;
        for (int c = 0; c < ncols; c++) {
            size_t len = strcspn(p, ",");
            char cell[64];
            snprintf(cell, sizeof cell, "%.*s", (int)(len < 63 ? len : 63), p);
            double v;
            if (c) fputc(',', out);
            if (len < 63 && number_real(cell, &v) == NUMBER_OK) json_number(out, v, 7);
            else fputs("null", out);
            p += len;
            if (*p) p++;
        }
        fputc(']', out);
    }
    fputs("]}", out);
    free(line);
    fclose(f);
}

/* Every number of j rounded to HTML_DIGITS significant digits: the page draws colours and
 * shows 3 digits, and a circuit of 128 tokens per head would otherwise be megabytes. */
static void round_numbers(cJSON *j) {
    double v = j->valuedouble;
    if (cJSON_IsNumber(j) && isfinite(v) && v != floor(v)) { /* counts and indices stay */
        char text[32];
        snprintf(text, sizeof text, "%.*g", HTML_DIGITS, v);
        cJSON_SetNumberValue(j, strtod(text, NULL));
    }
    for (cJSON *c = j->child; c; c = c->next) round_numbers(c);
}

/* A parsed JSON value written so that it can stand inside <script>: '<', '>' and '&', which
 * JSON has only inside strings, become \u escapes, so no token string can close the script. */
static void json_safe(FILE *out, const cJSON *j) {
    char *text = cJSON_PrintUnformatted(j);
    if (!text) {
        fputs("null", out);
        return;
    }
    for (const char *p = text; *p; p++)
        if (*p == '<' || *p == '>' || *p == '&') fprintf(out, "\\u%04x", (unsigned)*p);
        else fputc(*p, out);
    free(text);
}

/* Reads DIR/<name>.json of each analysis into j[] (NULL where there is none), each checked
 * as qkv plot checks it (plot_read_analysis): a bad one is QKV_ERR_FORMAT, naming it. None
 * for a file of qkv inspect (no run's model to check them against; the page shows none). */
static qkv_status read_analyses(const char *dir, const plot_source *src, cJSON *j[N_ANALYSES]) {
    for (size_t i = 0; i < N_ANALYSES; i++) j[i] = NULL;
    if (src->inspect) return QKV_OK;
    for (size_t i = 0; i < N_ANALYSES; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s.json", ANALYSES[i]);
        qkv_status s = plot_read_analysis(dir, name, src, &j[i]);
        if (s != QKV_OK) return s;
        if (!j[i]) continue;
        round_numbers(j[i]);
        if (i != 3) continue;
        /* the circuits: the positional part is left out; a vocabulary too large to draw, or
         * too many numbers in all, keeps only the scores */
        int64_t V = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j[i], "vocab"));
        int64_t R = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j[i], "query_labels"));
        int64_t heads = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j[i], "heads"));
        bool big = V > HTML_MAX_VOCAB || heads * (R + V) * V > HTML_MAX_CIRCUIT_CELLS;
        cJSON *head;
        cJSON_ArrayForEach(head, cJSON_GetObjectItemCaseSensitive(j[i], "heads")) {
            cJSON_DeleteItemFromObjectCaseSensitive(head, "qk_pos");
            if (big) {
                cJSON_DeleteItemFromObjectCaseSensitive(head, "qk");
                cJSON_DeleteItemFromObjectCaseSensitive(head, "ov");
            }
        }
        if (big) cJSON_AddNumberToObject(j[i], "too_large", HTML_MAX_VOCAB);
        if (big) cJSON_AddNumberToObject(j[i], "too_many_cells", HTML_MAX_CIRCUIT_CELLS);
    }
    return QKV_OK;
}

/* "padding":{"q":[bool per query],"k":[bool per key]}, or null when none is padding. */
static void json_padding(FILE *out, const char *dir, const plot_source *src) {
    dat_pad pad;
    if (!dat_padding(dir, src, &pad) || !pad.any) {
        dat_pad_free(&pad);
        fputs("null", out);
        return;
    }
    fputs("{\"q\":[", out);
    for (int i = 0; i < pad.nq; i++) fprintf(out, "%s%d", i ? "," : "", pad.query[i]);
    fputs("],\"k\":[", out);
    for (int j = 0; j < pad.nk; j++) fprintf(out, "%s%d", j ? "," : "", pad.key[j]);
    fputs("]}", out);
    dat_pad_free(&pad);
}

/* The page's data, one JSON object. */
static void json_page(FILE *out, const char *dir, const plot_source *src,
                      cJSON *const analyses[N_ANALYSES], const grok_data *grok) {
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
    fputs(",\n\"padding\":", out);
    json_padding(out, dir, src);
    for (size_t i = 0; i < N_ANALYSES; i++) {
        fprintf(out, ",\n\"%s\":", ANALYSES[i]);
        if (analyses[i] && !src->inspect) json_safe(out, analyses[i]);
        else fputs("null", out);
    }
    fputs(",\n\"grokking\":", out); /* a modular run's views (grokking.c, scripts/grokking.js) */
    if (grok) grok_json(out, grok);
    else fputs("null", out);
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
            dat_map m;
            int fd;
            size_t size;
            if (io_absent(path)) {
                free(page);
                return qkv_fail(QKV_ERR_IO, "plot: %s is missing (was it written by qkv train "
                                            "--out?)", path);
            }
            if (io_open_regular(path, &fd, &size) != QKV_OK) { /* there, but not readable */
                free(page);
                return qkv_fail(QKV_ERR_IO, "plot: %s", qkv_last_error());
            }
            close(fd);
            if (!dat_read(path, &m)) {
                free(page);
                return qkv_fail(QKV_ERR_FORMAT, "plot: %s is not a map of qkv (or has more than "
                                "%d tokens, too many for the page)", path, DAT_MAX_TOKENS);
            }
            dat_free(&m);
        }
    qkv_status s = plot_check_optional(dir, src);
    if (s != QKV_OK) {
        free(page);
        return s;
    }
    cJSON *analyses[N_ANALYSES];
    s = read_analyses(dir, src, analyses);
    if (s != QKV_OK) {
        for (size_t i = 0; i < N_ANALYSES; i++) cJSON_Delete(analyses[i]);
        free(page);
        return s;
    }
    /* a modular run's views: their script, and their data measured before anything is written */
    grok_data grok = {0};
    bool modular = !src->inspect && !strcmp(src->task, "modular");
    snprintf(path, sizeof path, "%s/grokking.js", scripts);
    char *grok_script = read_text(path);
    s = grok_script ? QKV_OK : QKV_ERR_IO;
    char *grok_marker = s == QKV_OK ? strstr(marker, GROK_MARKER) : NULL;
    if (s == QKV_OK && !grok_marker)
        s = qkv_fail(QKV_ERR_FORMAT, "plot: %s/attention.html has no marker %s", scripts, GROK_MARKER);
    if (s == QKV_OK && modular) s = grok_load(dir, &grok);
    if (s != QKV_OK) {
        for (size_t i = 0; i < N_ANALYSES; i++) cJSON_Delete(analyses[i]);
        free(grok_script);
        free(page);
        return s;
    }
    s = io_make_subdir(dir, "plots", plots, sizeof plots);
    atomic_file af;
    snprintf(path, sizeof path, "%s/attention.html", plots);
    if (s == QKV_OK) s = atomic_open(&af, path);
    if (s != QKV_OK) {
        for (size_t i = 0; i < N_ANALYSES; i++) cJSON_Delete(analyses[i]);
        free(grok_script);
        grok_free(&grok);
        free(page);
        return qkv_fail(s, "plot: %s", qkv_last_error());
    }
    fwrite(page, 1, (size_t)(marker - page), af.f);
    json_page(af.f, dir, src, analyses, modular ? &grok : NULL);
    for (size_t i = 0; i < N_ANALYSES; i++) cJSON_Delete(analyses[i]);
    grok_free(&grok);
    const char *rest = marker + strlen(HTML_MARKER);
    fwrite(rest, 1, (size_t)(grok_marker - rest), af.f);
    fputs(grok_script, af.f);
    fputs(grok_marker + strlen(GROK_MARKER), af.f);
    free(grok_script);
    free(page);
    if ((s = atomic_commit(&af)) != QKV_OK) return qkv_fail(s, "plot: %s", qkv_last_error());
    made->page = true;
    snprintf(made->path, sizeof made->path, "%s", path);
    return QKV_OK;
}
