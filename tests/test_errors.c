/* test_errors.c - programming errors stop the process (SIGABRT) with one line naming the op and
 * the shapes. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* fork, pipe, dup2, waitpid, setrlimit */
#endif
#include "qkv.h"

#include "fixtures.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static qkv_tensor *f32(int ndim, const int64_t *shape) { return qkv_ones(ctx, QKV_F32, ndim, shape); }

/* ---- each misuse aborts with its op's message ------------------------------------------ */
/* Each runs in a child of capture_stderr, with ctx a fresh context. */
static void misuse_matmul_inner_mismatch(void) {
    qkv_matmul(ctx, f32(2, (int64_t[]){2, 3}), f32(2, (int64_t[]){4, 5}));
}

static void misuse_matmul_transposed_mismatch(void) {
    /* (2,3)·(2,3)ᵀ is fine, (2,3)ᵀ·(2,3)ᵀ is not: 2 vs 3 */
    qkv_matmul_ex(ctx, f32(2, (int64_t[]){2, 3}), false, f32(2, (int64_t[]){2, 3}), true);
    qkv_matmul_ex(ctx, f32(2, (int64_t[]){2, 3}), true, f32(2, (int64_t[]){2, 3}), true);
}

static void misuse_matmul_batch_mismatch(void) {
    qkv_matmul(ctx, f32(3, (int64_t[]){2, 3, 4}), f32(3, (int64_t[]){3, 4, 5}));
}

static void misuse_matmul_dtype_mismatch(void) {
    qkv_matmul(ctx, f32(2, (int64_t[]){2, 3}), qkv_ones(ctx, QKV_F64, 2, (int64_t[]){3, 2}));
}

static void misuse_add_not_broadcastable(void) {
    qkv_add(ctx, f32(2, (int64_t[]){2, 3}), f32(2, (int64_t[]){2, 4}));
}

static void misuse_add_b_bigger_than_a(void) {
    qkv_add(ctx, f32(1, (int64_t[]){3}), f32(2, (int64_t[]){2, 3}));
}

static void misuse_mul_not_broadcastable(void) {
    qkv_mul(ctx, f32(2, (int64_t[]){2, 3}), f32(1, (int64_t[]){2}));
}

static void misuse_softmax_i32(void) {
    qkv_softmax(ctx, qkv_zeros(ctx, QKV_I32, 2, (int64_t[]){2, 3}));
}

static void misuse_scale_null(void) {
    qkv_scale(ctx, NULL, 2.0);
}

static void misuse_mask_not_broadcastable(void) {
    qkv_mask(ctx, f32(2, (int64_t[]){3, 3}), qkv_mask_causal(ctx, QKV_F32, 3, 4));
}

static void misuse_mse_shape_mismatch(void) {
    qkv_mse(ctx, f32(2, (int64_t[]){2, 3}), f32(2, (int64_t[]){3, 2}));
}

static void misuse_embedding_index_out_of_range(void) {
    qkv_embedding(ctx, f32(2, (int64_t[]){4, 3}),
                  qkv_from_array(ctx, QKV_I32, 1, (int64_t[]){2}, (int32_t[]){1, 4}));
}

static void misuse_cross_entropy_bad_target(void) {
    qkv_cross_entropy(ctx, f32(2, (int64_t[]){2, 3}),
                      qkv_from_array(ctx, QKV_I32, 1, (int64_t[]){2}, (int32_t[]){0, 3}), -1);
}

static void misuse_cross_entropy_bad_shape(void) {
    qkv_cross_entropy(ctx, f32(2, (int64_t[]){2, 3}), qkv_zeros(ctx, QKV_I32, 1, (int64_t[]){3}), -1);
}

static void misuse_reshape_wrong_size(void) {
    qkv_reshape(ctx, f32(2, (int64_t[]){2, 3}), 2, (int64_t[]){4, 2});
}

static void misuse_transpose_bad_dim(void) {
    qkv_transpose(ctx, f32(2, (int64_t[]){2, 3}), 0, 2);
}

static void misuse_attention_dk_mismatch(void) {
    qkv_attention(ctx, f32(2, (int64_t[]){3, 4}), f32(2, (int64_t[]){3, 5}), f32(2, (int64_t[]){3, 5}),
                  NULL, 0, NULL);
}

static void misuse_attention_q_not_matrix(void) {
    qkv_attention(ctx, f32(1, (int64_t[]){4}), f32(2, (int64_t[]){3, 4}), f32(2, (int64_t[]){3, 4}),
                  NULL, 0, NULL);
}

static void misuse_attention_heads_zero(void) {
    qkv_tensor *x = f32(3, (int64_t[]){2, 3, 4});
    qkv_attention_heads(ctx, x, x, x, NULL, 0, 0);
}

static void misuse_attention_heads_split(void) {
    qkv_tensor *x = f32(3, (int64_t[]){2, 3, 6});
    qkv_attention_heads(ctx, x, x, x, NULL, 4, 0);
}

static void misuse_attention_heads_dims(void) {
    qkv_tensor *x = f32(4, (int64_t[]){2, 2, 3, 4});
    qkv_attention_heads(ctx, x, x, x, NULL, 2, 0);
}

static void misuse_attention_heads_mask(void) {
    qkv_tensor *x = f32(3, (int64_t[]){2, 3, 4});
    qkv_attention_heads(ctx, x, x, x, f32(2, (int64_t[]){3, 5}), 2, 0);
}

static void misuse_backward_not_scalar(void) {
    qkv_tensor *p = qkv_param(ctx, f32(1, (int64_t[]){3}));
    qkv_backward(qkv_scale(ctx, p, 2.0));
}

static void misuse_backward_no_grad(void) {
    qkv_tensor *p = qkv_param(ctx, f32(1, (int64_t[]){3}));
    qkv_ctx_set_no_grad(ctx, true);
    qkv_backward(qkv_sum(ctx, p));
}

static void misuse_param_not_leaf(void) {
    qkv_tensor *p = qkv_param(ctx, f32(1, (int64_t[]){3}));
    qkv_param(ctx, qkv_scale(ctx, p, 2.0));
}

static void misuse_tensor_bad_shape(void) {
    qkv_zeros(ctx, QKV_F32, 2, (int64_t[]){2, 0});
}

static void misuse_tensor_too_many_dims(void) {
    qkv_zeros(ctx, QKV_F32, 5, (int64_t[]){1, 1, 1, 1, 1});
}

static void misuse_mask_padding_bad_length(void) {
    qkv_mask_padding(ctx, QKV_F32, 2, 4, (int32_t[]){2, 5});
}

static void misuse_select_rows_outside(void) {
    qkv_select_rows(ctx, f32(3, (int64_t[]){2, 5, 3}), 2, (const int32_t[]){1, 5});
}

static void misuse_select_rows_1d(void) {
    qkv_select_rows(ctx, f32(1, (int64_t[]){3}), 1, (const int32_t[]){0});
}

static void misuse_matmul_rows_not_rising(void) {
    qkv_matmul_rows(ctx, f32(3, (int64_t[]){4, 2, 3}), f32(2, (int64_t[]){3, 2}), 3, 2,
                    (const int32_t[]){2, 1});
}

static void misuse_matmul_rows_2d(void) {
    qkv_matmul_rows(ctx, f32(2, (int64_t[]){2, 3}), f32(2, (int64_t[]){3, 2}), 3, 2,
                    (const int32_t[]){0, 1});
}

/* The LayerNorm's two ops (qkv_layernorm is the one then the other): each refuses its own. */
static qkv_tensor *s24(void) { return f32(2, (int64_t[]){2, 1}); }

static void misuse_layernorm_gain_shape(void) {
    qkv_layernorm(ctx, f32(2, (int64_t[]){2, 4}), f32(1, (int64_t[]){3}), f32(1, (int64_t[]){4}),
                  QKV_LAYERNORM_EPS);
}

static void misuse_layernorm_gain_2d(void) {
    qkv_layernorm_apply(ctx, f32(2, (int64_t[]){2, 4}), s24(), f32(2, (int64_t[]){1, 4}),
                        f32(1, (int64_t[]){4}));
}

static void misuse_layernorm_dtype(void) {
    qkv_layernorm_apply(ctx, f32(2, (int64_t[]){2, 4}), s24(),
                        qkv_ones(ctx, QKV_F64, 1, (int64_t[]){4}), f32(1, (int64_t[]){4}));
}

static void misuse_layernorm_bias_null(void) {
    qkv_layernorm_apply(ctx, f32(2, (int64_t[]){2, 4}), s24(), f32(1, (int64_t[]){4}), NULL);
}

static void misuse_layernorm_scale_shape(void) {
    qkv_layernorm_apply(ctx, f32(2, (int64_t[]){2, 4}), f32(2, (int64_t[]){1, 1}),
                        f32(1, (int64_t[]){4}), f32(1, (int64_t[]){4}));
}

static void misuse_layernorm_scale_null(void) {
    qkv_layernorm_apply(ctx, f32(2, (int64_t[]){2, 4}), NULL, f32(1, (int64_t[]){4}),
                        f32(1, (int64_t[]){4}));
}

static void misuse_layernorm_eps(void) {
    qkv_layernorm_scale(ctx, f32(1, (int64_t[]){4}), -1);
}

static void misuse_relu_i32(void) {
    qkv_relu(ctx, qkv_zeros(ctx, QKV_I32, 1, (int64_t[]){3}));
}

static void misuse_gelu_form(void) {
    qkv_gelu(ctx, f32(1, (int64_t[]){3}), QKV_ACT_RELU);
}

static void misuse_activation_form(void) {
    qkv_activation(ctx, f32(1, (int64_t[]){3}), (qkv_act)7);
}

static void misuse_gradcheck_bad_index(void) {
    qkv_gradcheck_run(1000, 1e-6, 1); /* there are not so many ops */
}

/* ---- the message ------------------------------------------------------------------------- */

/* Runs fn in a child with stderr into a pipe; returns what it wrote (caller frees) and how it
 * ended: *sig is the terminating signal, or 0 if it exited. */
static char *capture_stderr(void (*fn)(void), int *sig) {
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fd[0]);
        if (dup2(fd[1], STDERR_FILENO) < 0) _exit(99);
        close(fd[1]);
        ctx = qkv_ctx_new(0);
        fn();
        _exit(0);
    }
    close(fd[1]);
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    for (ssize_t n; (n = read(fd[0], buf + len, cap - 1 - len)) > 0;) {
        len += (size_t)n;
        if (len + 1 == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            ck_assert_ptr_nonnull(buf);
        }
    }
    buf[len] = '\0';
    close(fd[0]);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    *sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    return buf;
}

/* One line: text, then exactly one newline, at the end. */
static void assert_one_line(const char *msg) {
    size_t n = strlen(msg);
    ck_assert_uint_gt(n, 1);
    ck_assert_int_eq(msg[n - 1], '\n');
    ck_assert_ptr_eq(strchr(msg, '\n'), msg + n - 1);
}

static void do_matmul(void) {
    qkv_ctx *c = qkv_ctx_new(0);
    qkv_matmul(c, qkv_ones(c, QKV_F32, 2, (int64_t[]){2, 3}), qkv_ones(c, QKV_F32, 2, (int64_t[]){4, 5}));
}
static void do_add(void) {
    qkv_ctx *c = qkv_ctx_new(0);
    qkv_add(c, qkv_ones(c, QKV_F64, 3, (int64_t[]){2, 3, 4}), qkv_ones(c, QKV_F64, 2, (int64_t[]){5, 4}));
}
static void do_softmax_i32(void) {
    qkv_ctx *c = qkv_ctx_new(0);
    qkv_softmax(c, qkv_zeros(c, QKV_I32, 1, (int64_t[]){3}));
}
static void do_scale_null(void) {
    qkv_ctx *c = qkv_ctx_new(0);
    qkv_scale(c, NULL, 1.0);
}
static void do_attention_scalar_q(void) {
    qkv_ctx *c = qkv_ctx_new(0);
    qkv_attention(c, qkv_scalar(c, QKV_F32, 1), qkv_ones(c, QKV_F32, 2, (int64_t[]){3, 4}),
                  qkv_ones(c, QKV_F32, 2, (int64_t[]){3, 4}), NULL, 0, NULL);
}
static void do_nothing_wrong(void) {
    qkv_ctx *c = qkv_ctx_new(0);
    qkv_matmul(c, qkv_ones(c, QKV_F32, 2, (int64_t[]){2, 3}), qkv_ones(c, QKV_F32, 2, (int64_t[]){3, 5}));
    qkv_ctx_free(c);
}

START_TEST(test_message_matmul) {
    int sig = -1;
    char *msg = capture_stderr(do_matmul, &sig);
    ck_assert_int_eq(sig, SIGABRT);
    ck_assert_msg(strstr(msg, "matmul") != NULL, "message: %s", msg);
    ck_assert_msg(strstr(msg, "(2,3)") != NULL, "message: %s", msg);
    ck_assert_msg(strstr(msg, "(4,5)") != NULL, "message: %s", msg);
    ck_assert_msg(strncmp(msg, "qkv: matmul: ", 13) == 0, "message: %s", msg);
    assert_one_line(msg);
    free(msg);
}
END_TEST

START_TEST(test_message_others) {
    int sig = -1;
    char *msg = capture_stderr(do_add, &sig);
    ck_assert_int_eq(sig, SIGABRT);
    ck_assert_msg(strncmp(msg, "qkv: add: ", 10) == 0, "message: %s", msg);
    ck_assert_msg(strstr(msg, "(2,3,4)") && strstr(msg, "(5,4)"), "message: %s", msg);
    assert_one_line(msg);
    free(msg);

    msg = capture_stderr(do_softmax_i32, &sig);
    ck_assert_int_eq(sig, SIGABRT);
    ck_assert_msg(strncmp(msg, "qkv: softmax: ", 14) == 0 && strstr(msg, "i32"), "message: %s", msg);
    assert_one_line(msg);
    free(msg);

    /* attention names itself (and reads no shape entry it does not have) */
    msg = capture_stderr(do_attention_scalar_q, &sig);
    ck_assert_int_eq(sig, SIGABRT);
    ck_assert_msg(strncmp(msg, "qkv: attention", 14) == 0 && strstr(msg, "()"), "message: %s", msg);
    assert_one_line(msg);
    free(msg);

    msg = capture_stderr(do_scale_null, &sig);
    ck_assert_int_eq(sig, SIGABRT);
    ck_assert_msg(strncmp(msg, "qkv: scale: ", 12) == 0 && strstr(msg, "NULL"), "message: %s", msg);
    assert_one_line(msg);
    free(msg);
}
END_TEST

START_TEST(test_no_message_when_correct) {
    /* the harness itself: a correct call exits normally and prints nothing */
    int sig = -1;
    char *msg = capture_stderr(do_nothing_wrong, &sig);
    ck_assert_int_eq(sig, 0);
    ck_assert_str_eq(msg, "");
    free(msg);
}
END_TEST

/* What each misuse must print: the line begins with `says`, then " [file:line]". */
static const struct {
    void (*misuse)(void);
    const char *says;
} aborts[] = {
    {misuse_matmul_inner_mismatch, "qkv: matmul: inner sizes differ: a is (2,3), b is (4,5)"},
    {misuse_matmul_transposed_mismatch,
     "qkv: matmul: inner sizes differ: aᵀ is (2,3), bᵀ is (2,3)"},
    {misuse_matmul_batch_mismatch, "qkv: matmul: batch dims differ: a is (2,3,4), b is (3,4,5)"},
    {misuse_matmul_dtype_mismatch, "qkv: matmul: dtypes differ: a is f32, b is f64"},
    {misuse_add_not_broadcastable, "qkv: add: b (2,4) does not broadcast to a (2,3)"},
    {misuse_add_b_bigger_than_a, "qkv: add: b (2,3) does not broadcast to a (3)"},
    {misuse_mul_not_broadcastable, "qkv: mul: b (2) does not broadcast to a (2,3)"},
    {misuse_softmax_i32, "qkv: softmax: x has dtype i32, need f32 or f64"},
    {misuse_scale_null, "qkv: scale: x is NULL"},
    {misuse_mask_not_broadcastable, "qkv: mask: mask (3,4) does not broadcast to x (3,3)"},
    {misuse_mse_shape_mismatch, "qkv: mse: a is f32 (2,3), b is f32 (3,2)"},
    {misuse_embedding_index_out_of_range, "qkv: embedding: index 4 is outside the table (V=4)"},
    {misuse_cross_entropy_bad_target, "qkv: cross_entropy: target 3 is outside 0..2"},
    {misuse_cross_entropy_bad_shape,
     "qkv: cross_entropy: targets (3) must be logits (2,3) without its last dim"},
    {misuse_reshape_wrong_size, "qkv: reshape: x (2,3) has 6 elements, the new shape 8"},
    {misuse_transpose_bad_dim, "qkv: transpose: dims 0 and 2, but x has 2"},
    {misuse_attention_dk_mismatch, "qkv: attention_fused: q (3,4) and k (3,5) differ in d_k"},
    {misuse_attention_q_not_matrix, "qkv: attention_fused: q (4), k (3,4) and v (3,4) must be "
                                    "(..., N, D) with the same number of dims"},
    {misuse_attention_heads_zero, "qkv: attention_heads: heads 0 must be at least 1"},
    {misuse_attention_heads_split, "qkv: attention_heads: q (2,3,6) and v (2,3,6): the last "
                                   "dims must hold 4 heads each"},
    {misuse_attention_heads_dims, "qkv: attention_heads: q (2,2,3,4): at most 3 dims in the "
                                  "heads form"},
    {misuse_attention_heads_mask, "qkv: attention_heads: mask (3,5) does not broadcast to the "
                                  "scores (2,2,3,3)"},
    {misuse_backward_not_scalar, "qkv: backward: loss must be a scalar, it has 3 elements"},
    {misuse_backward_no_grad, "qkv: backward: loss does not depend on any parameter (or was "
                              "built in no-grad mode)"},
    {misuse_param_not_leaf, "qkv: param: a parameter must be a leaf created in the same context"},
    {misuse_tensor_bad_shape, "qkv: tensor: dim 1 has size 0"},
    {misuse_tensor_too_many_dims, "qkv: tensor: 5 dims (at most 4)"},
    {misuse_mask_padding_bad_length, "qkv: mask_padding: lengths[1] = 5 is outside 0..4"},
    {misuse_select_rows_outside, "qkv: select_rows: row 1 is 5, outside 0..4 of x (2,5,3)"},
    {misuse_select_rows_1d, "qkv: select_rows: x (3) must be (..., T, C)"},
    {misuse_matmul_rows_not_rising, "qkv: matmul_rows: position 1 is 1: the positions must rise "
                                    "within 0..2"},
    {misuse_matmul_rows_2d, "qkv: matmul_rows: need a (..., n, K) and a 2-D b: a is (2,3), b is "
                            "(3,2)"},
    {misuse_layernorm_gain_shape, "qkv: layernorm_apply: gain (3) and bias (4) must be (4), "
                                  "the last dim of x (2,4)"},
    {misuse_layernorm_gain_2d, "qkv: layernorm_apply: gain (1,4) and bias (4) must be (4), the "
                               "last dim of x (2,4)"},
    {misuse_layernorm_dtype, "qkv: layernorm_apply: dtypes differ: x is f32, s f32, gain f64, "
                             "bias f32"},
    {misuse_layernorm_bias_null, "qkv: layernorm_apply: bias is NULL"},
    {misuse_layernorm_scale_shape, "qkv: layernorm_apply: s (1,1) must be x's shape (2,4) with "
                                   "a last dim of 1"},
    {misuse_layernorm_scale_null, "qkv: layernorm_apply: s is NULL"},
    {misuse_layernorm_eps, "qkv: layernorm_scale: eps -1 must be finite and >= 0"},
    {misuse_relu_i32, "qkv: relu: x has dtype i32, need f32 or f64"},
    {misuse_gelu_form, "qkv: gelu: form 0 is not gelu or gelu-tanh"},
    {misuse_activation_form, "qkv: activation: unknown form 7"},
    {misuse_gradcheck_bad_index, "qkv: gradcheck: op 1000 of "},
};

START_TEST(test_misuse_aborts) {
    int sig = -1;
    char *msg = capture_stderr(aborts[_i].misuse, &sig);
    ck_assert_msg(sig == SIGABRT, "case %d ended with signal %d, not SIGABRT: %s", _i, sig, msg);
    size_t n = strlen(aborts[_i].says);
    ck_assert_msg(strncmp(msg, aborts[_i].says, n) == 0, "case %d says '%s', not '%s'", _i, msg,
                  aborts[_i].says);
    ck_assert_msg(strstr(msg + n, " [") && strstr(msg + n, ".c:"), "case %d: no [file:line]: %s",
                  _i, msg);
    assert_one_line(msg);
    free(msg);
}
END_TEST

static Suite *errors_suite(void) {
    Suite *s = suite_create("errors");
    TCase *tc = tcase_create("abort");
    tcase_add_loop_test(tc, test_misuse_aborts, 0, (int)(sizeof aborts / sizeof aborts[0]));
    suite_add_tcase(s, tc);

    tc = tcase_create("message");
    tcase_add_test(tc, test_message_matmul);
    tcase_add_test(tc, test_message_others);
    tcase_add_test(tc, test_no_message_when_correct);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    /* aborting children must not leave core files behind */
    struct rlimit nocore = {0, 0};
    setrlimit(RLIMIT_CORE, &nocore);
    return run_suite(errors_suite());
}
