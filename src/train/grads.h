/* grads.h - one batch's gradients: the forward and backward pass of `qkv grads`, and its file
 * (docs/model.md, "The `qkv grads` file"). */
#ifndef QKV_GRADS_H
#define QKV_GRADS_H

#include "train/trainer.h"

typedef struct {
    qkv_ctx *ctx;        /* owns every tensor below */
    int batch;
    qkv_tensor *tokens;  /* (B, T) i32 */
    qkv_tensor *targets; /* (B, To) i32: -1 where a position carries no target */
    qkv_tensor *lengths; /* (B) i32: a data model's input lengths (its padding mask), else NULL */
    qkv_tensor *logits;  /* (B, To, V) */
    qkv_tensor *loss;    /* (): the mean cross-entropy over the targets that are not -1 */
    qkv_tensor *grad[QKV_MAX_PARAMS]; /* d loss / d t->model.param[i], the params' shapes */
} batch_grads;

/* Draws `batch` training sequences as training does (trainer_sample: the task's, or a data
 * file's examples with their padding), from a generator seeded with `seed` itself, and runs
 * one forward and backward pass of their loss, in one graph, with the fused attention of
 * training. Works for every model: self-attention, a data file's, an encoder-decoder's.
 * QKV_ERR_NOMEM, before allocating, when the batch needs more than half the memory qkv may
 * use. The model's parameter gradients are left dirty. Free g with batch_grads_free, also
 * after a failure. */
qkv_status trainer_batch_grads(trainer *t, uint64_t seed, int batch, batch_grads *g);
void batch_grads_free(batch_grads *g);
/* The grads file at `path`: tokens, targets, (lengths,) loss, logits and grad.<name> of every
 * parameter, and in its metadata the task, seed, batch, dtype and `model_path` as given. */
qkv_status batch_grads_save(const batch_grads *g, const trainer *t, uint64_t seed,
                            const char *model_path, const char *path);

#endif
