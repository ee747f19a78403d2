/* explain.h - which heads matter and how much each adds: ablation, activation patching,
 * attribution patching and direct logit attribution, each a small driver over one forward
 * (qkv_model_forward_probe) of a saved model. Layers, heads and positions are 0-based here;
 * the CLI and the JSON count layers and heads from 1. */
#ifndef QKV_EXPLAIN_H
#define QKV_EXPLAIN_H

#include "train/trainer.h"

#include <cjson/cJSON.h>

#define EXPLAIN_MAX_TOKENS QKV_MAX_TASK_SEQ_LEN /* the longest input a task or data file has */

/* Examples to score: tokens (n, T) padded for a data file's model, targets (n, To) with -1
 * where a position has none, input lengths (n) or NULL. Not owned. */
typedef struct {
    int n;
    const int32_t *x, *y, *len;
} explain_set;

/* The held-out set of the trainer's task (its n_held examples). */
explain_set explain_heldout(const trainer *t);

typedef struct {
    double loss, accuracy;
    int64_t counted; /* positions with a target */
} explain_score;

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
qkv_status explain_read_input(const trainer *t, const char *option, const char *text,
                              explain_input *in);
/* The targets y of a task model's input x (qkv_task_targets), or `status` with the line
 * "WHERE: position 1 holds 'w1', a target word: ..." when the task defines no target for a
 * token of x: every command that reads a task's input refuses it here (WHERE: the option,
 * or "FILE line N"). */
qkv_status explain_task_targets(const trainer *t, qkv_status status, const char *where,
                                const int32_t *x, int32_t *y);
/* An input token named by `word` (an id, a label, a data file's token string), or -1. */
int explain_read_token(const trainer *t, const char *word);
/* A class (output token) named by `word` (an id, a label, a data file's token string), or
 * -1 with QKV_ERR_VALUE set naming `option`. */
int explain_read_class(const trainer *t, const char *option, const char *word);
/* The label of query position i ("3:a"): the input token, or a decoder position's number. */
void explain_position_label(const trainer *t, const explain_input *in, int i, char *buf,
                            size_t len);
/* Whether query position i had a target in training: a task's, when the task gives this
 * input one there; a data file's, when a training example of the nearest input length had
 * one there (an encoder-decoder's short input leaves its last decoder positions without). */
bool explain_position_trained(const trainer *t, const explain_input *in, int i);
/* The position a metric reads by default: the last that had a target in training
 * (explain_position_trained); -1 if none. */
int explain_default_position(const trainer *t, const explain_input *in);
/* Whether query position i carries a target (QKV_ERR_VALUE, naming --position, if not). */
qkv_status explain_check_position(const trainer *t, const explain_input *in, int i);

/* ---- ablation: a head's output removed (zero, or its mean over the examples) ---- */
typedef struct {
    int layer, head;
} explain_head;

typedef struct {
    bool mean;                /* QKV_HEAD_MEAN over the examples; else QKV_HEAD_ZERO */
    int n_heads;              /* the heads to remove one at a time (every head when 0) */
    explain_head *heads;      /* (n_heads), the caller's */
    bool together;            /* also every listed head at once */
} ablate_request;

typedef struct {
    explain_score baseline;
    int n_heads;              /* every head of the model when the request lists none */
    explain_head *heads;      /* (n_heads), malloc'd: explain_ablate_free */
    explain_score *each;      /* (n_heads) */
    explain_score together;   /* when asked */
} ablate_result;

/* Scores the examples with each head removed in turn (and all at once). QKV_ERR_NOMEM when
 * a batch's step does not fit; QKV_ERR_NUMERIC ("ablate: the logit of ... in example 3 with
 * head 1.2 removed is not finite") when a logit or a loss it scores is not. */
qkv_status explain_ablate(trainer *t, const explain_set *set, const ablate_request *rq,
                          ablate_result *r);
void explain_ablate_free(ablate_result *r);
/* Loss and accuracy of the examples under `edits` (n_edits 0: the model as it is);
 * QKV_ERR_NUMERIC when a logit or a loss is not finite. */
qkv_status explain_score_set(trainer *t, const explain_set *set, const qkv_head_edit *edits,
                             int n_edits, explain_score *out);

/* QKV_ERR_NUMERIC, naming the example (from first + 1), the position and the token, when a
 * logit that a loss reads (every logit of a row with a target of y (B, To)) in batch logits
 * (B, To, V) is not finite; the run under `edits` ("with head 1.2 removed"). */
qkv_status explain_check_scored_logits(const trainer *t, const qkv_tensor *logits,
                                       const int32_t *y, int first, const qkv_head_edit *edits,
                                       int n_edits);

/* ---- patching: the clean run's head output copied into the corrupted run ---- */
typedef struct {
    int layer, head, position;    /* position -1: every position of the head */
    double exact, attribution;    /* shares of clean - corrupt recovered; NAN if not computed */
} patch_row;

typedef struct {
    int position, answer, wrong;  /* the metric: logit[answer] - logit[wrong] at position */
    bool over_positions;          /* a row per head and position */
    bool exact, attribution;      /* which methods ran */
    double clean, corrupt;        /* the metric on each input */
    int n_rows;
    patch_row *rows;              /* (layers * heads [* To]), malloc'd: explain_patch_free */
    double agreement;             /* Pearson correlation of exact and attribution; NAN */
} patch_result;

/* Runs clean and corrupt, then each head (and position) patched: exactly, one forward each,
 * and by attribution, (z_clean - z_corrupt) · d metric / d z from one backward pass on the
 * corrupted input, each divided by clean - corrupt. QKV_ERR_VALUE when clean and corrupt
 * give the same metric (nothing to recover); QKV_ERR_NUMERIC when a logit the metric reads (in
 * the clean, the corrupted or a patched run) or an attribution is not finite, the line naming
 * it, its run and its position. */
qkv_status explain_patch(trainer *t, const explain_input *clean, const explain_input *corrupt,
                         patch_result *r);
void explain_patch_free(patch_result *r);

/* ---- direct logit attribution ---- */
typedef struct {
    char name[32];   /* "embed", "L.H" (from 1), "bias" */
    int layer, head; /* 0-based; -1 for embed and bias */
    double value;
} dla_part;

typedef struct {
    int position, token;
    double logit, sum; /* the model's logit, and the sum of the parts */
    int n_parts;
    dla_part *parts;   /* embed (with the residual stream), every head, bias; malloc'd:
                          explain_attribute_free */
} dla_result;

/* The logit of `token` (-1: the predicted one) at query `position`, split exactly into the
 * stream's embedding part (with the residual stream), each head's z · W_O · head.w part (every
 * layer with the residual stream, else the last layer's), and head.b, all in double.
 * QKV_ERR_NUMERIC when the logit or a part is not finite. */
qkv_status explain_attribute(trainer *t, const explain_input *in, int position, int token,
                             dla_result *r);
void explain_attribute_free(dla_result *r);

/* ---- the JSON objects (docs/explain.md) ---- */
/* What every object holds first: command, task, dtype, layers, heads_per_layer, heads (the
 * same number, but in ablate, whose "heads" is its list), and for an input tokens and
 * positions. */
/* A token as every JSON output names it: the token itself (a data file's UTF-8 string, whole,
 * or a task's label), never shortened. */
cJSON *explain_token_json(const trainer *t, int32_t token);
cJSON *explain_json_header(const trainer *t, const char *command, const explain_input *in);
cJSON *explain_ablate_json(const trainer *t, const ablate_request *rq, const ablate_result *r,
                           const char *data_path);
cJSON *explain_patch_json(const trainer *t, const explain_input *clean,
                          const explain_input *corrupt, const patch_result *r);
cJSON *explain_attribute_json(const trainer *t, const explain_input *in, const dla_result *r);
/* Writes `json` (compact, one line) to path atomically. */
qkv_status explain_write_json(const cJSON *json, const char *path);

#endif
