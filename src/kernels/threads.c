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

bool kernel_parallel(double work, double threshold) {
#ifdef QKV_HAVE_OPENMP
    return work > threshold && omp_get_max_threads() > 1 && !omp_in_parallel();
#else
    (void)work;
    (void)threshold;
    return false;
#endif
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
