/* run_files.h - a run directory's records for tools: summary.json (what the run was and how
 * it ended) and metrics.jsonl (one JSON object per evaluation, appended as training goes). */
#ifndef QKV_CLI_RUN_FILES_H
#define QKV_CLI_RUN_FILES_H

#include "train/trainer.h"

#include <stdint.h>
#include <stdio.h>

/* One row of metrics.csv: an evaluation. */
typedef struct {
    int64_t step;
    double loss, train_acc, heldout_acc, lr, heldout_loss; /* heldout_loss: NaN if unknown */
    double *scores; /* metrics.csv's attention columns (cmd_train.c: metrics_scores), owned; NaN
                       where unknown, NULL if none */
} metrics_row;

/* The options of a run that are not in the trainer's config but shape its files. */
typedef struct {
    long eval_every, save_every, snapshot_every; /* eval_every as used (defaults resolved) */
} run_options;

typedef struct {
    char dir[1024];
    FILE *jsonl;      /* DIR/metrics.jsonl, open for appending; NULL if it could not be */
    double start;     /* when the run began (monotonic seconds) */
    int64_t evaluated;/* the step of the last evaluation written, -1 before the first */
    eval_result last; /* that evaluation */
} run_files;

/* The run's effective config as a JSON object (the keys are train's options with '_' for
 * '-'); a valid `qkv train --config`. NULL when out of memory. */
struct cJSON *run_config_json(const trainer *t, const run_options *o);

/* Starts the records of a run in `dir`: summary.json says "running", and metrics.jsonl is
 * rewritten to hold exactly the `nkept` rows kept from metrics.csv (a resumed run: each taken
 * from `from_dir`/metrics.jsonl, the run it continues, where that has the step, else from the
 * csv row), then opened for appending. Both are written whole under temporary names
 * (io/atomic.c). */
qkv_status run_files_begin(run_files *rf, const char *dir, const char *from_dir, const trainer *t,
                           const run_options *o, const metrics_row *kept, int nkept);
/* Appends one evaluation to metrics.jsonl and flushes it, so that a reader following the
 * file sees each row as soon as it is written. */
void run_files_row(run_files *rf, const metrics_row *row, const eval_result *r);
/* Ends the records: closes metrics.jsonl and writes summary.json with the exit code (and
 * `error`, the failure's message, when it is not 0). */
qkv_status run_files_end(run_files *rf, const trainer *t, const run_options *o, int exit_code,
                         const char *error);

/* The monotonic clock, in seconds. */
double run_files_now(void);

#endif
