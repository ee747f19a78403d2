/* trainer.h - the training layer: one task, one model, one optimizer, and their files. */
#ifndef QKV_TRAIN_H
#define QKV_TRAIN_H

#include "io/paths.h"
#include "model/dataset.h"
#include "qkv.h"

#define TRAIN_HELDOUT 512 /* held-out sequences, fixed by the seed */
#define EVAL_BATCH 64     /* sequences of one forward of an evaluation (eval_ctx's size) */
/* Limits of a train config beyond its model's (qkv.h) */
#define TRAIN_MAX_BATCH 65536 /* sequences in a step */
#define TRAIN_MAX_LR 1e6      /* lr: above 0 */
#define TRAIN_MAX_STEPS 100000000 /* steps, and the warm-up and every-N-steps options */
#define TRAIN_MAX_WEIGHT_DECAY 1e6
#define TRAIN_MAX_CLIP 1e12    /* clip: 0 turns it off */
#define TRAIN_MAX_BETA 1       /* Adam's beta1 and beta2: 0 up to, not including, 1 */

typedef struct {
    /* what was asked for */
    qkv_task task;
    qkv_model_config model;
    qkv_optim_kind optim;
    double lr, weight_decay, clip;
    bool cosine;              /* cosine decay of the learning rate to 0 over `steps` */
    int64_t warmup;           /* linear warm-up steps */
    int batch;
    bool full_batch;          /* batch is every training example (modular's n_train), in order */
    double beta1, beta2;      /* Adam's decay rates (qkv_optim_init's: 0.9, 0.999) */
    int64_t steps;
    uint64_t seed;
    /* A task of the user's own: the examples' file, and the held-out file ("" for a hash of
     * each line). trainer_init reads them, and sets task, model.vocab, model.seq_len and
     * model.target_len from them. */
    char data_path[FILE_PATH_LEN], heldout_path[FILE_PATH_LEN];
    uint64_t data_checksum; /* when loading a model: the files' checksum it was trained on */
    /* When loading a model whose run directory keeps copies of those files (RUN_DATA_COPY,
     * RUN_HELDOUT_COPY): the copies' paths, read instead of data_path and heldout_path, so
     * that a moved or copied run still evaluates. "" : read data_path and heldout_path. */
    char data_copy[FILE_PATH_LEN], heldout_copy[FILE_PATH_LEN];
} train_config;

/* A training step splits its batch into shards of whole sequences, each with its own graph
 * and its own parameter gradients, so that shards can run forward and backward side by side,
 * one per thread (trainer_update decides when). The number of shards depends on the batch
 * alone, and their gradients are summed in shard order, so a step gives the same bits on any
 * number of threads. */
#define TRAIN_SHARDS 2

typedef struct {
    qkv_model replica;        /* shards 1..: the trainer's weights with gradients of its own */
    qkv_ctx *ctx;             /* its graph, reset every step */
    int first, count;         /* its sequences of the batch */
    double loss;              /* its share of the batch's mean loss */
    int64_t correct, counted; /* argmax hits and targets */
    int positions;            /* of each sequence, those its last step computed past the last
                                 attention layer's keys and values: those with a target
                                 (qkv_model_forward_at), T where that is all of them */
} train_shard;

/* How a step's shards run when there are at least two threads per shard: in turn, each op on
 * every thread, or side by side, one thread each. Which is faster depends on the sizes of the
 * ops against the machine (the tiny workload's ops are too short to split well, a long
 * sequence's are not), so the trainer times each on its first steps and keeps the faster.
 * Both give the same bits. */
#define SHARD_LAYOUT_TRIALS 2 /* timed steps of each layout */
typedef struct {
    int threads;                 /* the thread count the trials were made with */
    int steps;                   /* steps taken with it so far: the first is not timed */
    double best[2];              /* the fastest timed step in turn [0] and side by side [1], s */
} shard_layout;

typedef struct {
    train_config cfg;
    qkv_model model;
    int nshards;
    train_shard shard[TRAIN_SHARDS];
    shard_layout layout;
    qkv_optim optim;
    qkv_rng data_rng;         /* draws the training batches; saved for --resume */
    qkv_ctx *eval_ctx;        /* no-grad evaluation */
    int32_t *tokens, *targets;            /* (batch, T) */
    int32_t *held_tokens, *held_targets;  /* (n_held, T) and (n_held, To) */
    int32_t *lengths, *held_lengths;      /* data: (batch) and (n_held) input lengths; else NULL */
    int n_held;                           /* TRAIN_HELDOUT, or a data file's held-out examples */
    int target_len;                       /* To: T, or an encoder-decoder's output length */
    dataset *data;                        /* a data run's examples (owned), else NULL */
    int32_t *train_tokens, *train_targets; /* modular: its n_train training pairs (n_train, T)
                                             and their targets, else NULL */
    int n_train;
    uint8_t *ideal;                       /* (T, T): one sequence's ideal pattern, scratch */
    double last_loss, last_train_acc;
    int64_t metrics_rows;     /* rows of the run's metrics.csv that belong to this state (its
                                 checkpoint records them; -1: no run directory, or unknown) */
    bool data_copied;         /* the run directory it is saved to keeps copies of the data
                                 files (RUN_DATA_COPY): the model's metadata names them */
} trainer;

#define EVAL_MAX_HEADS 64 /* heads that training's evaluation scores per layer (trainer_evaluate's
                             head scores; the analysis commands cover every head) */

/* A set of examples: n sequences x (n, T) with targets y (n, To), and for a data run their
 * input lengths len (n), else NULL. */
typedef struct {
    int n;
    const int32_t *x, *y, *len;
} example_set;

typedef struct {
    double loss, accuracy, attention_mass;
    int best_head;            /* of the task's layer (attention_layer), 0-based */
    int attention_layer;      /* the layer that carries the task, 0-based: for induction and
                                 recall the last, else the one whose best head has the most mass */
    int64_t correct, counted; /* argmax hits among the held-out positions with a target */
    bool has_ideal;           /* the task defines an ideal pattern */
    double layer_mass[QKV_MAX_LAYERS]; /* each layer's best head's mass on its ideal pattern */
    int layer_best_head[QKV_MAX_LAYERS];
    /* Head scores over every held-out query position, per layer and head: the mean
     * weight on the previous position; on earlier positions holding the same token
     * (duplicate); on the positions just after earlier copies of the query's token
     * (induction, prefix matching). Each is averaged over the rows where it is defined. */
    double prev_token[QKV_MAX_LAYERS][EVAL_MAX_HEADS], duplicate[QKV_MAX_LAYERS][EVAL_MAX_HEADS],
        induction[QKV_MAX_LAYERS][EVAL_MAX_HEADS];
    /* Each head's attention entropy, -Σ a log a in nats, averaged over every held-out query
     * row (of the real tokens: padding has none): 0 for a head that looks at one key, log n
     * for one spread evenly over n. */
    double entropy[QKV_MAX_LAYERS][EVAL_MAX_HEADS];
    /* The induction task's in-context score (trainer_icl_add): the held-out loss where the
     * context holds the next token minus where it cannot; NaN for every other task. */
    double icl_score;
} eval_result;

/* The one check of a train config: batch and lr within their limits, the model fitting the
 * task, and the model's own (qkv_model_config_check). QKV_ERR_VALUE names the field as the
 * config does ("batch 0 is out of range (1..65536)"); allocates nothing. A data run's task
 * and sizes come from its file: trainer_init reads it first. */
qkv_status trainer_check_config(const train_config *cfg);
/* Adam's beta1 and beta2 in [0, 1) (0: the default): else QKV_ERR_VALUE naming the field. */
qkv_status train_check_betas(double beta1, double beta2);
/* Checks the config (trainer_check_config) and the memory it needs, and builds everything.
 * Memory: the parameters, a step's arenas and one evaluation's, each reserved at its estimate
 * (a run never grows one); QKV_ERR_NOMEM names the sizes and the options to lower. */
qkv_status trainer_init(trainer *t, const train_config *cfg);
/* The same for a trainer the user did not configure: `purpose` ("loading the model", "training
 * the self-test's model") begins the memory check's message, which then names no option. */
qkv_status trainer_init_for(trainer *t, const train_config *cfg, const char *purpose);
void trainer_free(trainer *t);
/* The learning rate of step `step` (1-based): warm-up, then constant or cosine decay. */
double trainer_lr(const train_config *cfg, int64_t step);
/* Draws `batch` training sequences (never held-out ones) with rng (modular: training pairs,
 * below(n_train) each; with full_batch, every training pair in order, drawing nothing): tokens (batch, T), targets
 * (batch, To) and, for a data run, the input lengths (batch) of its padding mask (lengths is
 * not touched otherwise). trainer_step draws its batches so, with t->data_rng. */
void trainer_sample(const trainer *t, qkv_rng *rng, int batch, int32_t *tokens, int32_t *targets,
                    int32_t *lengths);
/* One optimizer step (SGD, momentum or Adam) on a fresh batch; QKV_ERR_NUMERIC if the loss
 * is not finite. */
qkv_status trainer_step(trainer *t);
/* One optimizer step on the batch already in t->tokens / t->targets (what trainer_step does after
 * drawing it). */
qkv_status trainer_update(trainer *t);
/* Loss, token accuracy and attention mass on the held-out set: train_evaluate_set over it. */
eval_result trainer_evaluate(trainer *t);
/* The same numbers for `model`, trained on `task`, over `set`: the one evaluation (training's
 * and the analyses'). Runs in ctx (no-grad, sized for EVAL_BATCH sequences: trainer_init's
 * eval_ctx, or an analysis's); ideal: (T, T) scratch. Allocates nothing. */
eval_result train_evaluate_set(qkv_model *model, const qkv_task *task, int target_len,
                               example_set set, qkv_ctx *ctx, uint8_t *ideal);
/* The in-context score of the induction task, over held-out sequences x (B, T) with targets
 * y (B, T) and the model's logits (B, T, V): the mean loss at the late positions minus the
 * mean at the early ones, in nats. A sequence is a segment of n distinct tokens repeated to
 * the end, and its targets are the positions n .. T-2 (the repeat: each predicts the token
 * after it, which the context holds). Late: those positions, against their targets. Early:
 * positions 0 .. n-2 of the first copy, against the next token, which is new there, so no
 * context can tell it (training never scores them). Near 0 for an untrained model; it falls
 * steeply when the model learns to copy from context, which is when an induction head forms.
 * Adds into sums[4]: late loss, late count, early loss, early count (score: see
 * trainer_icl_of). */
void trainer_icl_add(const qkv_tensor *logits, const int32_t *x, const int32_t *y, int B, int T,
                     double sums[4]);
/* Whether t's evaluations measure the in-context score: the induction task's (self-attention). */
bool trainer_has_icl(const trainer *t);
bool train_has_icl(const qkv_task *task, const qkv_model_config *c);
/* The in-context score of the sums of trainer_icl_add: NaN when a side has no position. */
double trainer_icl_of(const double sums[4]);
/* The attention weights of layer l for held-out example `index`: (H, T, T) into out. */
void trainer_attention(trainer *t, int index, float *out /* (L, H, T, T) */);
/* The model's prediction for held-out example `index`: the most likely token at each of its
 * target_len output positions, into out. */
void trainer_predict(trainer *t, int index, int32_t *out);
/* A token's label: the task's (qkv_task_token_label), or a data file's (data not NULL) token
 * string. */
void train_token_label(const qkv_task *task, const dataset *data, int32_t token, char *buf,
                       size_t len);
void trainer_token_label(const trainer *t, int32_t token, char *buf, size_t len);
/* The token itself, for JSON, which never shortens a token: a data file's token string
 * (UTF-8, whole; "?" for no token), or the task's label written into buf. */
const char *train_token_text(const qkv_task *task, const dataset *data, int32_t token,
                             char *buf, size_t len);
/* An output class's label and text, as the two above: the token of its id, but lookup's
 * classes 0..n_values-1 are its values, "v0", "v1", ... (its pair tokens share those ids). */
void train_class_label(const qkv_task *task, const dataset *data, int32_t c, char *buf,
                       size_t len);
void trainer_class_label(const trainer *t, int32_t c, char *buf, size_t len);
const char *train_class_text(const qkv_task *task, const dataset *data, int32_t c, char *buf,
                             size_t len);
/* For held-out example `index`, one forward and backward pass of its cross-entropy loss: the
 * gradient of every layer's attention weights, dA, and of the scores that enter the softmax
 * (after scale and mask), dS, into dA and dS, each (L, H, T, T). Parameter gradients are left
 * dirty, so call it between steps, never inside one. */
void trainer_attention_grads(trainer *t, int index, float *dA, float *dS);

/* Saving and loading: train/checkpoint.h. */

#endif
