/* cmd_fourier.c - `qkv fourier`: a modular model in the Fourier basis of Z/P: the key
 * frequencies of its embedding, each MLP neuron's frequency and share, the logits' share
 * along the key frequencies' cos(w(a + b - c)), the restricted and excluded losses and the
 * other progress measures (the numbers come from src/model/fourier.c; docs/grokking.md
 * defines each). */
#include "cli.h"
#include "explain_cli.h"
#include "model/model.h"
#include "train/loaded_model.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define FOURIER_TABLE_ROWS 8 /* frequencies the table lists at least (by norm) */

typedef struct {
    const char *model, *out;
    long threads;
    bool json;
} fourier_args;

static int fourier_parse(int argc, char **argv, fourier_args *a) {
    *a = (fourier_args){0};
    cli_option options[] = {
        {"model", CLI_STRING, &a->model, .arg = "FILE",
         .help = "a model.safetensors, or the directory holding one (or give it as DIR)"},
        {"threads", CLI_INT, &a->threads, 1, QKV_MAX_THREADS, .arg = "N", .help = "OpenMP threads"},
        {"json", CLI_FLAG, &a->json, .help = "print one JSON object (docs/grokking.md)"},
        {"out", CLI_STRING, &a->out, .arg = "FILE", .help = "write the same JSON object to FILE"},
        CLI_NO_SELFTEST_ROW,
        {"help", CLI_HELP, .help = "show this help"},
        {0}};
    const cli_command cmd = {
        .name = "fourier",
        .usage = "usage: qkv fourier DIR [--json] [--out FILE]   (or --model FILE)\n"
                 "A model of --task modular in the Fourier basis of Z/P: its embedding's norm in "
                 "each\nfrequency and the key frequencies, each MLP neuron's share of variance in "
                 "one frequency\n(its cluster), the logits' share along the key frequencies' "
                 "cos(w(a+b-c)) and\nsin(w(a+b-c)), the restricted and excluded losses, the Gini "
                 "coefficients and the\nsum of squared weights, from one forward over every pair. "
                 "docs/grokking.md defines each.\n\n",
        .options = options,
        .column = 22,
        .epilog = "\nExit codes: 0 done, 2 bad option, or a model not of --task modular, 3 a file "
                  "cannot be\nread or written, 4 the model file is corrupt, 5 a loss is not "
                  "finite, 6 out of memory.\n",
        .operands = true};
    int first;
    int code = cli_parse_options(&cmd, argc, argv, &first);
    if (code != CLI_RUN) return code;
    if (!a->threads && !cli_default_threads(&a->threads)) return EXIT_USAGE;
    return explain_cli_model("fourier", a->model, argc, argv, first, &a->model);
}

typedef struct {
    fourier_measures f;
    bool measured;
} fourier_job;

static qkv_status fourier_compute(loaded_model *lm, void *state) {
    fourier_job *job = state;
    const qkv_task *task = &lm->cfg.task;
    if (lm->data || task->kind != QKV_TASK_MODULAR)
        return qkv_fail(QKV_ERR_VALUE, "the model is not modular (it was trained on %s): the "
                        "Fourier measures read a model of --task modular",
                        lm->data ? "a data file" : qkv_task_name(task->kind));
    int64_t pairs = (int64_t)task->modulus * task->modulus;
    int batch = pairs < ANALYSIS_BATCH ? (int)pairs : ANALYSIS_BATCH;
    qkv_status s = loaded_model_reserve(lm, batch, NULL);
    if (s != QKV_OK) return s;
    if ((s = fourier_measure(&lm->model, task, lm->ctx, batch, true, &job->f)) != QKV_OK) return s;
    job->measured = true;
    const fourier_measures *f = &job->f;
    if (!isfinite(f->train_loss) || !isfinite(f->test_loss))
        return qkv_fail(QKV_ERR_NUMERIC, "the %s loss over every pair is not finite",
                        isfinite(f->train_loss) ? "test" : "train");
    return QKV_OK;
}

/* A number, or null when it is not finite. */
static void add_number(cJSON *o, const char *key, double v) {
    if (isfinite(v)) cJSON_AddNumberToObject(o, key, v);
    else cJSON_AddNullToObject(o, key);
}

static cJSON *numbers_json(const double *v, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++)
        cJSON_AddItemToArray(a, isfinite(v[i]) ? cJSON_CreateNumber(v[i]) : cJSON_CreateNull());
    return a;
}

static cJSON *fourier_json(const loaded_model *lm, void *state) {
    const fourier_measures *f = &((fourier_job *)state)->f;
    const qkv_model_config *c = &lm->model.cfg;
    int F = fourier_top_frequency(f->P);
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    cJSON_AddStringToObject(j, "command", "fourier");
    cJSON_AddNumberToObject(j, "modulus", f->P);
    cJSON_AddStringToObject(j, "op", qkv_modular_op_name(lm->cfg.task.op));
    cJSON_AddNumberToObject(j, "step", (double)lm->step);
    cJSON_AddNumberToObject(j, "top_frequency", F);
    cJSON_AddItemToObject(j, "embed_norms", numbers_json(f->embed_norm, F + 1));
    cJSON_AddItemToObject(j, "key_frequencies", cJSON_CreateIntArray(f->keys, f->n_keys));
    add_number(j, "gini_embed", f->gini_embed);
    if (f->logit_map_norm)
        cJSON_AddItemToObject(j, "neuron_logit_norms", numbers_json(f->logit_map_norm, F + 1));
    else
        cJSON_AddNullToObject(j, "neuron_logit_norms");
    add_number(j, "gini_neuron_logits", f->gini_neuron_logits);
    add_number(j, "sum_squared_weights", f->sum_squared_weights);
    add_number(j, "train_loss", f->train_loss);
    add_number(j, "train_acc", f->train_acc);
    add_number(j, "test_loss", f->test_loss);
    add_number(j, "test_acc", f->test_acc);
    add_number(j, "restricted_loss", f->restricted_loss);
    add_number(j, "restricted_acc", f->restricted_acc);
    add_number(j, "excluded_loss", f->excluded_loss);
    add_number(j, "logit_share", f->logit_share);
    bool mul = lm->cfg.task.op == QKV_MODULAR_MUL;
    if (mul) cJSON_AddNullToObject(j, "key_logit_shares");
    else cJSON_AddItemToObject(j, "key_logit_shares", numbers_json(f->key_share, f->n_keys));
    /* each layer's neurons: the frequency that explains most of each one's variance over the
     * pairs (0: a constant neuron) and its share (null for those) */
    cJSON *mlps = cJSON_AddArrayToObject(j, "mlp");
    for (int l = 0; mlps && l < c->layers && c->mlp; l++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(mlps, o);
        cJSON_AddNumberToObject(o, "layer", l + 1);
        cJSON_AddNumberToObject(o, "neurons", c->mlp);
        cJSON_AddItemToObject(o, "cluster",
                              cJSON_CreateIntArray(f->neuron_cluster + (size_t)l * c->mlp, c->mlp));
        cJSON_AddItemToObject(o, "share", numbers_json(f->neuron_share + (size_t)l * c->mlp, c->mlp));
    }
    return j;
}

/* "0.1234" or "-" */
static const char *number_text(double v, const char *format, char *buf, size_t len) {
    if (isfinite(v)) snprintf(buf, len, format, v);
    else snprintf(buf, len, "-");
    return buf;
}

static qkv_status fourier_table(const loaded_model *lm, void *state) {
    const fourier_measures *f = &((fourier_job *)state)->f;
    const qkv_model_config *c = &lm->model.cfg;
    int P = f->P, F = fourier_top_frequency(P);
    char b[4][32];
    printf("fourier: (a %s b) mod %d at step %lld, frequencies 1..%d (w = 2 pi k / %d)\n",
           lm->cfg.task.op == QKV_MODULAR_ADD ? "+" : lm->cfg.task.op == QKV_MODULAR_SUB ? "-" : "*",
           P, (long long)lm->step, F, P);
    printf("key frequencies:");
    for (int i = 0; i < f->n_keys; i++) printf(" %d", f->keys[i]);
    printf("%s (squared norm in the embedding >= 4x the median, >= 1/10 of the largest)\n",
           f->n_keys ? "" : " none");
    double total = 0;
    for (int k = 1; k <= F; k++) total += f->embed_norm[k] * f->embed_norm[k];
    /* the frequencies by norm, largest first (the lower first among equals): the key ones
     * and a few more, FOURIER_TABLE_ROWS at least; --json has them all */
    int shown = f->n_keys + 3 > FOURIER_TABLE_ROWS ? f->n_keys + 3 : FOURIER_TABLE_ROWS;
    shown = shown < F ? shown : F;
    printf("embedding: the %d frequencies of largest norm of %d (each one's share of the squared "
           "norm of all; the constant's norm %.4f)\n", shown, F, f->embed_norm[0]);
    bool *done = calloc((size_t)F + 1, sizeof *done);
    for (int row = 0; done && row < shown; row++) {
        int k = 0;
        for (int j = 1; j <= F; j++)
            if (!done[j] && (k == 0 || f->embed_norm[j] > f->embed_norm[k])) k = j;
        done[k] = true;
        bool key = false;
        for (int i = 0; i < f->n_keys; i++) key |= f->keys[i] == k;
        printf("  %5d %10.4f  %s%s\n", k, f->embed_norm[k],
               number_text(f->embed_norm[k] * f->embed_norm[k] / total, "%.3f", b[0], 32),
               key ? "  key" : "");
    }
    free(done);
    printf("gini of the frequencies' norms: embedding %s, neuron-logit map %s\n",
           number_text(f->gini_embed, "%.4f", b[0], 32),
           number_text(f->gini_neuron_logits, "%.4f", b[1], 32));
    printf("sum of squared weights: %.6g\n", f->sum_squared_weights);
    printf("every pair: train loss %.6g (accuracy %.4f), test loss %.6g (accuracy %.4f)\n",
           f->train_loss, f->train_acc, f->test_loss, f->test_acc);
    if (lm->cfg.task.op == QKV_MODULAR_MUL) {
        printf("restricted and excluded losses, logit share: - (defined for add and sub)\n");
    } else {
        printf("restricted loss (held-out pairs, the logits kept along the key frequencies): %s "
               "(accuracy %s)\n", number_text(f->restricted_loss, "%.6g", b[0], 32),
               number_text(f->restricted_acc, "%.4f", b[1], 32));
        printf("excluded loss (training pairs, those directions removed): %s\n",
               number_text(f->excluded_loss, "%.6g", b[0], 32));
        printf("logits' share along cos and sin(w(a %c b - c)) of the key frequencies: %s",
               lm->cfg.task.op == QKV_MODULAR_SUB ? '-' : '+',
               number_text(f->logit_share, "%.4f", b[0], 32));
        for (int i = 0; i < f->n_keys; i++)
            printf("%s%d: %s", i ? ", " : " (", f->keys[i],
                   number_text(f->key_share[i], "%.4f", b[0], 32));
        printf("%s\n", f->n_keys ? ")" : "");
    }
    for (int l = 0; l < c->layers && c->mlp; l++) {
        const double *share = f->neuron_share + (size_t)l * c->mlp;
        const int *cluster = f->neuron_cluster + (size_t)l * c->mlp;
        printf("MLP %d: neurons by the frequency that explains most of their variance at = "
               "(its share)\n  %9s %8s %11s\n", l + 1, "frequency", "neurons", "mean share");
        int constant = 0;
        for (int k = 1; k <= F; k++) {
            int n = 0;
            double sum = 0;
            for (int u = 0; u < c->mlp; u++)
                if (cluster[u] == k) n++, sum += share[u];
            if (n) printf("  %9d %8d %11.4f\n", k, n, sum / n);
        }
        for (int u = 0; u < c->mlp; u++) constant += cluster[u] == 0;
        if (constant) printf("  %9s %8d\n", "constant", constant);
    }
    printf("  (--json or --out lists every frequency%s)\n", c->mlp ? " and every neuron" : "");
    return QKV_OK;
}

static int fourier_run(const fourier_args *a) {
    fourier_job job = {0};
    int code = explain_cli_run(&(explain_cli_job){
        .who = "fourier", .model = a->model, .out = a->out, .dtype = TRAIN_DTYPE_OF_FILE,
        .threads = a->threads, .print_json = a->json, .run = fourier_compute,
        .json = fourier_json, .table = fourier_table, .state = &job});
    if (job.measured) fourier_measures_free(&job.f);
    return code;
}

int cmd_fourier(int argc, char **argv, bool parse_only) {
    fourier_args a;
    int code = fourier_parse(argc, argv, &a);
    return code != CLI_RUN || parse_only ? code : fourier_run(&a);
}
