/* ablate.c - ablation: each spot of a site zeroed or set to its mean over a set of examples,
 * scored by the loss and accuracy (explain.h). */
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
    qkv_ctx *keep = s == QKV_OK ? loaded_model_arena(explain_site_bytes(lm, rq->site, 1), "ablate")
                                : NULL;
    if (!keep) return s != QKV_OK ? s : QKV_ERR_NOMEM;
    qkv_tensor *means[QKV_MAX_LAYERS][QKV_LNS] = {{0}};
    s = rq->mean ? site_means(lm, set, rq->site, keep, means) : QKV_OK;
    qkv_head_edit *all = calloc((size_t)(r->n ? r->n : 1), sizeof *all);
    if (s == QKV_OK && !all) s = qkv_fail(QKV_ERR_NOMEM, "ablate: out of memory");
    if (s != QKV_OK) {
        free(all);
        qkv_ctx_free(keep);
        return s;
    }
    for (int i = 0; i < r->n; i++)
        all[i] = explain_spot_edit(&r->spots[i], rq->mean ? QKV_HEAD_MEAN : QKV_HEAD_ZERO,
                                   means[r->spots[i].layer][explain_spot_unit(&r->spots[i])]);
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

/* ---- JSON ---- */

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
    explain_json_score(b, &r->baseline);
    cJSON *heads = cJSON_AddArrayToObject(o, "heads");
    for (int i = 0; i < r->n; i++) {
        cJSON *h = cJSON_CreateObject();
        explain_json_spot(h, &r->spots[i]);
        explain_json_score(h, &r->each[i]);
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
    }
    return o;
}

