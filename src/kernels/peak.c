/* peak.c - the machine's f32 FMA peak on the path in use (qkv_fma_peak): register-only FMA
 * chains (isa_kernels.inc's fma_peak) on every thread at once, the best of five timed trials.
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

double qkv_fma_peak(int threads, double seconds) {
    return fma_peak(kernel_isa_active(), threads, seconds);
}

double qkv_fma_peak_of(const char *path, int threads, double seconds) {
    const kernel_isa *isa = kernel_isa_find(path);
    return isa ? fma_peak(isa, threads, seconds) : 0;
}
