/* select_rows.c - y = rows `at` of each (T, C) matrix of x: (..., T, C) -> (..., n, C), the
 * positions of every sequence that the model computes past its last attention layer's keys
 * and values (qkv_model_forward_at). */
#include "engine/internal.h"

qkv_tensor *qkv_select_rows(qkv_ctx *ctx, qkv_tensor *x, int n, const int32_t *at) {
    tensor_check_float(x, "select_rows", "x");
    QKV_CHECK(x->ndim >= 2, "select_rows", "x %s must be (..., T, C)", SHAPE(x));
    int64_t len = x->shape[x->ndim - 2]; /* T */
    QKV_CHECK(n >= 1 && at, "select_rows", "%d rows%s", n, at ? "" : " and no array of them");
    for (int i = 0; i < n; i++)
        QKV_CHECK(at[i] >= 0 && at[i] < len, "select_rows", "row %d is %d, outside 0..%lld of x %s",
                  i, at[i], (long long)len - 1, SHAPE(x));
    int64_t shape[QKV_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 2] = n;
    qkv_tensor *y = tensor_new_op(ctx, QKV_OP_SELECT_ROWS, x->dtype, x->ndim, shape, x, NULL, NULL);
    int32_t *rows = qkv_ctx_alloc(ctx, (size_t)n * sizeof *rows);
    memcpy(rows, at, (size_t)n * sizeof *rows);
    y->saved = rows;
    y->iparam[0] = n;
    int64_t C = x->shape[x->ndim - 1], mats = x->size / (len * C);
    QKV_TYPED(x->dtype, {
        T *yv = y->data;
        const T *xv = x->data;
        for (int64_t b = 0; b < mats; b++)
            for (int i = 0; i < n; i++)
                memcpy(yv + (b * n + i) * C, xv + (b * len + rows[i]) * C, (size_t)C * sizeof(T));
    });
    return y;
}

void select_rows_backward(qkv_tensor *y) {
    qkv_tensor *x = y->src[0];
    if (!x->grad) return;
    const int32_t *rows = y->saved;
    int64_t n = y->iparam[0], len = x->shape[x->ndim - 2], C = x->shape[x->ndim - 1];
    int64_t mats = x->size / (len * C);
    QKV_TYPED(y->dtype, {
        T *restrict dx = grad_to_add(x); /* zeroed where nothing wrote it: the other rows' 0 */
        const T *restrict dy = y->grad;
        /* y[b, i] = x[b, at[i]]  =>  dx[b, at[i]] += dy[b, i], in the order of i */
        for (int64_t b = 0; b < mats; b++)
            for (int64_t i = 0; i < n; i++) {
                T *d = dx + (b * len + rows[i]) * C;
                const T *g = dy + (b * n + i) * C;
                for (int64_t c = 0; c < C; c++) d[c] += g[c];
            }
    });
}
