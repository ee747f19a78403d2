/* main.c - a program outside qkv, built against an installed qkv (the header and libqkv only;
 * tests/consumer_test.sh builds it with find_package and with pkg-config).
 *
 * One layer of causal self-attention, B=2 sequences of T=5 tokens of width C=8, learns by SGD
 * to map a fixed input to a fixed target: the loss must fall. Along the way it checks a
 * gradient against a finite difference, the fused and the composed attention against each
 * other, the error path of the file API, a safetensors round trip (which needs libcjson,
 * so a static link without it fails here), and a copying score (LAPACK, which libqkv loads
 * itself). Usage: consumer [DIR] (DIR for the file; default the current directory). Exit
 * status 0 when every check passed. */
#include <qkv.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { B = 2, T = 5, C = 8, D = 4 };

static int failures;
#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            printf("FAILED: " __VA_ARGS__);                                               \
            printf("\n");                                                                 \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)

/* The loss of one forward pass through q, k, v projections and fused causal attention. */
static qkv_tensor *forward(qkv_ctx *step, qkv_tensor *x, qkv_tensor *wq, qkv_tensor *wk,
                           qkv_tensor *wv, qkv_tensor *target, qkv_tensor **y_out) {
    qkv_tensor *mask = qkv_mask_causal(step, QKV_F32, T, T);
    qkv_tensor *q = qkv_matmul(step, x, wq), *k = qkv_matmul(step, x, wk), *v = qkv_matmul(step, x, wv);
    qkv_tensor *y = qkv_attention(step, q, k, v, mask, 0.0, NULL); /* (B, T, D) */
    if (y_out) *y_out = y;
    return qkv_mse(step, y, target);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : ".";
    printf("qkv %s (header %d.%d.%d)\n", QKV_VERSION_STRING, QKV_VERSION_MAJOR,
           QKV_VERSION_MINOR, QKV_VERSION_PATCH);

    qkv_ctx *params = qkv_ctx_new(0), *step = qkv_ctx_new(0);
    if (!params || !step) {
        printf("FAILED: out of memory\n");
        return 1;
    }
    qkv_rng rng = qkv_rng_seed(7);
    const int64_t wshape[2] = {C, D}, xshape[3] = {B, T, C}, yshape[3] = {B, T, D};
    qkv_tensor *wq = qkv_param(params, qkv_randn(params, QKV_F32, 2, wshape, 0.5, &rng));
    qkv_tensor *wk = qkv_param(params, qkv_randn(params, QKV_F32, 2, wshape, 0.5, &rng));
    qkv_tensor *wv = qkv_param(params, qkv_randn(params, QKV_F32, 2, wshape, 0.5, &rng));
    qkv_tensor *x = qkv_randn(params, QKV_F32, 3, xshape, 1.0, &rng);
    qkv_tensor *target = qkv_randn(params, QKV_F32, 3, yshape, 0.5, &rng);

    /* A gradient entry against a central finite difference. */
    qkv_ctx_reset(step);
    qkv_zero_grad(params);
    qkv_backward(forward(step, x, wq, wk, wv, target, NULL));
    double analytic = qkv_grad_get(wq, 3), w0 = qkv_get(wq, 3), h = 1e-2;
    qkv_ctx_set_no_grad(step, true);
    qkv_set(wq, 3, w0 + h);
    double up = qkv_get(forward(step, x, wq, wk, wv, target, NULL), 0);
    qkv_set(wq, 3, w0 - h);
    double down = qkv_get(forward(step, x, wq, wk, wv, target, NULL), 0);
    qkv_set(wq, 3, w0);
    qkv_ctx_set_no_grad(step, false);
    double numeric = (up - down) / (2 * h);
    printf("dLoss/dW_Q[3]: backward %.6f, finite difference %.6f\n", analytic, numeric);
    CHECK(fabs(analytic - numeric) <= 1e-3 + 1e-2 * fabs(numeric), "gradient mismatch");
    CHECK(analytic != 0.0, "zero gradient");

    /* Fused and composed attention give the same output, and the weights' rows sum to 1. */
    qkv_ctx_reset(step);
    qkv_tensor *y_fused, *weights;
    forward(step, x, wq, wk, wv, target, &y_fused);
    qkv_tensor *q = qkv_matmul(step, x, wq), *k = qkv_matmul(step, x, wk), *v = qkv_matmul(step, x, wv);
    qkv_tensor *y_composed = qkv_attention(step, q, k, v, qkv_mask_causal(step, QKV_F32, T, T),
                                           0.0, &weights);
    double worst = 0;
    for (int64_t i = 0; i < y_fused->size; i++)
        worst = fmax(worst, fabs(qkv_get(y_fused, i) - qkv_get(y_composed, i)));
    CHECK(worst < 1e-5, "fused and composed attention differ by %g", worst);
    for (int64_t r = 0; r < B * T; r++) {
        double sum = 0;
        for (int64_t j = 0; j < T; j++) sum += qkv_get(weights, r * T + j);
        CHECK(fabs(sum - 1) < 1e-5, "attention row %lld sums to %g", (long long)r, sum);
    }

    /* Training: the loss must fall. */
    double first = 0, last = 0;
    for (int it = 0; it < 60; it++) {
        qkv_ctx_reset(step);
        qkv_tensor *loss = forward(step, x, wq, wk, wv, target, NULL);
        qkv_zero_grad(params);
        qkv_backward(loss);
        qkv_sgd_step(params, 0.5f);
        if (it == 0) first = qkv_get(loss, 0);
        last = qkv_get(loss, 0);
    }
    printf("loss %.6f -> %.6f after 60 SGD steps\n", first, last);
    CHECK(last < 0.8 * first, "the loss did not fall (%g -> %g)", first, last);

    /* Errors from the outside world come back as a status with a message. */
    qkv_st *st = NULL;
    qkv_status s = qkv_st_load("/nonexistent/qkv-consumer.safetensors", &st);
    CHECK(s == QKV_ERR_IO && st == NULL, "loading a missing file gave status %d", (int)s);
    CHECK(strlen(qkv_last_error()) > 0, "no error message");

    /* A safetensors round trip of the trained W_Q. */
    char path[1024];
    snprintf(path, sizeof path, "%s/consumer.safetensors", dir);
    const char *names[1] = {"w_q"}, *meta[2] = {"made_by", "qkv consumer test"};
    const qkv_tensor *tensors[1] = {wq};
    s = qkv_st_save(path, 1, names, tensors, 1, meta);
    CHECK(s == QKV_OK, "saving %s: %s", path, qkv_last_error());
    if (s == QKV_OK) {
        s = qkv_st_load(path, &st);
        CHECK(s == QKV_OK, "loading %s: %s", path, qkv_last_error());
        if (s == QKV_OK) {
            qkv_tensor *back = qkv_zeros(step, QKV_F32, 2, wshape);
            s = qkv_st_read(st, "w_q", back);
            CHECK(s == QKV_OK, "reading w_q: %s", qkv_last_error());
            CHECK(s != QKV_OK || !memcmp(back->data, wq->data, sizeof(float) * C * D),
                  "w_q changed on the way through the file");
            const char *m = qkv_st_meta(st, "made_by");
            CHECK(m && !strcmp(m, "qkv consumer test"), "metadata lost");
            qkv_st_free(st);
        }
        remove(path);
    }

    /* A model's copying score: its eigenvalues come from LAPACK, which libqkv loads (dlopen)
     * only now; this program links no LAPACK, static or shared. */
    qkv_model model;
    qkv_model_config mc = {.vocab = 8, .seq_len = 4, .d_model = 8, .heads = 1, .layers = 1,
                           .residual = true, .init_scale = 1, .dtype = QKV_F32};
    s = qkv_model_init(&model, &mc, 3);
    CHECK(s == QKV_OK, "a model: %s", qkv_last_error());
    if (s == QKV_OK) {
        double score = 2;
        s = qkv_copying_scores(&model, &score);
        CHECK(s == QKV_OK, "the copying score: %s", qkv_last_error());
        CHECK(s != QKV_OK || (score >= -1 && score <= 1), "a copying score of %g", score);
        printf("copying score of a random head: %.4f\n", score);
        qkv_model_free(&model);
    }

    qkv_ctx_free(step);
    qkv_ctx_free(params);
    if (failures) printf("%d check(s) FAILED\n", failures);
    else printf("ok\n");
    return failures ? 1 : 0;
}
