/* dataset.h - a user's task read from a file of examples (docs/model.md, "Data files"). */
#ifndef QKV_DATASET_H
#define QKV_DATASET_H

#include "io/paths.h"
#include "qkv.h"

#include <stddef.h>
#include <stdint.h>

#define DATA_PAD 0 /* the padding token's id; real tokens are 1 .. vocab-1 */

typedef struct {
    /* heldout_path "": held out by a hash of the line */
    char path[FILE_PATH_LEN], heldout_path[FILE_PATH_LEN];
    uint64_t checksum;  /* of the file (and the held-out file): a model refuses another */
    int vocab;          /* token ids 0 .. vocab-1, id 0 the padding */
    char **token;       /* token[id]: its string, in order of first appearance */
    int in_len, out_len; /* T, To: the longest input and output */
    bool cross;         /* outputs of another length than inputs: an encoder-decoder */
    int n_train, n_held;
    /* (n, T) inputs padded with DATA_PAD, (n, To) targets padded with -1, (n) input lengths */
    int32_t *train_x, *train_y, *train_len, *held_x, *held_y, *held_len;
    int n_outputs;      /* distinct output tokens of the training examples */
    /* parsing state */
    int32_t *slot;      /* open-addressing hash of token ids, -1 empty */
    size_t slots;
    int64_t rule_line;  /* the line that set the length rule, and its file */
    char rule_path[FILE_PATH_LEN];
} dataset;

/* Reads FILE (and the held-out examples from heldout_path, or by hash when NULL). One line
 * of error naming the file and line: a missing tab, an empty side, an unknown token in the
 * held-out file, mixed length rules, or a file too large for memory. */
qkv_status dataset_load(dataset *d, const char *path, const char *heldout_path);
void dataset_free(dataset *d);
/* One line of a file of examples (line[0..len), without its newline), read by the rules of
 * training, the one place they live: an input side, a tab and an output side, tokens of
 * valid UTF-8 split at spaces (and \v, \f), `_` on the output side for no target, neither
 * side empty, at most most[0] input and most[1] output tokens, and d's length rule (outputs
 * as long as inputs, or an encoder-decoder's never). Each token's id into in[] and out[]
 * (-1 for `_`): with `fixed`, a token d's vocabulary lacks is an error (a --heldout file, a
 * trained model's examples); else it is added to d. counts[0], counts[1]: the two sides'
 * lengths, both 0 for a line of spaces only (skipped). QKV_ERR_FORMAT naming `path`, line_no
 * and the culprit; QKV_ERR_NOMEM. */
qkv_status dataset_read_line(dataset *d, bool fixed, const char *path, int64_t line_no,
                             const char *line, size_t len, const int most[2], int32_t *in,
                             int32_t *out, int counts[2]);
/* The checksum dataset_load gives the files `path` and `heldout_path` (NULL: none). A file
 * that cannot be read adds nothing to it. */
uint64_t dataset_checksum(const char *path, const char *heldout_path);
/* A token's printable label (at most 24 bytes, non-printable bytes as '?'): for tables and
 * gnuplot's data files, which may shorten it. JSON takes dataset_token_text instead. */
void dataset_label(const dataset *d, int32_t id, char *buf, size_t len);
/* The token itself, as the data file spells it (UTF-8, whole), or NULL if id is no token. */
const char *dataset_token_text(const dataset *d, int32_t id);
/* The id of token string `tok` (1 .. vocab-1), or -1 when the vocabulary has no such token
 * (the padding, id 0, is never found: it is no string of the file). */
int32_t dataset_token_id(const dataset *d, const char *tok);

#endif
