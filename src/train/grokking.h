/* grokking.h - a modular run's phases (memorization, circuit formation, cleanup), named from
 * the history of its progress measures by the rule of docs/grokking.md: summary.json's
 * "grokking". */
#ifndef QKV_TRAIN_GROKKING_H
#define QKV_TRAIN_GROKKING_H

#include "io/metrics.h"

#include <stdbool.h>
#include <stdint.h>

struct cJSON;

/* One evaluation of a modular run: the measures the rule reads (NaN where unknown). */
typedef struct {
    int64_t step;
    double train_acc;                       /* over every training pair */
    double test_acc, test_loss;             /* over every held-out pair */
    double restricted_loss, excluded_loss;
} grok_point;

typedef struct {
    bool generalized;        /* the test accuracy reached GROK_ACCURACY */
    int64_t memorized;       /* the step where memorization ends; -1: never */
    int64_t generalized_at;  /* the first step of test accuracy >= GROK_ACCURACY; -1: never */
    int64_t formed;          /* where circuit formation ends (cleanup begins); -1: unknown */
    int64_t cleaned;         /* where cleanup ends; -1: unknown */
} grok_phases;

#define GROK_ACCURACY 0.99 /* memorized: train accuracy; generalized: test accuracy */

/* The phases of the history h[0 .. n-1] (ascending steps): a pure function of it. */
grok_phases grok_phases_of(const grok_point *h, int n);
/* summary.json's "grokking" object from a modular run's metrics rows (the progress measures'
 * columns: metrics_add_fourier_columns) and the last evaluation's key frequencies (n_keys -1:
 * unknown, null). NULL when out of memory. */
struct cJSON *grokking_json(const metrics_table *m, const int *keys, int n_keys);

#endif
