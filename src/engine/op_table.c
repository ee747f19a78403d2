/* op_table.c - the one table of what the engine knows of each op, one row per qkv_op: its
 * name (qkv_op_name, printing), its backward (autograd.c), the part of a step's profile its
 * forward and backward run in (tensor_new_op, autograd.c), and whether its backward stores
 * its inputs' gradients on the first write of a pass. A new op is a row here (and its
 * backward's prototype), its file in ops/, and its value in qkv.h's enum; nothing else in the
 * engine lists ops. */
#include "engine/internal.h"

/* Each op's backward (op_backward_fn), defined in ops/NAME.c. */
void matmul_backward(qkv_tensor *out);
void scale_backward(qkv_tensor *out);
void mask_backward(qkv_tensor *out);
void softmax_backward(qkv_tensor *out);
void add_backward(qkv_tensor *out);
void mul_backward(qkv_tensor *out);
void embedding_backward(qkv_tensor *out);
void reshape_backward(qkv_tensor *out);
void transpose_backward(qkv_tensor *out);
void cross_entropy_backward(qkv_tensor *out);
void mse_backward(qkv_tensor *out);
void sum_backward(qkv_tensor *out);
void mean_backward(qkv_tensor *out);
void attention_fused_backward(qkv_tensor *out); /* ops/attention_fused.c */
void relu_backward(qkv_tensor *out);
void gelu_backward(qkv_tensor *out);
void layernorm_scale_backward(qkv_tensor *out);
void layernorm_apply_backward(qkv_tensor *out);
void select_rows_backward(qkv_tensor *out);

const op_info op_table[] = {
    /* [op] = {name, backward, profile part, stores first} */
    [QKV_OP_NONE] = {"leaf", NULL, PROFILE_OTHER, false},
    [QKV_OP_MATMUL] = {"matmul", matmul_backward, PROFILE_PRODUCTS, true},
    [QKV_OP_SCALE] = {"scale", scale_backward, PROFILE_ELEMENTWISE, false},
    [QKV_OP_MASK] = {"mask", mask_backward, PROFILE_ELEMENTWISE, false},
    [QKV_OP_SOFTMAX] = {"softmax", softmax_backward, PROFILE_SOFTMAX, false},
    [QKV_OP_ADD] = {"add", add_backward, PROFILE_ELEMENTWISE, true},
    [QKV_OP_MUL] = {"mul", mul_backward, PROFILE_ELEMENTWISE, false},
    [QKV_OP_EMBEDDING] = {"embedding", embedding_backward, PROFILE_EMBEDDING, false},
    [QKV_OP_RESHAPE] = {"reshape", reshape_backward, PROFILE_LAYOUT, true},
    [QKV_OP_TRANSPOSE] = {"transpose", transpose_backward, PROFILE_LAYOUT, true},
    [QKV_OP_CROSS_ENTROPY] = {"cross_entropy", cross_entropy_backward, PROFILE_LOSS, false},
    [QKV_OP_MSE] = {"mse", mse_backward, PROFILE_LOSS, false},
    [QKV_OP_SUM] = {"sum", sum_backward, PROFILE_ELEMENTWISE, false},
    [QKV_OP_MEAN] = {"mean", mean_backward, PROFILE_ELEMENTWISE, false},
    /* the fused op stores q, k and v; its products and packing enter their own parts */
    [QKV_OP_ATTENTION] = {"attention_fused", attention_fused_backward, PROFILE_SOFTMAX, true},
    [QKV_OP_RELU] = {"relu", relu_backward, PROFILE_ELEMENTWISE, true},
    [QKV_OP_GELU] = {"gelu", gelu_backward, PROFILE_ELEMENTWISE, true},
    [QKV_OP_LAYERNORM_SCALE] = {"layernorm_scale", layernorm_scale_backward, PROFILE_ELEMENTWISE,
                                true},
    [QKV_OP_LAYERNORM_APPLY] = {"layernorm_apply", layernorm_apply_backward, PROFILE_ELEMENTWISE,
                                true},
    [QKV_OP_SELECT_ROWS] = {"select_rows", select_rows_backward, PROFILE_LAYOUT, false},
};
/* A row missing at the end stops the build here; one missing in the middle would be zeros,
 * which test_op_table (tests/test_autograd.c) finds: a NULL name or backward. */
_Static_assert(sizeof op_table / sizeof op_table[0] == QKV_OP_COUNT,
               "op_table needs one row per qkv_op (include/qkv.h)");
