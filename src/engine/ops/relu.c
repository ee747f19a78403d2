/* relu.c - y = max(x, 0), elementwise, as PyTorch's relu (the loops: kernels/activation_kernel.c). */
#include "engine/internal.h"
#include "kernels/kernels.h"

qkv_tensor *qkv_relu(qkv_ctx *ctx, qkv_tensor *x) {
    tensor_check_float(x, "relu", "x");
    qkv_tensor *y = tensor_new_op(ctx, QKV_OP_RELU, x->dtype, x->ndim, x->shape, x, NULL, NULL);
    if (x->dtype == QKV_F32)
        relu_forward_f32(y->data, x->data, x->size);
    else
        relu_forward_f64(y->data, x->data, x->size);
    return y;
}

/* forward was: y = max(x, 0)  =>  dx += dy where x > 0 (0 at x = 0, as PyTorch). It writes
 * every element of dx, so it stores on the first write (op_table: stores first). */
void relu_backward(qkv_tensor *y) {
    qkv_tensor *x = y->src[0];
    if (!x->grad) return;
    bool store = grad_first_write(x);
    if (y->dtype == QKV_F32)
        relu_backward_f32(x->grad, y->grad, x->data, y->size, store);
    else
        relu_backward_f64(x->grad, y->grad, x->data, y->size, store);
}
