/* cmd_train.c - `qkv train`: train a toy attention model, watch it, save it. */
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700 /* realpath */
#endif
#include "cli.h"
#include "report.h"
#include "train/checkpoint.h"
#include "train/run.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>



/* ---- progress ---- */

/* The terminal's width in columns (80 if it cannot be told). */
static int terminal_columns(FILE *out) {
    struct winsize ws;
    if (ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    const char *env = getenv("COLUMNS");
    long n = env ? strtol(env, NULL, 10) : 0;
    return n > 0 && n < 10000 ? (int)n : 80;
}

/* One line, redrawn in place: it never reaches the last column (where a terminal would wrap
 * it, and every redraw would become a new line). Fields are dropped, least useful first, until
 * it fits: the rate, the ETA, then the bar shrinks, then the held-out accuracy. */
static void progress_bar(FILE *out, int64_t step, int64_t steps, double loss, double heldout,
                         double rate, double eta) {
    int room = terminal_columns(out) - 1;
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

/* The learning rate's plan after a resume changed --steps: said once, before training. */
static void say_schedule_change(FILE *out, const trainer *t, int64_t old_steps) {
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

/* What `qkv train --task T` uses for the options not given: one layer of width 64 solves the
 * first five tasks in 3000 steps; induction and recall need a second layer and the residual
 * stream (layer 1 copies each token's predecessor into its position, layer 2 matches on it). */
typedef struct {
    const char *task;
    long seq_len, d_model, heads, layers, steps;
    int residual;
    double adam_lr;
} task_defaults;

static const task_defaults default_options[] = {
    {"induction", 16, 64, 2, 2, 600, 1, 0.005},
    {"recall", 16, 64, 2, 2, 800, 1, 0.005},
    {"sort", 17, 64, 1, 1, 1500, 0, 0.005},
    {"translate", 16, 64, 1, 1, 500, 0, 0.005},
    {"data", 8, 64, 1, 1, 3000, 0, 0.005},
    {NULL, 8, 64, 1, 1, 3000, 0, 0.005}, /* copy, reverse, shift, lookup, max */
};

static const task_defaults *defaults_of(const char *task) {
    const task_defaults *d = default_options;
    while (d->task && strcmp(d->task, task)) d++;
    return d;
}

long cli_task_default_steps(const char *task) {
    return defaults_of(task)->steps;
}

typedef struct {
    const char *out_dir, *resume;
    long threads, eval_every, save_every, snapshot_every, steps;
    bool json, quiet, plot, steps_set;
    train_config cfg; /* a new run's config (not used with --resume) */
} train_args;

/* What train's options set before the task's defaults fill in the rest (-1: not given). */
typedef struct {
    const char *task, *data, *heldout, *config;
    int optim, schedule, dtype, residual; /* residual: -1 the task's, 0 or 1 */
    long seq_len, vocab, d_model, heads, layers, batch, warmup;
    double lr, init_scale, weight_decay, clip;
    uint64_t seed;
    bool causal;
    cli_option rows[48]; /* the table (train_table), pointing into this and the train_args */
} train_values;

static const char *const optim_names[] = {"sgd", "momentum", "adam", NULL};
static const char *const schedule_names[] = {"cosine", "constant", NULL};
_Static_assert(QKV_SGD == 0 && QKV_MOMENTUM == 1 && QKV_ADAM == 2, "optim_names out of order");

/* train's options, also read by --config files and sweep grids (cli_train_option): their
 * values go to a (the run's) and v (the config's, before the task's defaults) */
static cli_command train_table(train_args *a, train_values *v) {
    const cli_option rows[] = {
        {"config", CLI_STRING, &v->config, .arg = "FILE",
         .help = "read options from a JSON file, e.g. a run's summary.json (which\n"
                 "repeats that run); options given here override it (default: none)"},
        {.kind = CLI_TEXT, .help = "task and model:"},
        {"task", CLI_STRING, &v->task, .arg = "T",
         .help = "the task (default copy): copy, reverse, shift, lookup, max,\n"
                 "induction, recall, sort or translate; options not given take the\n"
                 "task's defaults (induction: --seq-len 16 --layers 2 --heads 2\n"
                 "--residual --steps 600; see qkv(1))"},
        {"data", CLI_STRING, &v->data, .arg = "FILE",
         .help = "your own task: one example a line, input tokens, a tab, output\n"
                 "tokens (`_`: no target); padded, vocabulary from the file"},
        {"heldout", CLI_STRING, &v->heldout, .arg = "FILE",
         .help = "held-out examples of --data (default: a hash holds out 1 line in 8)"},
        {"seq-len", CLI_INT, &v->seq_len, QKV_MIN_TASK_SEQ_LEN, QKV_MAX_TASK_SEQ_LEN, .arg = "N",
         .help = "sequence length (default 8; or the task's)"},
        {"vocab", CLI_INT, &v->vocab, 2, QKV_MAX_VOCAB, .arg = "N",
         .help = "vocabulary size (default 16; lookup: 5 per key)"},
        {"d-model", CLI_INT, &v->d_model, 1, QKV_MAX_D_MODEL, .arg = "N",
         .help = "model width (default 64)"},
        {"heads", CLI_INT, &v->heads, 1, QKV_MAX_HEADS, .arg = "N",
         .help = "attention heads; must divide --d-model (default 1)"},
        {"layers", CLI_INT, &v->layers, 1, QKV_MAX_LAYERS, .arg = "N",
         .help = "attention layers, 1..8 (default 1; 2 for induction and recall)"},
        {"residual", CLI_SET, &v->residual, .value = 1,
         .help = "add a residual connection around each layer (default off; on for\n"
                 "induction and recall)"},
        {"no-residual", CLI_SET, &v->residual, .value = 0,
         .help = "no residual connection, whatever the task's default"},
        {"causal", CLI_FLAG, &v->causal,
         .help = "causal mask on every layer (default off; always on for shift)"},
        {"init-scale", CLI_DOUBLE, &v->init_scale, 0, QKV_MAX_INIT_SCALE, .lo_open = true,
         .arg = "X", .help = "weights ~ N(0, X^2/fan_in), embeddings ~ N(0, X^2) (default 0.5)"},
        {"dtype", CLI_CHOICE, &v->dtype, .choices = cli_dtype_names, .arg = "D",
         .help = "f32 or f64: the precision of the weights, activations, gradients\n"
                 "and optimizer state, saved as F32 or F64 tensors (default f32)"},
        {.kind = CLI_TEXT, .help = "training:"},
        {"optim", CLI_CHOICE, &v->optim, .choices = optim_names, .arg = "O",
         .help = "sgd, momentum or adam (default adam)"},
        {"lr", CLI_DOUBLE, &v->lr, 0, TRAIN_MAX_LR, .lo_open = true, .arg = "X",
         .help = "learning rate (default: adam 0.005, momentum 0.1, sgd 1)"},
        {"batch", CLI_INT, &v->batch, 1, TRAIN_MAX_BATCH, .arg = "N",
         .help = "sequences per step (default 32)"},
        {"steps", CLI_INT, &a->steps, 1, 100000000, .arg = "N",
         .help = "optimizer steps (default 3000; or the task's)"},
        {"weight-decay", CLI_DOUBLE, &v->weight_decay, 0, 1e6, .arg = "X",
         .help = "L2 for sgd/momentum, decoupled for adam (default 0)"},
        {"clip", CLI_DOUBLE, &v->clip, 0, 1e12, .arg = "X",
         .help = "clip the gradient norm to X; 0 = off (default 1)"},
        {"schedule", CLI_CHOICE, &v->schedule, .choices = schedule_names, .arg = "S",
         .help = "learning rate: cosine (decay to 0) or constant (default cosine)"},
        {"warmup", CLI_INT, &v->warmup, 0, 100000000, .arg = "N",
         .help = "linear warm-up steps (default steps/20)"},
        {"seed", CLI_U64, &v->seed, .arg = "S",
         .help = "seed of weights, data and held-out set (default 1)"},
        {"threads", CLI_INT, &a->threads, 1, 1024, .arg = "N",
         .help = "OpenMP threads (default: $OMP_NUM_THREADS, else $SLURM_CPUS_PER_TASK,\n"
                 "else all cores); results do not depend on it"},
        {.kind = CLI_TEXT, .help = "output:"},
        {"out", CLI_STRING, &a->out_dir, .arg = "DIR",
         .help = "write model.safetensors, metrics.csv and attention/ to DIR\n"
                 "(default: none, nothing is written)"},
        {"resume", CLI_STRING, &a->resume, .arg = "DIR",
         .help = "continue the run saved in DIR (up to --steps in total; default off)"},
        {"eval-every", CLI_INT, &a->eval_every, 1, 100000000, .arg = "N",
         .help = "held-out evaluation and metrics row every N steps (default steps/20,\n"
                 "and at steps 1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100, ... before\n"
                 "that); a new run's first row is step 0, before any update"},
        {"save-every", CLI_INT, &a->save_every, 0, 100000000, .arg = "N",
         .help = "also save a checkpoint every N steps (default 0: at the end)"},
        {"snapshot-every", CLI_INT, &a->snapshot_every, 0, 100000000, .arg = "K",
         .help = "keep the attention of the fixed held-out example at step 0 and every\n"
                 "K steps in DIR/snapshots/ (default 0: off)"},
        {"plot", CLI_FLAG, &a->plot,
         .help = "after saving, draw DIR/plots/ with gnuplot, as `qkv plot DIR` does;\n"
                 "without gnuplot it says so and still exits 0 (default off)"},
        {"json", CLI_FLAG, &a->json, .help = "print one JSON object on stdout at the end (default off)"},
        {"quiet", CLI_FLAG, &a->quiet,
         .help = "no progress bar or log lines, only the one-line result (default off)"},
        {"help", CLI_HELP, .help = "show this help"},
        {0}};
    _Static_assert(sizeof rows <= sizeof v->rows, "train_values.rows is too short");
    memcpy(v->rows, rows, sizeof rows);
    return (cli_command){
        .name = "train",
        .usage = "usage: qkv train [options]\n"
                 "Trains a toy attention model on a task generated from the seed, or on your examples,\n"
                 "and reports held-out accuracy against chance and attention mass (the weight the best\n"
                 "head of the layer carrying the task puts on the ideal keys).\n"
                 "\n",
        .options = v->rows,
        .column = 22};
}

train_opt_kind cli_train_option(const char *name) {
    train_args a;
    train_values v;
    cli_command cmd = train_table(&a, &v);
    int row = cli_option_row(&cmd, name);
    switch (row < 0 ? CLI_HELP : cmd.options[row].kind) {
    case CLI_FLAG:
    case CLI_SET: return TRAIN_OPT_FLAG;
    case CLI_STRING:
    case CLI_CHOICE: return TRAIN_OPT_TEXT;
    case CLI_INT:
    case CLI_U64:
    case CLI_DOUBLE: return TRAIN_OPT_NUMBER;
    default: return TRAIN_OPT_UNKNOWN;
    }
}

static int train_parse(int argc, char **argv, train_args *a) {
    *a = (train_args){.steps = 3000};
    train_values v = {.task = "copy", .optim = QKV_ADAM, .dtype = QKV_F32, .residual = -1,
                      .seq_len = -1, .d_model = -1, .heads = -1, .layers = -1, .batch = 32,
                      .warmup = -1, .init_scale = 0.5, .clip = 1, .seed = 1};
    cli_command cmd = train_table(a, &v);
    int code = cli_parse_options(&cmd, argc, argv, NULL);
    if (code != CLI_RUN) return code;
    a->steps_set = cli_option_given(&cmd, "steps");
    const char *task_name = v.task, *data_path = v.data, *heldout_path = v.heldout;
    bool task_set = cli_option_given(&cmd, "task");
    long seq_len = v.seq_len, vocab = v.vocab, d_model = v.d_model, heads = v.heads,
         layers = v.layers;
    int residual = v.residual;
    if (!a->threads && !cli_default_threads(&a->threads)) return EXIT_USAGE;
    if (a->resume) {
        /* the rest comes from the saved run */
        static const char *const with_resume[] = {"steps", "out", "threads", "resume",
                                                  "eval-every", "save-every", "snapshot-every",
                                                  "plot", "json", "quiet"};
        bool model_opts = false;
        for (const cli_option *o = cmd.options; o->kind != CLI_END; o++) {
            bool allowed = false;
            for (size_t i = 0; i < sizeof with_resume / sizeof with_resume[0]; i++)
                allowed = allowed || (o->name && !strcmp(o->name, with_resume[i]));
            model_opts = model_opts || (o->given && !allowed);
        }
        if (model_opts) {
            cli_error("train: --resume continues a saved run; only --steps, --out, --threads, "
                      "--eval-every, --save-every, --snapshot-every, --plot, --json and --quiet "
                      "may be given with it (not --config)");
            return EXIT_USAGE;
        }
        return CLI_RUN; /* the rest comes from the saved run (out_dir defaults to it) */
    }
    if (data_path && (task_set || seq_len >= 0 || vocab)) {
        cli_error("train: --data FILE sets the task, the length and the vocabulary; leave out "
                  "%s", task_set ? "--task" : seq_len >= 0 ? "--seq-len" : "--vocab");
        return EXIT_USAGE;
    }
    if (heldout_path && !data_path) {
        cli_error("train: --heldout FILE names held-out examples of a --data FILE");
        return EXIT_USAGE;
    }
    if (data_path) task_name = "data";
    const task_defaults *d = defaults_of(task_name);
    if (seq_len < 0) seq_len = d->seq_len;
    if (d_model < 0) d_model = d->d_model;
    if (heads < 0) heads = d->heads;
    if (layers < 0) layers = d->layers;
    if (residual < 0) residual = d->residual;
    if (!a->steps_set) a->steps = d->steps;
    train_config *cfg = &a->cfg;
    *cfg = (train_config){.batch = (int)v.batch, .steps = a->steps, .seed = v.seed,
                          .weight_decay = v.weight_decay, .clip = v.clip,
                          .optim = (qkv_optim_kind)v.optim};
    cfg->cosine = !strcmp(schedule_names[v.schedule], "cosine");
    cfg->warmup = v.warmup >= 0 ? v.warmup : a->steps / 20;
    cfg->lr = v.lr > 0                    ? v.lr
              : cfg->optim == QKV_ADAM     ? d->adam_lr
              : cfg->optim == QKV_MOMENTUM ? 0.1
                                           : 1.0;
    if (data_path) {
        /* absolute paths: the model file names them, for eval and --resume from anywhere */
        const char *paths[2] = {data_path, heldout_path};
        char *dst[2] = {cfg->data_path, cfg->heldout_path};
        for (int k = 0; k < 2; k++) {
            if (!paths[k]) continue;
            char *abs = realpath(paths[k], NULL);
            if (!abs || strlen(abs) >= sizeof cfg->data_path) {
                cli_error("%s: %s", paths[k], abs ? "the path is too long" : strerror(errno));
                free(abs);
                return EXIT_IO;
            }
            snprintf(dst[k], sizeof cfg->data_path, "%s", abs);
            free(abs);
        }
        cfg->task.kind = QKV_TASK_DATA; /* its sizes come from the file (trainer_init) */
        seq_len = 2;
    } else {
        qkv_status s = qkv_task_init(&cfg->task, task_name, (int)seq_len, (int)vocab);
        if (s != QKV_OK) {
            cli_error("%s", qkv_last_error());
            return cli_exit_for(s);
        }
    }
    cfg->model = (qkv_model_config){.vocab = cfg->task.vocab, .seq_len = (int)seq_len,
                                    .d_model = (int)d_model, .heads = (int)heads,
                                    .layers = (int)layers, .residual = residual == 1,
                                    .causal = v.causal || cfg->task.causal,
                                    .init_scale = v.init_scale, .dtype = (qkv_dtype)v.dtype,
                                    .target_len = cfg->task.target_len};
    if (!a->out_dir && (a->plot || a->snapshot_every)) {
        cli_error("train: %s needs --out DIR", a->plot ? "--plot" : "--snapshot-every");
        return EXIT_USAGE;
    }
    return CLI_RUN;
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
        if (p->resumed && total != p->old_steps && step < total && !p->quiet)
            say_schedule_change(p->out, t, p->old_steps);
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
    const char *out_dir = a->out_dir, *resume = a->resume;
    bool json = a->json, quiet = a->quiet;
    int code = cli_set_threads(a->threads);
    if (code != EXIT_OK) return code;

    trainer t;
    qkv_status s;
    int64_t old_steps = 0; /* a resumed run's --steps before this command */
    char path[1100];
    if (resume) {
        if (!cli_model_path(resume, path, sizeof path)) return EXIT_IO;
        if ((s = trainer_load(&t, path)) != QKV_OK) {
            cli_error("%s", qkv_last_error());
            return cli_exit_for(s);
        }
        old_steps = t.cfg.steps;
        if (a->steps_set) t.cfg.steps = a->steps;
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
    bool tty = isatty(fileno(prog));
    train_progress p = {.out = prog, .bar = !quiet && tty, .log = !quiet && !tty && !json,
                        .quiet = quiet, .resumed = resume != NULL, .old_steps = old_steps};
    run_options o = {.out_dir = out_dir, .resume_dir = resume, .eval_every = a->eval_every,
                     .save_every = a->save_every, .snapshot_every = a->snapshot_every};
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
            cli_print_result_json(&t, run.last, t.optim.step, p.seconds, "train",
                              t.optim.step > run.start_step);
        else { /* --quiet too: the summary's first line is what a script reads */
            char tail[1200];
            snprintf(tail, sizeof tail, "%" PRId64 " steps in %.2f s%s%s", t.optim.step,
                     p.seconds, out_dir ? ", saved to " : "", out_dir ? out_dir : "");
            cli_print_summary(&t, &run.last, tail, quiet);
            if (!quiet) cli_print_example(&t), cli_print_induction_step(&t, &run.metrics);
        }
    }
    if (code == EXIT_OK && a->plot) {
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
    train_args scratch;
    train_values values;
    cli_command cmd = train_table(&scratch, &values);
    const char *config = parse_only ? NULL : cli_option_last(&cmd, argc, argv, "config");
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
