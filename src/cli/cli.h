/* cli.h - what the qkv commands share: exit codes, value parsing, messages. */
#ifndef QKV_CLI_H
#define QKV_CLI_H

#include "qkv.h"

#include <stdbool.h>
#include <stdint.h>

/* Exit codes, documented in docs/errors.md. */
enum {
    EXIT_OK = 0,
    EXIT_FAILED = 1, /* the command ran but its check failed (gradcheck, a target) */
    EXIT_USAGE = 2,  /* unknown command or option, bad value */
    EXIT_IO = 3,     /* a file could not be read or written */
    EXIT_FORMAT = 4, /* a file is corrupt or does not match */
    EXIT_NUMERIC = 5,/* training diverged */
    EXIT_NOMEM = 6,  /* the model would not fit in memory */
};

/* Prints "qkv: <message>" on stderr, one line. */
void cli_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* Maps a library status to an exit code. */
int cli_exit_for(qkv_status status);

/* Strict number parsing of option values: the whole string must be a number within
 * [lo, hi]. On failure prints "qkv: --name: ..." and returns false. */
bool cli_parse_int(const char *name, const char *text, long lo, long hi, long *out);
bool cli_parse_u64(const char *name, const char *text, uint64_t *out);
bool cli_parse_double(const char *name, const char *text, double lo, double hi, bool lo_open,
                      double *out);

/* Draws the plots of a training directory into DIR/plots/ with gnuplot (plot.c), in format
 * "png" or "svg"; returns an exit code. If gnuplot is not on PATH it prints one line saying so,
 * sets *no_gnuplot and returns EXIT_FAILED. `verbose` lists what was written on stdout. */
int cli_plot(const char *dir, const char *format, bool verbose, bool *no_gnuplot);
/* Runs one script of scripts/ as `gnuplot -c SCRIPT OUT FORMAT ARGS...`, writing `out`
 * atomically; the same gnuplot-missing behaviour, naming `data_dir`. */
int cli_gnuplot(const char *script, const char *out, const char *format, int nargs,
                const char *const *args, const char *data_dir, bool *no_gnuplot);

/* The commands: argc/argv start at the command name. */
int cmd_gradcheck(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_grads(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_study(int argc, char **argv);
int cmd_bench(int argc, char **argv);

#endif
