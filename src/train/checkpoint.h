/* checkpoint.h - a trainer's state as a safetensors file (model.safetensors), and back. */
#ifndef QKV_CHECKPOINT_H
#define QKV_CHECKPOINT_H

#include "train/trainer.h"

/* model.safetensors: parameters, optimizer state and, in __metadata__, the config, the task,
 * the step and the data RNG, so that a resumed run continues exactly. Refuses (QKV_ERR_NUMERIC,
 * nothing written) a state that trainer_check_state refuses. */
qkv_status trainer_save(const trainer *t, const char *path);
/* Every weight and first moment finite, every second moment finite and >= 0: a state worth
 * saving or resuming. Otherwise `status` with a message naming the tensor and element. */
qkv_status trainer_check_state(const trainer *t, qkv_status status);
/* Rebuilds a trainer from a file written by trainer_save, in the file's dtype (metadata
 * "dtype"; a file without it is f32). Every metadata value is read exactly: a number out of
 * its range, or a word qkv does not know (an optimizer, residual, causal, schedule or dtype),
 * is QKV_ERR_FORMAT naming the key, never read as a default. */
qkv_status trainer_load(trainer *t, const char *path);
/* The same from a file already parsed (st stays the caller's); `path` names it in messages. */
qkv_status trainer_load_st(trainer *t, const qkv_st *st, const char *path);
/* The same in `dtype`: TRAIN_DTYPE_OF_FILE, QKV_F32 or QKV_F64. An f32 file loads as f64
 * exactly (every weight and optimizer moment widened); an f64 file asked for as f32 is
 * QKV_ERR_MISMATCH, since rounding it would change the model. */
#define TRAIN_DTYPE_OF_FILE (-1)
qkv_status trainer_load_as(trainer *t, const char *path, int dtype);
qkv_status trainer_load_st_as(trainer *t, const qkv_st *st, const char *path, int dtype);

#endif
