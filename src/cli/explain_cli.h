/* explain_cli.h - what ablate, patch, attribute, lens and circuits (and eval --data) share at
 * the command line: the model as an operand or --model, its loading, the JSON to stdout or a
 * file, and the skeleton of a run (explain_cli_run). */
#ifndef QKV_CLI_EXPLAIN_H
#define QKV_CLI_EXPLAIN_H

#include "cli.h"
#include "io/io.h"
#include "explore/eval_data.h"
#include "explore/explain.h"
#include "train/loaded_model.h"

#include <cjson/cJSON.h>

/* The --site and --over rows of ablate and patch (explore/explain.h's names), `verb` saying
 * what happens to the site ("patched"). */
#define EXPLAIN_CLI_SITE_ROWS(verb, site, over)                                                  \
    {"site", CLI_CHOICE, (site), .choices = explain_site_names, .arg = "S",                      \
     .help = "what is " verb ": z (a head's output, the default), q, k, v, pattern\n"            \
             "(its attention weights), resid-pre or resid-post (the stream entering\n"           \
             "or leaving a layer); with an MLP, resid-mid (the stream between the\n"             \
             "attention and the MLP), mlp-pre and mlp-post (each neuron before and\n"            \
             "after the activation) or mlp-out (what the MLP adds); with LayerNorm,\n"         \
             "ln-scale (each LayerNorm's 1/sigma: before the attention, before the\n"          \
             "MLP, and the final one)"},                                                     \
    {"over", CLI_CHOICE, (over), .choices = explain_over_names, .arg = "W",                      \
     .help = "head: each head at every position (the default); head-position: at\n"              \
             "each query position (z, q, pattern); key-position: at each key\n"                  \
             "position (k, v, pattern); layer-position: each layer at each\n"                    \
             "position (the stream's and mlp-out's default; also every neuron of\n"              \
             "mlp-pre, mlp-post); neuron: each MLP neuron at every position\n"                   \
             "(mlp-pre and mlp-post's default); neuron-position: at each position;\n"          \
             "ln: each LayerNorm at every position (ln-scale's default);\n"                     \
             "ln-position: each LayerNorm at each position"}

/* The model named by --model (`option`, may be NULL) or by the one operand argv[first]:
 * into *model, or EXIT_USAGE after one line (none, two, or an extra operand). */
int explain_cli_model(const char *who, const char *option, int argc, char **argv, int first,
                      const char **model);
/* Sets the threads (`threads` < 0: leaves them as they are), finds the model file (a
 * directory's model.safetensors) into path, and loads it in `dtype` (TRAIN_DTYPE_OF_FILE or a
 * qkv_dtype): EXIT_OK or the exit code after one line. */
int explain_cli_load(const char *model, int dtype, long threads, loaded_model *lm, char *path,
                     size_t len);
/* The JSON object written to `out` (atomically) when not NULL, before anything is printed:
 * EXIT_OK, or the exit code after one line (nothing else is printed then). */
int explain_cli_save(const cJSON *o, const char *out);
/* explain_cli_save of `o` to `out` and atomic_commit of af (when open): both or neither. A
 * failure of either puts back what the other replaced, and a signal waits until the two are
 * settled. EXIT_OK, or the exit code after one line. */
int explain_cli_save_both(const cJSON *o, const char *out, atomic_file *af);
/* Then, with `json`, the object on stdout as one line; else "wrote OUT" when there is one
 * (after the command's table). EXIT_OK, or EXIT_NOMEM after one line when the text does not
 * fit in memory (nothing printed). */
int explain_cli_print(const cJSON *o, bool json, const char *out);
/* The analysis commands' shared skeleton: load the model (explain_cli_load), check the
 * outputs against the inputs (the model, its data file, `input`), compute (`run`), build the
 * JSON object (`json`), save it to `out`, print the table (`table`, unless `print_json`) and
 * the JSON, free. `run` and `table` return a status whose message qkv_last_error holds (a
 * usage error: QKV_ERR_VALUE, exit 2), printed as "WHO: message"; `json` returns NULL when
 * out of memory ("WHO: out of memory"). A failure of `table` is printed after the rest (the
 * table so far, "wrote OUT"). `state` is the command's own. Returns the exit code. */
typedef struct {
    const char *who;          /* "attribute": the command, as its messages begin */
    const char *model, *out;  /* --model (or DIR) and --out */
    const char *input;        /* a further file it reads (patch --pairs), or NULL */
    const cli_output *outputs; /* the outputs checked, in order (patch: --per-pair, --out);
                                  NULL: --out alone */
    atomic_file *second;      /* a second output that `run` may open: committed with --out
                                 (explain_cli_save_both), or aborted on a failure; or NULL */
    int dtype;                /* TRAIN_DTYPE_OF_FILE or a qkv_dtype */
    long threads;             /* -1: left as they are (circuits runs none) */
    bool print_json;          /* --json: the object on stdout instead of the table */
    bool json_when_asked;     /* `json` only for --json or --out (circuits': every matrix) */
    bool plain_errors;        /* the messages printed as they are, each naming what failed
                                 itself; `json` then sets its own (qkv_fail) before NULL */
    qkv_status (*run)(loaded_model *lm, void *state);
    cJSON *(*json)(const loaded_model *lm, void *state);
    qkv_status (*table)(const loaded_model *lm, void *state);
    void *state;
} explain_cli_job;
int explain_cli_run(const explain_cli_job *job);

/* --heads "2.1,2.2" (layers and heads from 1): the heads 0-based, malloc'd into *heads
 * (free it also after a failure), their count into *n. QKV_ERR_VALUE naming --heads and the
 * culprit: not LAYER.HEAD, a head the model lacks, a head listed twice, none. */
qkv_status explain_cli_parse_heads(const char *text, const loaded_model *lm, explain_head **heads,
                                   int *n);

/* The examples of --data DATA (lens, attribute): a file in the format of eval --data, read
 * into *file (eval_file_read: QKV_ERR_FORMAT naming a bad line; free it after a failure too),
 * with each example's line into *lines; or for "heldout" the model's held-out set (*lines
 * NULL). */
qkv_status explain_cli_data_set(loaded_model *lm, const char *data, eval_file *file,
                                example_set *set, const int64_t **lines);

/* cJSON allocates through qkv's hooks (set at start-up by main): a failed allocation of any
 * JSON object, item or text is remembered, and explain_cli_save refuses an object built
 * while one failed (an item that could not be added is missing from it): exit 6, nothing
 * written. No JSON that qkv writes or prints is ever missing data. */
void explain_cli_json_hooks(void);

#endif
