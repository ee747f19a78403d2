/* report.c - what `qkv train` and `qkv eval` print of a model's evaluation: the summary and
 * its hint, the held-out example, the phase changes of its head scores, the JSON object. */
#include "cli.h"
#include "report.h"
#include "train/hints.h"
#include "train/run.h"

#include <cjson/cJSON.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One JSON object: docs/model.md ("What `qkv train --json` and `qkv eval --json` print")
 * defines every field. `loss`, `accuracy` and `train_loss` are the names of before 0.2: kept,
 * with their old values, through the 0.2 releases. `last_batch_loss` is null for eval. */
void cli_print_result_json(trainer *t, eval_result r, const metrics_table *m, int64_t step,
                           double seconds, const char *cmd, bool trained) {
    printf("{\"command\":\"%s\",\"task\":\"%s\",\"optim\":\"%s\",\"dtype\":\"%s\",\"steps\":%" PRId64
           ",\"heldout_loss\":%.6f,\"heldout_accuracy\":%.6f,\"heldout_correct\":%" PRId64
           ",\"heldout_targets\":%" PRId64 ",\"attention_mass\":%.6f,\"best_head\":%d,"
           "\"attention_layer\":%d,\"chance\":%.6f,",
           cmd, qkv_task_name(t->cfg.task.kind), qkv_optim_name(t->cfg.optim),
           qkv_dtype_name(t->model.cfg.dtype), step, r.loss, r.accuracy, r.correct, r.counted,
           r.attention_mass, r.best_head + 1, r.attention_layer + 1, qkv_task_chance(&t->cfg.task));
    if (trained)
        printf("\"last_batch_loss\":%.6f,", t->last_loss);
    else
        printf("\"last_batch_loss\":null,");
    printf("\"seconds\":%.3f,\"seq_len\":%d,\"vocab\":%d,\"d_model\":%d,\"heads\":%d,"
           "\"layers\":%d,\"seed\":%" PRIu64 ",\"loss\":%.6f,\"accuracy\":%.6f,"
           "\"train_loss\":%.6f",
           seconds, t->cfg.task.seq_len, t->cfg.task.vocab, t->model.cfg.d_model,
           t->model.cfg.heads, t->model.cfg.layers, t->cfg.seed, r.loss, r.accuracy,
           strcmp(cmd, "eval") ? t->last_loss : r.loss); /* as before 0.2, for each command */
    cJSON *report = train_report_json(t, &r, m); /* every number the text summary prints */
    char *text = report ? cJSON_PrintUnformatted(report) : NULL;
    printf(",\"report\":%s}\n", text ? text : "null");
    free(text);
    cJSON_Delete(report);
}

/* Up to `max` labels of tokens x[0..n) (with `classes`, of output classes), a space before
 * each; "_" for a negative one. */
static void print_tokens(const trainer *t, const int32_t *x, int n, int max, bool classes) {
    for (int i = 0; i < n && i < max; i++) {
        char label[64] = "_";
        if (x[i] >= 0 && classes) trainer_class_label(t, x[i], label, sizeof label);
        else if (x[i] >= 0) trainer_token_label(t, x[i], label, sizeof label);
        printf(" %s", label);
    }
    if (n > max) printf(" ...");
}

/* Held-out example 1 (the one the maps show) in the task's tokens or the data file's
 * strings: its input, the model's output at every position ("_" where there is no target),
 * and how much is right. */
void cli_print_example(trainer *t) {
    enum { SHOWN = 24 };
    int T = t->model.cfg.seq_len, To = t->target_len;
    int32_t *pred = malloc((size_t)To * 2 * sizeof *pred);
    if (!pred) return;
    int32_t *out = pred + To;
    const int32_t *y = t->held_targets;
    trainer_predict(t, 0, pred);
    int n_in = t->held_lengths ? t->held_lengths[0] : T, right = 0, targets = 0;
    /* self-attention: an output for each input token, the last too; a decoder: its
     * positions up to the last target (a data file's shorter outputs are padded after it) */
    int n_out = t->model.cfg.target_len ? 0 : n_in;
    for (int i = 0; i < To; i++) {
        out[i] = y[i] < 0 ? -1 : pred[i];
        if (y[i] >= 0) targets++, right += pred[i] == y[i];
        if (y[i] >= 0 && i >= n_out) n_out = i + 1; /* never a target left out */
    }
    printf("  held-out example:");
    print_tokens(t, t->held_tokens, n_in, SHOWN, false);
    printf(" →");
    print_tokens(t, out, n_out, SHOWN, true);
    printf(" (%d of %d targets right)\n", right, targets);
    free(pred);
}

/* The head that scores highest on one of the standard scores, over every layer. */
/* The summary: accuracy against chance, the layer and head that carry the task, the standard
 * head scores of the strongest heads (its hint: cli_print_hint). */
void cli_print_summary(const trainer *t, const eval_result *r, const char *tail, bool brief) {
    const qkv_task *task = &t->cfg.task;
    const qkv_model_config *c = &t->model.cfg;
    double chance = qkv_task_chance(task);
    if (r->has_ideal)
        printf("%s: held-out accuracy %.2f%% (chance %.2f%%), attention mass %.3f (layer %d, "
               "head %d), loss %.4f, %s\n", qkv_task_name(task->kind), 100 * r->accuracy,
               100 * chance, r->attention_mass, r->attention_layer + 1, r->best_head + 1, r->loss,
               tail);
    else /* a data file: no ideal pattern to measure */
        printf("%s: held-out accuracy %.2f%% (chance %.2f%%), loss %.4f, %s\n",
               qkv_task_name(task->kind), 100 * r->accuracy, 100 * chance, r->loss, tail);
    if (brief) return; /* --quiet: the one line */
    if (c->layers > 1 && r->has_ideal) {
        printf("  ideal-pattern mass by layer:");
        for (int l = 0; l < c->layers; l++)
            printf(" %d: %.3f (head %d)", l + 1, r->layer_mass[l], r->layer_best_head[l] + 1);
        putchar('\n');
    }
    if (!c->target_len) { /* the head scores are of self-attention */
        /* each score where some head's is defined (induction needs two layers) */
        const char *sep = "  strongest heads: ";
        for (int s = 0; s < SCORE_KINDS; s++) {
            int l, h;
            double v;
            if (!train_strongest_head(t, r, (head_score)s, &l, &h, &v)) continue;
            printf("%s%s %.3f (layer %d, head %d)", sep, head_score_name((head_score)s), v, l + 1,
                   h + 1);
            sep = ", ";
        }
        if (*sep == ',') putchar('\n');
    }
    if (c->heads > EVAL_MAX_HEADS) /* said, never a silent limit */
        printf("  (the attention mass and head scores above are of the first %d heads of each "
               "layer's %d; qkv ablate, attribute and eval --data cover every head)\n",
               EVAL_MAX_HEADS, c->heads);
}

void cli_print_hint(const trainer *t, const eval_result *r, const metrics_table *m, bool brief) {
    char hint[512];
    train_hint(t, r, m, hint, sizeof hint);
    cli_print_hint_text(hint, brief);
}

void cli_print_hint_text(const char *hint, bool brief) {
    if (!hint[0]) return; /* HINT_NONE */
    fflush(stdout); /* the summary first, where both go to one terminal */
    fprintf(brief ? stderr : stdout, "%s\n", hint); /* --quiet: stdout keeps one line */
}

void cli_print_phase_changes(const trainer *t, const metrics_table *m) {
    int head;
    int64_t step = train_induction_step(t, m, &head);
    if (step >= 0)
        printf("  an induction head formed in layer %d (head %d) by step %" PRId64
               " (metrics.csv column ind_l%dh%d passed 0.5)\n", m->layers, head + 1, step,
               m->layers, head + 1);
    enum { SHOWN = 8 };
    phase_change c[SHOWN];
    int n = train_phase_changes(m, c, SHOWN);
    for (int i = 0; i < n && i < SHOWN; i++) {
        printf("  phase change: layer %d head %d %s %.2f → %.2f in steps %" PRId64 "-%" PRId64
               ", loss %.2f → %.2f\n", c[i].layer + 1, c[i].head + 1,
               head_score_name(c[i].score), c[i].from_score, c[i].to_score, c[i].from_step,
               c[i].step, c[i].from_loss, c[i].to_loss);
        if (c[i].score != SCORE_INDUCTION) continue;
        /* its signals (train/hints.h): the steps that end each steepest change */
        printf("    steepest: the induction score's rise at step %" PRId64, c[i].score_step);
        if (c[i].icl_step >= 0) printf(", the in-context score's fall at %" PRId64, c[i].icl_step);
        printf(", the training loss's fall at %" PRId64 "%s\n", c[i].loss_step,
               c[i].icl_step >= 0 ? "" : " (no in-context score: the induction task's alone)");
    }
    if (n > SHOWN) printf("  and %d more phase changes (summary.json lists them)\n", n - SHOWN);
}

void cli_print_schedule_change(FILE *out, const trainer *t, int64_t old_steps) {
    const train_config *c = &t->cfg;
    train_config before = *c;
    before.steps = old_steps;
    int64_t next = t->optim.step + 1;
    if (!c->cosine) {
        fprintf(out, "resume: --steps %" PRId64 " (was %" PRId64 "): the schedule is constant, so "
                "the learning rate stays %.4g\n", c->steps, old_steps, trainer_lr(c, next));
        return;
    }
    fprintf(out, "resume: --steps %" PRId64 " (was %" PRId64 "): the cosine schedule now decays "
            "to 0 at step %" PRId64 " instead of %" PRId64 "; the learning rate at step %" PRId64
            " is %.4g (%s %.4g)\n", c->steps, old_steps, c->steps, old_steps, next,
            trainer_lr(c, next), next <= old_steps ? "the old plan gave" : "it had decayed to",
            trainer_lr(&before, next <= old_steps ? next : old_steps));
}
