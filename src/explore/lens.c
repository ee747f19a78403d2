/* lens.c - the logit lens and the stream's decomposition (lens.h): one forward
 * (qkv_model_forward_probe) keeps the stream at every layer boundary, each read through the
 * vocabulary head; explain_attribute_probe splits the final prediction's logit at each position
 * into its parts, from the same forward. */
#include "explore/lens.h"
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
