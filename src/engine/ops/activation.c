/* activation.c - the MLP's choice of nonlinearity (qkv_act): its names, and qkv_activation,
 * which builds relu.c's or gelu.c's op. Not an op of its own. */
#include "engine/internal.h"

static const char *const act_names[QKV_ACTS] = {
    [QKV_ACT_RELU] = "relu",
    [QKV_ACT_GELU] = "gelu",
    [QKV_ACT_GELU_TANH] = "gelu-tanh",
};

const char *qkv_act_name(qkv_act act) {
    return (int)act >= 0 && (int)act < QKV_ACTS ? act_names[act] : "?";
}

qkv_tensor *qkv_activation(qkv_ctx *ctx, qkv_tensor *x, qkv_act act) {
    QKV_CHECK((int)act >= 0 && (int)act < QKV_ACTS, "activation", "unknown form %d", (int)act);
    return act == QKV_ACT_RELU ? qkv_relu(ctx, x) : qkv_gelu(ctx, x, act);
}
