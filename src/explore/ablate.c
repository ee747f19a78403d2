/* ablate.c - ablation: each spot of a site zeroed, set to its mean over a set of examples, or
 * taken from other examples' runs (resample), scored by the loss and accuracy and a metric
 * (explain.h). */
#include "explore/explain.h"
#include "explore/explain_internal.h"
#include "engine/engine.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* means[l][u]: layer l's tensor of `site` (unit u: explain_site_units) averaged over the
 * examples, (1, ...) in keep; NULL where the model has none. */
static qkv_status site_means(loaded_model *lm, const example_set *set, qkv_site site, qkv_ctx *keep,
                             qkv_tensor *means[][QKV_LNS]) {
    const qkv_model_config *c = &lm->model.cfg;
    int T = c->seq_len, units = explain_site_units(site), slots = c->layers * units;
    double *sum = NULL;
    int64_t per = 0;
    for (int start = 0; start < set->n; start += ANALYSIS_BATCH) {
        int B = set->n - start < ANALYSIS_BATCH ? set->n - start : ANALYSIS_BATCH;
        qkv_ctx_reset(lm->ctx);
        qkv_probe probe = {0};
        qkv_model_forward_probe(&lm->model, lm->ctx, set->x + (size_t)start * T,
                                set->len ? set->len + start : NULL, B, &probe);
        for (int i = 0; i < slots; i++) { /* every tensor of the site has one shape */
            int l = i / units, u = i % units;
            const qkv_tensor *x = explain_probe_tensor(&probe, site, l, u);
            if (!x) continue;
            if (!sum) {
                per = x->size / x->shape[0];
                sum = calloc((size_t)(slots * per), sizeof *sum);
                if (!sum) return qkv_fail(QKV_ERR_NOMEM, "ablate: out of memory for the means");
            }
            if (!means[l][u]) {
                int64_t shape[4];
                memcpy(shape, x->shape, sizeof shape);
                shape[0] = 1;
                means[l][u] = qkv_new(keep, c->dtype, x->ndim, shape);
            }
            for (int b = 0; b < B; b++)
                for (int64_t k = 0; k < per; k++) sum[i * per + k] += qkv_get(x, b * per + k);
        }
    }
    for (int i = 0; sum && i < slots; i++)
        for (int64_t k = 0; means[i / units][i % units] && k < per; k++)
            qkv_set(means[i / units][i % units], k, set->n ? sum[i * per + k] / set->n : 0);
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
        s = explain_select_heads(all, n, rq->heads, rq->n_heads, &r->spots, &r->n);
        free(all);
        if (s != QKV_OK) return qkv_fail(QKV_ERR_NOMEM, "ablate: out of memory for %d scores", n);
    }
    r->each = calloc((size_t)(r->n ? r->n : 1), sizeof *r->each);
    if (!r->spots || !r->each)
        return qkv_fail(QKV_ERR_NOMEM, "ablate: out of memory for %d scores", n);
    return QKV_OK;
}

/* resample's partners, (draws, n): example e's in draw d at [d * n + e], another example,
 * (e + 1 + below(n - 1)) mod n from qkv_rng_seed(seed), draws then examples in order. NULL
 * when out of memory. */
static int32_t *draw_partners(int n, int draws, uint64_t seed) {
    int32_t *p = malloc((size_t)n * draws * sizeof *p);
    qkv_rng rng = qkv_rng_seed(seed);
    for (int64_t k = 0; p && k < (int64_t)n * draws; k++) {
        int e = (int)(k % n);
        p[k] = (int32_t)((e + 1 + (int64_t)qkv_rng_below(&rng, (uint32_t)(n - 1))) % n);
    }
    return p;
}

/* What one batch's runs share: its examples, the metric's scratch, and with kl the unedited
 * run's log-probabilities at every row, (B·To, V). */
typedef struct {
    const ablate_request *rq;
    const int32_t *x, *len, *y; /* the batch's (B, T), (B) or NULL, (B, To) */
    int first, B;
    double *base;               /* kl: (B·To, V), the unedited run's log softmax */
    double *logits;             /* scratch (V) */
} batch_view;

/* One forward of the batch's inputs x (B, T) under `edits`, scored into sum against the
 * batch's targets: the loss and accuracy (explain_score_batch), and the metric of prob and
 * kl over the rows with a target. With `unedited` and kl, the run's log-probabilities are
 * kept as the base. */
static qkv_status score_run(loaded_model *lm, const batch_view *bv, const qkv_head_edit *edits,
                            int n_edits, bool unedited, explain_sums *sum) {
    const ablate_request *rq = bv->rq;
    int V = lm->model.cfg.vocab, To = lm->target_len;
    qkv_ctx_reset(lm->ctx);
    qkv_probe probe = {.edits = edits, .n_edits = n_edits};
    qkv_tensor *logits = qkv_model_forward_probe(&lm->model, lm->ctx, bv->x, bv->len, bv->B,
                                                 &probe);
    qkv_status s = explain_score_batch(lm, logits, bv->y, bv->first, edits, n_edits, sum);
    bool kl = rq->scored && rq->metric == EXPLAIN_METRIC_KL;
    if (s != QKV_OK || !rq->scored || rq->metric == EXPLAIN_METRIC_LOSS) return s;
    for (int64_t row = 0; row < (int64_t)bv->B * To; row++) {
        int32_t target = bv->y[row];
        if (target < 0) continue; /* rows without a target are neither scored nor kept */
        for (int j = 0; j < V; j++) bv->logits[j] = qkv_get(logits, row * V + j);
        double *base = kl ? bv->base + (size_t)row * V : NULL;
        if (kl && unedited) explain_log_softmax(bv->logits, V, base);
        sum->metric_sum += explain_metric_of(rq->metric, bv->logits, V, target, -1, base);
    }
    return QKV_OK;
}

/* The tensors of `site` (each layer's, each unit's) of a run of inputs x (B, T) copied into
 * keep (reset first): resample's values for the batch. */
static void partner_values(loaded_model *lm, const ablate_request *rq, const int32_t *x,
                           const int32_t *len, int B, qkv_ctx *keep,
                           qkv_tensor *vals[][QKV_LNS]) {
    qkv_ctx_reset(keep);
    qkv_ctx_reset(lm->ctx);
    qkv_probe probe = {0};
    qkv_model_forward_probe(&lm->model, lm->ctx, x, len, B, &probe);
    for (int l = 0; l < lm->model.cfg.layers; l++)
        for (int u = 0; u < explain_site_units(rq->site); u++) {
            const qkv_tensor *t = explain_probe_tensor(&probe, rq->site, l, u);
            vals[l][u] = NULL;
            if (!t) continue;
            vals[l][u] = qkv_new(keep, t->dtype, t->ndim, t->shape);
            memcpy(vals[l][u]->data, t->data, (size_t)t->size * qkv_dtype_size(t->dtype));
        }
}

/* The runs of one batch: the unedited, then for each draw (one but for resample: the
 * partners' values first) each spot removed, and every spot at once. */
static qkv_status ablate_batch(loaded_model *lm, const example_set *set, batch_view *bv,
                               const int32_t *partners, qkv_ctx *vals_ctx, qkv_head_edit *all,
                               explain_sums *base, explain_sums *each, explain_sums *together,
                               int n, int32_t *px, int32_t *plen) {
    const ablate_request *rq = bv->rq;
    int T = lm->model.cfg.seq_len;
    qkv_status s = score_run(lm, bv, NULL, 0, true, base);
    for (int d = 0; s == QKV_OK && d < (rq->resample ? rq->draws : 1); d++) {
        if (rq->resample) {
            qkv_tensor *vals[QKV_MAX_LAYERS][QKV_LNS];
            for (int b = 0; b < bv->B; b++) { /* the partners' inputs */
                int32_t q = partners[(size_t)d * set->n + bv->first + b];
                memcpy(px + (size_t)b * T, set->x + (size_t)q * T, (size_t)T * sizeof *px);
                if (set->len) plen[b] = set->len[q];
            }
            partner_values(lm, rq, px, set->len ? plen : NULL, bv->B, vals_ctx, vals);
            for (int i = 0; i < n; i++)
                all[i].value =
                    vals[all[i].layer][all[i].site == QKV_SITE_LN_SCALE ? all[i].ln : 0];
        }
        for (int i = 0; s == QKV_OK && i < n; i++)
            s = score_run(lm, bv, &all[i], 1, false, &each[i]);
        if (s == QKV_OK && rq->together) s = score_run(lm, bv, all, n, false, together);
    }
    return s;
}

qkv_status explain_ablate(loaded_model *lm, const example_set *set, const ablate_request *rq,
                          ablate_result *r) {
    const qkv_model_config *c = &lm->model.cfg;
    int T = c->seq_len, To = lm->target_len, V = c->vocab;
    memset(r, 0, sizeof *r);
    if (rq->scored && rq->metric == EXPLAIN_METRIC_LOGIT_DIFF)
        return qkv_fail(QKV_ERR_VALUE, "ablate: --metric logit-diff needs a wrong token beside "
                        "each answer, and a set of examples gives only targets: ablate takes "
                        "--metric loss, prob or kl");
    if (rq->resample && (set->n < 2 || rq->draws < 1))
        return qkv_fail(QKV_ERR_VALUE, set->n < 2 ? "ablate: --mode resample takes each "
                        "example's values from another example, and there is only one"
                        : "ablate: --draws must be at least 1");
    qkv_status s = ablate_spots(lm, rq, r);
    if (s != QKV_OK) return s;
    s = loaded_model_reserve(lm, set->n, "ablate");
    int Bmax = set->n < ANALYSIS_BATCH ? set->n : ANALYSIS_BATCH;
    bool kl = rq->scored && rq->metric == EXPLAIN_METRIC_KL;
    qkv_ctx *keep = s == QKV_OK ? loaded_model_arena(explain_site_bytes(lm, rq->site, 1), "ablate")
                                : NULL;
    qkv_ctx *vals = keep && rq->resample
                        ? loaded_model_arena(explain_site_bytes(lm, rq->site, Bmax), "ablate")
                        : NULL;
    double bytes = kl ? (double)Bmax * To * V * sizeof(double) : 0;
    qkv_ctx *base_ctx = keep && (!rq->resample || vals) && kl ? loaded_model_arena(bytes + 1024,
                                                                                   "ablate")
                                                              : NULL;
    if (!keep || (rq->resample && !vals) || (kl && !base_ctx)) {
        qkv_ctx_free(keep), qkv_ctx_free(vals);
        return s != QKV_OK ? s : QKV_ERR_NOMEM;
    }
    qkv_tensor *means[QKV_MAX_LAYERS][QKV_LNS] = {{0}};
    s = rq->mean ? site_means(lm, set, rq->site, keep, means) : QKV_OK;
    qkv_head_edit *all = calloc((size_t)(r->n ? r->n : 1), sizeof *all);
    explain_sums *sums = calloc((size_t)r->n + 2, sizeof *sums); /* each, baseline, together */
    int32_t *partners = rq->resample ? draw_partners(set->n, rq->draws, rq->seed) : NULL;
    int32_t *px = rq->resample ? malloc((size_t)Bmax * T * sizeof *px) : NULL;
    int32_t *plen = rq->resample ? malloc((size_t)Bmax * sizeof *plen) : NULL;
    double *scratch = malloc((size_t)V * sizeof *scratch);
    if (s == QKV_OK && (!all || !sums || !scratch ||
                        (rq->resample && (!partners || !px || !plen))))
        s = qkv_fail(QKV_ERR_NOMEM, "ablate: out of memory");
    for (int i = 0; s == QKV_OK && i < r->n; i++)
        all[i] = explain_spot_edit(&r->spots[i],
                                   rq->resample ? QKV_HEAD_REPLACE
                                   : rq->mean   ? QKV_HEAD_MEAN
                                                : QKV_HEAD_ZERO,
                                   means[r->spots[i].layer][explain_spot_unit(&r->spots[i])]);
    int64_t cells = (int64_t)Bmax * To * V;
    double *base = kl ? (double *)qkv_new(base_ctx, QKV_F64, 1, &cells)->data : NULL;
    for (int first = 0; s == QKV_OK && first < set->n; first += ANALYSIS_BATCH) {
        int B = set->n - first < ANALYSIS_BATCH ? set->n - first : ANALYSIS_BATCH;
        batch_view bv = {rq, set->x + (size_t)first * T, set->len ? set->len + first : NULL,
                         set->y + (size_t)first * To, first, B, base, scratch};
        s = ablate_batch(lm, set, &bv, partners, vals, all, &sums[r->n], sums, &sums[r->n + 1],
                         r->n, px, plen);
    }
    if (s == QKV_OK) {
        r->baseline = explain_score_of(&sums[r->n]);
        for (int i = 0; i < r->n; i++) r->each[i] = explain_score_of(&sums[i]);
        if (rq->together) r->together = explain_score_of(&sums[r->n + 1]);
        explain_score *scores[] = {&r->baseline, &r->together};
        for (int i = 0; rq->scored && rq->metric == EXPLAIN_METRIC_LOSS && i < r->n + 2; i++) {
            explain_score *x = i < r->n ? &r->each[i] : scores[i - r->n];
            x->metric = x->loss; /* the loss itself: the model's cross-entropy */
        }
    }
    if (s == QKV_ERR_NUMERIC) qkv_fail(s, "ablate: %s", qkv_last_error());
    free(all), free(sums), free(partners), free(px), free(plen), free(scratch);
    qkv_ctx_free(keep), qkv_ctx_free(vals), qkv_ctx_free(base_ctx);
    return s;
}

void explain_ablate_free(ablate_result *r) {
    free(r->spots);
    free(r->each);
    r->spots = NULL;
    r->each = NULL;
}

/* ---- JSON ---- */

cJSON *explain_ablate_json(const loaded_model *lm, const ablate_request *rq, const ablate_result *r,
                           const char *data_path) {
    cJSON *o = explain_json_header(lm, "ablate", NULL);
    cJSON_AddStringToObject(o, "mode", rq->resample ? "resample" : rq->mean ? "mean" : "zero");
    if (rq->resample) {
        cJSON_AddNumberToObject(o, "draws", rq->draws);
        cJSON_AddNumberToObject(o, "seed", (double)rq->seed);
    }
    cJSON_AddStringToObject(o, "site", explain_site_names[rq->site]);
    cJSON_AddStringToObject(o, "over", explain_over_names[rq->over]);
    if (rq->scored) cJSON_AddStringToObject(o, "metric", explain_metric_names[rq->metric]);
    if (data_path) cJSON_AddStringToObject(o, "data", data_path);
    else cJSON_AddNullToObject(o, "data");
    cJSON_AddNumberToObject(o, "examples", (double)r->baseline.counted);
    cJSON *b = cJSON_AddObjectToObject(o, "baseline");
    explain_json_score(b, &r->baseline);
    if (rq->scored) explain_json_number(b, "metric", r->baseline.metric);
    cJSON *heads = cJSON_AddArrayToObject(o, "heads");
    for (int i = 0; i < r->n; i++) {
        cJSON *h = cJSON_CreateObject();
        explain_json_spot(h, &r->spots[i]);
        explain_json_score(h, &r->each[i]);
        if (rq->scored) explain_json_number(h, "metric", r->each[i].metric);
        cJSON_AddItemToArray(heads, h);
    }
    if (rq->together) {
        cJSON *tg = cJSON_AddObjectToObject(o, "together");
        cJSON *names = cJSON_AddArrayToObject(tg, "heads");
        char name[32];
        for (int i = 0; i < r->n; i++) {
            const explain_spot *s = &r->spots[i];
            if (s->site == QKV_SITE_LN_SCALE)
                snprintf(name, sizeof name, "%d.%s", s->layer + 1, explain_ln_names[s->ln]);
            else if (s->head < 0) snprintf(name, sizeof name, "%d", s->layer + 1);
            else explain_head_name(s->layer, s->head, name, sizeof name);
            cJSON_AddItemToArray(names, cJSON_CreateString(name));
        }
        explain_json_score(tg, &r->together);
        if (rq->scored) explain_json_number(tg, "metric", r->together.metric);
    }
    return o;
}

