/* threads.c - how many threads the kernels have, and when a loop should take them. */
#include "kernels.h"

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
