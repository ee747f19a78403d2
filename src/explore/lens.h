/* lens.h - the logit lens and the stream's decomposition (qkv lens): the stream at each layer
 * boundary read through the vocabulary head, and the final prediction's logit split into the
 * embeddings, each head and the bias (explain_attribute), at every query position.
 * Layers and positions are 0-based here; docs/explain.md defines the numbers. */
#ifndef QKV_LENS_H
#define QKV_LENS_H

#include "explore/explain.h"

#define LENS_MAX_TOP 100   /* the most tokens a cell lists (--top) */
#define LENS_DEFAULT_TOP 5 /* or the vocabulary, if smaller */

typedef struct {
    int boundaries;          /* layers + 1: after 0 (the stream entering layer 1), .., after L */
    int positions;           /* the query positions (explain_query_positions) */
    int top;                 /* tokens listed per cell, most probable first */
    int32_t *top_token;      /* (boundaries, positions, top) */
    double *top_prob;        /* (boundaries, positions, top): softmax over the vocabulary */
    int32_t *rank_of_final;  /* (boundaries, positions): 1 + the tokens ranked above the final
                                prediction (a higher logit, or an equal one of a lower id) */
    dla_result *final;       /* (positions): the final prediction (the model's argmax) and its
                                logit split into parts, as qkv attribute splits it */
} lens_result;

/* The lens at every boundary and query position of `in`, keeping `top` tokens a cell
 * (1..min(LENS_MAX_TOP, vocab): QKV_ERR_VALUE naming --top otherwise), and the decomposition
 * of the final prediction at every position. QKV_ERR_NUMERIC when a lens logit, the model's
 * logit or a part is not finite; QKV_ERR_NOMEM. r is freed by lens_free (also after an error). */
qkv_status lens_run(loaded_model *lm, const explain_input *in, int top, lens_result *r);
void lens_free(lens_result *r);

/* The JSON object of docs/explain.md: the header (explain_json_header), whose count "layers"
 * gives way to the list "layers" (one entry per boundary), and "decomposition". */
cJSON *lens_json(const loaded_model *lm, const explain_input *in, const lens_result *r);

/* ---- over a set of examples (lens --data): means over every target position ---- */
typedef struct {
    double target_prob;     /* the target's probability through the lens */
    double target_loss;     /* -log of it */
    double target_rank;     /* 1 + the tokens ranked above the target (as rank_of_final) */
    double accuracy;        /* whether the lens's top token is the target */
    double final_agreement; /* whether it is the final prediction (the model's argmax) */
} lens_mean;

typedef struct {
    int boundaries, examples;
    lens_mean *layer;       /* (boundaries): sums, then the means over the target positions */
    dla_mean parts;         /* the target's logit split (without --neurons), its means */
} lens_set_result;

/* At every target position of every example (one forward of each alone): the lens at each
 * boundary against the target, and the target's logit split as qkv attribute --data splits
 * it; the means over them all. With per_example, one JSON line per example (example from 1,
 * line: lines[e] when given, its own means). QKV_ERR_NUMERIC naming the example when a logit
 * is not finite; QKV_ERR_NOMEM. r is freed by lens_set_free (also after an error). */
qkv_status lens_run_set(loaded_model *lm, const example_set *set, const int64_t *lines,
                        FILE *per_example, lens_set_result *r);
void lens_set_free(lens_set_result *r);
/* lens --data's object: the header, data, examples, target_positions, "layers" (one entry
 * per boundary: after and the means) and the parts (explain_dla_mean_json). */
cJSON *lens_set_json(const loaded_model *lm, const char *data, const lens_set_result *r);

#endif
