/* attribute.c - direct logit attribution: a logit split into the parts of the stream the
 * vocabulary head reads (model/readout.c), in double, at one position or averaged over every
 * target position of a set of examples (explain.h). */
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

/* ---- over a set of examples ---- */

qkv_status explain_dla_mean_add(dla_mean *m, const dla_result *one) {
    if (!m->parts) {
        m->parts = calloc((size_t)one->n_parts + 1, sizeof *m->parts);
        if (!m->parts) return qkv_fail(QKV_ERR_NOMEM, "attribute: out of memory");
        m->n_parts = one->n_parts;
        for (int i = 0; i < one->n_parts; i++) m->parts[i] = one->parts[i], m->parts[i].value = 0;
    }
    m->counted++;
    m->logit += one->logit;
    for (int i = 0; i < m->n_parts; i++) m->parts[i].value += one->parts[i].value;
    return QKV_OK;
}

void explain_dla_mean_finish(dla_mean *m) {
    if (m->counted == 0) return;
    m->logit /= (double)m->counted;
    for (int i = 0; i < m->n_parts; i++) m->parts[i].value /= (double)m->counted;
}

void explain_dla_mean_free(dla_mean *m) {
    free(m->parts);
    memset(m, 0, sizeof *m);
}

/* An example's line: example (from 1), line (its file's, or null), and its own means. */
static qkv_status example_line(const loaded_model *lm, FILE *f, int e, const int64_t *lines,
                               const dla_mean *m) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "example", e + 1);
    if (lines) cJSON_AddNumberToObject(o, "line", (double)lines[e]);
    else cJSON_AddNullToObject(o, "line");
    cJSON_AddNumberToObject(o, "target_positions", (double)m->counted);
    explain_dla_mean_json(lm, o, m);
    return explain_json_line(f, o, "--per-example's lines");
}

qkv_status explain_attribute_set(loaded_model *lm, const example_set *set, const int64_t *lines,
                                 bool neurons, FILE *per_example, dla_mean *r) {
    memset(r, 0, sizeof *r);
    int To = lm->target_len;
    explain_input *in = malloc(sizeof *in);
    qkv_status s = in ? loaded_model_reserve(lm, 1, NULL)
                      : qkv_fail(QKV_ERR_NOMEM, "attribute: out of memory");
    for (int e = 0; s == QKV_OK && e < set->n; e++) {
        explain_set_input(lm, set, e, in);
        qkv_ctx_reset(lm->ctx);
        qkv_probe probe = {0};
        qkv_tensor *logits = qkv_model_forward_probe(&lm->model, lm->ctx, in->tokens,
                                                     set->len ? &in->len : NULL, 1, &probe);
        dla_mean own = {0};
        for (int i = 0; s == QKV_OK && i < To; i++) {
            if (in->targets[i] < 0) continue;
            dla_result one;
            s = explain_attribute_probe(lm, logits, &probe, i, in->targets[i], neurons, &one);
            if (s == QKV_ERR_NUMERIC) qkv_fail(s, "example %d: %s", e + 1, qkv_last_error());
            if (s == QKV_OK) s = explain_dla_mean_add(r, &one);
            if (s == QKV_OK && per_example) s = explain_dla_mean_add(&own, &one);
            explain_attribute_free(&one);
        }
        explain_dla_mean_finish(&own);
        if (s == QKV_OK && per_example) s = example_line(lm, per_example, e, lines, &own);
        explain_dla_mean_free(&own);
    }
    free(in);
    explain_dla_mean_finish(r);
    return s;
}

/* ---- JSON ---- */

/* One part of a logit: name, layer and head (from 1, or null), neuron (on models with an
 * MLP: its index, or null), value. */
static cJSON *part_json(const loaded_model *lm, const dla_part *p) {
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "name", p->name);
    if (p->layer < 0) cJSON_AddNullToObject(x, "layer");
    else cJSON_AddNumberToObject(x, "layer", p->layer + 1);
    if (p->head < 0) cJSON_AddNullToObject(x, "head");
    else cJSON_AddNumberToObject(x, "head", p->head + 1);
    if (p->neuron >= 0) cJSON_AddNumberToObject(x, "neuron", p->neuron);
    else if (lm->model.cfg.mlp > 0) cJSON_AddNullToObject(x, "neuron");
    explain_json_number(x, "value", p->value);
    return x;
}

void explain_dla_mean_json(const loaded_model *lm, cJSON *o, const dla_mean *m) {
    explain_json_number(o, "logit", m->counted ? m->logit : NAN);
    cJSON *parts = cJSON_AddArrayToObject(o, "parts");
    double sum = 0;
    for (int i = 0; i < m->n_parts; i++) {
        const dla_part *p = &m->parts[i];
        cJSON_AddItemToArray(parts, part_json(lm, p));
        sum += p->value;
    }
    explain_json_number(o, "sum", m->counted ? sum : NAN);
}

cJSON *explain_attribute_set_json(const loaded_model *lm, const char *data, int examples,
                                  const dla_mean *r) {
    cJSON *o = explain_json_header(lm, "attribute", NULL);
    cJSON_AddStringToObject(o, "data", data);
    cJSON_AddNumberToObject(o, "examples", examples);
    cJSON_AddNumberToObject(o, "target_positions", (double)r->counted);
    explain_dla_mean_json(lm, o, r);
    return o;
}

cJSON *explain_attribute_json(const loaded_model *lm, const explain_input *in,
                              const dla_result *r) {
    cJSON *o = explain_json_header(lm, "attribute", in);
    cJSON_AddNumberToObject(o, "position", r->position);
    cJSON_AddItemToObject(o, "token", explain_class_json(lm, r->token));
    explain_json_number(o, "logit", r->logit);
    cJSON *parts = cJSON_AddArrayToObject(o, "parts");
    for (int i = 0; i < r->n_parts; i++) {
        const dla_part *p = &r->parts[i];
        cJSON_AddItemToArray(parts, part_json(lm, p));
    }
    explain_json_number(o, "sum", r->sum);
    explain_json_number(o, "final_scale", r->final_scale);
    return o;
}

