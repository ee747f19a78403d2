/* activation_kernel.c - the MLP's activations, relu and gelu (erf and tanh forms), forward and
 * backward over n elements, written out for f32 (float arithmetic: erfcf, expf) and f64.
 *
 * Plain C in this one file, not the ISA table: it is compiled once, so every SIMD path runs the
 * same instructions and gets the same bits; each element is computed on its own, so a thread
 * count changes nothing either. (libm's erfcf and expf are calls, not vectorised without
 * fast-math, so an ISA kernel would have to bring its own erfc and exp to gain anything.) */
#include "kernels.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define SQRT1_2 0.70710678118654752440      /* 1/√2: Φ(x) = erfc(−x/√2)/2 */
#define INV_SQRT_2PI 0.39894228040143267794 /* 1/√(2π): φ(x) = exp(−x²/2)/√(2π) */
#define SQRT_2_PI 0.79788456080286535588    /* √(2/π), the tanh form's scale */
#define GELU_TANH_CUBE 0.044715             /* the tanh form's cubic term */

/* Each loop takes one thread per KERNEL_PARALLEL_ELEMS elements (kernel_team). */
#define TEAM(n) kernel_team((double)(n), KERNEL_PARALLEL_ELEMS)

/* ---- relu ---- */
/* y = x <= 0 ? 0 : x rather than x > 0 ? x : 0: a NaN fails both tests, and so stays NaN, as
 * PyTorch's relu (a clamp) keeps it; -0 gives +0. The gradient is dy where x > 0 and 0
 * elsewhere (at 0 and at NaN too), PyTorch's threshold_backward. */
void relu_forward_f32(float *y, const float *x, int64_t n) {
    KERNEL_FOR_STATIC(TEAM(n), i, n, y[i] = x[i] <= 0 ? 0.0f : x[i];);
}

/* dy where x > 0, else +0: dy's bits masked, with no branch. Written as `x > 0 ? dy : 0` the
 * compiler branched on every element (it does not load dy[i] where the test fails), and on
 * the random signs of an MLP's pre-activations the mispredictions made relu's backward 21% of
 * the mlp workload's step (perf, one core of the 2-core AMD EPYC); masked, the loops below
 * are vectorized. The same bits as the select. */
static inline float dy_where_positive_f32(float x, float dy) {
    uint32_t bits;
    memcpy(&bits, &dy, sizeof bits);
    bits &= -(uint32_t)(x > 0);
    memcpy(&dy, &bits, sizeof bits);
    return dy;
}

static inline double dy_where_positive_f64(double x, double dy) {
    uint64_t bits;
    memcpy(&bits, &dy, sizeof bits);
    bits &= -(uint64_t)(x > 0);
    memcpy(&dy, &bits, sizeof bits);
    return dy;
}

/* 0 + g is what `store` writes: the bits an add to zeros gives (-0 made +0). */
void relu_backward_f32(float *dx, const float *dy, const float *x, int64_t n, bool store) {
    if (store)
        KERNEL_FOR_STATIC(TEAM(n), i, n, dx[i] = 0.0f + dy_where_positive_f32(x[i], dy[i]););
    else
        KERNEL_FOR_STATIC(TEAM(n), i, n, dx[i] += dy_where_positive_f32(x[i], dy[i]););
}

void relu_forward_f64(double *y, const double *x, int64_t n) {
    KERNEL_FOR_STATIC(TEAM(n), i, n, y[i] = x[i] <= 0 ? 0.0 : x[i];);
}

void relu_backward_f64(double *dx, const double *dy, const double *x, int64_t n, bool store) {
    if (store)
        KERNEL_FOR_STATIC(TEAM(n), i, n, dx[i] = 0.0 + dy_where_positive_f64(x[i], dy[i]););
    else
        KERNEL_FOR_STATIC(TEAM(n), i, n, dx[i] += dy_where_positive_f64(x[i], dy[i]););
}

/* ---- gelu ---- */
/* erf form:  y = x·Φ(x), Φ(x) = (1 + erf(x/√2))/2,   y' = Φ(x) + x·φ(x)
 * tanh form: y = x·(1 + tanh u)/2, u = √(2/π)·(x + 0.044715·x³),
 *            y' = (1 + tanh u)/2 + x/2·(1 − tanh²u)·u', u' = √(2/π)·(1 + 3·0.044715·x²)
 * (PyTorch's formulas), each computed in a form equal to it in exact arithmetic that does not
 * cancel where x is negative: 1 + erf and 1 + tanh there are 1 minus nearly 1, so in float
 * they keep few bits (1 + tanh u: a relative error of 1e-5 at x = −3, 5e-4 at −4, 0.3 at −5).
 *   - Φ(x) = erfc(−x/√2)/2 (glibc's erfcf costs what erff does: 9 ns an element).
 *   - (1 + tanh u)/2 = σ(2u) = 1/(1 + e^(−2u)), and 1 − tanh²u = 4·σ(2u)·σ(−2u); σ(−2u) from
 *     its own exp, not as 1 − σ(2u) (which cancels the same way) nor as e^(−2u)·σ(2u) (∞·0
 *     once e^(−2u) overflows). It is also the faster: glibc's tanhf took 13.9 ns an element,
 *     expf 1.7, the form's forward 3.0 ns against 13.9 (one core of a 2-core AMD EPYC, glibc
 *     2.36). */
static inline float gelu_f32(float x, bool tanh_form) {
    if (tanh_form) {
        float u = (float)SQRT_2_PI * (x + (float)GELU_TANH_CUBE * (x * x * x));
        return x / (1.0f + expf(-2.0f * u));
    }
    return 0.5f * x * erfcf(-x * (float)SQRT1_2);
}

static inline float gelu_grad_f32(float x, bool tanh_form) {
    if (tanh_form) {
        float x2 = x * x, u = (float)SQRT_2_PI * (x + (float)GELU_TANH_CUBE * (x2 * x));
        float s = 1.0f / (1.0f + expf(-2.0f * u)), s_neg = 1.0f / (1.0f + expf(2.0f * u));
        float du = (float)SQRT_2_PI * (1.0f + 3.0f * (float)GELU_TANH_CUBE * x2);
        return s + 2.0f * x * s * s_neg * du; /* x/2·(1 − tanh²u) = 2x·σ(2u)·σ(−2u) */
    }
    float cdf = 0.5f * erfcf(-x * (float)SQRT1_2);
    float pdf = expf(-0.5f * x * x) * (float)INV_SQRT_2PI;
    return cdf + x * pdf;
}

static inline double gelu_f64(double x, bool tanh_form) {
    if (tanh_form) {
        double u = SQRT_2_PI * (x + GELU_TANH_CUBE * (x * x * x));
        return x / (1.0 + exp(-2.0 * u));
    }
    return 0.5 * x * erfc(-x * SQRT1_2);
}

static inline double gelu_grad_f64(double x, bool tanh_form) {
    if (tanh_form) {
        double x2 = x * x, u = SQRT_2_PI * (x + GELU_TANH_CUBE * (x2 * x));
        double s = 1.0 / (1.0 + exp(-2.0 * u)), s_neg = 1.0 / (1.0 + exp(2.0 * u));
        double du = SQRT_2_PI * (1.0 + 3.0 * GELU_TANH_CUBE * x2);
        return s + 2.0 * x * s * s_neg * du;
    }
    double cdf = 0.5 * erfc(-x * SQRT1_2);
    double pdf = exp(-0.5 * x * x) * INV_SQRT_2PI;
    return cdf + x * pdf;
}

void gelu_forward_f32(float *y, const float *x, int64_t n, bool tanh_form) {
    KERNEL_FOR_STATIC(TEAM(n), i, n, y[i] = gelu_f32(x[i], tanh_form););
}

void gelu_backward_f32(float *dx, const float *dy, const float *x, int64_t n, bool tanh_form,
                       bool store) {
    KERNEL_FOR_STATIC(TEAM(n), i, n,
                      dx[i] = (store ? 0.0f : dx[i]) + dy[i] * gelu_grad_f32(x[i], tanh_form););
}

void gelu_forward_f64(double *y, const double *x, int64_t n, bool tanh_form) {
    KERNEL_FOR_STATIC(TEAM(n), i, n, y[i] = gelu_f64(x[i], tanh_form););
}

void gelu_backward_f64(double *dx, const double *dy, const double *x, int64_t n,
                       bool tanh_form, bool store) {
    KERNEL_FOR_STATIC(TEAM(n), i, n,
                      dx[i] = (store ? 0.0 : dx[i]) + dy[i] * gelu_grad_f64(x[i], tanh_form););
}
