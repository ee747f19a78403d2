/* model.h - what model/ offers the layers above it besides the public API (qkv.h). */
#ifndef QKV_MODEL_H
#define QKV_MODEL_H

#include "qkv.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* *r becomes a second model over m's weights: every parameter shares m's data and has its
 * own gradient, in r->params (freed with qkv_model_free(r); m must outlive r). A training
 * step gives one to each shard of its batch, so that shards run backward side by side. */
qkv_status model_replica(qkv_model *r, const qkv_model *m);

/* LAPACK's dgeev without eigenvectors (lapack.c, which loads LAPACK the first time): the
 * eigenvalues wr + i wi of the (n, n) column-major matrix a (overwritten), work (lwork
 * doubles) its workspace, *info dgeev's. Fails, calling nothing, with QKV_ERR_NOMEM when
 * there is no memory to load LAPACK or for OpenBLAS's buffer, and QKV_ERR_IO when LAPACK
 * cannot be loaded. */
qkv_status lapack_dgeev(int n, double *a, double *wr, double *wi, double *work, int lwork,
                        int *info);

/* ---- the held-out split (tasks.c): one example in HELDOUT_SHARE is held out, chosen by a
 * hash of its bytes, the same on every machine: a task's tokens as little-endian bytes, a
 * data file's line as written ---- */
#define HELDOUT_SHARE 8
#define HELDOUT_HASH_START 0xcbf29ce484222325ull /* FNV-1a's offset basis */
/* FNV-1a over n more bytes, from h (HELDOUT_HASH_START for the first). */
uint64_t heldout_hash_bytes(uint64_t h, const unsigned char *bytes, size_t n);
/* The murmur3 fmix64 finalizer: FNV-1a's low bits depend only on the inputs' low bits (its
 * prime is odd), so a split on h % 8 would see only bytes mod 8; this mixes every bit into
 * the low ones. */
uint64_t heldout_hash_finish(uint64_t h);
/* Whether the example of that finished hash is held out. */
bool heldout_picks(uint64_t hash);

#endif
