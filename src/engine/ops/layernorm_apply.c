/* layernorm_apply.c - a LayerNorm with its scale given: x (..., C), s (..., 1) (each row's
 * 1/√(var + eps), from layernorm_scale.c, or an analysis's edit of it), gain and bias (C):
 * y = (x − mean)·s·gain + bias, mean each row's. The loops are kernels/layernorm_kernel.c's.
 *
 * saved: each row's mean in double (rows doubles, in the output's context), when the output
 * takes a gradient. */
#include "engine/internal.h"
#include "kernels/kernels.h"

qkv_tensor *qkv_layernorm_apply(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *s, qkv_tensor *gain,
                                qkv_tensor *bias) {
    tensor_check_float(x, "layernorm_apply", "x");
    tensor_check_float(s, "layernorm_apply", "s");
    tensor_check_float(gain, "layernorm_apply", "gain");
    tensor_check_float(bias, "layernorm_apply", "bias");
    QKV_CHECK(x->ndim >= 1, "layernorm_apply", "x is a scalar");
    QKV_CHECK(s->dtype == x->dtype && gain->dtype == x->dtype && bias->dtype == x->dtype,
              "layernorm_apply", "dtypes differ: x is %s, s %s, gain %s, bias %s",
              qkv_dtype_name(x->dtype), qkv_dtype_name(s->dtype), qkv_dtype_name(gain->dtype),
              qkv_dtype_name(bias->dtype));
    int64_t C = x->shape[x->ndim - 1], rows = x->size / C;
    bool s_rows = s->ndim == x->ndim && s->shape[s->ndim - 1] == 1;
    for (int d = 0; s_rows && d < x->ndim - 1; d++) s_rows = s->shape[d] == x->shape[d];
    QKV_CHECK(s_rows, "layernorm_apply", "s %s must be x's shape %s with a last dim of 1",
              SHAPE(s), SHAPE(x));
    QKV_CHECK(gain->ndim == 1 && gain->shape[0] == C && bias->ndim == 1 && bias->shape[0] == C,
              "layernorm_apply", "gain %s and bias %s must be (%lld), the last dim of x %s",
              SHAPE(gain), SHAPE(bias), (long long)C, SHAPE(x));
    qkv_tensor *y = tensor_new_op(ctx, QKV_OP_LAYERNORM_APPLY, x->dtype, x->ndim, x->shape, x, s,
                                  gain);
    tensor_add_fourth_src(y, bias);
    double *mean = NULL;
    if (y->requires_grad) { /* the backward's; evaluation (no-grad) keeps nothing */
        mean = arena_alloc_raw(ctx, (size_t)rows * sizeof *mean);
        y->saved = mean;
    }
    if (x->dtype == QKV_F32)
        layernorm_apply_forward_f32(y->data, mean, x->data, s->data, gain->data, bias->data, rows,
                                    C);
    else
        layernorm_apply_forward_f64(y->data, mean, x->data, s->data, gain->data, bias->data, rows,
                                    C);
    return y;
}

/* The LayerNorm as the two ops. */
qkv_tensor *qkv_layernorm(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *gain, qkv_tensor *bias,
                          double eps) {
    return qkv_layernorm_apply(ctx, x, qkv_layernorm_scale(ctx, x, eps), gain, bias);
}

/* forward was: y = x̂·gain + bias, x̂ = (x − mean)·s, s held (its own input)  =>
 *   dx = s·(g − mean_row(g)) with g = dy·gain (the centring's derivative; s's dependence on x
 *        is layernorm_scale's backward),
 *   ds = Σ_row g·(x − mean),  dgain = Σ_rows dy·x̂,  dbias = Σ_rows dy.
 * With layernorm_scale's dx = ds·(−s³·(x − mean)/C) the two give the LayerNorm's own
 * dx = s·(g − mean(g) − x̂·mean(g·x̂)).
 * It writes every element of each gradient, so it stores on the first write (op_table:
 * stores first), asking grad_first_write in the order the kernel writes: dx, ds, dgain, dbias
 * (so that an input passed twice, such as one tensor for gain and bias, is stored once and
 * then added to). The sums over rows take scratch from the output's context. */
void layernorm_apply_backward(qkv_tensor *y) {
    qkv_tensor *x = y->src[0], *s = y->src[1], *gain = y->src[2], *bias = y->src[3];
    int64_t C = x->shape[x->ndim - 1], rows = x->size / C;
    const double *mean = y->saved;
    unsigned store = 0;
    if (x->grad && grad_first_write(x)) store |= LAYERNORM_STORE_DX;
    if (s->grad && grad_first_write(s)) store |= LAYERNORM_STORE_DS;
    if (gain->grad && grad_first_write(gain)) store |= LAYERNORM_STORE_DGAIN;
    if (bias->grad && grad_first_write(bias)) store |= LAYERNORM_STORE_DBIAS;
    double *scratch = NULL;
    if (gain->grad || bias->grad)
        scratch = arena_alloc_raw(y->ctx, layernorm_scratch_doubles(rows, C) * sizeof *scratch);
    if (y->dtype == QKV_F32)
        layernorm_apply_backward_f32(x->grad, s->grad, gain->grad, bias->grad, store, y->grad,
                                     x->data, s->data, gain->data, mean, rows, C, scratch);
    else
        layernorm_apply_backward_f64(x->grad, s->grad, gain->grad, bias->grad, store, y->grad,
                                     x->data, s->data, gain->data, mean, rows, C, scratch);
}
