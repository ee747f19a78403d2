/* internal.h - what the engine's own files share (src/engine/): the arena, tensor internals,
 * the op table. The layers above include engine/engine.h instead. */
#ifndef QKV_INTERNAL_H
#define QKV_INTERNAL_H

#include "engine/engine.h"
#include "kernels/kernels.h" /* profile_part, of the op table */
#include "qkv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>



/* ---- arena (arena.c) ---- */
struct arena_block;
struct qkv_ctx {
    struct arena_block *blocks; /* newest first; after a reset there is exactly one */
    size_t used;                /* bytes handed out since the last reset */
    size_t capacity;            /* bytes in all blocks */
    uint64_t mallocs;           /* number of system allocations, to prove warm steps make none */
    bool no_grad;
    qkv_tensor *tape;           /* the most recently created tensor; tape_prev links back */
    qkv_tensor **params;        /* parameters, in order of creation (malloc'd, grows rarely) */
    int nparams, cap_params;
};

/* Memory from the context, 64-byte aligned and NOT zeroed: for buffers that are written in
 * full before they are read (op outputs, and gradients, which backward zeroes itself). */
void *arena_alloc_raw(qkv_ctx *ctx, size_t bytes);

/* ---- tensors (tensor.c) ---- */
/* A tensor produced by `op` from `srcs`; requires a gradient if any source does and the
 * context is not in no-grad mode. Data is allocated but not initialised. */
qkv_tensor *tensor_new_op(qkv_ctx *ctx, qkv_op op, qkv_dtype dtype, int ndim,
                          const int64_t *shape, qkv_tensor *s0, qkv_tensor *s1, qkv_tensor *s2);
/* Records a fourth input s of an op's output t (src[3]), made by tensor_new_op: t then
 * requires a gradient if s does too (outside no-grad mode). */
void tensor_add_fourth_src(qkv_tensor *t, qkv_tensor *s);
/* A tensor made by `op` that shares x's data under another shape (no copy). */
qkv_tensor *tensor_new_view(qkv_ctx *ctx, qkv_op op, qkv_tensor *x, int ndim,
                            const int64_t *shape);
/* Dies unless t is a non-NULL float tensor. */
void tensor_check_float(const qkv_tensor *t, const char *op, const char *what);
bool tensor_same_shape(const qkv_tensor *a, const qkv_tensor *b);
/* Right-aligned broadcasting of b into a: fills bstride (in elements, 0 on broadcast dims)
 * for a's 4 padded dims; false if b does not broadcast. */
bool tensor_broadcast_strides(const qkv_tensor *a, const qkv_tensor *b, int64_t bstride[4]);
/* a's shape padded on the left with ones to 4 dims. */
void tensor_shape4(const qkv_tensor *t, int64_t shape[4]);

/* Runs the statements for every element i of `a`, in order, with j = Σ index·stride the
 * offset of the matching element of another tensor: a broadcast one (strides from
 * tensor_broadcast_strides, 0 on broadcast dims) or a permuted one (transpose). */
#define FOR_STRIDED(a, bstride, i, j, ...)                                              \
    do {                                                                                  \
        int64_t s4_[4];                                                                   \
        tensor_shape4((a), s4_);                                                          \
        int64_t i = 0;                                                                    \
        for (int64_t i0 = 0; i0 < s4_[0]; i0++)                                           \
            for (int64_t i1 = 0; i1 < s4_[1]; i1++)                                       \
                for (int64_t i2 = 0; i2 < s4_[2]; i2++)                                   \
                    for (int64_t i3 = 0; i3 < s4_[3]; i3++, i++) {                        \
                        int64_t j = i0 * (bstride)[0] + i1 * (bstride)[1] +               \
                                    i2 * (bstride)[2] + i3 * (bstride)[3];                \
                        __VA_ARGS__                                                       \
                    }                                                                     \
    } while (0)

/* ---- gradients in a backward pass (autograd.c) ---- */
/* Gradients are not zeroed up front: the first op of a backward pass to write an input's
 * gradient stores, the others add. grad_first_write(x) says whether this write is the first
 * (and from then on it is not); the op then stores 0 + value, as an add to a zeroed gradient
 * would (-0 becomes +0: the same bits), or, for a product (matmul, the fused attention), its
 * sum of products, which starts from +0 and so differs from 0 + sum only where every product
 * underflows to -0. Only the ops whose op_table row says stores_first do; the
 * engine zeroes the inputs' gradients of the others before they run. A leaf's gradient (its
 * staged buffer, zeroed) is always added to; a view's gradient is its base's. */
bool grad_first_write(qkv_tensor *x);
/* x's gradient, zeroed if nothing has written it in this pass: ready to be added to. */
void *grad_to_add(qkv_tensor *x);

/* ---- ops: the op table (op_table.c), one row per qkv_op ---- */
/* An op's backward pass, NAME_backward in ops/NAME.c (declared in op_table.c, beside its row):
 * adds (or, for an op whose row says stores_first, stores on the first write) the gradient of
 * out into the gradients of out->src[]. */
typedef void (*op_backward_fn)(qkv_tensor *out);
typedef struct {
    const char *name;        /* qkv_op_name: what a tensor prints as its maker */
    op_backward_fn backward; /* NULL only for a leaf */
    /* The part of a training step's profile the op's forward and backward run in
     * (kernels.h): an op's time runs from its tensor_new_op to the next op's. */
    profile_part part;
    /* Whether the backward stores its inputs' gradients on their first write of a pass
     * (grad_first_write) instead of adding to zeros: it writes every element of each, so the
     * engine need not zero them first (autograd.c). */
    bool stores_first;
} op_info;
/* Indexed by qkv_op; its length is checked against QKV_OP_COUNT where it is defined. */
extern const op_info op_table[];


#endif
