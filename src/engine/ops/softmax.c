/* softmax.c - row-wise softmax over the last dim. */
#include "engine/internal.h"
#include "kernels/kernels.h"

qkv_tensor *qkv_softmax(qkv_ctx *ctx, qkv_tensor *x) {
    tensor_check_float(x, "softmax", "x");
    QKV_CHECK(x->ndim >= 1, "softmax", "x is a scalar");
    qkv_tensor *y = tensor_new_op(ctx, QKV_OP_SOFTMAX, x->dtype, x->ndim, x->shape, x, NULL, NULL);
    int64_t n = x->shape[x->ndim - 1];
    if (x->dtype == QKV_F32)
        softmax_forward_f32(y->data, x->data, x->size / n, n);
    else
        softmax_forward_f64(y->data, x->data, x->size / n, n);
    return y;
}

void softmax_backward(qkv_tensor *y) {
    qkv_tensor *x = y->src[0];
    if (!x->grad) return;
    int64_t n = y->shape[y->ndim - 1];
    if (y->dtype == QKV_F32)
        softmax_backward_f32(x->grad, y->data, y->grad, y->size / n, n);
    else
        softmax_backward_f64(x->grad, y->data, y->grad, y->size / n, n);
}
