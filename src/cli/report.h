/* report.h - what `qkv train` and `qkv eval` print of a model's evaluation (report.c). */
#ifndef QKV_CLI_REPORT_H
#define QKV_CLI_REPORT_H

#include "train/run.h"

#include <stdbool.h>
#include <stdint.h>

/* The summary: accuracy against chance, the layer and head that carry the task, the standard
 * head scores of the strongest heads, and one hint when the run fell short (only the first
 * line when `brief`); `tail` ends the first line ("600 steps in 1.2 s, saved to runs/x"). */
void cli_print_summary(const trainer *t, const eval_result *r, const char *tail, bool brief);
/* Held-out example 1 in the task's tokens or the data file's strings, with the prediction. */
void cli_print_example(trainer *t);
/* With two layers or more: the step at which a head of the last layer became an induction head. */
void cli_print_induction_step(const trainer *t, const metrics_table *m);
/* One JSON object (docs/model.md, "What `qkv train --json` and `qkv eval --json` print"). */
void cli_print_result_json(const trainer *t, eval_result r, int64_t step, double seconds,
                           const char *cmd, bool trained);
/* The steps `qkv train --task T` takes by default (the hint of too few steps names them). */
long cli_task_default_steps(const char *task);

#endif
