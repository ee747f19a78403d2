/* layernorm.c - LayerNorm over the last dim, as PyTorch's layer_norm: x (..., C), gain and
 * bias (C), y = (x − mean)·rstd·gain + bias with each row's mean and biased variance var,
 * rstd = 1/√(var + eps). The loops are kernels/layernorm_kernel.c's.
 *
 * saved: each row's mean, then each row's rstd (2·rows doubles, in the output's context),
 * when the output takes a gradient; fparam[0]: eps. */
#include "engine/internal.h"
#include "kernels/kernels.h"

qkv_tensor *qkv_layernorm(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *gain, qkv_tensor *bias,
                          double eps) {
    tensor_check_float(x, "layernorm", "x");
    tensor_check_float(gain, "layernorm", "gain");
    tensor_check_float(bias, "layernorm", "bias");
    QKV_CHECK(x->ndim >= 1, "layernorm", "x is a scalar");
    QKV_CHECK(gain->dtype == x->dtype && bias->dtype == x->dtype, "layernorm",
              "dtypes differ: x is %s, gain %s, bias %s", qkv_dtype_name(x->dtype),
              qkv_dtype_name(gain->dtype), qkv_dtype_name(bias->dtype));
    int64_t C = x->shape[x->ndim - 1], rows = x->size / C;
    QKV_CHECK(gain->ndim == 1 && gain->shape[0] == C && bias->ndim == 1 && bias->shape[0] == C,
              "layernorm", "gain %s and bias %s must be (%lld), the last dim of x %s",
              SHAPE(gain), SHAPE(bias), (long long)C, SHAPE(x));
    QKV_CHECK(eps >= 0 && isfinite(eps), "layernorm", "eps %g must be finite and >= 0", eps);
    qkv_tensor *y = tensor_new_op(ctx, QKV_OP_LAYERNORM, x->dtype, x->ndim, x->shape, x, gain,
                                  bias);
    y->fparam[0] = eps;
    double *mean = NULL, *rstd = NULL;
    if (y->requires_grad) { /* the backward's; evaluation (no-grad) keeps nothing */
        mean = arena_alloc_raw(ctx, 2 * (size_t)rows * sizeof *mean);
        rstd = mean + rows;
        y->saved = mean;
    }
    if (x->dtype == QKV_F32)
        layernorm_forward_f32(y->data, mean, rstd, x->data, gain->data, bias->data, rows, C, eps);
    else
        layernorm_forward_f64(y->data, mean, rstd, x->data, gain->data, bias->data, rows, C, eps);
    return y;
}

/* forward was: y = x̂·gain + bias, x̂ = (x − mean)·rstd  =>
 *   dx = rstd·(g − mean_row(g) − x̂·mean_row(g·x̂)) with g = dy·gain,
 *   dgain = Σ_rows dy·x̂,  dbias = Σ_rows dy.
 * It writes every element of each gradient, so it stores on the first write (op_table:
 * stores first), asking grad_first_write in the order the kernel writes: dx, dgain, dbias
 * (so that an input passed twice, such as one tensor for gain and bias, is stored once and
 * then added to). The sums over rows take scratch from the output's context. */
void layernorm_backward(qkv_tensor *y) {
    qkv_tensor *x = y->src[0], *gain = y->src[1], *bias = y->src[2];
    int64_t C = x->shape[x->ndim - 1], rows = x->size / C;
    const double *mean = y->saved, *rstd = mean + rows;
    unsigned store = 0;
    if (x->grad && grad_first_write(x)) store |= LAYERNORM_STORE_DX;
    if (gain->grad && grad_first_write(gain)) store |= LAYERNORM_STORE_DGAIN;
    if (bias->grad && grad_first_write(bias)) store |= LAYERNORM_STORE_DBIAS;
    double *scratch = NULL;
    if (gain->grad || bias->grad)
        scratch = arena_alloc_raw(y->ctx, layernorm_scratch_doubles(rows, C) * sizeof *scratch);
    if (y->dtype == QKV_F32)
        layernorm_backward_f32(x->grad, gain->grad, bias->grad, store, y->grad, x->data,
                               gain->data, mean, rstd, rows, C, scratch);
    else
        layernorm_backward_f64(x->grad, gain->grad, bias->grad, store, y->grad, x->data,
                               gain->data, mean, rstd, rows, C, scratch);
}
