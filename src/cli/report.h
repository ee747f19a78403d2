/* report.h - what `qkv train` and `qkv eval` print of a model's evaluation (report.c). */
#ifndef QKV_CLI_REPORT_H
#define QKV_CLI_REPORT_H

#include "train/run.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* The summary: accuracy against chance, the layer and head that carry the task, the standard
 * head scores of the strongest heads (only the first line when `brief`); `tail` ends the first
 * line ("600 steps in 1.2 s, saved to runs/x"). */
void cli_print_summary(const trainer *t, const eval_result *r, const char *tail, bool brief);
/* The one hint when the run fell short (train_hint; m: the run's metrics, or NULL): on stdout
 * after the summary, on stderr when `brief` (--quiet). */
void cli_print_hint(const trainer *t, const eval_result *r, const metrics_table *m, bool brief);
/* A hint line made already (train_hint_of, loaded_model_hint): printed as cli_print_hint
 * prints it, nothing for "" (HINT_NONE). */
void cli_print_hint_text(const char *hint, bool brief);
/* Held-out example 1 in the task's tokens or the data file's strings, with the prediction. */
void cli_print_example(trainer *t);
/* With two layers or more, the step at which a head of the last layer became an induction
 * head; then each phase change of the run's head scores (train/hints.h). */
void cli_print_phase_changes(const trainer *t, const metrics_table *m);
/* One JSON object (docs/model.md, "What `qkv train --json` and `qkv eval --json` print"), its
 * "report" from train_report_json (m: the run's metrics, or NULL). */
void cli_print_result_json(trainer *t, eval_result r, const metrics_table *m, int64_t step,
                           double seconds, const char *cmd, bool trained);
/* The learning rate's plan after a resume changed --steps (from old_steps): said once, before
 * training. */
void cli_print_schedule_change(FILE *out, const trainer *t, int64_t old_steps);

#endif
