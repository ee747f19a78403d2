/* optim_kernel.c - the optimizers' loops, over every parameter in one call: the squared gradient
 * norm, and the SGD, momentum and Adam updates.
 *
 * Each parameter is cut into OPTIM_PARTS fixed parts, and the parts are the parallel work:
 * one call forks once for the whole model, not once per parameter. A part's sum of squares is
 * taken by one thread and the parts are added in order, so the norm (and with clipping the
 * update) is the same for any thread count; the updates are elementwise. */
#include "isa.h"

#include <math.h>

#define OPTIM_PARTS 8

/* Part p of n elements: [lo, hi). */
static void part_range(int64_t n, int p, int64_t *lo, int64_t *hi) {
    *lo = n * p / OPTIM_PARTS;
    *hi = n * (p + 1) / OPTIM_PARTS;
}

/* ---- f32: the part loops of the ISA in use (isa_kernels.inc) ---- */

/* Task t: part t % OPTIM_PARTS of parameter t / OPTIM_PARTS. */
static void grad_sq_task_f32(int64_t t, const float *const *g, const int64_t *size,
                             double *sq) {
    int64_t lo, hi;
    part_range(size[t / OPTIM_PARTS], (int)(t % OPTIM_PARTS), &lo, &hi);
    sq[t] = kernel_isa_active()->sum_squares(g[t / OPTIM_PARTS] + lo, hi - lo);
}

double optim_grad_sq_f32(int n, const float *const *g, const int64_t *size) {
    double sq[OPTIM_MAX_PARAMS * OPTIM_PARTS];
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += size[i];
    KERNEL_FOR_STATIC(kernel_team((double)total, KERNEL_PARALLEL_ELEMS), t, n * OPTIM_PARTS,
                      grad_sq_task_f32(t, g, size, sq););
    double sum = 0;
    for (int t = 0; t < n * OPTIM_PARTS; t++) sum += sq[t];
    return sum;
}

static void update_task_f32(int64_t t, const optim_rule *r, float *const *w,
                            const float *const *g, float *const *m, float *const *v,
                            const int64_t *size) {
    int i = (int)(t / OPTIM_PARTS);
    int64_t lo, hi;
    part_range(size[i], (int)(t % OPTIM_PARTS), &lo, &hi);
    kernel_isa_active()->optim_update_part(r, w[i] + lo, g[i] + lo, m[i] ? m[i] + lo : NULL,
                                           v[i] ? v[i] + lo : NULL, hi - lo);
}

void optim_update_f32(const optim_rule *r, int n, float *const *w, const float *const *g,
                      float *const *m, float *const *v, const int64_t *size) {
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += size[i];
    KERNEL_FOR_STATIC(kernel_team((double)total, KERNEL_PARALLEL_ELEMS), t, n * OPTIM_PARTS,
                      update_task_f32(t, r, w, g, m, v, size););
}

/* ---- f64: the same part loops (optim_part.inc), compiled here for double ---- */

typedef double T;
#include "optim_part.inc"

/* Task t: part t % OPTIM_PARTS of parameter t / OPTIM_PARTS. */
static void grad_sq_task_f64(int64_t t, const double *const *g, const int64_t *size,
                             double *sq) {
    int64_t lo, hi;
    part_range(size[t / OPTIM_PARTS], (int)(t % OPTIM_PARTS), &lo, &hi);
    sq[t] = sum_squares(g[t / OPTIM_PARTS] + lo, hi - lo);
}

double optim_grad_sq_f64(int n, const double *const *g, const int64_t *size) {
    double sq[OPTIM_MAX_PARAMS * OPTIM_PARTS];
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += size[i];
    KERNEL_FOR_STATIC(kernel_team((double)total, KERNEL_PARALLEL_ELEMS), t, n * OPTIM_PARTS,
                      grad_sq_task_f64(t, g, size, sq););
    double sum = 0;
    for (int t = 0; t < n * OPTIM_PARTS; t++) sum += sq[t];
    return sum;
}

static void update_task_f64(int64_t t, const optim_rule *r, double *const *w,
                            const double *const *g, double *const *m, double *const *v,
                            const int64_t *size) {
    int i = (int)(t / OPTIM_PARTS);
    int64_t lo, hi;
    part_range(size[i], (int)(t % OPTIM_PARTS), &lo, &hi);
    update_part(r, w[i] + lo, g[i] + lo, m[i] ? m[i] + lo : NULL, v[i] ? v[i] + lo : NULL,
                hi - lo);
}

void optim_update_f64(const optim_rule *r, int n, double *const *w, const double *const *g,
                      double *const *m, double *const *v, const int64_t *size) {
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += size[i];
    KERNEL_FOR_STATIC(kernel_team((double)total, KERNEL_PARALLEL_ELEMS), t, n * OPTIM_PARTS,
                      update_task_f64(t, r, w, g, m, v, size););
}
