/* options.h - the schema of `qkv train`'s options: one row per option, read by everything that
 * names one. The command line's table and help (src/cli/cmd_train.c), the keys of a run's
 * config in summary.json (run.c), `--config` files (src/cli/config.c), a sweep's cells (through
 * train's parser), trainer_check_config's ranges, the model file's config keys (their types,
 * ranges, words and defaults: checkpoint.c) and the man page's option list (checked by
 * tests/man_test.sh) all come from train_option_table. Adding an option: docs/architecture.md,
 * "Adding a training option". */
#ifndef QKV_TRAIN_OPTIONS_H
#define QKV_TRAIN_OPTIONS_H

#include "train/trainer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The values of train's options as given, before the task's defaults fill in the rest
 * (train_options_init sets what "not given" is: -1 for the sizes the task decides). */
typedef struct {
    const char *config, *task, *data, *heldout, *out, *resume;
    long seq_len, vocab, d_model, heads, layers, batch, warmup, steps, threads;
    long eval_every, save_every, snapshot_every;
    long mlp;      /* -1: the task's, as batch (0: full), weight_decay, clip, schedule, beta2 */
    int residual; /* -1: the task's; 0 or 1 */
    int optim, schedule, dtype, act, norm; /* the index of the value in the row's choices */
    int init;      /* the same, or -1: the task's */
    double lr, init_scale, weight_decay, clip; /* lr 0: the optimizer's default; init_scale
                                                  -1: the scheme's (qkv 0.5, paper 1) */
    double beta1, beta2;
    uint64_t seed;
    /* modular */
    long modulus;
    int op;
    double train_frac;
    uint64_t data_seed;
    bool causal, plot, json, quiet, force;
} train_options;

typedef enum {
    OPTION_HEADING, /* no option: a heading of the help ("training:") */
    OPTION_INT,     /* long, in lo..hi */
    OPTION_U64,     /* uint64_t, any */
    OPTION_DOUBLE,  /* double, in lo..hi (above lo when lo_open) */
    OPTION_TEXT,    /* const char *, as given */
    OPTION_CHOICE,  /* int: the index of the value in `choices` */
    OPTION_FLAG,    /* bool: set, takes no value */
    OPTION_SET,     /* int: `set_value`, takes no value (--residual 1, --no-residual 0) */
} train_option_type;

/* What a run's config records of an option (its key in summary.json and --config files). */
typedef enum {
    SAVED_NOT,     /* not part of a run's config (--out, --json, --threads ...) */
    SAVED_ALWAYS,  /* every run records it */
    SAVED_TASK,    /* a built-in task's run only: its data file sets it */
    SAVED_DATA,    /* a data file's run only */
    SAVED_MODULAR, /* a modular run only (--task modular) */
} train_option_saved;

typedef struct {
    const char *flag;      /* "seq-len" for --seq-len; NULL for a heading */
    const char *key;       /* "seq_len": its key in a run's config; NULL for a heading */
    train_option_type type;
    size_t offset;         /* of its value in train_options */
    double lo, hi;         /* OPTION_INT and OPTION_DOUBLE */
    bool lo_open;
    const char *const *choices; /* OPTION_CHOICE: the values, NULL-ended */
    int set_value;         /* OPTION_SET */
    const char *arg;       /* the value's name in the help ("N"), NULL for none */
    const char *deflt;     /* the default as the help and the man page say it ("64", "adam") */
    const char *help;      /* its lines in the help, '\n' between; the heading's text */
    train_option_saved saved;
    bool with_resume;      /* may be given with --resume */
    bool command_line_only; /* not in a --config file (--config, --out, --resume) */
    const char *field;     /* the train_config field the library's messages name, where it is
                              not `key` ("data_path" for --data); NULL: `key` */
    const char *word;      /* OPTION_INT: a word it takes besides numbers ("full" for --batch),
                              standing for word_value; NULL: none */
    long word_value;
} train_option;

/* The rows in the order of the help, ended by a row whose flag and help are NULL:
 * TRAIN_OPTION_ROWS rows and that end (options.c asserts the count, so that a table that
 * copies them, as train's parser does, can be sized at compile time). */
enum { TRAIN_OPTION_ROWS = 46 };
extern const train_option train_option_table[TRAIN_OPTION_ROWS + 1];
/* The row of --flag (or of config key `key`: '_' for '-'), or NULL. */
const train_option *train_option_find(const char *flag);
/* The row whose value is the config field `field` (its `field`, else its `key`: "data_path",
 * "seq_len"), or NULL: how the command line names a field in the library's messages. */
const train_option *train_option_of_field(const char *field);
/* Options as nothing was given: the defaults that do not depend on the task, -1 for those
 * that do. */
void train_options_init(train_options *o);
/* Where a row's value lives in *o. */
void *train_option_value(train_options *o, const train_option *row);
/* One row's value as text, as a command line gives it ("0.005", "adam"); flags "true"/"false". */
void train_option_format(const train_options *o, const train_option *row, char *buf, size_t len);

/* The config of a new run from options already checked against each other (the command line
 * does that): the task's defaults fill in what was not given; `steps_given` says whether
 * o->steps was. The data file's paths are taken as they are (the caller makes them absolute).
 * QKV_ERR_VALUE with a message naming the options when the task refuses them. */
qkv_status train_options_to_config(const train_options *o, bool steps_given,
                                   train_config *cfg);

/* The options that repeat a run: its config and its run options, as a summary.json records
 * them (the inverse of train_options_to_config on what the run used). */
void train_options_of_run(const train_config *cfg, int64_t eval_every, int64_t save_every,
                          int64_t snapshot_every, train_options *o);

/* A row's value against its range: QKV_ERR_VALUE naming the option ("--steps 0 is out of
 * range (1..100000000)") when it is outside. */
qkv_status train_option_check(const char *key, double value);

#endif
