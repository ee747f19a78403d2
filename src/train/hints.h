/* hints.h - what a run's numbers say: the one hint when it fell short, and the phase changes of
 * its head scores (a score jumping past 0.5 while the loss falls). qkv train and qkv eval print
 * them (src/cli/report.c); summary.json and --json carry them, with every other number of the
 * summary, in their "report" object (train_report_json). */
#ifndef QKV_TRAIN_HINTS_H
#define QKV_TRAIN_HINTS_H

#include "io/metrics.h"
#include "train/trainer.h"

#include <stddef.h>
#include <stdint.h>

struct cJSON;

/* A phase change: the first metrics row at which a head score reaches PHASE_THRESHOLD, when
 * the last row before it at or below PHASE_FROM is at most PHASE_STRETCH of the run's steps
 * earlier and the held-out loss fell in between. */
#define PHASE_THRESHOLD 0.5
#define PHASE_FROM 0.25
#define PHASE_STRETCH 0.1

/* The standard head scores (eval_result's prev_token, duplicate and induction), in the order
 * of metrics.csv's columns prev_l<L>h<H>, dup_l<L>h<H>, ind_l<L>h<H>. */
typedef enum { SCORE_PREV_TOKEN, SCORE_DUPLICATE, SCORE_INDUCTION, SCORE_KINDS } head_score;
/* "previous-token", "duplicate-token", "induction" */
const char *head_score_name(head_score score);
/* The head with the highest defined `score` in r: its layer and head, 0-based, and the score.
 * False when no head's score is defined (every one NaN). */
bool train_strongest_head(const trainer *t, const eval_result *r, head_score score, int *layer,
                          int *head, double *value);

typedef struct {
    head_score score;
    int layer, head;           /* 0-based */
    int64_t from_step, step;   /* the stretch: its last row at or below PHASE_FROM, and the row
                                  that reached PHASE_THRESHOLD */
    double from_score, to_score;
    double from_loss, to_loss; /* held-out loss at the two rows (the training batch's where the
                                  held-out one is unknown) */
    /* An induction score's three signals (train_induction_signals), -1 where missing; -1 for
     * the other scores. */
    int64_t score_step, icl_step, loss_step;
} phase_change;

/* The three signals of an induction phase change c (its score, layer, head, from_step and step
 * set) among the rows of m, each the step of the evaluation that ends the steepest change,
 * per step, from the evaluation before it:
 *   score_step: the steepest rise of c's induction score, within c's stretch (from_step ..
 *               step);
 *   icl_step:   the steepest fall of the in-context score (metrics column icl_score) over the
 *               whole run;
 *   loss_step:  the steepest fall of the training batch's loss (metrics column loss) over the
 *               whole run: a bump in the loss shows as the fall that ends it.
 * A signal is -1 where its values are missing (NaN: icl_score where m has no such column).
 * Returns whether the three agree: each present, and icl_step and loss_step each within one
 * evaluation interval of score_step (the run's longest gap between two evaluations: its
 * --eval-every, which the default schedule's extra early evaluations only shorten). */
bool train_induction_signals(const metrics_table *m, phase_change *c);

/* The phase changes among the rows of m, by step, at most `max` of them into out; returns how
 * many there are (which may exceed max). An induction score's phase change carries its three
 * signals; where m has the in-context score (the induction task), it counts only when they
 * agree (train_induction_signals). */
int train_phase_changes(const metrics_table *m, phase_change *out, int max);

/* With two layers or more (self-attention): the step of the first metrics row at which a head
 * of the last layer has an induction score of 0.5 or more, and that head (0-based); -1 when
 * none has. */
int64_t train_induction_step(const trainer *t, const metrics_table *m, int *head);

typedef enum {
    HINT_NONE,     /* the run did well enough */
    HINT_DIVERGED, /* the held-out loss ended above where it began */
    HINT_CAUSAL,   /* the causal mask hides keys the targets need */
    HINT_DEPTH,    /* too few layers, or no residual stream */
    HINT_STEPS,    /* fewer steps than the task's default */
    HINT_NARROW,   /* d_model below 32 */
    HINT_OTHER,    /* more steps, width, heads, or another learning rate */
    HINT_MEMORIZED, /* the training examples right (train accuracy near 100%), the held-out
                       loss above where it began */
} train_hint_kind;

/* The one hint for a model evaluated as r: when a task's accuracy is near chance or its
 * attention far from the ideal, or a data file's accuracy below 90%. Its line ("hint: ...",
 * no newline) into buf; "" for HINT_NONE. m: the run's metrics (the first row's loss tells a
 * diverged run, the last row's training accuracy one that memorized), or NULL. */
train_hint_kind train_hint(const trainer *t, const eval_result *r, const metrics_table *m,
                           char *buf, size_t len);
/* The same for a model of train config cfg and model config c, saved at `step`, whose
 * held-out set is `held` (for the causal mask's share): what train_hint reads of a trainer. */
train_hint_kind train_hint_of(const train_config *cfg, const qkv_model_config *c, int64_t step,
                              example_set held, const eval_result *r, const metrics_table *m,
                              char *buf, size_t len);

/* The share of the held-out targets whose token the causal mask hides: it is not among the
 * inputs at or before the target's position but is after it. 0 for an encoder-decoder. */
double train_causal_hidden_share(const trainer *t);
double causal_hidden_share(const qkv_model_config *c, example_set held);

/* Every number of the summary qkv train prints, as a JSON object (NULL when out of memory):
 * accuracy and chance, the task's layer and head, the mass by layer, every head's scores, the
 * strongest heads, held-out example 1's right targets, the induction step and the phase
 * changes (m: NULL for none), and the hint. docs/model.md defines each field. */
struct cJSON *train_report_json(trainer *t, const eval_result *r, const metrics_table *m);

#endif
