/* run_files.h - a run directory's records for tools: summary.json (what the run was and how
 * it ended) and metrics.jsonl (one JSON object per evaluation, appended as training goes). */
#ifndef QKV_IO_RUN_FILES_H
#define QKV_IO_RUN_FILES_H

#include "io/metrics.h"
#include "io/paths.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct cJSON;

/* What an evaluation found besides its metrics.csv row. */
typedef struct {
    int64_t step;
    double heldout_acc, heldout_loss, attention_mass;
    int best_head; /* 0-based */
    const metrics_table *columns; /* names the row's head columns for metrics.jsonl, or NULL */
    /* a modular run's: the embedding's norm in each frequency 0 .. n_norms-1 and the key
     * frequencies (docs/grokking.md), written as arrays into metrics.jsonl; NULL: none */
    const double *embed_norms;
    int n_norms;
    const int *key_frequencies;
    int n_keys;
} run_evaluation;

typedef struct {
    char dir[FILE_PATH_LEN];
    struct cJSON *config; /* the run's config (owned), written into every summary.json */
    FILE *jsonl;          /* DIR/metrics.jsonl, open for appending; NULL if it could not be */
    double start;         /* when the run began (monotonic seconds) */
    int64_t evaluated;    /* the step of the last evaluation written, -1 before the first */
    run_evaluation last;  /* that evaluation */
    struct cJSON *report; /* the summary's numbers (owned; NULL: none yet), summary.json's
                             "report" */
    struct cJSON *grokking; /* a modular run's phases (owned; NULL: none), summary.json's
                               "grokking" */
    int64_t model_step;   /* the step of DIR/model.safetensors, -1 while there is none */
    int64_t start_step;   /* the step the run began at */
    double kept_loss, kept_train_acc; /* the last kept row's, for a run that trains no step */
    int nkept;
    long long committed_bytes; /* metrics.jsonl's length at the model's step: its rows */
} run_files;

/* Starts the records of a run in `dir`, taking `config` (a JSON object, NULL when out of
 * memory: written as null): summary.json says "running" at `step`, and metrics.jsonl is
 * rewritten to hold exactly the `nkept` rows kept from metrics.csv (a resumed run: each taken
 * from `from_dir`/metrics.jsonl, the run it continues, where that has the step, else from the
 * csv row), then opened for appending. Both are written whole under temporary names
 * (io/atomic.c). On failure there is nothing to end; else end with run_files_end. */
qkv_status run_files_begin(run_files *rf, const char *dir, const char *from_dir,
                           struct cJSON *config, int64_t step, const metrics_row *kept, int nkept);
/* Whether DIR/summary.json says that the run ended normally ("done", exit status 0) with its
 * model at `step`: a finished run, whose files a resume with no step left must not touch. */
bool run_files_done(const char *dir, int64_t step);
/* Appends one evaluation to metrics.jsonl and flushes it, so that a reader following the
 * file sees each row as soon as it is written; the summary's metrics will be e's. */
void run_files_row(run_files *rf, const metrics_row *row, const run_evaluation *e);
/* The summary's metrics will be e's (an evaluation that has no row). */
void run_files_note(run_files *rf, const run_evaluation *e);
/* The summary's numbers (a JSON object, taken; NULL: none), written into summary.json from
 * now on as its "report". */
void run_files_report(run_files *rf, struct cJSON *report);
/* A modular run's phases (a JSON object, taken; NULL: none), written into summary.json from
 * now on as its "grokking". */
void run_files_grokking(run_files *rf, struct cJSON *grokking);
/* The model of `step` is on disk now (a checkpoint was committed, or a resumed directory
 * holds one): summary.json's model_step, and the summary a signal leaves (status
 * "interrupted", exit_status 7, at that step: io_set_signal_record). */
void run_files_committed(run_files *rf, int64_t step, double last_loss, double last_train_acc);
/* Ends the records: closes metrics.jsonl and writes summary.json at `step`, with the last
 * training batch's loss and accuracy, and the exit code (and `error`, the failure's message,
 * when it is not 0). A failed run's metrics.jsonl is cut back to the rows of the model on
 * disk (those it held at the last run_files_committed). The status says how: "done" (0), "diverged" (5: the state was not
 * finite), "interrupted" (7) or "failed". */
qkv_status run_files_end(run_files *rf, int64_t step, double last_loss, double last_train_acc,
                         int exit_code, const char *error);

/* The monotonic clock, in seconds. */
double run_files_now(void);

#endif
