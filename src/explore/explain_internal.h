/* explain_internal.h - what the analyses' own files (explain.c, ablate.c, patch.c,
 * attribute.c, lens.c) share, defined in explain.c; not for the layers above explore/. */
#ifndef QKV_EXPLAIN_INTERNAL_H
#define QKV_EXPLAIN_INTERNAL_H

#include "explore/explain.h"

/* QKV_OK when v is finite; else QKV_ERR_NUMERIC with the line "<what> is not finite (NaN):
 * ...", `what` (printf-style) naming the number and the run it comes from. Every analysis's
 * metric (patch's logit difference and attributions, attribute's logit and parts, ablate's
 * losses) is checked here before it is used or reported. */
qkv_status explain_check_finite(double v, const char *what, ...)
    __attribute__((format(printf, 2, 3)));
/* The logit of `token` at query position i of batch row b of logits (B, To, V), checked by
 * explain_check_finite, `run` saying which run it is of ("the clean run"). */
qkv_status explain_check_logit(const loaded_model *lm, const qkv_tensor *logits, int b, int i,
                               int token, const char *run);

/* What scoring a set of examples adds up, batch by batch: the loss times the positions it
 * counts, the argmax hits, the positions with a target, and a metric's sum over them. */
typedef struct {
    double loss_sum, metric_sum;
    int64_t hits, counted;
} explain_sums;
/* Adds one batch's run to sum: logits (B, To, V) in lm->ctx against targets y (B, To),
 * examples first + 1 .. first + B, run under `edits` (for messages). Every logit of a row
 * with a target is checked (explain_check_scored_logits), the loss is the model's
 * cross-entropy over the batch's targets (qkv_cross_entropy, checked finite). */
qkv_status explain_score_batch(loaded_model *lm, qkv_tensor *logits, const int32_t *y,
                               int first, const qkv_head_edit *edits, int n_edits,
                               explain_sums *sum);
/* The means of sum: loss, accuracy, positions counted, metric. */
explain_score explain_score_of(const explain_sums *sum);

/* The sites of a layer's stream, (B, To, C), and the MLP's neurons, (B, To, N): no heads. */
bool explain_stream_site(qkv_site site);
bool explain_neuron_site(qkv_site site);
/* The tensors a site has at each layer: QKV_LNS for ln-scale (one a LayerNorm, index ln;
 * some NULL), else 1 (index 0). */
int explain_site_units(qkv_site site);
/* The tensor of `site` at layer l, unit u (explain_site_units) that a probe kept: NULL where
 * the model has none (a layer's MLP LayerNorm without an MLP, the final one but on the last
 * layer). */
qkv_tensor *explain_probe_tensor(const qkv_probe *probe, qkv_site site, int l, int u);
/* Spot s's unit: its LayerNorm for ln-scale, else 0. */
int explain_spot_unit(const explain_spot *s);
/* The probe's edit of spot s: rows are key positions for k and v, query positions
 * elsewhere; columns are the pattern's key positions and the MLP's neurons. */
qkv_head_edit explain_spot_edit(const explain_spot *s, qkv_head_edit_kind kind,
                                const qkv_tensor *value);
/* Bytes of every tensor of `site` (each layer's, each unit's) for B sequences, with their
 * headers. */
double explain_site_bytes(const loaded_model *lm, qkv_site site, int B);

/* JSON: v, or null where it is not finite; a score's loss and accuracy; "L.H" counted from 1;
 * a spot's site, layer, head, position, key_position (and neuron, for the MLP's neurons). */
void explain_json_number(cJSON *o, const char *key, double v);
void explain_json_score(cJSON *o, const explain_score *s);
void explain_head_name(int layer, int head, char *buf, size_t len);
void explain_json_spot(cJSON *x, const explain_spot *s);
/* An input's tokens as JSON names them (explain_token_json), an array. */
cJSON *explain_json_token_labels(const loaded_model *lm, const explain_input *in);

#endif
