/* grokking.c - the pictures of a modular run (docs/grokking.md, "Pictures"): the four losses
 * with the phases shaded, the embedding's norm in each frequency over training, the MLP
 * neurons grouped by frequency, and each head's attention from `=` to a and to b over every
 * pair. The first two are read from the run's files (metrics.jsonl, summary.json's grokking);
 * the last two from its model (model.safetensors, the final step): one forward over the P²
 * pairs by src/model/fourier.c for the neurons, one more keeping the attention weights.
 * grok_load gathers everything, before anything is written; grok_draw writes it as text
 * files under DIR/plots/ (grok_*.dat) and draws them with the grok_*.gp scripts; grok_json
 * puts it in the page (page.c, scripts/grokking.js). */
#include "engine/engine.h"
#include "io/io.h"
#include "model/model.h"
#include "plot/plot.h"
#include "train/loaded_model.h"

#include <cjson/cJSON.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GROK_MAX_EVALS 100000       /* rows of metrics.jsonl read (a longer file: its first) */
#define GROK_PAGE_MAX_CELLS (1 << 20) /* attention or neuron numbers the page holds at most */

void grok_free(grok_data *g) {
    free(g->steps), free(g->loss), free(g->embed);
    free(g->neuron_layer), free(g->neuron_index), free(g->neuron_cluster);
    free(g->neuron_share), free(g->neuron_by_frequency), free(g->attention);
    memset(g, 0, sizeof *g);
}

/* ---- the run's files ---- */

/* The member `key` of o as a number, NaN when it is missing, null or not a number. */
static double number_of(const cJSON *o, const char *key) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(n) ? n->valuedouble : NAN;
}

/* A phase's step of summary.json's grokking: a whole number >= 0, else -1 (null, missing,
 * not a step). */
static int64_t phase_step(const cJSON *o, const char *key) {
    double v = number_of(o, key);
    return isfinite(v) && v >= 0 && v == floor(v) && v < 9e15 ? (int64_t)v : -1;
}

/* summary.json's grokking object (docs/grokking.md, "The phases"), when there is one. */
static qkv_status read_phases(const char *dir, grok_data *g) {
    for (int i = 0; i < GROK_PHASES; i++) g->phase[i] = -1;
    qkv_status s;
    cJSON *j = plot_read_json(dir, "summary.json", &s);
    if (!j) return s;
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(j, "grokking");
    if (cJSON_IsObject(o)) {
        g->has_phases = true;
        static const char *const names[GROK_PHASES] = {"memorization_end", "circuit_formation_end",
                                                       "cleanup_end", "generalization_step"};
        for (int i = 0; i < GROK_PHASES; i++) g->phase[i] = phase_step(o, names[i]);
        g->generalized = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "generalized"));
    }
    cJSON_Delete(j);
    return QKV_OK;
}

/* One row of metrics.jsonl into evaluation e: its step, the four losses, the norms of
 * frequencies 1 .. F (NaN where the row has none). False when the row is not one (no step). */
static bool read_eval(const cJSON *row, grok_data *g, int e) {
    double step = number_of(row, "step");
    if (!(isfinite(step) && step >= 0 && step == floor(step) && step < 9e15)) return false;
    g->steps[e] = (int64_t)step;
    static const char *const losses[GROK_LOSSES] = {"train_set_loss", "heldout_loss",
                                                    "restricted_loss", "excluded_loss"};
    for (int i = 0; i < GROK_LOSSES; i++) g->loss[(int64_t)e * GROK_LOSSES + i] = number_of(row, losses[i]);
    const cJSON *norms = cJSON_GetObjectItemCaseSensitive(row, "embed_norms");
    for (int k = 1; k <= g->F; k++) {
        const cJSON *n = cJSON_IsArray(norms) ? cJSON_GetArrayItem(norms, k) : NULL;
        g->embed[(int64_t)e * g->F + k - 1] =
            cJSON_IsNumber(n) && cJSON_GetArraySize(norms) == g->F + 1 ? n->valuedouble : NAN;
    }
    return true;
}

/* Every evaluation of metrics.jsonl, in the file's order (a resumed run's too); none when
 * there is no file (io_absent: one that is there but cannot be read is an error). A line that
 * is not a JSON object with a step (a line cut short by a crash) is passed over: the pictures
 * show what is there. */
static qkv_status read_evals(const char *dir, grok_data *g) {
    char path[PLOT_PATH_LEN + 32];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    if (io_absent(path)) return QKV_OK;
    FILE *f;
    qkv_status s = io_fopen_regular(path, &f);
    if (s != QKV_OK) return qkv_fail(s, "plot: %s", qkv_last_error());
    char *line = NULL;
    size_t cap = 0;
    int room = 0;
    while (getline(&line, &cap, f) >= 0 && g->n_evals < GROK_MAX_EVALS) {
        cJSON *row = cJSON_Parse(line);
        if (cJSON_IsObject(row)) {
            if (g->n_evals == room) {
                room = room ? 2 * room : 64;
                int64_t *steps = realloc(g->steps, (size_t)room * sizeof *steps);
                if (steps) g->steps = steps;
                double *loss = realloc(g->loss, (size_t)room * GROK_LOSSES * sizeof *loss);
                if (loss) g->loss = loss;
                double *embed = realloc(g->embed, (size_t)room * g->F * sizeof *embed);
                if (embed) g->embed = embed;
                if (!steps || !loss || !embed) {
                    cJSON_Delete(row);
                    s = qkv_fail(QKV_ERR_NOMEM, "plot: out of memory for %s", path);
                    break;
                }
            }
            if (read_eval(row, g, g->n_evals)) g->n_evals++;
        }
        cJSON_Delete(row);
    }
    free(line);
    fclose(f);
    return s;
}

/* ---- the model ---- */

/* A neuron's place in the picture: by cluster (ascending, the constant ones, cluster 0,
 * last), within one by share (largest first), then by number. */
typedef struct {
    int cluster, u;
    double share;
} neuron_order;

static int compare_neurons(const void *pa, const void *pb) {
    const neuron_order *a = pa, *b = pb;
    if (a->cluster != b->cluster) {
        if (a->cluster == 0 || b->cluster == 0) return a->cluster == 0 ? 1 : -1;
        return a->cluster < b->cluster ? -1 : 1;
    }
    if (a->share != b->share && !isnan(a->share) && !isnan(b->share))
        return a->share > b->share ? -1 : 1;
    return a->u < b->u ? -1 : a->u > b->u;
}

/* Each neuron's share of variance in each frequency (fourier_measure), the neurons in
 * compare_neurons' order; the key frequencies of the model. */
static qkv_status measure_neurons(loaded_model *lm, int batch, grok_data *g) {
    fourier_measures f;
    qkv_status s = fourier_measure(&lm->model, &lm->cfg.task, lm->ctx, batch, true, &f);
    if (s != QKV_OK) return qkv_fail(s, "plot: %s", qkv_last_error());
    int U = f.neurons, N = lm->model.cfg.mlp, F = g->F;
    g->neurons = U;
    g->n_keys = f.n_keys < GROK_MAX_KEYS ? f.n_keys : GROK_MAX_KEYS;
    memcpy(g->keys, f.keys, (size_t)g->n_keys * sizeof *g->keys);
    neuron_order *order = U ? malloc((size_t)U * sizeof *order) : NULL;
    if (U) {
        g->neuron_layer = malloc((size_t)U * sizeof *g->neuron_layer);
        g->neuron_index = malloc((size_t)U * sizeof *g->neuron_index);
        g->neuron_cluster = malloc((size_t)U * sizeof *g->neuron_cluster);
        g->neuron_share = malloc((size_t)U * sizeof *g->neuron_share);
        g->neuron_by_frequency = malloc((size_t)U * F * sizeof *g->neuron_by_frequency);
        if (!order || !g->neuron_layer || !g->neuron_index || !g->neuron_cluster ||
            !g->neuron_share || !g->neuron_by_frequency)
            s = qkv_fail(QKV_ERR_NOMEM, "plot: out of memory for the neurons");
    }
    if (s == QKV_OK && U) {
        for (int u = 0; u < U; u++)
            order[u] = (neuron_order){f.neuron_cluster[u], u, f.neuron_share[u]};
        qsort(order, (size_t)U, sizeof *order, compare_neurons);
        for (int r = 0; r < U; r++) {
            int u = order[r].u;
            g->neuron_layer[r] = u / N + 1;
            g->neuron_index[r] = u % N;
            g->neuron_cluster[r] = f.neuron_cluster[u];
            g->neuron_share[r] = f.neuron_share[u];
            memcpy(g->neuron_by_frequency + (int64_t)r * F, f.neuron_freq_share + (int64_t)u * (F + 1) + 1,
                   (size_t)F * sizeof *g->neuron_by_frequency);
        }
    }
    free(order);
    fourier_measures_free(&f);
    return s;
}

/* Each head's attention from `=` (position 2) to a (position 0) and to b (position 1), for
 * every pair: g->attention[((l·H + h)·2 + to)·P² + a·P + b]. */
static qkv_status measure_attention(loaded_model *lm, int batch, grok_data *g) {
    int P = g->P, L = g->layers, H = g->heads, T = QKV_MODULAR_SEQ_LEN;
    int64_t PP = (int64_t)P * P;
    g->attention = malloc((size_t)L * H * 2 * PP * sizeof *g->attention);
    int32_t *x = malloc((size_t)batch * T * sizeof *x);
    if (!g->attention || !x) {
        free(x);
        return qkv_fail(QKV_ERR_NOMEM, "plot: out of memory for the attention of every pair");
    }
    for (int64_t start = 0; start < PP; start += batch) {
        int B = PP - start < batch ? (int)(PP - start) : batch;
        for (int i = 0; i < B; i++) {
            int64_t k = start + i;
            x[i * T] = (int32_t)(k / P), x[i * T + 1] = (int32_t)(k % P), x[i * T + 2] = P;
        }
        qkv_ctx_reset(lm->ctx);
        qkv_tensor *attn[QKV_MAX_LAYERS] = {0};
        qkv_model_forward_padded(&lm->model, lm->ctx, x, NULL, B, attn);
        for (int l = 0; l < L; l++)
            for (int h = 0; h < H; h++)
                for (int to = 0; to < 2; to++)
                    for (int i = 0; i < B; i++) /* attn[l] (B, H, T, T): row T-1, column `to` */
                        g->attention[((int64_t)(l * H + h) * 2 + to) * PP + start + i] = (float)
                            qkv_get(attn[l], (((int64_t)i * H + h) * T + T - 1) * T + to);
    }
    free(x);
    return QKV_OK;
}

/* The last component of dir ("." and "/" as the directory's real name would be long: kept). */
static void run_name(const char *dir, char *out, size_t len) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t start = n;
    while (start > 0 && dir[start - 1] != '/') start--;
    snprintf(out, len, "%.*s", (int)(n - start), dir + start);
    /* gnuplot's arguments and the page's JSON take any text; a name of control characters
     * would still print oddly: they become '_' */
    for (char *p = out; *p; p++)
        if ((unsigned char)*p < 32) *p = '_';
}

qkv_status grok_load(const char *dir, grok_data *g) {
    memset(g, 0, sizeof *g);
    char path[PLOT_PATH_LEN + 32];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    loaded_model lm;
    qkv_status s = loaded_model_load(&lm, path, TRAIN_DTYPE_OF_FILE);
    if (s != QKV_OK) return qkv_fail(s, "plot: %s", qkv_last_error());
    const qkv_task *task = &lm.cfg.task;
    if (lm.data || task->kind != QKV_TASK_MODULAR) {
        loaded_model_free(&lm);
        return qkv_fail(QKV_ERR_FORMAT, "plot: %s is not a model of --task modular", path);
    }
    run_name(dir, g->run, sizeof g->run);
    g->P = task->modulus, g->F = fourier_top_frequency(g->P), g->op = task->op;
    g->layers = lm.model.cfg.layers, g->heads = lm.model.cfg.heads, g->step = lm.step;
    int64_t pairs = (int64_t)g->P * g->P;
    int batch = pairs < ANALYSIS_BATCH ? (int)pairs : ANALYSIS_BATCH;
    s = loaded_model_reserve(&lm, batch, "plot");
    if (s == QKV_OK) s = measure_neurons(&lm, batch, g);
    if (s == QKV_OK) s = measure_attention(&lm, batch, g);
    loaded_model_free(&lm);
    if (s == QKV_OK) s = read_phases(dir, g);
    if (s == QKV_OK) s = read_evals(dir, g);
    if (s != QKV_OK) grok_free(g);
    return s;
}

/* ---- the files gnuplot draws ---- */

/* "(a + b) mod 13" */
static const char *op_text(const grok_data *g, char *buf, size_t len) {
    snprintf(buf, len, "(a %s b) mod %d",
             g->op == QKV_MODULAR_ADD ? "+" : g->op == QKV_MODULAR_SUB ? "-" : "*", g->P);
    return buf;
}

static void put_number(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, " %.6g", v);
    else fputs(" NaN", f);
}

/* A phase's step as text, "-" for none. */
static const char *step_text(int64_t step, char *buf, size_t len) {
    if (step < 0) snprintf(buf, len, "-");
    else snprintf(buf, len, "%" PRId64, step);
    return buf;
}

/* plots/grok_losses.dat: a row per evaluation, "step train test restricted excluded". */
static void write_losses(FILE *f, const grok_data *g, const char *op) {
    char b[4][24];
    fprintf(f, "# qkv plot: %s, %s: the four losses at each evaluation (metrics.jsonl: "
               "train_set_loss, heldout_loss, restricted_loss, excluded_loss; NaN: none)\n"
               "# phases (summary.json's grokking): memorization_end %s circuit_formation_end %s "
               "cleanup_end %s generalization_step %s\n# step train test restricted excluded\n",
            g->run, op, step_text(g->phase[0], b[0], 24), step_text(g->phase[1], b[1], 24),
            step_text(g->phase[2], b[2], 24), step_text(g->phase[3], b[3], 24));
    for (int e = 0; e < g->n_evals; e++) {
        fprintf(f, "%" PRId64, g->steps[e]);
        for (int i = 0; i < GROK_LOSSES; i++) put_number(f, g->loss[(int64_t)e * GROK_LOSSES + i]);
        fputc('\n', f);
    }
}

/* plots/grok_fourier.dat: the embedding's norms, a row per frequency 1 .. F, a column per
 * evaluation (labelled by its step). */
static void write_fourier(FILE *f, const grok_data *g, const char *op) {
    fprintf(f, "# qkv plot: %s, %s: the embedding's norm in each frequency (rows) at each "
               "evaluation (columns: steps), metrics.jsonl's embed_norms\n# frequency\\step", g->run, op);
    for (int e = 0; e < g->n_evals; e++) fprintf(f, " %" PRId64, g->steps[e]);
    fputc('\n', f);
    for (int k = 1; k <= g->F; k++) {
        fprintf(f, "%d", k);
        for (int e = 0; e < g->n_evals; e++) put_number(f, g->embed[(int64_t)e * g->F + k - 1]);
        fputc('\n', f);
    }
}

/* plots/grok_neurons.dat: a row per neuron (layer.neuron, in grok_load's order), a column per
 * frequency 1 .. F: its share of the neuron's variance. */
static void write_neurons(FILE *f, const grok_data *g, const char *op) {
    fprintf(f, "# qkv plot: %s, %s, step %" PRId64 ": each MLP neuron's share of variance over "
               "the pairs (at =) in each frequency; rows grouped by cluster (the frequency of the "
               "largest share; constant neurons last, NaN), by share within one\n# neuron\\frequency",
            g->run, op, g->step);
    for (int k = 1; k <= g->F; k++) fprintf(f, " %d", k);
    fputc('\n', f);
    for (int u = 0; u < g->neurons; u++) {
        fprintf(f, "%d.%d", g->neuron_layer[u], g->neuron_index[u]);
        for (int k = 0; k < g->F; k++) put_number(f, g->neuron_by_frequency[(int64_t)u * g->F + k]);
        fputc('\n', f);
    }
}

/* plots/grok_attention_layer<L>.dat: for each head, two P x P matrices (rows a, columns b),
 * the weight from = to a, then to b; gnuplot's blocks (two blank lines apart), index
 * 2·(head - 1) and 2·(head - 1) + 1. */
static void write_attention(FILE *f, const grok_data *g, const char *op, int l) {
    int P = g->P;
    int64_t PP = (int64_t)P * P;
    fprintf(f, "# qkv plot: %s, %s, step %" PRId64 ": layer %d's attention from = (position 2) "
               "to a (position 0) and to b (position 1), for every pair: rows a, columns b; a "
               "block per head and key, two blank lines apart\n", g->run, op, g->step, l + 1);
    for (int h = 0; h < g->heads; h++)
        for (int to = 0; to < 2; to++) {
            fprintf(f, "%s# head %d: the weight on %s\n", h || to ? "\n\n" : "", h + 1, to ? "b" : "a");
            const float *m = g->attention + ((int64_t)(l * g->heads + h) * 2 + to) * PP;
            for (int a = 0; a < P; a++) {
                for (int b = 0; b < P; b++) fprintf(f, "%s%.4g", b ? " " : "", m[(int64_t)a * P + b]);
                fputc('\n', f);
            }
        }
}

typedef void (*grok_writer)(FILE *f, const grok_data *g, const char *op);

static qkv_status write_dat(const char *dir, const char *rel, const grok_data *g, grok_writer w,
                            int layer) {
    char path[PLOT_PATH_LEN + 64], op[48];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    op_text(g, op, sizeof op);
    atomic_file af;
    qkv_status s = atomic_open(&af, path);
    if (s != QKV_OK) return qkv_fail(s, "plot: %s", qkv_last_error());
    if (w) w(af.f, g, op);
    else write_attention(af.f, g, op, layer);
    if ((s = atomic_commit(&af)) != QKV_OK) return qkv_fail(s, "plot: %s", qkv_last_error());
    return QKV_OK;
}

/* "k:n k:n ... 0:n": each cluster's frequency and its count of neurons, in the rows' order. */
static char *clusters_arg(const grok_data *g) {
    char *arg = malloc((size_t)g->neurons * 24 + 2);
    if (!arg) return NULL;
    size_t used = 0;
    arg[0] = '\0';
    for (int u = 0; u < g->neurons;) {
        int n = 0;
        while (u + n < g->neurons && g->neuron_cluster[u + n] == g->neuron_cluster[u]) n++;
        used += (size_t)sprintf(arg + used, "%s%d:%d", used ? " " : "", g->neuron_cluster[u], n);
        u += n;
    }
    return arg;
}

plot_status grok_draw(plotter *p, const char *dir, const char *format, const grok_data *g) {
    char out[64], rel[64], title[PLOT_PATH_LEN], op[48], b[5][24], keys[GROK_MAX_KEYS * 6 + 2] = "";
    op_text(g, op, sizeof op);
    for (int i = 0, n = 0; i < g->n_keys; i++)
        n += snprintf(keys + n, sizeof keys - (size_t)n, "%s%d", i ? " " : "", g->keys[i]);
    /* the subject of every title: the run, the task, the step */
    snprintf(title, sizeof title, "%s: %s", g->run, op);
    /* the phases' steps, "-" for none: "MEM CIRCUIT CLEANUP GEN GENERALIZED" ("-" without
     * summary.json's grokking) */
    char phases[5 * 24];
    if (g->has_phases)
        snprintf(phases, sizeof phases, "%s %s %s %s %d", step_text(g->phase[0], b[0], 24),
                 step_text(g->phase[1], b[1], 24), step_text(g->phase[2], b[2], 24),
                 step_text(g->phase[3], b[3], 24), g->generalized);
    else
        snprintf(phases, sizeof phases, "-");
    plot_status code = QKV_OK;
    if (g->n_evals > 0) {
        if ((code = write_dat(dir, "plots/grok_losses.dat", g, write_losses, 0)) != QKV_OK) return code;
        snprintf(out, sizeof out, "plots/grok_losses.%s", format);
        code = plotter_run(p, dir, "grok_losses.gp", out, format, 4,
                           (const char *[]){"plots/grok_losses.dat", title, phases,
                                           qkv_modular_op_name(g->op)});
        if (code != QKV_OK) return code;
        /* the heatmap's columns: every evaluation's step, for cells as wide as their spacing */
        char *steps = malloc((size_t)g->n_evals * 21 + 1);
        if (!steps) return qkv_fail(QKV_ERR_NOMEM, "plot: out of memory");
        size_t used = 0;
        for (int e = 0; e < g->n_evals; e++)
            used += (size_t)sprintf(steps + used, "%s%" PRId64, e ? " " : "", g->steps[e]);
        if ((code = write_dat(dir, "plots/grok_fourier.dat", g, write_fourier, 0)) == QKV_OK) {
            snprintf(out, sizeof out, "plots/grok_fourier.%s", format);
            code = plotter_run(p, dir, "grok_fourier.gp", out, format, 5,
                               (const char *[]){"plots/grok_fourier.dat", title, steps, keys, phases});
        }
        free(steps);
        if (code != QKV_OK) return code;
    }
    snprintf(b[4], sizeof b[4], "%" PRId64, g->step);
    if (g->neurons) {
        if ((code = write_dat(dir, "plots/grok_neurons.dat", g, write_neurons, 0)) != QKV_OK) return code;
        char *clusters = clusters_arg(g);
        if (!clusters) return qkv_fail(QKV_ERR_NOMEM, "plot: out of memory");
        snprintf(out, sizeof out, "plots/grok_neurons.%s", format);
        code = plotter_run(p, dir, "grok_neurons.gp", out, format, 5,
                           (const char *[]){"plots/grok_neurons.dat", title, b[4], clusters, keys});
        free(clusters);
        if (code != QKV_OK) return code;
    }
    char P[16], H[16], layer[16];
    snprintf(P, sizeof P, "%d", g->P);
    snprintf(H, sizeof H, "%d", g->heads);
    for (int l = 0; l < g->layers && code == QKV_OK; l++) {
        snprintf(rel, sizeof rel, "plots/grok_attention_layer%d.dat", l + 1);
        if ((code = write_dat(dir, rel, g, NULL, l)) != QKV_OK) return code;
        snprintf(out, sizeof out, "plots/grok_attention_layer%d.%s", l + 1, format);
        snprintf(layer, sizeof layer, "%d", l + 1);
        code = plotter_run(p, dir, "grok_attention.gp", out, format, 6,
                           (const char *[]){rel, title, b[4], layer, H, P});
    }
    return code;
}

/* ---- the page's object ---- */

static void json_num(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, "%.4g", v);
    else fputs("null", f);
}

static void json_step(FILE *f, int64_t step) {
    if (step < 0) fputs("null", f);
    else fprintf(f, "%" PRId64, step);
}

/* A JSON string of printable text (run_name's): quotes, backslashes and '<', '>', '&'
 * escaped, so that it can stand inside <script>. */
static void json_text(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == '<' || c == '>' || c == '&') fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

void grok_json(FILE *f, const grok_data *g) {
    int F = g->F, P = g->P;
    int64_t PP = (int64_t)P * P;
    fputs("{\"run\":", f);
    json_text(f, g->run);
    fprintf(f, ",\"modulus\":%d,\"op\":\"%s\",\"step\":%" PRId64 ",\"layers\":%d,\"heads\":%d,",
            P, qkv_modular_op_name(g->op), g->step, g->layers, g->heads);
    fputs("\"phases\":", f);
    if (g->has_phases) {
        static const char *const names[GROK_PHASES] = {"memorization_end", "circuit_formation_end",
                                                       "cleanup_end", "generalization_step"};
        for (int i = 0; i < GROK_PHASES; i++) {
            fprintf(f, "%s\"%s\":", i ? "," : "{", names[i]);
            json_step(f, g->phase[i]);
        }
        fprintf(f, ",\"generalized\":%s}", g->generalized ? "true" : "false");
    } else {
        fputs("null", f);
    }
    fputs(",\"key_frequencies\":[", f);
    for (int i = 0; i < g->n_keys; i++) fprintf(f, "%s%d", i ? "," : "", g->keys[i]);
    fputs("],\n\"evals\":{\"step\":[", f);
    for (int e = 0; e < g->n_evals; e++) fprintf(f, "%s%" PRId64, e ? "," : "", g->steps[e]);
    fputc(']', f);
    static const char *const losses[GROK_LOSSES] = {"train", "test", "restricted", "excluded"};
    for (int i = 0; i < GROK_LOSSES; i++) {
        fprintf(f, ",\"%s\":[", losses[i]);
        for (int e = 0; e < g->n_evals; e++) {
            if (e) fputc(',', f);
            json_num(f, g->loss[(int64_t)e * GROK_LOSSES + i]);
        }
        fputc(']', f);
    }
    fputs(",\"embed_norms\":[", f); /* per evaluation, frequencies 1 .. F */
    for (int e = 0; e < g->n_evals; e++) {
        fputs(e ? ",[" : "[", f);
        for (int k = 0; k < F; k++) {
            if (k) fputc(',', f);
            json_num(f, g->embed[(int64_t)e * F + k]);
        }
        fputc(']', f);
    }
    fputs("]},\n\"neurons\":", f);
    if (!g->neurons) {
        fputs("null", f);
    } else if ((int64_t)g->neurons * F > GROK_PAGE_MAX_CELLS) {
        fprintf(f, "{\"too_large\":%d}", GROK_PAGE_MAX_CELLS);
    } else {
        fputs("{\"name\":[", f);
        for (int u = 0; u < g->neurons; u++)
            fprintf(f, "%s\"%d.%d\"", u ? "," : "", g->neuron_layer[u], g->neuron_index[u]);
        fputs("],\"cluster\":[", f);
        for (int u = 0; u < g->neurons; u++) fprintf(f, "%s%d", u ? "," : "", g->neuron_cluster[u]);
        fputs("],\"share\":[", f);
        for (int u = 0; u < g->neurons; u++) {
            if (u) fputc(',', f);
            json_num(f, g->neuron_share[u]);
        }
        fputs("],\"by_frequency\":[", f);
        for (int u = 0; u < g->neurons; u++) {
            fputs(u ? ",[" : "[", f);
            for (int k = 0; k < F; k++) {
                if (k) fputc(',', f);
                json_num(f, g->neuron_by_frequency[(int64_t)u * F + k]);
            }
            fputc(']', f);
        }
        fputs("]}", f);
    }
    fputs(",\n\"attention\":", f);
    if ((int64_t)g->layers * g->heads * 2 * PP > GROK_PAGE_MAX_CELLS) {
        fprintf(f, "{\"too_large\":%d}", GROK_PAGE_MAX_CELLS);
    } else { /* [layer][head] = {"a": rows a of columns b, "b": the same} */
        for (int l = 0; l < g->layers; l++) {
            fputs(l ? ",[" : "[[", f);
            for (int h = 0; h < g->heads; h++) {
                fputs(h ? ",{" : "{", f);
                for (int to = 0; to < 2; to++) {
                    fprintf(f, "%s\"%c\":[", to ? "," : "", to ? 'b' : 'a');
                    const float *m = g->attention + ((int64_t)(l * g->heads + h) * 2 + to) * PP;
                    for (int a = 0; a < P; a++) {
                        fputs(a ? ",[" : "[", f);
                        for (int b = 0; b < P; b++) fprintf(f, "%s%.4g", b ? "," : "", m[(int64_t)a * P + b]);
                        fputc(']', f);
                    }
                    fputc(']', f);
                }
                fputc('}', f);
            }
            fputc(']', f);
        }
        fputc(']', f);
    }
    fputc('}', f);
}
