/* autograd.c - the tape: reverse-mode backward, zeroing gradients, a plain SGD step. */
#include "internal.h"

static const char *const op_names[] = {
    [QKV_OP_NONE] = "leaf",           [QKV_OP_MATMUL] = "matmul",
    [QKV_OP_SCALE] = "scale",         [QKV_OP_MASK] = "mask",
    [QKV_OP_SOFTMAX] = "softmax",     [QKV_OP_ADD] = "add",
    [QKV_OP_MUL] = "mul",             [QKV_OP_EMBEDDING] = "embedding",
    [QKV_OP_RESHAPE] = "reshape",     [QKV_OP_TRANSPOSE] = "transpose",
    [QKV_OP_CROSS_ENTROPY] = "cross_entropy", [QKV_OP_MSE] = "mse",
    [QKV_OP_SUM] = "sum",             [QKV_OP_MEAN] = "mean",
};
_Static_assert(sizeof op_names / sizeof op_names[0] == QKV_OP_COUNT, "op_names out of sync");

static const op_backward_fn op_backward[] = {
    [QKV_OP_NONE] = NULL,
    [QKV_OP_MATMUL] = matmul_backward,
    [QKV_OP_SCALE] = scale_backward,
    [QKV_OP_MASK] = mask_backward,
    [QKV_OP_SOFTMAX] = softmax_backward,
    [QKV_OP_ADD] = add_backward,
    [QKV_OP_MUL] = mul_backward,
    [QKV_OP_EMBEDDING] = embedding_backward,
    [QKV_OP_RESHAPE] = reshape_backward,
    [QKV_OP_TRANSPOSE] = transpose_backward,
    [QKV_OP_CROSS_ENTROPY] = cross_entropy_backward,
    [QKV_OP_MSE] = mse_backward,
    [QKV_OP_SUM] = sum_backward,
    [QKV_OP_MEAN] = mean_backward,
};
_Static_assert(sizeof op_backward / sizeof op_backward[0] == QKV_OP_COUNT,
               "op_backward out of sync");

const char *qkv_op_name(qkv_op op) {
    return op >= 0 && op < QKV_OP_COUNT ? op_names[op] : "?";
}

void qkv_backward(qkv_tensor *loss) {
    QKV_CHECK(loss, "backward", "loss is NULL");
    QKV_CHECK(loss->size == 1, "backward", "loss must be a scalar, it has %lld elements",
              (long long)loss->size);
    QKV_CHECK(loss->requires_grad, "backward",
              "loss does not depend on any parameter (or was built in no-grad mode)");
    /* Tensors are recorded in order of creation, and an op's inputs always exist before it,
     * so walking the tape backwards from the loss visits every consumer of a tensor before
     * the tensor itself: a reverse topological order, without recursion. */
    for (qkv_tensor *t = loss; t; t = t->tape_prev)
        if (t->op != QKV_OP_NONE && t->grad)
            memset(t->grad, 0, (size_t)t->size * qkv_dtype_size(t->dtype));
    qkv_set(&(qkv_tensor){.dtype = loss->dtype, .data = loss->grad}, 0, 1.0);
    for (qkv_tensor *t = loss; t; t = t->tape_prev)
        if (t->op != QKV_OP_NONE && t->requires_grad) op_backward[t->op](t);
}

void qkv_ctx_for_params(qkv_ctx *ctx, void (*fn)(qkv_tensor *p, void *user), void *user) {
    for (int i = 0; i < ctx->nparams; i++) fn(ctx->params[i], user);
}

void qkv_zero_grad(qkv_ctx *ctx) {
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
