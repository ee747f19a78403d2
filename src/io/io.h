/* io.h - files that are never half-written: write under a temporary name, then rename. */
#ifndef QKV_IO_H
#define QKV_IO_H

#include "io/paths.h"
#include "qkv.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* An output file being written: `tmp` is where the bytes go until atomic_commit renames it
 * over `path`. */
typedef struct {
    FILE *f;
    char path[FILE_PATH_LEN];
    char tmp[FILE_PATH_LEN + 16]; /* and ".tmp.PID.N" */
    unsigned mode; /* 0, or the permission bits atomic_commit gives the file (on its descriptor,
                    * before the rename: never by name, where a link may have been swapped in) */
} atomic_file;

/* Creates `path`.tmp.<pid>.<n> for writing, exclusively (O_EXCL: never an existing file, never
 * through a symbolic link). On failure returns QKV_ERR_IO with a message. */
qkv_status atomic_open(atomic_file *af, const char *path);
/* Flushes, fsyncs and renames the temporary file over the target. On any failure the
 * temporary file is removed and the target is left as it was. */
qkv_status atomic_commit(atomic_file *af);
/* Gives up: closes and removes the temporary file. */
void atomic_abort(atomic_file *af);
/* Whether atomic_open could write `path`, asked without creating anything: its checks (a
 * file name, not an input, no device, FIFO or directory in its place), then whether its
 * directory is there and this process may add to it. A command checks every output this way
 * before it writes any (cli_check_outputs), so that a refused one changes no file. */
qkv_status io_check_writable(const char *path);

/* A checkpoint's files, replaced together (rundir.c): from io_keep_begin on, each rename of
 * atomic_commit keeps the file it replaces (a hard link under a temporary's name) until
 * io_keep_end, which drops the old versions (the checkpoint is committed) or, with `restore`,
 * renames them back and removes the files that had none (it failed: every file is as it was
 * before the checkpoint, but an old version that could not be linked). */
void io_keep_begin(void);
void io_keep_end(bool restore);

/* Removes every temporary file still being written (async-signal-safe: the CLI's signal
 * handler calls it before exiting). */
void io_remove_temporaries(void);

/* Creates DIR/SUB (if missing) for files of a run, its path into out. It must be a real
 * directory: a symbolic link planted there would lead qkv's writes out of the run. */
qkv_status io_make_subdir(const char *dir, const char *sub, char *out, size_t len);

/* Creates DIR and its missing parents, like mkdir -p; QKV_ERR_IO if one cannot be made or
 * DIR is something else than a directory. */
qkv_status io_make_dirs(const char *dir);
/* The same, naming in `created` (len bytes) the first directory it made: "" when DIR was
 * there. A failure removes what it made. */
qkv_status io_make_dirs_noting(const char *dir, char *created, size_t len);
/* Undoes io_make_dirs_noting for a maker that failed, so that no empty or half-made output
 * directory is left: the files `names` (NULL-terminated; NULL: none) in DIR, if DIR holds
 * nothing else, then DIR and its parents up to `created`, deepest first, each if empty.
 * Nothing when `created` is "". */
void io_unmake_dirs(const char *dir, const char *created, const char *const *names);

/* Opens `path` for reading only if it is a regular file, without blocking (a FIFO or a
 * device is refused at once, QKV_ERR_IO); its size into *size. */
qkv_status io_open_regular(const char *path, int *fd, size_t *size);
/* The same as a stdio stream. */
qkv_status io_fopen_regular(const char *path, FILE **f);
/* Whether nothing at all is at `path` (no such name, or a directory of it missing): the one
 * answer to "is the file there?". Anything that is there, even a link to nowhere, a link that
 * loops, a file without read permission or a directory, is not absent: opening it then says
 * why it cannot be read, and it is never taken for a missing file. */
bool io_absent(const char *path);
/* Opens an existing regular file of a run or sweep directory for appending, never through a
 * symbolic link (O_NOFOLLOW) and never blocking on a FIFO. */
qkv_status io_fopen_append(const char *path, FILE **f);
/* Creates or empties a log file of a run or sweep directory for writing, never through a
 * symbolic link and never a FIFO or a device; its descriptor into *fd. */
qkv_status io_open_log(const char *path, int *fd);
/* Marks `path` as a file this process reads or depends on (a training file, a --heldout file,
 * a model being inspected, a config): from now on atomic_open refuses to replace it, under any
 * name (QKV_ERR_VALUE, "... is the input ..."). A path that does not exist is not marked. */
void io_protect(const char *path);
/* Whether `path` (followed through a link or not) is a file io_protect marked. */
bool io_is_protected(const char *path);

/* Removes, in DIR, the temporaries NAME.tmp.PID.N of the given files (a NULL-terminated list
 * of names) whose process PID is gone: what a killed command left, never a temporary that a
 * running one still writes. For directories without a run's lock (a sweep's). */
void io_remove_stale_temporaries(const char *dir, const char *const *names);

/* Whether another qkv run holds the lock of directory DIR (rundir_open's) right now. */
bool io_dir_locked(const char *dir);

/* What summary.json should say if a signal ends the process now: `text` is written to `path`
 * (atomically: a temporary, then a rename) by io_write_signal_record, which the CLI's signal
 * handler calls. NULL text forgets it. Two buffers: the handler always sees a whole record. */
void io_set_signal_record(const char *path, const char *text);
/* Async-signal-safe: writes the record set last, if any. */
void io_write_signal_record(void);

/* A run directory being written (rundir.c): the commit protocol of docs/errors.md. */
typedef struct {
    char dir[RUN_PATH_LEN];
    char created[RUN_PATH_LEN]; /* the first directory rundir_open created, or "" */
    int lock_fd;        /* the directory, flock'ed while the run writes it */
    bool committed;     /* set by the caller once a checkpoint has been written */
} rundir;

/* A run trained on a data file keeps byte-for-byte copies of its files here, relative to the
 * run directory (train/run.c writes them before the first checkpoint, and a model's metadata
 * names them), so that eval, inspect and the analysis commands give the same numbers on a run
 * moved or copied elsewhere. */
#define RUN_DATA_COPY "data/train.tsv"
#define RUN_HELDOUT_COPY "data/heldout.tsv"

/* Creates DIR and its missing parents, locks it against other runs (a second run gets
 * QKV_ERR_IO, "being written by another qkv run") and removes the temporaries a killed run
 * left in it. */
qkv_status rundir_open(rundir *rd, const char *dir);
/* Before a new run (not a resume of this directory) writes DIR: if it holds another run
 * (a model.safetensors), refuses (QKV_ERR_VALUE: "give --force") unless `force`; then removes
 * the old run's files, and only those: the records, the model, and the maps, snapshots and
 * plots qkv writes in its subdirectories (what a run killed before its first checkpoint left
 * is removed without asking). */
qkv_status rundir_claim(const rundir *rd, bool force);
/* A checkpoint: rundir_checkpoint_begin, then metrics.csv, the maps and the model written
 * (each renamed into place), then rundir_checkpoint_end: with `committed` false (a file,
 * the model above all, could not be written) every file the checkpoint replaced is put back
 * as it was, so that no record is left ahead of the model on disk. */
void rundir_checkpoint_begin(rundir *rd);
void rundir_checkpoint_end(rundir *rd, bool committed);
/* Removes snapshots of steps after `step` (the model's): what a kill left beyond the commit. */
void rundir_trim_snapshots(const rundir *rd, int64_t step);
/* The step of the last snapshot in the directory's snapshots/ at or before `step` (its
 * step<N>_layer1_head1.dat), or -1 when there is none. */
int64_t rundir_last_snapshot(const rundir *rd, int64_t step);
/* Unlocks DIR; if nothing was committed, removes the directories rundir_open created and all
 * that was written in them, but a summary.json (which records how the run failed). */
void rundir_close(rundir *rd);

/* qkv_st_load without the file: parses the `size` bytes of a safetensors file, naming it
 * `path` in messages. Takes ownership of `bytes` (malloc'd), also on failure. The fuzz
 * targets call it on their inputs. */
qkv_status st_parse(const char *path, unsigned char *bytes, size_t size, qkv_st **out);
/* qkv_st_load for a file that should be `what`: a file that is no safetensors file at all (a
 * CSV given as a model) is refused as "PATH is not WHAT: ..." (QKV_ERR_FORMAT); NULL: "a
 * safetensors file". */
qkv_status st_load_as(const char *path, const char *what, qkv_st **out);
/* What every reader of a model names when a file is not one. */
#define ST_MODEL_FILE "a qkv model file (a model.safetensors written by qkv train)"

#endif
