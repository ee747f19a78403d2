/* threads.c - how many threads the kernels have, and when a loop should take them. */
#include "kernels.h"
#include "qkv.h"

#ifdef QKV_HAVE_OPENMP
#include <omp.h>
#endif

int kernel_threads(void) {
#ifdef QKV_HAVE_OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

int kernel_team(double work, double per_thread) {
#ifdef QKV_HAVE_OPENMP
    int threads = omp_get_max_threads();
    if (work <= per_thread || threads < 2 || omp_in_parallel()) return 1;
    double share = work / per_thread; /* > 1: two threads at least */
    return share >= threads ? threads : share < 2 ? 2 : (int)share;
#else
    (void)work;
    (void)per_thread;
    return 1;
#endif
}

bool kernel_parallel(double work, double per_thread) { return kernel_team(work, per_thread) > 1; }

void kernel_share(int64_t n, int64_t team, int64_t *lo, int64_t *hi) {
#ifdef QKV_HAVE_OPENMP
    int64_t id = omp_get_thread_num();
#else
    int64_t id = 0;
#endif
    int64_t q = n / team, r = n % team;
    *lo = id * q + (id < r ? id : r);
    *hi = id >= team ? *lo : *lo + q + (id < r);
}

int qkv_threads(void) { return kernel_threads(); }

void qkv_set_threads(int n) {
#ifdef QKV_HAVE_OPENMP
    omp_set_num_threads(n > 0 ? n : 1);
#else
    (void)n;
#endif
}

bool qkv_has_openmp(void) {
#ifdef QKV_HAVE_OPENMP
    return true;
#else
    return false;
#endif
}
