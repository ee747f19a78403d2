/* optim.c - the optimizers' loops, over every parameter in one call: the squared gradient
 * norm, and the SGD, momentum and Adam updates.
 *
 * Each parameter is cut into OPTIM_PARTS fixed parts, and the parts are the parallel work:
 * one call forks once for the whole model, not once per parameter. A part's sum of squares is
 * taken by one thread and the parts are added in order, so the norm (and with clipping the
 * update) is the same for any thread count; the updates are elementwise. */
#include "kernels.h"

#include <math.h>

#define OPTIM_PARTS 8
#define PARALLEL_ELEMS 16384 /* below this the loops take a few µs: not worth a fork */

/* Part p of n elements: [lo, hi). */
static void part_range(int64_t n, int p, int64_t *lo, int64_t *hi) {
    *lo = n * p / OPTIM_PARTS;
    *hi = n * (p + 1) / OPTIM_PARTS;
}

/* Σ g² in double with 8 partial sums, so that the loop vectorises (one running sum would be a
 * chain of dependent adds). */
static double sum_squares(const float *g, int64_t n) {
    double part[8] = {0};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++) part[k] += (double)g[j + k] * g[j + k];
    for (; j < n; j++) part[0] += (double)g[j] * g[j];
    double sum = 0;
    for (int k = 0; k < 8; k++) sum += part[k];
    return sum;
}

double optim_grad_sq_f32(int n, const float *const *g, const int64_t *size) {
    double sq[OPTIM_MAX_PARAMS * OPTIM_PARTS];
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += size[i];
    KERNEL_FOR_STATIC(kernel_parallel((double)total, PARALLEL_ELEMS), t, n * OPTIM_PARTS,
        int64_t lo, hi;
        part_range(size[t / OPTIM_PARTS], t % OPTIM_PARTS, &lo, &hi);
        sq[t] = sum_squares(g[t / OPTIM_PARTS] + lo, hi - lo););
    double sum = 0;
    for (int t = 0; t < n * OPTIM_PARTS; t++) sum += sq[t];
    return sum;
}

/* One part of one parameter: w, g, m, v hold its elements [lo, hi). */
static void update_part(const optim_rule *r, float *restrict w, const float *restrict g,
                        float *restrict m, float *restrict v, int64_t n) {
    float lr = r->lr, wd = r->weight_decay, gs = r->grad_scale;
    switch (r->kind) { /* one loop per kind, so that each vectorises */
    case OPTIM_SGD:
        for (int64_t j = 0; j < n; j++) w[j] -= lr * (g[j] * gs + wd * w[j]);
        break;
    case OPTIM_MOMENTUM:
        for (int64_t j = 0; j < n; j++) {
            m[j] = r->momentum * m[j] + g[j] * gs + wd * w[j];
            w[j] -= lr * m[j];
        }
        break;
    case OPTIM_ADAM: /* decoupled weight decay (AdamW) */
        for (int64_t j = 0; j < n; j++) {
            float gj = g[j] * gs;
            m[j] = r->beta1 * m[j] + (1 - r->beta1) * gj;
            v[j] = r->beta2 * v[j] + (1 - r->beta2) * gj * gj;
            w[j] -= lr * ((m[j] / r->bias1) / (sqrtf(v[j] / r->bias2) + r->eps) + wd * w[j]);
        }
        break;
    }
}

void optim_update_f32(const optim_rule *r, int n, float *const *w, const float *const *g,
                      float *const *m, float *const *v, const int64_t *size) {
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += size[i];
    KERNEL_FOR_STATIC(kernel_parallel((double)total, PARALLEL_ELEMS), t, n * OPTIM_PARTS,
        int i = (int)(t / OPTIM_PARTS);
        int64_t lo, hi;
        part_range(size[i], t % OPTIM_PARTS, &lo, &hi);
        update_part(r, w[i] + lo, g[i] + lo, m[i] ? m[i] + lo : NULL, v[i] ? v[i] + lo : NULL,
                    hi - lo););
}
