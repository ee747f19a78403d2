/* inspect.h - one input through a saved model, every part of every head kept: what `qkv
 * inspect` prints and writes: a driver over the one intervention point
 * (qkv_model_forward_probe, which builds the attention from its parts: matmul, scale, mask,
 * softmax, matmul, and keeps them), and with a target the loss's gradients flow back through
 * them. */
#ifndef QKV_INSPECT_H
#define QKV_INSPECT_H

#include "train/loaded_model.h"

#include <cjson/cJSON.h>

#define INSPECT_MAX_TOKENS QKV_MAX_TASK_SEQ_LEN /* the longest sequence a task or a data file allows */

/* Which rows and columns a part of a head has: rows of queries or of keys by d_k columns, or
 * queries by keys. Queries are the input positions in self-attention and the decoder's
 * positions in an encoder-decoder; keys are always the input positions. */
typedef enum { QUERY_ROWS, KEY_ROWS, QUERIES_BY_KEYS } part_shape;

/* A part of one head that inspect shows: name, what it is, its shape. */
typedef struct {
    const char *name, *what, *cross_what; /* cross_what: in an encoder-decoder, or NULL */
    part_shape shape;
} part;
/* Q, K, V, S, S/√d_k, A and A·V; and the gradients dA, dS, dQ, dK and dV. */
#define INSPECT_NPARTS 7
#define INSPECT_NGRADS 5
extern const part inspect_parts[INSPECT_NPARTS];
extern const part inspect_grad_parts[INSPECT_NGRADS];

typedef struct {
    loaded_model lm;
    int T;          /* the keys shown: the input's tokens (a data file's: as many as typed) */
    int Tq;         /* the queries shown: T, or an encoder-decoder's decoder positions */
    int model_T;    /* the model's --seq-len: the input is padded to it */
    int H, L, Dk, V;
    bool cross;     /* an encoder-decoder: every layer is cross-attention */
    int32_t tokens[INSPECT_MAX_TOKENS];  /* (model_T): ids, the padding after the first T */
    int32_t targets[INSPECT_MAX_TOKENS]; /* (model Tq): classes, -1 for none */
    char (*klabels)[40];   /* (T): "position:token", e.g. "3:14" */
    char (*qlabels)[40];   /* (Tq): the same as klabels, or "position:target" of the decoder */
    uint8_t *masked;       /* (Tq, T): 1 where the mask drops the key */
    qkv_ctx *ctx;
    qkv_tensor *logits;    /* (1, model Tq, V) */
    qkv_tensor *loss;      /* a scalar, or NULL without a target */
    qkv_probe probe;       /* every part of every layer (no edits) */
} inspection;

/* Loads the model at `model_path` (for a data file's model, the file too, for its
 * vocabulary), reads `input`, and `target` when not NULL, as words (ids or labels of the
 * task's tokens, a data file's token strings; "_" for no target), and runs them: the forward
 * pass, and with a target the loss and its backward pass. QKV_ERR_VALUE names a bad word or
 * count as `--input` or `--target`; QKV_ERR_NOMEM when the step needs more than half the
 * memory qkv may use. `in` is zeroed first; free it with inspection_free, also after a
 * failure. */
qkv_status inspection_run(inspection *in, const char *model_path, const char *input,
                          const char *target);
void inspection_free(inspection *in);

/* The object of `qkv inspect --json` (docs/plots.md): the model's sizes, the tokens, labels,
 * predictions (and targets, loss), and every part of every head (null where masked). */
cJSON *inspection_json(const inspection *in);
/* The file of `qkv inspect --out`: every part of every layer, (H, rows, cols) each, with
 * the tokens, logits, mask (and targets, loss, gradients), and the labels in its metadata
 * (docs/plots.md). */
qkv_status inspection_save(const inspection *in, const char *path);

/* The tensor of part i (of inspect_parts or, with grad, inspect_grad_parts) of layer l, and
 * its element (h, i, j) (of its gradient, with grad) in the model's dtype. */
const qkv_tensor *inspect_part_tensor(const inspection *in, int l, bool grad, int i);
double inspect_part_at(const qkv_tensor *x, bool grad, int h, int i, int j);
/* A part's rows, its columns and its rows' labels. */
int inspect_part_rows(const inspection *in, const part *p);
int inspect_part_cols(const inspection *in, const part *p);
char (*inspect_part_row_labels(const inspection *in, const part *p))[40];
/* Whether the mask dropped key j for query i. */
bool inspect_masked_at(const inspection *in, int i, int j);
/* Softmax of output position i's logits: the predicted class, its probability into *prob. */
int inspect_predict(const inspection *in, int i, double *prob);
/* How token t reads (a task's label, a data file's string), and how class c reads (lookup's
 * classes are values, v1; the other tasks' are tokens). */
void inspect_token_label(const inspection *in, int32_t t, char *buf, size_t len);
void inspect_class_label(const inspection *in, int c, char *buf, size_t len);
/* Class c whole, for JSON ("_" for none): a data file's token string, never shortened. */
const char *inspect_class_text(const inspection *in, int c, char *buf, size_t len);
/* The class that names decoder position i: its target when targets were given (-1: none),
 * else the prediction. */
int inspect_query_class(const inspection *in, int i);

#endif
