/* gnuplot.c - running one gnuplot script of scripts/ on the data files of a directory.
 *
 * Every script is called as `gnuplot -c SCRIPT OUT FORMAT ARGS...` (ARG1 the image to write,
 * ARG2 png, svg or gif), inside the directory, with the script and the image as open files
 * (plotter_run): no path is ever part of what gnuplot reads as code. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "io/io.h"
#include "plot/plot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- finding gnuplot (the scripts: scripts.c) ---- */

/* The first executable "gnuplot" in a directory of $PATH. */
static bool find_gnuplot(char *out, size_t len) {
    const char *path = getenv("PATH");
    if (!path) return false;
    for (const char *p = path; *p;) {
        const char *end = strchr(p, ':');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n > 0 && n < len - 16) {
            snprintf(out, len, "%.*s/gnuplot", (int)n, p);
            if (plot_is_file(out) && access(out, X_OK) == 0) return true;
        }
        if (!end) break;
        p = end + 1;
    }
    return false;
}

/* ---- running one script ---- */

plot_status plotter_init(plotter *p, const char *data_dir) {
    memset(p, 0, sizeof *p);
    if (!find_gnuplot(p->gnuplot, sizeof p->gnuplot)) {
        qkv_fail(QKV_ERR_IO, "gnuplot not found; data files are in %s", data_dir);
        return PLOT_NO_GNUPLOT;
    }
    /* gnuplot is started after a chdir (plotter_run): a relative directory of $PATH must be
     * made absolute first. */
    char *full = p->gnuplot[0] != '/' ? realpath(p->gnuplot, NULL) : NULL;
    if (full && strlen(full) < sizeof p->gnuplot) snprintf(p->gnuplot, sizeof p->gnuplot, "%s", full);
    free(full);
    if (!plot_find_scripts(p->scripts, sizeof p->scripts))
        return qkv_fail(QKV_ERR_IO, "plot: cannot find the gnuplot scripts (attention.gp); set "
                                    "QKV_SCRIPTS to qkv's scripts/ directory");
    return QKV_OK;
}

/* The last non-empty line of f (gnuplot's error message), into buf. */
static void last_line(FILE *f, char *buf, size_t len) {
    char line[512];
    buf[0] = '\0';
    rewind(f);
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[strspn(line, " \t^")] != '\0') snprintf(buf, len, "%s", line);
    }
}

/* Moves fd to a number of at least 10, out of the way of the 3 and 4 the child dups into. */
static int fd_high(int fd) {
    int high = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    if (high >= 0) close(fd);
    return high;
}

/* No byte of a path ever reaches gnuplot, which would read a name beginning with '<' or '|'
 * as a command to run: the child changes into `dir`, the data arguments are
 * the fixed relative names qkv chose (attention/layer1_head1.dat, ...), and the script and
 * the image are passed as open files, /dev/fd/3 and /dev/fd/4. The image is a temporary made
 * with O_EXCL (atomic_open), renamed over `out` only when gnuplot succeeded, so a failed or
 * interrupted plot never leaves a half-written image. Gnuplot's chatter goes to a scratch
 * file, shown (its last line) only when the script fails. */
plot_status plotter_run(plotter *p, const char *dir, const char *script, const char *out,
                        const char *format, int nargs, const char *const *args) {
    char gp[sizeof p->scripts + 64], target[2 * sizeof p->scripts];
    snprintf(gp, sizeof gp, "%s/%s", p->scripts, script);
    snprintf(target, sizeof target, "%s/%s", dir, out);
    int script_fd;
    size_t script_size;
    qkv_status s = io_open_regular(gp, &script_fd, &script_size);
    if (s != QKV_OK) return qkv_fail(QKV_ERR_IO, "plot: %s", qkv_last_error());
    atomic_file image;
    if ((s = atomic_open(&image, target)) != QKV_OK) {
        close(script_fd);
        return qkv_fail(s, "plot: %s", qkv_last_error());
    }
    FILE *log = tmpfile();
    int sfd = fd_high(script_fd), ifd = fd_high(dup(fileno(image.f)));
    if (!log || sfd < 0 || ifd < 0) {
        qkv_fail(QKV_ERR_IO, "plot: cannot set up gnuplot's files: %s", strerror(errno));
        if (log) fclose(log);
        close(sfd >= 0 ? sfd : script_fd);
        if (ifd >= 0) close(ifd);
        atomic_abort(&image);
        return QKV_ERR_IO;
    }
    const char *argv[16] = {"gnuplot", "-c", "/dev/fd/3", "/dev/fd/4", format};
    int argc = 5;
    for (int i = 0; i < nargs && argc < 15; i++) argv[argc++] = args[i];
    argv[argc] = NULL;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        if (chdir(dir) != 0 || dup2(sfd, 3) < 0 || dup2(ifd, 4) < 0) _exit(126);
        dup2(fileno(log), STDOUT_FILENO);
        dup2(fileno(log), STDERR_FILENO);
        execv(p->gnuplot, (char *const *)argv);
        _exit(127);
    }
    close(sfd);
    int status = 0;
    bool waited = pid > 0 && waitpid(pid, &status, 0) == pid;
    struct stat sb;
    bool ok = waited && WIFEXITED(status) && WEXITSTATUS(status) == 0 && fstat(ifd, &sb) == 0 &&
              sb.st_size > 0;
    close(ifd);
    if (!ok) {
        char msg[512];
        last_line(log, msg, sizeof msg);
        /* gnuplot, or the dynamic loader before it, out of the memory qkv's limit (ulimit -v,
         * which gnuplot inherits) leaves: qkv's own lack of memory, exit 6 */
        bool memory = waited && (strstr(msg, "failed to map segment") ||
                                 strstr(msg, "annot allocate memory") ||
                                 strstr(msg, "ut of memory"));
        if (!waited)
            qkv_fail(QKV_ERR_IO, "plot: cannot run %s: %s", p->gnuplot, strerror(errno));
        else if (memory)
            qkv_fail(QKV_ERR_NOMEM, "plot: out of memory: gnuplot could not run %s: %s", script,
                     msg);
        else
            qkv_fail(QKV_ERR_IO, "plot: gnuplot failed on %s: %s", script,
                     *msg ? msg : "no image was written");
        fclose(log);
        atomic_abort(&image);
        return memory ? QKV_ERR_NOMEM : PLOT_GNUPLOT_FAILED;
    }
    fclose(log);
    if ((s = atomic_commit(&image)) != QKV_OK) return qkv_fail(s, "plot: %s", qkv_last_error());
    p->written++;
    return QKV_OK;
}

plot_status plot_script(const char *script, const char *dir, const char *out, const char *format,
                        int nargs, const char *const *args) {
    plotter p;
    plot_status s = plotter_init(&p, dir);
    return s == QKV_OK ? plotter_run(&p, dir, script, out, format, nargs, args) : s;
}
