/* gelu.c - GELU, elementwise, in PyTorch's two forms: x·Φ(x) with the erf (QKV_ACT_GELU), or
 * the tanh approximation 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) (QKV_ACT_GELU_TANH). The
 * form is iparam[0]; the loops are kernels/activation_kernel.c's. */
#include "engine/internal.h"
#include "kernels/kernels.h"

qkv_tensor *qkv_gelu(qkv_ctx *ctx, qkv_tensor *x, qkv_act act) {
    tensor_check_float(x, "gelu", "x");
    QKV_CHECK(act == QKV_ACT_GELU || act == QKV_ACT_GELU_TANH, "gelu",
              "form %d is not gelu or gelu-tanh", (int)act);
    qkv_tensor *y = tensor_new_op(ctx, QKV_OP_GELU, x->dtype, x->ndim, x->shape, x, NULL, NULL);
    y->iparam[0] = act;
    bool tanh_form = act == QKV_ACT_GELU_TANH;
    if (x->dtype == QKV_F32)
        gelu_forward_f32(y->data, x->data, x->size, tanh_form);
    else
        gelu_forward_f64(y->data, x->data, x->size, tanh_form);
    return y;
}

/* forward was: y = gelu(x)  =>  dx += dy·gelu'(x). It writes every element of dx, so it
 * stores on the first write (op_table: stores first). */
void gelu_backward(qkv_tensor *y) {
    qkv_tensor *x = y->src[0];
    if (!x->grad) return;
    bool tanh_form = y->iparam[0] == QKV_ACT_GELU_TANH, store = grad_first_write(x);
    if (y->dtype == QKV_F32)
        gelu_backward_f32(x->grad, y->grad, x->data, y->size, tanh_form, store);
    else
        gelu_backward_f64(x->grad, y->grad, x->data, y->size, tanh_form, store);
}
