/* add.c - y = a + b, with b broadcast to a's shape (a bias, a positional table). */
#include "engine/internal.h"

qkv_tensor *qkv_add(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b) {
    tensor_check_float(a, "add", "a");
    tensor_check_float(b, "add", "b");
    QKV_CHECK(a->dtype == b->dtype, "add", "dtypes differ: a is %s, b is %s",
              qkv_dtype_name(a->dtype), qkv_dtype_name(b->dtype));
    int64_t bs[4];
    QKV_CHECK(tensor_broadcast_strides(a, b, bs), "add", "b %s does not broadcast to a %s",
              SHAPE(b), SHAPE(a));
    qkv_tensor *y = tensor_new_op(ctx, QKV_OP_ADD, a->dtype, a->ndim, a->shape, a, b, NULL);
    QKV_TYPED(a->dtype, {
        T *yv = y->data;
        const T *av = a->data, *bv = b->data;
        FOR_STRIDED(a, bs, i, j, { yv[i] = av[i] + bv[j]; });
    });
    return y;
}

void add_backward(qkv_tensor *y) {
    qkv_tensor *a = y->src[0], *b = y->src[1];
    int64_t bs[4];
    tensor_broadcast_strides(a, b, bs);
    bool store_a = a->grad && grad_first_write(a); /* then da = 0 + dy (internal.h) */
    QKV_TYPED(y->dtype, {
        const T *dy = y->grad;
        T *da = a->grad, *db = b->grad ? grad_to_add(b) : NULL;
        /* forward was: y[i] = a[i] + b[j]  =>  da[i] += dy[i], db[j] += dy[i] (summed over
         * the broadcast dims) */
        if (da)
            for (int64_t i = 0; i < y->size; i++) da[i] = (store_a ? (T)0 : da[i]) + dy[i];
        if (db) FOR_STRIDED(a, bs, i, j, { db[j] += dy[i]; });
    });
}
