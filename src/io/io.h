/* io.h - files that are never half-written: write under a temporary name, then rename. */
#ifndef QKV_IO_H
#define QKV_IO_H

#include "qkv.h"

#include <stdio.h>

/* An output file being written: `tmp` is where the bytes go until atomic_commit renames it
 * over `path`. */
typedef struct {
    FILE *f;
    char path[1024];
    char tmp[1040];
} atomic_file;

/* Opens `path`.tmp.<pid> for writing. On failure returns QKV_ERR_IO with a message. */
qkv_status atomic_open(atomic_file *af, const char *path);
/* Flushes, fsyncs and renames the temporary file over the target. On any failure the
 * temporary file is removed and the target is left as it was. */
qkv_status atomic_commit(atomic_file *af);
/* Gives up: closes and removes the temporary file. */
void atomic_abort(atomic_file *af);

/* qkv_st_load without the file: parses the `size` bytes of a safetensors file, naming it
 * `path` in messages. Takes ownership of `bytes` (malloc'd), also on failure. The fuzz
 * targets call it on their inputs. */
qkv_status st_parse(const char *path, unsigned char *bytes, size_t size, qkv_st **out);

#endif
