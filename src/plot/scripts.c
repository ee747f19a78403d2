/* scripts.c - where the pictures of a run come from: the directory of qkv's scripts (the
 * gnuplot .gp files, the page template) and the steps a run kept snapshots of. The images
 * (plots.c) and the page (page.c) both read them. */
#include "engine/engine.h"
#include "plot/plot.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool plot_is_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* The installed scripts as seen from the installed binary; CMake passes the real one, from
 * CMAKE_INSTALL_BINDIR and CMAKE_INSTALL_DATADIR. */
#ifndef QKV_SCRIPTS_FROM_BIN
#define QKV_SCRIPTS_FROM_BIN "../share/qkv/scripts"
#endif

/* The directory holding attention.gp: $QKV_SCRIPTS if set, else next to the executable
 * (an install's share/qkv/scripts, or scripts/ beside it), else the source tree's scripts/. */
bool plot_find_scripts(char *out, size_t len) {
    char probe[PLOT_PATH_LEN + 64];
    const char *env = getenv("QKV_SCRIPTS");
    if (env && *env) {
        snprintf(out, len, "%s", env);
        snprintf(probe, sizeof probe, "%s/attention.gp", out);
        return plot_is_file(probe);
    }
    char exe[PLOT_PATH_LEN - 64]; /* room left for "/../share/qkv/scripts" in `out` */
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        const char *rel[] = {QKV_SCRIPTS_FROM_BIN, "scripts"};
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            snprintf(out, len, "%s/%s", exe, rel[i]);
            snprintf(probe, sizeof probe, "%s/attention.gp", out);
            if (plot_is_file(probe)) return true;
        }
    }
#ifdef QKV_SOURCE_DIR
    snprintf(out, len, "%s/scripts", QKV_SOURCE_DIR);
    snprintf(probe, sizeof probe, "%s/attention.gp", out);
    if (plot_is_file(probe)) return true;
#endif
    return false;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The steps N of DIR/snapshots/step<N>_layer1_head1.dat, sorted; returns how many (0 if none),
 * or -1 when out of memory. *steps is malloc'd. */
int plot_snapshot_steps(const char *dir, int64_t **steps) {
    *steps = NULL;
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        /* "step<N>_layer1_head1.dat", N digits (number_int's syntax: no sign, no space) */
        static const char prefix[] = "step", suffix[] = "_layer1_head1.dat";
        const char *name = e->d_name, *end = strstr(name, suffix);
        char digits[24];
        int64_t step;
        if (strncmp(name, prefix, 4) || !end || strcmp(end, suffix) ||
            end - name - 4 >= (ptrdiff_t)sizeof digits)
            continue;
        snprintf(digits, sizeof digits, "%.*s", (int)(end - name - 4), name + 4);
        if (digits[0] == '-' || number_int(digits, 0, INT64_MAX, &step) != NUMBER_OK) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            int64_t *p = realloc(*steps, (size_t)cap * sizeof *p);
            if (!p) {
                closedir(d);
                return -1;
            }
            *steps = p;
        }
        (*steps)[n++] = step;
    }
    closedir(d);
    qsort(*steps, (size_t)n, sizeof **steps, cmp_i64);
    return n;
}
