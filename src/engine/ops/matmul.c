/* matmul.c - C = op(A)·op(B), batched, either operand transposed without a copy. */
#include "engine/internal.h"
#include "kernels/kernels.h"

/* The dims of one operand: rows/cols as stored, and how many matrices it holds. */
static void gemm_call(qkv_dtype dt, bool ta, bool tb, int64_t batch, int64_t M, int64_t N,
                      int64_t K, const void *A, int64_t as, const void *B, int64_t bs, void *C,
                      int64_t cs, bool acc) {
    if (dt == QKV_F32)
        gemm_f32(ta, tb, batch, M, N, K, A, as, B, bs, C, cs, acc);
    else
        gemm_f64(ta, tb, batch, M, N, K, A, as, B, bs, C, cs, acc);
}

qkv_tensor *qkv_matmul_ex(qkv_ctx *ctx, qkv_tensor *a, bool ta, qkv_tensor *b, bool tb) {
    tensor_check_float(a, "matmul", "a");
    tensor_check_float(b, "matmul", "b");
    QKV_CHECK(a->dtype == b->dtype, "matmul", "dtypes differ: a is %s, b is %s",
              qkv_dtype_name(a->dtype), qkv_dtype_name(b->dtype));
    QKV_CHECK(a->ndim >= 2 && b->ndim >= 2, "matmul", "need matrices: a is %s, b is %s", SHAPE(a), SHAPE(b));
    int64_t M = a->shape[a->ndim - (ta ? 1 : 2)], Ka = a->shape[a->ndim - (ta ? 2 : 1)];
    int64_t Kb = b->shape[b->ndim - (tb ? 1 : 2)], N = b->shape[b->ndim - (tb ? 2 : 1)];
    QKV_CHECK(Ka == Kb, "matmul", "inner sizes differ: a%s is %s, b%s is %s", ta ? "ᵀ" : "", SHAPE(a),
              tb ? "ᵀ" : "", SHAPE(b));
    bool shared_b = b->ndim == 2 && a->ndim > 2;
    if (!shared_b) {
        QKV_CHECK(a->ndim == b->ndim, "matmul", "batch dims differ: a is %s, b is %s", SHAPE(a), SHAPE(b));
        for (int i = 0; i < a->ndim - 2; i++)
            QKV_CHECK(a->shape[i] == b->shape[i], "matmul", "batch dims differ: a is %s, b is %s",
                      SHAPE(a), SHAPE(b));
    } else {
        QKV_CHECK(!ta, "matmul", "a shared 2-D b needs an untransposed a: a is %s, b is %s", SHAPE(a),
                  SHAPE(b));
    }
    int64_t shape[QKV_MAX_DIMS];
    memcpy(shape, a->shape, sizeof shape);
    shape[a->ndim - 2] = M;
    shape[a->ndim - 1] = N;
    qkv_tensor *c = tensor_new_op(ctx, QKV_OP_MATMUL, a->dtype, a->ndim, shape, a, b, NULL);
    c->iparam[0] = ta;
    c->iparam[1] = tb;
    int64_t batch = a->size / (M * Ka);
    gemm_call(a->dtype, ta, tb, batch, M, N, Ka, a->data, M * Ka, b->data,
              shared_b ? 0 : Kb * N, c->data, M * N, false);
    return c;
}

qkv_tensor *qkv_matmul(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b) {
    return qkv_matmul_ex(ctx, a, false, b, false);
}

/* The product of a's rows that stand for positions of longer sequences: saved holds the
 * positions, iparam[2] the sequences' length and iparam[3] the count (matmul_backward). */
qkv_tensor *qkv_matmul_rows(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b, int seq_len, int n,
                            const int32_t *at) {
    QKV_CHECK(a && b && a->ndim > 2 && b->ndim == 2, "matmul_rows",
              "need a (..., n, K) and a 2-D b: a is %s, b is %s", a ? SHAPE(a) : "NULL",
              b ? SHAPE(b) : "NULL");
    QKV_CHECK(at && n >= 1 && a->shape[a->ndim - 2] == n && n <= seq_len, "matmul_rows",
              "a %s holds %d positions of sequences of %d", SHAPE(a), n, seq_len);
    for (int i = 0; i < n; i++)
        QKV_CHECK(at[i] >= (i ? at[i - 1] + 1 : 0) && at[i] < seq_len, "matmul_rows",
                  "position %d is %d: the positions must rise within 0..%d", i, at[i],
                  seq_len - 1);
    qkv_tensor *c = qkv_matmul_ex(ctx, a, false, b, false);
    int32_t *rows = qkv_ctx_alloc(ctx, (size_t)n * sizeof *rows);
    memcpy(rows, at, (size_t)n * sizeof *rows);
    c->saved = rows;
    c->iparam[2] = seq_len;
    c->iparam[3] = n;
    return c;
}

/* dB (K, N) (+)= Aᵀ·dC of a product whose A rows (rows of them, K wide) stand for positions
 * `at` (n) of sequences of T (qkv_matmul_rows): in groups of the rows that fall into one
 * depth block (GEMM_KC) of the product over whole sequences, each group a product of its own
 * added to dB. Each element of dB is then what that product gives: its sum over each block's
 * rows in order, from 0, added to dB; the rows left out would add products with a zero
 * gradient, which leave a sum as it is. (The f64 product, one running sum in k order, is the
 * same either way.) */
static void row_block_gradient(qkv_dtype dt, const void *A, const void *dC, void *dB, int64_t rows,
                               int64_t K, int64_t N, const int32_t *at, int64_t n, int64_t T,
                               bool add) {
    size_t es = qkv_dtype_size(dt);
    for (int64_t r0 = 0; r0 < rows;) {
        int64_t block = ((r0 / n) * T + at[r0 % n]) / GEMM_KC, r1 = r0 + 1;
        while (r1 < rows && ((r1 / n) * T + at[r1 % n]) / GEMM_KC == block) r1++;
        gemm_call(dt, true, false, 1, K, N, r1 - r0, (const char *)A + r0 * K * es, 0,
                  (const char *)dC + r0 * N * es, 0, dB, 0, add || r0 > 0);
        r0 = r1;
    }
}

void matmul_backward(qkv_tensor *c) {
    qkv_tensor *a = c->src[0], *b = c->src[1];
    bool ta = c->iparam[0], tb = c->iparam[1];
    int64_t M = c->shape[c->ndim - 2], N = c->shape[c->ndim - 1];
    int64_t K = a->shape[a->ndim - (ta ? 2 : 1)];
    int64_t batch = c->size / (M * N);
    bool shared_b = b->ndim == 2 && a->ndim > 2;
    const void *dC = c->grad;
    /* Each product writes the whole gradient: stored on the first write of the pass (a sum
     * starts at +0, never -0: the bits of adding it to zeros), added after (internal.h). */
    if (a->grad) {
        bool add = !grad_first_write(a);
        if (!ta) /* forward: C = A·op(B)  =>  dA (M,K) += dC·op(B)ᵀ */
            gemm_call(c->dtype, false, !tb, batch, M, K, N, dC, M * N, b->data,
                      shared_b ? 0 : K * N, a->grad, M * K, add);
        else /* forward: C = Aᵀ·op(B)  =>  dA (K,M) += op(B)·dCᵀ */
            gemm_call(c->dtype, tb, true, batch, K, M, N, b->data, K * N, dC, M * N, a->grad,
                      K * M, add);
    }
    if (b->grad) {
        /* A shared B collects the gradient of every batch: fold the batches into rows. */
        int64_t bb = shared_b ? 1 : batch, Mf = shared_b ? batch * M : M;
        bool add = !grad_first_write(b);
        if (c->saved) /* qkv_matmul_rows: a's rows are positions of longer sequences */
            row_block_gradient(c->dtype, a->data, dC, b->grad, Mf, K, N, c->saved, c->iparam[3],
                               c->iparam[2], add);
        else if (!tb) /* dB (K,N) += op(A)ᵀ·dC */
            gemm_call(c->dtype, !ta, false, bb, K, N, Mf, a->data, M * K, dC, M * N, b->grad,
                      K * N, add);
        else /* forward: C = op(A)·Bᵀ  =>  dB (N,K) += dCᵀ·op(A) */
            gemm_call(c->dtype, true, ta, bb, N, K, Mf, dC, M * N, a->data, M * K, b->grad,
                      N * K, add);
    }
}
