/* rundir.c - the run directory's commit protocol (docs/errors.md, "Crash safety").
 *
 * A run directory holds one consistent step at every instant. model.safetensors is the
 * commit record: it is always written last, after metrics.csv and the attention maps of the
 * same step, and its metadata names how many rows of metrics.csv belong to it. Whatever a
 * kill leaves beyond it (metrics rows or snapshots of later steps, temporaries) is trimmed
 * when the run is opened again, and a resumed run then redoes those steps to the same bits.
 *
 * One run writes a directory at a time: rundir_open takes an exclusive lock (flock) on the
 * directory, so a second run is refused instead of interleaving its files. */
#include "io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* The subdirectories whose files qkv writes, besides the directory itself. */
static const char *const run_subdirs[] = {"",          "attention", "gradients",
                                          "snapshots", "plots",     "data"};

/* NAME.tmp.PID or NAME.tmp.PID.N: a temporary of atomic_open (or of an older qkv). */
static bool is_temporary(const char *name) {
    const char *t = strstr(name, ".tmp.");
    if (!t || t == name) return false;
    const char *p = t + 5;
    int dots = 0;
    if (*p < '0' || *p > '9') return false;
    for (; *p; p++)
        if (*p == '.' && dots == 0 && p[1] >= '0' && p[1] <= '9') dots++;
        else if (*p < '0' || *p > '9') return false;
    return true;
}

/* Removes the temporaries a killed run left in DIR and its subdirectories. Called with the
 * lock held, so none of them belongs to a run still writing. */
static void remove_temporaries(const char *dir) {
    char sub[RUN_FILE_PATH_LEN], path[RUN_ENTRY_PATH_LEN];
    for (size_t i = 0; i < sizeof run_subdirs / sizeof run_subdirs[0]; i++) {
        snprintf(sub, sizeof sub, *run_subdirs[i] ? "%s/%s" : "%s", dir, run_subdirs[i]);
        DIR *d = opendir(sub);
        if (!d) continue;
        for (struct dirent *e; (e = readdir(d));)
            if (is_temporary(e->d_name)) {
                snprintf(path, sizeof path, "%s/%s", sub, e->d_name);
                unlink(path);
            }
        closedir(d);
    }
}

void io_remove_stale_temporaries(const char *dir, const char *const *names) {
    DIR *d = opendir(dir);
    char path[RUN_ENTRY_PATH_LEN];
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!is_temporary(e->d_name)) continue;
        const char *t = strstr(e->d_name, ".tmp.");
        bool ours = false;
        for (const char *const *n = names; *n && !ours; n++)
            ours = strlen(*n) == (size_t)(t - e->d_name) && !strncmp(e->d_name, *n, strlen(*n));
        long pid = atol(t + 5);
        /* kill(pid, 0) fails with ESRCH only when no such process exists */
        if (!ours || pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 ||
            errno != ESRCH)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (lstat(path, &sb) == 0 && (S_ISREG(sb.st_mode) || S_ISLNK(sb.st_mode))) unlink(path);
    }
    if (d) closedir(d);
}

qkv_status io_make_dirs_noting(const char *dir, char *created, size_t len) {
    if (len > 0) created[0] = '\0';
    char path[SYSTEM_PATH_LEN];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        return qkv_fail(QKV_ERR_IO, "%.60s...: path too long", dir);
    if (!*dir) return qkv_fail(QKV_ERR_IO, "cannot create '': an empty name");
    /* each parent in turn, then the directory itself */
    size_t n = strlen(path);
    for (size_t i = 1; i <= n; i++) {
        if (path[i] != '/' && path[i] != '\0') continue;
        char c = path[i];
        path[i] = '\0';
        if (mkdir(path, 0777) == 0) {
            if (len > 0 && !created[0]) snprintf(created, len, "%s", path);
        } else if (errno != EEXIST) {
            int err = errno;
            if (len > 0) {
                io_unmake_dirs(dir, created, NULL);
                created[0] = '\0';
            }
            return qkv_fail(QKV_ERR_IO, "cannot create %s: %s", path, strerror(err));
        }
        path[i] = c;
    }
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return qkv_fail(QKV_ERR_IO, "%s exists and is not a directory", dir);
    return QKV_OK;
}

qkv_status io_make_dirs(const char *dir) { return io_make_dirs_noting(dir, NULL, 0); }

void io_unmake_dirs(const char *dir, const char *created, const char *const *names) {
    if (!created || !*created) return;
    char path[SYSTEM_PATH_LEN + 64];
    if (names) { /* only when nothing else is in DIR: what is there then is all the maker's */
        DIR *d = opendir(dir);
        bool others = false;
        for (struct dirent *e; d && (e = readdir(d)) && !others;) {
            bool known = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
            for (const char *const *n = names; *n && !known; n++) known = !strcmp(e->d_name, *n);
            others = !known;
        }
        if (d) closedir(d);
        if (others) return;
        for (const char *const *n = names; *n; n++) {
            snprintf(path, sizeof path, "%s/%s", dir, *n);
            struct stat sb;
            if (lstat(path, &sb) == 0 && !S_ISDIR(sb.st_mode)) unlink(path);
        }
    }
    /* DIR, then each parent up to the first directory created, while empty: deepest first
     * (one not made yet, by a maker that failed on the way, is passed over) */
    snprintf(path, sizeof path, "%s", dir);
    size_t keep = strlen(created);
    while (strlen(path) >= keep && (rmdir(path) == 0 || errno == ENOENT)) {
        char *slash = strrchr(path, '/');
        if (!slash) break;
        *slash = '\0';
    }
}

qkv_status rundir_open(rundir *rd, const char *dir) {
    memset(rd, 0, sizeof *rd);
    rd->lock_fd = -1;
    if ((size_t)snprintf(rd->dir, sizeof rd->dir, "%s", dir) >= sizeof rd->dir)
        return qkv_fail(QKV_ERR_IO, "%s: path too long", dir);
    /* Like mkdir -p. The first directory this call creates is remembered: a run that fails
     * before its first commit removes what it created, and leaves no empty --out behind. */
    qkv_status s = io_make_dirs_noting(dir, rd->created, sizeof rd->created);
    if (s != QKV_OK) {
        rundir_close(rd);
        return s;
    }
    rd->lock_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rd->lock_fd < 0 || flock(rd->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        /* Refused: what this call created may already be another run's (both made their
         * way through mkdir at once, the other locked first), so it is left alone. */
        rd->created[0] = '\0';
        rundir_close(rd);
        return err == EWOULDBLOCK
                   ? qkv_fail(QKV_ERR_IO, "%s is being written by another qkv run", dir)
                   : qkv_fail(QKV_ERR_IO, "cannot open %s: %s", dir, strerror(err));
    }
    /* Subdirectories that exist must be real ones, checked before anything is written: a
     * symbolic link there would lead the run's writes out of the directory. */
    struct stat sb;
    for (size_t i = 1; i < sizeof run_subdirs / sizeof run_subdirs[0]; i++) {
        char sub[RUN_FILE_PATH_LEN];
        snprintf(sub, sizeof sub, "%s/%s", dir, run_subdirs[i]);
        if (lstat(sub, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
            rundir_close(rd);
            return qkv_fail(QKV_ERR_IO, "%s exists and is not a directory%s", sub,
                            S_ISLNK(sb.st_mode) ? " (a symbolic link: qkv writes only inside "
                                                  "the run)" : "");
        }
    }
    remove_temporaries(dir);
    return QKV_OK;
}

/* The files of a run, by directory: names that begin with `prefix` and end with `suffix`. */
static const struct {
    const char *sub, *prefix, *suffix;
} run_file_names[] = {
    {"", "model.safetensors", ""}, {"", "metrics.csv", ""}, {"", "metrics.jsonl", ""},
    {"", "summary.json", ""},      {"attention", "layer", ".dat"},
    {"gradients", "layer", ".dat"}, {"snapshots", "step", ".dat"},
    {"plots", "", ".png"},         {"plots", "", ".svg"}, {"plots", "", ".gif"},
    {"plots", "", ".html"},        {"plots", "", ".pdf"},
    {"data", "train.tsv", ""},     {"data", "heldout.tsv", ""}, /* RUN_DATA_COPY, RUN_HELDOUT_COPY */
};

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

qkv_status rundir_claim(const rundir *rd, bool force) {
    char path[RUN_ENTRY_PATH_LEN];
    struct stat sb;
    /* another run is one that committed a checkpoint; what a run killed before its first
     * one left (metrics rows, snapshots, a summary) is removed without asking */
    snprintf(path, sizeof path, "%s/model.safetensors", rd->dir);
    bool other = lstat(path, &sb) == 0;
    if (other && !force)
        return qkv_fail(QKV_ERR_VALUE, "%s holds another run: give --force to replace it (its "
                        "files are removed), --resume %s to continue it, or another --out",
                        rd->dir, rd->dir);
    /* with the lock held: none of these is being written */
    for (size_t i = 0; i < sizeof run_subdirs / sizeof run_subdirs[0]; i++) {
        char sub[RUN_FILE_PATH_LEN];
        snprintf(sub, sizeof sub, *run_subdirs[i] ? "%s/%s" : "%s", rd->dir, run_subdirs[i]);
        DIR *d = opendir(sub);
        for (struct dirent *e; d && (e = readdir(d));) {
            bool ours = false;
            for (size_t k = 0; k < sizeof run_file_names / sizeof run_file_names[0]; k++)
                if (!strcmp(run_file_names[k].sub, run_subdirs[i]) &&
                    !strncmp(e->d_name, run_file_names[k].prefix,
                             strlen(run_file_names[k].prefix)) &&
                    ends_with(e->d_name, run_file_names[k].suffix) &&
                    (*run_file_names[k].suffix || !strcmp(e->d_name, run_file_names[k].prefix)))
                    ours = true;
            snprintf(path, sizeof path, "%s/%s", sub, e->d_name);
            /* a file this run reads (its data file, kept there by the user) stays */
            if (ours && lstat(path, &sb) == 0 && (S_ISREG(sb.st_mode) || S_ISLNK(sb.st_mode)) &&
                !io_is_protected(path))
                unlink(path);
        }
        if (d) closedir(d);
    }
    return QKV_OK;
}

bool io_dir_locked(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return false;
    bool locked = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd); /* releases it, if this call took it */
    return locked;
}

void rundir_checkpoint_begin(rundir *rd) {
    (void)rd;
    io_keep_begin();
}

void rundir_checkpoint_end(rundir *rd, bool committed) {
    if (committed) rd->committed = true;
    io_keep_end(!committed);
}

void rundir_trim_snapshots(const rundir *rd, int64_t step) {
    char sub[RUN_FILE_PATH_LEN], path[RUN_ENTRY_PATH_LEN];
    snprintf(sub, sizeof sub, "%s/snapshots", rd->dir);
    DIR *d = opendir(sub);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        int64_t s;
        if (sscanf(e->d_name, "step%" SCNd64 "_", &s) == 1 && s > step) {
            snprintf(path, sizeof path, "%s/%s", sub, e->d_name);
            unlink(path);
        }
    }
    closedir(d);
}

int64_t rundir_last_snapshot(const rundir *rd, int64_t step) {
    char sub[RUN_FILE_PATH_LEN], rest[32];
    snprintf(sub, sizeof sub, "%s/snapshots", rd->dir);
    int64_t last = -1;
    DIR *d = opendir(sub);
    for (struct dirent *e; d && (e = readdir(d));) {
        int64_t s;
        if (sscanf(e->d_name, "step%" SCNd64 "_%31s", &s, rest) == 2 &&
            !strcmp(rest, "layer1_head1.dat") && s <= step && s > last)
            last = s;
    }
    if (d) closedir(d);
    return last;
}

/* Removes the files directly in `dir` (not subdirectories) but `keep`, then `dir` itself if
 * it is empty. */
static void remove_files(const char *dir, const char *keep, bool and_dir) {
    char path[RUN_ENTRY_PATH_LEN];
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (keep && !strcmp(e->d_name, keep)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (lstat(path, &sb) == 0 && !S_ISDIR(sb.st_mode)) unlink(path);
    }
    if (d) closedir(d);
    if (and_dir) rmdir(dir);
}

void rundir_close(rundir *rd) {
    if (!rd->committed && rd->created[0]) {
        /* Nothing was committed to a directory this run created: everything in it is this
         * run's (the lock kept others out), written ahead of a commit that never came.
         * Remove it all but summary.json, which records how the run failed (a run that never
         * wrote one leaves nothing), and the directories created, deepest first: no empty or
         * half-made --out is left behind. */
        char path[sizeof rd->dir + 16];
        for (size_t i = sizeof run_subdirs / sizeof run_subdirs[0]; i-- > 0;) {
            snprintf(path, sizeof path, *run_subdirs[i] ? "%s/%s" : "%s", rd->dir, run_subdirs[i]);
            remove_files(path, i == 0 ? "summary.json" : NULL, i > 0);
        }
        io_unmake_dirs(rd->dir, rd->created, NULL);
    }
    if (rd->lock_fd >= 0) close(rd->lock_fd); /* releases the lock */
    rd->lock_fd = -1;
}
