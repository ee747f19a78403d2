/* embedding.c - y[..., :] = table[idx[...], :], whose backward is a scatter-add. */
#include "engine/internal.h"
#include "kernels/kernels.h"

qkv_tensor *qkv_embedding(qkv_ctx *ctx, qkv_tensor *table, qkv_tensor *idx) {
    tensor_check_float(table, "embedding", "table");
    QKV_CHECK(idx && idx->dtype == QKV_I32, "embedding", "idx must be an i32 tensor");
    QKV_CHECK(table->ndim == 2, "embedding", "table must be (V, D), it has %d dims", table->ndim);
    QKV_CHECK(idx->ndim < QKV_MAX_DIMS, "embedding", "idx has %d dims, at most %d", idx->ndim,
              QKV_MAX_DIMS - 1);
    int64_t V = table->shape[0], D = table->shape[1], shape[QKV_MAX_DIMS];
    memcpy(shape, idx->shape, sizeof shape);
    shape[idx->ndim] = D;
    const int32_t *ix = idx->data;
    for (int64_t i = 0; i < idx->size; i++)
        QKV_CHECK(ix[i] >= 0 && ix[i] < V, "embedding", "index %d is outside the table (V=%lld)",
                  ix[i], (long long)V);
    qkv_tensor *y =
        tensor_new_op(ctx, QKV_OP_EMBEDDING, table->dtype, idx->ndim + 1, shape, table, idx, NULL);
    size_t row = (size_t)D * qkv_dtype_size(table->dtype);
    KERNEL_FOR_STATIC(kernel_team((double)(idx->size * D), KERNEL_PARALLEL_ELEMS), i, idx->size,
                      memcpy((char *)y->data + i * row, (const char *)table->data + ix[i] * row,
                             row););
    return y;
}

void embedding_backward(qkv_tensor *y) {
    qkv_tensor *table = y->src[0], *idx = y->src[1];
    if (!table->grad) return;
    int64_t V = table->shape[0], D = table->shape[1];
    const int32_t *ix = idx->data;
    QKV_TYPED(y->dtype, {
        T *dt = table->grad;
        const T *dy = y->grad;
        /* forward was: y[i, :] = table[idx[i], :]  =>  dtable[idx[i], :] += dy[i, :]. Two
         * positions holding the same token write the same row, so each thread owns a range of
         * the table's rows and adds into them in the positions' order. */
        int64_t team = kernel_team((double)(idx->size * D), KERNEL_PARALLEL_ELEMS);
        KERNEL_FOR_STATIC(team, t, team, {
            int64_t v0 = V * t / team, v1 = V * (t + 1) / team;
            for (int64_t i = 0; i < idx->size; i++)
                if (ix[i] >= v0 && ix[i] < v1)
                    for (int64_t d = 0; d < D; d++) dt[ix[i] * D + d] += dy[i * D + d];
        });
    });
}
