/* profile.c - where a training step's time goes (qkv bench --profile).
 *
 * The profile is a timeline of one thread, the one that started it: at any instant it is in
 * one part (products, softmax, ...), and profile_enter moves it to another, charging the time
 * since the last move to the part it leaves. The parts therefore add up to the time between
 * profile_start and profile_stop exactly. Inside a parallel region only thread 0 of the team
 * (the thread that started the region) moves the timeline; the time it spends forking the
 * team, and waiting at the region's end for the other threads, is PROFILE_WAIT
 * (KERNEL_FOR_STATIC and the other regions enter it around their loops).
 *
 * Off (the default), profile_enter is a load and a branch; it never changes what is computed. */
#include "kernels.h"

#include <time.h>
#ifdef QKV_HAVE_OPENMP
#include <omp.h>
#endif

bool profile_on;
static profile_part current;
static double since;                   /* when the timeline entered `current` */
static double spent[PROFILE_PART_COUNT]; /* seconds in each part so far */

static const char *const part_names[PROFILE_PART_COUNT] = {
    [PROFILE_PRODUCTS] = "products",
    [PROFILE_SOFTMAX] = "exp and softmax",
    [PROFILE_LAYOUT] = "layout and copies",
    [PROFILE_ELEMENTWISE] = "elementwise",
    [PROFILE_EMBEDDING] = "embedding",
    [PROFILE_LOSS] = "loss",
    [PROFILE_OPTIMIZER] = "optimizer",
    [PROFILE_WAIT] = "waiting on threads",
    [PROFILE_OTHER] = "other",
};

const char *profile_part_name(profile_part p) {
    return p >= 0 && p < PROFILE_PART_COUNT ? part_names[p] : "?";
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The thread that called profile_start. It is thread 0 of every team it starts, so inside a
 * region it is the one that keeps time; thread 0 of a team that another thread starts (a
 * shard's thread) is not, which omp_get_thread_num() == 0 alone would let in, charging two
 * timelines to one and racing on the counters. */
static _Thread_local bool profiling_thread;

static bool keeps_time(void) {
    return profiling_thread;
}

profile_part profile_switch(profile_part p) {
    if (!keeps_time()) return p;
    double t = now();
    profile_part was = current;
    spent[was] += t - since;
    current = p, since = t;
    return was;
}

void profile_start(void) {
    profiling_thread = true;
    for (int i = 0; i < PROFILE_PART_COUNT; i++) spent[i] = 0;
    current = PROFILE_OTHER, since = now();
    profile_on = true;
}

double profile_stop(double seconds[PROFILE_PART_COUNT]) {
    profile_switch(PROFILE_OTHER);
    profile_on = false;
    profiling_thread = false;
    double total = 0;
    for (int i = 0; i < PROFILE_PART_COUNT; i++) seconds[i] = spent[i], total += spent[i];
    return total;
}
