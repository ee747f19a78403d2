/* loaded_model.h - a saved model loaded for analysis: the model, what it was trained on, its
 * held-out examples, and one arena for batches of ANALYSIS_BATCH sequences. */
#ifndef QKV_LOADED_MODEL_H
#define QKV_LOADED_MODEL_H

#include "train/checkpoint.h"
#include "train/hints.h"
#include "train/trainer.h"

/* What every analysis (ablate, patch, attribute, lens, inspect, circuits, eval) reads of a
 * model file: no optimizer, no training batches, no shards. */
typedef struct {
    qkv_model model;
    /* The config it was trained with, as the file's metadata holds it: the task (a data run's
     * sizes are its file's), the data file's path (inspect names it), the learning rate
     * (eval's hint names it). */
    train_config cfg;
    dataset *data;          /* a data run's examples and vocabulary (owned), else NULL */
    int target_len;         /* To: T, or an encoder-decoder's output length */
    int n_held;             /* the held-out examples, as training evaluated them */
    int32_t *held_tokens, *held_targets, *held_lengths; /* (n_held, T), (n_held, To), (n_held)
                                                           for a data run, else NULL */
    int64_t step;           /* the step the model was saved at */
    qkv_ctx *ctx;           /* the analysis arena, no-grad: loaded_model_reserve sizes it */
    uint8_t *ideal;         /* (T, T): scratch for loaded_model_evaluate's ideal patterns */
} loaded_model;

/* Loads model file `path` in `dtype` (TRAIN_DTYPE_OF_FILE, QKV_F32 or QKV_F64) with its task
 * or data file, with trainer_load_as's checks and messages. */
qkv_status loaded_model_load(loaded_model *m, const char *path, int dtype);
/* Moves a trainer's model, config, data and held-out set into m, and frees the rest of it
 * (t is left empty): a model trained in memory, analysed as if loaded. */
void loaded_model_take(loaded_model *m, trainer *t);
void loaded_model_free(loaded_model *m);

/* The analysis commands score ANALYSIS_BATCH sequences per forward, all in m->ctx. */
#define ANALYSIS_BATCH 256
/* The one memory check of an analysis: a whole step's estimate at min(n, ANALYSIS_BATCH)
 * sequences (it bounds a forward with its probes and head edits) plus the parameters against
 * half of memory_limit, then m->ctx reserved at that size, so that no analysis grows an arena
 * past what was checked (the arena's abort is never reached). QKV_ERR_NOMEM with the line
 * "COMMAND: scoring N sequences at a time needs about X MiB, more than half of WHAT (Y MiB)",
 * or "COMMAND: out of memory for scoring ..." when the reservation fails; COMMAND NULL: no
 * prefix (the caller adds its own). */
qkv_status loaded_model_reserve(loaded_model *m, int n, const char *command);
/* An arena of `bytes` for an analysis's own tensors, checked as loaded_model_reserve checks:
 * NULL with QKV_ERR_NOMEM set (the line begins "COMMAND: "; none for NULL). */
qkv_ctx *loaded_model_arena(double bytes, const char *command);

/* The held-out examples. */
example_set loaded_model_heldout(const loaded_model *m);
/* Loss, accuracy, attention mass and head scores over `set`, as training's evaluation
 * computes them (train_evaluate_set), in m->ctx. */
eval_result loaded_model_evaluate(loaded_model *m, example_set set);
/* The hint plain eval gives for r (train_hint_of over m's config, step and held-out set). */
train_hint_kind loaded_model_hint(const loaded_model *m, const eval_result *r, char *buf,
                                  size_t len);

/* A token's label: the task's (qkv_task_token_label), or a data file's token string. */
void loaded_model_token_label(const loaded_model *m, int32_t token, char *buf, size_t len);
/* The token itself, for JSON, which never shortens a token: a data file's token string
 * (UTF-8, whole; "?" for no token), or the task's label written into buf. */
const char *loaded_model_token_text(const loaded_model *m, int32_t token, char *buf,
                                    size_t len);
/* An output class's label and text (train_class_label): lookup's values read "v2", not as the
 * pair token "k0:v2" of the same id. */
void loaded_model_class_label(const loaded_model *m, int32_t c, char *buf, size_t len);
const char *loaded_model_class_text(const loaded_model *m, int32_t c, char *buf, size_t len);

#endif
