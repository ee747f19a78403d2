/* eval_data.h - a saved model on a new file of examples (qkv eval --data): loss, accuracy
 * against chance, accuracy by position and by example length, every head's attention entropy
 * and head scores, and each example's predictions. */
#ifndef QKV_EVAL_DATA_H
#define QKV_EVAL_DATA_H

#include "explore/explain.h"
#include "io/paths.h"

#include <stdio.h>

/* A file of examples in the model's own format: for a data file's model, lines of input
 * tokens, a tab and output tokens ("_" no target), as its training file; for a built-in
 * task's, lines of exactly T input tokens (ids or labels), the targets the task's own. */
typedef struct {
    char path[FILE_PATH_LEN];
    int n;
    int32_t *x, *y, *len; /* (n, T) padded, (n, To) with -1, (n) */
    int64_t *line;        /* (n): each example's line in the file */
} eval_file;

/* Reads `path` for the loaded model. QKV_ERR_FORMAT names the line and the culprit: a token
 * the model does not know, an input longer than the model reads, a task's line of another
 * length, a missing or extra tab, outputs of the wrong length; QKV_ERR_IO, QKV_ERR_NOMEM.
 * Free with eval_file_free, also after a failure. */
qkv_status eval_file_read(eval_file *f, const loaded_model *lm, const char *path);
void eval_file_free(eval_file *f);

typedef struct {
    int64_t hits, counted;
} eval_count;

typedef struct {
    explain_score score;                 /* loss, accuracy, positions counted */
    double chance;
    eval_result heads;                   /* the head scores over the file (loaded_model_evaluate) */
    double *entropy;                     /* (layers, heads): every head's mean attention
                                            entropy per query row, nats */
    eval_count *by_position;             /* (To) */
    eval_count *by_length;               /* (T + 1): by the example's input length */
} eval_data_result;

/* Evaluates the file; with `per_example` not NULL, writes one JSON line per example to it
 * (input, targets, predictions, each prediction's probability, right or wrong). */
qkv_status eval_data_run(loaded_model *lm, const eval_file *f, FILE *per_example,
                         eval_data_result *r);
void eval_data_result_free(eval_data_result *r);
/* The JSON object of docs/explain.md: the numbers over the file, every head's, and the hint
 * plain eval would give for them (train_hint; null when none is due). */
cJSON *eval_data_json(const loaded_model *lm, const eval_file *f, const eval_data_result *r);

#endif
