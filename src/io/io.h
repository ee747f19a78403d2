/* io.h - files that are never half-written: write under a temporary name, then rename. */
#ifndef QKV_IO_H
#define QKV_IO_H

#include "qkv.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* An output file being written: `tmp` is where the bytes go until atomic_commit renames it
 * over `path`. */
typedef struct {
    FILE *f;
    char path[1024];
    char tmp[1040];
} atomic_file;

/* Creates `path`.tmp.<pid>.<n> for writing, exclusively (O_EXCL: never an existing file, never
 * through a symbolic link). On failure returns QKV_ERR_IO with a message. */
qkv_status atomic_open(atomic_file *af, const char *path);
/* Flushes, fsyncs and renames the temporary file over the target. On any failure the
 * temporary file is removed and the target is left as it was. */
qkv_status atomic_commit(atomic_file *af);
/* Gives up: closes and removes the temporary file. */
void atomic_abort(atomic_file *af);

/* Removes every temporary file still being written (async-signal-safe: the CLI's signal
 * handler calls it before exiting). */
void io_remove_temporaries(void);

/* Creates DIR/SUB (if missing) for files of a run, its path into out. It must be a real
 * directory: a symbolic link planted there would lead qkv's writes out of the run. */
qkv_status io_make_subdir(const char *dir, const char *sub, char *out, size_t len);

/* Creates DIR and its missing parents, like mkdir -p; QKV_ERR_IO if one cannot be made or
 * DIR is something else than a directory. */
qkv_status io_make_dirs(const char *dir);

/* Opens `path` for reading only if it is a regular file, without blocking (a FIFO or a
 * device is refused at once, QKV_ERR_IO); its size into *size. */
qkv_status io_open_regular(const char *path, int *fd, size_t *size);
/* The same as a stdio stream. */
qkv_status io_fopen_regular(const char *path, FILE **f);

/* A run directory being written (rundir.c): the commit protocol of docs/errors.md. */
typedef struct {
    char dir[1100];
    char created[1100]; /* the first directory rundir_open created, or "" */
    int lock_fd;        /* the directory, flock'ed while the run writes it */
    bool committed;     /* set by the caller once a checkpoint has been written */
} rundir;

/* Creates DIR and its missing parents, locks it against other runs (a second run gets
 * QKV_ERR_IO, "being written by another qkv run") and removes the temporaries a killed run
 * left in it. */
qkv_status rundir_open(rundir *rd, const char *dir);
/* Removes snapshots of steps after `step` (the model's): what a kill left beyond the commit. */
void rundir_trim_snapshots(const rundir *rd, int64_t step);
/* Unlocks DIR; if nothing was committed, removes the directories rundir_open created and all
 * that was written in them, but a summary.json (which records how the run failed). */
void rundir_close(rundir *rd);

/* qkv_st_load without the file: parses the `size` bytes of a safetensors file, naming it
 * `path` in messages. Takes ownership of `bytes` (malloc'd), also on failure. The fuzz
 * targets call it on their inputs. */
qkv_status st_parse(const char *path, unsigned char *bytes, size_t size, qkv_st **out);

#endif
