/* peak.c - the machine's f32 FMA peak on the path in use (qkv_fma_peak): register-only FMA
 * chains (isa_kernels.inc's fma_peak) on every thread at once, the best of five timed trials;
 * and the width of the CPU's FMA units (fma_width_measure, isa.h).
 * It is the ceiling `qkv bench --peak` measures the training step against: what the products
 * could reach if nothing came between them and no operand had to be loaded. */
#include "isa.h"
#include "qkv.h"

#include <time.h>
#ifdef QKV_HAVE_OPENMP
#include <omp.h>
#endif

#define PEAK_TRIALS 5

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static volatile double peak_sink; /* the chains' sums: kept, so never left out */

/* Seconds for `rounds` rounds on `threads` threads; *started: the threads that ran them. */
static double timed_rounds(const kernel_isa *isa, int64_t rounds, int threads, int *started) {
    double t0 = now(), sink = 0;
    *started = 1;
#ifdef QKV_HAVE_OPENMP
    int ran = 1;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    {
        if (omp_get_thread_num() == 0) ran = omp_get_num_threads();
        sink += isa->fma_peak(rounds);
    }
    *started = ran;
#else
    (void)threads;
    sink = isa->fma_peak(rounds);
#endif
    double t = now() - t0;
    peak_sink = sink;
    return t;
}

static double fma_peak(const kernel_isa *isa, int threads, double seconds) {
    if (threads < 1) threads = 1;
    if (!(seconds > 0)) seconds = 1;
    /* rounds for a trial of about seconds / PEAK_TRIALS, from one that takes 10 ms or more */
    int64_t rounds = 1 << 12;
    int started;
    double t;
    while ((t = timed_rounds(isa, rounds, 1, &started)) < 0.01 && rounds < ((int64_t)1 << 40))
        rounds *= 4;
    double want = seconds / PEAK_TRIALS;
    if (t < want) rounds = (int64_t)((double)rounds * want / t);
    double best = 0;
    for (int i = 0; i < PEAK_TRIALS; i++) {
        t = timed_rounds(isa, rounds, threads, &started);
        double gflops = (double)started * (double)rounds * isa->fma_peak_flops / t / 1e9;
        if (gflops > best) best = gflops;
    }
    return best;
}

/* ---- the FMA units' width (isa.h) ---- */

static double thread_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Seconds of this thread's CPU time for `rounds` rounds of `isa`'s chains. */
static double thread_rounds(const kernel_isa *isa, int64_t rounds) {
    double t0 = thread_seconds();
    peak_sink = isa->fma_peak(rounds);
    return thread_seconds() - t0;
}

/* One trial on this thread: GFLOP/s per second of its CPU time. */
static double trial_rate(const kernel_isa *isa, int64_t rounds) {
    double t = thread_rounds(isa, rounds);
    return t > 0 ? (double)rounds * isa->fma_peak_flops / t / 1e9 : 0;
}

/* Rounds for about `seconds` of this thread's CPU time, from a run of 2 ms or more. */
static int64_t rounds_for(const kernel_isa *isa, double seconds) {
    int64_t rounds = 1 << 12;
    double t;
    while ((t = thread_rounds(isa, rounds)) < 0.002 && rounds < ((int64_t)1 << 40)) rounds *= 4;
    return t < seconds ? (int64_t)((double)rounds * seconds / t) : rounds;
}

static double best_of(const double *rate, int n, int *near) {
    double best = 0;
    for (int i = 0; i < n; i++)
        if (rate[i] > best) best = rate[i];
    *near = 0;
    for (int i = 0; i < n; i++) *near += rate[i] >= (1 - FMA_WIDTH_AGREE) * best;
    return best;
}

fma_width_result fma_width_decide(const double *wide, const double *narrow, int trials) {
    int wide_near, narrow_near;
    fma_width_result r = {.wide = best_of(wide, trials, &wide_near),
                          .narrow = best_of(narrow, trials, &narrow_near)};
    if (!(r.wide > 0 && r.narrow > 0)) return r;
    r.ratio = r.wide / r.narrow;
    if (wide_near < 2 || narrow_near < 2) return r; /* a best that no other trial confirms */
    r.width = r.ratio >= FMA_FULL_MIN  ? FMA_WIDTH_FULL
              : r.ratio < FMA_HALF_MAX ? FMA_WIDTH_HALF
                                       : FMA_WIDTH_UNTOLD;
    return r;
}

fma_width_result fma_width_measure(const char *wide, const char *narrow, double seconds) {
    const kernel_isa *w = kernel_isa_find(wide), *n = kernel_isa_find(narrow);
    if (!w || !n) return (fma_width_result){0};
    if (!(seconds > 0)) seconds = 1;
    double trial = seconds / (2 * FMA_WIDTH_TRIALS), wide_rate[FMA_WIDTH_TRIALS],
           narrow_rate[FMA_WIDTH_TRIALS];
    int64_t wide_rounds = rounds_for(w, trial), narrow_rounds = rounds_for(n, trial);
    /* in turn, so that a spell of load, or a clock that changes, meets both paths alike */
    for (int i = 0; i < FMA_WIDTH_TRIALS; i++) {
        wide_rate[i] = trial_rate(w, wide_rounds);
        narrow_rate[i] = trial_rate(n, narrow_rounds);
    }
    return fma_width_decide(wide_rate, narrow_rate, FMA_WIDTH_TRIALS);
}

double qkv_fma_peak(int threads, double seconds) {
    return fma_peak(kernel_isa_active(), threads, seconds);
}

double qkv_fma_peak_of(const char *path, int threads, double seconds) {
    const kernel_isa *isa = kernel_isa_find(path);
    return isa ? fma_peak(isa, threads, seconds) : 0;
}
