/* layernorm_scale.c - a LayerNorm's scale: x (..., C) -> s (..., 1), each row's
 * s = 1/√(var + eps) with var the row's biased variance (divided by C), as PyTorch's
 * layer_norm divides by. layernorm_apply.c uses it: the LayerNorm is the two ops, so that s is
 * a tensor of the graph (the analyses' ln-scale site). The loops are
 * kernels/layernorm_kernel.c's.
 *
 * saved: each row's mean, then each row's s in double (2·rows doubles, in the output's
 * context), when the output takes a gradient; fparam[0]: eps. */
#include "engine/internal.h"
#include "kernels/kernels.h"

qkv_tensor *qkv_layernorm_scale(qkv_ctx *ctx, qkv_tensor *x, double eps) {
    tensor_check_float(x, "layernorm_scale", "x");
    QKV_CHECK(x->ndim >= 1, "layernorm_scale", "x is a scalar");
    QKV_CHECK(eps >= 0 && isfinite(eps), "layernorm_scale", "eps %g must be finite and >= 0",
              eps);
    int64_t C = x->shape[x->ndim - 1], rows = x->size / C;
    int64_t shape[QKV_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = 1;
    qkv_tensor *s = tensor_new_op(ctx, QKV_OP_LAYERNORM_SCALE, x->dtype, x->ndim, shape, x,
                                  NULL, NULL);
    s->fparam[0] = eps;
    double *mean = NULL, *rs = NULL;
    if (s->requires_grad) { /* the backward's; evaluation (no-grad) keeps nothing */
        mean = arena_alloc_raw(ctx, 2 * (size_t)rows * sizeof *mean);
        rs = mean + rows;
        s->saved = mean;
    }
    if (x->dtype == QKV_F32)
        layernorm_scale_forward_f32(s->data, mean, rs, x->data, rows, C, eps);
    else
        layernorm_scale_forward_f64(s->data, mean, rs, x->data, rows, C, eps);
    return s;
}

/* forward was: s = (var + eps)^(−1/2), var = mean_row((x − mean)²)  =>
 *   dx = ds·(−s³·(x − mean)/C)
 * (with the row's own s and mean, kept in double). It writes every element of dx, so it
 * stores on the first write (op_table: stores first). */
void layernorm_scale_backward(qkv_tensor *s) {
    qkv_tensor *x = s->src[0];
    if (!x->grad) return;
    int64_t C = x->shape[x->ndim - 1], rows = x->size / C;
    const double *mean = s->saved, *rs = mean + rows;
    bool store = grad_first_write(x);
    if (s->dtype == QKV_F32)
        layernorm_scale_backward_f32(x->grad, store, s->grad, x->data, mean, rs, rows, C);
    else
        layernorm_scale_backward_f64(x->grad, store, s->grad, x->data, mean, rs, rows, C);
}
