/* attribute.c - direct logit attribution: a logit split into the parts of the stream the
 * vocabulary head reads (model/readout.c), in double (explain.h). */
#include "explore/explain.h"
#include "explore/explain_internal.h"
#include "engine/engine.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    qkv_status s = explain_check_logit(lm, logits, 0, position, token, "the run of the input");
    if (s == QKV_OK) {
        char label[32];
        loaded_model_class_label(lm, token, label, sizeof label);
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
            s = explain_check_finite(r->parts[i].value, "the part '%s' of the logit of '%s' at position %d",
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

cJSON *explain_attribute_json(const loaded_model *lm, const explain_input *in,
                              const dla_result *r) {
    cJSON *o = explain_json_header(lm, "attribute", in);
    cJSON_AddNumberToObject(o, "position", r->position);
    cJSON_AddItemToObject(o, "token", explain_class_json(lm, r->token));
    explain_json_number(o, "logit", r->logit);
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
        explain_json_number(x, "value", p->value);
        cJSON_AddItemToArray(parts, x);
    }
    explain_json_number(o, "sum", r->sum);
    explain_json_number(o, "final_scale", r->final_scale);
    return o;
}

