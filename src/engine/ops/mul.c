/* mul.c - y = a ⊙ b, with b broadcast to a's shape (weights of a loss, a gate). */
#include "engine/internal.h"

qkv_tensor *qkv_mul(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b) {
    tensor_check_float(a, "mul", "a");
    tensor_check_float(b, "mul", "b");
    QKV_CHECK(a->dtype == b->dtype, "mul", "dtypes differ: a is %s, b is %s",
              qkv_dtype_name(a->dtype), qkv_dtype_name(b->dtype));
    int64_t bs[4];
    QKV_CHECK(tensor_broadcast_strides(a, b, bs), "mul", "b %s does not broadcast to a %s",
              SHAPE(b), SHAPE(a));
    qkv_tensor *y = tensor_new_op(ctx, QKV_OP_MUL, a->dtype, a->ndim, a->shape, a, b, NULL);
    QKV_TYPED(a->dtype, {
        T *yv = y->data;
        const T *av = a->data, *bv = b->data;
        FOR_STRIDED(a, bs, i, j, { yv[i] = av[i] * bv[j]; });
    });
    return y;
}

void mul_backward(qkv_tensor *y) {
    qkv_tensor *a = y->src[0], *b = y->src[1];
    int64_t bs[4];
    tensor_broadcast_strides(a, b, bs);
    QKV_TYPED(y->dtype, {
        const T *dy = y->grad, *av = a->data, *bv = b->data;
        T *da = a->grad, *db = b->grad;
        /* forward was: y[i] = a[i] · b[j]  =>  da[i] += dy[i]·b[j], db[j] += dy[i]·a[i] */
        if (da) FOR_STRIDED(a, bs, i, j, { da[i] += dy[i] * bv[j]; });
        if (db) FOR_STRIDED(a, bs, i, j, { db[j] += dy[i] * av[i]; });
    });
}
