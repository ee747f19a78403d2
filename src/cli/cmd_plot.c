/* cmd_plot.c - `qkv plot DIR`: draws what `qkv train --out DIR` saved, with the gnuplot scripts in
 * scripts/. qkv writes the data (attention/, gradients/, snapshots/, metrics.csv); gnuplot only
 * reads it, so the plots can be redrawn, restyled or made by hand from the same files.
 *
 * Every script is called as `gnuplot -c SCRIPT OUT FORMAT ARGS...` (ARG1 the image to write,
 * ARG2 png, svg or gif), inside the run directory, with the script and the image as open files
 * (run_script): no path is ever part of what gnuplot reads as code. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "cli.h"
#include "io/io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PATH_LEN 1200
#define MAX_FRAMES 40 /* snapshots beyond this are thinned out evenly: a GIF stays small */
#define HOLD_FRAMES 6 /* the last frame is repeated so that the final pattern can be seen */

/* ---- finding gnuplot (the scripts: plot_files.c) ---- */

static bool is_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* The first executable "gnuplot" in a directory of $PATH. */
static bool find_gnuplot(char *out, size_t len) {
    const char *path = getenv("PATH");
    if (!path) return false;
    for (const char *p = path; *p;) {
        const char *end = strchr(p, ':');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n > 0 && n < len - 16) {
            snprintf(out, len, "%.*s/gnuplot", (int)n, p);
            if (is_file(out) && access(out, X_OK) == 0) return true;
        }
        if (!end) break;
        p = end + 1;
    }
    return false;
}

/* ---- running one script ---- */

typedef struct {
    char gnuplot[PATH_LEN]; /* the executable */
    char scripts[PATH_LEN]; /* the directory of the .gp files */
    int written;            /* images made so far */
} plotter;

/* Finds gnuplot and the scripts. Without gnuplot: one line naming `data_dir`, where the data
 * files are, and *no_gnuplot is set. */
static int plotter_init(plotter *p, const char *data_dir, bool *no_gnuplot) {
    memset(p, 0, sizeof *p);
    *no_gnuplot = false;
    if (!find_gnuplot(p->gnuplot, sizeof p->gnuplot)) {
        cli_error("gnuplot not found; data files are in %s", data_dir);
        *no_gnuplot = true;
        return EXIT_FAILED;
    }
    /* gnuplot is started after a chdir (run_script): a relative directory of $PATH must be
     * made absolute first. */
    char *full = p->gnuplot[0] != '/' ? realpath(p->gnuplot, NULL) : NULL;
    if (full && strlen(full) < sizeof p->gnuplot) snprintf(p->gnuplot, sizeof p->gnuplot, "%s", full);
    free(full);
    if (!cli_find_scripts(p->scripts, sizeof p->scripts)) {
        cli_error("plot: cannot find the gnuplot scripts (attention.gp); set QKV_SCRIPTS to "
                  "qkv's scripts/ directory");
        return EXIT_IO;
    }
    return EXIT_OK;
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

/* Runs gnuplot on scripts/SCRIPT in directory `dir`, writing image `out` (a name relative to
 * dir) atomically. No byte of a path ever reaches gnuplot, which would read a name beginning
 * with '<' or '|' as a command to run: the child changes into `dir`, the data arguments are
 * the fixed relative names qkv chose (attention/layer1_head1.dat, ...), and the script and
 * the image are passed as open files, /dev/fd/3 and /dev/fd/4. The image is a temporary made
 * with O_EXCL (atomic_open), renamed over `out` only when gnuplot succeeded, so a failed or
 * interrupted plot never leaves a half-written image. Gnuplot's chatter goes to a scratch
 * file, shown (its last line) only when the script fails. */
static int run_script(plotter *p, const char *dir, const char *script, const char *out,
                      const char *format, int nargs, const char *const *args) {
    char gp[PATH_LEN + 64], target[2 * PATH_LEN];
    snprintf(gp, sizeof gp, "%s/%s", p->scripts, script);
    snprintf(target, sizeof target, "%s/%s", dir, out);
    int script_fd;
    size_t script_size;
    qkv_status s = io_open_regular(gp, &script_fd, &script_size);
    if (s != QKV_OK) {
        cli_error("plot: %s", qkv_last_error());
        return EXIT_IO;
    }
    atomic_file image;
    if ((s = atomic_open(&image, target)) != QKV_OK) {
        close(script_fd);
        cli_error("plot: %s", qkv_last_error());
        return cli_exit_for(s);
    }
    FILE *log = tmpfile();
    int sfd = fd_high(script_fd), ifd = fd_high(dup(fileno(image.f)));
    if (!log || sfd < 0 || ifd < 0) {
        cli_error("plot: cannot set up gnuplot's files: %s", strerror(errno));
        if (log) fclose(log);
        close(sfd >= 0 ? sfd : script_fd);
        if (ifd >= 0) close(ifd);
        atomic_abort(&image);
        return EXIT_IO;
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
        if (!waited)
            cli_error("plot: cannot run %s: %s", p->gnuplot, strerror(errno));
        else
            cli_error("plot: gnuplot failed on %s: %s", script, *msg ? msg : "no image was written");
        fclose(log);
        atomic_abort(&image);
        return EXIT_FAILED;
    }
    fclose(log);
    if ((s = atomic_commit(&image)) != QKV_OK) {
        cli_error("plot: %s", qkv_last_error());
        return cli_exit_for(s);
    }
    p->written++;
    return EXIT_OK;
}

int cli_gnuplot(const char *script, const char *dir, const char *out, const char *format,
                int nargs, const char *const *args, bool *no_gnuplot) {
    plotter p;
    int code = plotter_init(&p, dir, no_gnuplot);
    return code == EXIT_OK ? run_script(&p, dir, script, out, format, nargs, args) : code;
}

/* ---- what a training directory holds ---- */

/* Fails with one line unless `path` is a readable file. */
static bool need_file(const char *path) {
    if (is_file(path) && access(path, R_OK) == 0) return true;
    cli_error("plot: %s is missing (was it written by qkv train --out?)", path);
    return false;
}

/* Counts the data rows of metrics.csv (lines after the header). */
static int metrics_rows(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int lines = 0, c, last = '\n';
    while ((c = fgetc(f)) != EOF) {
        if (c == '\n') lines++;
        last = c;
    }
    fclose(f);
    return lines + (last != '\n') - 1;
}

/* Reads task, layers and heads from the model's metadata. */
static int read_model(const char *dir, char *task, size_t len, int *layers, int *heads,
                      bool *causal, double *chance_acc, double *chance_loss) {
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (!need_file(path)) return EXIT_IO;
    qkv_st *st;
    qkv_status s = qkv_st_load(path, &st);
    if (s != QKV_OK) {
        cli_error("plot: %s", qkv_last_error());
        return cli_exit_for(s);
    }
    const char *t = qkv_st_meta(st, "task"), *l = qkv_st_meta(st, "layers"),
               *h = qkv_st_meta(st, "heads");
    *layers = l ? atoi(l) : 0;
    *heads = h ? atoi(h) : 0;
    const char *c = qkv_st_meta(st, "causal");
    *causal = c && !strcmp(c, "true");
    /* Chance: a uniform guess over the classes a target can take (qkv_task_chance), and the
     * loss of uniform logits over the vocabulary. */
    const char *v = qkv_st_meta(st, "vocab"), *n = qkv_st_meta(st, "seq_len");
    qkv_task chance_task;
    if (t && v && n && qkv_task_init(&chance_task, t, atoi(n), atoi(v)) == QKV_OK) {
        *chance_acc = qkv_task_chance(&chance_task);
        *chance_loss = log((double)chance_task.vocab);
    }
    bool ok = t && *layers >= 1 && *layers <= QKV_MAX_LAYERS && *heads >= 1 &&
              *heads <= QKV_MAX_HEADS;
    if (ok) snprintf(task, len, "%s", t);
    qkv_st_free(st);
    if (!ok) {
        cli_error("plot: %s: not a qkv model (task, layers or heads missing)", path);
        return EXIT_FORMAT;
    }
    return EXIT_OK;
}

/* ---- a file of qkv inspect --out, drawn as a run is ---- */

/* Writes one (T, T) map of head h of `x` (H, T, T) as a gnuplot matrix (the format of a run's
 * attention/ files) to dir/rel. */
static int write_inspect_map(const char *dir, const char *rel, const qkv_tensor *x, int h,
                             const char *what, char (*labels)[40]) {
    char path[PATH_LEN + 64];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    int T = (int)x->shape[1];
    atomic_file af;
    qkv_status s = atomic_open(&af, path);
    if (s != QKV_OK) {
        cli_error("plot: %s", qkv_last_error());
        return cli_exit_for(s);
    }
    fprintf(af.f, "# qkv inspect: %s; rows are queries, columns keys\nquery\\key", what);
    for (int j = 0; j < T; j++) fprintf(af.f, " %s", labels[j]);
    fputc('\n', af.f);
    const float *m = (const float *)x->data + (size_t)h * T * T;
    for (int i = 0; i < T; i++) {
        fprintf(af.f, "%s", labels[i]);
        for (int j = 0; j < T; j++) fprintf(af.f, " %.6g", m[(size_t)i * T + j]);
        fputc('\n', af.f);
    }
    if ((s = atomic_commit(&af)) != QKV_OK) {
        cli_error("plot: %s", qkv_last_error());
        return cli_exit_for(s);
    }
    return EXIT_OK;
}

/* FILE (format qkv-inspect) -> the directory FILE without .safetensors (or FILE.d) holding
 * attention/ and, when the file has a target, gradients/, as a run directory does; the plots
 * then go to its plots/. */
static int plot_inspect_file(const char *file, char *dir, size_t len, plot_source *src) {
    qkv_st *st;
    qkv_status s = qkv_st_load(file, &st);
    if (s != QKV_OK) {
        cli_error("plot: %s", qkv_last_error());
        return cli_exit_for(s);
    }
    const char *fmt = qkv_st_meta(st, "format"), *task = qkv_st_meta(st, "task");
    const char *l = qkv_st_meta(st, "layers"), *h = qkv_st_meta(st, "heads");
    const char *t = qkv_st_meta(st, "seq_len"), *lab = qkv_st_meta(st, "labels");
    const char *causal = qkv_st_meta(st, "causal");
    int L = l ? atoi(l) : 0, H = h ? atoi(h) : 0, T = t ? atoi(t) : 0;
    bool ok = fmt && !strcmp(fmt, "qkv-inspect") && task && strlen(task) < sizeof src->task &&
              L >= 1 && L <= QKV_MAX_LAYERS && H >= 1 && H <= QKV_MAX_HEADS && T >= 1 &&
              T <= QKV_MAX_TASK_SEQ_LEN;
    for (int i = 1; ok && i <= L; i++) {
        char name[32];
        int64_t shape[QKV_MAX_DIMS];
        int nd;
        snprintf(name, sizeof name, "layer%d.weights", i);
        ok = qkv_st_info(st, name, NULL, &nd, shape) && nd == 3 && shape[0] == H &&
             shape[1] == T && shape[2] == T;
    }
    if (!ok) {
        cli_error("plot: %s is neither a directory of qkv train nor a file of qkv inspect --out",
                  file);
        qkv_st_free(st);
        return EXIT_FORMAT;
    }
    snprintf(src->task, sizeof src->task, "%s", task);
    src->layers = L, src->heads = H, src->causal = causal && !strcmp(causal, "true");
    src->inspect = true;
    /* The labels: "position:token" words, checked (they become gnuplot data); positions only
     * if they are not what qkv inspect wrote. */
    char (*labels)[40] = calloc((size_t)T, sizeof *labels);
    qkv_ctx *ctx = qkv_ctx_new(0);
    if (!labels || !ctx) {
        free(labels);
        qkv_ctx_free(ctx);
        qkv_st_free(st);
        cli_error("plot: out of memory");
        return EXIT_NOMEM;
    }
    const char *p = lab ? lab : "";
    for (int i = 0; i < T; i++) {
        size_t n = strcspn(p, " ");
        bool good = n > 0 && n < sizeof labels[i] && strspn(p, "0123456789:?abcdefghijklmnopqrstuvwxyz") >= n;
        if (good) snprintf(labels[i], sizeof labels[i], "%.*s", (int)n, p);
        else snprintf(labels[i], sizeof labels[i], "%d", i);
        p += n;
        p += strspn(p, " ");
    }
    size_t flen = strlen(file), suffix = strlen(".safetensors");
    if (flen > suffix && !strcmp(file + flen - suffix, ".safetensors"))
        snprintf(dir, len, "%.*s", (int)(flen - suffix), file);
    else
        snprintf(dir, len, "%s.d", file);
    char sub[PATH_LEN + 64];
    int code = cli_make_dirs("plot: ", dir) ? EXIT_OK : EXIT_IO;
    bool grads = qkv_st_info(st, "layer1.dA", NULL, NULL, NULL);
    if (code == EXIT_OK && ((s = io_make_subdir(dir, "attention", sub, sizeof sub)) != QKV_OK ||
                            (grads && (s = io_make_subdir(dir, "gradients", sub, sizeof sub)) != QKV_OK))) {
        cli_error("plot: %s", qkv_last_error());
        code = cli_exit_for(s);
    }
    qkv_tensor *x = qkv_zeros(ctx, QKV_F32, 3, (int64_t[]){H, T, T});
    const char *kinds[3] = {"weights", "dA", "dS"};
    for (int li = 1; li <= L && code == EXIT_OK; li++)
        for (int k = 0; k < (grads ? 3 : 1) && code == EXIT_OK; k++) {
            char name[32];
            snprintf(name, sizeof name, "layer%d.%s", li, kinds[k]);
            if ((s = qkv_st_read(st, name, x)) != QKV_OK) {
                cli_error("plot: %s", qkv_last_error());
                code = cli_exit_for(s);
                break;
            }
            for (int hi = 1; hi <= H && code == EXIT_OK; hi++) {
                char rel[64], what[96];
                if (k == 0) snprintf(rel, sizeof rel, "attention/layer%d_head%d.dat", li, hi);
                else snprintf(rel, sizeof rel, "gradients/layer%d_head%d_%s.dat", li, hi, kinds[k]);
                snprintf(what, sizeof what, "%s of layer %d, head %d", k ? kinds[k] : "attention",
                         li, hi);
                code = write_inspect_map(dir, rel, x, hi - 1, what, labels);
            }
        }
    for (int li = 1; !grads && li <= L && code == EXIT_OK; li++) /* none from an earlier file */
        for (int hi = 1; hi <= H; hi++)
            for (int k = 1; k < 3; k++) {
                snprintf(sub, sizeof sub, "%s/gradients/layer%d_head%d_%s.dat", dir, li, hi, kinds[k]);
                unlink(sub);
            }
    free(labels);
    qkv_ctx_free(ctx);
    qkv_st_free(st);
    return code;
}

/* Draws the maps of `dir` (attention/, gradients/, snapshots/, metrics.csv: a run directory,
 * or what plot_inspect_file wrote) into dir/plots/ with gnuplot. */
static int plot_maps(const char *dir, const plot_source *src, const char *format, bool verbose,
                     bool *no_gnuplot) {
    const char *task = src->task;
    int L = src->layers, H = src->heads, code;
    const char *causal = src->causal ? "1" : "0";
    const char *subject = src->inspect ? "the input of qkv inspect" : "the held-out example";
    plotter p;
    if ((code = plotter_init(&p, dir, no_gnuplot)) != EXIT_OK) return code;
    /* Names relative to dir for gnuplot (run_script), full paths for the checks here. */
    char plots[PATH_LEN], full[PATH_LEN + 64], out[64], a[64], da[64], ds[64], title[160];
    qkv_status s = io_make_subdir(dir, "plots", plots, sizeof plots);
    if (s != QKV_OK) {
        cli_error("plot: %s", qkv_last_error());
        return cli_exit_for(s);
    }
#define NEED(rel) (snprintf(full, sizeof full, "%s/%s", dir, rel), need_file(full))

    /* One heatmap per layer and head, and the overview of them all. */
    for (int l = 1; l <= L && code == EXIT_OK; l++)
        for (int h = 1; h <= H && code == EXIT_OK; h++) {
            snprintf(a, sizeof a, "attention/layer%d_head%d.dat", l, h);
            if (!NEED(a)) return EXIT_IO;
            snprintf(out, sizeof out, "plots/attention_layer%d_head%d.%s", l, h, format);
            snprintf(title, sizeof title, "%s: attention of layer %d, head %d", task, l, h);
            code = run_script(&p, dir, "attention.gp", out, format, 3,
                              (const char *[]){a, title, causal});
        }
    if (code != EXIT_OK) return code;
    char nl[16], nh[16];
    snprintf(nl, sizeof nl, "%d", L);
    snprintf(nh, sizeof nh, "%d", H);
    snprintf(out, sizeof out, "plots/overview.%s", format);
    code = run_script(&p, dir, "overview.gp", out, format, 6,
                      (const char *[]){"attention", task, nl, nh, causal, subject});
    if (code != EXIT_OK) return code;

    /* Loss and accuracy curves, when there is at least one row of metrics. */
    snprintf(full, sizeof full, "%s/metrics.csv", dir);
    if (metrics_rows(full) >= 1) {
        snprintf(out, sizeof out, "plots/curves.%s", format);
        char acc[32], loss[32];
        snprintf(acc, sizeof acc, "%.6g", src->chance_acc);
        snprintf(loss, sizeof loss, "%.6g", src->chance_loss);
        code = run_script(&p, dir, "curves.gp", out, format, 4,
                          (const char *[]){"metrics.csv", task, acc, loss});
        if (code != EXIT_OK) return code;
    }

    /* Gradients: A, dA and dS side by side, per layer and head. */
    for (int l = 1; l <= L && code == EXIT_OK; l++)
        for (int h = 1; h <= H && code == EXIT_OK; h++) {
            snprintf(da, sizeof da, "gradients/layer%d_head%d_dA.dat", l, h);
            snprintf(ds, sizeof ds, "gradients/layer%d_head%d_dS.dat", l, h);
            char full_ds[PATH_LEN + 64];
            snprintf(full, sizeof full, "%s/%s", dir, da);
            snprintf(full_ds, sizeof full_ds, "%s/%s", dir, ds);
            if (!is_file(full) && !is_file(full_ds)) continue; /* a directory from an older qkv */
            if (!NEED(da) || !NEED(ds)) return EXIT_IO;
            snprintf(a, sizeof a, "attention/layer%d_head%d.dat", l, h);
            snprintf(out, sizeof out, "plots/grads_layer%d_head%d.%s", l, h, format);
            snprintf(title, sizeof title, "%s: layer %d, head %d", task, l, h);
            code = run_script(&p, dir, "grads.gp", out, format, 6,
                              (const char *[]){a, da, ds, title, causal, subject});
        }
    if (code != EXIT_OK) return code;
#undef NEED

    /* The snapshots as an animated GIF: at most MAX_FRAMES evenly spaced steps, the first and
     * the last always among them, the last held for HOLD_FRAMES more frames. */
    char snap_dir[PATH_LEN + 16];
    snprintf(snap_dir, sizeof snap_dir, "%s/snapshots", dir);
    int64_t *steps;
    int n = cli_snapshot_steps(snap_dir, &steps);
    if (n < 0) {
        cli_error("plot: out of memory");
        return EXIT_NOMEM;
    }
    if (n > 0) {
        /* fewer frames for bigger grids: each frame draws every head */
        int max_frames = L * H <= 4 ? MAX_FRAMES : L * H <= 16 ? MAX_FRAMES / 2 : MAX_FRAMES / 4;
        int frames = n < max_frames ? n : max_frames;
        size_t len = (size_t)(frames + HOLD_FRAMES) * 24 + 1;
        char *list = malloc(len);
        if (!list) {
            free(steps);
            cli_error("plot: out of memory");
            return EXIT_NOMEM;
        }
        size_t used = 0;
        for (int f = 0; f < frames + HOLD_FRAMES; f++) {
            int i = f >= frames ? n - 1 : frames == 1 ? 0 : (int)((int64_t)f * (n - 1) / (frames - 1));
            used += (size_t)snprintf(list + used, len - used, "%s%" PRId64, f ? " " : "", steps[i]);
        }
        code = run_script(&p, dir, "snapshots.gp", "plots/snapshots.gif", "gif", 6,
                          (const char *[]){"snapshots", task, nl, nh, list, causal});
        free(list);
    }
    free(steps);
    if (code == EXIT_OK && verbose)
        printf("plots: %d images in %s\n", p.written, plots);
    return code;
}

int cli_plot(const char *dir, const char *format, bool verbose, bool *no_gnuplot) {
    *no_gnuplot = false;
    if (strlen(dir) > 900) {
        cli_error("plot: %s: path too long", dir);
        return EXIT_IO;
    }
    plot_source src = {0};
    char inspect_dir[PATH_LEN];
    struct stat sb;
    int code;
    if (stat(dir, &sb) == 0 && S_ISREG(sb.st_mode)) { /* a file of qkv inspect --out */
        if ((code = plot_inspect_file(dir, inspect_dir, sizeof inspect_dir, &src)) != EXIT_OK)
            return code;
        dir = inspect_dir;
    } else if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        cli_error("plot: %s is not a directory", dir);
        return EXIT_IO;
    } else if ((code = read_model(dir, src.task, sizeof src.task, &src.layers, &src.heads,
                                  &src.causal, &src.chance_acc, &src.chance_loss)) != EXIT_OK) {
        return code;
    }
    if (!strcmp(format, "html")) return cli_plot_html(dir, &src, verbose);
    return plot_maps(dir, &src, format, verbose, no_gnuplot);
}

typedef struct {
    const char *dir, *format;
} plot_args;

static int plot_parse(int argc, char **argv, plot_args *a) {
    static const char *const formats[] = {"png", "svg", "html", NULL};
    int format = 0;
    cli_option options[] = {
        {"format", CLI_CHOICE, &format, .choices = formats, .arg = "F",
         .help = "png (pngcairo) or svg; the animation is always a GIF; html writes\n"
                 "one interactive page, plots/attention.html (default png)"},
        {"help", CLI_HELP, .help = "show this help"},
        {0}};
    const cli_command cmd = {
        .name = "plot",
        .usage = "usage: qkv plot DIR [options]\n"
                 "       qkv plot FILE.safetensors [options]   (a file of qkv inspect --out: into FILE/)\n"
                 "Draws the plots of a directory written by `qkv train --out DIR` into DIR/plots/, with the\n"
                 "gnuplot scripts in scripts/ (found next to the executable, in the source tree, or in\n"
                 "$QKV_SCRIPTS):\n"
                 "  attention_layer<L>_head<H>   heatmap of the fixed held-out example's attention weights\n"
                 "  overview                     every layer x head in one grid\n"
                 "  curves                       loss and accuracy over the steps, train and held-out\n"
                 "  grads_layer<L>_head<H>       the weights A, their gradient dA and the scores' gradient dS\n"
                 "  snapshots.gif                the attention forming (train --snapshot-every K)\n"
                 "\n",
        .options = options,
        .column = 22,
        .epilog = "\n"
                  "Exit codes: 0 plotted, 1 gnuplot is not on PATH (the data files are untouched) or it\n"
                  "failed, 2 bad option, 3 DIR or one of its data files cannot be read, 4 the model file\n"
                  "is corrupt.\n",
        .operands = true};
    int dir;
    int code = cli_parse_options(&cmd, argc, argv, &dir);
    if (code != CLI_RUN) return code;
    a->format = formats[format];
    if (dir == argc) {
        cli_error("plot: which directory? (qkv plot DIR)");
        return EXIT_USAGE;
    }
    if (dir < argc - 1) {
        cli_error("plot: one directory only, got '%s' too", argv[dir + 1]);
        return EXIT_USAGE;
    }
    a->dir = argv[dir];
    return CLI_RUN;
}

int cmd_plot(int argc, char **argv, bool parse_only) {
    plot_args a;
    int code = plot_parse(argc, argv, &a);
    bool no_gnuplot;
    return code != CLI_RUN || parse_only ? code : cli_plot(a.dir, a.format, true, &no_gnuplot);
}
