/* jobs.c - a sweep's cells run: here, as child processes of this very program, N at a time;
 * or written out as one command per cell for GNU parallel, or as a Slurm job array (sweep.h).
 * Each runs the same `qkv train` command line. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "sweep/sweep.h"
#include "io/io.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EXIT_NOMEM_CELL 6       /* qkv's exit codes: out of memory, */
#define EXIT_INTERRUPTED_CELL 7 /* and a run stopped by a signal */

static volatile sig_atomic_t interrupted;
static void on_signal(int sig) { interrupted = sig; }

/* How long a cell locked by another qkv run is waited for (ms) before it is reported. */
#define CELL_LOCK_WAIT_MS 10000

/* Whether another qkv run still writes the cell `dir` after waiting for it: a cell of a
 * killed sweep stops at its SIGTERM (PR_SET_PDEATHSIG, below) once the checkpoint it is
 * writing is whole, which takes a moment; the sweep run again at once waits for that. */
static bool cell_still_locked(const char *dir) {
    for (long waited = 0; io_dir_locked(dir); waited += 20) {
        if (waited >= CELL_LOCK_WAIT_MS || interrupted) return true;
        nanosleep(&(struct timespec){.tv_nsec = 20 * 1000000L}, NULL);
    }
    return false;
}

typedef struct {
    pid_t pid;
    long cell;
    char *dir;
} running_cell;

/* Whether cell `dir` holds a run that an earlier try of this sweep left interrupted (a
 * killed sweep's cell stops at its SIGTERM) with a checkpoint: it is resumed from there,
 * which gives the bits of one run straight through, rather than trained again from step 0.
 * sweep.json has already matched, so the checkpoint's config is the cell's. */
static bool cell_resumable(const char *dir) {
    cJSON *j = NULL;
    sweep_cell_summary(dir, &j);
    const cJSON *status = j ? cJSON_GetObjectItemCaseSensitive(j, "status") : NULL;
    bool interrupted = cJSON_IsString(status) && !strcmp(status->valuestring, "interrupted");
    cJSON_Delete(j);
    char *model = interrupted ? sweep_path_join(dir, "model.safetensors") : NULL;
    struct stat sb;
    bool saved = model && lstat(model, &sb) == 0 && S_ISREG(sb.st_mode);
    free(model);
    return saved;
}

/* Starts `qkv train` for cell c into `dir`, its output in dir/train.log. */
static pid_t start_cell(const sweep *sw, const char *exe, long c, const char *dir) {
    const char **v;
    int n;
    /* The cell is a directory of the sweep's own, never a link planted in its place (it
     * would send the cell's run elsewhere); one that another qkv run is writing (another
     * sweep's, or a cell of a killed sweep that has not stopped within the wait) is left
     * alone, its log untouched. */
    char made[SYSTEM_PATH_LEN];
    const char *slash = strrchr(dir, '/');
    char parent[SYSTEM_PATH_LEN];
    snprintf(parent, sizeof parent, "%.*s", slash ? (int)(slash - dir) : 1, slash ? dir : ".");
    if (io_make_dirs(parent) != QKV_OK ||
        io_make_subdir(parent, slash ? slash + 1 : dir, made, sizeof made) != QKV_OK) {
        qkv_fail(QKV_ERR_IO, "sweep: %s", qkv_last_error());
        return -1;
    }
    if (cell_still_locked(dir)) {
        qkv_fail(QKV_ERR_IO, "sweep: %s is being written by another qkv run", dir);
        return -1;
    }
    bool resume = cell_resumable(dir);
    if (resume) { /* "train --resume DIR", the 5 words below (not --force), the NULL */
        v = malloc((3 + 5 + 1) * sizeof *v);
        if (v) v[0] = "train", v[1] = "--resume", v[2] = dir, n = 3;
    }
    if (resume ? !v : !sweep_cell_words(sw, c, &v, &n)) {
        qkv_fail(QKV_ERR_NOMEM, "out of memory");
        return -1;
    }
    v[n++] = "--out";
    v[n++] = dir;
    v[n++] = "--threads";
    v[n++] = "1";
    v[n++] = "--quiet";
    /* a cell neither done nor resumable is trained again, over what an earlier try left */
    if (!resume) v[n++] = "--force";
    v[n] = NULL;
    char *log = sweep_path_join(dir, "train.log");
    int fd = -1;
    qkv_status opened = log ? io_open_log(log, &fd) : qkv_fail(QKV_ERR_NOMEM, "out of memory");
    if (opened != QKV_OK) {
        qkv_fail(QKV_ERR_IO, "sweep: %s", qkv_last_error());
        free(log);
        free(v);
        return -1;
    }
    free(log);
    /* argv: "qkv" (the name train's messages start with), then w; the program is this very
     * executable */
    const char **args = malloc(((size_t)n + 2) * sizeof *args);
    if (!args) {
        close(fd);
        free(v);
        qkv_fail(QKV_ERR_NOMEM, "out of memory");
        return -1;
    }
    args[0] = "qkv";
    memcpy(args + 1, v, ((size_t)n + 1) * sizeof *args); /* with the NULL */
    fflush(stdout);
    fflush(stderr);
    pid_t parent_pid = getpid();
    pid_t pid = fork();
    if (pid == 0) {
#ifdef PR_SET_PDEATHSIG
        /* The cell ends with the sweep, however the sweep ends (SIGKILL too): SIGTERM, which
         * leaves its summary.json "interrupted" at the step on disk. (Linux; elsewhere a
         * killed sweep's cells run on, and the sweep run again waits for them.) */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent_pid) _exit(EXIT_INTERRUPTED_CELL); /* it died before that */
#else
        (void)parent_pid;
#endif
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        close(fd);
        execv(exe, (char *const *)args);
        if (errno == ENOMEM) { /* no room for the new program: said in the cell's log */
            static const char line[] = "qkv: out of memory starting qkv train\n";
            ssize_t w = write(STDERR_FILENO, line, sizeof line - 1);
            (void)w;
            _exit(EXIT_NOMEM_CELL);
        }
        _exit(127);
    }
    close(fd);
    free(args);
    free(v);
    if (pid < 0) qkv_fail(QKV_ERR_IO, "sweep: cannot start qkv train: %s", strerror(errno));
    return pid;
}

sweep_status sweep_run_here(const sweep *sw, long jobs, sweep_report report, void *user,
                            sweep_progress *out) {
    char exe[SYSTEM_PATH_LEN];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return qkv_fail(QKV_ERR_IO, "sweep: cannot find the qkv executable (/proc/self/exe): %s",
                        strerror(errno));
    exe[n] = '\0';
    /* the cells to run: those not done yet */
    long *todo = malloc((size_t)sw->ncells * sizeof *todo);
    running_cell *run = calloc((size_t)jobs, sizeof *run);
    if (!todo || !run) {
        free(todo);
        free(run);
        return qkv_fail(QKV_ERR_NOMEM, "out of memory");
    }
    long ntodo = 0, n_resumed = 0;
    for (long c = 0; c < sw->ncells; c++) {
        char name[SWEEP_CELL_NAME_MAX + 64];
        sweep_cell_name(sw, c, name, sizeof name);
        char *dir = sweep_path_join(sw->dir, name);
        if (!dir || !sweep_cell_done(dir, NULL)) {
            todo[ntodo++] = c;
            /* a cell of a killed sweep that is still stopping is waited for here, so that the
             * plan can say which cells resume */
            if (dir && !cell_still_locked(dir)) n_resumed += cell_resumable(dir);
        }
        free(dir);
    }
    sweep_progress *p = out;
    *p = (sweep_progress){.cells = sw->ncells, .done_before = sw->ncells - ntodo, .to_run = ntodo,
                          .resumed = n_resumed, .at_once = jobs < ntodo ? jobs : ntodo};
    report(SWEEP_PLANNED, sw, p, -1, NULL, 0, user);
    struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term, old_hup;
    sigemptyset(&sa.sa_mask);
    interrupted = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGHUP, &sa, &old_hup);
    long next = 0;
    int active = 0;
    sweep_status code = QKV_OK;
    while ((next < ntodo || active > 0)) {
        while (next < ntodo && active < jobs && !interrupted && code == QKV_OK) {
            char name[SWEEP_CELL_NAME_MAX + 64];
            sweep_cell_name(sw, todo[next], name, sizeof name);
            running_cell *slot = NULL;
            for (long j = 0; j < jobs && !slot; j++)
                if (run[j].pid == 0) slot = &run[j];
            slot->cell = todo[next++];
            slot->dir = sweep_path_join(sw->dir, name);
            slot->pid = slot->dir ? start_cell(sw, exe, slot->cell, slot->dir)
                                  : (qkv_fail(QKV_ERR_NOMEM, "out of memory"), -1);
            if (slot->pid < 0) { /* said now; the cells running are waited for */
                report(SWEEP_CELL_NOT_STARTED, sw, p, slot->cell, slot->dir, 0, user);
                free(slot->dir);
                *slot = (running_cell){0};
                code = SWEEP_NOT_STARTED;
            } else {
                active++;
            }
        }
        if (active == 0) break;
        int status;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0) {
            if (errno != EINTR) break;
            if (interrupted) /* pass it on; their ends are still waited for and reported */
                for (long j = 0; j < jobs; j++)
                    if (run[j].pid > 0) kill(run[j].pid, SIGTERM);
            continue;
        }
        for (long j = 0; j < jobs; j++) {
            if (run[j].pid != pid) continue;
            p->finished++;
            bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
            if (!ok) p->failed++;
            if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_NOMEM_CELL) p->failed_nomem++;
            report(SWEEP_CELL_ENDED, sw, p, run[j].cell, run[j].dir, status, user);
            free(run[j].dir);
            run[j] = (running_cell){0};
            active--;
        }
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGHUP, &old_hup, NULL);
    free(todo);
    free(run);
    if (interrupted) {
        qkv_fail(QKV_ERR_IO, "sweep: interrupted; run the same command again to finish the %ld "
                 "cells left", ntodo - p->finished + p->failed);
        return SWEEP_FAILED;
    }
    return code;
}

/* ---- scripts for GNU parallel and Slurm ---- */

/* Writes `word` for a POSIX shell: inside single quotes, where nothing is expanded ($(...),
 * backquotes, spaces and globs stay text); a ' itself is written '\''. */
static void shell_word(FILE *f, const char *word) {
    fputc('\'', f);
    for (const char *p = word; *p; p++)
        if (*p == '\'') fputs("'\\''", f);
        else fputc(*p, f);
    fputc('\'', f);
}

/* One cell's command: qkv train ... --out CELL_DIR then `threads` written as is (a number,
 * or the quoted expansion of SLURM_CPUS_PER_TASK). */
static bool write_command(FILE *f, const sweep *sw, const char *exe, const char *dir, long c,
                          const char *threads) {
    const char **v;
    int n;
    if (!sweep_cell_words(sw, c, &v, &n)) return false;
    char name[SWEEP_CELL_NAME_MAX + 64];
    sweep_cell_name(sw, c, name, sizeof name);
    char *cell_dir = sweep_path_join(dir, name);
    if (!cell_dir) {
        free(v);
        return false;
    }
    shell_word(f, exe);
    for (int i = 0; i < n; i++) {
        fputc(' ', f);
        shell_word(f, v[i]);
    }
    fputs(" --out ", f);
    shell_word(f, cell_dir);
    fprintf(f, " --threads %s --quiet --force", threads); /* a retried cell starts afresh */
    free(cell_dir);
    free(v);
    return true;
}

/* Refuses a control character (a newline would end a command line) in anything that goes
 * into a script. */
static bool printable(const char *what, const char *s) {
    for (const char *p = s; *p; p++)
        if (iscntrl((unsigned char)*p)) {
            qkv_fail(QKV_ERR_VALUE, "sweep: --emit: %s holds a control character: '%s'", what, s);
            return false;
        }
    return true;
}

qkv_status sweep_check_printable(const sweep *sw) {
    bool ok = printable("--out", sw->dir);
    for (int i = 0; ok && i < sw->nfixed; i++) ok = printable("an option after --", sw->fixed[i]);
    for (int p = 0; ok && p < sw->nparams; p++)
        for (int v = 0; ok && v < sw->param[p].n; v++)
            ok = printable("a value of the grid", sw->param[p].values[v]);
    return ok ? QKV_OK : QKV_ERR_VALUE;
}

qkv_status sweep_emit(const sweep *sw, const char *kind, char *written, size_t len) {
    char exe[SYSTEM_PATH_LEN];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char *dir = realpath(sw->dir, NULL);
    if (n <= 0 || !dir) {
        qkv_fail(QKV_ERR_IO, "sweep: cannot find %s: %s", n <= 0 ? "the qkv executable" : sw->dir,
                 strerror(errno));
        free(dir);
        return QKV_ERR_IO;
    }
    exe[n] = '\0';
    bool ok = printable("the qkv executable's path", exe) && printable("--out", dir);
    if (!ok) {
        free(dir);
        return QKV_ERR_VALUE;
    }
    bool slurm = !strcmp(kind, "slurm");
    char *path = sweep_path_join(sw->dir, slurm ? "sweep.sbatch" : "jobs.txt");
    atomic_file af;
    qkv_status s = path ? atomic_open(&af, path) : qkv_fail(QKV_ERR_NOMEM, "out of memory");
    if (s != QKV_OK) {
        qkv_fail(s, "sweep: %s", qkv_last_error());
        free(path);
        free(dir);
        return s;
    }
    if (slurm) {
        fprintf(af.f,
                "#!/bin/bash\n"
                "#SBATCH --job-name=qkv-sweep\n"
                "#SBATCH --array=0-%ld\n"
                "#SBATCH --cpus-per-task=1\n"
                "# A qkv sweep of %ld cells (written by qkv sweep --emit slurm; the grid is in\n"
                "# sweep.json beside this file). Array index k trains cell k with\n"
                "# SLURM_CPUS_PER_TASK threads. Submit: sbatch sweep.sbatch; then gather the\n"
                "# results: qkv sweep --collect DIR.\n"
                "set -eu\n"
                "case \"${SLURM_ARRAY_TASK_ID:-}\" in\n",
                sw->ncells - 1, sw->ncells);
        for (long c = 0; c < sw->ncells && ok; c++) {
            fprintf(af.f, "%ld) exec ", c);
            ok = write_command(af.f, sw, exe, dir, c, "\"${SLURM_CPUS_PER_TASK:-1}\"");
            fputs(" ;;\n", af.f);
        }
        fprintf(af.f, "*) echo \"sweep.sbatch: SLURM_ARRAY_TASK_ID must be 0..%ld\" >&2; exit 2 ;;\n"
                      "esac\n", sw->ncells - 1);
    } else {
        for (long c = 0; c < sw->ncells && ok; c++) {
            ok = write_command(af.f, sw, exe, dir, c, "1");
            fputc('\n', af.f);
        }
    }
    if (!ok) {
        atomic_abort(&af);
        free(path);
        free(dir);
        return qkv_fail(QKV_ERR_NOMEM, "out of memory");
    }
    if (slurm) af.mode = 0755; /* set on the file itself before its rename, never by name */
    if ((s = atomic_commit(&af)) != QKV_OK) {
        qkv_fail(s, "sweep: %s", qkv_last_error());
        free(path);
        free(dir);
        return s;
    }
    snprintf(written, len, "%s", path);
    free(path);
    free(dir);
    return QKV_OK;
}

