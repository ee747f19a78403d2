/* run.c - a whole training run: steps, evaluations, metrics rows, snapshots, checkpoints. */
#include "train/run.h"

#include "io/maps.h"
#include "io/paths.h"
#include "model/model.h"
#include "train/checkpoint.h"
#include "train/grokking.h"
#include "train/hints.h"
#include "train/options.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The run's effective config as a JSON object, one key per option of the schema that a run
 * saves (train/options.h); a valid `qkv train --config`. NULL when out of memory. */
static cJSON *run_config_json(const trainer *t, const run_options *o) {
    train_options v;
    train_options_of_run(&t->cfg, o->eval_every, o->save_every, o->snapshot_every, &v);
    cJSON *j = cJSON_CreateObject();
    bool data = t->data != NULL; /* the examples set the task, the length and the vocabulary */
    for (const train_option *r = train_option_table; j && (r->flag || r->help); r++) {
        if (r->saved == SAVED_NOT || (r->saved == SAVED_TASK && data) ||
            (r->saved == SAVED_DATA && !data) ||
            (r->saved == SAVED_MODULAR && t->cfg.task.kind != QKV_TASK_MODULAR))
            continue;
        const void *value = train_option_value(&v, r);
        char text[32];
        switch (r->type) {
        case OPTION_INT:
            if (r->word && *(const long *)value == r->word_value) /* "batch": "full" */
                cJSON_AddStringToObject(j, r->key, r->word);
            else
                cJSON_AddNumberToObject(j, r->key, (double)*(const long *)value);
            break;
        case OPTION_DOUBLE: cJSON_AddNumberToObject(j, r->key, *(const double *)value); break;
        case OPTION_U64: /* a JSON number holds integers exactly up to 2^53; a larger seed is
                          * written as a string, which --config also takes for it. The number
                          * is written as its digits (a double would print 2e+15) */
            snprintf(text, sizeof text, "%" PRIu64, *(const uint64_t *)value);
            if (*(const uint64_t *)value < (UINT64_C(1) << 53))
                cJSON_AddRawToObject(j, r->key, text);
            else
                cJSON_AddStringToObject(j, r->key, text);
            break;
        case OPTION_TEXT:
            if (*(const char *const *)value)
                cJSON_AddStringToObject(j, r->key, *(const char *const *)value);
            break;
        case OPTION_CHOICE:
            cJSON_AddStringToObject(j, r->key, r->choices[*(const int *)value]);
            break;
        case OPTION_FLAG: cJSON_AddBoolToObject(j, r->key, *(const bool *)value); break;
        case OPTION_SET: cJSON_AddBoolToObject(j, r->key, *(const int *)value == 1); break;
        case OPTION_HEADING: break;
        }
    }
    return j;
}

static int scored_heads(const trainer *t) {
    return t->model.cfg.heads < EVAL_MAX_HEADS ? t->model.cfg.heads : EVAL_MAX_HEADS;
}

/* The head columns of a metrics row (metrics.h): each scored head's attention entropy and
 * copying score, then the composition scores, read from the weights (model/circuits.c). A
 * score that cannot be computed (out of memory) stays NaN: not worth stopping a run for. */
static void head_columns(const trainer *t, const eval_result *r, const metrics_table *m,
                         double *out) {
    const qkv_model_config *c = &t->model.cfg;
    int L = c->layers, H = c->heads;
    double *copying = malloc((size_t)L * H * sizeof *copying);
    if (copying && qkv_copying_scores(&t->model, copying) != QKV_OK) {
        free(copying);
        copying = NULL;
    }
    for (int l = 0; l < L; l++)
        for (int h = 0; h < m->heads; h++) {
            out[2 * (l * m->heads + h)] = r->entropy[l][h];
            out[2 * (l * m->heads + h) + 1] = copying ? copying[l * H + h] : NAN;
        }
    free(copying);
    if (m->n_composition == 0) return; /* (L-1, 3, H, H): the columns' own order */
    if (qkv_composition_scores(&t->model, out + 2 * L * m->heads) != QKV_OK)
        for (int k = 0; k < m->n_composition; k++) out[2 * L * m->heads + k] = NAN;
}

/* A modular run's progress measures of the weights as they are (docs/grokking.md) into *f,
 * over every pair, in the evaluation's context: false, with nothing to free, for another
 * task, or when they cannot be computed (out of memory: the row's columns stay empty, not
 * worth stopping a run for). */
static bool measure(trainer *t, fourier_measures *f) {
    return t->cfg.task.kind == QKV_TASK_MODULAR &&
           fourier_measure(&t->model, &t->cfg.task, t->eval_ctx, EVAL_BATCH, false, f) == QKV_OK;
}

/* The progress measures' columns of a metrics row (metrics.h's fourier_column order). */
static void fourier_columns(const fourier_measures *f, double *out) {
    out[FOURIER_COL_TRAIN_LOSS] = f->train_loss;
    out[FOURIER_COL_TRAIN_ACC] = f->train_acc;
    out[FOURIER_COL_WEIGHTS] = f->sum_squared_weights;
    out[FOURIER_COL_RESTRICTED] = f->restricted_loss;
    out[FOURIER_COL_RESTRICTED_ACC] = f->restricted_acc;
    out[FOURIER_COL_EXCLUDED] = f->excluded_loss;
    out[FOURIER_COL_GINI_EMBED] = f->gini_embed;
    out[FOURIER_COL_GINI_LOGITS] = f->gini_neuron_logits;
    out[FOURIER_COL_LOGIT_SHARE] = f->logit_share;
    out[FOURIER_COL_KEYS] = f->n_keys;
}

/* A metrics row of the evaluation r after the step's update (lr: that step's), with a modular
 * run's measures f (NULL: none). */
static metrics_row new_row(const training_run *run, const trainer *t, const eval_result *r,
                           int64_t step, double lr, const fourier_measures *f) {
    const metrics_table *m = &run->metrics;
    double *out = metrics_new_scores(m);
    int k = 0;
    for (int l = 0; out && l < m->layers; l++) out[k++] = r->has_ideal ? r->layer_mass[l] : NAN;
    bool self_attention = !t->model.cfg.target_len; /* head scores are of self-attention */
    for (int l = 0; out && l < m->layers; l++)
        for (int h = 0; h < m->heads; h++) {
            out[k++] = self_attention ? r->prev_token[l][h] : NAN;
            out[k++] = self_attention ? r->duplicate[l][h] : NAN;
            out[k++] = self_attention ? r->induction[l][h] : NAN;
        }
    if (out) head_columns(t, r, m, out + m->first_head_column);
    if (out && m->icl_column >= 0) out[m->icl_column] = r->icl_score;
    if (out && f && m->first_fourier_column >= 0) fourier_columns(f, out + m->first_fourier_column);
    return (metrics_row){step, t->last_loss, t->last_train_acc, r->accuracy, lr, r->loss, out};
}

static run_evaluation evaluation_of(const eval_result *r, int64_t step) {
    return (run_evaluation){.step = step, .heldout_acc = r->accuracy, .heldout_loss = r->loss,
                            .attention_mass = r->attention_mass, .best_head = r->best_head};
}

/* Adds a row to metrics.csv's table and to metrics.jsonl, with a modular run's measures f
 * (NULL: none, or not measured); a modular run's summary.json names its phases from then on. */
static void add_row(training_run *run, const trainer *t, const eval_result *r, int64_t step,
                    double lr, const fourier_measures *f) {
    metrics_row row = new_row(run, t, r, step, lr, f);
    metrics_add(&run->metrics, row);
    if (run->files_begun) {
        run_evaluation e = evaluation_of(r, step);
        e.columns = &run->metrics;
        if (f) {
            e.embed_norms = f->embed_norm, e.n_norms = fourier_top_frequency(f->P) + 1;
            e.key_frequencies = f->keys, e.n_keys = f->n_keys;
        }
        run_files_row(&run->files, &row, &e);
        if (run->metrics.first_fourier_column >= 0)
            run_files_grokking(&run->files, grokking_json(&run->metrics, f ? f->keys : NULL,
                                                          f ? f->n_keys : -1));
    }
}

/* ---- maps of the fixed held-out example (index 0) ---- */

/* Writes maps (L, H, Tq, T) of held-out example 0 as DIR/SUB/<prefix>layer<L>_head<H><suffix>.dat. */
static qkv_status write_maps(const trainer *t, const char *dir, const char *sub,
                             const char *prefix, const char *suffix, const char *what,
                             const float *maps) {
    const qkv_model_config *c = &t->model.cfg;
    int T = c->seq_len, Tq = t->target_len;
    const int32_t *x = t->held_tokens, *y = t->held_targets;
    char(*labels)[MAP_LABEL] = malloc((size_t)(T + Tq) * sizeof *labels);
    if (!labels) return qkv_fail(QKV_ERR_NOMEM, "out of memory");
    for (int j = 0; j < T; j++) trainer_token_label(t, x[j], labels[j], MAP_LABEL);
    for (int i = 0; i < Tq; i++) {
        /* an encoder-decoder's rows are decoder positions: labelled by their target */
        if (c->target_len && y[i] < 0)
            snprintf(labels[T + i], MAP_LABEL, "_");
        else if (c->target_len)
            trainer_class_label(t, y[i], labels[T + i], MAP_LABEL);
        else
            trainer_token_label(t, x[i], labels[T + i], MAP_LABEL);
    }
    map_labels ml = {.task = qkv_task_name(t->cfg.task.kind), .layers = c->layers,
                     .heads = c->heads, .keys = T, .queries = Tq, .decoder = c->target_len != 0,
                     .key_label = (const char(*)[MAP_LABEL])labels,
                     .query_label = (const char(*)[MAP_LABEL])labels + T};
    qkv_status s = maps_write(dir, sub, prefix, suffix, what, &ml, maps);
    free(labels);
    return s;
}

/* attention/: the weights of every layer and head; gradients/: their gradient dA and the
 * scores' gradient dS, from one backward pass of the example's loss. */
static qkv_status write_attention(trainer *t, const char *dir) {
    const qkv_model_config *c = &t->model.cfg;
    size_t n = (size_t)c->layers * c->heads * t->target_len * c->seq_len;
    float *a = malloc(3 * n * sizeof *a);
    if (!a) return qkv_fail(QKV_ERR_NOMEM, "out of memory");
    trainer_attention(t, 0, a);
    trainer_attention_grads(t, 0, a + n, a + 2 * n);
    qkv_status s = write_maps(t, dir, "attention", "", "", "attention", a);
    if (s == QKV_OK)
        s = write_maps(t, dir, "gradients", "", "_dA", "gradient of the attention weights dA", a + n);
    if (s == QKV_OK)
        s = write_maps(t, dir, "gradients", "", "_dS", "gradient of the scores dS", a + 2 * n);
    free(a);
    return s;
}

/* ---- snapshots: snapshots/step<N>_layer<L>_head<H>.dat, the attention weights at step N ----
 * At step 0 and every K steps (--snapshot-every K), and, so that the frames are densest where
 * the attention changes fastest, at the steps between: every K / SNAPSHOT_PROBES steps the
 * attention is measured, and kept as a snapshot when it has moved by more than
 * SNAPSHOT_CHANGE since the last snapshot kept (snapshot_change). The last snapshot is
 * compared as its files hold it, read back, so that a resumed run, which reads it from the
 * directory, keeps the snapshots the uninterrupted run keeps. Measuring takes no random
 * numbers and touches no weight: the run's numbers are those of a run without snapshots. */
#define SNAPSHOT_PROBES 4
#define SNAPSHOT_CHANGE 0.1

static size_t snapshot_floats(const trainer *t) {
    const qkv_model_config *c = &t->model.cfg;
    return (size_t)c->layers * c->heads * t->target_len * c->seq_len;
}

/* How far the attention a (layers, heads, To, T) moved from b: the largest, over heads, of the
 * mean over query rows of the total variation distance ½ Σ_j |a_ij - b_ij| (0: the same; 1:
 * every row moved all its weight to other keys). */
static double snapshot_change(const trainer *t, const float *a, const float *b) {
    const qkv_model_config *c = &t->model.cfg;
    int Tq = t->target_len, T = c->seq_len;
    double most = 0;
    for (int head = 0; head < c->layers * c->heads; head++) {
        double moved = 0;
        for (int64_t k = (int64_t)head * Tq * T; k < (int64_t)(head + 1) * Tq * T; k++)
            moved += fabs((double)a[k] - b[k]);
        most = fmax(most, moved / 2 / Tq);
    }
    return most;
}

/* The snapshot of step `step` read back from the directory into run->snapshot_ref. */
static qkv_status read_snapshot(training_run *run, const trainer *t, const char *dir,
                                int64_t step) {
    const qkv_model_config *c = &t->model.cfg;
    if (!run->snapshot_ref && !(run->snapshot_ref = malloc(snapshot_floats(t) * sizeof(float))))
        return qkv_fail(QKV_ERR_NOMEM, "out of memory");
    char prefix[32];
    snprintf(prefix, sizeof prefix, "step%" PRId64 "_", step);
    return maps_read(dir, "snapshots", prefix, "", c->layers, c->heads, t->target_len,
                     c->seq_len, run->snapshot_ref);
}

/* The snapshot of this step: always (`always`), or when the attention has moved by more than
 * SNAPSHOT_CHANGE since the last one kept. */
static qkv_status snapshot(training_run *run, trainer *t, const char *dir, bool always) {
    float *a = malloc(snapshot_floats(t) * sizeof *a);
    if (!a) return qkv_fail(QKV_ERR_NOMEM, "out of memory");
    trainer_attention(t, 0, a);
    qkv_status s = QKV_OK;
    if (always || (run->snapshot_ref && snapshot_change(t, a, run->snapshot_ref) > SNAPSHOT_CHANGE)) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "step%" PRId64 "_", t->optim.step);
        s = write_maps(t, dir, "snapshots", prefix, "", "attention", a);
        if (s == QKV_OK) s = read_snapshot(run, t, dir, t->optim.step);
    }
    free(a);
    return s;
}

/* Finite weights can still give a loss that is not (an overflow in the forward pass): the
 * last training batch's loss and this step's held-out loss must be finite too, or the state is
 * not saved as a good one. */
static qkv_status check_losses(const training_run *run, const trainer *t) {
    bool batch = isfinite(t->last_loss);
    if (batch && (run->last_step != t->optim.step || isfinite(run->last.loss))) return QKV_OK;
    return qkv_fail(QKV_ERR_NUMERIC, "the %s loss is %s after step %" PRId64 ": training "
                    "diverged (lower the learning rate, or clip the gradients)",
                    batch ? "held-out" : "training",
                    isnan(batch ? run->last.loss : t->last_loss) ? "NaN" : "Inf", t->optim.step);
}

/* A checkpoint of the run, in the order of the commit protocol (io/rundir.c): metrics.csv
 * and the maps of this step first, model.safetensors, the commit record, last. A kill between
 * them leaves the previous checkpoint as the run's state, and the files written ahead of it
 * are trimmed or rewritten when the run resumes. A failure between them (the model cannot be
 * written) puts metrics.csv and the maps back as they were: no record is left ahead of the
 * model on disk. */
static qkv_status checkpoint(training_run *run, trainer *t, run_progress progress, void *user) {
    char path[RUN_FILE_PATH_LEN];
    snprintf(path, sizeof path, "%s/metrics.csv", run->dir.dir);
    qkv_status s = trainer_check_state(t, QKV_ERR_NUMERIC); /* before anything is written */
    if (s == QKV_OK) s = check_losses(run, t);
    if (s != QKV_OK) return s;
    if (progress) progress(RUN_SAVING, run, t, user);
    rundir_checkpoint_begin(&run->dir);
    s = metrics_write(&run->metrics, path);
    if (s == QKV_OK) s = write_attention(t, run->dir.dir);
    if (s == QKV_OK) {
        int64_t rows = t->metrics_rows;
        t->metrics_rows = run->metrics.n;
        snprintf(path, sizeof path, "%s/model.safetensors", run->dir.dir);
        s = trainer_save(t, path);
        if (s != QKV_OK) t->metrics_rows = rows;
    }
    rundir_checkpoint_end(&run->dir, s == QKV_OK);
    if (s == QKV_OK) {
        run->saved_step = t->optim.step;
        if (run->files_begun)
            run_files_committed(&run->files, t->optim.step, t->last_loss, t->last_train_acc);
        if (progress) progress(RUN_COMMITTED, run, t, user);
    }
    return s;
}

/* Held-out evaluations by default: every steps/20, and early on at 1, 2, 3, 5, 7, 10, 15, 20,
 * 30, 50, 70, 100, ... (about five a decade), where a model learns fastest. */
static bool default_eval_step(int64_t step, int64_t every) {
    if (step % every == 0) return true;
    static const int mantissa[] = {10, 15, 20, 30, 50, 70};
    for (int64_t decade = 1; decade <= step; decade *= 10)
        for (int i = 0; i < 6; i++)
            if (step * 10 == mantissa[i] * decade) return true;
    return step == 1 || step == 2 || step == 3 || step == 5 || step == 7;
}

/* Copies file `from` to `to` (atomically: a kill leaves no half copy). */
static qkv_status copy_file(const char *from, const char *to) {
    FILE *in;
    qkv_status s = io_fopen_regular(from, &in);
    if (s != QKV_OK) return s;
    atomic_file out;
    if ((s = atomic_open(&out, to)) != QKV_OK) {
        fclose(in);
        return s;
    }
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0 && fwrite(buf, 1, n, out.f) == n) {}
    bool failed = ferror(in) || ferror(out.f);
    fclose(in);
    if (failed) {
        atomic_abort(&out);
        return qkv_fail(QKV_ERR_IO, "cannot copy %s to %s", from, to);
    }
    return atomic_commit(&out);
}

static bool same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* A data run keeps byte-for-byte copies of its files in DIR (RUN_DATA_COPY, RUN_HELDOUT_COPY)
 * before its first checkpoint names them, so that the run directory alone evaluates the
 * model, wherever it is moved. The copies must give the checksum the examples were read with:
 * a file changed in between is refused. */
static qkv_status keep_data_files(trainer *t, const char *dir) {
    const dataset *d = t->data;
    char sub[RUN_FILE_PATH_LEN], to[2][RUN_FILE_PATH_LEN];
    qkv_status s = io_make_subdir(dir, "data", sub, sizeof sub);
    if (s != QKV_OK) return s;
    const char *from[2] = {d->path, d->heldout_path};
    snprintf(to[0], sizeof to[0], "%s/%s", dir, RUN_DATA_COPY);
    snprintf(to[1], sizeof to[1], "%s/%s", dir, RUN_HELDOUT_COPY);
    for (int k = 0; k < 2 && s == QKV_OK; k++)
        if (from[k][0] && !same_file(from[k], to[k])) /* a resume reads its own copies */
            s = copy_file(from[k], to[k]);
    if (s == QKV_OK && dataset_checksum(to[0], from[1][0] ? to[1] : NULL) != d->checksum)
        s = qkv_fail(QKV_ERR_MISMATCH, "%s changed while the run began: it is not what the "
                     "examples were read from", from[0]);
    t->data_copied = s == QKV_OK;
    return s;
}

/* The run directory opened, a resumed run's metrics read back, and the records begun. */
static qkv_status begin(training_run *run, trainer *t, run_progress progress, void *user) {
    const run_options *o = &run->options;
    qkv_status s;
    if (o->out_dir) {
        if ((s = rundir_open(&run->dir, o->out_dir)) != QKV_OK) return s;
        run->has_dir = true;
        /* its checkpoint is already there */
        run->dir.committed = o->resume_dir && !strcmp(o->out_dir, o->resume_dir);
        /* a new run does not mix its files with another run's */
        if (!run->dir.committed && (s = rundir_claim(&run->dir, o->force)) != QKV_OK) return s;
    }
    if (o->resume_dir) {
        /* The checkpoint decides: metrics rows and snapshots after its step are what a kill
         * left ahead of it; they are dropped, and the steps are done again. */
        char path[RUN_FILE_PATH_LEN];
        snprintf(path, sizeof path, "%s/metrics.csv", o->resume_dir);
        if ((s = metrics_read(&run->metrics, path, t->optim.step)) != QKV_OK) return s;
        if (t->metrics_rows >= 0 && run->metrics.n != t->metrics_rows)
            return qkv_fail(QKV_ERR_FORMAT, "%s holds %d rows up to step %" PRId64 ", but its "
                            "model was saved with %" PRId64 ": they are not of the same run",
                            path, run->metrics.n, t->optim.step, t->metrics_rows);
    }
    if (run->has_dir && t->data && (s = keep_data_files(t, o->out_dir)) != QKV_OK) return s;
    run->started = true;
    if (run->has_dir) {
        rundir_trim_snapshots(&run->dir, run->start_step);
        if (run->dir.committed && progress) progress(RUN_COMMITTED, run, t, user);
    }
    /* A finished run resumed in its own directory with no step left: the run is evaluated
     * and reported, and no file is written; summary.json keeps its wall time and loss. */
    bool finished = run->dir.committed && t->optim.step >= t->cfg.steps &&
                    run_files_done(o->out_dir, t->optim.step);
    if (o->out_dir && !finished) {
        s = run_files_begin(&run->files, o->out_dir, o->resume_dir ? o->resume_dir : o->out_dir,
                            run_config_json(t, o), t->optim.step, run->metrics.rows,
                            run->metrics.n);
        if (s != QKV_OK) return s;
        run->files_begun = true;
        if (run->dir.committed) /* a resumed directory: its model is on disk already */
            run_files_committed(&run->files, t->optim.step, t->last_loss, t->last_train_acc);
    }
    return QKV_OK;
}

qkv_status trainer_run(trainer *t, const run_options *o, run_progress progress, void *user,
                       training_run *run) {
    memset(run, 0, sizeof *run);
    qkv_status s = QKV_OK; /* the schema's ranges, as the command line checks them */
    if ((o->eval_every && (s = train_option_check("eval_every", (double)o->eval_every))) ||
        (s = train_option_check("save_every", (double)o->save_every)) != QKV_OK ||
        (s = train_option_check("snapshot_every", (double)o->snapshot_every)) != QKV_OK)
        return s;
    run->options = *o;
    int64_t total = t->cfg.steps;
    long every = o->eval_every ? o->eval_every : (long)(total >= 20 ? total / 20 : 1);
    run->options.eval_every = every;
    run->start_step = run->saved_step = t->optim.step;
    run->last_step = -1;
    metrics_init(&run->metrics, t->model.cfg.layers, scored_heads(t));
    if (trainer_has_icl(t)) /* the in-context score: eval_result's icl_score */
        metrics_add_icl_column(&run->metrics);
    if (t->cfg.task.kind == QKV_TASK_MODULAR) /* the progress measures */
        metrics_add_fourier_columns(&run->metrics);
    const char *dir = o->out_dir;
    s = begin(run, t, progress, user);
    if (s != QKV_OK) return s;
    if (progress) progress(RUN_BEGIN, run, t, user);
    /* A new run's metrics start at step 0, before any update: the held-out columns evaluate
     * the initial weights, and loss and train_acc are the first training batch's under those
     * same weights (step 1's forward pass, measured before its update); lr is 0. */
    eval_result at_start = {0};
    fourier_measures f = {0};
    bool row0 = run->start_step == 0;
    if (row0) at_start = trainer_evaluate(t), run->measured_start = measure(t, &run->start_measures);
    if (o->snapshot_every && run->start_step == 0 && (s = snapshot(run, t, dir, true)) != QKV_OK)
        return s;
    /* a resumed run compares with the last snapshot its directory kept */
    int64_t kept = o->snapshot_every && run->start_step > 0 && run->has_dir
                       ? rundir_last_snapshot(&run->dir, run->start_step) : -1;
    if (kept >= 0 && (s = read_snapshot(run, t, dir, kept)) != QKV_OK) return s;
    long probe = o->snapshot_every / SNAPSHOT_PROBES > 0 ? o->snapshot_every / SNAPSHOT_PROBES : 1;
    while (t->optim.step < total) {
        if ((s = trainer_step(t)) != QKV_OK) return s;
        int64_t step = t->optim.step;
        if (step == 1 && row0)
            add_row(run, t, &at_start, 0, 0, run->measured_start ? &run->start_measures : NULL);
        if ((o->eval_every ? step % every == 0 : default_eval_step(step, every)) || step == total) {
            run->last = trainer_evaluate(t);
            run->last_step = step;
            bool measured = measure(t, &f);
            add_row(run, t, &run->last, step, t->optim.lr, measured ? &f : NULL);
            if (measured) fourier_measures_free(&f);
            if (progress) progress(RUN_EVALUATED, run, t, user);
        }
        if (progress) progress(RUN_STEPPED, run, t, user);
        if (o->snapshot_every && step % probe == 0 &&
            (s = snapshot(run, t, dir, step % o->snapshot_every == 0)) != QKV_OK)
            return s;
        if (run->has_dir && ((o->save_every && step % o->save_every == 0) || step == total)) {
            if ((s = checkpoint(run, t, progress, user)) != QKV_OK) return s;
        }
    }
    if (progress) progress(RUN_TRAINED, run, t, user);
    if (t->optim.step == run->start_step) { /* nothing left to train: the model as it is */
        run->last = trainer_evaluate(t);
        run->last_step = t->optim.step;
        if (run->files_begun) {
            run_evaluation e = evaluation_of(&run->last, t->optim.step);
            run_files_note(&run->files, &e);
            bool measured = measure(t, &f); /* the phases of the rows kept, and its keys */
            if (run->metrics.first_fourier_column >= 0)
                run_files_grokking(&run->files, grokking_json(&run->metrics, measured ? f.keys : NULL,
                                                              measured ? f.n_keys : -1));
            if (measured) fourier_measures_free(&f);
        }
    }
    /* a resume with no steps left, into a new directory */
    if (run->has_dir && !run->dir.committed && (s = checkpoint(run, t, progress, user)) != QKV_OK)
        return s;
    /* a run without a directory ends the same way: a state it would refuse to save fails */
    if (!run->has_dir && ((s = trainer_check_state(t, QKV_ERR_NUMERIC)) != QKV_OK ||
                          (s = check_losses(run, t)) != QKV_OK))
        return s;
    /* summary.json's "report": every number of the summary qkv train prints */
    if (run->files_begun)
        run_files_report(&run->files, train_report_json(t, &run->last, &run->metrics));
    return QKV_OK;
}

qkv_status trainer_run_end(training_run *run, const trainer *t, int exit_code, const char *error) {
    qkv_status s = QKV_OK;
    /* A failed run leaves its directory at the model's step: the snapshots taken after it
     * are dropped, and run_files_end cuts metrics.jsonl back to the model's rows. */
    if (exit_code != 0 && run->has_dir && run->started)
        rundir_trim_snapshots(&run->dir, run->saved_step);
    if (run->files_begun)
        s = run_files_end(&run->files, t->optim.step, t->last_loss, t->last_train_acc, exit_code,
                          error);
    run->files_begun = false;
    /* a run that committed nothing leaves nothing, its summary.json aside */
    if (run->has_dir) rundir_close(&run->dir);
    run->has_dir = false;
    metrics_free(&run->metrics);
    if (run->measured_start) fourier_measures_free(&run->start_measures);
    run->measured_start = false;
    free(run->snapshot_ref);
    run->snapshot_ref = NULL;
    return s;
}
