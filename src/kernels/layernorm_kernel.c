/* layernorm_kernel.c - LayerNorm over rows of C as two ops, written out for f32 and f64:
 * layernorm_scale (each row's s = 1/√(var + eps)) and layernorm_apply (y = (x − mean)·s·gain
 * + bias for a given s), forward and backward.
 *
 * Precision: each row's mean and variance, and the backward's row sums, are summed in double
 * for both types. For f32 that costs nothing that shows (a row is C elements read once more)
 * and keeps the variance, a sum of squares of differences, from losing digits to the
 * rounding of a float running sum over a wide row; the mean is taken first and the variance
 * from the differences (two passes), never as E[x²] − mean², which cancels. x̂ = (x − mean)·s
 * is formed in double and rounded once to the type, so a row with a large common offset keeps
 * its small differences (a float mean would be off by up to half its ulp in every x̂); the
 * rest of each element (·gain + bias, dy·gain) is arithmetic in the type, and each gradient
 * of x, a difference of terms that cancel over the row, is formed in double and rounded once.
 *
 * Threads: the forwards, dx and ds are row by row, each row on one thread. dgain and dbias
 * are sums over every row: the rows are cut into layernorm_blocks(rows) blocks, which depend
 * on the number of rows only, each block sums its rows in order into its own partials
 * (double), and the partials are added in block order; so the bits do not depend on the
 * thread count. Plain C compiled once, so every SIMD path runs the same instructions. */
#include "kernels.h"

#include <math.h>

/* Blocks of at least LAYERNORM_BLOCK_ROWS rows, at most LAYERNORM_MAX_BLOCKS of them: enough
 * for every thread of a big step, and partials (2·C doubles a block) that stay small. */
#define LAYERNORM_BLOCK_ROWS 16
#define LAYERNORM_MAX_BLOCKS 64

int64_t layernorm_blocks(int64_t rows) {
    int64_t blocks = (rows + LAYERNORM_BLOCK_ROWS - 1) / LAYERNORM_BLOCK_ROWS;
    return blocks < LAYERNORM_MAX_BLOCKS ? blocks : LAYERNORM_MAX_BLOCKS;
}

size_t layernorm_scratch_doubles(int64_t rows, int64_t C) {
    return (size_t)(2 * layernorm_blocks(rows) * C);
}

/* Rows [*lo, *hi) of block b of `blocks`. */
static void block_rows(int64_t rows, int64_t blocks, int64_t b, int64_t *lo, int64_t *hi) {
    *lo = rows * b / blocks;
    *hi = rows * (b + 1) / blocks;
}

static int64_t team_of(int64_t rows, int64_t C) {
    return kernel_team((double)(rows * C), KERNEL_PARALLEL_ELEMS);
}

/* Σ over the blocks, in block order, of column c of their partials' half k (0: Σ dy·x̂, for
 * dgain; 1: Σ dy, for dbias). At most LAYERNORM_MAX_BLOCKS terms: on the calling thread. */
static double column_total(const double *scratch, int64_t blocks, int64_t C, int k, int64_t c) {
    double total = 0;
    for (int64_t b = 0; b < blocks; b++) total += scratch[b * 2 * C + k * C + c];
    return total;
}

/* ---- f32 ---- */

/* A row's mean, in double. */
static double row_mean_f32(const float *x, int64_t C) {
    double sum = 0;
    for (int64_t j = 0; j < C; j++) sum += x[j];
    return sum / (double)C;
}

static void scale_row_f32(float *s, double *mean_out, double *s_out, const float *x, int64_t C,
                          double eps) {
    double mean = row_mean_f32(x, C), sq = 0;
    for (int64_t j = 0; j < C; j++) sq += ((double)x[j] - mean) * ((double)x[j] - mean);
    double rs = 1.0 / sqrt(sq / (double)C + eps); /* the biased variance, as PyTorch's */
    *s = (float)rs;
    if (mean_out) {
        *mean_out = mean;
        *s_out = rs;
    }
}

void layernorm_scale_forward_f32(float *s, double *mean, double *rs, const float *x,
                                 int64_t rows, int64_t C, double eps) {
    KERNEL_FOR_STATIC(team_of(rows, C), r, rows,
                      scale_row_f32(s + r, mean ? mean + r : NULL, rs ? rs + r : NULL,
                                    x + r * C, C, eps););
}

/* s = (var + eps)^(−1/2), var = Σ (x − mean)²/C  =>  ∂s/∂x_j = −s³·(x_j − mean)/C (the
 * mean's own derivative cancels: Σ (x − mean) = 0). */
static void scale_back_row_f32(float *dx, bool store, float ds, const float *x, double mean,
                               double rs, int64_t C) {
    double k = -(double)ds * rs * rs * rs / (double)C;
    for (int64_t j = 0; j < C; j++)
        dx[j] = (store ? 0.0f : dx[j]) + (float)(k * ((double)x[j] - mean));
}

void layernorm_scale_backward_f32(float *dx, bool store, const float *ds, const float *x,
                                  const double *mean, const double *rs, int64_t rows,
                                  int64_t C) {
    KERNEL_FOR_STATIC(team_of(rows, C), r, rows,
                      scale_back_row_f32(dx + r * C, store, ds[r], x + r * C, mean[r], rs[r],
                                         C););
}

static void apply_row_f32(float *y, double *mean_out, const float *x, float s, const float *gain,
                          const float *bias, int64_t C) {
    double mean = row_mean_f32(x, C);
    for (int64_t j = 0; j < C; j++) {
        float xhat = (float)(((double)x[j] - mean) * (double)s);
        y[j] = xhat * gain[j] + bias[j];
    }
    if (mean_out) *mean_out = mean;
}

void layernorm_apply_forward_f32(float *y, double *mean, const float *x, const float *s,
                                 const float *gain, const float *bias, int64_t rows, int64_t C) {
    KERNEL_FOR_STATIC(team_of(rows, C), r, rows,
                      apply_row_f32(y + r * C, mean ? mean + r : NULL, x + r * C, s[r], gain,
                                    bias, C););
}

/* One block of rows of the apply op's backward, s held: with g = dy·gain,
 * dx = s·(g − mean_row(g)), ds = Σ_row g·(x − mean); and the block's partial Σ dy·x̂ and Σ dy
 * per column into part[0..C) and part[C..2C) (when part is not NULL). */
static void apply_back_block_f32(float *dx, float *ds, unsigned store, double *part,
                                 const float *dy, const float *x, const float *s,
                                 const float *gain, const double *mean, int64_t lo, int64_t hi,
                                 int64_t C) {
    if (part)
        for (int64_t c = 0; c < 2 * C; c++) part[c] = 0;
    for (int64_t r = lo; r < hi; r++) {
        const float *xr = x + r * C, *dyr = dy + r * C;
        double m = mean[r], sr = s[r], sum_g = 0, sum_gd = 0;
        for (int64_t j = 0; j < C; j++) {
            float g = dyr[j] * gain[j];
            sum_g += g;
            sum_gd += (double)g * ((double)xr[j] - m);
            if (part) {
                float xhat = (float)(((double)xr[j] - m) * sr);
                part[j] += (double)dyr[j] * xhat;
                part[C + j] += dyr[j];
            }
        }
        if (dx) {
            double mean_g = sum_g / (double)C;
            float *dxr = dx + r * C;
            for (int64_t j = 0; j < C; j++) {
                float g = dyr[j] * gain[j];
                dxr[j] = (store & LAYERNORM_STORE_DX ? 0.0f : dxr[j]) +
                         (float)(sr * ((double)g - mean_g));
            }
        }
        if (ds) ds[r] = (store & LAYERNORM_STORE_DS ? 0.0f : ds[r]) + (float)sum_gd;
    }
}

void layernorm_apply_backward_f32(float *dx, float *ds, float *dgain, float *dbias,
                                  unsigned store, const float *dy, const float *x,
                                  const float *s, const float *gain, const double *mean,
                                  int64_t rows, int64_t C, double *scratch) {
    int64_t blocks = layernorm_blocks(rows);
    bool sums = dgain || dbias;
    KERNEL_FOR_STATIC(team_of(rows, C), b, blocks, {
        int64_t lo, hi;
        block_rows(rows, blocks, b, &lo, &hi);
        apply_back_block_f32(dx, ds, store, sums ? scratch + b * 2 * C : NULL, dy, x, s, gain,
                             mean, lo, hi, C);
    });
    for (int k = 0; k < 2; k++) { /* dgain, then dbias */
        float *d = k == 0 ? dgain : dbias;
        if (!d) continue;
        bool st = store & (k == 0 ? LAYERNORM_STORE_DGAIN : LAYERNORM_STORE_DBIAS);
        for (int64_t c = 0; c < C; c++)
            d[c] = (st ? 0.0f : d[c]) + (float)column_total(scratch, blocks, C, k, c);
    }
}

/* ---- f64: the same, in double ---- */

static double row_mean_f64(const double *x, int64_t C) {
    double sum = 0;
    for (int64_t j = 0; j < C; j++) sum += x[j];
    return sum / (double)C;
}

static void scale_row_f64(double *s, double *mean_out, double *s_out, const double *x,
                          int64_t C, double eps) {
    double mean = row_mean_f64(x, C), sq = 0;
    for (int64_t j = 0; j < C; j++) sq += (x[j] - mean) * (x[j] - mean);
    double rs = 1.0 / sqrt(sq / (double)C + eps);
    *s = rs;
    if (mean_out) {
        *mean_out = mean;
        *s_out = rs;
    }
}

void layernorm_scale_forward_f64(double *s, double *mean, double *rs, const double *x,
                                 int64_t rows, int64_t C, double eps) {
    KERNEL_FOR_STATIC(team_of(rows, C), r, rows,
                      scale_row_f64(s + r, mean ? mean + r : NULL, rs ? rs + r : NULL,
                                    x + r * C, C, eps););
}

static void scale_back_row_f64(double *dx, bool store, double ds, const double *x, double mean,
                               double rs, int64_t C) {
    double k = -ds * rs * rs * rs / (double)C;
    for (int64_t j = 0; j < C; j++) dx[j] = (store ? 0.0 : dx[j]) + k * (x[j] - mean);
}

void layernorm_scale_backward_f64(double *dx, bool store, const double *ds, const double *x,
                                  const double *mean, const double *rs, int64_t rows,
                                  int64_t C) {
    KERNEL_FOR_STATIC(team_of(rows, C), r, rows,
                      scale_back_row_f64(dx + r * C, store, ds[r], x + r * C, mean[r], rs[r],
                                         C););
}

static void apply_row_f64(double *y, double *mean_out, const double *x, double s,
                          const double *gain, const double *bias, int64_t C) {
    double mean = row_mean_f64(x, C);
    for (int64_t j = 0; j < C; j++) y[j] = (x[j] - mean) * s * gain[j] + bias[j];
    if (mean_out) *mean_out = mean;
}

void layernorm_apply_forward_f64(double *y, double *mean, const double *x, const double *s,
                                 const double *gain, const double *bias, int64_t rows,
                                 int64_t C) {
    KERNEL_FOR_STATIC(team_of(rows, C), r, rows,
                      apply_row_f64(y + r * C, mean ? mean + r : NULL, x + r * C, s[r], gain,
                                    bias, C););
}

static void apply_back_block_f64(double *dx, double *ds, unsigned store, double *part,
                                 const double *dy, const double *x, const double *s,
                                 const double *gain, const double *mean, int64_t lo,
                                 int64_t hi, int64_t C) {
    if (part)
        for (int64_t c = 0; c < 2 * C; c++) part[c] = 0;
    for (int64_t r = lo; r < hi; r++) {
        const double *xr = x + r * C, *dyr = dy + r * C;
        double m = mean[r], sr = s[r], sum_g = 0, sum_gd = 0;
        for (int64_t j = 0; j < C; j++) {
            double g = dyr[j] * gain[j];
            sum_g += g;
            sum_gd += g * (xr[j] - m);
            if (part) {
                part[j] += dyr[j] * ((xr[j] - m) * sr);
                part[C + j] += dyr[j];
            }
        }
        if (dx) {
            double mean_g = sum_g / (double)C;
            double *dxr = dx + r * C;
            for (int64_t j = 0; j < C; j++)
                dxr[j] = (store & LAYERNORM_STORE_DX ? 0.0 : dxr[j]) +
                         sr * (dyr[j] * gain[j] - mean_g);
        }
        if (ds) ds[r] = (store & LAYERNORM_STORE_DS ? 0.0 : ds[r]) + sum_gd;
    }
}

void layernorm_apply_backward_f64(double *dx, double *ds, double *dgain, double *dbias,
                                  unsigned store, const double *dy, const double *x,
                                  const double *s, const double *gain, const double *mean,
                                  int64_t rows, int64_t C, double *scratch) {
    int64_t blocks = layernorm_blocks(rows);
    bool sums = dgain || dbias;
    KERNEL_FOR_STATIC(team_of(rows, C), b, blocks, {
        int64_t lo, hi;
        block_rows(rows, blocks, b, &lo, &hi);
        apply_back_block_f64(dx, ds, store, sums ? scratch + b * 2 * C : NULL, dy, x, s, gain,
                             mean, lo, hi, C);
    });
    for (int k = 0; k < 2; k++) { /* dgain, then dbias */
        double *d = k == 0 ? dgain : dbias;
        if (!d) continue;
        bool st = store & (k == 0 ? LAYERNORM_STORE_DGAIN : LAYERNORM_STORE_DBIAS);
        for (int64_t c = 0; c < C; c++)
            d[c] = (st ? 0.0 : d[c]) + column_total(scratch, blocks, C, k, c);
    }
}
