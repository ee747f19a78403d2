/* cmd_train.c - `qkv train`: train a toy attention model, watch it, save it. */
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700 /* realpath */
#endif
#include "cli.h"
#include "io/paths.h"
#include "report.h"
#include "train/checkpoint.h"
#include "train/options.h"
#include "train/run.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- progress ---- */

/* A run of this many steps or more on the plain C loops says why they run (a few seconds on a
 * SIMD path; minutes without one). */
#define SLOW_NOTE_STEPS 500

/* One line, redrawn in place: it never reaches the last column (where a terminal would wrap
 * it, and every redraw would become a new line). Fields are dropped, least useful first, until
 * it fits: the rate, the ETA, then the bar shrinks, then the held-out accuracy. */
static void progress_bar(FILE *out, int64_t step, int64_t steps, double loss, double heldout,
                         double rate, double eta) {
    int room = cli_terminal_columns(out) - 1;
    char counts[64], line[256], bar[64];
    snprintf(counts, sizeof counts, "step %" PRId64 "/%" PRId64 "  loss %.4f", step, steps, loss);
    for (int level = 0; level < 6; level++) {
        int width = level < 2 ? 20 : level == 2 ? 10 : 0;
        int fill = steps ? (int)(width * step / steps) : width;
        for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
        bar[width] = '\0';
        int n = snprintf(line, sizeof line, "%s%s%s%s", width ? "[" : "", bar, width ? "] " : "",
                         counts);
        if (level < 4) n += snprintf(line + n, sizeof line - (size_t)n, "  held-out %.1f%%", 100 * heldout);
        if (level < 1) n += snprintf(line + n, sizeof line - (size_t)n, "  %.0f steps/s", rate);
        if (level < 2) n += snprintf(line + n, sizeof line - (size_t)n, "  ETA %.0fs", eta);
        if (n <= room || level == 5) {
            if (n > room) line[room > 0 ? room : 0] = '\0';
            break;
        }
    }
    fprintf(out, "\r%s\033[K", line); /* \033[K: clear what a longer line left */
    fflush(out);
}

typedef struct {
    train_options o;  /* as given (the schema's rows point into it) */
    bool steps_set;
    train_config cfg; /* a new run's config (not used with --resume) */
} train_args;

enum { TRAIN_ROWS = TRAIN_OPTION_ROWS + 3 }; /* the schema's, --no-selftest, --help, the end */

/* train's options: the schema's rows (train/options.c) as the parser's table, their values
 * going to *o; `rows` holds TRAIN_ROWS. Also read by --config files and sweep grids. */
static cli_command train_table(train_options *o, cli_option *rows) {
    static const cli_opt_kind kind_of[] = {
        [OPTION_HEADING] = CLI_TEXT, [OPTION_INT] = CLI_INT,       [OPTION_U64] = CLI_U64,
        [OPTION_DOUBLE] = CLI_DOUBLE, [OPTION_TEXT] = CLI_STRING,  [OPTION_CHOICE] = CLI_CHOICE,
        [OPTION_FLAG] = CLI_FLAG,    [OPTION_SET] = CLI_SET};
    int n = 0;
    for (const train_option *r = train_option_table; r->flag || r->help; r++)
        rows[n++] = (cli_option){.name = r->flag, .kind = kind_of[r->type],
                                 .dest = r->flag ? train_option_value(o, r) : NULL,
                                 .lo = r->lo, .hi = r->hi, .lo_open = r->lo_open, .arg = r->arg,
                                 .help = r->help, .choices = r->choices, .value = r->set_value,
                                 .word = r->word, .word_value = r->word_value};
    rows[n++] = (cli_option)CLI_NO_SELFTEST_ROW;
    rows[n++] = (cli_option){"help", CLI_HELP, .help = "show this help"};
    rows[n] = (cli_option){0};
    return (cli_command){
        .name = "train",
        .usage = "usage: qkv train [options]\n"
                 "Trains a toy attention model on a task generated from the seed, or on your examples,\n"
                 "and reports held-out accuracy against chance and attention mass (the weight the best\n"
                 "head of the layer carrying the task puts on the ideal keys).\n"
                 "\n",
        .options = rows,
        .column = 22};
}

train_opt_kind cli_train_option(const char *name) {
    const train_option *r = train_option_find(name);
    switch (r ? r->type : OPTION_HEADING) {
    case OPTION_FLAG:
    case OPTION_SET: return TRAIN_OPT_FLAG;
    case OPTION_TEXT:
    case OPTION_CHOICE: return TRAIN_OPT_TEXT;
    case OPTION_INT:
    case OPTION_U64:
    case OPTION_DOUBLE: return TRAIN_OPT_NUMBER;
    default: return TRAIN_OPT_UNKNOWN;
    }
}

/* With --resume the rest comes from the saved run: only the schema's with_resume options. */
static int check_resume_options(const cli_command *cmd) {
    for (const cli_option *c = cmd->options; c->kind != CLI_END; c++) {
        const train_option *r = c->name ? train_option_find(c->name) : NULL;
        if (c->given && r && !r->with_resume) {
            cli_error("train: --resume continues a saved run; only --steps, --out, --threads, "
                      "--eval-every, --save-every, --snapshot-every, --plot, --json and --quiet "
                      "may be given with it (not --config)");
            return EXIT_USAGE;
        }
    }
    return CLI_RUN;
}

static int train_parse(int argc, char **argv, train_args *a) {
    *a = (train_args){0};
    train_options *o = &a->o;
    train_options_init(o);
    cli_option rows[TRAIN_ROWS];
    cli_command cmd = train_table(o, rows);
    int code = cli_parse_options(&cmd, argc, argv, NULL);
    if (code != CLI_RUN) return code;
    a->steps_set = cli_option_given(&cmd, "steps");
    bool task_set = cli_option_given(&cmd, "task");
    if (!o->threads && !cli_default_threads(&o->threads)) return EXIT_USAGE;
    if (!a->steps_set) o->steps = (long)qkv_train_defaults(o->data ? "data" : o->task).steps;
    if (o->resume) return check_resume_options(&cmd); /* out defaults to the resumed dir */
    if (o->data && (task_set || o->seq_len >= 0 || o->vocab)) {
        cli_error("train: --data FILE sets the task, the length and the vocabulary; leave out "
                  "%s", task_set ? "--task" : o->seq_len >= 0 ? "--seq-len" : "--vocab");
        return EXIT_USAGE;
    }
    if (o->heldout && !o->data) {
        cli_error("train: --heldout FILE names held-out examples of a --data FILE");
        return EXIT_USAGE;
    }
    /* modular's options, with another task */
    static const char *const modular_only[] = {"modulus", "op", "train-frac", "data-seed"};
    for (size_t i = 0; i < sizeof modular_only / sizeof *modular_only; i++)
        if (cli_option_given(&cmd, modular_only[i]) && (o->data || strcmp(o->task, "modular"))) {
            cli_error("train: --%s is an option of --task modular, not of %s", modular_only[i],
                      o->data ? "--data" : o->task);
            return EXIT_USAGE;
        }
    /* absolute paths: the model file names them, for eval and --resume from anywhere */
    char *abs[2] = {NULL, NULL};
    const char **paths[2] = {&o->data, &o->heldout};
    for (int k = 0; k < 2 && code == CLI_RUN; k++) {
        if (!*paths[k]) continue;
        abs[k] = realpath(*paths[k], NULL);
        if (!abs[k] || strlen(abs[k]) >= sizeof a->cfg.data_path) {
            cli_error("%s: %s", *paths[k], abs[k] ? "the path is too long" : strerror(errno));
            code = EXIT_IO;
        }
        *paths[k] = abs[k];
    }
    qkv_status s = QKV_OK;
    if (code == CLI_RUN && (s = train_options_to_config(o, a->steps_set, &a->cfg)) != QKV_OK) {
        cli_error("%s", qkv_last_error());
        code = cli_exit_for(s);
    }
    o->data = o->heldout = NULL; /* the config keeps its copies */
    free(abs[0]);
    free(abs[1]);
    if (code == CLI_RUN && !o->out && (o->plot || o->snapshot_every)) {
        cli_error("train: %s needs --out DIR", o->plot ? "--plot" : "--snapshot-every");
        return EXIT_USAGE;
    }
    return code;
}

/* What the progress of a run shows: a bar redrawn in place on a terminal, or a log line per
 * evaluation when the output is not one (none with --quiet, nor with --json). */
typedef struct {
    FILE *out;
    bool bar, log, quiet;
    bool resumed;
    int64_t old_steps; /* a resumed run's --steps before this command */
    double t0, last_draw, heldout, seconds;
    bool drawn;        /* the bar is on the screen */
} train_progress;

static void on_progress(run_event event, const training_run *run, const trainer *t, void *user) {
    train_progress *p = user;
    int64_t step = t->optim.step, total = t->cfg.steps;
    double el = run_files_now() - p->t0;
    double rate = el > 0 ? (double)(step - run->start_step) / el : 0;
    switch (event) {
    case RUN_BEGIN:
        p->t0 = run_files_now();
        /* a CPU that runs the plain C loops is told why, first, unless QKV_SIMD chose them */
        if (qkv_simd_slow_reason() && !qkv_simd_forced() && total - step >= SLOW_NOTE_STEPS)
            fprintf(stderr, "note: %s\n", qkv_simd_slow_reason());
        if (p->resumed && total != p->old_steps && step < total && !p->quiet)
            cli_print_schedule_change(p->out, t, p->old_steps);
        break;
    case RUN_EVALUATED:
        p->heldout = run->last.accuracy;
        if (p->log) {
            printf("step %" PRId64 "/%" PRId64 " loss %.4f train_acc %.4f heldout_acc %.4f",
                   step, total, t->last_loss, t->last_train_acc, run->last.accuracy);
            if (run->last.has_ideal) /* a data file has no ideal pattern to measure */
                printf(" attention_mass %.3f", run->last.attention_mass);
            printf(" steps/s %.0f\n", rate);
            fflush(stdout);
        }
        break;
    case RUN_STEPPED:
        if (p->bar && (el - p->last_draw > 0.1 || step == total)) {
            progress_bar(p->out, step, total, t->last_loss, p->heldout, rate,
                         rate > 0 ? (double)(total - step) / rate : 0);
            p->last_draw = el;
            p->drawn = true;
        }
        break;
    case RUN_SAVING: /* a signal now waits for the note of the checkpoint being saved */
        cli_guard_hold();
        break;
    case RUN_COMMITTED:
        cli_set_interrupt_note("the run in %s keeps its checkpoint of step %" PRId64,
                               run->dir.dir, step);
        cli_guard_release();
        break;
    case RUN_TRAINED:
        p->seconds = el;
        break;
    }
}

static int train_run(train_args *a) {
    const char *out_dir = a->o.out, *resume = a->o.resume;
    bool json = a->o.json, quiet = a->o.quiet;
    int code = cli_set_threads(a->o.threads);
    if (code != EXIT_OK) return code;

    trainer t;
    qkv_status s;
    int64_t old_steps = 0; /* a resumed run's --steps before this command */
    char path[RUN_PATH_LEN];
    if (resume) {
        if (!cli_model_path(resume, path, sizeof path)) return EXIT_IO;
        if ((s = trainer_load(&t, path)) != QKV_OK) {
            cli_error("%s", qkv_last_error());
            return cli_exit_for(s);
        }
        old_steps = t.cfg.steps;
        if (a->steps_set) t.cfg.steps = a->o.steps;
        if (t.cfg.steps < t.optim.step) {
            cli_error("train: --steps %" PRId64 " is below the %" PRId64 " steps already taken",
                      t.cfg.steps, t.optim.step);
            trainer_free(&t);
            return EXIT_USAGE;
        }
        if (!out_dir) out_dir = resume;
    } else if ((s = trainer_init(&t, &a->cfg)) != QKV_OK) {
        cli_error("%s", qkv_last_error());
        return cli_exit_for(s);
    }
    FILE *prog = json ? stderr : stdout;
    bool tty = cli_terminal_columns(prog) > 0;
    train_progress p = {.out = prog, .bar = !quiet && tty, .log = !quiet && !tty && !json,
                        .quiet = quiet, .resumed = resume != NULL, .old_steps = old_steps};
    run_options o = {.out_dir = out_dir, .resume_dir = resume, .eval_every = a->o.eval_every,
                     .save_every = a->o.save_every, .snapshot_every = a->o.snapshot_every,
                     .force = a->o.force};
    training_run run;
    s = trainer_run(&t, &o, on_progress, &p, &run);
    cli_guard_release(); /* a save that failed after RUN_SAVING still holds signals */
    if (s != QKV_OK) {
        if (p.drawn) fputc('\n', prog);
        if (run.started && run.has_dir && run.dir.committed) /* and what the directory keeps */
            cli_error("%s; %s keeps the checkpoint of step %" PRId64, qkv_last_error(),
                      run.dir.dir, run.saved_step);
        else
            cli_error("%s", qkv_last_error());
        code = cli_exit_for(s);
    }
    if (code == EXIT_OK) {
        if (p.bar) fputc('\n', prog);
        if (json)
            cli_print_result_json(&t, run.last, &run.metrics, t.optim.step, p.seconds, "train",
                                  t.optim.step > run.start_step);
        else { /* --quiet too: the summary's first line is what a script reads */
            char tail[RUN_PATH_LEN + 100]; /* "N steps in X s, saved to " and the run */
            snprintf(tail, sizeof tail, "%" PRId64 " step%s in %.2f s%s%s", t.optim.step,
                     t.optim.step == 1 ? "" : "s", p.seconds, out_dir ? ", saved to " : "",
                     out_dir ? out_dir : "");
            cli_print_summary(&t, &run.last, tail, quiet);
            cli_print_hint(&t, &run.last, &run.metrics, quiet); /* --quiet: on stderr */
            if (!quiet) cli_print_example(&t), cli_print_phase_changes(&t, &run.metrics);
        }
    }
    if (code == EXIT_OK && a->o.plot) {
        bool no_gnuplot = false;
        int pc = cli_plot(out_dir, "png", !quiet && !json, &no_gnuplot);
        if (!no_gnuplot) code = pc; /* without gnuplot the run still succeeded: its data is saved */
    }
    /* summary.json records how the whole command ended, the plots included */
    if ((s = trainer_run_end(&run, &t, code, code ? qkv_last_error() : NULL)) != QKV_OK &&
        code == EXIT_OK) {
        cli_error("%s", qkv_last_error());
        code = cli_exit_for(s);
    }
    cli_clear_interrupt_note();
    trainer_free(&t);
    return code;
}

/* train: reads --config (unless parse_only), parses, and runs unless `run` is false. The
 * options of a config file go first, so that the command line's override them. */
static int train_command(int argc, char **argv, bool parse_only, bool run) {
    train_options scratch;
    cli_option rows[TRAIN_ROWS];
    train_options_init(&scratch);
    cli_command cmd = train_table(&scratch, rows);
    const char *config = parse_only ? NULL : cli_option_last(&cmd, argc, argv, "config");
    if (config && cli_option_count(&cmd, argc, argv, "config") > 1) { /* which would win? */
        cli_error("train: --config is given more than once; give one config file");
        return EXIT_USAGE;
    }
    char **config_args = NULL, **merged = NULL;
    int nconfig = 0;
    if (config) {
        int code = cli_config_args(config, cli_train_option, &nconfig, &config_args);
        if (code != EXIT_OK) return code;
        merged = malloc(((size_t)argc + (size_t)nconfig + 1) * sizeof *merged);
        if (!merged) {
            cli_free_args(nconfig, config_args);
            cli_error("out of memory");
            return EXIT_NOMEM;
        }
        merged[0] = argv[0];
        memcpy(merged + 1, config_args, (size_t)nconfig * sizeof *merged);
        memcpy(merged + 1 + nconfig, argv + 1, (size_t)argc * sizeof *merged); /* with NULL */
        argc += nconfig;
        argv = merged;
    }
    train_args a;
    int code = train_parse(argc, argv, &a);
    if (code == CLI_RUN && run && !parse_only) code = train_run(&a);
    free(merged);
    cli_free_args(nconfig, config_args);
    return code;
}

int cmd_train(int argc, char **argv, bool parse_only) {
    return train_command(argc, argv, parse_only, true);
}

int cli_train_check(int argc, char **argv) {
    return train_command(argc, argv, false, false);
}
