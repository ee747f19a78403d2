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

/* ---- readouts (readout.c): what the analyses read of a model. A stream is (B, To, C), a
 * probe's (qkv_model_forward_probe); `row` = b·To + position; everything in double. ---- */
/* The final LayerNorm's 1/sqrt(var + eps) of the stream's row (the forward's own scale, as
 * TransformerLens's apply_ln_to_stack divides by it); 1 without LayerNorm. */
double model_final_scale(const qkv_model *m, const qkv_tensor *stream, int64_t row);
/* The logits (V) of a stream's row read through the final LayerNorm and the vocabulary head:
 * the logit lens (at the last layer, the model's logits). scratch: C doubles. */
void model_unembed(const qkv_model *m, const qkv_tensor *stream, int64_t row, double *logits,
                   double *scratch);
/* The direct logit of `token` that a part (C) of the final stream writes, given the final
 * LayerNorm's scale: Σ_k (x_k − mean x)·scale·gain_k·head.w[k, token], or without LayerNorm
 * Σ_k x_k·head.w[k, token]. Linear in the part: the parts of a stream add up to its logit less
 * model_logit_bias. */
double model_direct_logit(const qkv_model *m, const double *part, double scale, int token);
/* What no part writes: head.b[token], plus ln_final.bias · head.w[:, token] with LayerNorm. */
double model_logit_bias(const qkv_model *m, int token);
/* The parts whose sum is the stream the vocabulary head reads. */
typedef enum { PART_EMBED, PART_HEAD, PART_MLP, PART_NEURON, PART_MLP_BIAS } stream_part_kind;
typedef struct {
    stream_part_kind kind;
    int layer, head, neuron; /* 0-based; -1 where the kind has none */
} stream_part;
/* How many parts model_stream_parts gives: with the residual stream the embedding, every
 * head and every MLP (with `neurons`, each neuron and the MLP's bias b_out instead); without
 * it, the last layer's heads. */
int model_stream_part_count(const qkv_model *m, bool neurons);
/* Those parts at `position` of sequence b of a probed forward, into ids (n) and vectors
 * (n, C): the stream entering layer 0, each head's z·W_O rows, each MLP's output (or each
 * neuron's post-activation times its row of W_out, and b_out). Returns n. */
int model_stream_parts(const qkv_model *m, const qkv_probe *probe, int b, int position,
                       bool neurons, stream_part *ids, double *vectors);
/* "embed", "L.H", "mlp L", "mlp L.N", "mlp L bias" (layers and heads from 1, neurons from 0). */
void model_stream_part_name(const stream_part *p, char *buf, size_t len);

/* What head `head` of layer `layer` writes into the stream for its output z (Dk): z times
 * its rows of W_O, z·W_O[head·Dk .. head·Dk + Dk, :], into out (C). Linear in z: a change of
 * z writes the change of its part. */
void model_head_write(const qkv_model *m, int layer, int head, const double *z, double *out);
/* What reads the stream: a head's q, k or v input (the stream entering its layer; k and v
 * only where the keys read the stream: not an encoder-decoder's), an MLP's pre-activation
 * (the stream between its layer's attention and the MLP, resid_mid), or the logits (the
 * stream leaving the last layer). */
typedef enum { RECEIVER_Q, RECEIVER_K, RECEIVER_V, RECEIVER_MLP, RECEIVER_LOGITS } receiver_kind;
typedef struct {
    receiver_kind kind;
    int layer, head; /* 0-based; head for q, k, v only; neither for the logits */
} stream_receiver;
/* The width of a receiver's input at one row: Dk (q, k, v: the head's columns), the MLP's
 * neurons N (mlp-pre), or the vocabulary V (the logits). */
int model_receiver_width(const qkv_model *m, const stream_receiver *r);
/* What a change du (C) of the stream a receiver reads at `row` (b·rows + position of that
 * stream in `probe`) does to its input there, to first order: its columns first ..
 * first + count - 1 of model_receiver_width into out (count), e.g. all of a head's or an
 * MLP's, or the two logits of a metric, one at a time. It is du through the Jacobian of the
 * receiver's LayerNorm at the probe's stream (x̂ the normalized row, s = 1/sqrt(var + eps):
 * gain ⊙ s·(du − mean du − x̂·mean(du ⊙ x̂))), times the receiver's weights: its columns of
 * W_Q, W_K or W_V, W_in (the pre-activation's b_in does not change), head.w. Exact without
 * LayerNorm, where the input is linear in the stream. scratch: 2·C doubles. */
void model_receiver_delta(const qkv_model *m, const qkv_probe *probe, const stream_receiver *r,
                          int64_t row, const double *du, int first, int count, double *out,
                          double *scratch);

/* LAPACK's dgeev without eigenvectors (lapack.c, which loads LAPACK the first time): the
 * eigenvalues wr + i wi of the (n, n) column-major matrix a (overwritten), work (lwork
 * doubles) its workspace, *info dgeev's. Fails, calling nothing, with QKV_ERR_NOMEM when
 * there is no memory to load LAPACK or for OpenBLAS's buffer, and QKV_ERR_IO when LAPACK
 * cannot be loaded. */
qkv_status lapack_dgeev(int n, double *a, double *wr, double *wi, double *work, int lwork,
                        int *info);

/* ---- the mapping view of the circuits (circuits.c; docs/explain.md, "Mapping") ----
 * expected[V]: the token each token should make a head write when the head attends to it (-1:
 * none), and key_token[V]: whether inputs hold the token at all (an encoder-decoder's: the
 * tokens the encoder sees). A built-in task's, from its ideal pattern over a fixed draw of
 * sequences: each key the pattern attends to votes for its query's target. */
qkv_status circuits_task_mapping(const qkv_task *task, int32_t *expected, bool *key_token);
/* A data file's, from its n training examples x (n, in_len; 0 the padding) and y (n, out_len;
 * -1 no target): token t -> the output token u with the largest P(u in the output | t in the
 * input) - P(u in the output | t not in it), when that is above 0. */
qkv_status circuits_data_mapping(int V, int n, int in_len, int out_len, const int32_t *x,
                                 const int32_t *y, int32_t *expected, bool *key_token);
/* top[t] = the token of the largest logit in row t of a head's OV circuit ov (V, V), for each
 * key token (-1 for the others); *sources = the key tokens with an expected target. Returns
 * how many of those have top[t] == expected[t]. */
int circuits_top_targets(const double *ov, int V, const bool *key_token, const int32_t *expected,
                         int32_t *top, int *sources);

/* ---- the Fourier measures of a modular model (fourier.c; docs/grokking.md defines each) ----
 * Z/P's frequencies are k = 0 .. P/2 (rounded down), w_k = 2πk/P; its real orthonormal basis
 * (P, P): row 0 the constant 1/sqrt(P); rows 2k-1 and 2k sqrt(2/P)·cos(w_k x) and
 * sqrt(2/P)·sin(w_k x) for 0 < k < P/2; for an even P, row P-1 the Nyquist term
 * (-1)^x/sqrt(P). A frequency's norm combines its rows. */
/* The highest frequency, P/2 rounded down. */
int fourier_top_frequency(int P);
void fourier_basis(int P, double *basis /* (P, P) */);
/* norm[k] (P/2 + 1) = the norm of frequency k of x (P, n) transformed over its first axis:
 * sqrt(Σ over k's rows r, over columns j of (basis_r · x[:, j])²). */
void fourier_norms(const double *basis, int P, const double *x, int n, double *norm);
/* The Gini coefficient of x[0 .. n-1] (non-negative): Σ_i Σ_j |x_i - x_j| / (2 n Σ x); 0 when
 * all are equal, near 1 when one holds everything; NaN when they are all 0. */
double fourier_gini(const double *x, int n);
/* The key frequencies of an embedding whose norms (P/2 + 1) are `norm`, ascending, into keys
 * (up to P/2 of them): each k >= 1 whose squared norm is at least 4 times the median over
 * the frequencies 1 .. P/2 and at least a tenth of the largest. Returns how many. */
int fourier_key_frequencies(const double *norm, int P, int *keys);
/* Σ of the squares of every parameter (weights, biases, embeddings), in double. */
double model_sum_squared_weights(const qkv_model *m);
typedef struct {
    int P;                      /* the modulus */
    double *embed_norm;         /* (P/2 + 1): the norm of the numbers' embeddings (rows 0 ..
                                   P-1 of tok_emb) in each frequency */
    double *logit_map_norm;     /* (P/2 + 1): the neuron-logit map's (every layer's W_out·W_U,
                                   its columns 0 .. P-1), over the outputs; NULL without MLP */
    int n_keys, *keys;          /* the key frequencies (fourier_key_frequencies), ascending */
    double gini_embed, gini_neuron_logits; /* of the norms of frequencies 1 .. P/2 (NaN
                                               without MLP) */
    double sum_squared_weights;
    /* over every pair, from a forward of all P² (at `=`): */
    double train_loss, train_acc, test_loss, test_acc; /* every training / held-out pair */
    double restricted_loss, restricted_acc, excluded_loss; /* NaN for mul */
    double logit_share, *key_share; /* (n_keys): the logits' share along each key frequency's
                                       cos(w(a + b - c)) and sin (sub: a - b); NaN for mul */
    int neurons;                /* layers × mlp with neurons asked, else 0 */
    double *neuron_share;       /* (neurons): the largest share of variance of one frequency
                                   (NaN: a constant neuron) */
    int *neuron_cluster;        /* (neurons): that frequency (0: a constant neuron) */
    double *neuron_freq_share;  /* (neurons, P/2 + 1): each frequency's share of each neuron's
                                   variance ([u][0] 0; a constant neuron's row NaN): the
                                   largest of a row is neuron_share (qkv plot's neurons) */
} fourier_measures;
/* Every measure of a modular model m of task `task`, from its weights and from one forward
 * over the P² pairs (`batch` sequences at a time in ctx, a no-grad context) and one over the
 * training pairs (the excluded loss); with `neurons`, each MLP neuron's share at `=` too (the
 * probed forward). QKV_ERR_NOMEM, with nothing to free, when out of memory. Free with
 * fourier_measures_free. */
qkv_status fourier_measure(qkv_model *m, const qkv_task *task, qkv_ctx *ctx, int batch,
                           bool neurons, fourier_measures *f);
void fourier_measures_free(fourier_measures *f);

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
