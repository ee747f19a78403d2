/* grokking.h - a modular run's phases (memorization, circuit formation, cleanup), named from
 * the history of its progress measures by the rule of docs/grokking.md ("The phases"):
 * summary.json's "grokking". */
#ifndef QKV_TRAIN_GROKKING_H
#define QKV_TRAIN_GROKKING_H

#include "io/metrics.h"

#include <stdbool.h>
#include <stdint.h>

struct cJSON;

/* One evaluation of a modular run: the measures the rule reads (NaN where unknown). */
typedef struct {
    int64_t step;
    double train_loss, train_acc; /* over every training pair */
    double test_loss, test_acc;   /* over every held-out pair */
    double restricted_acc;        /* the restricted logits' accuracy on the held-out pairs */
} grok_point;

#define GROK_ACCURACY 0.99 /* memorized, circuit formed, generalized: an accuracy this high */
#define GROK_CLEAN_RATIO 10 /* cleaned up: the test loss within this factor of the train loss */

typedef struct {
    /* the step where each ends; -1: not in the history */
    int64_t memorized;      /* the first evaluation of train accuracy >= GROK_ACCURACY */
    int64_t formed;         /* from memorized on, the first of restricted accuracy >= it */
    int64_t generalized_at; /* the first of the last evaluations of test accuracy >= it */
    int64_t cleaned;        /* from formed and generalized_at on, the first whose test loss is
                               at most GROK_CLEAN_RATIO times its train loss */
    bool generalized;       /* the last evaluation's test accuracy is >= GROK_ACCURACY */
} grok_phases;

/* The phases of the history h[0 .. n-1] (ascending steps): a pure function of it. */
grok_phases grok_phases_of(const grok_point *h, int n);
/* summary.json's "grokking" object from a modular run's metrics rows (the progress measures'
 * columns: metrics_add_fourier_columns) and the last evaluation's key frequencies (n_keys -1:
 * unknown, written null). NULL when out of memory or the table has no such columns. */
struct cJSON *grokking_json(const metrics_table *m, const int *keys, int n_keys);

#endif
