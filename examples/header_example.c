/* header_example.c - the example that opens include/qkv.h, compiled and run.
 *
 * Three projection matrices W_Q, W_K, W_V (4x2) are trained by plain SGD so that
 * attention(X·W_Q, X·W_K, X·W_V) on a fixed input X (3 tokens of width 4) comes close to a
 * fixed target (3x2). The lines between the markers are the header's example, character for
 * character (the example_header_sync test compares them); the program returns 1 unless the
 * loss fell to under a quarter of its first value. */
#include <stdio.h>

#include "qkv.h"

int main(void) {
    /* ---- begin: the example at the top of include/qkv.h ---- */
    qkv_ctx *params = qkv_ctx_new(0);            // long-lived: weights, grads, fixed data
    qkv_ctx *step   = qkv_ctx_new(0);            // per step: graph + activations
    if (!params || !step) return 1;              // the only failure: out of memory
    qkv_rng rng = qkv_rng_seed(42);
    const int64_t w_shape[2] = {4, 2}, x_shape[2] = {3, 4}, y_shape[2] = {3, 2};
    qkv_tensor *wq = qkv_param(params, qkv_randn(params, QKV_F32, 2, w_shape, 0.5, &rng));
    qkv_tensor *wk = qkv_param(params, qkv_randn(params, QKV_F32, 2, w_shape, 0.5, &rng));
    qkv_tensor *wv = qkv_param(params, qkv_randn(params, QKV_F32, 2, w_shape, 0.5, &rng));
    qkv_tensor *x = qkv_randn(params, QKV_F32, 2, x_shape, 1.0, &rng);       // 3 tokens, C = 4
    qkv_tensor *target = qkv_randn(params, QKV_F32, 2, y_shape, 1.0, &rng);  // (Nq, Dv)
    double first = 0, last = 0;                  // the loss at the first and the last step
    for (int it = 0; it < 100; it++) {
        qkv_ctx_reset(step);                     // frees last step's graph in O(1)
        qkv_tensor *q = qkv_matmul(step, x, wq), *k = qkv_matmul(step, x, wk),
                   *v = qkv_matmul(step, x, wv);
        qkv_tensor *y = qkv_attention(step, q, k, v, NULL, 0.0, NULL);  // 0 => 1/sqrt(d_k)
        qkv_tensor *loss = qkv_mse(step, y, target);                     // a scalar
        qkv_zero_grad(params);                   // explicit: backward accumulates
        qkv_backward(loss);                      // wq->grad, wk->grad, wv->grad
        qkv_sgd_step(params, 0.1f);              // every parameter of `params`
        if (it == 0) first = qkv_get(loss, 0);
        last = qkv_get(loss, 0);
    }
    qkv_ctx_free(step); qkv_ctx_free(params);
    /* ---- end ---- */
    printf("loss %.6f -> %.6f\n", first, last);
    if (!(last < 0.25 * first)) {
        printf("FAILED: the loss did not fall to under a quarter of its first value\n");
        return 1;
    }
    printf("ok\n");
    return 0;
}
