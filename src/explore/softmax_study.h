/* softmax_study.h - `qkv study softmax`: the softmax Jacobian, its O(n) backward pass, and
 * why attention divides its scores by sqrt(d_k).
 *
 * For s = softmax(x), ds_i/dx_j = s_i (δ_ij − s_j), so the Jacobian is J = diag(s) − s·sᵀ
 * (symmetric). The backward pass never builds J: given dy = dLoss/ds it returns
 * dx = Jᵀ·dy = s ⊙ (dy − Σ_k dy_k s_k), in O(n) instead of O(n²). (a) checks both against
 * finite differences; (b) measures how the softmax saturates when q·k grows with d_k. */
#ifndef QKV_SOFTMAX_STUDY_H
#define QKV_SOFTMAX_STUDY_H

#include "qkv.h"

#define STUDY_MAX_N 32     /* the longest vector of (a) */
#define STUDY_FD_STEP 1e-5 /* central differences: error ~ h² from the formula, ~1e-16/h rounding */
#define STUDY_MAX_ROWS 13  /* (b)'s d_k = 1, 2, 4, ..., 4096 */

/* (a): the Jacobian three ways, for x (n); matrices are n×n, row-major. */
typedef struct {
    int n;
    double s[STUDY_MAX_N];   /* softmax(x) */
    double sum;              /* Σ s */
    double J[STUDY_MAX_N * STUDY_MAX_N];    /* diag(s) − s·sᵀ */
    double Jfd[STUDY_MAX_N * STUDY_MAX_N];  /* central finite differences, h = STUDY_FD_STEP */
    double rows[STUDY_MAX_N * STUDY_MAX_N]; /* row i: qkv's softmax backward of dy = e_i */
    double dy[STUDY_MAX_N];      /* the upstream gradient: given, or normal from the seed */
    double jt[STUDY_MAX_N];      /* Jᵀ·dy, O(n²) */
    double formula[STUDY_MAX_N]; /* s ⊙ (dy − Σ dy ⊙ s) */
    double dx[STUDY_MAX_N];      /* qkv's softmax backward of dy */
    double err_fd, err_rows, err_dy; /* largest |J − Jfd|, |J − rows|, |Jᵀ·dy − dx or formula| */
} jacobian_study;

/* Fills *out for x (n ≤ STUDY_MAX_N, at least one entry finite; -inf is a masked entry), with
 * dy = `dy` or, when NULL, n normal numbers drawn from `seed`. QKV_ERR_NOMEM only. */
qkv_status study_jacobian(const double *x, int n, const double *dy, uint64_t seed,
                          jacobian_study *out);

/* (b): one d_k, over `samples` draws of q (d_k) and n keys (n, d_k), all entries N(0, 1). */
typedef struct {
    int dk;
    double var_raw, var_scaled;    /* of q·k and of q·k/sqrt(d_k) */
    double maxw_raw, maxw_scaled;  /* mean largest softmax weight */
    double jnorm_raw, jnorm_scaled;/* median Frobenius norm of the softmax Jacobian */
} scaling_row;

/* d_k = 1, 2, 4, ... up to max_dk (a power of two ≤ 4096): a row each into rows, their
 * count into *nrows. QKV_ERR_NOMEM, with "study: out of memory", only. */
qkv_status study_scaling(int samples, int n, int max_dk, uint64_t seed, scaling_row *rows,
                         int *nrows);
/* The rows as the data file of scripts/scaling.gp, written atomically at `path`. */
qkv_status study_scaling_save(const char *path, const scaling_row *rows, int nrows, int n,
                              int samples, uint64_t seed);

#endif
