/* metrics.h - metrics.csv: one row per held-out evaluation of a run, kept in memory and
 * written whole at each checkpoint (and read back on --resume). */
#ifndef QKV_IO_METRICS_H
#define QKV_IO_METRICS_H

#include "qkv.h"

#include <stddef.h>
#include <stdint.h>

/* One row of metrics.csv: an evaluation. */
typedef struct {
    int64_t step;
    double loss, train_acc, heldout_acc, lr, heldout_loss; /* heldout_loss: NaN if unknown */
    double *scores; /* the attention columns (below), owned; NaN where unknown, NULL if none */
} metrics_row;

/* Composition scores are tracked for models of at most this many heads per layer: 3 (L-1) H²
 * columns, 1344 at 8 layers of 8 heads (qkv circuits gives them for any model). */
#define METRICS_MAX_COMPOSED_HEADS 8

/* The rows of a run. After the first six columns come the attention columns, in order:
 * mass_l<L> for each layer, then prev_l<L>h<H>, dup_l<L>h<H>, ind_l<L>h<H> for each layer
 * and each scored head: layers + 3 * layers * heads of them. Then the head columns, from
 * index `first_head_column`: entropy_l<L>h<H> (the attention entropy, nats) and copy_l<L>h<H>
 * (the OV circuit's copying score) for each layer and scored head; and, with two layers or
 * more and at most METRICS_MAX_COMPOSED_HEADS heads, comp<K>_l<L>h<A>_l<L+1>h<B> for each
 * kind K (q, k, v), each layer L but the last, each head A of layer L and B of layer L+1: the
 * composition score of qkv circuits. Last, for an induction run (metrics_add_icl_column),
 * icl_score: the in-context score (trainer_icl_add), in nats; for a modular run
 * (metrics_add_fourier_columns), the progress measures of docs/grokking.md, named by
 * metrics_fourier_names, each written in %.6g (the others: %.4f). */
typedef struct {
    metrics_row *rows;
    int n, cap;
    int layers, heads; /* heads: the heads scored per layer */
    int n_scores;      /* the attention columns */
    int first_head_column, n_composition; /* where the head columns start; the comp columns */
    int icl_column;    /* icl_score's index into a row's scores, -1 for none */
    int first_fourier_column; /* the progress measures' first index, -1 for none */
} metrics_table;

/* A modular run's progress measures (docs/grokking.md), in their columns' order. */
typedef enum {
    FOURIER_COL_TRAIN_LOSS,     /* train_set_loss: over every training pair */
    FOURIER_COL_TRAIN_ACC,      /* train_set_acc */
    FOURIER_COL_WEIGHTS,        /* sum_squared_weights */
    FOURIER_COL_RESTRICTED,     /* restricted_loss */
    FOURIER_COL_RESTRICTED_ACC, /* restricted_acc */
    FOURIER_COL_EXCLUDED,       /* excluded_loss */
    FOURIER_COL_GINI_EMBED,     /* gini_embed */
    FOURIER_COL_GINI_LOGITS,    /* gini_neuron_logits */
    FOURIER_COL_LOGIT_SHARE,    /* logit_share */
    FOURIER_COL_KEYS,           /* key_count: how many key frequencies */
    FOURIER_COLUMNS
} fourier_column;
extern const char *const metrics_fourier_names[FOURIER_COLUMNS];

/* An empty table for a model of `layers` layers with `heads` heads scored in each. */
void metrics_init(metrics_table *m, int layers, int heads);
void metrics_free(metrics_table *m);
/* Adds the column icl_score after every other (before any row is added). */
void metrics_add_icl_column(metrics_table *m);
/* Adds the progress measures' FOURIER_COLUMNS columns after every other (before any row is
 * added). */
void metrics_add_fourier_columns(metrics_table *m);
/* A row's attention columns, all NaN, for the caller to fill and hand to metrics_add (NULL
 * when out of memory: the row's columns are written empty). */
double *metrics_new_scores(const metrics_table *m);
/* Appends a row and takes its scores. A row lost to a lack of memory is not worth stopping a
 * run for. */
void metrics_add(metrics_table *m, metrics_row r);
/* The name of attention column k (0 .. n_scores-1), as metrics.csv's header writes it. */
void metrics_column_name(const metrics_table *m, int k, char *buf, size_t len);
/* Index into a row's scores of the induction score of layer l and head h (0-based). */
int metrics_induction_column(const metrics_table *m, int l, int h);
/* Appends the rows of an earlier run's metrics.csv at `path` up to step `upto` (--resume). A
 * file that is missing (io_absent) adds none; one that is there but cannot be read (a link to
 * nowhere, a FIFO, no permission) is QKV_ERR_IO, never taken for a missing one. */
qkv_status metrics_read(metrics_table *m, const char *path, int64_t upto);
/* Writes the table to `path` under a temporary name (io/atomic.c). */
qkv_status metrics_write(const metrics_table *m, const char *path);

#endif
