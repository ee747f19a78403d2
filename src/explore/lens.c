/* lens.c - the logit lens and the stream's decomposition (lens.h): one forward
 * (qkv_model_forward_probe) keeps the stream at every layer boundary, each read through the
 * vocabulary head; explain_attribute_probe splits the final prediction's logit at each position
 * into its parts, from the same forward. Over a set of examples (lens --data), the same at
 * every target position against the target, averaged. */
#include "explore/lens.h"
#include "explore/explain_internal.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void lens_free(lens_result *r) {
    if (r->final)
        for (int i = 0; i < r->positions; i++) explain_attribute_free(&r->final[i]);
    free(r->top_token), free(r->top_prob), free(r->rank_of_final), free(r->final);
    memset(r, 0, sizeof *r);
}

/* One cell: the `top` most probable tokens of logits (V) with their softmax probabilities
 * (ties: the lower id first, as the argmax takes the first of equal largest), and the rank of
 * token `final`. */
static int read_cell(const double *logits, int V, int top, int final, int32_t *tokens,
                     double *probs) {
    double most = logits[0], sum = 0;
    for (int j = 1; j < V; j++) most = logits[j] > most ? logits[j] : most;
    for (int j = 0; j < V; j++) sum += exp(logits[j] - most);
    int n = 0; /* tokens[0..n) sorted, most probable first */
    for (int j = 0; j < V; j++) {
        if (n == top && !(logits[j] > logits[tokens[n - 1]])) continue;
        int at = n < top ? n++ : n - 1;
        while (at > 0 && logits[j] > logits[tokens[at - 1]]) {
            tokens[at] = tokens[at - 1];
            at--;
        }
        tokens[at] = j;
    }
    for (int k = 0; k < top; k++) probs[k] = exp(logits[tokens[k]] - most) / sum;
    int rank = 1;
    for (int j = 0; j < V; j++)
        rank += logits[j] > logits[final] || (logits[j] == logits[final] && j < final);
    return rank;
}

qkv_status lens_run(loaded_model *lm, const explain_input *in, int top, lens_result *r) {
    const qkv_model_config *c = &lm->model.cfg;
    int V = c->vocab, P = explain_query_positions(lm, in), B = c->layers + 1;
    memset(r, 0, sizeof *r);
    int most = V < LENS_MAX_TOP ? V : LENS_MAX_TOP;
    if (top < 1 || top > most)
        return qkv_fail(QKV_ERR_VALUE, "--top %d: a cell lists 1 to %d tokens (the model has %d)",
                        top, most, V);
    *r = (lens_result){.boundaries = B, .positions = P, .top = top};
    size_t cells = (size_t)B * P;
    r->top_token = malloc(cells * top * sizeof *r->top_token);
    r->top_prob = malloc(cells * top * sizeof *r->top_prob);
    r->rank_of_final = malloc(cells * sizeof *r->rank_of_final);
    r->final = calloc((size_t)P, sizeof *r->final);
    double *logits = malloc((size_t)(V + c->d_model) * sizeof *logits); /* and scratch */
    if (!r->top_token || !r->top_prob || !r->rank_of_final || !r->final || !logits) {
        free(logits);
        return qkv_fail(QKV_ERR_NOMEM, "out of memory for %d positions", P);
    }
    /* one forward: the final prediction and its parts at each position, then every cell */
    qkv_status s = loaded_model_reserve(lm, 1, NULL);
    if (s != QKV_OK) {
        free(logits);
        return s;
    }
    qkv_ctx_reset(lm->ctx);
    qkv_probe probe = {0};
    qkv_tensor *out = qkv_model_forward_probe(&lm->model, lm->ctx, in->tokens,
                                              lm->data ? &in->len : NULL, 1, &probe);
    for (int i = 0; i < P && s == QKV_OK; i++)
        s = explain_attribute_probe(lm, out, &probe, i, -1, false, &r->final[i]);
    for (int b = 0; b < B && s == QKV_OK; b++)
        for (int i = 0; i < P && s == QKV_OK; i++) {
            model_unembed(&lm->model, probe.stream[b], i, logits, logits + V);
            for (int j = 0; j < V; j++)
                if (!isfinite(logits[j])) {
                    char label[32];
                    loaded_model_class_label(lm, j, label, sizeof label);
                    s = qkv_fail(QKV_ERR_NUMERIC, "the logit of '%s' after layer %d at "
                                 "position %d is not finite (%s): the model's forward overflows "
                                 "(weights too large for its numbers)", label, b, i,
                                 isnan(logits[j]) ? "NaN" : logits[j] > 0 ? "+Inf" : "-Inf");
                    break;
                }
            size_t cell = (size_t)b * P + i;
            if (s == QKV_OK)
                r->rank_of_final[cell] = read_cell(logits, V, top, r->final[i].token,
                                                   r->top_token + cell * top,
                                                   r->top_prob + cell * top);
        }
    free(logits);
    return s;
}

/* ---- over a set of examples ---- */

void lens_set_free(lens_set_result *r) {
    free(r->layer);
    explain_dla_mean_free(&r->parts);
    memset(r, 0, sizeof *r);
}

/* Adds one position's lens at a boundary, logits (V) read against the target and the final
 * prediction, to m. scratch: V doubles. */
static void add_cell(lens_mean *m, const double *logits, int V, int target, int final) {
    double most = logits[0], sum = 0;
    for (int j = 1; j < V; j++) most = logits[j] > most ? logits[j] : most;
    for (int j = 0; j < V; j++) sum += exp(logits[j] - most);
    int rank = 1, top = 0;
    for (int j = 0; j < V; j++) {
        rank += logits[j] > logits[target] || (logits[j] == logits[target] && j < target);
        if (logits[j] > logits[top]) top = j;
    }
    m->target_prob += exp(logits[target] - most) / sum; /* as read_cell's */
    m->target_loss += most + log(sum) - logits[target];
    m->target_rank += rank;
    m->accuracy += top == target;
    m->final_agreement += top == final;
}

/* The sums of each boundary over `counted` positions divided into means (NaN: none). */
static void mean_layers(lens_mean *layer, int boundaries, int64_t counted) {
    double n = counted ? (double)counted : NAN;
    for (int b = 0; b < boundaries; b++) {
        lens_mean *m = &layer[b];
        m->target_prob /= n, m->target_loss /= n, m->target_rank /= n;
        m->accuracy /= n, m->final_agreement /= n;
    }
}

/* The boundaries' means as the JSON's "layers". */
static cJSON *layers_json(const lens_mean *layer, int boundaries) {
    cJSON *a = cJSON_CreateArray();
    for (int b = 0; b < boundaries; b++) {
        const lens_mean *m = &layer[b];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "after", b);
        explain_json_number(x, "target_prob", m->target_prob);
        explain_json_number(x, "target_loss", m->target_loss);
        explain_json_number(x, "target_rank", m->target_rank);
        explain_json_number(x, "accuracy", m->accuracy);
        explain_json_number(x, "final_agreement", m->final_agreement);
        cJSON_AddItemToArray(a, x);
    }
    return a;
}

/* An example's line: example (from 1), line (its file's, or null), its own means. */
static qkv_status lens_example_line(const loaded_model *lm, FILE *f, int e, const int64_t *lines,
                                    lens_mean *layer, int boundaries, dla_mean *parts) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "example", e + 1);
    if (lines) cJSON_AddNumberToObject(o, "line", (double)lines[e]);
    else cJSON_AddNullToObject(o, "line");
    cJSON_AddNumberToObject(o, "target_positions", (double)parts->counted);
    mean_layers(layer, boundaries, parts->counted);
    cJSON_AddItemToObject(o, "layers", layers_json(layer, boundaries));
    explain_dla_mean_finish(parts);
    explain_dla_mean_json(lm, o, parts);
    return explain_json_line(f, o, "--per-example's lines");
}

qkv_status lens_run_set(loaded_model *lm, const example_set *set, const int64_t *lines,
                        FILE *per_example, lens_set_result *r) {
    const qkv_model_config *c = &lm->model.cfg;
    int V = c->vocab, To = lm->target_len, B = c->layers + 1;
    memset(r, 0, sizeof *r);
    *r = (lens_set_result){.boundaries = B, .examples = set->n};
    r->layer = calloc((size_t)B, sizeof *r->layer);
    lens_mean *own = calloc((size_t)B, sizeof *own);
    double *logits = malloc((size_t)(V + c->d_model) * sizeof *logits); /* and scratch */
    explain_input *in = malloc(sizeof *in);
    qkv_status s = r->layer && own && logits && in
                       ? loaded_model_reserve(lm, 1, NULL)
                       : qkv_fail(QKV_ERR_NOMEM, "lens: out of memory");
    for (int e = 0; s == QKV_OK && e < set->n; e++) {
        explain_set_input(lm, set, e, in);
        qkv_ctx_reset(lm->ctx);
        qkv_probe probe = {0};
        qkv_tensor *out = qkv_model_forward_probe(&lm->model, lm->ctx, in->tokens,
                                                  set->len ? &in->len : NULL, 1, &probe);
        dla_mean parts = {0};
        memset(own, 0, (size_t)B * sizeof *own);
        for (int i = 0; s == QKV_OK && i < To; i++) {
            int target = in->targets[i];
            if (target < 0) continue;
            dla_result one;
            s = explain_attribute_probe(lm, out, &probe, i, target, false, &one);
            int final = (int)qkv_argmax(out, (int64_t)i * V, V); /* the final prediction */
            if (s == QKV_OK) s = explain_dla_mean_add(&r->parts, &one);
            if (s == QKV_OK && per_example) s = explain_dla_mean_add(&parts, &one);
            explain_attribute_free(&one);
            for (int b = 0; b < B && s == QKV_OK; b++) {
                model_unembed(&lm->model, probe.stream[b], i, logits, logits + V);
                for (int j = 0; j < V && s == QKV_OK; j++)
                    if (!isfinite(logits[j])) {
                        char label[32];
                        loaded_model_class_label(lm, j, label, sizeof label);
                        s = qkv_fail(QKV_ERR_NUMERIC, "the logit of '%s' after layer %d at "
                                     "position %d is not finite (%s): the model's forward "
                                     "overflows (weights too large for its numbers)", label, b,
                                     i, isnan(logits[j]) ? "NaN" : logits[j] > 0 ? "+Inf" : "-Inf");
                    }
                if (s != QKV_OK) break;
                add_cell(&r->layer[b], logits, V, target, final);
                add_cell(&own[b], logits, V, target, final);
            }
        }
        if (s == QKV_ERR_NUMERIC) qkv_fail(s, "example %d: %s", e + 1, qkv_last_error());
        if (s == QKV_OK && per_example)
            s = lens_example_line(lm, per_example, e, lines, own, B, &parts);
        explain_dla_mean_free(&parts);
    }
    free(own), free(logits), free(in);
    if (s == QKV_OK) {
        mean_layers(r->layer, B, r->parts.counted);
        explain_dla_mean_finish(&r->parts);
    }
    return s;
}

cJSON *lens_set_json(const loaded_model *lm, const char *data, const lens_set_result *r) {
    cJSON *o = explain_json_header(lm, "lens", NULL);
    cJSON_DeleteItemFromObjectCaseSensitive(o, "layers"); /* "layers" is the list, as lens's */
    cJSON_AddStringToObject(o, "data", data);
    cJSON_AddNumberToObject(o, "examples", r->examples);
    cJSON_AddNumberToObject(o, "target_positions", (double)r->parts.counted);
    cJSON_AddItemToObject(o, "layers", layers_json(r->layer, r->boundaries));
    explain_dla_mean_json(lm, o, &r->parts);
    return o;
}

cJSON *lens_json(const loaded_model *lm, const explain_input *in, const lens_result *r) {
    cJSON *o = explain_json_header(lm, "lens", in);
    /* "layers" is the lens's list of boundaries (the model's layers + 1), not the header's
     * count, as ablate's "heads" is its list */
    cJSON_DeleteItemFromObjectCaseSensitive(o, "layers");
    cJSON *layers = cJSON_AddArrayToObject(o, "layers");
    for (int b = 0; b < r->boundaries; b++) {
        cJSON *row = cJSON_CreateObject();
        cJSON_AddNumberToObject(row, "after", b);
        cJSON *positions = cJSON_AddArrayToObject(row, "positions");
        for (int i = 0; i < r->positions; i++) {
            size_t cell = (size_t)b * r->positions + i;
            cJSON *p = cJSON_CreateObject(), *top = cJSON_CreateArray();
            cJSON_AddNumberToObject(p, "position", i);
            for (int k = 0; k < r->top; k++) {
                cJSON *e = cJSON_CreateObject();
                cJSON_AddItemToObject(e, "token",
                                      explain_class_json(lm, r->top_token[cell * r->top + k]));
                cJSON_AddNumberToObject(e, "prob", r->top_prob[cell * r->top + k]);
                cJSON_AddItemToArray(top, e);
            }
            cJSON_AddItemToObject(p, "top", top);
            cJSON_AddNumberToObject(p, "rank_of_final", r->rank_of_final[cell]);
            cJSON_AddItemToArray(positions, p);
        }
        cJSON_AddItemToArray(layers, row);
    }
    cJSON *dec = cJSON_AddArrayToObject(o, "decomposition");
    for (int i = 0; i < r->positions; i++) {
        const dla_result *f = &r->final[i];
        cJSON *p = cJSON_CreateObject(), *parts = cJSON_CreateArray();
        cJSON_AddNumberToObject(p, "position", f->position);
        cJSON_AddItemToObject(p, "token", explain_class_json(lm, f->token));
        cJSON_AddNumberToObject(p, "logit", f->logit);
        /* false: the model was never taught to predict there (the table's "*") */
        cJSON_AddBoolToObject(p, "has_target", explain_position_trained(lm, in, f->position));
        for (int k = 0; k < f->n_parts; k++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "name", f->parts[k].name);
            cJSON_AddNumberToObject(e, "value", f->parts[k].value);
            cJSON_AddItemToArray(parts, e);
        }
        cJSON_AddItemToObject(p, "parts", parts);
        cJSON_AddItemToArray(dec, p);
    }
    return o;
}
