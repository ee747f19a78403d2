/* autograd.c - the tape: reverse-mode backward, zeroing gradients, a plain SGD step. What it
 * knows of each op (its backward, its profile part, whether it stores first) is its row of
 * op_table (op_table.c). */
#include "engine/internal.h"
#include "kernels/kernels.h"

/* The tensor that owns x's gradient buffer: a reshape of an intermediate shares its input's. */
static qkv_tensor *grad_owner(qkv_tensor *x) {
    while (x->op == QKV_OP_RESHAPE && x->src[0] && x->src[0]->grad == x->grad) x = x->src[0];
    return x;
}

bool grad_first_write(qkv_tensor *x) {
    qkv_tensor *o = grad_owner(x);
    if (o->op == QKV_OP_NONE || o->grad_written == o->mark) return false;
    o->grad_written = o->mark;
    return true;
}

void *grad_to_add(qkv_tensor *x) {
    if (grad_first_write(x)) memset(x->grad, 0, (size_t)x->size * qkv_dtype_size(x->dtype));
    return x->grad;
}

/* Leaves (parameters) receive the gradient of one backward pass in scratch memory of the loss's
 * context, and it is added to what they hold at the end: a leaf's gradient becomes exactly
 * old + new. Without this, ops that sum many contributions into one entry (matmul weights, a
 * broadcast bias, an embedding row hit by repeated tokens) would round the old value in with
 * each of them, and two calls would not add the same gradient twice. While staged, a leaf's
 * `saved` (unused by leaves otherwise) holds its own gradient buffer. */
static void stage_leaves(qkv_tensor *loss) {
    for (qkv_tensor *t = loss; t; t = t->tape_prev) {
        if (t->op == QKV_OP_NONE || !t->requires_grad || t->mark != loss->mark) continue;
        for (int k = 0; k < 4; k++) {
            qkv_tensor *s = t->src[k];
            if (!s || s->op != QKV_OP_NONE || !s->grad || s->saved) continue;
            s->saved = s->grad;
            s->grad = qkv_ctx_alloc(loss->ctx, (size_t)s->size * qkv_dtype_size(s->dtype));
        }
    }
}

static void unstage_leaves(qkv_tensor *loss) {
    for (qkv_tensor *t = loss; t; t = t->tape_prev) {
        if (t->op == QKV_OP_NONE || !t->requires_grad || t->mark != loss->mark) continue;
        for (int k = 0; k < 4; k++) {
            qkv_tensor *s = t->src[k];
            if (!s || s->op != QKV_OP_NONE || !s->saved) continue;
            QKV_TYPED(s->dtype, {
                T *g = s->saved;
                const T *pass = s->grad;
                for (int64_t i = 0; i < s->size; i++) g[i] += pass[i];
            });
            s->grad = s->saved;
            s->saved = NULL;
        }
    }
}

void qkv_backward(qkv_tensor *loss) {
    QKV_CHECK(loss, "backward", "loss is NULL");
    QKV_CHECK(loss->size == 1, "backward", "loss must be a scalar, it has %lld elements",
              (long long)loss->size);
    QKV_CHECK(loss->requires_grad, "backward",
              "loss does not depend on any parameter (or was built in no-grad mode)");
    /* Tensors are recorded in order of creation, and an op's inputs always exist before it,
     * so walking the tape backwards from the loss visits every consumer of a tensor before
     * the tensor itself: a reverse topological order, without recursion. The first walk marks
     * what the loss depends on (so that side computations on the same tape are left alone)
     * and marks their gradients unwritten; the second runs their backward passes, each
     * storing or adding into its inputs' gradients (grad_first_write). */
    static _Thread_local uint32_t passes;
    uint32_t pass = ++passes ? passes : ++passes; /* 0 means "never reached" */
    profile_enter(PROFILE_LAYOUT); /* zeroing gradients, staging the leaves' */
    loss->mark = pass;
    for (qkv_tensor *t = loss; t; t = t->tape_prev) {
        if (t->mark != pass || t->op == QKV_OP_NONE) continue;
        for (int k = 0; k < 4; k++)
            if (t->src[k]) t->src[k]->mark = pass;
        t->grad_written = 0; /* no pass is 0 */
    }
    grad_first_write(loss);
    qkv_set(&(qkv_tensor){.dtype = loss->dtype, .data = loss->grad}, 0, 1.0);
    stage_leaves(loss);
    for (qkv_tensor *t = loss; t; t = t->tape_prev)
        if (t->mark == pass && t->op != QKV_OP_NONE && t->requires_grad) {
            profile_enter(PROFILE_LAYOUT);
            grad_to_add(t); /* no consumer wrote it: its gradient is 0 */
            const op_info *op = &op_table[t->op];
            if (!op->stores_first)
                for (int k = 0; k < 4; k++)
                    if (t->src[k] && t->src[k]->grad) grad_to_add(t->src[k]);
            profile_enter(op->part);
            op->backward(t);
        }
    profile_enter(PROFILE_LAYOUT);
    unstage_leaves(loss);
}

void qkv_ctx_for_params(qkv_ctx *ctx, void (*fn)(qkv_tensor *p, void *user), void *user) {
    for (int i = 0; i < ctx->nparams; i++) fn(ctx->params[i], user);
}

void qkv_zero_grad(qkv_ctx *ctx) {
    profile_enter(PROFILE_LAYOUT);
    for (int i = 0; i < ctx->nparams; i++) {
        qkv_tensor *p = ctx->params[i];
        memset(p->grad, 0, (size_t)p->size * qkv_dtype_size(p->dtype));
    }
}

void qkv_sgd_step(qkv_ctx *ctx, float lr) {
    for (int i = 0; i < ctx->nparams; i++) {
        qkv_tensor *p = ctx->params[i];
        QKV_TYPED(p->dtype, {
            T *w = p->data;
            const T *g = p->grad;
            for (int64_t j = 0; j < p->size; j++) w[j] -= (T)lr * g[j]; /* w -= lr * dw */
        });
    }
}
