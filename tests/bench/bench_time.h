/* bench_time.h - the clock and the median of the benchmarks in tests/bench. */
#ifndef QKV_BENCH_TIME_H
#define QKV_BENCH_TIME_H

#include <stdlib.h>
#include <time.h>

/* Seconds on the monotonic clock. */
static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int bench_cmp_(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of t[0 .. n) (n > 0), which it sorts. */
static inline double bench_median(double *t, int n) {
    qsort(t, (size_t)n, sizeof t[0], bench_cmp_);
    return t[n / 2];
}

#endif
