/* sweep.h - a grid of training runs: one `qkv train` per cell of a grid of train options, run
 * here N at a time or written out for GNU parallel or a Slurm job array, and the cells'
 * summary.json files gathered into tables and a figure's data (docs/sweeps.md).
 *
 * A grid is a list of NAME=V1,V2,... (NAME a train option); its cells are every combination of
 * the values, the last NAME varying fastest. Cell k trains with
 *     qkv train FIXED... --NAME1 V1k --NAME2 V2k ... --out DIR/NAME1=V1k,NAME2=V2k --threads T --quiet
 * where FIXED are the options after `--`. The sweep directory holds sweep.json (the grid, the
 * fixed options and the cells), which --collect reads and which a re-run must match. Local
 * runs and emitted scripts run the very same train command lines, with one thread per cell
 * here and under GNU parallel (Slurm: SLURM_CPUS_PER_TASK); since qkv gives the same bits for
 * any thread count, every way of running a grid gives the same numbers.
 *
 * Calls report failure the library's way (qkv_fail); a sweep_status is a qkv_status or one of
 * the outcomes below. */
#ifndef QKV_SWEEP_H
#define QKV_SWEEP_H

#include "qkv.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#define SWEEP_MAX_PARAMS 16
#define SWEEP_MAX_CELLS 10000
#define SWEEP_CELL_NAME_MAX 200 /* a cell directory's name, bytes (a file name may have 255) */
#define SWEEP_DIR_MAX 800       /* the sweep directory's path */

typedef int sweep_status;
enum {
    SWEEP_FAILED = -1,      /* cells failed, the run was interrupted, or nothing to plot */
    SWEEP_NOT_STARTED = -2, /* a cell could not start; SWEEP_CELL_NOT_STARTED said why */
};

/* What a train option takes, as the front end that runs the cells knows it: nothing (a flag),
 * text, or a number (whose values are compared as numbers: "1" and "01" are one value). */
typedef enum { SWEEP_OPT_UNKNOWN, SWEEP_OPT_FLAG, SWEEP_OPT_VALUE, SWEEP_OPT_NUMBER } sweep_opt_kind;
typedef sweep_opt_kind (*sweep_option_kind)(const char *name);

typedef struct {
    char name[48];        /* the train option, with '-': "d-model" */
    char flag[52];        /* "--d-model" */
    sweep_opt_kind kind;
    int n;                /* values */
    char **values;        /* malloc'd */
} sweep_param;

typedef struct {
    sweep_param param[SWEEP_MAX_PARAMS];
    int nparams;
    long ncells;
    int nfixed;
    char **fixed;         /* the options after "--" (borrowed) */
    const char *dir;
    sweep_option_kind option_kind;
} sweep;

/* ---- grid.c: the grid, its cells, sweep.json ---- */
void sweep_free(sweep *sw);
/* Adds every NAME=V1,... of `text` (separated by white space; with `comments`, '#' to the end
 * of a line is a comment), `where` (--grid, or the file) naming it in messages. */
qkv_status sweep_add_grid_text(sweep *sw, char *text, const char *where, bool comments);
/* Checks the grid as a whole (its size, its cells' names, the options after --) and counts
 * its cells. */
qkv_status sweep_check_grid(sweep *sw);
/* The whole of a small file (a grid file, a JSON file: `what`), NUL-terminated; NULL with
 * *status set otherwise. */
char *sweep_read_text(const char *path, const char *what, qkv_status *status);
/* The value index of every option in cell `c` (the last option varies fastest). */
void sweep_cell_indices(const sweep *sw, long c, int *idx);
/* The directory name of cell c: NAME1=V1,NAME2=V2 (values made safe for a file name). */
void sweep_cell_name(const sweep *sw, long c, char *out, size_t len);
/* The train arguments of cell `c`, from "train": the fixed options, then the cell's. Strings
 * are borrowed from sw; *v (malloc'd) has room for the caller to add 8 more and a NULL. */
bool sweep_cell_words(const sweep *sw, long c, const char ***v, int *n);
/* DIR/NAME, malloc'd (NULL when out of memory). */
char *sweep_path_join(const char *dir, const char *name);
/* Writes DIR/sweep.json, or checks that the one there describes this sweep. */
qkv_status sweep_write_json(const sweep *sw);
/* Reads DIR/sweep.json back into a sweep (its grid; cells are rebuilt from it). */
qkv_status sweep_load(sweep *sw, const char *dir, sweep_option_kind option_kind);
/* CELL_DIR/summary.json into *summary (the caller deletes it): QKV_OK, with NULL when there
 * is none (io_absent: the cell never ran); else, naming the file, QKV_ERR_FORMAT when it is
 * there but is not a whole summary (not one JSON object, as a file cut short; no "status"; more
 * than 4 MiB), or QKV_ERR_IO when it cannot be read (a FIFO, a directory, a link to nothing or
 * to itself, no read permission) or CELL_DIR is not a directory. A running cell's summary is
 * whole: qkv train replaces it by a rename. */
qkv_status sweep_cell_summary(const char *cell_dir, cJSON **summary);
/* Whether a summary says its run finished with exit status 0. */
bool sweep_summary_done(const cJSON *summary);
/* True when CELL_DIR/summary.json says the run finished with exit status 0 (one that cannot
 * be read is no finished run: it runs again); its JSON into *summary (the caller deletes it)
 * when summary is not NULL. */
bool sweep_cell_done(const char *cell_dir, cJSON **summary);

/* ---- jobs.c: running the cells here, or writing them out ---- */
typedef struct {
    long cells, done_before, to_run, at_once; /* the plan */
    long resumed;                             /* of to_run: interrupted cells resumed */
    long finished, failed;                    /* so far */
    long failed_nomem;                        /* of the failed: out of memory (exit 6) */
} sweep_progress;
typedef enum {
    SWEEP_PLANNED,          /* before the first cell starts */
    SWEEP_CELL_ENDED,       /* `cell` ended with `wait_status`; its directory is `cell_dir` */
    SWEEP_CELL_NOT_STARTED, /* `cell` could not start: qkv_last_error() says why */
} sweep_event;
typedef void (*sweep_report)(sweep_event event, const sweep *sw, const sweep_progress *p,
                             long cell, const char *cell_dir, int wait_status, void *user);
/* Runs the cells not done yet as child processes of this very program, `jobs` at a time,
 * each `qkv train ... --threads 1 --quiet` with its output in its train.log. SIGINT,
 * SIGTERM and SIGHUP are passed on to the running cells, whose ends are still waited for:
 * SWEEP_FAILED then. QKV_OK when every cell ran, failed ones counted in *out; `report` hears
 * of the plan and of every cell's end. */
sweep_status sweep_run_here(const sweep *sw, long jobs, sweep_report report, void *user,
                            sweep_progress *out);
/* QKV_ERR_VALUE when anything emit would write (the directory, the options after --, the
 * grid's values) holds a control character. */
qkv_status sweep_check_printable(const sweep *sw);
/* Writes DIR/jobs.txt (`kind` "parallel": one command per line) or DIR/sweep.sbatch
 * ("slurm": a job array), its path into `path`. */
qkv_status sweep_emit(const sweep *sw, const char *kind, char *path, size_t len);

/* ---- collect.c: the cells' results ---- */
/* The metrics of summary.json that --collect can plot (--metric), NULL-terminated. */
extern const char *const sweep_metric_names[];
/* What sweep_collect wrote, for the plot of scripts/sweep.gp. */
typedef struct {
    bool tables;         /* DIR/sweep.csv and DIR/sweep.md are written */
    char xlabel[64];     /* the x axis: a grid option (as a config key), or d_k */
    char lines[48];      /* the option with one line per value, or "" */
    bool logx;           /* x spans a factor of 8 or more */
    int blocks;          /* lines in DIR/sweep_plot.dat */
    char averaged[48];   /* the option averaged over (--average), or "": each point one cell */
    long least_averaged, most_averaged; /* cells in the points, with --average */
    bool figure;         /* false: no --x, and no option of the grid is a number: tables only */
    long nleft;          /* cells left out of the figure: their x is not a number */
    char left_out[1024]; /* their names and values, as far as they fit */
} sweep_collected;
/* Reads every cell's summary.json of the sweep in `dir` into DIR/sweep.csv and DIR/sweep.md,
 * and `metric` against `x_name` (a grid option or d_k; NULL: the first option whose values are
 * numbers, and no figure when none is), one block per value of `lines_name` (NULL: the next
 * option), into DIR/sweep_plot.dat. Cells whose x is not a number are left out of the figure
 * (out->left_out names them), never out of the tables. SWEEP_FAILED, the tables written, when
 * no finished cell has the metric or no cell's x is a number. Temporaries of these files that
 * a killed --collect left are removed first. With `average_name` (a grid option, e.g. seed),
 * the cells that differ only in that option are one point: their mean, minimum and maximum. */
sweep_status sweep_collect(const char *dir, const char *x_name, const char *lines_name,
                           const char *average_name, const char *metric,
                           sweep_option_kind option_kind, sweep_collected *out);

#endif
