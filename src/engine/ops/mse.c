/* mse.c - mean squared error, mean((a - b)^2), a scalar. */
#include "engine/internal.h"

qkv_tensor *qkv_mse(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b) {
    tensor_check_float(a, "mse", "a");
    tensor_check_float(b, "mse", "b");
    QKV_CHECK(a->dtype == b->dtype && tensor_same_shape(a, b), "mse",
              "a is %s %s, b is %s %s", qkv_dtype_name(a->dtype), SHAPE(a),
              qkv_dtype_name(b->dtype), SHAPE(b));
    qkv_tensor *loss = tensor_new_op(ctx, QKV_OP_MSE, a->dtype, 0, NULL, a, b, NULL);
    double total = 0;
    QKV_TYPED(a->dtype, {
        const T *av = a->data, *bv = b->data;
        for (int64_t i = 0; i < a->size; i++) {
            double d = (double)av[i] - (double)bv[i];
            total += d * d;
        }
    });
    qkv_set(loss, 0, total / (double)a->size);
    return loss;
}

void mse_backward(qkv_tensor *loss) {
    qkv_tensor *a = loss->src[0], *b = loss->src[1];
    double g = 2.0 * qkv_grad_get(loss, 0) / (double)a->size;
    QKV_TYPED(a->dtype, {
        const T *av = a->data, *bv = b->data;
        T *da = a->grad, *db = b->grad;
        /* forward was: L = Σ (a-b)² / n  =>  da += 2(a-b)/n · dL, db -= the same */
        for (int64_t i = 0; i < a->size; i++) {
            T d = (T)(g * ((double)av[i] - (double)bv[i]));
            if (da) da[i] += d;
            if (db) db[i] -= d;
        }
    });
}
