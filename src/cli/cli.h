/* cli.h - what the qkv commands share: exit codes, value parsing, messages. */
#ifndef QKV_CLI_H
#define QKV_CLI_H

#include "qkv.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes, documented in docs/errors.md. */
enum {
    EXIT_OK = 0,
    EXIT_FAILED = 1, /* the command ran but its check failed (gradcheck, a target) */
    EXIT_USAGE = 2,  /* unknown command or option, bad value */
    EXIT_IO = 3,     /* a file could not be read or written */
    EXIT_FORMAT = 4, /* a file is corrupt or does not match */
    EXIT_NUMERIC = 5,/* training diverged */
    EXIT_NOMEM = 6,  /* the model would not fit in memory, or threads cannot start */
    EXIT_INTERRUPTED = 7, /* SIGINT, SIGTERM or SIGHUP: stopped, temporaries removed */
};

/* What a command's parse step returns when the command line is valid and the command should
 * run (any other value is the exit code: help was shown, or a bad option was reported). */
#define CLI_RUN (-1)

/* On a terminal, stdout's and stderr's lines are wrapped at spaces to its width, never inside
 * a word (terminal.c); redirected, they pass unchanged. Called once, by main. */
void cli_wrap_terminal(void);
/* The width of the terminal stream f writes to, in columns; 0 when it is not a terminal. */
int cli_terminal_columns(FILE *f);

/* Prints "qkv: <message>" on stderr, one line (control characters in it become '?'). */
void cli_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* Until it is set back to NULL, cli_error puts "<context>: " before every message (sweep uses
 * it to name the cell whose train options it is checking). */
void cli_error_context(const char *context);
/* The flag that sets a config field in qkv train ("seq_len" -> "--seq-len"), NULL for a field
 * with none. cli_main gives it to qkv_set_field_names, so that the library's messages about a
 * config name the flags a user typed. */
const char *cli_flag_of_field(const char *field);
/* Maps a library status to an exit code. */
int cli_exit_for(qkv_status status);

/* ---- options (options.c): every command's options are a table, read by one parser ---- */
typedef enum {
    CLI_END,    /* ends a table */
    CLI_INT,    /* long: a whole number in lo..hi */
    CLI_U64,    /* uint64_t: a non-negative whole number (a seed) */
    CLI_DOUBLE, /* double: a finite number in lo..hi (above lo, with lo_open) */
    CLI_STRING, /* const char *: the text as given */
    CLI_CHOICE, /* int: the index of the value in `choices` */
    CLI_CUSTOM, /* `parse(text, dest)`, which prints one line and returns false if it refuses */
    CLI_FLAG,   /* bool: true; takes no value */
    CLI_SET,    /* int: `value`; takes no value (--residual 1, --no-residual 0) */
    CLI_HELP,   /* --help and -h: print the help, exit 0 */
    CLI_TEXT,   /* no option: a line of the help (a heading, a note), `help` as it is */
} cli_opt_kind;

typedef struct {
    const char *name;   /* the long name, without "--" (NULL for CLI_TEXT) */
    cli_opt_kind kind;
    void *dest;         /* where the value goes: a long *, a double *, ... (see the kinds) */
    double lo, hi;      /* CLI_INT and CLI_DOUBLE: the range */
    bool lo_open;       /* CLI_DOUBLE: above lo, lo itself refused */
    const char *arg;    /* the value's name in the help ("N", "FILE"); NULL for no value */
    const char *help;   /* its lines in the help, separated by '\n'; NULL: a CLI_TEXT row
                         * speaks of it, it has no line of its own */
    const char *const *choices;                /* CLI_CHOICE: the values, NULL-ended */
    bool (*parse)(const char *text, void *dest); /* CLI_CUSTOM */
    int value;          /* CLI_SET */
    const char *word;   /* CLI_INT: a word it takes besides numbers, storing word_value */
    long word_value;
    bool given;         /* set by cli_parse_options: the option was on the command line */
} cli_option;

typedef struct {
    const char *name;       /* "train", "study precision": the start of its messages */
    const char *usage;      /* the help before the options: what the command does */
    cli_option *options;    /* the table, ended by a CLI_END row */
    int column;             /* where the help of each option starts */
    const char *epilog;     /* the help after the options (exit codes), or NULL */
    bool operands;          /* it takes arguments that are not options (else one is refused) */
    bool stop_at_operand;   /* options end at the first operand or "--" (sweep) */
} cli_command;

/* --no-selftest, a row of the table of every command that computes (train, eval, the
 * analysis commands, inspect, grads, bench, gradcheck, study, circuits). Without it, a good
 * command line of such a command runs the start-up probe of the SIMD path once, before the
 * command computes anything (cli_parse_options calls cli_simd_probe): a path whose bits differ
 * from the plain C path's is named on stderr and left for the next one that agrees.
 * QKV_NO_SELFTEST set (not empty) skips it as --no-selftest does, for scripts. */
extern bool cli_no_selftest;
#define CLI_NO_SELFTEST_ROW                                                                      \
    {"no-selftest", CLI_FLAG, &cli_no_selftest,                                                  \
     .help = "skip the start-up check of the SIMD path's bits (qkv selftest)"}
/* cli_main arms the probe for a real run (not the fuzz target's parse only). */
void cli_arm_simd_probe(bool armed);
void cli_simd_probe(void);

/* Reads argv (argv[0] the command) by cmd's table, in order, each value checked as it comes:
 * CLI_RUN with *first_operand (if not NULL) the index of the first argument that is not an
 * option; EXIT_OK after printing the help; else the exit code after one line ("train:
 * unknown option '--bogus' (see qkv train --help)", "--lr: 'abc' is not a finite number",
 * "--dtype: 'f16' is not f32 or f64", "train: unexpected argument 'x'"). */
int cli_parse_options(const cli_command *cmd, int argc, char **argv, int *first_operand);
/* The help: usage, then a line per option (wrapped lines of its help at cmd->column), epilog. */
void cli_print_usage(const cli_command *cmd, FILE *out);
/* The row of option `name` in cmd's table, or -1; whether the last parse met it. */
int cli_option_row(const cli_command *cmd, const char *name);
bool cli_option_given(const cli_command *cmd, const char *name);
/* The value of the last `name` in argv, read ahead of the real parse (which reports errors),
 * storing nothing; NULL if it is not there. */
const char *cli_option_last(const cli_command *cmd, int argc, char **argv, const char *name);
/* How many times option `name` is given in argv (the same quiet scan). */
int cli_option_count(const cli_command *cmd, int argc, char **argv, const char *name);
/* The values of CLI_CHOICE --dtype, in the order of qkv_dtype (f32, f64). */
extern const char *const cli_dtype_names[];


/* Strict number parsing of option values: the whole string must be a number within
 * [lo, hi]. On failure prints "qkv: --name: ..." and returns false. */
bool cli_parse_int(const char *name, const char *text, long lo, long hi, long *out);
bool cli_parse_u64(const char *name, const char *text, uint64_t *out);
/* Creates `dir` and any missing parents (mkdir -p); false after printing why not, the
 * message starting with `who` (e.g. "study: ", or ""). */
bool cli_make_dirs(const char *who, const char *dir);
bool cli_parse_double(const char *name, const char *text, double lo, double hi, bool lo_open,
                      double *out);

/* An output file of a command: the option that names it ("out", "per-example") and its path,
 * NULL when the option is not given. A command's list of them ends with a row whose option is
 * NULL. */
typedef struct {
    const char *option, *path;
} cli_output;
/* The rule for a command's output files, checked before it writes any of them (and before it
 * computes, where it can): no output is one of the inputs (`inputs`, NULL-ended: the same file
 * under any name, hard or symbolic link, exit 2); no two outputs are one file (exit 2); and
 * each can be written (atomic_open's checks, its temporary made and removed: exit 3 for a
 * missing directory, a device, a FIFO or a directory in its place). EXIT_OK, or the exit
 * code after one line naming `who` and the option. A refused command so changes no file. */
int cli_check_outputs(const char *who, const cli_output *outs, const char *const *inputs);

/* --threads when it is not given: 0 (OpenMP's default: $OMP_NUM_THREADS if set, else every
 * core) unless OMP_NUM_THREADS is unset and SLURM_CPUS_PER_TASK is set, which then gives it.
 * False after one line when SLURM_CPUS_PER_TASK is not a number of threads. */
bool cli_default_threads(long *threads);

/* What value train option `name` (without "--") takes: none (a flag), text (task, optim,
 * schedule, out, resume, config) or a number; unknown if train has no such option. */
typedef enum { TRAIN_OPT_UNKNOWN, TRAIN_OPT_FLAG, TRAIN_OPT_TEXT, TRAIN_OPT_NUMBER } train_opt_kind;
train_opt_kind cli_train_option(const char *name);
/* Reads the options of a `train --config` file (config.c) as command-line arguments: "--lr",
 * "0.01", "--residual", ... into a malloc'd array of *argc malloc'd strings, each option's
 * value read as kind_of (cli_train_option) says. A run's summary.json is read through its
 * "config". Returns EXIT_OK or an exit code after one line. */
int cli_config_args(const char *path, train_opt_kind (*kind_of)(const char *name), int *argc,
                    char ***argv);
/* Frees what cli_config_args (or another builder of argument lists) returned. */
void cli_free_args(int argc, char **argv);
/* Checks a train command line as `qkv train` would, its --config file included, without
 * running it: CLI_RUN if it would run, else the exit code after one line (or help). */
int cli_train_check(int argc, char **argv);

/* "DIR" (a directory) or "FILE" -> the model file DIR/model.safetensors or FILE, into out.
 * A path that does not fit gives one line and false (exit EXIT_IO). */
bool cli_model_path(const char *arg, char *out, size_t len);

/* Draws the plots of a training directory (or a file of qkv inspect --out) into DIR/plots/
 * (cmd_plot.c, plot_dir), in format "png", "svg" or "html"; returns an exit code. If gnuplot
 * is not on PATH it prints one line saying so, sets *no_gnuplot and returns EXIT_FAILED.
 * `verbose` says on stdout what was written. */
int cli_plot(const char *dir, const char *format, bool verbose, bool *no_gnuplot);
/* plot_script (one script of scripts/ inside `dir`), with cli_plot's messages and exit codes. */
int cli_gnuplot(const char *script, const char *dir, const char *out, const char *format,
                int nargs, const char *const *args, bool *no_gnuplot);

/* guard.c: signals and limits. cli_guard_install (main() calls it) makes SIGINT, SIGTERM and
 * SIGHUP remove the temporaries being written and exit EXIT_INTERRUPTED with one line, and
 * makes a write past `ulimit -f` fail with EFBIG instead of killing qkv. The note, if set,
 * follows that line ("the run in DIR keeps step 40"). Under an address-space limit it first
 * grows the main thread's stack to what qkv may need (where a later growth would be SIGSEGV):
 * EXIT_NOMEM with one line when the limit leaves no room for it, else EXIT_OK. */
int cli_guard_install(void);
void cli_set_interrupt_note(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
void cli_clear_interrupt_note(void);
/* Between cli_guard_hold and cli_guard_release a signal waits; release answers it then, after
 * the note has been set to the checkpoint just saved. */
void cli_guard_hold(void);
void cli_guard_release(void);
/* qkv bench: its default is every core, whatever else runs (cli_set_threads). */
void cli_threads_ignore_load(void);
/* Sets the OpenMP thread count: `requested`, or (0) the default, after checking that the
 * threads can start. The default is OpenMP's (OMP_NUM_THREADS, else every core), less the
 * cores that other programs keep busy at the start (/proc/loadavg's running tasks, the
 * fewest of a few looks; at least one thread; not for bench): on a core another program
 * holds, a thread holds up every thread that waits for it (docs/performance.md, "A machine
 * doing something else"). Results are the same bits on any count. A requested count that
 * cannot start gives one line and EXIT_NOMEM; the default quietly becomes as many as can.
 * Returns EXIT_OK or EXIT_NOMEM. */
int cli_set_threads(long requested);

/* The command line: `qkv COMMAND [options]` (cli.c). With parse_only, each command only reads
 * and checks its options, printing its help or one error line, and returns CLI_RUN where it
 * would have run: nothing is read, written or allocated beyond the options. main() calls
 * cli_main(argc, argv, false); the fuzz targets call it with true. */
int cli_main(int argc, char **argv, bool parse_only);

/* The commands: argc/argv start at the command name; parse_only as for cli_main. */
int cmd_gradcheck(int argc, char **argv, bool parse_only);
int cmd_selftest(int argc, char **argv, bool parse_only);
int cmd_train(int argc, char **argv, bool parse_only);
int cmd_eval(int argc, char **argv, bool parse_only);
int cmd_grads(int argc, char **argv, bool parse_only);
int cmd_plot(int argc, char **argv, bool parse_only);
int cmd_study(int argc, char **argv, bool parse_only);
/* `qkv study precision` (cmd_study_precision.c): argv starts at "precision". */
int study_precision(int argc, char **argv, bool parse_only);
int cmd_bench(int argc, char **argv, bool parse_only);
int cmd_inspect(int argc, char **argv, bool parse_only);
int cmd_sweep(int argc, char **argv, bool parse_only);
int cmd_ablate(int argc, char **argv, bool parse_only);
int cmd_patch(int argc, char **argv, bool parse_only);
int cmd_attribute(int argc, char **argv, bool parse_only);
int cmd_lens(int argc, char **argv, bool parse_only);
int cmd_circuits(int argc, char **argv, bool parse_only);
int cmd_fourier(int argc, char **argv, bool parse_only);

#endif
