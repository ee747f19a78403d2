/* bench.h - the timing of training steps behind `qkv bench`: the three workloads, the median
 * step time, its GFLOP/s and the step memory. */
#ifndef QKV_BENCH_H
#define QKV_BENCH_H

#include "train/trainer.h"

/* The parts of a profiled step (kernels.h's PROFILE_PART_COUNT) and their names. */
#define BENCH_PROFILE_PARTS 9
const char *bench_profile_part_name(int part);

/* One model shape, timed on the reverse task: one layer, and with an MLP (mlp > 0: its hidden
 * units, ReLU) the residual stream; or, with `task` "modular", the default run of `qkv train
 * --task modular` (its sizes, AdamW and options, the full batch: the sizes here are what
 * those give, for the help). */
typedef struct {
    const char *name;
    int batch, seq_len, d_model, heads, vocab, mlp;
    const char *task; /* NULL: reverse; "modular" */
} bench_workload;

/* tiny, medium, long, mlp and grok, in that order (`qkv bench --help` lists them). */
extern const bench_workload bench_workloads[];
extern const int bench_workload_count;

typedef struct {
    double ms_per_step;  /* the median of the timed steps */
    double gflops;       /* three forward passes' matrix products per median step, as the step
                          * does them (after the last attention layer, only at the positions
                          * with a target: `positions`) */
    int positions;       /* positions of a sequence the step computed past its last attention
                          * layer's keys and values (seq_len: all) */
    double step_mem_mb;  /* peak resident memory minus that before the first step; -1: unknown */
    long steps_timed;
    double last_loss;    /* the loss of the last step */
    /* With a profile (bench_workload_run's `profile`): the mean step of as many further
     * steps, profiled, and its seconds in each part (kernels.h's profile_part, in its order;
     * they add up to profile_step). Zero without. */
    double profile_step;
    double profile[BENCH_PROFILE_PARTS];
} bench_result;

/* Builds the workload's model in `dtype` (SGD, seed 1, one batch drawn from seed 7; grok: the
 * modular task's defaults, every training pair), takes 3
 * warm-up steps, then times `repeat` steps, or when `repeat` is 0 as many as fit in `budget`
 * seconds (at least 5, at most 10 000). With `profile`, as many steps again are run with the
 * profile on (apart from the timed ones, which it would slow a little). The threads are the
 * caller's (kernel_threads). Fails as trainer_init does, with nothing to free. */
qkv_status bench_workload_run(const bench_workload *w, qkv_dtype dtype, long repeat,
                              double budget, bool profile, bench_result *out);

#endif
