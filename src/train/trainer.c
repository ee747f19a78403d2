/* trainer.c - the training layer: batches, steps, held-out evaluation, checkpoints. */
#include "train/trainer.h"

#include "engine/internal.h"
#include "kernels/kernels.h"

#include <inttypes.h>
#include <time.h>

#define EVAL_BATCH 64

/* Sequences in shard i of a batch split into `shards` as evenly as can be. */
static int shard_size(int batch, int shards, int i) {
    return (i + 1) * batch / shards - i * batch / shards;
}

/* A data run: reads the examples and sets the task and the model's sizes from them. */
static qkv_status init_data(trainer *t) {
    train_config *c = &t->cfg;
    t->data = malloc(sizeof *t->data);
    if (!t->data) return qkv_fail(QKV_ERR_NOMEM, "out of memory");
    qkv_status s = dataset_load(t->data, c->data_path, c->heldout_path[0] ? c->heldout_path : NULL);
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

qkv_status trainer_init(trainer *t, const train_config *config) {
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
    const qkv_task *task = &cfg->task;
    if (cfg->batch < 1 || cfg->batch > 65536)
        return qkv_fail(QKV_ERR_VALUE, "--batch %d is out of range (1..65536)", cfg->batch);
    if (!(cfg->lr > 0) || cfg->lr > 1e6)
        return qkv_fail(QKV_ERR_VALUE, "--lr %g must be above 0", cfg->lr);
    if (cfg->model.vocab < task->vocab || cfg->model.seq_len != task->seq_len ||
        (!t->data && cfg->model.target_len != task->target_len)) {
        trainer_free(t);
        return qkv_fail(QKV_ERR_VALUE, "the model does not fit the task");
    }
    /* Before anything large is allocated: the parameters (with gradients and optimizer
     * state), one training step's graphs (one per shard) and one evaluation batch's (forward
     * only: half a step's estimate at EVAL_BATCH). Each estimate bounds what its arena really
     * takes (tests/test_faults.c checks, and prints the table of docs/errors.md), so this is
     * the peak. */
    qkv_status st = model_check_config(&cfg->model);
    if (st != QKV_OK) {
        trainer_free(t);
        return st;
    }
    const char *what;
    int shards = cfg->batch < TRAIN_SHARDS ? cfg->batch : TRAIN_SHARDS;
    /* the model's weights, gradients and optimizer state, and each further shard's gradients */
    double params = qkv_model_param_bytes(&cfg->model) * (1 + 0.25 * (shards - 1)), step = 0;
    for (int i = 0; i < shards; i++)
        step += qkv_model_step_bytes(&cfg->model, shard_size(cfg->batch, shards, i));
    double eval = qkv_model_step_bytes(&cfg->model, EVAL_BATCH) / 2, have = memory_limit(&what);
    if (params + step + eval > have / 2) {
        /* the message reads the config, which trainer_free clears: first the message */
        st = qkv_fail(QKV_ERR_NOMEM, "training needs about %.1f GiB (parameters %.1f, a step "
                        "of %d sequences %.1f, evaluation %.1f), more than half of %s "
                        "(%.1f GiB): lower %s", (params + step + eval) / (1 << 30),
                        params / (1 << 30), cfg->batch, step / (1 << 30), eval / (1 << 30), what,
                        have / (1 << 30),
                        params > step && params > eval ? "--d-model, --vocab or --layers"
                        : step >= eval                 ? "--batch, --seq-len or --d-model"
                                                       : "--seq-len or --d-model");
        trainer_free(t);
        return st;
    }
    st = qkv_model_init(&t->model, &cfg->model, cfg->seed);
    if (st != QKV_OK) {
        trainer_free(t);
        return st;
    }
    qkv_optim_init(&t->optim, &t->model, cfg->optim, cfg->lr);
    t->optim.weight_decay = cfg->weight_decay;
    t->optim.clip = cfg->clip;
    t->data_rng = qkv_rng_seed(cfg->seed ^ 0x5eed0da7a0000001ull);
    int T = task->seq_len, To = cfg->model.target_len ? cfg->model.target_len : T;
    t->target_len = To;
    t->n_held = t->data ? t->data->n_held : TRAIN_HELDOUT;
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
            return qkv_fail(QKV_ERR_NOMEM, "out of memory setting up training");
        }
    }
    t->eval_ctx = qkv_ctx_new(1 << 20);
    t->tokens = malloc(bt * sizeof *t->tokens);
    t->targets = malloc(bto * sizeof *t->targets);
    t->held_tokens = malloc(ht * sizeof *t->held_tokens);
    t->held_targets = malloc(hto * sizeof *t->held_targets);
    t->ideal = malloc((size_t)T * (size_t)T);
    if (t->data) {
        t->lengths = malloc((size_t)cfg->batch * sizeof *t->lengths);
        t->held_lengths = malloc((size_t)t->n_held * sizeof *t->held_lengths);
    }
    if (!t->eval_ctx || !t->tokens || !t->targets || !t->held_tokens ||
        !t->held_targets || !t->ideal || (t->data && (!t->lengths || !t->held_lengths))) {
        trainer_free(t);
        return qkv_fail(QKV_ERR_NOMEM, "out of memory setting up training");
    }
    qkv_ctx_set_no_grad(t->eval_ctx, true);
    /* The held-out set depends only on the task and the seed, so eval rebuilds it exactly. */
    if (t->data) { /* the file's held-out examples, in file order */
        memcpy(t->held_tokens, t->data->held_x, ht * sizeof *t->held_tokens);
        memcpy(t->held_targets, t->data->held_y, hto * sizeof *t->held_targets);
        memcpy(t->held_lengths, t->data->held_len, (size_t)t->n_held * sizeof *t->held_lengths);
        return QKV_OK;
    }
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
    free(t->ideal);
    if (t->data) dataset_free(t->data);
    free(t->data);
    memset(t, 0, sizeof *t);
}

/* Counts positions whose argmax logit is the target; returns the number with a target. */
static int64_t count_correct(const qkv_tensor *logits, const int32_t *targets, int64_t *correct) {
    int64_t V = logits->shape[2], rows = logits->size / V, n = 0;
    QKV_TYPED(logits->dtype,
        const T *x = logits->data;
        for (int64_t r = 0; r < rows; r++) {
            if (targets[r] < 0) continue;
            int64_t best = 0;
            for (int64_t j = 1; j < V; j++)
                if (x[r * V + j] > x[r * V + best]) best = j;
            *correct += best == targets[r];
            n++;
        });
    return n;
}

double trainer_lr(const train_config *c, int64_t step) {
    double lr = c->lr;
    if (c->warmup > 0 && step <= c->warmup) lr *= (double)step / (double)c->warmup;
    if (c->cosine && c->steps > c->warmup) {
        double progress = (double)(step - c->warmup) / (double)(c->steps - c->warmup);
        if (progress > 0) lr *= 0.5 * (1 + cos(3.14159265358979323846 * (progress < 1 ? progress : 1)));
    }
    return lr;
}

qkv_status trainer_step(trainer *t) {
    const train_config *c = &t->cfg;
    int T = c->task.seq_len, To = t->target_len, B = c->batch;
    if (t->data) { /* each sequence: training example below(n_train) */
        const dataset *d = t->data;
        for (int b = 0; b < B; b++) {
            size_t e = qkv_rng_below(&t->data_rng, (uint32_t)d->n_train);
            memcpy(t->tokens + (size_t)b * T, d->train_x + e * T, (size_t)T * sizeof *t->tokens);
            memcpy(t->targets + (size_t)b * To, d->train_y + e * To, (size_t)To * sizeof *t->targets);
            t->lengths[b] = d->train_len[e];
        }
        return trainer_update(t);
    }
    for (int b = 0; b < B; b++)
        qkv_task_sample(&c->task, &t->data_rng, false, t->tokens + b * T, t->targets + b * To);
    return trainer_update(t);
}

/* Shard s's forward and backward pass; its gradients land in its own model's. `total` is the
 * number of targets in the whole batch. */
static void shard_step(trainer *t, int s, int64_t total) {
    train_shard *sh = &t->shard[s];
    qkv_model *m = s ? &sh->replica : &t->model;
    qkv_ctx *ctx = sh->ctx;
    int T = t->cfg.task.seq_len, To = t->target_len;
    const int32_t *x = t->tokens + (size_t)sh->first * T, *y = t->targets + (size_t)sh->first * To;
    qkv_ctx_reset(ctx);
    qkv_tensor *logits = qkv_model_forward_padded(m, ctx, x, t->lengths ? t->lengths + sh->first : NULL,
                                                  sh->count, NULL);
    qkv_tensor *targets = qkv_from_array(ctx, QKV_I32, 2, (int64_t[]){sh->count, To}, y);
    qkv_tensor *mean = qkv_cross_entropy(ctx, logits, targets, -1);
    sh->correct = 0;
    sh->counted = count_correct(logits, y, &sh->correct);
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
    if (side_by_side) {
#pragma omp parallel num_threads(S)
        {
#pragma omp for schedule(static)
            for (int s = 0; s < S; s++) shard_step(t, s, total);
            sum_shard_grads(t); /* after the loop's barrier: every shard is done */
        }
    } else {
        for (int s = 0; s < S; s++) shard_step(t, s, total);
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
                        ": training diverged (lower --lr)", isnan(loss) ? "NaN" : "Inf",
                        t->optim.step + 1);
    t->optim.lr = trainer_lr(c, t->optim.step + 1);
    double norm = qkv_optim_step(&t->optim);
    if (!isfinite(norm))
        return qkv_fail(QKV_ERR_NUMERIC, "the gradient became %s at step %" PRId64
                        ": training diverged (lower --lr)", isnan(norm) ? "NaN" : "Inf",
                        t->optim.step);
    return QKV_OK;
}

/* Adds one held-out sequence's attention (attn[l] is (B, H, T, T); this is batch row b) to
 * the running sums of the ideal-pattern mass and the head scores. */
typedef struct {
    double mass[QKV_MAX_LAYERS][EVAL_MAX_HEADS];
    double prev[QKV_MAX_LAYERS][EVAL_MAX_HEADS], dup[QKV_MAX_LAYERS][EVAL_MAX_HEADS],
        ind[QKV_MAX_LAYERS][EVAL_MAX_HEADS];
    int64_t mass_rows[QKV_MAX_LAYERS], prev_rows, dup_rows, ind_rows;
} attention_sums;

static void add_attention(trainer *t, qkv_tensor *const *attn, int b, const int32_t *x,
                          int len, attention_sums *sum) {
    const qkv_task *task = &t->cfg.task;
    int T = task->seq_len, H = t->model.cfg.heads, L = t->model.cfg.layers;
    int Hs = H < EVAL_MAX_HEADS ? H : EVAL_MAX_HEADS;
    int Tq = t->target_len; /* query rows: T, or an encoder-decoder's To */
    for (int l = 0; l < L && task->kind != QKV_TASK_DATA; l++) {
        qkv_task_ideal_layer(task, x, l, L, t->ideal);
        for (int i = 0; i < Tq; i++) {
            bool has_ideal = false;
            for (int j = 0; j < T; j++) has_ideal |= t->ideal[i * T + j];
            if (!has_ideal) continue;
            sum->mass_rows[l]++;
            for (int h = 0; h < Hs; h++) {
                int64_t row = (((int64_t)b * H + h) * Tq + i) * T;
                for (int j = 0; j < T; j++)
                    if (t->ideal[i * T + j]) sum->mass[l][h] += qkv_get(attn[l], row + j);
            }
        }
    }
    if (t->model.cfg.target_len) return; /* the head scores are of self-attention */
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

static bool task_has_ideal(const qkv_task *task) {
    return task->kind != QKV_TASK_DATA; /* every built-in task defines one */
}

eval_result trainer_evaluate(trainer *t) {
    const qkv_task *task = &t->cfg.task;
    int T = task->seq_len, H = t->model.cfg.heads, L = t->model.cfg.layers;
    int Hs = H < EVAL_MAX_HEADS ? H : EVAL_MAX_HEADS;
    double loss_sum = 0;
    int64_t correct = 0, counted = 0;
    attention_sums sums = {0}, *sum = &sums; /* 16 KiB on the stack: evaluation allocates nothing */
    int To = t->target_len;
    for (int start = 0; start < t->n_held; start += EVAL_BATCH) {
        int B = t->n_held - start < EVAL_BATCH ? t->n_held - start : EVAL_BATCH;
        const int32_t *x = t->held_tokens + (size_t)start * T, *y = t->held_targets + (size_t)start * To;
        const int32_t *len = t->held_lengths ? t->held_lengths + start : NULL;
        qkv_ctx_reset(t->eval_ctx);
        qkv_tensor *attn[QKV_MAX_LAYERS];
        qkv_tensor *logits = qkv_model_forward_padded(&t->model, t->eval_ctx, x, len, B, attn);
        qkv_tensor *targets = qkv_from_array(t->eval_ctx, QKV_I32, 2, (int64_t[]){B, To}, y);
        qkv_tensor *loss = qkv_cross_entropy(t->eval_ctx, logits, targets, -1);
        int64_t n = count_correct(logits, y, &correct);
        loss_sum += qkv_get(loss, 0) * (double)n;
        counted += n;
        for (int b = 0; b < B; b++) add_attention(t, attn, b, x + b * T, len ? len[b] : T, sum);
    }
    eval_result r = {.loss = counted ? loss_sum / (double)counted : 0,
                     .accuracy = counted ? (double)correct / (double)counted : 0,
                     .correct = correct, .counted = counted, .has_ideal = task_has_ideal(task)};
#define MEAN(s, n) ((n) ? (s) / (double)(n) : 0)
    for (int l = 0; l < L; l++) {
        for (int h = 0; h < Hs; h++) {
            double m = MEAN(sum->mass[l][h], sum->mass_rows[l]);
            if (h == 0 || m > r.layer_mass[l]) {
                r.layer_mass[l] = m;
                r.layer_best_head[l] = h;
            }
            r.prev_token[l][h] = MEAN(sum->prev[l][h], sum->prev_rows);
            r.duplicate[l][h] = MEAN(sum->dup[l][h], sum->dup_rows);
            r.induction[l][h] = MEAN(sum->ind[l][h], sum->ind_rows);
        }
        if (l == 0 || r.layer_mass[l] > r.layer_mass[r.attention_layer]) r.attention_layer = l;
    }
#undef MEAN
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

/* ---- checkpoints ---- */
#define META_MAX 40

/* The first element of x that is not finite (or, with nonneg, negative); -1 if none. */
static int64_t first_bad(const qkv_tensor *x, bool nonneg) {
    if (x->dtype == QKV_F32) { /* the common case, read directly: a save checks every weight */
        const float *p = x->data;
        for (int64_t i = 0; i < x->size; i++)
            if (!isfinite(p[i]) || (nonneg && p[i] < 0)) return i;
        return -1;
    }
    for (int64_t i = 0; i < x->size; i++) {
        double v = qkv_get(x, i);
        if (!isfinite(v) || (nonneg && v < 0)) return i;
    }
    return -1;
}

qkv_status trainer_check_state(const trainer *t, qkv_status status) {
    const qkv_model *m = &t->model;
    const qkv_optim *o = &t->optim;
    for (int i = 0; i < m->nparams; i++) {
        const char *what[3] = {"the weights", "the optimizer's first moments",
                               "the optimizer's second moments"};
        const qkv_tensor *x[3] = {m->param[i], o->m[i], o->v[i]};
        for (int k = 0; k < 3; k++) {
            int64_t at = x[k] ? first_bad(x[k], k == 2) : -1;
            if (at < 0) continue;
            double v = qkv_get(x[k], at);
            return qkv_fail(status, "%s of '%s' hold %s at element %" PRId64 " after step %"
                            PRId64 "%s", what[k], m->param_name[i], isnan(v) ? "NaN" : isinf(v)
                            ? "Inf" : "a negative value", at, o->step,
                            status == QKV_ERR_NUMERIC ? ": training diverged (lower --lr)" : "");
        }
    }
    return QKV_OK;
}

qkv_status trainer_save(const trainer *t, const char *path) {
    qkv_status bad = trainer_check_state(t, QKV_ERR_NUMERIC);
    if (bad != QKV_OK) return bad;
    const train_config *c = &t->cfg;
    const qkv_model *m = &t->model;
    char vals[META_MAX][96];
    const char *meta[2 * META_MAX];
    int nm = 0;
#define META(key, ...)                                                                     \
    do {                                                                                   \
        snprintf(vals[nm], sizeof vals[nm], __VA_ARGS__);                                  \
        meta[2 * nm] = key;                                                                \
        meta[2 * nm + 1] = vals[nm];                                                       \
        nm++;                                                                              \
    } while (0)
    META("format", "qkv-model");
    META("qkv_version", "%s", QKV_VERSION_STRING);
    META("task", "%s", qkv_task_name(c->task.kind));
    META("seq_len", "%d", c->task.seq_len);
    META("vocab", "%d", c->task.vocab);
    META("d_model", "%d", m->cfg.d_model);
    META("heads", "%d", m->cfg.heads);
    META("layers", "%d", m->cfg.layers);
    META("residual", "%s", m->cfg.residual ? "true" : "false");
    META("causal", "%s", m->cfg.causal ? "true" : "false");
    META("init_scale", "%.17g", m->cfg.init_scale);
    META("dtype", "%s", qkv_dtype_name(m->cfg.dtype));
    META("optim", "%s", qkv_optim_name(c->optim));
    META("lr", "%.17g", c->lr);
    META("weight_decay", "%.17g", c->weight_decay);
    META("clip", "%.17g", c->clip);
    META("schedule", "%s", c->cosine ? "cosine" : "constant");
    META("warmup", "%" PRId64, c->warmup);
    META("batch", "%d", c->batch);
    META("steps", "%" PRId64, c->steps);
    META("seed", "%" PRIu64, c->seed);
    META("step", "%" PRId64, t->optim.step);
    if (t->metrics_rows >= 0) META("metrics_rows", "%" PRId64, t->metrics_rows);
    META("data_rng", "%016" PRIx64 "%016" PRIx64 "%016" PRIx64 "%016" PRIx64, t->data_rng.s[0],
         t->data_rng.s[1], t->data_rng.s[2], t->data_rng.s[3]);
    char *vocab_text = NULL;
    if (t->data) { /* the files, their checksum, the output length and the token strings */
        const dataset *d = t->data;
        META("target_len", "%d", m->cfg.target_len);
        META("data_checksum", "%016" PRIx64, d->checksum);
        meta[2 * nm] = "data";
        meta[2 * nm + 1] = d->path;
        nm++;
        meta[2 * nm] = "heldout";
        meta[2 * nm + 1] = d->heldout_path;
        nm++;
        size_t bytes = 1;
        for (int i = 1; i < d->vocab; i++) bytes += strlen(d->token[i]) + 1;
        vocab_text = malloc(bytes);
        if (!vocab_text) return qkv_fail(QKV_ERR_NOMEM, "out of memory saving %s", path);
        char *p = vocab_text;
        for (int i = 1; i < d->vocab; i++) /* ids 1.., space-separated (tokens have none) */
            p += sprintf(p, "%s%s", i > 1 ? " " : "", d->token[i]);
        *p = '\0';
        meta[2 * nm] = "tokens";
        meta[2 * nm + 1] = vocab_text;
        nm++;
    }
#undef META
    const qkv_optim *o = &t->optim;
    const char *names[3 * (5 + 4 * QKV_MAX_LAYERS)];
    const qkv_tensor *tensors[3 * (5 + 4 * QKV_MAX_LAYERS)];
    char state_names[2 * (5 + 4 * QKV_MAX_LAYERS)][48];
    int n = 0, ns = 0;
    for (int i = 0; i < m->nparams; i++) {
        names[n] = m->param_name[i];
        tensors[n++] = m->param[i];
    }
    for (int i = 0; i < o->n; i++) {
        if (o->m[i]) {
            snprintf(state_names[ns], sizeof state_names[ns], "optim.m.%s", m->param_name[i]);
            names[n] = state_names[ns++];
            tensors[n++] = o->m[i];
        }
        if (o->v[i]) {
            snprintf(state_names[ns], sizeof state_names[ns], "optim.v.%s", m->param_name[i]);
            names[n] = state_names[ns++];
            tensors[n++] = o->v[i];
        }
    }
    qkv_status s = qkv_st_save(path, n, names, tensors, nm, meta);
    free(vocab_text);
    return s;
}

/* Reads metadata value `key` as a number within [lo, hi]. */
static qkv_status meta_number(const qkv_st *st, const char *path, const char *key, double lo,
                              double hi, double *out) {
    const char *s = qkv_st_meta(st, key);
    char *end;
    double v = s ? strtod(s, &end) : 0;
    if (!s || *s == '\0' || *end != '\0' || !(v >= lo && v <= hi))
        return qkv_fail(QKV_ERR_FORMAT, "%s: metadata '%s' is %s", path, key,
                        s ? "out of range" : "missing");
    *out = v;
    return QKV_OK;
}

qkv_status trainer_load(trainer *t, const char *path) {
    return trainer_load_as(t, path, TRAIN_DTYPE_OF_FILE);
}

qkv_status trainer_load_as(trainer *t, const char *path, int dtype) {
    memset(t, 0, sizeof *t);
    qkv_st *st;
    qkv_status s = qkv_st_load(path, &st);
    if (s != QKV_OK) return s;
    s = trainer_load_st_as(t, st, path, dtype);
    qkv_st_free(st);
    return s;
}

/* Reads tensor `name` of the file into dst; with `widen`, the file's f32 tensor into an f64
 * dst (exact: every f32 is a double). `tmp` is scratch for the f32 copy. */
static qkv_status read_widened(const qkv_st *st, const char *name, qkv_tensor *dst, bool widen,
                               qkv_ctx *tmp) {
    if (!widen) return qkv_st_read(st, name, dst);
    qkv_ctx_reset(tmp);
    qkv_tensor *f = qkv_zeros(tmp, QKV_F32, dst->ndim, dst->shape);
    qkv_status s = qkv_st_read(st, name, f);
    if (s == QKV_OK)
        for (int64_t i = 0; i < dst->size; i++) ((double *)dst->data)[i] = ((const float *)f->data)[i];
    return s;
}

qkv_status trainer_load_st(trainer *t, const qkv_st *st, const char *path) {
    return trainer_load_st_as(t, st, path, TRAIN_DTYPE_OF_FILE);
}

qkv_status trainer_load_st_as(trainer *t, const qkv_st *st, const char *path, int as) {
    memset(t, 0, sizeof *t);
    qkv_status s;
    train_config c = {0};
    double v[13];
    const char *fmt = qkv_st_meta(st, "format"), *task = qkv_st_meta(st, "task");
    const char *optim = qkv_st_meta(st, "optim"), *rng = qkv_st_meta(st, "data_rng");
    const char *residual = qkv_st_meta(st, "residual"), *causal = qkv_st_meta(st, "causal");
    const char *dtype = qkv_st_meta(st, "dtype"); /* absent before f64 models: f32 */
    if (dtype && strcmp(dtype, "f32") && strcmp(dtype, "f64"))
        return qkv_fail(QKV_ERR_FORMAT, "%s: metadata 'dtype' is '%.16s' (f32 or f64)", path, dtype);
    qkv_dtype file_dtype = dtype && !strcmp(dtype, "f64") ? QKV_F64 : QKV_F32;
    if (as == QKV_F32 && file_dtype == QKV_F64)
        return qkv_fail(QKV_ERR_MISMATCH, "%s: the model is f64; --dtype f32 would round its "
                        "weights (leave --dtype out, or give f64)", path);
    if (!fmt || strcmp(fmt, "qkv-model") || !task || !optim || !rng || strlen(rng) != 64 ||
        !residual || !causal)
        return qkv_fail(QKV_ERR_FORMAT, "%s: not a qkv model (its metadata is missing or wrong)", path);
    if ((s = meta_number(st, path, "seq_len", 2, 65536, &v[0])) ||
        (s = meta_number(st, path, "vocab", 2, 1e6, &v[1])) ||
        (s = meta_number(st, path, "d_model", 1, 8192, &v[2])) ||
        (s = meta_number(st, path, "heads", 1, 8192, &v[3])) ||
        (s = meta_number(st, path, "layers", 1, QKV_MAX_LAYERS, &v[4])) ||
        (s = meta_number(st, path, "init_scale", 1e-300, 100, &v[5])) ||
        (s = meta_number(st, path, "lr", 1e-300, 1e6, &v[6])) ||
        (s = meta_number(st, path, "weight_decay", 0, 1e6, &v[7])) ||
        (s = meta_number(st, path, "clip", 0, 1e300, &v[8])) ||
        (s = meta_number(st, path, "batch", 1, 65536, &v[9])) ||
        (s = meta_number(st, path, "steps", 0, 1e15, &v[10])) ||
        (s = meta_number(st, path, "seed", 0, 1.8446744073709552e19, &v[11])) ||
        (s = meta_number(st, path, "warmup", 0, 1e15, &v[12])))
        return s;
    if (!strcmp(task, "data")) { /* the examples are read again, and must be the same */
        const char *data = qkv_st_meta(st, "data"), *held = qkv_st_meta(st, "heldout");
        const char *sum = qkv_st_meta(st, "data_checksum");
        char *end = NULL;
        if (!data || !held || !sum || strlen(data) >= sizeof c.data_path ||
            strlen(held) >= sizeof c.heldout_path || strlen(sum) != 16 ||
            ((void)(c.data_checksum = strtoull(sum, &end, 16)), *end))
            return qkv_fail(QKV_ERR_FORMAT, "%s: metadata 'data', 'heldout' or 'data_checksum' is "
                            "missing or wrong", path);
        snprintf(c.data_path, sizeof c.data_path, "%s", data);
        snprintf(c.heldout_path, sizeof c.heldout_path, "%s", held);
    } else if ((s = qkv_task_init(&c.task, task, (int)v[0], (int)v[1])) != QKV_OK)
        return qkv_fail(QKV_ERR_FORMAT, "%s: %s", path, qkv_last_error());
    c.model = (qkv_model_config){.vocab = (int)v[1], .seq_len = (int)v[0], .d_model = (int)v[2],
                                 .heads = (int)v[3], .layers = (int)v[4],
                                 .residual = !strcmp(residual, "true"),
                                 .causal = !strcmp(causal, "true"), .init_scale = v[5],
                                 .target_len = c.task.target_len,
                                 .dtype = as == TRAIN_DTYPE_OF_FILE ? file_dtype : (qkv_dtype)as};
    /* Words are read exactly: a value qkv does not know is refused, never taken as a default. */
    const char *schedule = qkv_st_meta(st, "schedule");
    const char *bad = strcmp(optim, "sgd") && strcmp(optim, "momentum") && strcmp(optim, "adam")
                          ? "optim"
                      : strcmp(residual, "true") && strcmp(residual, "false") ? "residual"
                      : strcmp(causal, "true") && strcmp(causal, "false")     ? "causal"
                      : !schedule || (strcmp(schedule, "cosine") && strcmp(schedule, "constant"))
                          ? "schedule"
                          : NULL;
    if (bad) return qkv_fail(QKV_ERR_FORMAT, "%s: metadata '%s' is not one of qkv's values", path, bad);
    c.optim = !strcmp(optim, "sgd") ? QKV_SGD : !strcmp(optim, "momentum") ? QKV_MOMENTUM : QKV_ADAM;
    c.lr = v[6];
    c.weight_decay = v[7];
    c.clip = v[8];
    c.batch = (int)v[9];
    c.steps = (int64_t)v[10];
    c.warmup = (int64_t)v[12];
    c.cosine = !strcmp(schedule, "cosine");
    c.seed = strtoull(qkv_st_meta(st, "seed"), NULL, 10);
    if ((s = trainer_init(t, &c)) != QKV_OK)
        /* a value out of range here came from the file: the file is bad, not the command line */
        return qkv_fail(s == QKV_ERR_VALUE ? QKV_ERR_FORMAT : s, "%s: %s", path, qkv_last_error());
    if (t->data && (t->model.cfg.vocab != (int)v[1] || t->model.cfg.seq_len != (int)v[0])) {
        trainer_free(t);
        return qkv_fail(QKV_ERR_FORMAT, "%s: its vocab or seq_len is not that of %s", path,
                        c.data_path);
    }
    qkv_model *m = &t->model;
    qkv_optim *o = &t->optim;
    /* for widening an f32 file to an f64 model: the largest tensor's f32 copy */
    bool widen = file_dtype != c.model.dtype; /* an f32 file asked for as f64 */
    qkv_ctx *tmp = qkv_ctx_new(widen ? 4096 + (size_t)(qkv_model_param_bytes(&c.model) / 8) : 0);
    if (!tmp) s = qkv_fail(QKV_ERR_NOMEM, "out of memory reading %s", path);
    for (int i = 0; i < m->nparams && s == QKV_OK; i++) {
        char name[48];
        s = read_widened(st, m->param_name[i], m->param[i], widen, tmp);
        snprintf(name, sizeof name, "optim.m.%s", m->param_name[i]);
        if (s == QKV_OK && o->m[i]) s = read_widened(st, name, o->m[i], widen, tmp);
        snprintf(name, sizeof name, "optim.v.%s", m->param_name[i]);
        if (s == QKV_OK && o->v[i]) s = read_widened(st, name, o->v[i], widen, tmp);
    }
    qkv_ctx_free(tmp);
    double step = 0;
    if (s == QKV_OK) s = meta_number(st, path, "step", 0, 1e15, &step);
    o->step = (int64_t)step;
    for (int i = 0; i < 4 && s == QKV_OK; i++) {
        char word[17];
        memcpy(word, rng + 16 * i, 16);
        word[16] = '\0';
        char *end;
        t->data_rng.s[i] = strtoull(word, &end, 16);
        if (*end) s = qkv_fail(QKV_ERR_FORMAT, "%s: metadata 'data_rng' is not hexadecimal", path);
    }
    double rows = -1;
    if (s == QKV_OK && qkv_st_meta(st, "metrics_rows"))
        s = meta_number(st, path, "metrics_rows", 0, 1e15, &rows);
    t->metrics_rows = (int64_t)rows;
    if (s == QKV_OK && (s = trainer_check_state(t, QKV_ERR_FORMAT)) != QKV_OK)
        s = qkv_fail(s, "%s: %s", path, qkv_last_error());
    if (s != QKV_OK) trainer_free(t);
    return s;
}
