/* add.c - y = a + b, with b broadcast to a's shape (a bias, a positional table). */
#include "engine/internal.h"
#include "kernels/kernels.h"

#define ADD_CHUNK 4096 /* elements of a task */

/* The length of b's block when a is b repeated over a's leading dims (a bias over rows, a
 * positional table over the batch, or b of a's own shape), else 0: element i of a then meets
 * b[i % n], and the loops below run on contiguous blocks, vectorised and on several threads. */
static int64_t repeated_block(const qkv_tensor *a, const qkv_tensor *b) {
    int64_t as[4], bs[4];
    tensor_shape4(a, as);
    tensor_shape4(b, bs);
    int i = 3;
    while (i >= 0 && bs[i] == as[i]) i--;
    for (; i >= 0; i--)
        if (bs[i] != 1) return 0;
    return b->size;
}

qkv_tensor *qkv_add(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b) {
    tensor_check_float(a, "add", "a");
    tensor_check_float(b, "add", "b");
    QKV_CHECK(a->dtype == b->dtype, "add", "dtypes differ: a is %s, b is %s",
              qkv_dtype_name(a->dtype), qkv_dtype_name(b->dtype));
    int64_t bs[4];
    QKV_CHECK(tensor_broadcast_strides(a, b, bs), "add", "b %s does not broadcast to a %s",
              SHAPE(b), SHAPE(a));
    qkv_tensor *y = tensor_new_op(ctx, QKV_OP_ADD, a->dtype, a->ndim, a->shape, a, b, NULL);
    int64_t n = repeated_block(a, b), size = a->size;
    QKV_TYPED(a->dtype, {
        T *yv = y->data;
        const T *av = a->data, *bv = b->data;
        if (n > 0) { /* chunks of a, each in runs that meet b's block once */
            KERNEL_FOR_STATIC(kernel_team((double)size, KERNEL_PARALLEL_ELEMS), c,
                              (size + ADD_CHUNK - 1) / ADD_CHUNK, {
                int64_t i = c * ADD_CHUNK, end = i + ADD_CHUNK < size ? i + ADD_CHUNK : size;
                while (i < end) {
                    int64_t j = i % n, len = end - i < n - j ? end - i : n - j;
                    for (int64_t k = 0; k < len; k++) yv[i + k] = av[i + k] + bv[j + k];
                    i += len;
                }
            });
        } else {
            FOR_STRIDED(a, bs, i, j, { yv[i] = av[i] + bv[j]; });
        }
    });
    return y;
}

void add_backward(qkv_tensor *y) {
    qkv_tensor *a = y->src[0], *b = y->src[1];
    int64_t bs[4];
    tensor_broadcast_strides(a, b, bs);
    bool store_a = a->grad && grad_first_write(a); /* then da = 0 + dy (internal.h) */
    int64_t n = repeated_block(a, b), size = y->size;
    int64_t team = kernel_team((double)size, KERNEL_PARALLEL_ELEMS);
    QKV_TYPED(y->dtype, {
        const T *dy = y->grad;
        T *da = a->grad, *db = b->grad ? grad_to_add(b) : NULL;
        /* forward was: y[i] = a[i] + b[j]  =>  da[i] += dy[i], db[j] += dy[i] (summed over
         * the broadcast dims, in the order of i) */
        if (da) KERNEL_FOR_STATIC(team, i, size, da[i] = (store_a ? (T)0 : da[i]) + dy[i];);
        if (db && n > 0) { /* chunks of b's block, each summed over the repeats in order */
            int64_t repeats = size / n;
            KERNEL_FOR_STATIC(team, c, (n + ADD_CHUNK - 1) / ADD_CHUNK, {
                int64_t lo = c * ADD_CHUNK, hi = lo + ADD_CHUNK < n ? lo + ADD_CHUNK : n;
                for (int64_t r = 0; r < repeats; r++)
                    for (int64_t j = lo; j < hi; j++) db[j] += dy[r * n + j];
            });
        } else if (db) {
            FOR_STRIDED(a, bs, i, j, { db[j] += dy[i]; });
        }
    });
}
