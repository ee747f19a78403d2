/* hints.c - the hint of a run that fell short, the phase changes of its head scores, and the
 * summary's numbers as JSON (hints.h). */
#include "train/hints.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DATA_FAR_FROM_DONE 0.9 /* a data file's accuracy below this gets a hint */
#define CAUSAL_HIDDEN_SHARE 0.25 /* of the targets the mask hides, before the hint says so */
#define MEMORIZED_TRAIN_ACC 0.99 /* the training batch's accuracy of a run that memorized */

const char *head_score_name(head_score score) {
    static const char *const names[] = {"previous-token", "duplicate-token", "induction"};
    return score < SCORE_KINDS ? names[score] : "?";
}

/* metrics.csv's column of a score: after the layers' masses, three per layer and head */
static int score_column(const metrics_table *m, head_score score, int l, int h) {
    return m->layers + 3 * (l * m->heads + h) + (int)score;
}

static double row_loss(const metrics_row *row) {
    return isnan(row->heldout_loss) ? row->loss : row->heldout_loss;
}

/* Column `col` of a row: a score, or with col -1 the training batch's loss. NaN if unknown. */
static double series_value(const metrics_row *row, int col) {
    if (col < 0) return row->loss;
    return row->scores ? row->scores[col] : NAN;
}

/* The row among lo+1 .. hi whose change from the row before it, per step, is the steepest in
 * `direction` (+1 a rise, -1 a fall) among those with both values known; -1 for none. */
static int steepest(const metrics_table *m, int col, int direction, int lo, int hi) {
    int best = -1;
    double best_rate = 0;
    for (int i = lo + 1; i <= hi; i++) {
        const metrics_row *a = &m->rows[i - 1], *b = &m->rows[i];
        double va = series_value(a, col), vb = series_value(b, col);
        if (isnan(va) || isnan(vb) || b->step <= a->step) continue;
        double rate = direction * (vb - va) / (double)(b->step - a->step);
        if (rate > 0 && (best < 0 || rate > best_rate)) best = i, best_rate = rate;
    }
    return best;
}

/* The index of the row at `step`, -1 if none. */
static int row_at(const metrics_table *m, int64_t step) {
    for (int i = 0; i < m->n; i++)
        if (m->rows[i].step == step) return i;
    return -1;
}

bool train_induction_signals(const metrics_table *m, phase_change *c) {
    c->score_step = c->icl_step = c->loss_step = -1;
    int from = row_at(m, c->from_step), at = row_at(m, c->step);
    if (from < 0 || at < 0) return false;
    int score = steepest(m, score_column(m, SCORE_INDUCTION, c->layer, c->head), +1, from, at);
    int icl = m->icl_column >= 0 ? steepest(m, m->icl_column, -1, 0, m->n - 1) : -1;
    int loss = steepest(m, -1, -1, 0, m->n - 1);
    if (score >= 0) c->score_step = m->rows[score].step;
    if (icl >= 0) c->icl_step = m->rows[icl].step;
    if (loss >= 0) c->loss_step = m->rows[loss].step;
    if (score < 0 || icl < 0 || loss < 0) return false;
    int64_t interval = 0; /* the run's: its longest gap between evaluations */
    for (int i = 1; i < m->n; i++)
        if (m->rows[i].step - m->rows[i - 1].step > interval)
            interval = m->rows[i].step - m->rows[i - 1].step;
    return llabs(c->icl_step - c->score_step) <= interval &&
           llabs(c->loss_step - c->score_step) <= interval;
}

int train_phase_changes(const metrics_table *m, phase_change *out, int max) {
    int n = 0;
    if (m->n < 2) return 0;
    double stretch = PHASE_STRETCH * (double)m->rows[m->n - 1].step;
    for (int l = 0; l < m->layers; l++)
        for (int h = 0; h < m->heads; h++)
            for (int s = 0; s < SCORE_KINDS; s++) {
                int col = score_column(m, (head_score)s, l, h), from = -1, at = -1;
                for (int i = 0; i < m->n && at < 0; i++) {
                    double v = m->rows[i].scores ? m->rows[i].scores[col] : NAN;
                    if (v <= PHASE_FROM) from = i;
                    else if (v >= PHASE_THRESHOLD) at = i;
                }
                if (at < 0 || from < 0) continue; /* never reached, or never below */
                const metrics_row *a = &m->rows[from], *b = &m->rows[at];
                if ((double)(b->step - a->step) > stretch || !(row_loss(b) < row_loss(a)))
                    continue;
                phase_change c = {(head_score)s, l, h, a->step, b->step, a->scores[col],
                                  b->scores[col], row_loss(a), row_loss(b), -1, -1, -1};
                /* an induction head: where the run measures the in-context score, only when
                 * the three signals agree */
                if (s == SCORE_INDUCTION && !train_induction_signals(m, &c) &&
                    m->icl_column >= 0)
                    continue;
                /* by step, then layer, head and score: insertion into the sorted list */
                int k = n < max ? n : max;
                while (k > 0 && out[k - 1].step > c.step) {
                    if (k < max) out[k] = out[k - 1];
                    k--;
                }
                if (k < max) out[k] = c;
                n++;
            }
    return n;
}

int64_t train_induction_step(const trainer *t, const metrics_table *m, int *head) {
    int L = m->layers;
    if (L < 2 || t->model.cfg.target_len) return -1;
    for (int i = 0; i < m->n; i++)
        for (int h = 0; h < m->heads && m->rows[i].scores; h++)
            if (m->rows[i].scores[metrics_induction_column(m, L - 1, h)] >= PHASE_THRESHOLD) {
                *head = h;
                return m->rows[i].step;
            }
    return -1;
}

double train_causal_hidden_share(const trainer *t) {
    example_set held = {t->n_held, t->held_tokens, t->held_targets, t->held_lengths};
    return causal_hidden_share(&t->model.cfg, held);
}

double causal_hidden_share(const qkv_model_config *c, example_set held) {
    int T = c->seq_len;
    if (c->target_len) return 0;
    long hidden = 0, targets = 0;
    for (int e = 0; e < held.n; e++) {
        const int32_t *x = held.x + (size_t)e * T, *y = held.y + (size_t)e * T;
        int n = held.len ? held.len[e] : T;
        for (int i = 0; i < T; i++) {
            if (y[i] < 0) continue;
            targets++;
            bool before = false, after = false;
            for (int j = 0; j < n; j++) {
                if (x[j] == y[i] && j <= i) before = true;
                if (x[j] == y[i] && j > i) after = true;
            }
            hidden += !before && after;
        }
    }
    return targets ? (double)hidden / (double)targets : 0;
}

/* The held-out loss of the run's first evaluation, NaN when there is none. */
static double first_loss(const metrics_table *m) {
    return m && m->n > 0 ? row_loss(&m->rows[0]) : NAN;
}

/* The training batch's accuracy at the run's last evaluation, NaN when there is none. */
static double last_train_acc(const metrics_table *m) {
    return m && m->n > 0 ? m->rows[m->n - 1].train_acc : NAN;
}

train_hint_kind train_hint(const trainer *t, const eval_result *r, const metrics_table *m,
                           char *buf, size_t len) {
    example_set held = {t->n_held, t->held_tokens, t->held_targets, t->held_lengths};
    return train_hint_of(&t->cfg, &t->model.cfg, t->optim.step, held, r, m, buf, len);
}

train_hint_kind train_hint_of(const train_config *cfg, const qkv_model_config *c, int64_t step,
                              example_set held, const eval_result *r, const metrics_table *m,
                              char *buf, size_t len) {
    const qkv_task *task = &cfg->task;
    bool data = task->kind == QKV_TASK_DATA;
    double chance = qkv_task_chance(task);
    buf[0] = '\0';
    bool near_chance = r->accuracy < chance + 0.25 * (1 - chance);
    bool far_from_ideal = r->has_ideal && r->attention_mass < 0.5 && r->accuracy < 0.99;
    bool far_from_done = data && r->accuracy < DATA_FAR_FROM_DONE;
    if (!near_chance && !far_from_ideal && !far_from_done) return HINT_NONE;
    const char *name = qkv_task_name(task->kind);
    qkv_task_defaults d = qkv_train_defaults(name);
    if (task->kind == QKV_TASK_MODULAR) { /* its held-out loss rises while it memorizes */
        snprintf(buf, len, "hint: modular arithmetic first memorizes its training pairs and "
                 "generalizes much later (grokking), driven by the weight decay: the default "
                 "run takes %ld steps with --weight-decay %g (this run: %ld steps, %g)",
                 (long)d.steps, d.weight_decay, (long)step, cfg->weight_decay);
        return HINT_STEPS;
    }
    double begun = first_loss(m);
    double fitted = last_train_acc(m);
    if (!(r->loss <= begun) && !isnan(begun) && isfinite(r->loss) &&
        fitted >= MEMORIZED_TRAIN_ACC) { /* the training examples right, the held-out wrong */
        snprintf(buf, len, "hint: the model memorized its training examples (training accuracy "
                 "%.0f%%) while the held-out loss rose from %.4g to %.4g: more training "
                 "examples, --weight-decay (this run's: %g) or a smaller --d-model help it "
                 "generalize, and more --steps may bring a later generalization",
                 100 * fitted, begun, r->loss, cfg->weight_decay);
        return HINT_MEMORIZED;
    }
    if (!(r->loss <= begun) && !isnan(begun)) { /* a loss that is not finite too */
        snprintf(buf, len, "hint: training diverged: the held-out loss rose from %.4g to %.4g; "
                 "try a lower --lr (this run's: %g)", begun, r->loss, cfg->lr);
        return HINT_DIVERGED;
    }
    bool looks_ahead = task->kind == QKV_TASK_REVERSE || task->kind == QKV_TASK_MAX;
    double hidden = data && c->causal ? causal_hidden_share(c, held) : 0;
    if (c->causal && looks_ahead) {
        snprintf(buf, len, "hint: the causal mask hides the later keys that %s needs; train "
                 "without --causal", name);
        return HINT_CAUSAL;
    }
    if (hidden > CAUSAL_HIDDEN_SHARE) {
        snprintf(buf, len, "hint: the causal mask hides what %.0f%% of the targets need (their "
                 "token is only in later positions); train without --causal", 100 * hidden);
        return HINT_CAUSAL;
    }
    int min_layers = qkv_task_min_layers(task);
    if (c->layers < min_layers || (min_layers > 1 && !c->residual)) {
        snprintf(buf, len, "hint: %s needs %d layers with the residual stream (--layers %d "
                 "--residual): one layer cannot both find a token's predecessor and match on it",
                 name, min_layers, min_layers);
        return HINT_DEPTH;
    }
    if (data && !near_chance && (c->layers < 2 || !c->residual)) { /* learned, then stuck */
        snprintf(buf, len, "hint: %s stays at %.0f%%: try two layers with the residual stream "
                 "(--layers 2 --residual), which can match on a token's neighbours as well as "
                 "on the token", c->layers < 2 ? "one layer" : "without the residual, the model",
                 100 * r->accuracy);
        return HINT_DEPTH;
    }
    if (step < d.steps) {
        snprintf(buf, len, "hint: too few steps: %s takes about %ld with the default options "
                 "(--steps)", name, (long)d.steps);
        return HINT_STEPS;
    }
    if (c->d_model < 32) {
        snprintf(buf, len, "hint: the model may be too narrow for %d tokens: try a wider "
                 "--d-model", task->vocab);
        return HINT_NARROW;
    }
    snprintf(buf, len, "hint: try more steps (--steps), a wider --d-model or more --heads, or "
             "another --lr");
    return HINT_OTHER;
}

/* ---- the summary as JSON ---- */

static void add_number(cJSON *j, const char *key, double v) {
    if (isfinite(v)) cJSON_AddNumberToObject(j, key, v);
    else cJSON_AddNullToObject(j, key);
}

static const double (*score_table(const eval_result *r, head_score s))[EVAL_MAX_HEADS] {
    return s == SCORE_PREV_TOKEN ? r->prev_token : s == SCORE_DUPLICATE ? r->duplicate
                                                                         : r->induction;
}

bool train_strongest_head(const trainer *t, const eval_result *r, head_score score, int *layer,
                          int *head, double *value) {
    const double(*table)[EVAL_MAX_HEADS] = score_table(r, score);
    int L = t->model.cfg.layers, H = t->model.cfg.heads < EVAL_MAX_HEADS ? t->model.cfg.heads
                                                                          : EVAL_MAX_HEADS;
    *layer = *head = -1;
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++)
            if (!isnan(table[l][h]) && (*layer < 0 || table[l][h] > table[*layer][*head])) {
                *layer = l;
                *head = h;
            }
    *value = *layer >= 0 ? table[*layer][*head] : NAN;
    return *layer >= 0;
}

static const char *score_key(head_score s) {
    static const char *const keys[] = {"previous_token", "duplicate_token", "induction"};
    return keys[s];
}

/* Every head's scores, and the strongest head of each score (as the summary picks it). */
static void add_head_scores(cJSON *j, const trainer *t, const eval_result *r) {
    if (t->model.cfg.target_len) { /* the scores are of self-attention */
        cJSON_AddNullToObject(j, "head_scores");
        cJSON_AddNullToObject(j, "strongest_heads");
        return;
    }
    int L = t->model.cfg.layers, H = t->model.cfg.heads < EVAL_MAX_HEADS ? t->model.cfg.heads
                                                                          : EVAL_MAX_HEADS;
    cJSON *all = cJSON_AddArrayToObject(j, "head_scores");
    cJSON *best = cJSON_AddObjectToObject(j, "strongest_heads");
    for (int l = 0; all && l < L; l++)
        for (int h = 0; h < H; h++) {
            cJSON *o = cJSON_CreateObject();
            if (!o) return;
            cJSON_AddNumberToObject(o, "layer", l + 1);
            cJSON_AddNumberToObject(o, "head", h + 1);
            for (int s = 0; s < SCORE_KINDS; s++)
                add_number(o, score_key((head_score)s), score_table(r, (head_score)s)[l][h]);
            cJSON_AddItemToArray(all, o);
        }
    for (int s = 0; best && s < SCORE_KINDS; s++) {
        int bl, bh; /* null where no head's score is defined */
        double v;
        if (!train_strongest_head(t, r, (head_score)s, &bl, &bh, &v)) {
            cJSON_AddNullToObject(best, score_key((head_score)s));
            continue;
        }
        cJSON *o = cJSON_AddObjectToObject(best, score_key((head_score)s));
        if (!o) return;
        add_number(o, "score", v);
        cJSON_AddNumberToObject(o, "layer", bl + 1);
        cJSON_AddNumberToObject(o, "head", bh + 1);
    }
}

/* Held-out example 1's targets, and how many of them the model gets right. */
static void add_example(cJSON *j, trainer *t) {
    int To = t->target_len;
    int32_t *pred = malloc((size_t)To * sizeof *pred);
    cJSON *o = pred ? cJSON_AddObjectToObject(j, "example") : NULL;
    if (o) {
        trainer_predict(t, 0, pred);
        int right = 0, targets = 0;
        for (int i = 0; i < To; i++)
            if (t->held_targets[i] >= 0) targets++, right += pred[i] == t->held_targets[i];
        cJSON_AddNumberToObject(o, "right", right);
        cJSON_AddNumberToObject(o, "targets", targets);
    }
    free(pred);
}

static void add_phase_changes(cJSON *j, const trainer *t, const metrics_table *m) {
    int head = 0;
    int64_t step = m ? train_induction_step(t, m, &head) : -1;
    cJSON *o = step >= 0 ? cJSON_AddObjectToObject(j, "induction_step") : NULL;
    if (o) {
        cJSON_AddNumberToObject(o, "step", (double)step);
        cJSON_AddNumberToObject(o, "layer", m->layers);
        cJSON_AddNumberToObject(o, "head", head + 1);
    } else if (step < 0) {
        cJSON_AddNullToObject(j, "induction_step");
    }
    enum { MAX_SHOWN = 64 };
    phase_change c[MAX_SHOWN];
    int n = m ? train_phase_changes(m, c, MAX_SHOWN) : 0;
    cJSON *list = cJSON_AddArrayToObject(j, "phase_changes");
    for (int i = 0; list && i < n && i < MAX_SHOWN; i++) {
        cJSON *p = cJSON_CreateObject();
        if (!p) return;
        cJSON_AddStringToObject(p, "score", head_score_name(c[i].score));
        cJSON_AddNumberToObject(p, "layer", c[i].layer + 1);
        cJSON_AddNumberToObject(p, "head", c[i].head + 1);
        cJSON_AddNumberToObject(p, "from_step", (double)c[i].from_step);
        cJSON_AddNumberToObject(p, "step", (double)c[i].step);
        add_number(p, "from_score", c[i].from_score);
        add_number(p, "to_score", c[i].to_score);
        add_number(p, "from_loss", c[i].from_loss);
        add_number(p, "to_loss", c[i].to_loss);
        if (c[i].score == SCORE_INDUCTION) { /* the steps of its three signals, null if none */
            cJSON *sig = cJSON_AddObjectToObject(p, "signals");
            const char *keys[] = {"score_step", "icl_step", "loss_step"};
            int64_t steps[] = {c[i].score_step, c[i].icl_step, c[i].loss_step};
            for (int k = 0; sig && k < 3; k++)
                add_number(sig, keys[k], steps[k] >= 0 ? (double)steps[k] : NAN);
        }
        cJSON_AddItemToArray(list, p);
    }
}

cJSON *train_report_json(trainer *t, const eval_result *r, const metrics_table *m) {
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    const qkv_model_config *c = &t->model.cfg;
    add_number(j, "heldout_accuracy", r->accuracy);
    add_number(j, "chance", qkv_task_chance(&t->cfg.task));
    add_number(j, "heldout_loss", r->loss);
    cJSON_AddNumberToObject(j, "heldout_correct", (double)r->correct);
    cJSON_AddNumberToObject(j, "heldout_targets", (double)r->counted);
    if (r->has_ideal) {
        add_number(j, "attention_mass", r->attention_mass);
        cJSON_AddNumberToObject(j, "attention_layer", r->attention_layer + 1);
        cJSON_AddNumberToObject(j, "best_head", r->best_head + 1);
        cJSON *layers = cJSON_AddArrayToObject(j, "layer_mass");
        for (int l = 0; layers && l < c->layers; l++) {
            cJSON *o = cJSON_CreateObject();
            if (!o) break;
            cJSON_AddNumberToObject(o, "layer", l + 1);
            add_number(o, "mass", r->layer_mass[l]);
            cJSON_AddNumberToObject(o, "head", r->layer_best_head[l] + 1);
            cJSON_AddItemToArray(layers, o);
        }
    } else { /* a data file: no ideal pattern to measure */
        cJSON_AddNullToObject(j, "attention_mass");
        cJSON_AddNullToObject(j, "attention_layer");
        cJSON_AddNullToObject(j, "best_head");
        cJSON_AddNullToObject(j, "layer_mass");
    }
    add_head_scores(j, t, r);
    add_example(j, t);
    add_phase_changes(j, t, m);
    char hint[512];
    if (train_hint(t, r, m, hint, sizeof hint) != HINT_NONE)
        cJSON_AddStringToObject(j, "hint", hint + strlen("hint: "));
    else
        cJSON_AddNullToObject(j, "hint");
    return j;
}
