/* atomic.c - crash-safe file writes: temporary file, fsync, rename. */
#include "io.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

qkv_status atomic_open(atomic_file *af, const char *path) {
    memset(af, 0, sizeof *af);
    if (strlen(path) >= sizeof af->path) return qkv_fail(QKV_ERR_IO, "%s: path too long", path);
    snprintf(af->path, sizeof af->path, "%s", path);
    snprintf(af->tmp, sizeof af->tmp, "%s.tmp.%ld", path, (long)getpid());
    af->f = fopen(af->tmp, "wb");
    if (!af->f) return qkv_fail(QKV_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    return QKV_OK;
}

void atomic_abort(atomic_file *af) {
    if (af->f) fclose(af->f);
    af->f = NULL;
    remove(af->tmp);
}

qkv_status atomic_commit(atomic_file *af) {
    int err = 0;
    if (fflush(af->f) != 0 || ferror(af->f)) err = errno ? errno : EIO;
    if (!err && fsync(fileno(af->f)) != 0) err = errno;
    if (fclose(af->f) != 0 && !err) err = errno ? errno : EIO;
    af->f = NULL;
    if (!err && rename(af->tmp, af->path) != 0) err = errno;
    if (err) {
        remove(af->tmp);
        return qkv_fail(QKV_ERR_IO, "cannot write %s: %s", af->path, strerror(err));
    }
    return QKV_OK;
}
