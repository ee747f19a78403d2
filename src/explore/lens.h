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

#endif
