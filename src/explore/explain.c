/* explain.c - what the analyses share (explain.h): reading inputs and positions, the sites and
 * the spots they edit, scoring a set of examples under edits, and the JSON objects' common
 * fields. Each analysis has its own file: ablate.c, patch.c, attribute.c (and lens.c). */
#include "explore/explain.h"
#include "explore/explain_internal.h"
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
            /* "1,2,3": one word to a reader that splits at spaces */
            bool listed = memchr(p, ',', len) || memchr(p, ';', len);
            return qkv_fail(QKV_ERR_VALUE, "%s: '%.*s' at position %d is not %s%s", option,
                            (int)(len < 40 ? len : 40), p, n, expect,
                            listed ? " (tokens are separated by spaces)" : "");
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

void explain_set_input(const loaded_model *lm, const example_set *set, int e, explain_input *in) {
    int T = lm->model.cfg.seq_len, To = lm->target_len;
    memset(in, 0, sizeof *in);
    memcpy(in->tokens, set->x + (size_t)e * T, (size_t)T * sizeof *in->tokens);
    memcpy(in->targets, set->y + (size_t)e * To, (size_t)To * sizeof *in->targets);
    in->n = in->len = set->len ? set->len[e] : T;
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
    if (i >= 0 && i < query_positions(lm, in)) return QKV_OK;
    return qkv_fail(QKV_ERR_VALUE, "--position %d is past the last position (%d)", i,
                    query_positions(lm, in) - 1);
}

/* ---- numbers a metric is made of: finite, or refused saying which and where ---- */

/* QKV_OK when v is finite; else QKV_ERR_NUMERIC with the line "<what> is not finite (NaN):
 * ...", `what` (printf-style) naming the number and the run it comes from. Every analysis's
 * metric (patch's logit difference and attributions, attribute's logit and parts, ablate's
 * losses) is checked here before it is used or reported. */
qkv_status explain_check_finite(double v, const char *what, ...) {
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
qkv_status explain_check_logit(const loaded_model *lm, const qkv_tensor *logits, int b, int i,
                               int token, const char *run) {
    int64_t To = logits->shape[1], V = logits->shape[2];
    char label[32];
    loaded_model_class_label(lm, token, label, sizeof label);
    return explain_check_finite(qkv_get(logits, ((int64_t)b * To + i) * V + token),
                        "the logit of '%s' at position %d in %s", label, i, run);
}

/* ---- metrics ---- */

const char *const explain_metric_names[] = {"logit-diff", "loss", "prob", "kl", NULL};

void explain_log_softmax(const double *logits, int V, double *logp) {
    double most = logits[0], sum = 0;
    for (int j = 1; j < V; j++) most = logits[j] > most ? logits[j] : most;
    for (int j = 0; j < V; j++) sum += exp(logits[j] - most);
    double lse = most + log(sum);
    for (int j = 0; j < V; j++) logp[j] = logits[j] - lse;
}

/* log Σ exp(logits), in double (the largest taken out first). */
static double log_sum_exp(const double *logits, int V) {
    double most = logits[0], sum = 0;
    for (int j = 1; j < V; j++) most = logits[j] > most ? logits[j] : most;
    for (int j = 0; j < V; j++) sum += exp(logits[j] - most);
    return most + log(sum);
}

double explain_metric_of(explain_metric metric, const double *logits, int V, int answer,
                         int wrong, const double *ref_logp) {
    switch (metric) {
    case EXPLAIN_METRIC_LOSS: return log_sum_exp(logits, V) - logits[answer];
    case EXPLAIN_METRIC_PROB: return exp(logits[answer] - log_sum_exp(logits, V));
    case EXPLAIN_METRIC_KL: {
        double lse = log_sum_exp(logits, V), kl = 0;
        for (int j = 0; j < V; j++) /* p log p is 0 where p is 0 */
            if (ref_logp[j] > -INFINITY) kl += exp(ref_logp[j]) * (ref_logp[j] - (logits[j] - lse));
        return kl;
    }
    default: return logits[answer] - logits[wrong];
    }
}

void explain_metric_grad(explain_metric metric, const double *logits, int V, int answer,
                         int wrong, const double *ref_logp, double *grad) {
    double lse = metric == EXPLAIN_METRIC_LOGIT_DIFF ? 0 : log_sum_exp(logits, V);
    for (int j = 0; j < V; j++) {
        double p = exp(logits[j] - lse); /* softmax(logits)[j] */
        switch (metric) {
        case EXPLAIN_METRIC_LOSS: grad[j] = p - (j == answer); break; /* softmax - onehot */
        case EXPLAIN_METRIC_PROB: /* p_a (onehot - softmax) */
            grad[j] = exp(logits[answer] - lse) * ((j == answer) - p);
            break;
        case EXPLAIN_METRIC_KL: grad[j] = p - exp(ref_logp[j]); break; /* softmax - ref */
        default: grad[j] = (j == answer) - (j == wrong);
        }
    }
}

/* ---- hook points ---- */

const char *const explain_site_names[] = {"z", "q", "k", "v", "pattern", "resid-pre",
                                          "resid-post", "resid-mid", "mlp-pre", "mlp-post",
                                          "mlp-out", "ln-scale", NULL};
_Static_assert(sizeof explain_site_names / sizeof explain_site_names[0] == QKV_SITES + 1,
               "a name for every site");
const char *const explain_over_names[] = {"head", "head-position", "key-position",
                                          "layer-position", "neuron", "neuron-position",
                                          "ln", "ln-position", NULL};
const char *const explain_ln_names[] = {"attn", "mlp", "final", NULL};
_Static_assert(sizeof explain_ln_names / sizeof explain_ln_names[0] == QKV_LNS + 1,
               "a name for every LayerNorm of a layer");

/* The sites of a layer's stream, (B, To, C): no heads, positions only. */
bool explain_stream_site(qkv_site site) {
    return site == QKV_SITE_RESID_PRE || site == QKV_SITE_RESID_POST ||
           site == QKV_SITE_RESID_MID || site == QKV_SITE_MLP_OUT;
}

/* The MLP's neurons, (B, To, N): no heads, positions and neurons. */
bool explain_neuron_site(qkv_site site) {
    return site == QKV_SITE_MLP_PRE || site == QKV_SITE_MLP_POST;
}

bool explain_site_has_heads(qkv_site site) {
    return !explain_stream_site(site) && !explain_neuron_site(site) &&
           site != QKV_SITE_LN_SCALE;
}

/* The sites of a model with an MLP only. */
static bool mlp_site(qkv_site site) {
    return site == QKV_SITE_RESID_MID || explain_neuron_site(site) || site == QKV_SITE_MLP_OUT;
}

int explain_site_units(qkv_site site) {
    return site == QKV_SITE_LN_SCALE ? QKV_LNS : 1;
}

qkv_tensor *explain_probe_tensor(const qkv_probe *probe, qkv_site site, int l, int u) {
    return site == QKV_SITE_LN_SCALE ? probe->ln_scale[l][u] : qkv_probe_site(probe, site, l);
}

int explain_spot_unit(const explain_spot *s) {
    return s->site == QKV_SITE_LN_SCALE ? (int)s->ln : 0;
}

/* A site's positions: query rows (z, q, the pattern's rows, the stream, the MLP, a scale),
 * key rows (k, v), key columns (the pattern's), neuron columns (the MLP's), LayerNorms (the
 * scales'). */
static bool over_applies(qkv_site site, explain_over over) {
    switch (over) {
    case EXPLAIN_OVER_HEAD: return explain_site_has_heads(site);
    case EXPLAIN_OVER_HEAD_POSITION:
        return site == QKV_SITE_Z || site == QKV_SITE_Q || site == QKV_SITE_PATTERN;
    case EXPLAIN_OVER_KEY_POSITION:
        return site == QKV_SITE_K || site == QKV_SITE_V || site == QKV_SITE_PATTERN;
    case EXPLAIN_OVER_NEURON:
    case EXPLAIN_OVER_NEURON_POSITION: return explain_neuron_site(site);
    case EXPLAIN_OVER_LN:
    case EXPLAIN_OVER_LN_POSITION: return site == QKV_SITE_LN_SCALE;
    default: return explain_stream_site(site) || explain_neuron_site(site);
    }
}

explain_over explain_default_over(qkv_site site) {
    return explain_stream_site(site)     ? EXPLAIN_OVER_LAYER_POSITION
           : explain_neuron_site(site)   ? EXPLAIN_OVER_NEURON
           : site == QKV_SITE_LN_SCALE ? EXPLAIN_OVER_LN
                                         : EXPLAIN_OVER_HEAD;
}

/* Whether the model has `site`: the stream's need the residual stream, the MLP's an MLP,
 * ln-scale LayerNorm. */
static bool model_has_site(const qkv_model_config *c, qkv_site site) {
    if (mlp_site(site)) return c->mlp > 0;
    if (site == QKV_SITE_LN_SCALE) return c->norm == QKV_NORM_LAYERNORM;
    return c->residual || !explain_stream_site(site);
}

/* "z, q, k, v, pattern, resid-pre and resid-post": the sites the model has, for a message. */
static void model_sites(const qkv_model_config *c, char *buf, size_t len) {
    int n = 0, k = 0;
    for (int site = 0; site < QKV_SITES; site++) n += model_has_site(c, (qkv_site)site);
    buf[0] = '\0';
    for (int site = 0; site < QKV_SITES; site++) {
        if (!model_has_site(c, (qkv_site)site)) continue;
        size_t at = strlen(buf);
        snprintf(buf + at, len - at, "%s%s", k == 0 ? "" : k == n - 1 ? " and " : ", ",
                 explain_site_names[site]);
        k++;
    }
}

qkv_status explain_check_site(const loaded_model *lm, qkv_site site, explain_over over) {
    const qkv_model_config *c = &lm->model.cfg;
    char sites[160];
    model_sites(c, sites, sizeof sites);
    if (mlp_site(site) && c->mlp == 0)
        return qkv_fail(QKV_ERR_VALUE, "--site %s: the model has no MLP (it was trained without "
                        "--mlp); its sites are %s", explain_site_names[site], sites);
    if (site == QKV_SITE_LN_SCALE && c->norm != QKV_NORM_LAYERNORM)
        return qkv_fail(QKV_ERR_VALUE, "--site %s: the model has no LayerNorm (it was trained "
                        "without --norm layernorm); its sites are %s", explain_site_names[site],
                        sites);
    if (!over_applies(site, over)) {
        char can[96] = "";
        for (int o = 0; explain_over_names[o]; o++)
            if (over_applies(site, (explain_over)o))
                snprintf(can + strlen(can), sizeof can - strlen(can), "%s%s", *can ? ", " : "",
                         explain_over_names[o]);
        return qkv_fail(QKV_ERR_VALUE, "--over %s does not apply to --site %s; it takes %s",
                        explain_over_names[over], explain_site_names[site], can);
    }
    if (explain_stream_site(site) && !c->residual)
        return qkv_fail(QKV_ERR_VALUE, "--site %s: the model has no residual stream (it was "
                        "trained with --no-residual); its sites are %s",
                        explain_site_names[site], sites);
    return QKV_OK;
}

/* ln-scale's spots: each LayerNorm of each layer (before its attention, before its MLP, and
 * on the last layer the final one), at every position or at each. */
static qkv_status ln_spots(const qkv_model_config *c, explain_over over, int positions,
                           explain_spot **spots, int *n) {
    int per = over == EXPLAIN_OVER_LN_POSITION ? positions : 1;
    int lns = c->layers * (c->mlp > 0 ? 2 : 1) + 1;
    *spots = malloc((size_t)(lns * per) * sizeof **spots);
    if (!*spots) return qkv_fail(QKV_ERR_NOMEM, "out of memory for %d places to patch", lns * per);
    *n = 0;
    for (int l = 0; l < c->layers; l++)
        for (int u = 0; u < QKV_LNS; u++) {
            if ((u == QKV_LN_MLP && c->mlp == 0) || (u == QKV_LN_FINAL && l < c->layers - 1))
                continue;
            for (int p = 0; p < per; p++)
                (*spots)[(*n)++] = (explain_spot){
                    .site = QKV_SITE_LN_SCALE, .layer = l, .head = -1,
                    .position = over == EXPLAIN_OVER_LN_POSITION ? p : -1, .key_position = -1,
                    .neuron = -1, .ln = (qkv_ln)u};
        }
    return QKV_OK;
}

qkv_status explain_spots(const loaded_model *lm, qkv_site site, explain_over over, int positions,
                         int keys, explain_spot **spots, int *n) {
    const qkv_model_config *c = &lm->model.cfg;
    if (site == QKV_SITE_LN_SCALE) return ln_spots(c, over, positions, spots, n);
    /* each layer's spots: heads x (positions, key positions or 1) x (neurons or 1) */
    bool headless = explain_stream_site(site) || explain_neuron_site(site);
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

qkv_status explain_select_heads(const explain_spot *all, int n, const explain_head *heads,
                                int n_heads, explain_spot **out, int *n_out) {
    *n_out = 0;
    *out = malloc((size_t)(n ? n : 1) * sizeof **out);
    if (!*out) return qkv_fail(QKV_ERR_NOMEM, "out of memory for %d places", n);
    for (int i = 0; i < n_heads; i++)
        for (int k = 0; k < n; k++)
            if (all[k].layer == heads[i].layer && all[k].head == heads[i].head)
                (*out)[(*n_out)++] = all[k];
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
    if (s->site == QKV_SITE_LN_SCALE && s->ln == QKV_LN_FINAL)
        snprintf(buf, len, "the scale (1/sigma) of the final LayerNorm (after layer %d)",
                 s->layer + 1);
    else if (s->site == QKV_SITE_LN_SCALE)
        snprintf(buf, len, "the scale (1/sigma) of the LayerNorm before the %s of layer %d",
                 s->ln == QKV_LN_ATTN ? "attention" : "MLP", s->layer + 1);
    else if (explain_neuron_site(s->site) && s->neuron >= 0)
        snprintf(buf, len, "MLP neuron %d.%d %s the activation", s->layer + 1, s->neuron,
                 s->site == QKV_SITE_MLP_PRE ? "before" : "after");
    else if (explain_stream_site(s->site) || explain_neuron_site(s->site))
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
qkv_head_edit explain_spot_edit(const explain_spot *s, qkv_head_edit_kind kind,
                                const qkv_tensor *value) {
    bool keys = s->site == QKV_SITE_K || s->site == QKV_SITE_V;
    int column = s->site == QKV_SITE_PATTERN    ? s->key_position
                 : explain_neuron_site(s->site) ? s->neuron
                                                : -1;
    return (qkv_head_edit){.kind = kind, .layer = s->layer, .head = s->head,
                           .position = keys ? s->key_position : s->position, .value = value,
                           .site = s->site, .key_position = column, .ln = s->ln};
}

/* Bytes of layers tensors of `site` for B sequences, with their headers. */
double explain_site_bytes(const loaded_model *lm, qkv_site site, int B) {
    const qkv_model_config *c = &lm->model.cfg;
    double To = lm->target_len, T = c->seq_len, C = c->d_model;
    double per = site == QKV_SITE_K || site == QKV_SITE_V ? T * C
                 : site == QKV_SITE_PATTERN                ? c->heads * To * T
                 : explain_neuron_site(site)               ? To * c->mlp
                 : site == QKV_SITE_LN_SCALE               ? To
                                                          : To * C;
    return (double)c->layers * explain_site_units(site) *
           (B * per * qkv_dtype_size(c->dtype) + 1024);
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
        bool neurons = explain_neuron_site(e->site);
        bool scale = e->site == QKV_SITE_LN_SCALE;
        explain_spot s = {e->site, e->layer, e->head, keys ? -1 : e->position,
                          keys ? e->position : neurons || scale ? -1 : e->key_position,
                          neurons ? e->key_position : -1, e->ln};
        if (!explain_site_has_heads(e->site)) s.head = -1;
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
                return explain_check_logit(lm, logits, (int)b, (int)i, (int)j, run);
            }
        }
    return QKV_OK;
}

qkv_status explain_score_batch(loaded_model *lm, qkv_tensor *logits, const int32_t *y,
                               int first, const qkv_head_edit *edits, int n_edits,
                               explain_sums *sum) {
    int64_t B = logits->shape[0], To = logits->shape[1];
    qkv_status s = explain_check_scored_logits(lm, logits, y, first, edits, n_edits);
    if (s != QKV_OK) return s;
    int64_t before = sum->counted;
    count_hits(logits, y, &sum->hits, &sum->counted);
    if (sum->counted == before) return QKV_OK;
    qkv_tensor *targets = qkv_from_array(lm->ctx, QKV_I32, 2, (int64_t[]){B, To}, y);
    double loss = qkv_get(qkv_cross_entropy(lm->ctx, logits, targets, -1), 0);
    char edited[160];
    if ((s = explain_check_finite(loss, "the loss of examples %d..%d%s%s", first + 1,
                                  first + (int)B, n_edits ? " " : "",
                                  edits_text(edits, n_edits, edited, sizeof edited))) != QKV_OK)
        return s;
    sum->loss_sum += loss * (double)(sum->counted - before);
    return QKV_OK;
}

explain_score explain_score_of(const explain_sums *sum) {
    return (explain_score){
        .loss = sum->counted ? sum->loss_sum / (double)sum->counted : 0,
        .accuracy = sum->counted ? (double)sum->hits / (double)sum->counted : 0,
        .counted = sum->counted,
        .metric = sum->counted ? sum->metric_sum / (double)sum->counted : 0};
}

qkv_status explain_score_set(loaded_model *lm, const example_set *set, const qkv_head_edit *edits,
                             int n_edits, explain_score *out) {
    int T = lm->model.cfg.seq_len, To = lm->target_len;
    explain_sums sum = {0};
    for (int start = 0; start < set->n; start += ANALYSIS_BATCH) {
        int B = set->n - start < ANALYSIS_BATCH ? set->n - start : ANALYSIS_BATCH;
        qkv_ctx_reset(lm->ctx);
        qkv_probe probe = {.edits = edits, .n_edits = n_edits};
        qkv_tensor *logits = qkv_model_forward_probe(
            &lm->model, lm->ctx, set->x + (size_t)start * T, set->len ? set->len + start : NULL,
            B, &probe);
        qkv_status s = explain_score_batch(lm, logits, set->y + (size_t)start * To, start, edits,
                                           n_edits, &sum);
        if (s != QKV_OK) return s;
    }
    *out = explain_score_of(&sum);
    return QKV_OK;
}

/* ---- JSON ---- */

void explain_json_number(cJSON *o, const char *key, double v) {
    if (isfinite(v)) cJSON_AddNumberToObject(o, key, v);
    else cJSON_AddNullToObject(o, key);
}

void explain_json_score(cJSON *o, const explain_score *s) {
    explain_json_number(o, "loss", s->loss);
    explain_json_number(o, "accuracy", s->accuracy);
}

/* "L.H" counted from 1 */
void explain_head_name(int layer, int head, char *buf, size_t len) {
    snprintf(buf, len, "%d.%d", layer + 1, head + 1);
}

/* Tokens as JSON names them: each token itself, never shortened (a table may shorten it;
 * two tokens that share a long prefix stay two names). */
cJSON *explain_token_json(const loaded_model *lm, int32_t token) {
    char label[32];
    return cJSON_CreateString(loaded_model_token_text(lm, token, label, sizeof label));
}

cJSON *explain_class_json(const loaded_model *lm, int32_t c) {
    char label[32];
    return cJSON_CreateString(loaded_model_class_text(lm, c, label, sizeof label));
}

cJSON *explain_json_token_labels(const loaded_model *lm, const explain_input *in) {
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
        cJSON_AddItemToObject(o, "tokens", explain_json_token_labels(lm, in));
        cJSON_AddItemToObject(o, "positions", position_labels(lm, in));
    }
    return o;
}

/* A spot's fields in a JSON row: site, layer, head (null for the stream's), position and
 * key_position (null where every one, or none, is edited). */
void explain_json_spot(cJSON *x, const explain_spot *s) {
    cJSON_AddStringToObject(x, "site", explain_site_names[s->site]);
    cJSON_AddNumberToObject(x, "layer", s->layer + 1);
    if (s->head < 0) cJSON_AddNullToObject(x, "head");
    else cJSON_AddNumberToObject(x, "head", s->head + 1);
    if (s->position < 0) cJSON_AddNullToObject(x, "position");
    else cJSON_AddNumberToObject(x, "position", s->position);
    if (s->key_position < 0) cJSON_AddNullToObject(x, "key_position");
    else cJSON_AddNumberToObject(x, "key_position", s->key_position);
    if (s->site == QKV_SITE_LN_SCALE) /* rows of ln-scale: which LayerNorm */
        cJSON_AddStringToObject(x, "ln", explain_ln_names[s->ln]);
    if (!explain_neuron_site(s->site)) return; /* rows of the MLP's neurons: which one, or null */
    if (s->neuron < 0) cJSON_AddNullToObject(x, "neuron");
    else cJSON_AddNumberToObject(x, "neuron", s->neuron);
}

qkv_status explain_json_line(FILE *f, cJSON *o, const char *what) {
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!text) return qkv_fail(QKV_ERR_NOMEM, "out of memory for %s", what);
    fputs(text, f);
    fputc('\n', f);
    free(text);
    return QKV_OK;
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
