/* memory.c - how much memory qkv may plan for. Models and training steps are checked against
 * it before anything large is allocated, so that a config too big for the machine fails with
 * one clear message instead of an out-of-memory kill halfway through. */
#include "engine/internal.h"

#include <sys/resource.h>
#include <unistd.h>

static double limit_set; /* bytes; 0: none (memory_limit_set) */

void memory_limit_set(double bytes) { limit_set = bytes > 0 ? bytes : 0; }

/* A number of bytes from a one-line file such as a cgroup's memory.max; -1 when the file is
 * missing or says "max" (no limit). */
static double read_bytes(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[64];
    double v = -1;
    if (fgets(line, sizeof line, f)) {
        char *end;
        unsigned long long n = strtoull(line, &end, 10);
        if (end != line && (*end == '\n' || *end == '\0')) v = (double)n;
    }
    fclose(f);
    return v;
}

/* The memory limit of the cgroup this process is in (v2 memory.max, or v1
 * memory.limit_in_bytes), looked up from /proc/self/cgroup; -1 if none. */
static double cgroup_limit(void) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[512], path[700];
    double limit = -1;
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *rel = NULL;
        if (!strncmp(line, "0::", 3)) {
            rel = line + 3;
            snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", rel);
        } else if ((rel = strstr(line, ":memory:")) != NULL) {
            rel += 8;
            snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", rel);
        } else {
            continue;
        }
        double v = read_bytes(path);
        if (v > 0 && (limit < 0 || v < limit)) limit = v;
    }
    if (f) fclose(f);
    /* Inside a container the cgroup root is often the container's own cgroup. */
    const char *roots[] = {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        double v = read_bytes(roots[i]);
        if (v > 0 && (limit < 0 || v < limit)) limit = v;
    }
    return limit;
}

double memory_limit(const char **what) {
    const char *why = "this machine's memory";
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double have = pages > 0 && page > 0 ? (double)pages * (double)page : 1e18;
    double cg = cgroup_limit();
    if (cg > 0 && cg < have) {
        have = cg;
        why = "the cgroup's memory limit";
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (double)rl.rlim_cur < have) {
        have = (double)rl.rlim_cur;
        why = "the address-space limit (ulimit -v)";
    }
    if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (double)rl.rlim_cur < have) {
        have = (double)rl.rlim_cur;
        why = "the data-size limit (ulimit -d)";
    }
    if (limit_set > 0 && limit_set < have) {
        have = limit_set;
        why = "the memory limit set for qkv";
    }
    if (what) *what = why;
    return have;
}

const char *memory_unit(double limit) { return limit >= 2.0 * (1 << 30) ? "GiB" : "MiB"; }

double memory_in(double bytes, double limit) {
    return bytes / (limit >= 2.0 * (1 << 30) ? 1 << 30 : 1 << 20);
}
