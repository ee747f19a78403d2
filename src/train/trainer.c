/* trainer.c - the training layer: batches, steps, held-out evaluation. */
#include "train/trainer.h"
#include "train/options.h"

#include "engine/engine.h"
#include "io/io.h"
#include "model/model.h"
#include "kernels/kernels.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Sequences in shard i of a batch split into `shards` as evenly as can be. */
static int shard_size(int batch, int shards, int i) {
    return (i + 1) * batch / shards - i * batch / shards;
}

/* A data run: reads the examples and sets the task and the model's sizes from them. */
static qkv_status init_data(trainer *t) {
    train_config *c = &t->cfg;
    t->data = malloc(sizeof *t->data);
    if (!t->data) return qkv_fail(QKV_ERR_NOMEM, "out of memory");
    /* a loaded model's run keeps copies of the files: those are read, where they are */
    const char *data = c->data_copy[0] ? c->data_copy : c->data_path;
    const char *held = c->heldout_copy[0] ? c->heldout_copy : c->heldout_path;
    qkv_status s = dataset_load(t->data, data, held[0] ? held : NULL);
    /* the files the run was given stay the run's inputs too: no output replaces them */
    if (c->data_copy[0]) io_protect(c->data_path);
    if (c->heldout_copy[0]) io_protect(c->heldout_path);
    if (s != QKV_OK) {
        free(t->data);
        t->data = NULL;
        return s;
    }
    const dataset *d = t->data;
    if (c->data_checksum && c->data_checksum != d->checksum)
        return qkv_fail(QKV_ERR_MISMATCH, "%s%s%s changed since the model was trained on it",
                        d->path, d->heldout_path[0] ? " or " : "", d->heldout_path);
    c->data_checksum = d->checksum;
    c->task = (qkv_task){.kind = QKV_TASK_DATA, .seq_len = d->in_len, .vocab = d->vocab,
                         .n_outputs = d->n_outputs};
    c->model.vocab = d->vocab;
    c->model.seq_len = d->in_len;
    c->model.target_len = d->cross ? d->out_len : 0;
    return QKV_OK;
}

qkv_status train_check_betas(double beta1, double beta2) {
    double beta[2] = {beta1, beta2};
    for (int i = 0; i < 2; i++)
        if (!(beta[i] >= 0 && beta[i] < TRAIN_MAX_BETA)) /* 0: the default */
            return qkv_fail(QKV_ERR_VALUE, "%s %g is out of range (above 0, below %d)",
                            field_name(i ? "beta2" : "beta1"), beta[i], TRAIN_MAX_BETA);
    return QKV_OK;
}

/* modular's examples: every pair a b =, the training pairs (qkv_task_modular_split's first
 * n_train) into train_tokens and the others into held_tokens, each set in the order of the
 * pair's index a·P + b. */
static qkv_status modular_sets(trainer *t) {
    const qkv_task *task = &t->cfg.task;
    int32_t P = task->modulus, N = P * P;
    int32_t *order = malloc((size_t)N * sizeof *order);
    uint8_t *trains = calloc((size_t)N, 1);
    if (!order || !trains) {
        free(order), free(trains);
        trainer_free(t);
        return qkv_fail(QKV_ERR_NOMEM, "out of memory setting up training");
    }
    qkv_task_modular_split(task, order);
    for (int32_t i = 0; i < task->n_train; i++) trains[order[i]] = 1;
    int n[2] = {0, 0}; /* held, train */
    for (int32_t k = 0; k < N; k++) {
        int32_t x[3] = {k / P, k % P, P};
        int32_t *to = trains[k] ? t->train_tokens : t->held_tokens;
        int32_t *ty = trains[k] ? t->train_targets : t->held_targets;
        memcpy(to + (size_t)n[trains[k]] * 3, x, sizeof x);
        qkv_task_targets(task, x, ty + (size_t)n[trains[k]] * 3);
        n[trains[k]]++;
    }
    free(order), free(trains);
    return QKV_OK;
}

qkv_status trainer_check_config(const train_config *cfg) {
    if (cfg->batch < 1 || cfg->batch > TRAIN_MAX_BATCH)
        return qkv_fail(QKV_ERR_VALUE, "%s %d is out of range (1..%d)", field_name("batch"),
                        cfg->batch, TRAIN_MAX_BATCH);
    if (!(cfg->lr > 0) || cfg->lr > TRAIN_MAX_LR)
        return qkv_fail(QKV_ERR_VALUE, "%s %g is out of range (above 0..%g)", field_name("lr"),
                        cfg->lr, TRAIN_MAX_LR);
    /* the rest of the schema's ranges (train/options.c), as the command line checks them */
    qkv_status st = QKV_OK;
    if ((st = train_option_check("steps", (double)cfg->steps)) != QKV_OK ||
        (st = train_option_check("warmup", (double)cfg->warmup)) != QKV_OK ||
        (st = train_option_check("weight_decay", cfg->weight_decay)) != QKV_OK ||
        (st = train_option_check("clip", cfg->clip)) != QKV_OK ||
        (st = train_check_betas(cfg->beta1, cfg->beta2)) != QKV_OK)
        return st;
    const qkv_task *task = &cfg->task;
    if (cfg->full_batch && (task->kind != QKV_TASK_MODULAR || cfg->batch != task->n_train))
        return qkv_fail(QKV_ERR_VALUE, "%s full is every training pair of modular (%d), not %d "
                        "sequences of %s", field_name("batch"), task->n_train, cfg->batch,
                        qkv_task_name(task->kind));
    if (cfg->model.vocab < task->vocab || cfg->model.seq_len != task->seq_len ||
        (!cfg->data_path[0] && cfg->model.target_len != task->target_len))
        return qkv_fail(QKV_ERR_VALUE, "the model does not fit the task");
    return qkv_model_config_check(&cfg->model);
}

qkv_status trainer_init(trainer *t, const train_config *config) {
    return trainer_init_for(t, config, NULL);
}

qkv_status trainer_init_for(trainer *t, const train_config *config, const char *purpose) {
    memset(t, 0, sizeof *t);
    t->metrics_rows = -1;
    t->cfg = *config;
    const train_config *cfg = &t->cfg;
    if (cfg->data_path[0]) {
        qkv_status st = init_data(t);
        if (st != QKV_OK) {
            trainer_free(t);
            return st;
        }
    }
    qkv_status st = trainer_check_config(cfg);
    if (st != QKV_OK) {
        trainer_free(t);
        return st;
    }
    const qkv_task *task = &cfg->task;
    /* Before anything large is allocated: the parameters (with gradients and optimizer
     * state), one training step's graphs (one per shard) and one evaluation batch's (forward
     * only: half a step's estimate at EVAL_BATCH). Each estimate bounds what its arena really
     * takes (tests/test_faults.c checks, and prints the table of docs/errors.md), so this is
     * the peak. */
    const char *what;
    int shards = cfg->batch < TRAIN_SHARDS ? cfg->batch : TRAIN_SHARDS;
    /* the model's weights, gradients and optimizer state, and each further shard's gradients */
    double params = qkv_model_param_bytes(&cfg->model) * (1 + 0.25 * (shards - 1)), step = 0;
    for (int i = 0; i < shards; i++)
        step += qkv_model_step_bytes(&cfg->model, shard_size(cfg->batch, shards, i));
    double eval = qkv_model_step_bytes(&cfg->model, EVAL_BATCH) / 2, have = memory_limit(&what);
    if (params + step + eval > have / 2) {
        char lower_params[128], lower_step[128], lower_eval[128];
        snprintf(lower_params, sizeof lower_params, "%s, %s or %s", field_name("d_model"),
                 field_name("vocab"), field_name("layers"));
        snprintf(lower_step, sizeof lower_step, "%s, %s or %s", field_name("batch"),
                 field_name("seq_len"), field_name("d_model"));
        snprintf(lower_eval, sizeof lower_eval, "%s or %s", field_name("seq_len"),
                 field_name("d_model"));
        if (cfg->data_path[0]) { /* the file sets the length and the vocabulary, not options */
            snprintf(lower_params, sizeof lower_params, "%s or %s (the data file sets the "
                     "vocabulary: %d tokens)", field_name("d_model"), field_name("layers"),
                     cfg->model.vocab);
            snprintf(lower_step, sizeof lower_step, "%s or %s, or shorten the data file's "
                     "longest example (%d tokens)", field_name("batch"), field_name("d_model"),
                     cfg->model.seq_len);
            snprintf(lower_eval, sizeof lower_eval, "%s, or shorten the data file's longest "
                     "example (%d tokens)", field_name("d_model"), cfg->model.seq_len);
        }
        /* the message reads the config, which trainer_free clears: first the message; a
         * purpose of the caller's own (a model loaded, a self-test) has no options to lower */
        const char *unit = memory_unit(have);
        char lower[160] = "";
        if (!purpose)
            snprintf(lower, sizeof lower, ": lower %s",
                     params > step && params > eval ? lower_params
                     : step >= eval                 ? lower_step
                                                    : lower_eval);
        st = qkv_fail(QKV_ERR_NOMEM, "%s needs about %.1f %s (parameters %.1f, a %sstep of %d "
                      "sequences %.1f, evaluation %.1f), more than half of %s (%.1f %s)%s",
                      purpose ? purpose : "training", memory_in(params + step + eval, have),
                      unit, memory_in(params, have), purpose ? "training " : "", cfg->batch,
                      memory_in(step, have), memory_in(eval, have), what, memory_in(have, have),
                      unit, lower);
        trainer_free(t);
        return st;
    }
    st = qkv_model_init(&t->model, &cfg->model, cfg->seed);
    if (st != QKV_OK) {
        trainer_free(t);
        return purpose ? qkv_fail(st, "%s: %s", purpose, qkv_last_error()) : st;
    }
    qkv_optim_init(&t->optim, &t->model, cfg->optim, cfg->lr);
    t->optim.weight_decay = cfg->weight_decay;
    t->optim.clip = cfg->clip;
    /* 0: qkv_optim_init's, kept in the config as the values they are */
    if (t->cfg.beta1 == 0) t->cfg.beta1 = t->optim.beta1;
    if (t->cfg.beta2 == 0) t->cfg.beta2 = t->optim.beta2;
    t->optim.beta1 = t->cfg.beta1;
    t->optim.beta2 = t->cfg.beta2;
    t->data_rng = qkv_rng_seed(cfg->seed ^ 0x5eed0da7a0000001ull);
    int T = task->seq_len, To = cfg->model.target_len ? cfg->model.target_len : T;
    t->target_len = To;
    bool modular = task->kind == QKV_TASK_MODULAR;
    int64_t pairs = (int64_t)task->modulus * task->modulus;
    t->n_held = t->data ? t->data->n_held : modular ? (int)(pairs - task->n_train) : TRAIN_HELDOUT;
    size_t bt = (size_t)cfg->batch * (size_t)T, ht = (size_t)t->n_held * (size_t)T;
    size_t bto = (size_t)cfg->batch * (size_t)To, hto = (size_t)t->n_held * (size_t)To;
    t->nshards = shards;
    for (int i = 0; i < t->nshards; i++) {
        train_shard *sh = &t->shard[i];
        sh->first = i * cfg->batch / t->nshards;
        sh->count = shard_size(cfg->batch, t->nshards, i);
        /* a step never outgrows it */
        sh->ctx = qkv_ctx_new((size_t)qkv_model_step_bytes(&cfg->model, sh->count) + (1 << 20));
        if (!sh->ctx || (i > 0 && model_replica(&sh->replica, &t->model) != QKV_OK)) {
            trainer_free(t);
            return qkv_fail(QKV_ERR_NOMEM, "out of memory %s", purpose ? purpose : "setting up training");
        }
    }
    /* reserved at its estimate, as each shard's: an evaluation never grows it (past what was
     * checked, into the arena's abort) */
    t->eval_ctx = qkv_ctx_new((size_t)eval + (1 << 20));
    t->tokens = malloc(bt * sizeof *t->tokens);
    t->targets = malloc(bto * sizeof *t->targets);
    t->held_tokens = malloc(ht * sizeof *t->held_tokens);
    t->held_targets = malloc(hto * sizeof *t->held_targets);
    t->ideal = malloc((size_t)T * (size_t)T);
    if (t->data) {
        t->lengths = malloc((size_t)cfg->batch * sizeof *t->lengths);
        t->held_lengths = malloc((size_t)t->n_held * sizeof *t->held_lengths);
    }
    if (modular) {
        t->n_train = task->n_train;
        t->train_tokens = malloc((size_t)t->n_train * T * sizeof *t->train_tokens);
        t->train_targets = malloc((size_t)t->n_train * To * sizeof *t->train_targets);
    }
    if (!t->eval_ctx || !t->tokens || !t->targets || !t->held_tokens ||
        !t->held_targets || !t->ideal || (t->data && (!t->lengths || !t->held_lengths)) ||
        (modular && (!t->train_tokens || !t->train_targets))) {
        trainer_free(t);
        return qkv_fail(QKV_ERR_NOMEM, "out of memory %s", purpose ? purpose : "setting up training");
    }
    qkv_ctx_set_no_grad(t->eval_ctx, true);
    /* The held-out set depends only on the task and the seed, so eval rebuilds it exactly. */
    if (t->data) { /* the file's held-out examples, in file order */
        memcpy(t->held_tokens, t->data->held_x, ht * sizeof *t->held_tokens);
        memcpy(t->held_targets, t->data->held_y, hto * sizeof *t->held_targets);
        memcpy(t->held_lengths, t->data->held_len, (size_t)t->n_held * sizeof *t->held_lengths);
        return QKV_OK;
    }
    if (modular) return modular_sets(t);
    qkv_rng held = qkv_rng_seed(cfg->seed ^ 0x4e1d000700000007ull);
    for (int i = 0; i < TRAIN_HELDOUT; i++)
        qkv_task_sample(task, &held, true, t->held_tokens + i * T, t->held_targets + i * To);
    return QKV_OK;
}

void trainer_free(trainer *t) {
    for (int i = 0; i < t->nshards; i++) {
        qkv_model_free(&t->shard[i].replica);
        qkv_ctx_free(t->shard[i].ctx);
    }
    qkv_model_free(&t->model);
    qkv_ctx_free(t->eval_ctx);
    free(t->tokens);
    free(t->targets);
    free(t->held_tokens);
    free(t->held_targets);
    free(t->lengths);
    free(t->held_lengths);
    free(t->train_tokens);
    free(t->train_targets);
    free(t->ideal);
    if (t->data) dataset_free(t->data);
    free(t->data);
    memset(t, 0, sizeof *t);
}

/* Counts positions whose argmax logit is the target; returns the number with a target. The
 * rows are shared among threads in parts, each counting its own (whole numbers: any order
 * gives the same counts). */
#define COUNT_PARTS 64
static int64_t count_correct(const qkv_tensor *logits, const int32_t *targets, int64_t *correct) {
    int64_t V = logits->shape[2], rows = logits->size / V;
    int64_t parts = kernel_team((double)logits->size, KERNEL_PARALLEL_ELEMS);
    if (parts > COUNT_PARTS) parts = COUNT_PARTS;
    int64_t right[COUNT_PARTS] = {0}, counted[COUNT_PARTS] = {0}, n = 0;
    KERNEL_FOR_STATIC(parts, p, parts, {
        for (int64_t r = rows * p / parts; r < rows * (p + 1) / parts; r++)
            if (targets[r] >= 0) {
                right[p] += qkv_argmax(logits, r * V, V) == targets[r];
                counted[p]++;
            }
    });
    for (int64_t p = 0; p < parts; p++) {
        *correct += right[p];
        n += counted[p];
    }
    return n;
}

double trainer_lr(const train_config *c, int64_t step) {
    double lr = c->lr;
    if (c->warmup > 0 && step <= c->warmup) lr *= (double)step / (double)c->warmup;
    if (c->cosine && c->steps > c->warmup) {
        double progress = (double)(step - c->warmup) / (double)(c->steps - c->warmup);
        if (progress > 0) lr *= 0.5 * (1 + cos(QKV_PI * (progress < 1 ? progress : 1)));
    }
    return lr;
}

void trainer_sample(const trainer *t, qkv_rng *rng, int batch, int32_t *tokens, int32_t *targets,
                    int32_t *lengths) {
    int T = t->cfg.task.seq_len, To = t->target_len;
    if (t->data) { /* each sequence: training example below(n_train) */
        const dataset *d = t->data;
        for (int b = 0; b < batch; b++) {
            size_t e = qkv_rng_below(rng, (uint32_t)d->n_train);
            memcpy(tokens + (size_t)b * T, d->train_x + e * T, (size_t)T * sizeof *tokens);
            memcpy(targets + (size_t)b * To, d->train_y + e * To, (size_t)To * sizeof *targets);
            lengths[b] = d->train_len[e];
        }
        return;
    }
    if (t->train_tokens) { /* modular: every training pair in order, or below(n_train) each */
        bool full = t->cfg.full_batch && batch == t->n_train;
        for (int b = 0; b < batch; b++) {
            size_t e = full ? (size_t)b : qkv_rng_below(rng, (uint32_t)t->n_train);
            memcpy(tokens + (size_t)b * T, t->train_tokens + e * T, (size_t)T * sizeof *tokens);
            memcpy(targets + (size_t)b * To, t->train_targets + e * To, (size_t)To * sizeof *targets);
        }
        return;
    }
    for (int b = 0; b < batch; b++)
        qkv_task_sample(&t->cfg.task, rng, false, tokens + (size_t)b * T, targets + (size_t)b * To);
}

qkv_status trainer_step(trainer *t) {
    trainer_sample(t, &t->data_rng, t->cfg.batch, t->tokens, t->targets, t->lengths);
    return trainer_update(t);
}

/* Shard s's forward and backward pass; its gradients land in its own model's. `total` is the
 * number of targets in the whole batch. */
static void shard_step(trainer *t, int s, int64_t total) {
    train_shard *sh = &t->shard[s];
    qkv_model *m = s ? &sh->replica : &t->model;
    qkv_ctx *ctx = sh->ctx;
    profile_enter(PROFILE_OTHER); /* each op then enters its own part (kernels.h) */
    int T = t->cfg.task.seq_len, To = t->target_len;
    const int32_t *x = t->tokens + (size_t)sh->first * T, *y = t->targets + (size_t)sh->first * To;
    qkv_ctx_reset(ctx);
    /* Only the positions where some sequence of the shard has a target reach the loss (one of
     * modular's three): the model computes the logits there only (qkv_model_forward_at), with
     * the bits of every position's, and the targets are picked to match. */
    int32_t *at = qkv_ctx_alloc(ctx, (size_t)To * sizeof *at);
    int n = 0;
    for (int i = 0; i < To; i++) {
        bool any = false;
        for (int b = 0; b < sh->count && !any; b++) any = y[(size_t)b * To + i] >= 0;
        if (any) at[n++] = i;
    }
    if (n == 0) at[n++] = To - 1; /* nothing to learn: one position, whose loss is 0 */
    sh->positions = n;
    qkv_tensor *logits = qkv_model_forward_at(m, ctx, x, t->lengths ? t->lengths + sh->first : NULL,
                                              sh->count, n, at);
    qkv_tensor *targets = qkv_new(ctx, QKV_I32, 2, (int64_t[]){sh->count, n});
    int32_t *picked = targets->data;
    for (int b = 0; b < sh->count; b++)
        for (int i = 0; i < n; i++) picked[(size_t)b * n + i] = y[(size_t)b * To + at[i]];
    qkv_tensor *mean = qkv_cross_entropy(ctx, logits, targets, -1);
    sh->correct = 0;
    sh->counted = count_correct(logits, picked, &sh->correct);
    /* The batch's loss is the mean over all its targets: each shard's mean, weighted by its
     * share of them. */
    qkv_tensor *loss = qkv_scale(ctx, mean, total ? (double)sh->counted / (double)total : 0);
    sh->loss = qkv_get(loss, 0);
    qkv_zero_grad(m->params);
    if (isfinite(sh->loss)) qkv_backward(loss);
}

/* The batch's gradient into the model's: shard 0's (already there) plus the others', in
 * shard order. Elementwise, so the elements are shared among the threads of the region it is
 * called in (or done by the caller alone outside one). */
static void sum_shard_grads(trainer *t) {
    for (int i = 0; i < t->model.nparams; i++) {
        const qkv_tensor *p = t->model.param[i];
        if (p->dtype == QKV_F64) {
            double *g = p->grad;
#pragma omp for schedule(static) nowait
            for (int64_t j = 0; j < p->size; j++)
                for (int s = 1; s < t->nshards; s++)
                    g[j] += ((const double *)t->shard[s].replica.param[i]->grad)[j];
        } else {
            float *g = p->grad;
#pragma omp for schedule(static) nowait
            for (int64_t j = 0; j < p->size; j++)
                for (int s = 1; s < t->nshards; s++)
                    g[j] += ((const float *)t->shard[s].replica.param[i]->grad)[j];
        }
    }
}

static double seconds_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Whether this step's shards run side by side (see shard_layout). With one thread, or one
 * shard, they run in turn; with threads for each shard but fewer than two each, side by side;
 * with more, the first step is in turn (it grows the arenas: not timed), the next
 * 2·SHARD_LAYOUT_TRIALS alternate and are timed, and the faster layout is kept from then on
 * (until the thread count changes). */
static bool shards_side_by_side(trainer *t, int threads) {
    int S = t->nshards;
    if (S < 2 || threads < S) return false;
    if (threads < 2 * S) return true;
    shard_layout *l = &t->layout;
    if (l->threads != threads) *l = (shard_layout){.threads = threads, .best = {INFINITY, INFINITY}};
    if (l->steps == 0) return false;
    if (l->steps <= 2 * SHARD_LAYOUT_TRIALS) return l->steps % 2 == 0;
    return l->best[1] < l->best[0];
}

qkv_status trainer_update(trainer *t) {
    const train_config *c = &t->cfg;
    int64_t total = 0, rows = (int64_t)c->batch * t->target_len;
    for (int64_t i = 0; i < rows; i++) total += t->targets[i] >= 0;
    int S = t->nshards;
    /* Shards side by side, one thread each, when there are threads for them but not enough
     * to share each shard's ops among several: ops on a few sequences are too short to split,
     * whole passes are not. With one thread or one shard they run one after the other, each
     * op on every thread; with two threads or more per shard, in the layout that measured
     * faster. Either way each shard computes the same bits, so the choice never shows in the
     * results. */
    int threads = kernel_threads();
    bool side_by_side = shards_side_by_side(t, threads);
    double start = seconds_now();
    if (side_by_side) { /* for the profile, as KERNEL_FOR_ (kernels.h): thread 0 forks and
                         * waits for the team in PROFILE_WAIT */
        profile_enter(PROFILE_WAIT);
#pragma omp parallel /* every thread, though S work: see KERNEL_FOR_ (kernels.h) */
        {
#pragma omp for schedule(static) nowait
            for (int s = 0; s < S; s++) shard_step(t, s, total);
            profile_enter(PROFILE_WAIT);
#pragma omp barrier
            profile_enter(PROFILE_OPTIMIZER);
            sum_shard_grads(t); /* after the barrier: every shard is done */
            profile_enter(PROFILE_WAIT);
        }
        profile_enter(PROFILE_OPTIMIZER); /* the team has ended: the update follows */
    } else {
        for (int s = 0; s < S; s++) shard_step(t, s, total);
        profile_enter(PROFILE_OPTIMIZER);
        sum_shard_grads(t);
    }
    shard_layout *l = &t->layout;
    if (S > 1 && threads >= 2 * S && l->steps <= 2 * SHARD_LAYOUT_TRIALS) {
        double took = seconds_now() - start;
        if (l->steps > 0 && took < l->best[side_by_side]) l->best[side_by_side] = took;
        l->steps++;
    }
    double loss = 0;
    int64_t correct = 0, counted = 0;
    for (int s = 0; s < S; s++) {
        loss += t->shard[s].loss;
        correct += t->shard[s].correct;
        counted += t->shard[s].counted;
    }
    t->last_loss = loss;
    t->last_train_acc = counted ? (double)correct / (double)counted : 0;
    if (!isfinite(loss))
        return qkv_fail(QKV_ERR_NUMERIC, "the loss became %s at step %" PRId64
                        ": training diverged (lower %s)", isnan(loss) ? "NaN" : "Inf",
                        t->optim.step + 1, field_name("lr"));
    t->optim.lr = trainer_lr(c, t->optim.step + 1);
    double norm = qkv_optim_step(&t->optim);
    profile_enter(PROFILE_OTHER);
    if (!isfinite(norm))
        return qkv_fail(QKV_ERR_NUMERIC, "the gradient became %s at step %" PRId64
                        ": training diverged (lower %s)", isnan(norm) ? "NaN" : "Inf",
                        t->optim.step, field_name("lr"));
    return QKV_OK;
}

/* What an evaluation reads: the model, its task, its output length, and scratch for one
 * sequence's ideal pattern (T, T). */
typedef struct {
    qkv_model *model;
    const qkv_task *task;
    int target_len;
    uint8_t *ideal;
} evaluation;

/* Adds one held-out sequence's attention (attn[l] is (B, H, T, T); this is batch row b) to
 * the running sums of the ideal-pattern mass and the head scores. */
typedef struct {
    double mass[QKV_MAX_LAYERS][EVAL_MAX_HEADS];
    double prev[QKV_MAX_LAYERS][EVAL_MAX_HEADS], dup[QKV_MAX_LAYERS][EVAL_MAX_HEADS],
        ind[QKV_MAX_LAYERS][EVAL_MAX_HEADS];
    double entropy[QKV_MAX_LAYERS][EVAL_MAX_HEADS];
    int64_t mass_rows[QKV_MAX_LAYERS], prev_rows, dup_rows, ind_rows, entropy_rows;
} attention_sums;

/* Adds -Σ a log a of each query row of batch row b to the entropy sums: the real query rows
 * (the first len; an encoder-decoder's every decoder row), over the keys (a masked key's
 * weight is 0 and adds nothing). */
static void add_entropy(const evaluation *e, qkv_tensor *const *attn, int b, int len,
                        attention_sums *sum) {
    int T = e->task->seq_len, H = e->model->cfg.heads, L = e->model->cfg.layers;
    int Hs = H < EVAL_MAX_HEADS ? H : EVAL_MAX_HEADS, Tq = e->target_len;
    int rows = e->model->cfg.target_len ? Tq : len;
    sum->entropy_rows += rows;
    for (int l = 0; l < L; l++)
        for (int h = 0; h < Hs; h++)
            for (int i = 0; i < rows; i++) {
                int64_t row = (((int64_t)b * H + h) * Tq + i) * T;
                for (int j = 0; j < T; j++) {
                    double a = qkv_get(attn[l], row + j);
                    if (a > 0) sum->entropy[l][h] -= a * log(a);
                }
            }
}

static void add_attention(const evaluation *e, qkv_tensor *const *attn, int b,
                          const int32_t *x, int len, attention_sums *sum) {
    const qkv_task *task = e->task;
    int T = task->seq_len, H = e->model->cfg.heads, L = e->model->cfg.layers;
    int Hs = H < EVAL_MAX_HEADS ? H : EVAL_MAX_HEADS;
    int Tq = e->target_len; /* query rows: T, or an encoder-decoder's To */
    for (int l = 0; l < L && task->kind != QKV_TASK_DATA; l++) {
        qkv_task_ideal_layer(task, x, l, L, e->ideal);
        for (int i = 0; i < Tq; i++) {
            bool has_ideal = false;
            for (int j = 0; j < T; j++) has_ideal |= e->ideal[i * T + j];
            if (!has_ideal) continue;
            sum->mass_rows[l]++;
            for (int h = 0; h < Hs; h++) {
                int64_t row = (((int64_t)b * H + h) * Tq + i) * T;
                for (int j = 0; j < T; j++)
                    if (e->ideal[i * T + j]) sum->mass[l][h] += qkv_get(attn[l], row + j);
            }
        }
    }
    if (e->model->cfg.target_len) return; /* the head scores are of self-attention */
    for (int i = 0; i < len; i++) { /* the real tokens: padding never holds a score */
        bool has_dup = false, has_ind = false;
        for (int j = 0; j < i; j++) has_dup |= x[j] == x[i];
        for (int j = 1; j <= i; j++) has_ind |= x[j - 1] == x[i];
        sum->prev_rows += i > 0;
        sum->dup_rows += has_dup;
        sum->ind_rows += has_ind;
        for (int l = 0; l < L; l++)
            for (int h = 0; h < Hs; h++) {
                int64_t row = (((int64_t)b * H + h) * T + i) * T;
                if (i > 0) sum->prev[l][h] += qkv_get(attn[l], row + i - 1);
                for (int j = 0; j < i; j++)
                    if (x[j] == x[i]) sum->dup[l][h] += qkv_get(attn[l], row + j);
                for (int j = 1; j <= i; j++)
                    if (x[j - 1] == x[i]) sum->ind[l][h] += qkv_get(attn[l], row + j);
            }
    }
}

/* -log softmax(logits' row r)[target], in double: one position's cross-entropy. */
static double position_loss(const qkv_tensor *logits, int64_t r, int32_t target) {
    int64_t V = logits->shape[2];
    double top = -INFINITY, z = 0, at = 0;
    QKV_TYPED(logits->dtype,
        const T *row = (const T *)logits->data + r * V;
        for (int64_t j = 0; j < V; j++) top = (double)row[j] > top ? (double)row[j] : top;
        for (int64_t j = 0; j < V; j++) z += exp((double)row[j] - top);
        at = (double)row[target];);
    return top + log(z) - at;
}

void trainer_icl_add(const qkv_tensor *logits, const int32_t *x, const int32_t *y, int B, int T,
                     double sums[4]) {
    for (int b = 0; b < B; b++) {
        const int32_t *xb = x + (size_t)b * T, *yb = y + (size_t)b * T;
        int n = 0; /* the first target: the repeat begins there */
        while (n < T && yb[n] < 0) n++;
        for (int i = 0; i + 1 < T; i++) {
            int64_t row = (int64_t)b * T + i;
            if (yb[i] >= 0) { /* late: the repeat */
                sums[0] += position_loss(logits, row, yb[i]);
                sums[1]++;
            } else if (i + 1 < n) { /* early: the first copy, its next token new */
                sums[2] += position_loss(logits, row, xb[i + 1]);
                sums[3]++;
            }
        }
    }
}

bool train_has_icl(const qkv_task *task, const qkv_model_config *c) {
    return task->kind == QKV_TASK_INDUCTION && !c->target_len;
}

bool trainer_has_icl(const trainer *t) {
    return train_has_icl(&t->cfg.task, &t->model.cfg);
}

double trainer_icl_of(const double sums[4]) {
    return sums[1] > 0 && sums[3] > 0 ? sums[0] / sums[1] - sums[2] / sums[3] : NAN;
}

static bool task_has_ideal(const qkv_task *task) {
    return task->kind != QKV_TASK_DATA; /* every built-in task defines one */
}

eval_result trainer_evaluate(trainer *t) {
    example_set held = {t->n_held, t->held_tokens, t->held_targets, t->held_lengths};
    return train_evaluate_set(&t->model, &t->cfg.task, t->target_len, held, t->eval_ctx,
                              t->ideal);
}

eval_result train_evaluate_set(qkv_model *model, const qkv_task *task, int target_len,
                               example_set set, qkv_ctx *ctx, uint8_t *ideal) {
    const evaluation ev = {model, task, target_len, ideal}, *e = &ev;
    int T = task->seq_len, H = model->cfg.heads, L = model->cfg.layers;
    int Hs = H < EVAL_MAX_HEADS ? H : EVAL_MAX_HEADS;
    double loss_sum = 0;
    int64_t correct = 0, counted = 0;
    attention_sums sums = {0}, *sum = &sums; /* 20 KiB on the stack: evaluation allocates nothing */
    int To = target_len;
    bool icl = train_has_icl(task, &model->cfg); /* the layout of the task's sequences defines it */
    double icl_sums[4] = {0};
    for (int start = 0; start < set.n; start += EVAL_BATCH) {
        int B = set.n - start < EVAL_BATCH ? set.n - start : EVAL_BATCH;
        const int32_t *x = set.x + (size_t)start * T, *y = set.y + (size_t)start * To;
        const int32_t *len = set.len ? set.len + start : NULL;
        qkv_ctx_reset(ctx);
        qkv_tensor *attn[QKV_MAX_LAYERS];
        qkv_tensor *logits = qkv_model_forward_padded(model, ctx, x, len, B, attn);
        qkv_tensor *targets = qkv_from_array(ctx, QKV_I32, 2, (int64_t[]){B, To}, y);
        qkv_tensor *loss = qkv_cross_entropy(ctx, logits, targets, -1);
        int64_t n = count_correct(logits, y, &correct);
        loss_sum += qkv_get(loss, 0) * (double)n;
        counted += n;
        if (icl) trainer_icl_add(logits, x, y, B, T, icl_sums);
        for (int b = 0; b < B; b++) {
            add_attention(e, attn, b, x + b * T, len ? len[b] : T, sum);
            add_entropy(e, attn, b, len ? len[b] : T, sum);
        }
    }
    eval_result r = {.loss = counted ? loss_sum / (double)counted : 0,
                     .accuracy = counted ? (double)correct / (double)counted : 0,
                     .correct = correct, .counted = counted, .has_ideal = task_has_ideal(task),
                     .icl_score = icl ? trainer_icl_of(icl_sums) : NAN};
#define MEAN(s, n) ((n) ? (s) / (double)(n) : 0)
#define SCORE(s, n) ((n) ? (s) / (double)(n) : NAN)
    for (int l = 0; l < L; l++) {
        for (int h = 0; h < Hs; h++) {
            double m = MEAN(sum->mass[l][h], sum->mass_rows[l]);
            if (h == 0 || m > r.layer_mass[l]) {
                r.layer_mass[l] = m;
                r.layer_best_head[l] = h;
            }
            /* A score is undefined (NaN: no number in the summary, the JSON, metrics.csv or
             * the plots) where no query row has what it measures, and induction with one
             * layer: an induction head matches on what an earlier layer wrote. */
            r.prev_token[l][h] = SCORE(sum->prev[l][h], sum->prev_rows);
            r.duplicate[l][h] = SCORE(sum->dup[l][h], sum->dup_rows);
            r.induction[l][h] = L > 1 ? SCORE(sum->ind[l][h], sum->ind_rows) : NAN;
            r.entropy[l][h] = MEAN(sum->entropy[l][h], sum->entropy_rows);
        }
        if (l == 0 || r.layer_mass[l] > r.layer_mass[r.attention_layer]) r.attention_layer = l;
    }
#undef MEAN
#undef SCORE
    if (qkv_task_min_layers(task) > 1 || task->kind == QKV_TASK_DATA) r.attention_layer = L - 1;
    r.attention_mass = r.layer_mass[r.attention_layer];
    r.best_head = r.layer_best_head[r.attention_layer];
    return r;
}

/* dst[i] = data[i] for the size of x, whose dtype `data` has (its values or its gradient). */
static void copy_to_float(float *dst, const qkv_tensor *x, const void *data) {
    QKV_TYPED(x->dtype, for (int64_t i = 0; i < x->size; i++) dst[i] = (float)((const T *)data)[i];);
}

void trainer_attention(trainer *t, int index, float *out) {
    const qkv_model_config *c = &t->model.cfg;
    qkv_ctx_reset(t->eval_ctx);
    qkv_tensor *attn[QKV_MAX_LAYERS];
    qkv_model_forward_padded(&t->model, t->eval_ctx, t->held_tokens + (size_t)index * c->seq_len,
                             t->held_lengths ? t->held_lengths + index : NULL, 1, attn);
    size_t per_layer = (size_t)c->heads * t->target_len * c->seq_len;
    for (int l = 0; l < c->layers; l++) copy_to_float(out + l * per_layer, attn[l], attn[l]->data);
}

void trainer_predict(trainer *t, int index, int32_t *out) {
    const qkv_model_config *c = &t->model.cfg;
    qkv_ctx_reset(t->eval_ctx);
    qkv_tensor *logits = qkv_model_forward_padded(
        &t->model, t->eval_ctx, t->held_tokens + (size_t)index * c->seq_len,
        t->held_lengths ? t->held_lengths + index : NULL, 1, NULL);
    int64_t V = logits->shape[2];
    for (int i = 0; i < t->target_len; i++) out[i] = (int32_t)qkv_argmax(logits, i * V, V);
}

void train_token_label(const qkv_task *task, const dataset *data, int32_t token, char *buf,
                       size_t len) {
    if (data)
        dataset_label(data, token, buf, len);
    else
        qkv_task_token_label(task, token, buf, len);
}

void trainer_token_label(const trainer *t, int32_t token, char *buf, size_t len) {
    train_token_label(&t->cfg.task, t->data, token, buf, len);
}

const char *train_token_text(const qkv_task *task, const dataset *data, int32_t token,
                             char *buf, size_t len) {
    if (!data) {
        qkv_task_token_label(task, token, buf, len);
        return buf;
    }
    const char *text = dataset_token_text(data, token);
    return text ? text : "?";
}

/* Lookup's outputs are values: class c < n_values is the value "v<c>", not the pair token
 * that shares its id, and a class no value uses is its id ("20"); every other task's class
 * reads as the token of its id. Both spellings read back (explain_read_class). */
static bool lookup_class(const qkv_task *task, const dataset *data, int32_t c) {
    return !data && task->kind == QKV_TASK_LOOKUP && c >= 0;
}

static void lookup_class_label(const qkv_task *task, int32_t c, char *buf, size_t len) {
    snprintf(buf, len, c < task->n_values ? "v%d" : "%d", (int)c);
}

void train_class_label(const qkv_task *task, const dataset *data, int32_t c, char *buf,
                       size_t len) {
    if (lookup_class(task, data, c)) lookup_class_label(task, c, buf, len);
    else train_token_label(task, data, c, buf, len);
}

void trainer_class_label(const trainer *t, int32_t c, char *buf, size_t len) {
    train_class_label(&t->cfg.task, t->data, c, buf, len);
}

const char *train_class_text(const qkv_task *task, const dataset *data, int32_t c, char *buf,
                             size_t len) {
    if (!lookup_class(task, data, c)) return train_token_text(task, data, c, buf, len);
    lookup_class_label(task, c, buf, len);
    return buf;
}

void trainer_attention_grads(trainer *t, int index, float *dA, float *dS) {
    const qkv_model_config *c = &t->model.cfg;
    int T = c->seq_len, To = t->target_len;
    qkv_ctx *step = t->shard[0].ctx; /* a context that records a graph; eval_ctx is no-grad */
    qkv_ctx_reset(step);
    qkv_tensor *attn[QKV_MAX_LAYERS];
    qkv_tensor *logits = qkv_model_forward_padded(&t->model, step, t->held_tokens + (size_t)index * T,
                                                  t->held_lengths ? t->held_lengths + index : NULL,
                                                  1, attn);
    qkv_tensor *targets = qkv_from_array(step, QKV_I32, 2, (int64_t[]){1, To},
                                         t->held_targets + (size_t)index * To);
    qkv_zero_grad(t->model.params);
    qkv_backward(qkv_cross_entropy(step, logits, targets, -1));
    size_t per_layer = (size_t)c->heads * To * T;
    for (int l = 0; l < c->layers; l++) {
        /* attn[l] = softmax(S): its source is the scaled (and masked) scores S, (1, H, T, T). */
        copy_to_float(dA + l * per_layer, attn[l], attn[l]->grad);
        copy_to_float(dS + l * per_layer, attn[l]->src[0], attn[l]->src[0]->grad);
    }
}
