/* layernorm_kernel.c - LayerNorm over rows of C, forward and backward, written out for f32 and
 * f64.
 *
 * Precision: each row's mean and variance, and the backward's two row sums, are summed in
 * double for both types. For f32 that costs nothing that shows (a row is C elements read once
 * more) and keeps the variance, a sum of squares of differences, from losing digits to the
 * rounding of a float running sum over a wide row; the mean is taken first and the variance
 * from the differences (two passes), never as E[x²] − mean², which cancels. x̂ = (x − mean)·
 * rstd is formed in double and rounded once to the type, so a row with a large common offset
 * keeps its small differences (a float mean would be off by up to half its ulp in every x̂);
 * the rest of each element (·gain + bias, dy·gain) is arithmetic in the type, and the
 * backward's dx, a difference of terms that cancel over the row, is formed in double from them
 * and rounded once.
 *
 * Threads: the forward and dx are row by row, each row on one thread. dgain and dbias are
 * sums over every row: the rows are cut into layernorm_blocks(rows) blocks, which depend on
 * the number of rows only, each block sums its rows in order into its own partials (double),
 * and the partials are added in block order; so the bits do not depend on the thread count.
 * Plain C compiled once, so every SIMD path runs the same instructions. */
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
static void row_forward_f32(float *y, double *mean_out, double *rstd_out, const float *x,
                            const float *gain, const float *bias, int64_t C, double eps) {
    double sum = 0, sq = 0;
    for (int64_t j = 0; j < C; j++) sum += x[j];
    double mean = sum / (double)C;
    for (int64_t j = 0; j < C; j++) sq += ((double)x[j] - mean) * ((double)x[j] - mean);
    double rstd = 1.0 / sqrt(sq / (double)C + eps); /* the biased variance, as PyTorch's */
    for (int64_t j = 0; j < C; j++) {
        float xhat = (float)(((double)x[j] - mean) * rstd);
        y[j] = xhat * gain[j] + bias[j];
    }
    if (mean_out) {
        *mean_out = mean;
        *rstd_out = rstd;
    }
}

void layernorm_forward_f32(float *y, double *mean, double *rstd, const float *x,
                           const float *gain, const float *bias, int64_t rows, int64_t C,
                           double eps) {
    KERNEL_FOR_STATIC(team_of(rows, C), r, rows,
                      row_forward_f32(y + r * C, mean ? mean + r : NULL, rstd ? rstd + r : NULL,
                                      x + r * C, gain, bias, C, eps););
}

/* One block of rows: dx row by row, and the block's partial Σ dy·x̂ and Σ dy per column
 * into part[0..C) and part[C..2C) (when part is not NULL). */
static void block_backward_f32(float *dx, bool store_dx, double *part, const float *dy,
                               const float *x, const float *gain, const double *mean,
                               const double *rstd, int64_t lo, int64_t hi, int64_t C) {
    if (part)
        for (int64_t c = 0; c < 2 * C; c++) part[c] = 0;
    for (int64_t r = lo; r < hi; r++) {
        const float *xr = x + r * C, *dyr = dy + r * C;
        double m = mean[r], rs = rstd[r], sum_g = 0, sum_gx = 0;
        for (int64_t j = 0; j < C; j++) {
            float xhat = (float)(((double)xr[j] - m) * rs), g = dyr[j] * gain[j];
            sum_g += g;
            sum_gx += (double)g * xhat;
            if (part) {
                part[j] += (double)dyr[j] * xhat;
                part[C + j] += dyr[j];
            }
        }
        if (!dx) continue;
        double mean_g = sum_g / (double)C, mean_gx = sum_gx / (double)C;
        float *dxr = dx + r * C;
        for (int64_t j = 0; j < C; j++) {
            float xhat = (float)(((double)xr[j] - m) * rs), g = dyr[j] * gain[j];
            float d = (float)(rs * ((double)g - mean_g - (double)xhat * mean_gx));
            dxr[j] = (store_dx ? 0.0f : dxr[j]) + d;
        }
    }
}

void layernorm_backward_f32(float *dx, float *dgain, float *dbias, unsigned store,
                            const float *dy, const float *x, const float *gain,
                            const double *mean, const double *rstd, int64_t rows, int64_t C,
                            double *scratch) {
    int64_t blocks = layernorm_blocks(rows);
    bool sums = dgain || dbias;
    KERNEL_FOR_STATIC(team_of(rows, C), b, blocks, {
        int64_t lo, hi;
        block_rows(rows, blocks, b, &lo, &hi);
        block_backward_f32(dx, store & LAYERNORM_STORE_DX, sums ? scratch + b * 2 * C : NULL,
                           dy, x, gain, mean, rstd, lo, hi, C);
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
static void row_forward_f64(double *y, double *mean_out, double *rstd_out, const double *x,
                            const double *gain, const double *bias, int64_t C, double eps) {
    double sum = 0, sq = 0;
    for (int64_t j = 0; j < C; j++) sum += x[j];
    double mean = sum / (double)C;
    for (int64_t j = 0; j < C; j++) sq += (x[j] - mean) * (x[j] - mean);
    double rstd = 1.0 / sqrt(sq / (double)C + eps);
    for (int64_t j = 0; j < C; j++) y[j] = (x[j] - mean) * rstd * gain[j] + bias[j];
    if (mean_out) {
        *mean_out = mean;
        *rstd_out = rstd;
    }
}

void layernorm_forward_f64(double *y, double *mean, double *rstd, const double *x,
                           const double *gain, const double *bias, int64_t rows, int64_t C,
                           double eps) {
    KERNEL_FOR_STATIC(team_of(rows, C), r, rows,
                      row_forward_f64(y + r * C, mean ? mean + r : NULL, rstd ? rstd + r : NULL,
                                      x + r * C, gain, bias, C, eps););
}

static void block_backward_f64(double *dx, bool store_dx, double *part, const double *dy,
                               const double *x, const double *gain, const double *mean,
                               const double *rstd, int64_t lo, int64_t hi, int64_t C) {
    if (part)
        for (int64_t c = 0; c < 2 * C; c++) part[c] = 0;
    for (int64_t r = lo; r < hi; r++) {
        const double *xr = x + r * C, *dyr = dy + r * C;
        double m = mean[r], rs = rstd[r], sum_g = 0, sum_gx = 0;
        for (int64_t j = 0; j < C; j++) {
            double xhat = (xr[j] - m) * rs, g = dyr[j] * gain[j];
            sum_g += g;
            sum_gx += g * xhat;
            if (part) {
                part[j] += dyr[j] * xhat;
                part[C + j] += dyr[j];
            }
        }
        if (!dx) continue;
        double mean_g = sum_g / (double)C, mean_gx = sum_gx / (double)C;
        double *dxr = dx + r * C;
        for (int64_t j = 0; j < C; j++) {
            double xhat = (xr[j] - m) * rs, g = dyr[j] * gain[j];
            dxr[j] = (store_dx ? 0.0 : dxr[j]) + rs * (g - mean_g - xhat * mean_gx);
        }
    }
}

void layernorm_backward_f64(double *dx, double *dgain, double *dbias, unsigned store,
                            const double *dy, const double *x, const double *gain,
                            const double *mean, const double *rstd, int64_t rows, int64_t C,
                            double *scratch) {
    int64_t blocks = layernorm_blocks(rows);
    bool sums = dgain || dbias;
    KERNEL_FOR_STATIC(team_of(rows, C), b, blocks, {
        int64_t lo, hi;
        block_rows(rows, blocks, b, &lo, &hi);
        block_backward_f64(dx, store & LAYERNORM_STORE_DX, sums ? scratch + b * 2 * C : NULL,
                           dy, x, gain, mean, rstd, lo, hi, C);
    });
    for (int k = 0; k < 2; k++) { /* dgain, then dbias */
        double *d = k == 0 ? dgain : dbias;
        if (!d) continue;
        bool st = store & (k == 0 ? LAYERNORM_STORE_DGAIN : LAYERNORM_STORE_DBIAS);
        for (int64_t c = 0; c < C; c++)
            d[c] = (st ? 0.0 : d[c]) + column_total(scratch, blocks, C, k, c);
    }
}
