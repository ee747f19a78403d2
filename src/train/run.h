/* run.h - a whole training run: the steps, the held-out evaluations and their metrics rows,
 * the snapshots and the checkpoints of a run directory (its commit protocol: io/rundir.c). */
#ifndef QKV_RUN_H
#define QKV_RUN_H

#include "io/io.h"
#include "io/metrics.h"
#include "io/run_files.h"
#include "model/model.h"
#include "train/trainer.h"

typedef struct {
    const char *out_dir;    /* the run directory; NULL: nothing is written */
    const char *resume_dir; /* the run directory the trainer was loaded from, or NULL */
    long eval_every;        /* 0: every steps/20, and at steps 1, 2, 3, 5, 7, 10, 15, 20, 30,
                               50, 70, 100, ... before that */
    long save_every;        /* a checkpoint every N steps; 0: at the end only */
    long snapshot_every;    /* the fixed held-out example's attention at step 0 and every N
                               steps in snapshots/; 0: none */
    bool force;             /* out_dir may hold another run: its files are removed first */
} run_options;

/* What a run tells its caller as it goes (with the run, the trainer, and the last evaluation
 * in run->last). */
typedef enum {
    RUN_BEGIN,     /* the directory is ready; nothing is trained yet */
    RUN_EVALUATED, /* a held-out evaluation after a step (run->last) */
    RUN_STEPPED,   /* a step is done (after its evaluation, if it has one) */
    RUN_SAVING,    /* a checkpoint (metrics.csv, the maps, then model.safetensors) is about to
                      be written: RUN_COMMITTED follows if it is, and the run fails if it is not,
                      its files rolled back. A caller that stops on signals holds them until
                      then, so that the checkpoint it names when stopped is the one on disk and
                      no checkpoint is left half-replaced */
    RUN_COMMITTED, /* the run directory holds a checkpoint of this step (a resumed run's at
                      RUN_BEGIN's time too, when it writes into its own directory) */
    RUN_TRAINED,   /* the last step is done; the final checkpoint follows */
} run_event;

typedef struct training_run training_run;
typedef void (*run_progress)(run_event event, const training_run *run, const trainer *t,
                             void *user);

struct training_run {
    run_options options;       /* eval_every as used: the default resolved */
    metrics_table metrics;     /* metrics.csv's rows */
    eval_result last;          /* the last evaluation (step 0's is only in the metrics) */
    int64_t last_step;         /* the step of that evaluation, -1 before the first */
    int64_t start_step;        /* the step the run began at */
    int64_t saved_step;        /* the step of the directory's last checkpoint */
    rundir dir;
    bool has_dir, files_begun;
    bool started;              /* past the checks of a resumed run: a failure from here on
                                  leaves the directory its checkpoint, if dir.committed */
    run_files files;           /* summary.json and metrics.jsonl */
    float *snapshot_ref;       /* the last snapshot kept, as its files hold it (layers, heads,
                                  To, T); NULL: none yet */
    fourier_measures start_measures; /* a modular run's measures of step 0, kept until its
                                        row is added after step 1 (measured_start) */
    bool measured_start;
};

/* Runs t up to t->cfg.steps. A new run's first metrics row is step 0, before any update; a
 * run resumed from its directory keeps the rows and snapshots up to its checkpoint and drops
 * what a kill left beyond it. With an out_dir it writes metrics.csv, attention/, gradients/
 * and model.safetensors at every checkpoint, in the order of the commit protocol, and
 * metrics.jsonl and summary.json as it goes. `progress` (NULL: none) hears of each event. On
 * a failure (with its message) the trainer holds the failing state, and the directory keeps
 * the checkpoint of run->saved_step if run->started and run->dir.committed. Either way, end
 * the run with trainer_run_end. */
qkv_status trainer_run(trainer *t, const run_options *o, run_progress progress, void *user,
                       training_run *run);
/* Ends a run: summary.json records `exit_code` (and `error` when it is not 0), the directory
 * is unlocked (and removed if nothing was ever committed to it), and the metrics are freed.
 * Called after anything the caller still does for the run (qkv train draws its plots), so
 * that the summary says how the whole command ended. */
qkv_status trainer_run_end(training_run *run, const trainer *t, int exit_code, const char *error);

#endif
