/* explain.c - ablation, patching and attribution over qkv_model_forward_probe (explain.h). */
#include "explore/explain.h"
#include "engine/engine.h"
#include "io/io.h"
#include "model/model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the words a user types ---- */

/* A whole number in [0, n) (digits only: engine/numbers.c), or -1. */
static long parse_id(const char *w, long n) {
    uint64_t v;
    return number_u64(w, &v) == NUMBER_OK && v < (uint64_t)n ? (long)v : -1;
}

/* A token id from a word: a data file's token string, or a task's id or label; -1 if none. */
static long word_token(const loaded_model *lm, const char *w) {
    if (lm->data) return dataset_token_id(lm->data, w);
    const qkv_task *task = &lm->cfg.task;
    long id = parse_id(w, task->vocab);
    if (id >= 0) return id;
    char label[32];
    for (int k = 0; k < task->vocab; k++) {
        qkv_task_token_label(task, k, label, sizeof label);
        if (!strcmp(label, w)) return k;
    }
    return -1;
}

/* Query positions: the input's (its typed tokens for a data file), or the decoder's. */
static int query_positions(const loaded_model *lm, const explain_input *in) {
    return lm->model.cfg.target_len ? lm->target_len : in->n;
}

/* A class (an output token) from a word: a token, or (lookup) a value v<N>; -1 if none. */
static long class_id(const loaded_model *lm, const char *w) {
    long id = word_token(lm, w);
    const qkv_task *task = &lm->cfg.task;
    if (id < 0 && !lm->data && task->kind == QKV_TASK_LOOKUP && w[0] == 'v')
        id = parse_id(w + 1, task->n_values);
    return id >= 0 && id < lm->model.cfg.vocab ? id : -1;
}

/* What a word of an input (or, with classes, of a list of targets) must be, for a message:
 * "a token of copy (an id 0..7)", "a class of copy (0..7, or _ for none)". */
static void expectation(const loaded_model *lm, bool classes, char *buf, size_t len) {
    const qkv_task *task = &lm->cfg.task;
    const char *name = qkv_task_name(task->kind);
    char example[32] = "";
    if (lm->data) {
        snprintf(buf, len, classes ? "a token of the model's vocabulary (or _ for none)"
                                   : "a token of the model's vocabulary (the token strings of "
                                     "%.60s)", lm->data->path);
    } else if (classes) {
        snprintf(buf, len, "a class of %s (0..%d%s, or _ for none)", name, lm->model.cfg.vocab - 1,
                 task->kind == QKV_TASK_LOOKUP ? ", or a value such as v1" : "");
    } else {
        qkv_task_token_label(task, 0, example, sizeof example);
        bool labels = strcmp(example, "0") != 0;
        snprintf(buf, len, "a token of %s (an id 0..%d%s%s%s)", name, task->vocab - 1,
                 labels ? ", or a label such as " : "", labels ? example : "",
                 task->kind == QKV_TASK_LOOKUP ? ", ?k0" : "");
    }
}

/* The words of `text` (split at spaces and tabs): input tokens, or with `classes` output
 * classes ("_": none, -1), between least and most of them (`limit` says why), into out and
 * their count into *n. QKV_ERR_VALUE naming the option and the culprit. */
static qkv_status read_words(const loaded_model *lm, const char *option, const char *text,
                             bool classes, int least, int most, const char *limit, int32_t *out,
                             int *n_out) {
    char word[256], expect[160];
    int n = 0;
    for (const char *p = text;;) {
        p += strspn(p, " \t");
        if (!*p) break;
        size_t len = strcspn(p, " \t");
        if (n >= most)
            return qkv_fail(QKV_ERR_VALUE, "%s has more than %d tokens; the model reads %s %d "
                            "(%s)", option, most, least == most ? "exactly" : "at most", most,
                            limit);
        snprintf(word, sizeof word, "%.*s", (int)(len < sizeof word ? len : sizeof word - 1), p);
        long id = -2;
        if (len < sizeof word && classes && !strcmp(word, "_")) id = -1;
        else if (len < sizeof word && classes)
            id = class_id(lm, word) >= 0 ? class_id(lm, word) : -2;
        else if (len < sizeof word) id = word_token(lm, word);
        if (id < (classes ? -1 : 0)) {
            expectation(lm, classes, expect, sizeof expect);
            return qkv_fail(QKV_ERR_VALUE, "%s: '%.*s' (token %d) is not %s", option,
                            (int)(len < 40 ? len : 40), p, n, expect);
        }
        out[n++] = (int32_t)id;
        p += len;
    }
    if (n < least)
        return qkv_fail(QKV_ERR_VALUE, "%s has %d token%s; the model reads %s %d (%s)", option, n,
                        n == 1 ? "" : "s", least == most ? "exactly" : "at least", least, limit);
    *n_out = n;
    return QKV_OK;
}

qkv_status explain_read_input(const loaded_model *lm, const char *option, const char *text,
                              explain_input *in) {
    memset(in, 0, sizeof *in);
    int T = lm->model.cfg.seq_len, n;
    qkv_status s = read_words(lm, option, text, false, lm->data ? 1 : T, T,
                              lm->data ? "the longest input of its data file" : "its --seq-len",
                              in->tokens, &n);
    if (s != QKV_OK) return s;
    for (int i = n; i < T; i++) in->tokens[i] = DATA_PAD;
    in->n = in->len = n;
    for (int i = 0; i < lm->target_len; i++) in->targets[i] = -1;
    return lm->data ? QKV_OK : explain_task_targets(lm, QKV_ERR_VALUE, option, in->tokens,
                                                   in->targets);
}

qkv_status explain_read_targets(const loaded_model *lm, const char *option, const char *text,
                                explain_input *in) {
    bool cross = lm->model.cfg.target_len > 0;
    int most = query_positions(lm, in), least = cross && lm->data ? 1 : most, n;
    for (int i = 0; i < lm->target_len; i++) in->targets[i] = -1;
    return read_words(lm, option, text, true, least, most,
                      cross ? "its decoder positions" : lm->data ? "one per input token"
                                                                : "its --seq-len",
                      in->targets, &n);
}

qkv_status explain_task_targets(const loaded_model *lm, qkv_status status, const char *where,
                                const int32_t *x, int32_t *y) {
    if (qkv_task_targets(&lm->cfg.task, x, y) == QKV_OK) return QKV_OK;
    return qkv_fail(status, "%s: %s", where, qkv_last_error());
}

int explain_read_token(const loaded_model *lm, const char *word) {
    return (int)word_token(lm, word);
}

int explain_read_class(const loaded_model *lm, const char *option, const char *word) {
    long id = class_id(lm, word);
    if (id < 0) {
        qkv_fail(QKV_ERR_VALUE, "%s: '%.40s' is not a token the model can predict", option, word);
        return -1;
    }
    return (int)id;
}

int explain_query_positions(const loaded_model *lm, const explain_input *in) {
    return query_positions(lm, in);
}

void explain_position_label(const loaded_model *lm, const explain_input *in, int i, char *buf,
                            size_t len) {
    char tok[32];
    if (lm->model.cfg.target_len) {
        snprintf(buf, len, "%d", i);
        return;
    }
    loaded_model_token_label(lm, in->tokens[i], tok, sizeof tok);
    snprintf(buf, len, "%d:%s", i, tok);
}

static bool has_target(const loaded_model *lm, const explain_input *in, int i) {
    if (i < 0 || i >= query_positions(lm, in)) return false;
    return lm->data ? true : in->targets[i] >= 0;
}

/* A data file's model: whether query position i carried a target in the training examples
 * whose input length is nearest the input's (the shorter of two as near), the inputs that
 * taught the model what to predict there. */
static bool data_position_trained(const loaded_model *lm, const explain_input *in, int i) {
    const dataset *d = lm->data;
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

bool explain_position_trained(const loaded_model *lm, const explain_input *in, int i) {
    if (!has_target(lm, in, i)) return false;
    return lm->data ? data_position_trained(lm, in, i) : true;
}

int explain_default_position(const loaded_model *lm, const explain_input *in) {
    for (int i = query_positions(lm, in) - 1; i >= 0; i--)
        if (explain_position_trained(lm, in, i)) return i;
    return -1;
}

qkv_status explain_check_position(const loaded_model *lm, const explain_input *in, int i) {
    if (has_target(lm, in, i)) return QKV_OK;
    if (i >= query_positions(lm, in))
        return qkv_fail(QKV_ERR_VALUE, "--position %d is past the last position (%d)", i,
                        query_positions(lm, in) - 1);
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
static qkv_status check_logit(const loaded_model *lm, const qkv_tensor *logits, int b, int i,
                              int token, const char *run) {
    int64_t To = logits->shape[1], V = logits->shape[2];
    char label[32];
    loaded_model_token_label(lm, token, label, sizeof label);
    return check_finite(qkv_get(logits, ((int64_t)b * To + i) * V + token),
                        "the logit of '%s' at position %d in %s", label, i, run);
}

/* ---- hook points ---- */

const char *const explain_site_names[] = {"z", "q", "k", "v", "pattern", "resid-pre",
                                          "resid-post", "resid-mid", "mlp-pre", "mlp-post",
                                          "mlp-out", NULL};
_Static_assert(sizeof explain_site_names / sizeof explain_site_names[0] == QKV_SITES + 1,
               "a name for every site");
const char *const explain_over_names[] = {"head", "head-position", "key-position",
                                          "layer-position", "neuron", "neuron-position", NULL};

/* The sites of a layer's stream, (B, To, C): no heads, positions only. */
static bool stream_site(qkv_site site) {
    return site == QKV_SITE_RESID_PRE || site == QKV_SITE_RESID_POST ||
           site == QKV_SITE_RESID_MID || site == QKV_SITE_MLP_OUT;
}

/* The MLP's neurons, (B, To, N): no heads, positions and neurons. */
static bool neuron_site(qkv_site site) {
    return site == QKV_SITE_MLP_PRE || site == QKV_SITE_MLP_POST;
}

bool explain_site_has_heads(qkv_site site) { return !stream_site(site) && !neuron_site(site); }

/* A site's positions: query rows (z, q, the pattern's rows, the stream, the MLP), key rows
 * (k, v), key columns (the pattern's), neuron columns (the MLP's). */
static bool over_applies(qkv_site site, explain_over over) {
    switch (over) {
    case EXPLAIN_OVER_HEAD: return !stream_site(site) && !neuron_site(site);
    case EXPLAIN_OVER_HEAD_POSITION:
        return site == QKV_SITE_Z || site == QKV_SITE_Q || site == QKV_SITE_PATTERN;
    case EXPLAIN_OVER_KEY_POSITION:
        return site == QKV_SITE_K || site == QKV_SITE_V || site == QKV_SITE_PATTERN;
    case EXPLAIN_OVER_NEURON:
    case EXPLAIN_OVER_NEURON_POSITION: return neuron_site(site);
    default: return stream_site(site) || neuron_site(site);
    }
}

explain_over explain_default_over(qkv_site site) {
    return stream_site(site)   ? EXPLAIN_OVER_LAYER_POSITION
           : neuron_site(site) ? EXPLAIN_OVER_NEURON
                               : EXPLAIN_OVER_HEAD;
}

qkv_status explain_check_site(const loaded_model *lm, qkv_site site, explain_over over) {
    const qkv_model_config *c = &lm->model.cfg;
    if (site >= QKV_SITE_RESID_MID && c->mlp == 0)
        return qkv_fail(QKV_ERR_VALUE, "--site %s: the model has no MLP (it was trained without "
                        "--mlp); its sites are z, q, k, v, pattern%s", explain_site_names[site],
                        c->residual ? ", resid-pre and resid-post" : "");
    if (!over_applies(site, over)) {
        char can[96] = "";
        for (int o = 0; explain_over_names[o]; o++)
            if (over_applies(site, (explain_over)o))
                snprintf(can + strlen(can), sizeof can - strlen(can), "%s%s", *can ? ", " : "",
                         explain_over_names[o]);
        return qkv_fail(QKV_ERR_VALUE, "--over %s does not apply to --site %s; it takes %s",
                        explain_over_names[over], explain_site_names[site], can);
    }
    if (stream_site(site) && !c->residual)
        return qkv_fail(QKV_ERR_VALUE, "--site %s: the model has no residual stream (it was "
                        "trained with --no-residual); its sites are z, q, k, v and pattern",
                        explain_site_names[site]);
    return QKV_OK;
}

qkv_status explain_check_linear(const loaded_model *lm, const char *analysis, bool covers_mlp) {
    const qkv_model_config *c = &lm->model.cfg;
    bool mlp = c->mlp > 0 && !covers_mlp, norm = c->norm != QKV_NORM_NONE;
    if (!mlp && !norm) return QKV_OK;
    char has[96];
    if (mlp && norm) snprintf(has, sizeof has, "an MLP (--mlp %d) and LayerNorm", c->mlp);
    else if (mlp) snprintf(has, sizeof has, "an MLP (--mlp %d)", c->mlp);
    else snprintf(has, sizeof has, "LayerNorm");
    return qkv_fail(QKV_ERR_VALUE, "the model has %s, which %s does not cover yet; ablate, "
                    "patch without --path, attribute, lens, inspect and eval --data do", has,
                    analysis);
}

qkv_status explain_spots(const loaded_model *lm, qkv_site site, explain_over over, int positions,
                         int keys, explain_spot **spots, int *n) {
    const qkv_model_config *c = &lm->model.cfg;
    /* each layer's spots: heads x (positions, key positions or 1) x (neurons or 1) */
    bool headless = stream_site(site) || neuron_site(site);
    bool by_neuron = over == EXPLAIN_OVER_NEURON || over == EXPLAIN_OVER_NEURON_POSITION;
    bool by_position = over == EXPLAIN_OVER_HEAD_POSITION || over == EXPLAIN_OVER_LAYER_POSITION ||
                       over == EXPLAIN_OVER_NEURON_POSITION;
    int heads = headless ? 1 : c->heads, neurons = by_neuron ? c->mlp : 1;
    int per = over == EXPLAIN_OVER_KEY_POSITION ? keys : by_position ? positions : 1;
    *n = c->layers * heads * neurons * per;
    *spots = malloc((size_t)*n * sizeof **spots);
    if (!*spots) return qkv_fail(QKV_ERR_NOMEM, "out of memory for %d places to patch", *n);
    int k = 0;
    for (int l = 0; l < c->layers; l++)
        for (int h = 0; h < heads; h++)
            for (int u = 0; u < neurons; u++)
                for (int p = 0; p < per; p++)
                    (*spots)[k++] = (explain_spot){
                        .site = site, .layer = l, .head = headless ? -1 : h,
                        .position = by_position ? p : -1,
                        .key_position = over == EXPLAIN_OVER_KEY_POSITION ? p : -1,
                        .neuron = by_neuron ? u : -1};
    return QKV_OK;
}

void explain_spot_text(const explain_spot *s, char *buf, size_t len) {
    static const char *const stream_text[] = {
        [QKV_SITE_RESID_PRE] = "the stream entering layer",
        [QKV_SITE_RESID_POST] = "the stream leaving layer",
        [QKV_SITE_RESID_MID] = "the stream between the attention and the MLP of layer",
        [QKV_SITE_MLP_OUT] = "the output of the MLP of layer",
        [QKV_SITE_MLP_PRE] = "the MLP neurons before the activation, layer",
        [QKV_SITE_MLP_POST] = "the MLP neurons after the activation, layer"};
    if (neuron_site(s->site) && s->neuron >= 0)
        snprintf(buf, len, "MLP neuron %d.%d %s the activation", s->layer + 1, s->neuron,
                 s->site == QKV_SITE_MLP_PRE ? "before" : "after");
    else if (stream_site(s->site) || neuron_site(s->site))
        snprintf(buf, len, "%s %d", stream_text[s->site], s->layer + 1);
    else
        snprintf(buf, len, "head %d.%d's %s", s->layer + 1, s->head + 1,
                 s->site == QKV_SITE_Z ? "output" : explain_site_names[s->site]);
    size_t at = strlen(buf);
    if (s->position >= 0) snprintf(buf + at, len - at, " at position %d", s->position);
    at = strlen(buf);
    if (s->key_position >= 0) snprintf(buf + at, len - at, " at key position %d", s->key_position);
}

/* The probe's edit of spot s: rows are key positions for k and v, query positions
 * elsewhere; columns are the pattern's key positions and the MLP's neurons. */
static qkv_head_edit spot_edit(const explain_spot *s, qkv_head_edit_kind kind,
                               const qkv_tensor *value) {
    bool keys = s->site == QKV_SITE_K || s->site == QKV_SITE_V;
    int column = s->site == QKV_SITE_PATTERN ? s->key_position
                 : neuron_site(s->site)      ? s->neuron
                                             : -1;
    return (qkv_head_edit){.kind = kind, .layer = s->layer, .head = s->head,
                           .position = keys ? s->key_position : s->position, .value = value,
                           .site = s->site, .key_position = column};
}

/* Σ (a - b) · d metric/d site over spot s's entries of sequence `seq`: a and b the site's
 * tensor on two runs, `graph` the recorded run's (its gradient). */
static double spot_dot(const explain_spot *s, const qkv_tensor *a, const qkv_tensor *b,
                       const qkv_tensor *graph, int64_t seq) {
    qkv_head_edit e = spot_edit(s, QKV_HEAD_REPLACE, a);
    bool headless = stream_site(s->site) || neuron_site(s->site);
    int64_t G = headless ? 1 : a->shape[1], R = a->shape[a->ndim - 2], W = a->shape[a->ndim - 1];
    int64_t g = headless ? 0 : e.head;
    int64_t i0 = e.position < 0 ? 0 : e.position, i1 = e.position < 0 ? R : i0 + 1;
    int64_t j0 = e.key_position < 0 ? 0 : e.key_position, j1 = e.key_position < 0 ? W : j0 + 1;
    double sum = 0;
    for (int64_t i = i0; i < i1; i++)
        for (int64_t j = j0; j < j1; j++) {
            int64_t at = ((seq * G + g) * R + i) * W + j;
            sum += (qkv_get(a, at) - qkv_get(b, at)) * qkv_grad_get(graph, at);
        }
    return sum;
}

/* Bytes of layers tensors of `site` for B sequences, with their headers. */
static double site_bytes(const loaded_model *lm, qkv_site site, int B) {
    const qkv_model_config *c = &lm->model.cfg;
    double To = lm->target_len, T = c->seq_len, C = c->d_model;
    double per = site == QKV_SITE_K || site == QKV_SITE_V ? T * C
                 : site == QKV_SITE_PATTERN                ? c->heads * To * T
                 : neuron_site(site)                       ? To * c->mlp
                                                          : To * C;
    return (double)c->layers * (B * per * qkv_dtype_size(c->dtype) + 1024);
}

/* ---- scoring a set of examples ---- */

/* Batch b's logits (B, To, V) against targets y (B, To): argmax hits and counted positions
 * (the first of equal largest, as training's accuracy). */
static void count_hits(const qkv_tensor *logits, const int32_t *y, int64_t *hits,
                       int64_t *counted) {
    int64_t rows = logits->shape[0] * logits->shape[1], V = logits->shape[2];
    for (int64_t r = 0; r < rows; r++) {
        if (y[r] < 0) continue;
        *hits += qkv_argmax(logits, r * V, V) == y[r];
        (*counted)++;
    }
}

/* How a scored run is edited, for a message: "with head 1.2's output removed". */
static const char *edits_text(const qkv_head_edit *edits, int n_edits, char *buf, size_t len) {
    if (n_edits == 0) {
        snprintf(buf, len, "%s", "");
    } else if (n_edits == 1) {
        const qkv_head_edit *e = &edits[0];
        bool keys = e->site == QKV_SITE_K || e->site == QKV_SITE_V;
        bool neurons = neuron_site(e->site);
        explain_spot s = {e->site, e->layer, e->head, keys ? -1 : e->position,
                          keys ? e->position : neurons ? -1 : e->key_position,
                          neurons ? e->key_position : -1};
        if (stream_site(e->site) || neurons) s.head = -1;
        char what[128];
        explain_spot_text(&s, what, sizeof what);
        snprintf(buf, len, "with %s removed", what);
    } else {
        snprintf(buf, len, "with the %d listed removed together", n_edits);
    }
    return buf;
}

qkv_status explain_check_scored_logits(const loaded_model *lm, const qkv_tensor *logits,
                                      const int32_t *y, int first, const qkv_head_edit *edits,
                                      int n_edits) {
    int64_t B = logits->shape[0], To = logits->shape[1], V = logits->shape[2];
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < To; i++) {
            if (y[b * To + i] < 0) continue;
            for (int64_t j = 0; j < V; j++) {
                if (isfinite(qkv_get(logits, (b * To + i) * V + j))) continue;
                char run[256], edited[160];
                snprintf(run, sizeof run, "example %lld%s%s", (long long)(first + b + 1),
                         n_edits ? " " : "", edits_text(edits, n_edits, edited, sizeof edited));
                return check_logit(lm, logits, (int)b, (int)i, (int)j, run);
            }
        }
    return QKV_OK;
}

qkv_status explain_score_set(loaded_model *lm, const example_set *set, const qkv_head_edit *edits,
                             int n_edits, explain_score *out) {
    int T = lm->model.cfg.seq_len, To = lm->target_len;
    double loss_sum = 0;
    int64_t hits = 0, counted = 0;
    for (int start = 0; start < set->n; start += ANALYSIS_BATCH) {
        int B = set->n - start < ANALYSIS_BATCH ? set->n - start : ANALYSIS_BATCH;
        const int32_t *y = set->y + (size_t)start * To;
        qkv_ctx_reset(lm->ctx);
        qkv_probe probe = {.edits = edits, .n_edits = n_edits};
        qkv_tensor *logits = qkv_model_forward_probe(
            &lm->model, lm->ctx, set->x + (size_t)start * T, set->len ? set->len + start : NULL,
            B, &probe);
        qkv_status s = explain_check_scored_logits(lm, logits, y, start, edits, n_edits);
        if (s != QKV_OK) return s;
        int64_t before = counted;
        count_hits(logits, y, &hits, &counted);
        if (counted == before) continue;
        qkv_tensor *targets = qkv_from_array(lm->ctx, QKV_I32, 2, (int64_t[]){B, To}, y);
        double loss = qkv_get(qkv_cross_entropy(lm->ctx, logits, targets, -1), 0);
        char edited[160];
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

/* means[l]: layer l's tensor of `site` averaged over the examples, (1, ...) in keep. */
static qkv_status site_means(loaded_model *lm, const example_set *set, qkv_site site, qkv_ctx *keep,
                             qkv_tensor **means) {
    const qkv_model_config *c = &lm->model.cfg;
    int T = c->seq_len;
    double *sum = NULL;
    int64_t per = 0;
    for (int start = 0; start < set->n; start += ANALYSIS_BATCH) {
        int B = set->n - start < ANALYSIS_BATCH ? set->n - start : ANALYSIS_BATCH;
        qkv_ctx_reset(lm->ctx);
        qkv_probe probe = {0};
        qkv_model_forward_probe(&lm->model, lm->ctx, set->x + (size_t)start * T,
                                set->len ? set->len + start : NULL, B, &probe);
        for (int l = 0; l < c->layers; l++) {
            const qkv_tensor *x = qkv_probe_site(&probe, site, l);
            if (!sum) {
                per = x->size / x->shape[0];
                sum = calloc((size_t)(c->layers * per), sizeof *sum);
                if (!sum) return qkv_fail(QKV_ERR_NOMEM, "ablate: out of memory for the means");
                for (int k = 0; k < c->layers; k++) {
                    int64_t shape[4];
                    memcpy(shape, x->shape, sizeof shape);
                    shape[0] = 1;
                    means[k] = qkv_new(keep, c->dtype, x->ndim, shape);
                }
            }
            for (int b = 0; b < B; b++)
                for (int64_t k = 0; k < per; k++) sum[l * per + k] += qkv_get(x, b * per + k);
        }
    }
    for (int l = 0; sum && l < c->layers; l++)
        for (int64_t k = 0; k < per; k++)
            qkv_set(means[l], k, set->n ? sum[l * per + k] / set->n : 0);
    free(sum);
    return QKV_OK;
}

/* The spots of the request: every one of its site and over, or only the listed heads', in
 * the list's order. */
static qkv_status ablate_spots(const loaded_model *lm, const ablate_request *rq, ablate_result *r) {
    explain_spot *all;
    int n;
    qkv_status s = explain_spots(lm, rq->site, rq->over, lm->target_len, lm->model.cfg.seq_len,
                                 &all, &n);
    if (s != QKV_OK) return s;
    if (!rq->n_heads) {
        r->spots = all, r->n = n;
    } else {
        r->spots = malloc((size_t)n * sizeof *r->spots);
        for (int i = 0; r->spots && i < rq->n_heads; i++)
            for (int k = 0; k < n; k++)
                if (all[k].layer == rq->heads[i].layer && all[k].head == rq->heads[i].head)
                    r->spots[r->n++] = all[k];
        free(all);
    }
    r->each = calloc((size_t)(r->n ? r->n : 1), sizeof *r->each);
    if (!r->spots || !r->each)
        return qkv_fail(QKV_ERR_NOMEM, "ablate: out of memory for %d scores", n);
    return QKV_OK;
}

qkv_status explain_ablate(loaded_model *lm, const example_set *set, const ablate_request *rq,
                          ablate_result *r) {
    const qkv_model_config *c = &lm->model.cfg;
    memset(r, 0, sizeof *r);
    qkv_status s = ablate_spots(lm, rq, r);
    if (s != QKV_OK) return s;
    s = loaded_model_reserve(lm, set->n, "ablate");
    qkv_ctx *keep = s == QKV_OK ? loaded_model_arena(site_bytes(lm, rq->site, 1), "ablate")
                                : NULL;
    if (!keep) return s != QKV_OK ? s : QKV_ERR_NOMEM;
    qkv_tensor *means[QKV_MAX_LAYERS] = {0};
    s = rq->mean ? site_means(lm, set, rq->site, keep, means) : QKV_OK;
    qkv_head_edit *all = calloc((size_t)(r->n ? r->n : 1), sizeof *all);
    if (s == QKV_OK && !all) s = qkv_fail(QKV_ERR_NOMEM, "ablate: out of memory");
    if (s != QKV_OK) {
        free(all);
        qkv_ctx_free(keep);
        return s;
    }
    for (int i = 0; i < r->n; i++)
        all[i] = spot_edit(&r->spots[i], rq->mean ? QKV_HEAD_MEAN : QKV_HEAD_ZERO,
                           means[r->spots[i].layer]);
    s = explain_score_set(lm, set, NULL, 0, &r->baseline);
    for (int i = 0; s == QKV_OK && i < r->n; i++)
        s = explain_score_set(lm, set, &all[i], 1, &r->each[i]);
    if (s == QKV_OK && rq->together) s = explain_score_set(lm, set, all, r->n, &r->together);
    if (s == QKV_ERR_NUMERIC) qkv_fail(s, "ablate: %s", qkv_last_error());
    free(all);
    qkv_ctx_free(keep);
    (void)c;
    return s;
}

void explain_ablate_free(ablate_result *r) {
    free(r->spots);
    free(r->each);
    r->spots = NULL;
    r->each = NULL;
}

/* ---- patching ---- */

/* "the clean run" (one pair) or "the clean run of pair 7" into buf. */
static const char *run_name(const char *run, int pair, int n_pairs, char *buf, size_t len) {
    if (n_pairs == 1) snprintf(buf, len, "%s", run);
    else snprintf(buf, len, "%s of pair %d", run, pair + 1);
    return buf;
}

/* Sequence b's metric logit[answer] - logit[wrong] at its position, of a run's logits
 * (B, To, V), into *m, after check_logit of both logits (`run` names the run). */
static qkv_status metric_of(const loaded_model *lm, const qkv_tensor *logits, int b,
                            const patch_metric *pm, const char *run, double *m) {
    int64_t To = logits->shape[1], V = logits->shape[2];
    int64_t row = ((int64_t)b * To + pm->position) * V;
    qkv_status s = check_logit(lm, logits, b, pm->position, pm->answer, run);
    if (s == QKV_OK) s = check_logit(lm, logits, b, pm->position, pm->wrong, run);
    *m = qkv_get(logits, row + pm->answer) - qkv_get(logits, row + pm->wrong);
    return s == QKV_OK ? check_finite(*m, "the metric (logit difference) in %s", run) : s;
}

/* Every pair's metric of one batch's run (pairs first .. first+B-1) into m[first ..]. */
static qkv_status batch_metric(const loaded_model *lm, const qkv_tensor *logits,
                               const patch_pairs *pairs, int first, const char *run, double *m) {
    char name[160];
    qkv_status s = QKV_OK;
    for (int b = 0; s == QKV_OK && b < logits->shape[0]; b++)
        s = metric_of(lm, logits, b, &pairs->metric[first + b],
                      run_name(run, first + b, pairs->n, name, sizeof name), &m[first + b]);
    return s;
}

/* A copy in keep of tensor x (its data; no graph). */
static qkv_tensor *kept(qkv_ctx *keep, const qkv_tensor *x) {
    qkv_tensor *out = qkv_new(keep, x->dtype, x->ndim, x->shape);
    memcpy(out->data, x->data, (size_t)x->size * qkv_dtype_size(x->dtype));
    return out;
}

/* Pearson's correlation of n pairs (x[i * stride], y[i * stride]), the finite ones; NAN
 * with fewer than two or a constant column. */
static double pearson(const double *x, const double *y, int n, int stride) {
    double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
    int k = 0;
    for (int i = 0; i < n; i++) {
        double a = x[i * stride], b = y[i * stride];
        if (!isfinite(a) || !isfinite(b)) continue;
        sx += a, sy += b, sxx += a * a, syy += b * b, sxy += a * b, k++;
    }
    if (k < 2) return NAN;
    double cov = sxy - sx * sy / k, vx = sxx - sx * sx / k, vy = syy - sy * sy / k;
    return vx > 0 && vy > 0 ? cov / sqrt(vx * vy) : NAN;
}

int explain_patch_items(const patch_result *r) {
    return r->paths ? r->n_paths : r->n_rows;
}

/* A weight matrix as doubles (row-major, its own shape), malloc'd; NULL when out of memory. */
static double *weights_of(const qkv_tensor *w) {
    double *out = malloc((size_t)w->size * sizeof *out);
    for (int64_t i = 0; out && i < w->size; i++) out[i] = qkv_get(w, i);
    return out;
}

/* The paths of a model: every sender head to every head of a later layer its output reaches
 * (through the residual stream any later layer, else the next) by q, and by k and v where
 * the keys read the stream (not an encoder-decoder's), and to the logits (every layer with
 * the residual stream, else the last). (n) malloc'd into *paths. */
static qkv_status list_paths(const loaded_model *lm, patch_path **paths, int *n) {
    const qkv_model_config *c = &lm->model.cfg;
    int L = c->layers, H = c->heads, vias = c->target_len ? 1 : 3;
    *paths = malloc((size_t)(L * H * ((L * H * vias) + 1)) * sizeof **paths);
    if (!*paths) return qkv_fail(QKV_ERR_NOMEM, "patch: out of memory for the paths");
    *n = 0;
    for (int ls = 0; ls < L; ls++)
        for (int hs = 0; hs < H; hs++) {
            for (int lr = ls + 1; lr < L && (c->residual || lr == ls + 1); lr++)
                for (int hr = 0; hr < H; hr++)
                    for (int v = 0; v < vias; v++)
                        (*paths)[(*n)++] = (patch_path){ls, hs, lr, hr, QKV_SITE_Q + v, NAN, NAN};
            if (c->residual || ls == L - 1)
                (*paths)[(*n)++] = (patch_path){ls, hs, -1, -1, QKV_SITE_Z, NAN, NAN};
        }
    return QKV_OK;
}

/* What a patching run of one batch keeps: the site's tensor of every layer on the clean and
 * the corrupted inputs, the corrupted run's graph (its gradients, for attribution). */
typedef struct {
    qkv_ctx *keep, *graph, *record;
    qkv_tensor *clean[QKV_MAX_LAYERS], *corrupt[QKV_MAX_LAYERS];
    qkv_probe cp;                  /* the corrupted run's probe, in graph */
    double *metric;                /* (pairs): a patched run's metric */
    double *w_o[QKV_MAX_LAYERS], *w_in[3][QKV_MAX_LAYERS], *head_w; /* paths: as doubles */
} patch_batch;

/* The corrupted run's patched metric for the batch (pairs first .. first+B-1) under `edits`,
 * into m[first ..]. */
static qkv_status patched_run(loaded_model *lm, const patch_pairs *pairs, int first, int B,
                              const qkv_head_edit *edits, int n_edits, const char *run,
                              double *m) {
    int T = lm->model.cfg.seq_len;
    qkv_ctx_reset(lm->ctx);
    qkv_probe pp = {.edits = edits, .n_edits = n_edits};
    qkv_tensor *logits = qkv_model_forward_probe(
        &lm->model, lm->ctx, pairs->corrupt + (size_t)first * T,
        pairs->corrupt_len ? pairs->corrupt_len + first : NULL, B, &pp);
    return batch_metric(lm, logits, pairs, first, run, m);
}

/* Spots: each spot's exact patched metric and attribution for the batch's pairs. */
static qkv_status patch_spots(loaded_model *lm, const patch_pairs *pairs, int first, int B,
                              patch_batch *pb, patch_result *r) {
    qkv_status s = QKV_OK;
    for (int k = 0; k < r->n_rows && s == QKV_OK; k++) {
        const explain_spot *sp = &r->rows[k].spot;
        char where[128], run[192];
        explain_spot_text(sp, where, sizeof where);
        snprintf(run, sizeof run, "the corrupted run with the clean %s patched in", where);
        if (r->exact) {
            qkv_head_edit e = spot_edit(sp, QKV_HEAD_REPLACE, pb->clean[sp->layer]);
            s = patched_run(lm, pairs, first, B, &e, 1, run, pb->metric);
            for (int b = 0; b < B; b++)
                r->pair_patched[(size_t)(first + b) * r->n_rows + k] = pb->metric[first + b];
        }
        for (int b = 0; r->attribution && s == QKV_OK && b < B; b++) {
            double a = spot_dot(sp, pb->clean[sp->layer], pb->corrupt[sp->layer],
                                qkv_probe_site(&pb->cp, sp->site, sp->layer), b);
            r->pair_attribution[(size_t)(first + b) * r->n_rows + k] = a;
            s = check_finite(a, "the attribution of %s (d metric / d site from the corrupted "
                             "run's backward pass)", where);
        }
    }
    return s;
}

/* Paths: for each sender, pass 2 (every head frozen at its corrupted output but the sender,
 * which carries its clean one) records every receiver's input and gives the logits path;
 * pass 3 replaces only one receiver's input. Attribution: (ΔS·W_O^S·W^R) · d metric / d (R's
 * input) from the corrupted run's backward pass. */
static qkv_status patch_paths(loaded_model *lm, const patch_pairs *pairs, int first, int B,
                              patch_batch *pb, patch_result *r) {
    const qkv_model_config *c = &lm->model.cfg;
    int L = c->layers, H = c->heads, C = c->d_model, Dk = C / H, To = lm->target_len;
    int V = c->vocab, items = r->n_paths;
    qkv_head_edit *edits = malloc((size_t)(L * H) * sizeof *edits);
    double *u = malloc((size_t)B * To * C * sizeof *u); /* ΔS·W_O^S: (B, To, C) */
    double *m2 = malloc((size_t)pairs->n * sizeof *m2);
    qkv_status s = edits && u && m2 ? QKV_OK : qkv_fail(QKV_ERR_NOMEM, "patch: out of memory");
    for (int k = 0; k < items && s == QKV_OK;) {
        int ls = r->path[k].sender_layer, hs = r->path[k].sender_head, end = k;
        while (end < items && r->path[end].sender_layer == ls && r->path[end].sender_head == hs)
            end++;
        /* pass 2 */
        int n = 0;
        for (int l = 0; l < L; l++)
            for (int h = 0; h < H; h++)
                edits[n++] = spot_edit(&(explain_spot){QKV_SITE_Z, l, h, -1, -1, -1},
                                       QKV_HEAD_REPLACE,
                                       l == ls && h == hs ? pb->clean[l] : pb->corrupt[l]);
        qkv_ctx_reset(pb->record);
        qkv_probe rec = {.edits = edits, .n_edits = n};
        qkv_tensor *logits = qkv_model_forward_probe(
            &lm->model, pb->record, pairs->corrupt + (size_t)first * c->seq_len,
            pairs->corrupt_len ? pairs->corrupt_len + first : NULL, B, &rec);
        char run[160];
        snprintf(run, sizeof run, "the corrupted run with every head frozen but %d.%d, which "
                 "carries its clean output", ls + 1, hs + 1);
        if ((s = batch_metric(lm, logits, pairs, first, run, m2)) != QKV_OK) break;
        for (int b = 0; b < B; b++) /* u = ΔS · (S's rows of W_O) at each position */
            for (int i = 0; i < To; i++)
                for (int j = 0; j < C; j++) {
                    double sum = 0;
                    for (int e = 0; e < Dk; e++) {
                        int64_t at = (((int64_t)b * H + hs) * To + i) * Dk + e;
                        sum += (qkv_get(pb->clean[ls], at) - qkv_get(pb->corrupt[ls], at)) *
                               pb->w_o[ls][(size_t)(hs * Dk + e) * C + j];
                    }
                    u[((size_t)b * To + i) * C + j] = sum;
                }
        for (; k < end && s == QKV_OK; k++) {
            patch_path *p = &r->path[k];
            size_t at0 = (size_t)first * items + k;
            if (p->receiver_layer < 0) { /* the logits: pass 2 is the path */
                for (int b = 0; b < B; b++) {
                    const patch_metric *pm = &pairs->metric[first + b];
                    double a = 0;
                    for (int j = 0; j < C; j++)
                        a += u[((size_t)b * To + pm->position) * C + j] *
                             (pb->head_w[(size_t)j * V + pm->answer] -
                              pb->head_w[(size_t)j * V + pm->wrong]);
                    r->pair_patched[at0 + (size_t)b * items] = m2[first + b];
                    if (r->attribution) r->pair_attribution[at0 + (size_t)b * items] = a;
                }
                continue;
            }
            int lr = p->receiver_layer, hr = p->receiver_head;
            const char *via = explain_site_names[p->via];
            if (r->exact) { /* pass 3: only the receiver's input as pass 2 recorded it */
                qkv_head_edit e = spot_edit(&(explain_spot){p->via, lr, hr, -1, -1, -1},
                                            QKV_HEAD_REPLACE, qkv_probe_site(&rec, p->via, lr));
                snprintf(run, sizeof run, "the corrupted run with the %s of head %d.%d as head "
                         "%d.%d's clean output alone makes it", via, lr + 1, hr + 1, ls + 1,
                         hs + 1);
                if ((s = patched_run(lm, pairs, first, B, &e, 1, run, pb->metric)) != QKV_OK) break;
                for (int b = 0; b < B; b++)
                    r->pair_patched[at0 + (size_t)b * items] = pb->metric[first + b];
            }
            const double *w = pb->w_in[p->via - QKV_SITE_Q][lr];
            const qkv_tensor *graph = qkv_probe_site(&pb->cp, p->via, lr); /* (B, H, To, Dk) */
            for (int b = 0; r->attribution && b < B && s == QKV_OK; b++) {
                double a = 0;
                for (int i = 0; i < To; i++)
                    for (int d = 0; d < Dk; d++) {
                        double delta = 0; /* (ΔS·W_O^S·W^R)[i, d] */
                        for (int j = 0; j < C; j++)
                            delta += u[((size_t)b * To + i) * C + j] *
                                     w[(size_t)j * C + hr * Dk + d];
                        a += delta * qkv_grad_get(graph, (((int64_t)b * H + hr) * To + i) * Dk + d);
                    }
                r->pair_attribution[at0 + (size_t)b * items] = a;
                s = check_finite(a, "the attribution of the path %d.%d -> %d.%d by %s", ls + 1,
                                 hs + 1, lr + 1, hr + 1, via);
            }
        }
    }
    free(edits), free(u), free(m2);
    return s;
}

static void batch_free(patch_batch *pb) {
    qkv_ctx_free(pb->keep), qkv_ctx_free(pb->graph), qkv_ctx_free(pb->record);
    for (int l = 0; l < QKV_MAX_LAYERS; l++) {
        free(pb->w_o[l]);
        for (int v = 0; v < 3; v++) free(pb->w_in[v][l]);
    }
    free(pb->head_w), free(pb->metric);
}

/* The arenas and arrays of patching batches of up to B pairs; QKV_ERR_NOMEM. */
static qkv_status batch_init(loaded_model *lm, const patch_result *r, int n, int B,
                             patch_batch *pb) {
    const qkv_model_config *c = &lm->model.cfg;
    qkv_site site = r->paths ? QKV_SITE_Z : r->site;
    memset(pb, 0, sizeof *pb);
    qkv_status s = loaded_model_reserve(lm, n, NULL);
    if (s != QKV_OK) return s;
    pb->keep = loaded_model_arena(2 * site_bytes(lm, site, B), NULL);
    pb->graph = pb->keep ? loaded_model_arena(qkv_model_step_bytes(c, B), NULL) : NULL;
    if (r->paths && pb->graph) pb->record = loaded_model_arena(qkv_model_step_bytes(c, B), NULL);
    if (!pb->graph || (r->paths && !pb->record)) return QKV_ERR_NOMEM;
    bool ok = (pb->metric = malloc((size_t)n * sizeof *pb->metric)) != NULL;
    for (int l = 0; r->paths && l < c->layers; l++) {
        ok = ok && (pb->w_o[l] = weights_of(lm->model.w_o[l]));
        ok = ok && (pb->w_in[0][l] = weights_of(lm->model.w_q[l]));
        ok = ok && (pb->w_in[1][l] = weights_of(lm->model.w_k[l]));
        ok = ok && (pb->w_in[2][l] = weights_of(lm->model.w_v[l]));
    }
    if (r->paths) ok = ok && (pb->head_w = weights_of(lm->model.head_w));
    return ok ? QKV_OK : qkv_fail(QKV_ERR_NOMEM, "patch: out of memory for the weights");
}

/* Every pair's metric on the clean and the corrupted inputs (the means are checked before
 * any patched run). */
static qkv_status base_metrics(loaded_model *lm, const patch_pairs *pairs, patch_result *r) {
    int T = lm->model.cfg.seq_len;
    qkv_status s = QKV_OK;
    for (int first = 0; first < pairs->n && s == QKV_OK; first += ANALYSIS_BATCH) {
        int B = pairs->n - first < ANALYSIS_BATCH ? pairs->n - first : ANALYSIS_BATCH;
        for (int side = 0; side < 2 && s == QKV_OK; side++) {
            const int32_t *x = side ? pairs->corrupt : pairs->clean;
            const int32_t *len = side ? pairs->corrupt_len : pairs->clean_len;
            qkv_ctx_reset(lm->ctx);
            qkv_probe probe = {0};
            qkv_tensor *logits = qkv_model_forward_probe(&lm->model, lm->ctx,
                                                         x + (size_t)first * T,
                                                         len ? len + first : NULL, B, &probe);
            s = batch_metric(lm, logits, pairs, first, side ? "the corrupted run" : "the clean run",
                             side ? r->pair_corrupt : r->pair_clean);
        }
    }
    return s;
}

static double mean_of(const double *x, int n, int stride) {
    double sum = 0;
    for (int i = 0; i < n; i++) sum += x[(size_t)i * stride];
    return sum / n;
}

qkv_status explain_fill_predictions(loaded_model *lm, const int32_t *clean, const int32_t *corrupt,
                                    const int32_t *clean_len, const int32_t *corrupt_len, int n,
                                    patch_metric *metric, const char *path,
                                    const int64_t *line) {
    int T = lm->model.cfg.seq_len, V = lm->model.cfg.vocab;
    qkv_status s = loaded_model_reserve(lm, n, NULL);
    for (int side = 0; side < 2 && s == QKV_OK; side++)
        for (int first = 0; first < n; first += ANALYSIS_BATCH) {
            int B = n - first < ANALYSIS_BATCH ? n - first : ANALYSIS_BATCH;
            bool need = false;
            for (int b = 0; b < B; b++)
                need |= (side ? metric[first + b].wrong : metric[first + b].answer) < 0;
            if (!need) continue;
            const int32_t *x = side ? corrupt : clean, *len = side ? corrupt_len : clean_len;
            qkv_ctx_reset(lm->ctx);
            qkv_probe probe = {0};
            qkv_tensor *logits = qkv_model_forward_probe(&lm->model, lm->ctx,
                                                         x + (size_t)first * T,
                                                         len ? len + first : NULL, B, &probe);
            int64_t To = logits->shape[1];
            for (int b = 0; b < B; b++) {
                patch_metric *m = &metric[first + b];
                int *out = side ? &m->wrong : &m->answer;
                if (*out < 0)
                    *out = (int)qkv_argmax(logits, ((int64_t)b * To + m->position) * V, V);
            }
        }
    for (int k = 0; s == QKV_OK && path && k < n; k++)
        if (metric[k].answer == metric[k].wrong) {
            char label[32];
            loaded_model_token_label(lm, metric[k].answer, label, sizeof label);
            s = qkv_fail(QKV_ERR_VALUE, "%s line %lld: the answer and the wrong token are both "
                         "'%s': the metric would be 0 (give them as the line's third and fourth "
                         "fields)", path, (long long)line[k], label);
        }
    return s;
}

qkv_status explain_patch(loaded_model *lm, const patch_pairs *pairs, patch_result *r) {
    const qkv_model_config *c = &lm->model.cfg;
    int n = pairs->n, T = c->seq_len, To = lm->target_len, V = c->vocab;
    r->rows = NULL, r->path = NULL, r->n_rows = r->n_paths = 0, r->agreement = NAN;
    r->pair_clean = r->pair_corrupt = r->pair_patched = r->pair_attribution = NULL;
    r->n_pairs = n;
    explain_spot *spots = NULL;
    qkv_status s = r->paths ? list_paths(lm, &r->path, &r->n_paths)
                            : explain_spots(lm, r->site, r->over, pairs->positions, pairs->keys,
                                            &spots, &r->n_rows);
    if (s != QKV_OK) return s;
    if (!r->paths) {
        r->rows = malloc((size_t)(r->n_rows ? r->n_rows : 1) * sizeof *r->rows);
        for (int k = 0; r->rows && k < r->n_rows; k++)
            r->rows[k] = (patch_row){spots[k], NAN, NAN};
        free(spots);
    }
    int items = explain_patch_items(r);
    size_t cells = (size_t)n * (items ? items : 1);
    r->pair_clean = malloc((size_t)n * sizeof(double));
    r->pair_corrupt = malloc((size_t)n * sizeof(double));
    r->pair_patched = malloc(cells * sizeof(double));
    r->pair_attribution = malloc(cells * sizeof(double));
    if ((!r->paths && !r->rows) || !r->pair_clean || !r->pair_corrupt || !r->pair_patched ||
        !r->pair_attribution)
        return qkv_fail(QKV_ERR_NOMEM, "patch: out of memory for %d pairs' results", n);
    for (size_t i = 0; i < cells; i++) r->pair_patched[i] = r->pair_attribution[i] = NAN;
    int Bmax = n < ANALYSIS_BATCH ? n : ANALYSIS_BATCH;
    patch_batch pb;
    if ((s = batch_init(lm, r, n, Bmax, &pb)) != QKV_OK ||
        (s = base_metrics(lm, pairs, r)) != QKV_OK) {
        batch_free(&pb);
        return s;
    }
    r->clean = mean_of(r->pair_clean, n, 1), r->corrupt = mean_of(r->pair_corrupt, n, 1);
    double diff = r->clean - r->corrupt;
    if (!(fabs(diff) > 0)) {
        batch_free(&pb);
        return qkv_fail(QKV_ERR_VALUE, "the clean and the corrupted input%s give the same "
                        "logit difference (%g%s): there is nothing to recover", n > 1 ? "s" : "",
                        r->clean, n > 1 ? " on average" : "");
    }
    qkv_site site = r->paths ? QKV_SITE_Z : r->site;
    for (int first = 0; first < n && s == QKV_OK; first += ANALYSIS_BATCH) {
        int B = n - first < ANALYSIS_BATCH ? n - first : ANALYSIS_BATCH;
        qkv_ctx_reset(pb.keep), qkv_ctx_reset(pb.graph), qkv_ctx_reset(lm->ctx);
        qkv_probe clean = {0};
        qkv_model_forward_probe(&lm->model, lm->ctx, pairs->clean + (size_t)first * T,
                                pairs->clean_len ? pairs->clean_len + first : NULL, B, &clean);
        for (int l = 0; l < c->layers; l++)
            pb.clean[l] = kept(pb.keep, qkv_probe_site(&clean, site, l));
        /* the corrupted run, recorded: d metric / d site from one backward pass */
        pb.cp = (qkv_probe){0};
        qkv_tensor *logits = qkv_model_forward_probe(
            &lm->model, pb.graph, pairs->corrupt + (size_t)first * T,
            pairs->corrupt_len ? pairs->corrupt_len + first : NULL, B, &pb.cp);
        for (int l = 0; l < c->layers; l++)
            pb.corrupt[l] = kept(pb.keep, qkv_probe_site(&pb.cp, site, l));
        if (r->attribution) {
            qkv_tensor *pick = qkv_zeros(pb.graph, c->dtype, 3, (int64_t[]){B, To, V});
            for (int b = 0; b < B; b++) {
                const patch_metric *pm = &pairs->metric[first + b];
                int64_t row = ((int64_t)b * To + pm->position) * V;
                qkv_set(pick, row + pm->answer, 1.0);
                qkv_set(pick, row + pm->wrong, -1.0);
            }
            qkv_backward(qkv_sum(pb.graph, qkv_mul(pb.graph, logits, pick)));
        }
        s = r->paths ? patch_paths(lm, pairs, first, B, &pb, r)
                     : patch_spots(lm, pairs, first, B, &pb, r);
    }
    batch_free(&pb);
    if (s != QKV_OK) return s;
    for (int k = 0; k < items; k++) {
        double exact =
            r->exact ? (mean_of(r->pair_patched + k, n, items) - r->corrupt) / diff : NAN;
        double attr = r->attribution ? mean_of(r->pair_attribution + k, n, items) / diff : NAN;
        if (r->paths) r->path[k].exact = exact, r->path[k].attribution = attr;
        else r->rows[k].exact = exact, r->rows[k].attribution = attr;
    }
    if (r->exact && r->attribution) {
        double *x = malloc((size_t)(items ? items : 1) * 2 * sizeof *x);
        if (!x) return qkv_fail(QKV_ERR_NOMEM, "patch: out of memory");
        for (int k = 0; k < items; k++) {
            x[k] = r->paths ? r->path[k].exact : r->rows[k].exact;
            x[items + k] = r->paths ? r->path[k].attribution : r->rows[k].attribution;
        }
        r->agreement = pearson(x, x + items, items, 1);
        free(x);
    }
    return QKV_OK;
}

void explain_patch_free(patch_result *r) {
    free(r->rows), free(r->path);
    free(r->pair_clean), free(r->pair_corrupt), free(r->pair_patched), free(r->pair_attribution);
    r->rows = NULL, r->path = NULL;
    r->pair_clean = r->pair_corrupt = r->pair_patched = r->pair_attribution = NULL;
}

/* ---- direct logit attribution ---- */

qkv_status explain_attribute(loaded_model *lm, const explain_input *in, int position, int token,
                             bool neurons, dla_result *r) {
    memset(r, 0, sizeof *r);
    qkv_status s = loaded_model_reserve(lm, 1, NULL);
    if (s != QKV_OK) return s;
    qkv_ctx_reset(lm->ctx);
    qkv_probe probe = {0};
    qkv_tensor *logits = qkv_model_forward_probe(&lm->model, lm->ctx, in->tokens,
                                                 lm->data ? &in->len : NULL, 1, &probe);
    return explain_attribute_probe(lm, logits, &probe, position, token, neurons, r);
}

qkv_status explain_attribute_probe(const loaded_model *lm, const qkv_tensor *logits,
                                   const qkv_probe *probe, int position, int token, bool neurons,
                                   dla_result *r) {
    const qkv_model *m = &lm->model;
    int C = m->cfg.d_model, V = m->cfg.vocab;
    memset(r, 0, sizeof *r);
    int n = model_stream_part_count(m, neurons);
    stream_part *ids = malloc((size_t)n * sizeof *ids);
    double *vectors = malloc((size_t)n * C * sizeof *vectors);
    r->parts = calloc((size_t)n + 1, sizeof *r->parts); /* and the bias */
    if (!ids || !vectors || !r->parts) {
        free(ids), free(vectors);
        return qkv_fail(QKV_ERR_NOMEM, "attribute: out of memory for %d parts", n + 1);
    }
    int64_t row = (int64_t)position * V;
    if (token < 0) token = (int)qkv_argmax(logits, row, V); /* the predicted token */
    r->position = position, r->token = token, r->logit = qkv_get(logits, row + token);
    qkv_status s = check_logit(lm, logits, 0, position, token, "the run of the input");
    if (s == QKV_OK) {
        char label[32];
        loaded_model_token_label(lm, token, label, sizeof label);
        n = model_stream_parts(m, probe, 0, position, neurons, ids, vectors);
        r->final_scale = model_final_scale(m, probe->stream[m->cfg.layers], position);
        for (int i = 0; i < n; i++) {
            dla_part *p = &r->parts[r->n_parts++];
            *p = (dla_part){"", ids[i].layer, ids[i].head, ids[i].neuron,
                            model_direct_logit(m, vectors + (size_t)i * C, r->final_scale, token)};
            model_stream_part_name(&ids[i], p->name, sizeof p->name);
        }
        r->parts[r->n_parts++] = (dla_part){"bias", -1, -1, -1, model_logit_bias(m, token)};
        for (int i = 0; i < r->n_parts && s == QKV_OK; i++) {
            r->sum += r->parts[i].value;
            s = check_finite(r->parts[i].value, "the part '%s' of the logit of '%s' at position %d",
                             r->parts[i].name, label, position);
        }
    }
    free(ids), free(vectors);
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
cJSON *explain_token_json(const loaded_model *lm, int32_t token) {
    char label[32];
    return cJSON_CreateString(loaded_model_token_text(lm, token, label, sizeof label));
}

static cJSON *token_labels(const loaded_model *lm, const explain_input *in) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < in->n; i++) cJSON_AddItemToArray(a, explain_token_json(lm, in->tokens[i]));
    return a;
}

/* "3:tok" (a decoder's position: "3"), with the token whole. */
static cJSON *position_labels(const loaded_model *lm, const explain_input *in) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < query_positions(lm, in); i++) {
        char number[16], label[32];
        snprintf(number, sizeof number, "%d", i);
        if (lm->model.cfg.target_len) {
            cJSON_AddItemToArray(a, cJSON_CreateString(number));
            continue;
        }
        const char *text = loaded_model_token_text(lm, in->tokens[i], label, sizeof label);
        size_t n = strlen(number) + 1 + strlen(text) + 1;
        char *both = malloc(n);
        if (both) snprintf(both, n, "%s:%s", number, text);
        cJSON_AddItemToArray(a, both ? cJSON_CreateString(both) : NULL);
        free(both);
    }
    return a;
}

cJSON *explain_json_header(const loaded_model *lm, const char *command, const explain_input *in) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "command", command);
    cJSON_AddStringToObject(o, "task", lm->data ? "data" : qkv_task_name(lm->cfg.task.kind));
    cJSON_AddStringToObject(o, "dtype", lm->model.cfg.dtype == QKV_F64 ? "f64" : "f32");
    cJSON_AddNumberToObject(o, "layers", lm->model.cfg.layers);
    cJSON_AddNumberToObject(o, "heads_per_layer", lm->model.cfg.heads);
    if (strcmp(command, "ablate")) /* ablate's "heads" is its list of heads */
        cJSON_AddNumberToObject(o, "heads", lm->model.cfg.heads);
    if (in) {
        cJSON_AddItemToObject(o, "tokens", token_labels(lm, in));
        cJSON_AddItemToObject(o, "positions", position_labels(lm, in));
    }
    return o;
}

/* A spot's fields in a JSON row: site, layer, head (null for the stream's), position and
 * key_position (null where every one, or none, is edited). */
static void add_spot(cJSON *x, const explain_spot *s) {
    cJSON_AddStringToObject(x, "site", explain_site_names[s->site]);
    cJSON_AddNumberToObject(x, "layer", s->layer + 1);
    if (s->head < 0) cJSON_AddNullToObject(x, "head");
    else cJSON_AddNumberToObject(x, "head", s->head + 1);
    if (s->position < 0) cJSON_AddNullToObject(x, "position");
    else cJSON_AddNumberToObject(x, "position", s->position);
    if (s->key_position < 0) cJSON_AddNullToObject(x, "key_position");
    else cJSON_AddNumberToObject(x, "key_position", s->key_position);
    if (!neuron_site(s->site)) return; /* rows of the MLP's neurons: which one, or null */
    if (s->neuron < 0) cJSON_AddNullToObject(x, "neuron");
    else cJSON_AddNumberToObject(x, "neuron", s->neuron);
}

cJSON *explain_ablate_json(const loaded_model *lm, const ablate_request *rq, const ablate_result *r,
                           const char *data_path) {
    cJSON *o = explain_json_header(lm, "ablate", NULL);
    cJSON_AddStringToObject(o, "mode", rq->mean ? "mean" : "zero");
    cJSON_AddStringToObject(o, "site", explain_site_names[rq->site]);
    cJSON_AddStringToObject(o, "over", explain_over_names[rq->over]);
    if (data_path) cJSON_AddStringToObject(o, "data", data_path);
    else cJSON_AddNullToObject(o, "data");
    cJSON_AddNumberToObject(o, "examples", (double)r->baseline.counted);
    cJSON *b = cJSON_AddObjectToObject(o, "baseline");
    add_score(b, &r->baseline);
    cJSON *heads = cJSON_AddArrayToObject(o, "heads");
    for (int i = 0; i < r->n; i++) {
        cJSON *h = cJSON_CreateObject();
        add_spot(h, &r->spots[i]);
        add_score(h, &r->each[i]);
        cJSON_AddItemToArray(heads, h);
    }
    if (rq->together) {
        cJSON *tg = cJSON_AddObjectToObject(o, "together");
        cJSON *names = cJSON_AddArrayToObject(tg, "heads");
        char name[32];
        for (int i = 0; i < r->n; i++) {
            const explain_spot *s = &r->spots[i];
            if (s->head < 0) snprintf(name, sizeof name, "%d", s->layer + 1);
            else head_name(s->layer, s->head, name, sizeof name);
            cJSON_AddItemToArray(names, cJSON_CreateString(name));
        }
        add_score(tg, &r->together);
    }
    return o;
}

/* A path's fields: sender "L.H", receiver "L.H" or "logits", via "q", "k", "v" or null. */
static void add_path(cJSON *x, const patch_path *p) {
    char name[32];
    head_name(p->sender_layer, p->sender_head, name, sizeof name);
    cJSON_AddStringToObject(x, "sender", name);
    if (p->receiver_layer < 0) {
        cJSON_AddStringToObject(x, "receiver", "logits");
        cJSON_AddNullToObject(x, "via");
    } else {
        head_name(p->receiver_layer, p->receiver_head, name, sizeof name);
        cJSON_AddStringToObject(x, "receiver", name);
        cJSON_AddStringToObject(x, "via", explain_site_names[p->via]);
    }
}

cJSON *explain_patch_json(const loaded_model *lm, const explain_input *clean,
                          const explain_input *corrupt, const patch_metric *metric,
                          const char *pairs_source, const patch_result *r) {
    cJSON *o = explain_json_header(lm, "patch", clean);
    if (corrupt) cJSON_AddItemToObject(o, "corrupt_tokens", token_labels(lm, corrupt));
    cJSON_AddNumberToObject(o, "pairs", r->n_pairs);
    if (!clean) {
        cJSON_AddStringToObject(o, "pairs_from", pairs_source);
        cJSON_AddNumberToObject(o, "pairs_left_out", r->left_out);
    }
    cJSON_AddNumberToObject(o, "position", metric->position);
    cJSON_AddItemToObject(o, "answer", explain_token_json(lm, metric->answer));
    cJSON_AddItemToObject(o, "wrong", explain_token_json(lm, metric->wrong));
    if (r->paths) {
        cJSON_AddNullToObject(o, "site");
        cJSON_AddNullToObject(o, "over");
    } else {
        cJSON_AddStringToObject(o, "site", explain_site_names[r->site]);
        cJSON_AddStringToObject(o, "over", explain_over_names[r->over]);
    }
    cJSON_AddBoolToObject(o, "path", r->paths);
    cJSON_AddStringToObject(o, "method", r->exact && r->attribution ? "both"
                                         : r->exact                  ? "exact"
                                                                     : "attribution");
    add_number(o, "clean", r->clean);
    add_number(o, "corrupt", r->corrupt);
    cJSON *items = cJSON_AddArrayToObject(o, r->paths ? "paths" : "results");
    for (int i = 0; i < explain_patch_items(r); i++) {
        cJSON *x = cJSON_CreateObject();
        if (r->paths) add_path(x, &r->path[i]);
        else add_spot(x, &r->rows[i].spot);
        add_number(x, "exact", r->paths ? r->path[i].exact : r->rows[i].exact);
        add_number(x, "attribution", r->paths ? r->path[i].attribution : r->rows[i].attribution);
        cJSON_AddItemToArray(items, x);
    }
    add_number(o, "agreement", r->agreement);
    return o;
}

cJSON *explain_patch_pair_json(const patch_result *r, int i) {
    int items = explain_patch_items(r);
    double clean = r->pair_clean[i], corrupt = r->pair_corrupt[i], diff = clean - corrupt;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "pair", i + 1);
    add_number(o, "clean", clean);
    add_number(o, "corrupt", corrupt);
    cJSON *rows = cJSON_AddArrayToObject(o, r->paths ? "paths" : "results");
    for (int k = 0; k < items; k++) {
        double patched = r->pair_patched[(size_t)i * items + k];
        double change = r->pair_attribution[(size_t)i * items + k];
        cJSON *x = cJSON_CreateObject();
        if (r->paths) add_path(x, &r->path[k]);
        else add_spot(x, &r->rows[k].spot);
        add_number(x, "patched", patched);
        /* this pair's own shares; null where its clean and corrupt metrics are equal */
        add_number(x, "exact", fabs(diff) > 0 ? (patched - corrupt) / diff : NAN);
        add_number(x, "attribution", fabs(diff) > 0 ? change / diff : NAN);
        cJSON_AddItemToArray(rows, x);
    }
    return o;
}

cJSON *explain_attribute_json(const loaded_model *lm, const explain_input *in,
                              const dla_result *r) {
    cJSON *o = explain_json_header(lm, "attribute", in);
    cJSON_AddNumberToObject(o, "position", r->position);
    cJSON_AddItemToObject(o, "token", explain_token_json(lm, r->token));
    add_number(o, "logit", r->logit);
    cJSON *parts = cJSON_AddArrayToObject(o, "parts");
    for (int i = 0; i < r->n_parts; i++) {
        const dla_part *p = &r->parts[i];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "name", p->name);
        if (p->layer < 0) cJSON_AddNullToObject(x, "layer");
        else cJSON_AddNumberToObject(x, "layer", p->layer + 1);
        if (p->head < 0) cJSON_AddNullToObject(x, "head");
        else cJSON_AddNumberToObject(x, "head", p->head + 1);
        if (p->neuron >= 0) cJSON_AddNumberToObject(x, "neuron", p->neuron);
        else if (lm->model.cfg.mlp > 0) cJSON_AddNullToObject(x, "neuron");
        add_number(x, "value", p->value);
        cJSON_AddItemToArray(parts, x);
    }
    add_number(o, "sum", r->sum);
    add_number(o, "final_scale", r->final_scale);
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
