/* pairs.h - sets of clean/corrupted input pairs for qkv patch: a file of pairs (--pairs), or
 * a built-in task's held-out examples each with a corrupted copy (--corrupt-from). */
#ifndef QKV_PAIRS_H
#define QKV_PAIRS_H

#include "explore/explain.h"
#include "io/paths.h"

typedef enum { CORRUPT_SHUFFLE, CORRUPT_RESAMPLE, CORRUPT_OTHER } corrupt_kind;

typedef struct {
    int n, skipped;                   /* pairs; --corrupt-from: examples left out (below) */
    bool other;                       /* --corrupt-from other's (left out: no partner) */
    int positions, keys;              /* every pair's query and key positions */
    int32_t *clean, *corrupt;         /* (n, T) padded */
    int32_t *clean_len, *corrupt_len; /* (n) */
    patch_metric *metric;             /* (n) */
    int64_t *line;                    /* (n): a file's line of each pair (--corrupt-from:
                                         its held-out example, from 1) */
    int64_t *partner;                 /* (n): other's corrupted example (from 1), or NULL */
} pair_set;

/* Reads a file of pairs: lines of clean tokens, a tab, corrupted tokens, and optionally a tab
 * and the answer, and a tab and the wrong token (the defaults: the clean and the corrupted
 * inputs' predictions at the position); blank lines are skipped. The metric's position is
 * `position`, or (-1) each clean input's last with a target. QKV_ERR_VALUE naming the line
 * and the culprit (a token the model does not know, a pair's inputs of different lengths, a
 * pair of another length than the first, a position without a target, answer = wrong where
 * `metric` is the logit difference, no pairs); QKV_ERR_IO; QKV_ERR_NOMEM. Free with
 * pair_set_free, also after a failure. */
qkv_status pair_set_read(pair_set *p, loaded_model *lm, const char *path, int position,
                         explain_metric metric);
/* A built-in task's held-out examples as clean inputs, each with a corrupted copy:
 * resample (induction) draws new distinct tokens for the segment's first occurrence, so the
 * repeat has nothing to match; shuffle (lookup) deals the pairs' values out to the keys
 * again, so the query's key holds another value. The answer is the clean input's target at
 * the position (the last with a target, or `position`), the wrong token the corrupted
 * input's prediction there; an example where they are equal is left out (p->skipped).
 * QKV_ERR_VALUE for another task or a data file's model, or when no example is left.
 * other (any model, a data file's too): each held-out example's corrupted input is another
 * held-out example of its input length whose target at the position (the clean example's
 * last with a target, or `position`) is another token, drawn uniformly among those (one
 * below() of qkv_rng_seed(seed) per example that has one, in order); the answer is the clean
 * example's target there, the wrong token the other's. An example without such a partner is
 * left out; QKV_ERR_VALUE when every one is. The pairs may be of several lengths (each pair
 * of one): positions and keys are the longest's. */
qkv_status pair_set_corrupt_from(pair_set *p, loaded_model *lm, corrupt_kind kind, int position,
                                 uint64_t seed);
/* The pairs as explain_patch reads them (lengths only for a data file's model). */
patch_pairs pair_set_view(const pair_set *p, const loaded_model *lm);
void pair_set_free(pair_set *p);

#endif
