/* plots.c - `qkv plot`'s pictures of a directory: which images a training directory's files
 * make (its model's metadata says the task and the grid), or a file of qkv inspect --out
 * turned into a run's map files first. qkv writes the data (attention/, gradients/,
 * snapshots/, metrics.csv); gnuplot only reads it (gnuplot.c), so the plots can be redrawn,
 * restyled or made by hand from the same files. */
#include "engine/engine.h"
#include "io/io.h"
#include "plot/plot.h"
#include "train/trainer.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FRAMES 40 /* snapshots beyond this are thinned out evenly: a GIF stays small */
#define HOLD_FRAMES 6 /* the last frame is repeated so that the final pattern can be seen */

/* ---- what a training directory holds ---- */

/* False, with the error set, unless `path` is a readable file: "missing" only when nothing is
 * there (io_absent), else why it cannot be read. */
static bool need_file(const char *path) {
    int fd;
    size_t size;
    if (io_absent(path)) {
        qkv_fail(QKV_ERR_IO, "plot: %s is missing (was it written by qkv train --out?)", path);
        return false;
    }
    if (io_open_regular(path, &fd, &size) != QKV_OK) {
        qkv_fail(QKV_ERR_IO, "plot: %s", qkv_last_error());
        return false;
    }
    close(fd);
    return true;
}

/* QKV_OK when nothing is at `path` (io_absent) or a regular file that opens is; else
 * QKV_ERR_IO saying why it cannot be read. */
static qkv_status readable_if_there(const char *path) {
    int fd;
    size_t size;
    if (io_absent(path)) return QKV_OK;
    if (io_open_regular(path, &fd, &size) != QKV_OK)
        return qkv_fail(QKV_ERR_IO, "plot: %s", qkv_last_error());
    close(fd);
    return QKV_OK;
}

qkv_status plot_check_optional(const char *dir, const plot_source *src) {
    char path[PLOT_PATH_LEN + 100];
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    qkv_status s = readable_if_there(path);
    for (int l = 1; l <= src->layers; l++)
        for (int h = 1; h <= src->heads; h++)
            for (int k = 0; k < 2 && s == QKV_OK; k++) {
                snprintf(path, sizeof path, "%s/gradients/layer%d_head%d_%s.dat", dir, l, h,
                         k ? "dS" : "dA");
                s = readable_if_there(path);
            }
    return s;
}

/* Counts the data rows of metrics.csv (lines after the header). */
static int metrics_rows(const char *path) {
    FILE *f = NULL;
    if (io_fopen_regular(path, &f) != QKV_OK) return 0;
    int lines = 0, c, last = '\n';
    while ((c = fgetc(f)) != EOF) {
        if (c == '\n') lines++;
        last = c;
    }
    fclose(f);
    return lines + (last != '\n') - 1;
}

/* Whether the header line of metrics.csv names column `name`. */
static bool metrics_has_column(const char *path, const char *name) {
    FILE *f = NULL;
    if (io_fopen_regular(path, &f) != QKV_OK) return false;
    static char line[1 << 20]; /* up to 8 layers x 64 heads x 3 scores, as train writes them */
    bool found = false;
    if (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        for (char *p = line; p && !found; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
            found = !strncmp(p, name, strlen(name)) && (p[strlen(name)] == ',' || !p[strlen(name)]);
    }
    fclose(f);
    return found;
}

/* A whole number of a model's metadata (number_int's syntax) in 1..hi, or 0: missing, not a
 * whole number ("1.5", "+2", " 3") or out of range, which the callers refuse. */
static int meta_int(const char *text, int64_t hi) {
    int64_t v;
    return text && number_int(text, 1, hi, &v) == NUMBER_OK ? (int)v : 0;
}

/* The first dim of tensor `name` of st (a model's embedding: its rows), 0 if it is not there. */
static int rows_of(const qkv_st *st, const char *name) {
    int64_t shape[QKV_MAX_DIMS];
    int nd;
    return qkv_st_info(st, name, NULL, &nd, shape) && nd == 2 && shape[0] > 0 &&
                   shape[0] <= QKV_MAX_SEQ_LEN + (int64_t)QKV_MAX_VOCAB
               ? (int)shape[0]
               : 0;
}

/* Reads task, layers and heads from the model's metadata, and its sizes from its embeddings'
 * shapes (the vocabulary, the positions, an encoder-decoder's decoder positions). */
static plot_status read_model(const char *dir, char *task, size_t len, int *layers, int *heads,
                              bool *causal, bool *cross, double *chance_acc, double *chance_loss,
                              int *vocab, int *seq_len, int *queries) {
    char path[PLOT_PATH_LEN];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (!need_file(path)) return QKV_ERR_IO;
    qkv_st *st;
    qkv_status s = st_load_as(path, ST_MODEL_FILE, &st);
    if (s != QKV_OK) return qkv_fail(s, "plot: %s", qkv_last_error());
    const char *t = qkv_st_meta(st, "task"), *l = qkv_st_meta(st, "layers"),
               *h = qkv_st_meta(st, "heads");
    *layers = meta_int(l, QKV_MAX_LAYERS);
    *heads = meta_int(h, QKV_MAX_HEADS);
    const char *c = qkv_st_meta(st, "causal");
    *causal = c && !strcmp(c, "true");
    /* Chance: a uniform guess over the classes a target can take (qkv_task_chance), and the
     * loss of uniform logits over the vocabulary. */
    const char *v = qkv_st_meta(st, "vocab"), *n = qkv_st_meta(st, "seq_len");
    qkv_task chance_task;
    if (t && v && n &&
        qkv_task_init(&chance_task, t, meta_int(n, QKV_MAX_SEQ_LEN),
                      meta_int(v, QKV_MAX_VOCAB)) == QKV_OK) {
        *chance_acc = qkv_task_chance(&chance_task);
        *chance_loss = log((double)chance_task.vocab);
    }
    bool ok = t && *layers >= 1 && *layers <= QKV_MAX_LAYERS && *heads >= 1 &&
              *heads <= QKV_MAX_HEADS;
    if (ok) snprintf(task, len, "%s", t);
    *cross = qkv_st_info(st, "dec_pos_emb", NULL, NULL, NULL); /* an encoder-decoder's */
    *vocab = rows_of(st, "tok_emb");
    *seq_len = rows_of(st, "pos_emb");
    *queries = *cross ? rows_of(st, "dec_pos_emb") : *seq_len;
    ok = ok && *vocab > 0 && *seq_len > 0 && *queries > 0;
    qkv_st_free(st);
    if (!ok)
        return qkv_fail(QKV_ERR_FORMAT, "plot: %s: not a qkv model (task, layers, heads or "
                                        "embeddings missing)", path);
    return QKV_OK;
}

/* ---- a file of qkv inspect --out, drawn as a run is ---- */

/* Writes one (Tq, T) map of head h of `x` (H, Tq, T) as a gnuplot matrix (the format of a
 * run's attention/ files) to dir/rel: rows are the queries, columns the keys. */
static plot_status write_inspect_map(const char *dir, const char *rel, const qkv_tensor *x,
                                     int h, const char *what, char (*qlabels)[40],
                                     char (*labels)[40]) {
    char path[PLOT_PATH_LEN + 64];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    int Tq = (int)x->shape[1], T = (int)x->shape[2];
    atomic_file af;
    qkv_status s = atomic_open(&af, path);
    if (s != QKV_OK) return qkv_fail(s, "plot: %s", qkv_last_error());
    fprintf(af.f, "# qkv inspect: %s; rows are queries, columns keys\nquery\\key", what);
    for (int j = 0; j < T; j++) fprintf(af.f, " %s", labels[j]);
    fputc('\n', af.f);
    const float *m = (const float *)x->data + (size_t)h * Tq * T;
    for (int i = 0; i < Tq; i++) {
        fprintf(af.f, "%s", qlabels[i]);
        for (int j = 0; j < T; j++) fprintf(af.f, " %.6g", m[(size_t)i * T + j]);
        fputc('\n', af.f);
    }
    if ((s = atomic_commit(&af)) != QKV_OK) return qkv_fail(s, "plot: %s", qkv_last_error());
    return QKV_OK;
}

/* Splits `text`, space-separated labels, into n labels. A label that is not what qkv writes
 * (printable ASCII without the quotes and '#' that gnuplot reads as syntax, as dataset_label
 * makes them) becomes its position. */
static void split_labels(const char *text, char (*labels)[40], int n) {
    const char *p = text ? text : "";
    for (int i = 0; i < n; i++) {
        size_t len = strcspn(p, " ");
        bool good = len > 0 && len < sizeof labels[i];
        for (size_t k = 0; good && k < len; k++) {
            unsigned char c = (unsigned char)p[k];
            good = c > ' ' && c < 127 && c != '#' && c != '"' && c != '\'';
        }
        if (good) snprintf(labels[i], sizeof labels[i], "%.*s", (int)len, p);
        else snprintf(labels[i], sizeof labels[i], "%d", i);
        p += len;
        p += strspn(p, " ");
    }
}

/* FILE (format qkv-inspect) -> the directory FILE without .safetensors (or FILE.d) holding
 * attention/ and, when the file has a target, gradients/, as a run directory does; the plots
 * then go to its plots/. */
static plot_status plot_inspect_file(const char *file, char *dir, size_t len, plot_source *src) {
    qkv_st *st;
    qkv_status s = st_load_as(file, "a file of qkv inspect --out (nor a directory of qkv train)", &st);
    if (s != QKV_OK) return qkv_fail(s, "plot: %s", qkv_last_error());
    const char *fmt = qkv_st_meta(st, "format"), *task = qkv_st_meta(st, "task");
    const char *l = qkv_st_meta(st, "layers"), *h = qkv_st_meta(st, "heads");
    const char *t = qkv_st_meta(st, "seq_len"), *lab = qkv_st_meta(st, "labels");
    const char *causal = qkv_st_meta(st, "causal"), *q = qkv_st_meta(st, "queries");
    const char *qlab = qkv_st_meta(st, "query_labels");
    /* T keys, Tq queries: Tq = T in self-attention (and in files of before cross-attention) */
    int L = meta_int(l, QKV_MAX_LAYERS), H = meta_int(h, QKV_MAX_HEADS),
        T = meta_int(t, QKV_MAX_TASK_SEQ_LEN), Tq = q ? meta_int(q, QKV_MAX_TASK_SEQ_LEN) : T;
    bool ok = fmt && !strcmp(fmt, "qkv-inspect") && task && strlen(task) < sizeof src->task &&
              L >= 1 && L <= QKV_MAX_LAYERS && H >= 1 && H <= QKV_MAX_HEADS && T >= 1 &&
              T <= QKV_MAX_TASK_SEQ_LEN && Tq >= 1 && Tq <= QKV_MAX_TASK_SEQ_LEN;
    for (int i = 1; ok && i <= L; i++) {
        char name[32];
        int64_t shape[QKV_MAX_DIMS];
        int nd;
        snprintf(name, sizeof name, "layer%d.weights", i);
        ok = qkv_st_info(st, name, NULL, &nd, shape) && nd == 3 && shape[0] == H &&
             shape[1] == Tq && shape[2] == T;
    }
    if (!ok) {
        qkv_st_free(st);
        return qkv_fail(QKV_ERR_FORMAT, "plot: %s is neither a directory of qkv train nor a file "
                                        "of qkv inspect --out", file);
    }
    snprintf(src->task, sizeof src->task, "%s", task);
    src->layers = L, src->heads = H, src->causal = causal && !strcmp(causal, "true");
    src->inspect = true;
    /* The labels of the keys and of the queries: "position:token" words, checked (they
     * become gnuplot data); positions only if they are not what qkv inspect wrote. */
    char (*labels)[40] = calloc((size_t)T, sizeof *labels);
    char (*qlabels)[40] = calloc((size_t)Tq, sizeof *qlabels);
    qkv_ctx *ctx = qkv_ctx_new(0);
    if (!labels || !qlabels || !ctx) {
        free(labels);
        free(qlabels);
        qkv_ctx_free(ctx);
        qkv_st_free(st);
        return qkv_fail(QKV_ERR_NOMEM, "plot: out of memory");
    }
    split_labels(lab, labels, T);
    if (qlab) split_labels(qlab, qlabels, Tq);
    else memcpy(qlabels, labels, (size_t)(Tq < T ? Tq : T) * sizeof *labels);
    size_t flen = strlen(file), suffix = strlen(".safetensors");
    if (flen > suffix && !strcmp(file + flen - suffix, ".safetensors"))
        snprintf(dir, len, "%.*s", (int)(flen - suffix), file);
    else
        snprintf(dir, len, "%s.d", file);
    char sub[PLOT_PATH_LEN + 64];
    plot_status code = io_make_dirs(dir);
    bool grads = qkv_st_info(st, "layer1.dA", NULL, NULL, NULL);
    if (code == QKV_OK && (s = io_make_subdir(dir, "attention", sub, sizeof sub)) != QKV_OK)
        code = s;
    if (code == QKV_OK && grads && (s = io_make_subdir(dir, "gradients", sub, sizeof sub)) != QKV_OK)
        code = s;
    if (code != QKV_OK) qkv_fail(code, "plot: %s", qkv_last_error());
    qkv_tensor *x = qkv_zeros(ctx, QKV_F32, 3, (int64_t[]){H, Tq, T});
    const char *kinds[3] = {"weights", "dA", "dS"};
    for (int li = 1; li <= L && code == QKV_OK; li++)
        for (int k = 0; k < (grads ? 3 : 1) && code == QKV_OK; k++) {
            char name[32];
            snprintf(name, sizeof name, "layer%d.%s", li, kinds[k]);
            if ((s = qkv_st_read(st, name, x)) != QKV_OK) {
                code = qkv_fail(s, "plot: %s", qkv_last_error());
                break;
            }
            for (int hi = 1; hi <= H && code == QKV_OK; hi++) {
                char rel[64], what[96];
                if (k == 0) snprintf(rel, sizeof rel, "attention/layer%d_head%d.dat", li, hi);
                else snprintf(rel, sizeof rel, "gradients/layer%d_head%d_%s.dat", li, hi, kinds[k]);
                snprintf(what, sizeof what, "%s of layer %d, head %d", k ? kinds[k] : "attention",
                         li, hi);
                code = write_inspect_map(dir, rel, x, hi - 1, what, qlabels, labels);
            }
        }
    for (int li = 1; !grads && li <= L && code == QKV_OK; li++) /* none from an earlier file */
        for (int hi = 1; hi <= H; hi++)
            for (int k = 1; k < 3; k++) {
                snprintf(sub, sizeof sub, "%s/gradients/layer%d_head%d_%s.dat", dir, li, hi, kinds[k]);
                unlink(sub);
            }
    free(labels);
    free(qlabels);
    qkv_ctx_free(ctx);
    qkv_st_free(st);
    return code;
}

/* The TOKENS argument of the map scripts (attention.gp, overview.gp, grads.gp, snapshots.gp):
 * "LONGEST KEYS QUERIES", the length of the longest label of the final maps, then one flag
 * per key and per query, 1 for padding ("-" when none is). Malloc'd; NULL when out of memory. */
static char *tokens_arg(const char *dir, const plot_source *src) {
    char path[PLOT_PATH_LEN + 64];
    snprintf(path, sizeof path, "%s/attention/layer1_head1.dat", dir);
    dat_map m;
    size_t longest = 0;
    if (dat_read(path, &m)) {
        for (int i = 0; i < m.nq; i++) longest = strlen(m.qlabel[i]) > longest ? strlen(m.qlabel[i]) : longest;
        for (int j = 0; j < m.nk; j++) longest = strlen(m.klabel[j]) > longest ? strlen(m.klabel[j]) : longest;
        dat_free(&m);
    }
    dat_pad pad;
    bool any = dat_padding(dir, src, &pad) && pad.any;
    char *arg = malloc((size_t)pad.nq + pad.nk + 32);
    if (arg) {
        int n = sprintf(arg, "%zu ", longest);
        if (!any) {
            strcpy(arg + n, "- -");
        } else {
            for (int j = 0; j < pad.nk; j++) arg[n++] = pad.key[j] ? '1' : '0';
            arg[n++] = ' ';
            for (int i = 0; i < pad.nq; i++) arg[n++] = pad.query[i] ? '1' : '0';
            arg[n] = '\0';
        }
    }
    dat_pad_free(&pad);
    return arg;
}

/* plot_maps's images of the maps, with TOKENS (tokens_arg) for each map script. */
static plot_status plot_maps_drawn(plotter *p, const char *dir, const plot_source *src,
                                   const char *format, const char *tokens) {
    const char *task = src->task;
    int L = src->layers, H = src->heads;
    plot_status code = QKV_OK;
    const char *causal = src->causal ? "1" : "0";
    const char *subject = src->inspect ? "the input of qkv inspect" : "the held-out example";
    /* Names relative to dir for gnuplot (plotter_run), full paths for the checks here. */
    char full[PLOT_PATH_LEN + 64];
    char out[64], a[64], da[64], ds[64], title[160];
#define NEED(rel) (snprintf(full, sizeof full, "%s/%s", dir, rel), need_file(full))

    /* One heatmap per layer and head, and the overview of them all. */
    for (int l = 1; l <= L && code == QKV_OK; l++)
        for (int h = 1; h <= H && code == QKV_OK; h++) {
            snprintf(a, sizeof a, "attention/layer%d_head%d.dat", l, h);
            if (!NEED(a)) return QKV_ERR_IO;
            snprintf(out, sizeof out, "plots/attention_layer%d_head%d.%s", l, h, format);
            snprintf(title, sizeof title, "%s: attention of layer %d, head %d", task, l, h);
            code = plotter_run(p, dir, "attention.gp", out, format, 4,
                               (const char *[]){a, title, causal, tokens});
        }
    if (code != QKV_OK) return code;
    char nl[16], nh[16];
    snprintf(nl, sizeof nl, "%d", L);
    snprintf(nh, sizeof nh, "%d", H);
    snprintf(out, sizeof out, "plots/overview.%s", format);
    code = plotter_run(p, dir, "overview.gp", out, format, 7,
                       (const char *[]){"attention", task, nl, nh, causal, subject, tokens});
    if (code != QKV_OK) return code;

    /* Loss and accuracy curves, when there is at least one row of metrics; below them the
     * head scores of every layer and head, when metrics.csv has them (runs of qkv 0.2 on;
     * an encoder-decoder's cross-attention has none), and the ideal-pattern mass by layer
     * when the task defines an ideal pattern. */
    snprintf(full, sizeof full, "%s/metrics.csv", dir);
    if (metrics_rows(full) >= 1) {
        snprintf(out, sizeof out, "plots/curves.%s", format);
        char acc[32], loss[32], mass[4];
        snprintf(acc, sizeof acc, "%.6g", src->chance_acc);
        snprintf(loss, sizeof loss, "%.6g", src->chance_loss);
        bool scores = !src->cross && metrics_has_column(full, "prev_l1h1");
        char scored_heads[16]; /* train scores the first EVAL_MAX_HEADS heads of a layer */
        snprintf(scored_heads, sizeof scored_heads, "%d", H < EVAL_MAX_HEADS ? H : EVAL_MAX_HEADS);
        snprintf(mass, sizeof mass, "%d", scores && strcmp(task, "data") &&
                                              metrics_has_column(full, "mass_l1"));
        code = plotter_run(p, dir, "curves.gp", out, format, 7,
                           (const char *[]){"metrics.csv", task, acc, loss, scores ? nl : "0",
                                           scores ? scored_heads : "0", mass});
        if (code != QKV_OK) return code;
    }

    /* Gradients: A, dA and dS side by side, per layer and head. */
    for (int l = 1; l <= L && code == QKV_OK; l++)
        for (int h = 1; h <= H && code == QKV_OK; h++) {
            snprintf(da, sizeof da, "gradients/layer%d_head%d_dA.dat", l, h);
            snprintf(ds, sizeof ds, "gradients/layer%d_head%d_dS.dat", l, h);
            char full_ds[PLOT_PATH_LEN + 64];
            snprintf(full, sizeof full, "%s/%s", dir, da);
            snprintf(full_ds, sizeof full_ds, "%s/%s", dir, ds);
            if (io_absent(full) && io_absent(full_ds))
                continue; /* a directory from an older qkv */
            if (!NEED(da) || !NEED(ds)) return QKV_ERR_IO;
            snprintf(a, sizeof a, "attention/layer%d_head%d.dat", l, h);
            snprintf(out, sizeof out, "plots/grads_layer%d_head%d.%s", l, h, format);
            snprintf(title, sizeof title, "%s: layer %d, head %d", task, l, h);
            code = plotter_run(p, dir, "grads.gp", out, format, 7,
                               (const char *[]){a, da, ds, title, causal, subject, tokens});
        }
    if (code != QKV_OK) return code;
#undef NEED

    /* The snapshots as an animated GIF: at most MAX_FRAMES evenly spaced steps, the first and
     * the last always among them, the last held for HOLD_FRAMES more frames. */
    char snap_dir[PLOT_PATH_LEN + 16];
    snprintf(snap_dir, sizeof snap_dir, "%s/snapshots", dir);
    int64_t *steps;
    int n = plot_snapshot_steps(snap_dir, &steps);
    if (n < 0) return qkv_fail(QKV_ERR_NOMEM, "plot: out of memory");
    if (n > 0) {
        /* fewer frames for bigger grids: each frame draws every head */
        int max_frames = L * H <= 4 ? MAX_FRAMES : L * H <= 16 ? MAX_FRAMES / 2 : MAX_FRAMES / 4;
        int frames = n < max_frames ? n : max_frames;
        size_t len = (size_t)(frames + HOLD_FRAMES) * 24 + 1;
        char *list = malloc(len);
        if (!list) {
            free(steps);
            return qkv_fail(QKV_ERR_NOMEM, "plot: out of memory");
        }
        size_t used = 0;
        for (int f = 0; f < frames + HOLD_FRAMES; f++) {
            int i = f >= frames ? n - 1 : frames == 1 ? 0 : (int)((int64_t)f * (n - 1) / (frames - 1));
            used += (size_t)snprintf(list + used, len - used, "%s%" PRId64, f ? " " : "", steps[i]);
        }
        code = plotter_run(p, dir, "snapshots.gp", "plots/snapshots.gif", "gif", 7,
                           (const char *[]){"snapshots", task, nl, nh, list, causal, tokens});
        free(list);
    }
    free(steps);
    return code;
}

/* Draws the maps of `dir` (attention/, gradients/, snapshots/, metrics.csv: a run directory,
 * or what plot_inspect_file wrote) into dir/plots/ with gnuplot. */
static plot_status plot_maps(const char *dir, const plot_source *src, const char *format,
                             plot_made *made) {
    /* the analysis files are checked before anything is drawn: a bad one, nothing written */
    struct cJSON *analyses[PLOT_ANALYSIS_FILES] = {0};
    plot_status code;
    if (!src->inspect && (code = plot_read_analyses(dir, src, analyses)) != QKV_OK) return code;
    if ((code = plot_check_optional(dir, src)) != QKV_OK) {
        plot_free_analyses(analyses);
        return code;
    }
    plotter p;
    if ((code = plotter_init(&p, dir)) != QKV_OK) {
        plot_free_analyses(analyses);
        return code;
    }
    /* a modular run's pictures (grokking.c): measured before anything is drawn */
    grok_data grok = {0};
    bool modular = !src->inspect && !strcmp(src->task, "modular");
    if (modular && (code = grok_load(dir, &grok)) != QKV_OK) {
        plot_free_analyses(analyses);
        return code;
    }
    char plots[PLOT_PATH_LEN];
    qkv_status s = io_make_subdir(dir, "plots", plots, sizeof plots);
    char *tokens = s == QKV_OK ? tokens_arg(dir, src) : NULL;
    if (s != QKV_OK || !tokens) {
        plot_free_analyses(analyses);
        grok_free(&grok);
        return s != QKV_OK ? qkv_fail(s, "plot: %s", qkv_last_error())
                           : qkv_fail(QKV_ERR_NOMEM, "plot: out of memory");
    }
    code = plot_maps_drawn(&p, dir, src, format, tokens);
    free(tokens);
    if (code == QKV_OK) code = plot_analysis(&p, dir, format, src, analyses);
    if (code == QKV_OK && modular) code = grok_draw(&p, dir, format, &grok);
    plot_free_analyses(analyses);
    grok_free(&grok);
    made->images = p.written;
    snprintf(made->path, sizeof made->path, "%s", plots);
    return code;
}


plot_status plot_dir(const char *dir, const char *format, plot_made *made) {
    *made = (plot_made){0};
    if (strlen(dir) > 900) return qkv_fail(QKV_ERR_IO, "plot: %s: path too long", dir);
    plot_source src = {0};
    char inspect_dir[PLOT_PATH_LEN];
    struct stat sb;
    plot_status code;
    if (stat(dir, &sb) == 0 && S_ISREG(sb.st_mode)) { /* a file of qkv inspect --out */
        if ((code = plot_inspect_file(dir, inspect_dir, sizeof inspect_dir, &src)) != QKV_OK)
            return code;
        dir = inspect_dir;
    } else if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        return qkv_fail(QKV_ERR_IO, "plot: %s is not a directory", dir);
    } else if ((code = read_model(dir, src.task, sizeof src.task, &src.layers, &src.heads,
                                  &src.causal, &src.cross, &src.chance_acc,
                                  &src.chance_loss, &src.vocab, &src.seq_len,
                                  &src.queries)) != QKV_OK) {
        return code;
    }
    if (!strcmp(format, "html")) return plot_page(dir, &src, made);
    return plot_maps(dir, &src, format, made);
}
