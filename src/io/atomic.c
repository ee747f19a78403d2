/* atomic.c - crash-safe file writes: an exclusive temporary file, fsync, rename; and reads
 * that never block on a FIFO or a device.
 *
 * The temporary is created with O_CREAT | O_EXCL, so it is always a new regular file: a
 * symbolic link or any other file planted at its name makes the create fail (the next name is
 * tried), and nothing is ever written through a link. Each temporary being written is listed
 * in `live`, so that the signal handler of the CLI can remove them before it exits. */
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the temporaries being written, for io_remove_temporaries ---- */

#define LIVE_MAX 8 /* atomic files open at once; qkv writes one at a time */
static char live[LIVE_MAX][FILE_PATH_LEN + 16]; /* atomic_file's tmp */
static volatile sig_atomic_t live_used[LIVE_MAX];

static void live_add(const char *tmp) {
    for (int i = 0; i < LIVE_MAX; i++)
        if (!live_used[i]) {
            memcpy(live[i], tmp, strlen(tmp) + 1);
            live_used[i] = 1; /* set after the name: a signal sees a whole name or none */
            return;
        }
}

static void live_remove(const char *tmp) {
    for (int i = 0; i < LIVE_MAX; i++)
        if (live_used[i] && !strcmp(live[i], tmp)) live_used[i] = 0;
}

void io_remove_temporaries(void) { /* async-signal-safe: unlink only */
    for (int i = 0; i < LIVE_MAX; i++)
        if (live_used[i]) unlink(live[i]);
}

/* ---- the kill hook of tests/kill_test.sh ----
 * QKV_TEST_KILL_AT=N sends SIGKILL to this process at its N-th file event (counted from 1):
 * a temporary created, a temporary written in full and synced, a rename done. The test kills
 * a run at every one of them in turn and checks that it resumes to the same bits. */
static long kill_at = -1, events;

static void io_event(void) {
    if (kill_at < 0) {
        const char *s = getenv("QKV_TEST_KILL_AT");
        kill_at = s && *s ? atol(s) : 0;
    }
    if (kill_at > 0 && ++events == kill_at) raise(SIGKILL);
}

/* ---- the failure hook of tests/hostile_test.sh ----
 * QKV_TEST_FAIL_WRITE=NAME makes the rename of every file named NAME (its last component)
 * fail with EPERM, as the rename over an immutable file (chattr +i) does, which an ordinary
 * user cannot set up. The test uses it to make a resume's model unwritable. */
static bool fails_by_hook(const char *path) {
    const char *name = getenv("QKV_TEST_FAIL_WRITE");
    if (!name || !*name) return false;
    const char *slash = strrchr(path, '/');
    return !strcmp(slash ? slash + 1 : path, name);
}

/* ---- the files a checkpoint replaces, kept until it is committed ---- */

typedef struct {
    char path[FILE_PATH_LEN]; /* the file replaced (or created) */
    char kept[FILE_PATH_LEN + 32]; /* its old version, a hard link under a temporary's name
                                    * (path.tmp.PID.200); "" if it had none */
    bool restorable; /* false: an old version that could not be kept (no hard links here) */
} kept_file;
static kept_file *kept;
static size_t nkept, kept_cap;
static bool keeping, kept_added; /* kept_added: keep_old's last call added an entry */

void io_keep_begin(void) {
    keeping = true;
    nkept = 0;
}

/* Before `path` is replaced: its old version is kept as PATH.tmp.PID.200, a name that
 * atomic_open never takes and that the next run in the directory removes with the other
 * temporaries if this process is killed. A file replaced twice keeps its first version. */
static qkv_status keep_old(const char *path) {
    kept_added = false;
    for (size_t i = 0; i < nkept; i++)
        if (!strcmp(kept[i].path, path)) return QKV_OK;
    if (nkept == kept_cap) {
        size_t cap = kept_cap ? 2 * kept_cap : 64;
        kept_file *p = realloc(kept, cap * sizeof *p);
        if (!p) return qkv_fail(QKV_ERR_NOMEM, "out of memory");
        kept = p;
        kept_cap = cap;
    }
    kept_file *k = &kept[nkept];
    snprintf(k->path, sizeof k->path, "%s", path);
    k->kept[0] = '\0';
    k->restorable = true;
    struct stat sb;
    if (lstat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
        snprintf(k->kept, sizeof k->kept, "%s.tmp.%ld.200", path, (long)getpid());
        unlink(k->kept); /* a stale one of a process that had this pid */
        if (link(path, k->kept) != 0) k->restorable = false, k->kept[0] = '\0';
    } else if (lstat(path, &sb) == 0) {
        k->restorable = false; /* a link replaced: the rename drops it, it is not brought back */
    }
    nkept++;
    kept_added = true;
    return QKV_OK;
}

/* The rename of the file kept last failed: it was not replaced, nothing to restore. */
static void keep_drop_last(const char *path) {
    if (!kept_added || nkept == 0 || strcmp(kept[nkept - 1].path, path)) return;
    if (kept[nkept - 1].kept[0]) unlink(kept[nkept - 1].kept);
    nkept--;
}

void io_keep_end(bool restore) {
    /* the last replaced first: while it runs, files are ahead of the commit record, never
     * behind it */
    for (size_t i = nkept; i-- > 0;) {
        kept_file *k = &kept[i];
        if (restore && k->kept[0]) rename(k->kept, k->path);
        else if (restore && k->restorable) unlink(k->path); /* it did not exist before */
        if (k->kept[0]) unlink(k->kept); /* (a rename between links of one file keeps both) */
    }
    nkept = 0;
    keeping = false;
    free(kept);
    kept = NULL;
    kept_cap = 0;
}

/* ---- the inputs no output may replace ---- */

#define PROTECTED_MAX 16
static struct {
    dev_t dev;
    ino_t ino;
    char name[256];
} protected_files[2 * PROTECTED_MAX];
static int nprotected;

static void protect_one(const struct stat *sb, const char *path) {
    for (int i = 0; i < nprotected; i++)
        if (protected_files[i].dev == sb->st_dev && protected_files[i].ino == sb->st_ino) return;
    if (nprotected == 2 * PROTECTED_MAX) return;
    protected_files[nprotected].dev = sb->st_dev;
    protected_files[nprotected].ino = sb->st_ino;
    snprintf(protected_files[nprotected].name, sizeof protected_files[0].name, "%s", path);
    nprotected++;
}

void io_protect(const char *path) {
    /* the file, and a link naming it: the link is what a model's metadata may name */
    struct stat sb;
    if (stat(path, &sb) == 0) protect_one(&sb, path);
    if (lstat(path, &sb) == 0) protect_one(&sb, path);
}

/* The input that `path` names (followed through links or not), or NULL. */
static const char *protected_input(const char *path) {
    struct stat sb[2];
    bool has[2] = {stat(path, &sb[0]) == 0, lstat(path, &sb[1]) == 0};
    for (int k = 0; k < 2; k++)
        for (int i = 0; has[k] && i < nprotected; i++)
            if (protected_files[i].dev == sb[k].st_dev && protected_files[i].ino == sb[k].st_ino)
                return protected_files[i].name;
    return NULL;
}

bool io_is_protected(const char *path) { return protected_input(path) != NULL; }

/* ---- writing ---- */

/* What atomic_open checks of `path` before it creates anything. */
static qkv_status check_target(const char *path) {
    size_t len = strlen(path);
    if (len >= FILE_PATH_LEN) return qkv_fail(QKV_ERR_IO, "%s: path too long", path);
    if (len == 0 || path[len - 1] == '/')
        return qkv_fail(QKV_ERR_IO, "cannot write '%s': not a file name", path);
    /* The rename would put a file in the place of a device, a FIFO or a directory (as root,
     * /dev/null itself): only a regular file, or a symbolic link (the link is replaced, never
     * what it points to), is ever replaced. */
    const char *input = protected_input(path);
    if (input)
        return qkv_fail(QKV_ERR_VALUE, "cannot write %s: it is the input %s, which writing it "
                        "would destroy", path, input);
    struct stat sb;
    if (lstat(path, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISLNK(sb.st_mode))
        return qkv_fail(QKV_ERR_IO, "cannot write %s: it exists and is not a regular file", path);
    return QKV_OK;
}

qkv_status atomic_open(atomic_file *af, const char *path) {
    memset(af, 0, sizeof *af);
    qkv_status s = check_target(path);
    if (s != QKV_OK) return s;
    snprintf(af->path, sizeof af->path, "%s", path);
    int fd = -1, err = 0;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(af->tmp, sizeof af->tmp, "%s.tmp.%ld.%d", path, (long)getpid(), attempt);
        /* Listed before it is created: a signal between the create and the listing would
         * leave the file behind. One that comes before the create unlinks a name that is
         * not there yet (or a stale temporary of this name, which a resume removes anyway). */
        live_add(af->tmp);
        fd = open(af->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        err = errno;
        if (fd < 0) live_remove(af->tmp);
        if (fd < 0 && err != EEXIST) break; /* only a name already taken is worth another try */
    }
    if (fd < 0) return qkv_fail(QKV_ERR_IO, "cannot write %s: %s", path, strerror(err));
    af->f = fdopen(fd, "wb");
    if (!af->f) {
        err = errno;
        close(fd);
        unlink(af->tmp);
        live_remove(af->tmp);
        return qkv_fail(QKV_ERR_NOMEM, "cannot write %s: %s", path, strerror(err));
    }
    io_event();
    return QKV_OK;
}

qkv_status io_check_writable(const char *path) {
    qkv_status s = check_target(path);
    if (s != QKV_OK) return s;
    /* the temporary's directory must be there, and this process allowed to add to it (a
     * read-only file system says so too); asked without creating anything in it */
    char dir[FILE_PATH_LEN];
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    if (!dir[0]) snprintf(dir, sizeof dir, "/");
    struct stat sb;
    int err = stat(dir, &sb) != 0                                      ? errno
              : !S_ISDIR(sb.st_mode)                                   ? ENOTDIR
              : faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) != 0 ? errno
                                                                       : 0;
    if (err) return qkv_fail(QKV_ERR_IO, "cannot write %s: %s", path, strerror(err));
    return QKV_OK;
}

void atomic_abort(atomic_file *af) {
    if (af->f) fclose(af->f);
    af->f = NULL;
    unlink(af->tmp);
    live_remove(af->tmp);
}

qkv_status atomic_commit(atomic_file *af) {
    int err = 0;
    if (fflush(af->f) != 0 || ferror(af->f)) err = errno ? errno : EIO;
    if (!err && af->mode && fchmod(fileno(af->f), (mode_t)af->mode) != 0) err = errno;
    if (!err && fsync(fileno(af->f)) != 0) err = errno;
    if (fclose(af->f) != 0 && !err) err = errno ? errno : EIO;
    af->f = NULL;
    if (!err) io_event();
    if (!err && keeping) {
        qkv_status s = keep_old(af->path);
        if (s != QKV_OK) {
            unlink(af->tmp);
            live_remove(af->tmp);
            return s;
        }
    }
    if (!err && fails_by_hook(af->path)) err = EPERM;
    if (!err && rename(af->tmp, af->path) != 0) err = errno;
    if (err && keeping) keep_drop_last(af->path);
    if (err) {
        unlink(af->tmp);
        live_remove(af->tmp);
        return qkv_fail(QKV_ERR_IO, "cannot write %s: %s", af->path, strerror(err));
    }
    live_remove(af->tmp);
    io_event();
    /* The rename itself lasts through a power cut once the directory is synced too; a
     * directory that cannot be opened or synced changes nothing for a crash of qkv alone. */
    char dir[sizeof af->path];
    snprintf(dir, sizeof dir, "%s", af->path);
    char *slash = strrchr(dir, '/');
    if (slash) *(slash == dir ? slash + 1 : slash) = '\0';
    int fd = open(slash ? dir : ".", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    return QKV_OK;
}

qkv_status io_make_subdir(const char *dir, const char *sub, char *out, size_t len) {
    if ((size_t)snprintf(out, len, "%s/%s", dir, sub) >= len)
        return qkv_fail(QKV_ERR_IO, "%s/%s: path too long", dir, sub);
    if (mkdir(out, 0777) != 0 && errno != EEXIST)
        return qkv_fail(QKV_ERR_IO, "cannot create %s: %s", out, strerror(errno));
    struct stat sb;
    if (lstat(out, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return qkv_fail(QKV_ERR_IO, "%s exists and is not a directory%s", out,
                        S_ISLNK(sb.st_mode) ? " (a symbolic link: qkv writes only inside the run)"
                                            : "");
    return QKV_OK;
}

/* ---- reading ---- */

qkv_status io_open_regular(const char *path, int *fd_out, size_t *size) {
    /* O_NONBLOCK: opening a FIFO with no writer would wait forever; once it is known to be a
     * regular file the flag is dropped again (it means nothing for regular files anyway). */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        struct stat sb; /* a link to nothing is there: not "No such file" */
        bool dangling = err == ENOENT && lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode);
        return qkv_fail(QKV_ERR_IO, "cannot open %s: %s", path,
                        dangling ? "it is a symbolic link to nothing" : strerror(err));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        int dir = S_ISDIR(sb.st_mode);
        close(fd);
        return qkv_fail(QKV_ERR_IO, "cannot read %s: %s", path,
                        dir ? "it is a directory" : "it is not a regular file");
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    *fd_out = fd;
    *size = (size_t)sb.st_size;
    return QKV_OK;
}

/* Opens with `flags` | O_NONBLOCK | O_NOFOLLOW and keeps the descriptor only if it is a
 * regular file: a link, a FIFO or a device planted at a run's file name is refused at once. */
static qkv_status open_run_file(const char *path, int flags, int *fd_out) {
    int fd = open(path, flags | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0)
        return qkv_fail(QKV_ERR_IO, "cannot write %s: %s", path,
                        errno == ELOOP ? "it is a symbolic link (qkv writes only inside the run)"
                                       : strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return qkv_fail(QKV_ERR_IO, "cannot write %s: it exists and is not a regular file", path);
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    *fd_out = fd;
    return QKV_OK;
}

qkv_status io_fopen_append(const char *path, FILE **f) {
    int fd = -1;
    qkv_status s = open_run_file(path, O_WRONLY | O_APPEND, &fd);
    if (s != QKV_OK) return s;
    if (!(*f = fdopen(fd, "ab"))) {
        close(fd);
        return qkv_fail(QKV_ERR_NOMEM, "cannot write %s: out of memory", path);
    }
    return QKV_OK;
}

qkv_status io_open_log(const char *path, int *fd) {
    /* O_TRUNC waits for the checks: a FIFO or a device must not be "emptied" either */
    qkv_status s = open_run_file(path, O_WRONLY | O_CREAT, fd);
    if (s == QKV_OK && ftruncate(*fd, 0) != 0) {
        int err = errno;
        close(*fd);
        return qkv_fail(QKV_ERR_IO, "cannot write %s: %s", path, strerror(err));
    }
    return s;
}

/* ---- the record a signal leaves ---- */

static char record_path[2][RUN_PATH_LEN], record_tmp[2][RUN_PATH_LEN + 40], /* ".tmp.PID.100" */
    record_text[2][32768];
static volatile sig_atomic_t record_current = -1;

void io_set_signal_record(const char *path, const char *text) {
    if (!text || strlen(text) >= sizeof record_text[0] || strlen(path) >= sizeof record_path[0]) {
        record_current = -1;
        return;
    }
    int next = record_current == 0 ? 1 : 0;
    memcpy(record_path[next], path, strlen(path) + 1);
    /* attempt 100: a name no atomic_open of this process uses, and one a resume removes */
    snprintf(record_tmp[next], sizeof record_tmp[next], "%s.tmp.%ld.100", path, (long)getpid());
    memcpy(record_text[next], text, strlen(text) + 1);
    record_current = next;
}

void io_write_signal_record(void) { /* async-signal-safe: open, write, fsync, rename */
    int r = record_current;
    if (r < 0) return;
    const char *tmp = record_tmp[r];
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) return;
    const char *p = record_text[r];
    size_t left = strlen(p);
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w <= 0) break;
        p += w;
        left -= (size_t)w;
    }
    bool whole = left == 0 && fsync(fd) == 0;
    close(fd);
    if (!whole || rename(tmp, record_path[r]) != 0) unlink(tmp);
}

bool io_absent(const char *path) {
    struct stat sb;
    return lstat(path, &sb) != 0 && (errno == ENOENT || errno == ENOTDIR);
}

qkv_status io_fopen_regular(const char *path, FILE **f) {
    int fd = -1;
    size_t size = 0;
    qkv_status s = io_open_regular(path, &fd, &size);
    if (s != QKV_OK) return s;
    if (!(*f = fdopen(fd, "r"))) {
        close(fd);
        return qkv_fail(QKV_ERR_NOMEM, "cannot read %s: out of memory", path);
    }
    return QKV_OK;
}
