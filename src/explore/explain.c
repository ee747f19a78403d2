/* explain.c - ablation, patching and attribution over qkv_model_forward_probe (explain.h). */
#include "explore/explain.h"
#include "engine/engine.h"
#include "io/io.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

explain_set explain_heldout(const trainer *t) {
    return (explain_set){.n = t->n_held, .x = t->held_tokens, .y = t->held_targets,
                         .len = t->held_lengths};
}

/* ---- the words a user types ---- */

/* A whole number in [0, n) (digits only: engine/numbers.c), or -1. */
static long parse_id(const char *w, long n) {
    uint64_t v;
    return number_u64(w, &v) == NUMBER_OK && v < (uint64_t)n ? (long)v : -1;
}

/* A token id from a word: a data file's token string, or a task's id or label; -1 if none. */
static long word_token(const trainer *t, const char *w) {
    if (t->data) return dataset_token_id(t->data, w);
    const qkv_task *task = &t->cfg.task;
    long id = parse_id(w, task->vocab);
    if (id >= 0) return id;
    char label[32];
    for (int k = 0; k < task->vocab; k++) {
        qkv_task_token_label(task, k, label, sizeof label);
        if (!strcmp(label, w)) return k;
    }
    return -1;
}

qkv_status explain_read_input(const trainer *t, const char *option, const char *text,
                              explain_input *in) {
    memset(in, 0, sizeof *in);
    int T = t->model.cfg.seq_len, n = 0;
    char word[256];
    for (const char *p = text;;) {
        p += strspn(p, " \t");
        if (!*p) break;
        size_t len = strcspn(p, " \t");
        if (n >= T)
            return qkv_fail(QKV_ERR_VALUE, "%s has more than %d tokens: the model reads at most "
                            "%d (its --seq-len)", option, T, T);
        snprintf(word, sizeof word, "%.*s", (int)(len < sizeof word ? len : sizeof word - 1), p);
        long id = len < sizeof word ? word_token(t, word) : -1;
        if (id < 0)
            return qkv_fail(QKV_ERR_VALUE, "%s: '%.40s' (token %d) is not a token the model "
                            "knows", option, word, n);
        in->tokens[n++] = (int32_t)id;
        p += len;
    }
    if (n == 0 || (!t->data && n != T))
        return qkv_fail(QKV_ERR_VALUE, "%s has %d token%s; the model reads %s %d", option, n,
                        n == 1 ? "" : "s", t->data ? "at least" : "exactly", t->data ? 1 : T);
    for (int i = n; i < T; i++) in->tokens[i] = DATA_PAD;
    in->n = in->len = n;
    for (int i = 0; i < t->target_len; i++) in->targets[i] = -1;
    return t->data ? QKV_OK : explain_task_targets(t, QKV_ERR_VALUE, option, in->tokens,
                                                   in->targets);
}

qkv_status explain_task_targets(const trainer *t, qkv_status status, const char *where,
                                const int32_t *x, int32_t *y) {
    if (qkv_task_targets(&t->cfg.task, x, y) == QKV_OK) return QKV_OK;
    return qkv_fail(status, "%s: %s", where, qkv_last_error());
}

int explain_read_token(const trainer *t, const char *word) {
    return (int)word_token(t, word);
}

int explain_read_class(const trainer *t, const char *option, const char *word) {
    long id = word_token(t, word);
    const qkv_task *task = &t->cfg.task;
    if (id < 0 && !t->data && task->kind == QKV_TASK_LOOKUP && word[0] == 'v')
        id = parse_id(word + 1, task->n_values);
    if (id < 0 || id >= t->model.cfg.vocab) {
        qkv_fail(QKV_ERR_VALUE, "%s: '%.40s' is not a token the model can predict", option, word);
        return -1;
    }
    return (int)id;
}

/* Query positions: the input's (its typed tokens for a data file), or the decoder's. */
static int query_positions(const trainer *t, const explain_input *in) {
    return t->model.cfg.target_len ? t->target_len : in->n;
}

void explain_position_label(const trainer *t, const explain_input *in, int i, char *buf,
                            size_t len) {
    char tok[32];
    if (t->model.cfg.target_len) {
        snprintf(buf, len, "%d", i);
        return;
    }
    trainer_token_label(t, in->tokens[i], tok, sizeof tok);
    snprintf(buf, len, "%d:%s", i, tok);
}

static bool has_target(const trainer *t, const explain_input *in, int i) {
    if (i < 0 || i >= query_positions(t, in)) return false;
    return t->data ? true : in->targets[i] >= 0;
}

/* A data file's model: whether query position i carried a target in the training examples
 * whose input length is nearest the input's (the shorter of two as near), the inputs that
 * taught the model what to predict there. */
static bool data_position_trained(const trainer *t, const explain_input *in, int i) {
    const dataset *d = t->data;
    int nearest = -1;
    for (int e = 0; e < d->n_train; e++) {
        int len = d->train_len[e], gap = abs(len - in->len), best = abs(nearest - in->len);
        if (nearest < 0 || gap < best || (gap == best && len < nearest)) nearest = len;
    }
    for (int e = 0; e < d->n_train && i < d->out_len; e++)
        if (d->train_len[e] == nearest && d->train_y[(int64_t)e * d->out_len + i] >= 0)
            return true;
    return false;
}

bool explain_position_trained(const trainer *t, const explain_input *in, int i) {
    if (!has_target(t, in, i)) return false;
    return t->data ? data_position_trained(t, in, i) : true;
}

int explain_default_position(const trainer *t, const explain_input *in) {
    for (int i = query_positions(t, in) - 1; i >= 0; i--)
        if (explain_position_trained(t, in, i)) return i;
    return -1;
}

qkv_status explain_check_position(const trainer *t, const explain_input *in, int i) {
    if (has_target(t, in, i)) return QKV_OK;
    if (i >= query_positions(t, in))
        return qkv_fail(QKV_ERR_VALUE, "--position %d is past the last position (%d)", i,
                        query_positions(t, in) - 1);
    return qkv_fail(QKV_ERR_VALUE, "--position %d has no target in this input (the task "
                    "predicts nothing there)", i);
}

/* ---- numbers a metric is made of: finite, or refused saying which and where ---- */

/* QKV_OK when v is finite; else QKV_ERR_NUMERIC with the line "<what> is not finite (NaN):
 * ...", `what` (printf-style) naming the number and the run it comes from. Every analysis's
 * metric (patch's logit difference and attributions, attribute's logit and parts, ablate's
 * losses) is checked here before it is used or reported. */
static qkv_status check_finite(double v, const char *what, ...) __attribute__((format(printf, 2, 3)));
static qkv_status check_finite(double v, const char *what, ...) {
    if (isfinite(v)) return QKV_OK;
    char where[600];
    va_list ap;
    va_start(ap, what);
    vsnprintf(where, sizeof where, what, ap);
    va_end(ap);
    return qkv_fail(QKV_ERR_NUMERIC, "%s is not finite (%s): the model's forward overflows "
                    "(weights too large for its numbers)", where,
                    isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf");
}

/* The logit of `token` at query position i of batch row b of logits (B, To, V), checked by
 * check_finite, `run` saying which run it is of ("the clean run"). */
static qkv_status check_logit(const trainer *t, const qkv_tensor *logits, int b, int i,
                              int token, const char *run) {
    int64_t To = logits->shape[1], V = logits->shape[2];
    char label[32];
    trainer_token_label(t, token, label, sizeof label);
    return check_finite(qkv_get(logits, ((int64_t)b * To + i) * V + token),
                        "the logit of '%s' at position %d in %s", label, i, run);
}

/* ---- scoring a set of examples ---- */

/* A fresh context that records a graph of one sequence, forward and backward (the trainer's
 * eval context is no-grad), checked against the memory limit; NULL with QKV_ERR_NOMEM set. */
static qkv_ctx *graph_ctx(const trainer *t, const char *command) {
    return trainer_analysis_ctx(qkv_model_step_bytes(&t->model.cfg, 1), command);
}

/* Bytes of L tensors (1, H, To, Dk) of the model's numbers: the head outputs an analysis
 * keeps (means, clean and corrupted runs), with each tensor's header and alignment. */
static double head_outputs_bytes(const trainer *t) {
    const qkv_model_config *c = &t->model.cfg;
    return (double)c->layers * ((double)c->d_model * t->target_len * qkv_dtype_size(c->dtype) + 1024);
}

/* Batch b's logits (B, To, V) against targets y (B, To): argmax hits and counted positions
 * (the first of equal largest, as training's accuracy). */
static void count_hits(const qkv_tensor *logits, const int32_t *y, int64_t *hits,
                       int64_t *counted) {
    int64_t rows = logits->shape[0] * logits->shape[1], V = logits->shape[2];
    for (int64_t r = 0; r < rows; r++) {
        if (y[r] < 0) continue;
        int64_t best = 0;
        for (int64_t j = 1; j < V; j++)
            if (qkv_get(logits, r * V + j) > qkv_get(logits, r * V + best)) best = j;
        *hits += best == y[r];
        (*counted)++;
    }
}

/* How a scored run's heads are edited, for a message: "with head 1.2 removed". */
static const char *edits_text(const qkv_head_edit *edits, int n_edits, char *buf, size_t len) {
    if (n_edits == 0) snprintf(buf, len, "%s", "");
    else if (n_edits == 1) snprintf(buf, len, "with head %d.%d removed", edits[0].layer + 1,
                                    edits[0].head + 1);
    else snprintf(buf, len, "with the %d heads removed together", n_edits);
    return buf;
}

qkv_status explain_check_scored_logits(const trainer *t, const qkv_tensor *logits,
                                      const int32_t *y, int first, const qkv_head_edit *edits,
                                      int n_edits) {
    int64_t B = logits->shape[0], To = logits->shape[1], V = logits->shape[2];
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < To; i++) {
            if (y[b * To + i] < 0) continue;
            for (int64_t j = 0; j < V; j++) {
                if (isfinite(qkv_get(logits, (b * To + i) * V + j))) continue;
                char run[96], edited[64];
                snprintf(run, sizeof run, "example %lld%s%s", (long long)(first + b + 1),
                         n_edits ? " " : "", edits_text(edits, n_edits, edited, sizeof edited));
                return check_logit(t, logits, (int)b, (int)i, (int)j, run);
            }
        }
    return QKV_OK;
}

qkv_status explain_score_set(trainer *t, const explain_set *set, const qkv_head_edit *edits,
                             int n_edits, explain_score *out) {
    int T = t->model.cfg.seq_len, To = t->target_len;
    double loss_sum = 0;
    int64_t hits = 0, counted = 0;
    for (int start = 0; start < set->n; start += ANALYSIS_BATCH) {
        int B = set->n - start < ANALYSIS_BATCH ? set->n - start : ANALYSIS_BATCH;
        const int32_t *y = set->y + (size_t)start * To;
        qkv_ctx_reset(t->eval_ctx);
        qkv_probe probe = {.edits = edits, .n_edits = n_edits};
        qkv_tensor *logits = qkv_model_forward_probe(
            &t->model, t->eval_ctx, set->x + (size_t)start * T, set->len ? set->len + start : NULL,
            B, &probe);
        qkv_status s = explain_check_scored_logits(t, logits, y, start, edits, n_edits);
        if (s != QKV_OK) return s;
        int64_t before = counted;
        count_hits(logits, y, &hits, &counted);
        if (counted == before) continue;
        qkv_tensor *targets = qkv_from_array(t->eval_ctx, QKV_I32, 2, (int64_t[]){B, To}, y);
        double loss = qkv_get(qkv_cross_entropy(t->eval_ctx, logits, targets, -1), 0);
        char edited[64];
        if ((s = check_finite(loss, "the loss of examples %d..%d%s%s", start + 1, start + B,
                              n_edits ? " " : "",
                              edits_text(edits, n_edits, edited, sizeof edited))) != QKV_OK)
            return s;
        loss_sum += loss * (double)(counted - before);
    }
    *out = (explain_score){.loss = counted ? loss_sum / (double)counted : 0,
                           .accuracy = counted ? (double)hits / (double)counted : 0,
                           .counted = counted};
    return QKV_OK;
}

/* means[l]: layer l's head outputs averaged over the examples, (1, H, To, Dk) in params. */
static qkv_status head_means(trainer *t, const explain_set *set, qkv_ctx *keep,
                             qkv_tensor **means) {
    const qkv_model_config *c = &t->model.cfg;
    int T = c->seq_len, To = t->target_len, H = c->heads, Dk = c->d_model / H;
    int64_t per = (int64_t)H * To * Dk;
    double *sum = calloc((size_t)(c->layers * per), sizeof *sum);
    if (!sum) return qkv_fail(QKV_ERR_NOMEM, "ablate: out of memory for the heads' means");
    for (int start = 0; start < set->n; start += ANALYSIS_BATCH) {
        int B = set->n - start < ANALYSIS_BATCH ? set->n - start : ANALYSIS_BATCH;
        qkv_ctx_reset(t->eval_ctx);
        qkv_probe probe = {0};
        qkv_model_forward_probe(&t->model, t->eval_ctx, set->x + (size_t)start * T,
                                set->len ? set->len + start : NULL, B, &probe);
        for (int l = 0; l < c->layers; l++)
            for (int b = 0; b < B; b++)
                for (int64_t k = 0; k < per; k++)
                    sum[l * per + k] += qkv_get(probe.z[l], b * per + k);
    }
    for (int l = 0; l < c->layers; l++) {
        means[l] = qkv_new(keep, c->dtype, 4, (int64_t[]){1, H, To, Dk});
        for (int64_t k = 0; k < per; k++)
            qkv_set(means[l], k, set->n ? sum[l * per + k] / set->n : 0);
    }
    free(sum);
    return QKV_OK;
}

qkv_status explain_ablate(trainer *t, const explain_set *set, const ablate_request *rq,
                          ablate_result *r) {
    const qkv_model_config *c = &t->model.cfg;
    memset(r, 0, sizeof *r);
    /* every head of every layer when none is listed */
    int n = rq->n_heads ? rq->n_heads : c->layers * c->heads;
    r->heads = malloc((size_t)n * sizeof *r->heads);
    r->each = calloc((size_t)n, sizeof *r->each);
    if (!r->heads || !r->each) {
        explain_ablate_free(r);
        return qkv_fail(QKV_ERR_NOMEM, "ablate: out of memory for %d heads' scores", n);
    }
    if (rq->n_heads) {
        r->n_heads = rq->n_heads;
        memcpy(r->heads, rq->heads, sizeof r->heads[0] * (size_t)rq->n_heads);
    } else {
        for (int l = 0; l < c->layers; l++)
            for (int h = 0; h < c->heads; h++) r->heads[r->n_heads++] = (explain_head){l, h};
    }
    qkv_status s = trainer_analysis_reserve(t, set->n, "ablate");
    qkv_ctx *keep = s == QKV_OK ? trainer_analysis_ctx(head_outputs_bytes(t), "ablate") : NULL;
    if (!keep) return s != QKV_OK ? s : QKV_ERR_NOMEM;
    qkv_tensor *means[QKV_MAX_LAYERS] = {0};
    s = rq->mean ? head_means(t, set, keep, means) : QKV_OK;
    qkv_head_edit *all = calloc((size_t)r->n_heads, sizeof *all);
    if (s == QKV_OK && !all) s = qkv_fail(QKV_ERR_NOMEM, "ablate: out of memory");
    if (s != QKV_OK) {
        free(all);
        qkv_ctx_free(keep);
        return s;
    }
    for (int i = 0; i < r->n_heads; i++) {
        int l = r->heads[i].layer;
        all[i] = (qkv_head_edit){.kind = rq->mean ? QKV_HEAD_MEAN : QKV_HEAD_ZERO, .layer = l,
                                 .head = r->heads[i].head, .position = -1, .value = means[l]};
    }
    s = explain_score_set(t, set, NULL, 0, &r->baseline);
    for (int i = 0; s == QKV_OK && i < r->n_heads; i++)
        s = explain_score_set(t, set, &all[i], 1, &r->each[i]);
    if (s == QKV_OK && rq->together) s = explain_score_set(t, set, all, r->n_heads, &r->together);
    if (s == QKV_ERR_NUMERIC) qkv_fail(s, "ablate: %s", qkv_last_error());
    free(all);
    qkv_ctx_free(keep);
    return s;
}

void explain_ablate_free(ablate_result *r) {
    free(r->heads);
    free(r->each);
    r->heads = NULL;
    r->each = NULL;
}

/* ---- patching ---- */

/* The metric logit[answer] - logit[wrong] at r's position of a run's logits (1, To, V) into
 * *m, after check_logit of both logits (`run` names the run). */
static qkv_status metric_of(const trainer *t, const qkv_tensor *logits, const patch_result *r,
                            const char *run, double *m) {
    int64_t V = logits->shape[2], row = (int64_t)r->position * V;
    qkv_status s = check_logit(t, logits, 0, r->position, r->answer, run);
    if (s == QKV_OK) s = check_logit(t, logits, 0, r->position, r->wrong, run);
    *m = qkv_get(logits, row + r->answer) - qkv_get(logits, row + r->wrong);
    return s == QKV_OK ? check_finite(*m, "the metric (logit difference) in %s", run) : s;
}

/* z[l] copied into keep, (1, H, To, Dk) each, for later runs to read. */
static void keep_z(qkv_ctx *keep, const qkv_probe *probe, int layers, qkv_tensor **out) {
    for (int l = 0; l < layers; l++) {
        const qkv_tensor *z = probe->z[l];
        out[l] = qkv_new(keep, z->dtype, z->ndim, z->shape);
        memcpy(out[l]->data, z->data, (size_t)z->size * qkv_dtype_size(z->dtype));
    }
}

static double pearson(const patch_row *rows, int n) {
    double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
    int k = 0;
    for (int i = 0; i < n; i++) {
        double x = rows[i].exact, y = rows[i].attribution;
        if (!isfinite(x) || !isfinite(y)) continue;
        sx += x, sy += y, sxx += x * x, syy += y * y, sxy += x * y, k++;
    }
    if (k < 2) return NAN;
    double cov = sxy - sx * sy / k, vx = sxx - sx * sx / k, vy = syy - sy * sy / k;
    return vx > 0 && vy > 0 ? cov / sqrt(vx * vy) : NAN;
}

qkv_status explain_patch(trainer *t, const explain_input *clean, const explain_input *corrupt,
                         patch_result *r) {
    const qkv_model_config *c = &t->model.cfg;
    int L = c->layers, H = c->heads, To = t->target_len, Dk = c->d_model / H, V = c->vocab;
    int positions = r->over_positions ? query_positions(t, clean) : 1;
    r->rows = NULL;
    r->agreement = NAN;
    qkv_status s = trainer_analysis_reserve(t, 1, NULL);
    if (s != QKV_OK) return s;
    qkv_ctx *keep = trainer_analysis_ctx(2 * head_outputs_bytes(t), NULL);
    qkv_ctx *g = keep ? graph_ctx(t, NULL) : NULL;
    if (!keep || !g) {
        qkv_ctx_free(keep);
        return QKV_ERR_NOMEM;
    }
    qkv_tensor *z_clean[QKV_MAX_LAYERS], *z_corrupt[QKV_MAX_LAYERS];
    const int32_t *clen = t->data ? &clean->len : NULL, *xlen = t->data ? &corrupt->len : NULL;
    qkv_ctx_reset(t->eval_ctx);
    qkv_probe probe = {0};
    qkv_tensor *logits = qkv_model_forward_probe(&t->model, t->eval_ctx, clean->tokens, clen, 1,
                                                 &probe);
    s = metric_of(t, logits, r, "the clean run", &r->clean);
    keep_z(keep, &probe, L, z_clean);
    /* the corrupted run, recorded: d metric / d z from one backward pass */
    qkv_probe cp = {0};
    logits = qkv_model_forward_probe(&t->model, g, corrupt->tokens, xlen, 1, &cp);
    if (s == QKV_OK) s = metric_of(t, logits, r, "the corrupted run", &r->corrupt);
    keep_z(keep, &cp, L, z_corrupt);
    double diff = r->clean - r->corrupt;
    if (s == QKV_OK && !(fabs(diff) > 0))
        s = qkv_fail(QKV_ERR_VALUE, "the clean and the corrupted input give the same "
                     "logit difference (%g): there is nothing to recover", r->clean);
    if (s != QKV_OK) {
        qkv_ctx_free(keep), qkv_ctx_free(g);
        return s;
    }
    if (r->attribution) {
        qkv_tensor *pick = qkv_zeros(g, c->dtype, 3, (int64_t[]){1, To, V});
        qkv_set(pick, (int64_t)r->position * V + r->answer, 1.0);
        qkv_set(pick, (int64_t)r->position * V + r->wrong, -1.0);
        qkv_backward(qkv_sum(g, qkv_mul(g, logits, pick)));
    }
    r->n_rows = L * H * positions;
    r->rows = calloc((size_t)r->n_rows, sizeof *r->rows);
    if (!r->rows) {
        qkv_ctx_free(keep), qkv_ctx_free(g);
        return qkv_fail(QKV_ERR_NOMEM, "patch: out of memory");
    }
    int k = 0;
    for (int l = 0; l < L && s == QKV_OK; l++)
        for (int h = 0; h < H && s == QKV_OK; h++)
            for (int p = 0; p < positions && s == QKV_OK; p++, k++) {
                patch_row *row = &r->rows[k];
                *row = (patch_row){l, h, r->over_positions ? p : -1, NAN, NAN};
                char head[48], run[96]; /* "head 1.2" or "head 1.2 at position 3" */
                snprintf(head, sizeof head, "head %d.%d", l + 1, h + 1);
                if (row->position >= 0)
                    snprintf(head + strlen(head), sizeof head - strlen(head), " at position %d", p);
                snprintf(run, sizeof run, "the corrupted run with the clean output of %s patched "
                         "in", head);
                if (r->exact) {
                    qkv_head_edit e = {QKV_HEAD_REPLACE, l, h, row->position, z_clean[l]};
                    qkv_ctx_reset(t->eval_ctx);
                    qkv_probe pp = {.edits = &e, .n_edits = 1};
                    qkv_tensor *pl = qkv_model_forward_probe(&t->model, t->eval_ctx,
                                                             corrupt->tokens, xlen, 1, &pp);
                    double m;
                    if ((s = metric_of(t, pl, r, run, &m)) != QKV_OK) break;
                    row->exact = (m - r->corrupt) / diff;
                }
                if (r->attribution) {
                    double a = 0;
                    int i0 = row->position < 0 ? 0 : p, i1 = row->position < 0 ? To : p + 1;
                    for (int i = i0; i < i1; i++)
                        for (int d = 0; d < Dk; d++) {
                            int64_t at = ((int64_t)h * To + i) * Dk + d;
                            a += (qkv_get(z_clean[l], at) - qkv_get(z_corrupt[l], at)) *
                                 qkv_grad_get(cp.z[l], at);
                        }
                    row->attribution = a / diff;
                    s = check_finite(a, "the attribution of %s (d metric / d z from the "
                                     "corrupted run's backward pass)", head);
                }
            }
    if (s == QKV_OK && r->exact && r->attribution) r->agreement = pearson(r->rows, r->n_rows);
    qkv_ctx_free(keep);
    qkv_ctx_free(g);
    return s;
}

void explain_patch_free(patch_result *r) {
    free(r->rows);
    r->rows = NULL;
}

/* ---- direct logit attribution ---- */

qkv_status explain_attribute(trainer *t, const explain_input *in, int position, int token,
                             dla_result *r) {
    const qkv_model_config *c = &t->model.cfg;
    int L = c->layers, H = c->heads, To = t->target_len, C = c->d_model, Dk = C / H, V = c->vocab;
    memset(r, 0, sizeof *r);
    /* embed, each head of the layers that reach the logit, bias */
    int max_parts = (c->residual ? L : 1) * H + 2;
    r->parts = calloc((size_t)max_parts, sizeof *r->parts);
    if (!r->parts)
        return qkv_fail(QKV_ERR_NOMEM, "attribute: out of memory for %d parts", max_parts);
    qkv_status s = trainer_analysis_reserve(t, 1, NULL);
    if (s != QKV_OK) return s;
    qkv_ctx_reset(t->eval_ctx);
    qkv_probe probe = {0};
    qkv_tensor *logits = qkv_model_forward_probe(&t->model, t->eval_ctx, in->tokens,
                                                 t->data ? &in->len : NULL, 1, &probe);
    int64_t row = (int64_t)position * V;
    if (token < 0) { /* the predicted token: the first of equal largest */
        token = 0;
        for (int j = 1; j < V; j++)
            if (qkv_get(logits, row + j) > qkv_get(logits, row + token)) token = j;
    }
    r->position = position, r->token = token, r->logit = qkv_get(logits, row + token);
    s = check_logit(t, logits, 0, position, token, "the run of the input");
    if (s != QKV_OK) return s;
    char label[32];
    trainer_token_label(t, token, label, sizeof label);
    const qkv_tensor *hw = t->model.head_w; /* (C, V) */
    if (c->residual) {
        dla_part *p = &r->parts[r->n_parts++];
        *p = (dla_part){"embed", -1, -1, 0};
        for (int k = 0; k < C; k++)
            p->value += qkv_get(probe.stream[0], (int64_t)position * C + k) *
                        qkv_get(hw, (int64_t)k * V + token);
    }
    /* head h of layer l writes z[h] · W_O[h*Dk .. h*Dk+Dk, :] into the stream, which reaches
     * the logit through head.w[:, token]: u[j] = W_O[j, :] · head.w[:, token] */
    double *u = malloc((size_t)C * sizeof *u);
    if (!u) return qkv_fail(QKV_ERR_NOMEM, "attribute: out of memory");
    for (int l = c->residual ? 0 : L - 1; l < L; l++) {
        const qkv_tensor *wo = t->model.w_o[l];
        for (int j = 0; j < C; j++) {
            u[j] = 0;
            for (int k = 0; k < C; k++)
                u[j] += qkv_get(wo, (int64_t)j * C + k) * qkv_get(hw, (int64_t)k * V + token);
        }
        for (int h = 0; h < H; h++) {
            dla_part *p = &r->parts[r->n_parts++];
            *p = (dla_part){"", l, h, 0};
            snprintf(p->name, sizeof p->name, "%d.%d", l + 1, h + 1);
            for (int d = 0; d < Dk; d++)
                p->value += qkv_get(probe.z[l], ((int64_t)h * To + position) * Dk + d) *
                            u[h * Dk + d];
        }
    }
    free(u);
    r->parts[r->n_parts++] = (dla_part){"bias", -1, -1, qkv_get(t->model.head_b, token)};
    for (int i = 0; i < r->n_parts && s == QKV_OK; i++) {
        r->sum += r->parts[i].value;
        s = check_finite(r->parts[i].value, "the part '%s' of the logit of '%s' at position %d",
                         r->parts[i].name, label, position);
    }
    return s;
}

void explain_attribute_free(dla_result *r) {
    free(r->parts);
    r->parts = NULL;
}

/* ---- JSON ---- */

static void add_number(cJSON *o, const char *key, double v) {
    if (isfinite(v)) cJSON_AddNumberToObject(o, key, v);
    else cJSON_AddNullToObject(o, key);
}

static void add_score(cJSON *o, const explain_score *s) {
    add_number(o, "loss", s->loss);
    add_number(o, "accuracy", s->accuracy);
}

/* "L.H" counted from 1 */
static void head_name(int layer, int head, char *buf, size_t len) {
    snprintf(buf, len, "%d.%d", layer + 1, head + 1);
}

/* Tokens as JSON names them: each token itself, never shortened (a table may shorten it;
 * two tokens that share a long prefix stay two names). */
cJSON *explain_token_json(const trainer *t, int32_t token) {
    char label[32];
    return cJSON_CreateString(trainer_token_text(t, token, label, sizeof label));
}

static cJSON *token_labels(const trainer *t, const explain_input *in) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < in->n; i++) cJSON_AddItemToArray(a, explain_token_json(t, in->tokens[i]));
    return a;
}

/* "3:tok" (a decoder's position: "3"), with the token whole. */
static cJSON *position_labels(const trainer *t, const explain_input *in) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < query_positions(t, in); i++) {
        char number[16], label[32];
        snprintf(number, sizeof number, "%d", i);
        if (t->model.cfg.target_len) {
            cJSON_AddItemToArray(a, cJSON_CreateString(number));
            continue;
        }
        const char *text = trainer_token_text(t, in->tokens[i], label, sizeof label);
        size_t n = strlen(number) + 1 + strlen(text) + 1;
        char *both = malloc(n);
        if (both) snprintf(both, n, "%s:%s", number, text);
        cJSON_AddItemToArray(a, both ? cJSON_CreateString(both) : NULL);
        free(both);
    }
    return a;
}

cJSON *explain_json_header(const trainer *t, const char *command, const explain_input *in) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "command", command);
    cJSON_AddStringToObject(o, "task", t->data ? "data" : qkv_task_name(t->cfg.task.kind));
    cJSON_AddStringToObject(o, "dtype", t->model.cfg.dtype == QKV_F64 ? "f64" : "f32");
    cJSON_AddNumberToObject(o, "layers", t->model.cfg.layers);
    cJSON_AddNumberToObject(o, "heads_per_layer", t->model.cfg.heads);
    if (strcmp(command, "ablate")) /* ablate's "heads" is its list of heads */
        cJSON_AddNumberToObject(o, "heads", t->model.cfg.heads);
    if (in) {
        cJSON_AddItemToObject(o, "tokens", token_labels(t, in));
        cJSON_AddItemToObject(o, "positions", position_labels(t, in));
    }
    return o;
}

cJSON *explain_ablate_json(const trainer *t, const ablate_request *rq, const ablate_result *r,
                           const char *data_path) {
    cJSON *o = explain_json_header(t, "ablate", NULL);
    cJSON_AddStringToObject(o, "mode", rq->mean ? "mean" : "zero");
    if (data_path) cJSON_AddStringToObject(o, "data", data_path);
    else cJSON_AddNullToObject(o, "data");
    cJSON_AddNumberToObject(o, "examples", (double)r->baseline.counted);
    cJSON *b = cJSON_AddObjectToObject(o, "baseline");
    add_score(b, &r->baseline);
    cJSON *heads = cJSON_AddArrayToObject(o, "heads");
    for (int i = 0; i < r->n_heads; i++) {
        cJSON *h = cJSON_CreateObject();
        cJSON_AddNumberToObject(h, "layer", r->heads[i].layer + 1);
        cJSON_AddNumberToObject(h, "head", r->heads[i].head + 1);
        add_score(h, &r->each[i]);
        cJSON_AddItemToArray(heads, h);
    }
    if (rq->together) {
        cJSON *tg = cJSON_AddObjectToObject(o, "together");
        cJSON *names = cJSON_AddArrayToObject(tg, "heads");
        char name[32];
        for (int i = 0; i < r->n_heads; i++) {
            head_name(r->heads[i].layer, r->heads[i].head, name, sizeof name);
            cJSON_AddItemToArray(names, cJSON_CreateString(name));
        }
        add_score(tg, &r->together);
    }
    return o;
}

cJSON *explain_patch_json(const trainer *t, const explain_input *clean,
                          const explain_input *corrupt, const patch_result *r) {
    cJSON *o = explain_json_header(t, "patch", clean);
    cJSON_AddItemToObject(o, "corrupt_tokens", token_labels(t, corrupt));
    cJSON_AddNumberToObject(o, "position", r->position);
    cJSON_AddItemToObject(o, "answer", explain_token_json(t, r->answer));
    cJSON_AddItemToObject(o, "wrong", explain_token_json(t, r->wrong));
    cJSON_AddStringToObject(o, "over", r->over_positions ? "head-position" : "head");
    cJSON_AddStringToObject(o, "method", r->exact && r->attribution ? "both"
                                         : r->exact                  ? "exact"
                                                                     : "attribution");
    add_number(o, "clean", r->clean);
    add_number(o, "corrupt", r->corrupt);
    cJSON *rows = cJSON_AddArrayToObject(o, "results");
    for (int i = 0; i < r->n_rows; i++) {
        const patch_row *p = &r->rows[i];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "layer", p->layer + 1);
        cJSON_AddNumberToObject(x, "head", p->head + 1);
        if (p->position < 0) cJSON_AddNullToObject(x, "position");
        else cJSON_AddNumberToObject(x, "position", p->position);
        add_number(x, "exact", p->exact);
        add_number(x, "attribution", p->attribution);
        cJSON_AddItemToArray(rows, x);
    }
    add_number(o, "agreement", r->agreement);
    return o;
}

cJSON *explain_attribute_json(const trainer *t, const explain_input *in, const dla_result *r) {
    cJSON *o = explain_json_header(t, "attribute", in);
    cJSON_AddNumberToObject(o, "position", r->position);
    cJSON_AddItemToObject(o, "token", explain_token_json(t, r->token));
    add_number(o, "logit", r->logit);
    cJSON *parts = cJSON_AddArrayToObject(o, "parts");
    for (int i = 0; i < r->n_parts; i++) {
        const dla_part *p = &r->parts[i];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "name", p->name);
        if (p->layer < 0) {
            cJSON_AddNullToObject(x, "layer");
            cJSON_AddNullToObject(x, "head");
        } else {
            cJSON_AddNumberToObject(x, "layer", p->layer + 1);
            cJSON_AddNumberToObject(x, "head", p->head + 1);
        }
        add_number(x, "value", p->value);
        cJSON_AddItemToArray(parts, x);
    }
    add_number(o, "sum", r->sum);
    return o;
}

qkv_status explain_write_json(const cJSON *json, const char *path) {
    char *text = cJSON_PrintUnformatted(json);
    if (!text) return qkv_fail(QKV_ERR_NOMEM, "%s: out of memory for the JSON", path);
    atomic_file af;
    qkv_status s = atomic_open(&af, path);
    if (s == QKV_OK) {
        fputs(text, af.f);
        fputc('\n', af.f);
        s = atomic_commit(&af);
    }
    free(text);
    return s;
}
