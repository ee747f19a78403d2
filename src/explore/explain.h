/* explain.h - which heads matter and how much each adds: ablation, activation patching,
 * attribution patching and direct logit attribution, each a small driver over one forward
 * (qkv_model_forward_probe) of a saved model. Layers, heads and positions are 0-based here;
 * the CLI and the JSON count layers and heads from 1. */
#ifndef QKV_EXPLAIN_H
#define QKV_EXPLAIN_H

#include "train/loaded_model.h"

#include <cjson/cJSON.h>
#include <stdio.h>

#define EXPLAIN_MAX_TOKENS QKV_MAX_TASK_SEQ_LEN /* the longest input a task or data file has */
#define EXPLAIN_MAX_DRAWS 1000 /* ablate --mode resample's most draws */

typedef struct {
    double loss, accuracy;
    int64_t counted; /* positions with a target */
    double metric;   /* the mean of --metric over them (ablate --metric), else 0 */
} explain_score;

/* What a patch or an ablation measures at a position (docs/explain.md, "Metrics"), from the
 * run's logits l (V) there: logit-diff l[answer] - l[wrong]; loss -log softmax(l)[answer];
 * prob softmax(l)[answer]; kl KL(p ‖ softmax(l)) in nats, p the unedited (clean) run's
 * distribution at the position. */
typedef enum {
    EXPLAIN_METRIC_LOGIT_DIFF,
    EXPLAIN_METRIC_LOSS,
    EXPLAIN_METRIC_PROB,
    EXPLAIN_METRIC_KL,
} explain_metric;
/* "logit-diff", "loss", "prob", "kl", NULL-ended */
extern const char *const explain_metric_names[];
/* The metric of a row of logits (V), in double: answer and wrong as the metric reads them
 * (wrong: logit-diff's alone), ref_logp (V): the reference distribution's log-probabilities
 * (kl's alone; a probability of 0 adds nothing). */
double explain_metric_of(explain_metric metric, const double *logits, int V, int answer,
                         int wrong, const double *ref_logp);
/* d metric / d logits (V) into grad: the weight of each logit in the metric's first-order
 * change (attribution patching). */
void explain_metric_grad(explain_metric metric, const double *logits, int V, int answer,
                         int wrong, const double *ref_logp, double *grad);
/* logp (V) = log softmax(logits), in double. */
void explain_log_softmax(const double *logits, int V, double *logp);

/* One input the user typed: tokens padded to the model's T, their count n (T for a task),
 * and its targets (a task's, from qkv_task_targets; a data file's model: none known). */
typedef struct {
    int32_t tokens[EXPLAIN_MAX_TOKENS];
    int32_t targets[EXPLAIN_MAX_TOKENS];
    int n, len; /* tokens typed; len: the padding mask's length (n) */
} explain_input;

/* Reads `text` (words: a task's ids or labels, a data file's token strings) as the input of
 * option `option`: QKV_ERR_VALUE naming a word the model does not know, or a count the model
 * cannot read (a task's exactly T, a data file's 1..T). */
qkv_status explain_read_input(const loaded_model *lm, const char *option, const char *text,
                              explain_input *in);
/* Reads `text` as the targets of `in` (read first): a class per query position ("_" for
 * none): exactly one per query position, or for a data file's encoder-decoder 1..To.
 * QKV_ERR_VALUE naming `option` and the culprit. */
qkv_status explain_read_targets(const loaded_model *lm, const char *option, const char *text,
                                explain_input *in);
/* The targets y of a task model's input x (qkv_task_targets), or `status` with the line
 * "WHERE: position 1 holds 'w1', a target word: ..." when the task defines no target for a
 * token of x: every command that reads a task's input refuses it here (WHERE: the option,
 * or "FILE line N"). */
qkv_status explain_task_targets(const loaded_model *lm, qkv_status status, const char *where,
                                const int32_t *x, int32_t *y);
/* An input token named by `word` (an id, a label, a data file's token string), or -1. */
int explain_read_token(const loaded_model *lm, const char *word);
/* A class (output token) named by `word` (an id, a label, a data file's token string), or
 * -1 with QKV_ERR_VALUE set naming `option`. */
int explain_read_class(const loaded_model *lm, const char *option, const char *word);
/* The query positions of an input: its own (a data file's: the tokens typed), or an
 * encoder-decoder's decoder positions. */
int explain_query_positions(const loaded_model *lm, const explain_input *in);
/* The label of query position i ("3:a"): the input token, or a decoder position's number. */
void explain_position_label(const loaded_model *lm, const explain_input *in, int i, char *buf,
                            size_t len);
/* Whether query position i had a target in training: a task's, when the task gives this
 * input one there; a data file's, when a training example of the nearest input length had
 * one there (an encoder-decoder's short input leaves its last decoder positions without). */
bool explain_position_trained(const loaded_model *lm, const explain_input *in, int i);
/* The position a metric reads by default: the last that had a target in training
 * (explain_position_trained); -1 if none. */
int explain_default_position(const loaded_model *lm, const explain_input *in);
/* Whether query position i is one of the input's query positions (QKV_ERR_VALUE, naming
 * --position, if past the last). A position without a target is read all the same: a logit
 * is defined at every position; callers name it (explain_position_trained). */
qkv_status explain_check_position(const loaded_model *lm, const explain_input *in, int i);

/* ---- hook points: the part of the forward an analysis edits ---- */
typedef enum {
    EXPLAIN_OVER_HEAD,           /* a head's site at every position */
    EXPLAIN_OVER_HEAD_POSITION,  /* a head's site at each query position */
    EXPLAIN_OVER_KEY_POSITION,   /* a head's k or v at each key position, its pattern's column */
    EXPLAIN_OVER_LAYER_POSITION, /* the stream of each layer at each position (or all of an
                                    MLP's neurons there) */
    EXPLAIN_OVER_NEURON,         /* one MLP neuron (mlp-pre, mlp-post) at every position */
    EXPLAIN_OVER_NEURON_POSITION, /* one MLP neuron at each position */
    EXPLAIN_OVER_LN,              /* one LayerNorm's scale (ln-scale) at every position */
    EXPLAIN_OVER_LN_POSITION,     /* one LayerNorm's scale at each position */
} explain_over;
/* The names the CLI and the JSON use, in enum order, NULL-ended: "z", "q", "k", "v",
 * "pattern", "resid-pre", "resid-post", "resid-mid", "mlp-pre", "mlp-post", "mlp-out",
 * "ln-scale"; "head", "head-position", "key-position", "layer-position", "neuron",
 * "neuron-position", "ln", "ln-position"; and a layer's LayerNorms (qkv_ln): "attn" (before
 * its attention), "mlp" (before its MLP), "final" (the final one, on the last layer). */
extern const char *const explain_site_names[];
extern const char *const explain_over_names[];
extern const char *const explain_ln_names[];

/* One place edited: site of head `head` (-1 for the sites without heads: the stream's, the
 * MLP's, ln-scale) of layer `layer`, at query position `position`, key position
 * `key_position` and MLP neuron `neuron` (-1: every one, or the site has none); for ln-scale,
 * of the layer's LayerNorm `ln`. */
typedef struct {
    qkv_site site;
    int layer, head, position, key_position;
    int neuron; /* read only for mlp-pre and mlp-post */
    qkv_ln ln;  /* read only for ln-scale */
} explain_spot;

/* Whether a site has heads (z, q, k, v, pattern): the stream's, the MLP's and ln-scale have
 * none. */
bool explain_site_has_heads(qkv_site site);
/* The default --over of a site: head, layer-position for the stream's and mlp-out, neuron
 * for mlp-pre and mlp-post, ln for ln-scale. */
explain_over explain_default_over(qkv_site site);
/* QKV_ERR_VALUE naming --site and --over and what the model has, when the model lacks `site`
 * (the stream's sites without the residual stream, the MLP's without an MLP, ln-scale
 * without LayerNorm) or `over` does not apply to it. */
qkv_status explain_check_site(const loaded_model *lm, qkv_site site, explain_over over);
/* Every spot of `site` and `over`, layer by layer, head by head, position by position, for
 * inputs of `positions` query positions and `keys` key positions: (n) malloc'd into *spots;
 * QKV_ERR_NOMEM. */
qkv_status explain_spots(const loaded_model *lm, qkv_site site, explain_over over, int positions,
                         int keys, explain_spot **spots, int *n);
/* "head 1.2's q at position 3", "the stream entering layer 2 at position 3", for messages. */
void explain_spot_text(const explain_spot *s, char *buf, size_t len);

/* ---- ablation: a head's output removed (zero, or its mean over the examples) ---- */
typedef struct {
    int layer, head;
} explain_head;

typedef struct {
    bool mean;                /* QKV_HEAD_MEAN over the examples; else QKV_HEAD_ZERO */
    bool resample;            /* each example's site from another example's run (draws
                                 averaged); mean is then false */
    int draws;                /* resample: the draws (>= 1) */
    uint64_t seed;            /* resample: the seed of the draws */
    qkv_site site;            /* what is removed (z: a head's output) */
    explain_over over;        /* at every position, or one at a time */
    int n_heads;              /* only these heads' spots (every head's when 0) */
    explain_head *heads;      /* (n_heads), the caller's */
    bool together;            /* also every spot at once */
    bool scored;              /* each score's metric too (explain_score.metric) */
    explain_metric metric;    /* which: loss, prob or kl (to the unedited run) */
} ablate_request;

typedef struct {
    explain_score baseline;
    int n;                    /* the spots removed one at a time */
    explain_spot *spots;      /* (n), malloc'd: explain_ablate_free */
    explain_score *each;      /* (n) */
    explain_score together;   /* when asked */
} ablate_result;

/* Scores the examples with each spot of the site removed in turn (and all at once): set to 0,
 * to its mean over the examples, or (resample) to its value in another example's run, drawn
 * rq->draws times (docs/explain.md: example e's partner in each draw is (e + 1 + below(n - 1))
 * mod n, drawn from qkv_rng_seed(seed), draws then examples in order), the scores the means
 * over the draws. QKV_ERR_VALUE for resample of fewer than two examples, or the metric
 * logit-diff (a set of examples gives no wrong token). QKV_ERR_NOMEM when a batch's step does
 * not fit;
 * QKV_ERR_NUMERIC ("ablate: the logit of ... in example 3 with head 1.2's output removed is
 * not finite") when a logit or a loss it scores is not. */
qkv_status explain_ablate(loaded_model *lm, const example_set *set, const ablate_request *rq,
                          ablate_result *r);
void explain_ablate_free(ablate_result *r);
/* Loss and accuracy of the examples under `edits` (n_edits 0: the model as it is);
 * QKV_ERR_NUMERIC when a logit or a loss is not finite. */
qkv_status explain_score_set(loaded_model *lm, const example_set *set, const qkv_head_edit *edits,
                             int n_edits, explain_score *out);

/* QKV_ERR_NUMERIC, naming the example (from first + 1), the position and the token, when a
 * logit that a loss reads (every logit of a row with a target of y (B, To)) in batch logits
 * (B, To, V) is not finite; the run under `edits` ("with head 1.2 removed"). */
qkv_status explain_check_scored_logits(const loaded_model *lm, const qkv_tensor *logits,
                                       const int32_t *y, int first, const qkv_head_edit *edits,
                                       int n_edits);

/* ---- patching: a clean run's part copied into the corrupted run ---- */

/* Pairs of inputs of one length: clean and corrupt tokens (n, T) padded, their lengths (n)
 * (NULL for a task's model), and where each pair's metric reads: its query position, the
 * answer and (logit-diff) the wrong token. Not owned. */
typedef struct {
    int position, answer, wrong;
} patch_metric;

typedef struct {
    int n;
    int positions, keys;           /* query and key positions of every pair's inputs */
    const int32_t *clean, *corrupt;
    const int32_t *clean_len, *corrupt_len;
    const patch_metric *metric;    /* (n) */
} patch_pairs;

typedef struct {
    explain_spot spot;
    double exact, attribution; /* shares of clean - corrupt recovered; NAN if not computed */
} patch_row;

/* One path of --path: sender S's clean output (a head's z, or an MLP's output: sender_head
 * -1) reaching only the receiver (head R's q, k or v input, an MLP's pre-activation:
 * receiver_head -1, or the logits: receiver_layer -1); every other path frozen at its
 * corrupted value. */
typedef struct {
    int sender_layer, sender_head;     /* head -1: the layer's MLP */
    int receiver_layer, receiver_head; /* head -1: the layer's MLP; -1, -1: the logits */
    qkv_site via;                      /* QKV_SITE_Q, _K, _V, _MLP_PRE; QKV_SITE_Z for the logits */
    double exact, attribution;
} patch_path;

typedef struct {
    /* the request */
    qkv_site site;
    explain_over over;
    bool paths;                   /* path patching (the site and over are not read) */
    bool exact, attribution;      /* which methods run */
    explain_metric metric;        /* what is measured (logit-diff unless set) */
    int n_heads;                  /* only these heads' rows (every row when 0; not paths) */
    const explain_head *heads;    /* (n_heads), the caller's */
    bool together;                /* also every row at once (the set's share) */
    /* the result; the metric's numbers are means over the pairs */
    double clean, corrupt;
    int n_rows;
    patch_row *rows;              /* (n_rows) without paths, malloc'd: explain_patch_free */
    int n_paths;
    patch_path *path;             /* (n_paths) with paths, malloc'd */
    double agreement;             /* Pearson correlation of exact and attribution; NAN */
    patch_row all;                /* together: every row at once (its spot not read) */
    /* each pair's own numbers: metric on clean and corrupt, and per row (or path) the
     * metric patched and the attribution's change of it (not divided): (n_pairs * columns),
     * columns = items, and with together one more, last (explain_patch_columns) */
    int n_pairs;
    int left_out;                 /* examples --corrupt-from left out (the caller's count) */
    double *pair_clean, *pair_corrupt, *pair_patched, *pair_attribution;
} patch_result;

/* Runs clean and corrupt, then each spot (or path) patched: exactly, one forward of the
 * pairs each, and by attribution from one backward pass on the corrupted inputs:
 * (clean - corrupt) · d metric / d site for a spot, and for a path, what the sender's change
 * of the stream (ΔS·W_O^S of a head, Δ mlp-out of an MLP) does to the receiver's input
 * (through its LayerNorm at the corrupted run's stream, and its W_Q, W_K, W_V, W_in or the
 * vocabulary head: model_receiver_delta) · d metric / d (R's input). Each share
 * is (mean patched - mean corrupt) / (mean clean - mean corrupt) over the pairs.
 * QKV_ERR_VALUE when clean and corrupt give the same mean metric (nothing to recover);
 * QKV_ERR_NUMERIC when a logit the metric reads or an attribution is not finite, the line
 * naming it, its run and its position; QKV_ERR_NOMEM. */
qkv_status explain_patch(loaded_model *lm, const patch_pairs *pairs, patch_result *r);
/* Each metric's answer where it is -1 (the clean input's prediction at its position) and
 * wrong token where it is -1 (the corrupted input's), from batched runs of inputs (n, T)
 * (lengths NULL for a task's model). Then, with `path`, QKV_ERR_VALUE naming "PATH line N"
 * (line[k]) where a pair's answer and wrong token are equal (the metric would be 0). */
qkv_status explain_fill_predictions(loaded_model *lm, const int32_t *clean, const int32_t *corrupt,
                                    const int32_t *clean_len, const int32_t *corrupt_len, int n,
                                    patch_metric *metric, const char *path,
                                    const int64_t *line);
void explain_patch_free(patch_result *r);
/* The items (rows or paths) of a result. */
int explain_patch_items(const patch_result *r);
/* The columns of its per-pair arrays: the items, and with together one more. */
int explain_patch_columns(const patch_result *r);

/* The spots of `all` (n) of the listed heads, head by head in the list's order, each head's
 * in all's order: (n_out) malloc'd into *out; QKV_ERR_NOMEM. */
qkv_status explain_select_heads(const explain_spot *all, int n, const explain_head *heads,
                                int n_heads, explain_spot **out, int *n_out);

/* ---- direct logit attribution ---- */
typedef struct {
    char name[32];   /* "embed", "L.H" (from 1), "mlp L", "mlp L.N" (neurons from 0),
                        "mlp L bias", "bias" */
    int layer, head; /* 0-based; -1 for embed and bias, head -1 for an MLP's parts */
    int neuron;      /* an MLP neuron's part (--neurons): 0-based; else -1 */
    double value;
} dla_part;

typedef struct {
    int position, token;
    double logit, sum;  /* the model's logit, and the sum of the parts */
    double final_scale; /* the final LayerNorm's 1/sigma at the position, which every part is
                           divided by; 1 without LayerNorm */
    int n_parts;
    dla_part *parts;    /* embed (with the residual stream), every head, every MLP (or its
                           neurons and bias), bias; malloc'd: explain_attribute_free */
} dla_result;

/* The logit of `token` (-1: the predicted one) at query `position`, split exactly into the
 * parts of the stream the vocabulary head reads (model_stream_parts: the embedding part with
 * the residual stream, each head's z · W_O, each MLP's output or with `neurons` each neuron's
 * and the MLP's bias; every layer with the residual stream, else the last layer's heads),
 * each read through the final LayerNorm at the forward's own scale and head.w, and the bias
 * (head.b, and the final LayerNorm's bias through head.w), all in double. The parts add up
 * to the logit. QKV_ERR_NUMERIC when the logit or a part is not finite. */
qkv_status explain_attribute(loaded_model *lm, const explain_input *in, int position, int token,
                             bool neurons, dla_result *r);
/* The same from a forward already run on the input (one sequence): its logits (1, To, V) and
 * the probe that kept its stream and each z. A caller splitting the logit at many positions
 * runs the forward once (qkv lens); the numbers are explain_attribute's, bit for bit. */
qkv_status explain_attribute_probe(const loaded_model *lm, const qkv_tensor *logits,
                                   const qkv_probe *probe, int position, int token, bool neurons,
                                   dla_result *r);
void explain_attribute_free(dla_result *r);

/* ---- over a set of examples: the means over their target positions ---- */
/* Example e of a set as an input: its tokens, length (T for a task's) and targets. */
void explain_set_input(const loaded_model *lm, const example_set *set, int e, explain_input *in);
/* The means of the target's logit and of each of its parts (dla_result's) over positions. */
typedef struct {
    int64_t counted;  /* target positions added */
    double logit;     /* the target's logit: a sum until explain_dla_mean_finish */
    int n_parts;
    dla_part *parts;  /* names, layers, heads, neurons as the first added; values as logit */
} dla_mean;
/* Adds one position's split (the same parts every time); QKV_ERR_NOMEM. */
qkv_status explain_dla_mean_add(dla_mean *m, const dla_result *one);
/* The sums divided by the positions counted (none: left 0). */
void explain_dla_mean_finish(dla_mean *m);
void explain_dla_mean_free(dla_mean *m);
/* Its fields into o: logit, parts ({name, layer, head, neuron where the
 * model has an MLP, value}: as attribute's parts) and sum. */
void explain_dla_mean_json(const loaded_model *lm, cJSON *o, const dla_mean *m);
/* The target's logit split (explain_attribute_probe, `neurons` as there) at every target
 * position of every example of the set, one forward of each example alone, and its means
 * over them all into *r (free with explain_dla_mean_free, also after a failure). With
 * per_example, one JSON line per example (example from 1, line: lines[e] when given, its
 * own means). QKV_ERR_NUMERIC naming the example when a logit or a part is not finite. */
qkv_status explain_attribute_set(loaded_model *lm, const example_set *set, const int64_t *lines,
                                 bool neurons, FILE *per_example, dla_mean *r);
/* attribute --data's object: the header, data, examples and explain_dla_mean_json's. */
cJSON *explain_attribute_set_json(const loaded_model *lm, const char *data, int examples,
                                  const dla_mean *r);

/* ---- the JSON objects (docs/explain.md) ---- */
/* What every object holds first: command, task, dtype, layers, heads_per_layer, heads (the
 * same number, but in ablate, whose "heads" is its list), and for an input tokens and
 * positions. */
/* A token as every JSON output names it: the token itself (a data file's UTF-8 string, whole,
 * or a task's label), never shortened. */
cJSON *explain_token_json(const loaded_model *lm, int32_t token);
/* An output class as every JSON output names it (loaded_model_class_text): lookup's "v2". */
cJSON *explain_class_json(const loaded_model *lm, int32_t c);
cJSON *explain_json_header(const loaded_model *lm, const char *command, const explain_input *in);
cJSON *explain_ablate_json(const loaded_model *lm, const ablate_request *rq, const ablate_result *r,
                           const char *data_path);
/* patch's object; clean and corrupt: the one pair's inputs, or NULL for a set of pairs
 * (pairs_path: its file, or NULL for --corrupt-from) whose metric's first position, answer
 * and wrong token are shown. */
cJSON *explain_patch_json(const loaded_model *lm, const explain_input *clean,
                          const explain_input *corrupt, const patch_metric *metric,
                          const char *pairs_source, const patch_result *r);
/* Pair i's own numbers as one JSON object: pair (from 1), clean, corrupt, and rows or paths
 * with each one's metric patched and its shares of this pair's difference. */
cJSON *explain_patch_pair_json(const patch_result *r, int i);
cJSON *explain_attribute_json(const loaded_model *lm, const explain_input *in,
                              const dla_result *r);
/* Writes `o` to f as one line (--per-example's and --per-pair's files) and deletes it; `what`
 * names those lines in the out-of-memory message. */
qkv_status explain_json_line(FILE *f, cJSON *o, const char *what);
/* Writes `json` (compact, one line) to path atomically. */
qkv_status explain_write_json(const cJSON *json, const char *path);

#endif
