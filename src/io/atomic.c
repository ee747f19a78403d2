/* atomic.c - crash-safe file writes: temporary file, fsync, rename. */
#include "io.h"

#include <errno.h>
#include <fcntl.h>
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
    /* The rename itself lasts through a power cut once the directory is synced too; a
     * directory that cannot be opened or synced changes nothing for a crash of qkv alone. */
    char dir[sizeof af->path];
    snprintf(dir, sizeof dir, "%s", af->path);
    char *slash = strrchr(dir, '/');
    if (slash) *(slash == dir ? slash + 1 : slash) = '\0';
    int fd = open(slash ? dir : ".", O_RDONLY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    return QKV_OK;
}
