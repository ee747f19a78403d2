/* guard.c - what the operating system may do to a running qkv, answered in one place:
 *   - SIGINT, SIGTERM, SIGHUP: remove the temporaries being written, print one `qkv:` line
 *     (with the run's last checkpoint, when a run is going) and exit EXIT_INTERRUPTED;
 *   - SIGXFSZ (a file grew past `ulimit -f`): ignored, so the write fails with EFBIG and qkv
 *     reports it as any other failed write (exit EXIT_IO, the temporary removed);
 *   - threads that cannot be started (`ulimit -v` leaves no room for their stacks): found
 *     before OpenMP tries, which would print its own message and exit;
 *   - the main thread's stack, grown at start while `ulimit -v` leaves room for it, so that
 *     a deep call later is never a SIGSEGV;
 *   - other programs on the cores: by default, only the cores they leave free get a thread. */
#include "cli.h"
#include "io/io.h"

#include <dirent.h>
#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* The note a signal prints after "interrupted by SIG...": two buffers, so that the handler
 * always reads a whole one while the other is being written. */
static char notes[2][RUN_PATH_LEN + 100]; /* a line naming a run directory */
static volatile sig_atomic_t note_current = -1;

void cli_set_interrupt_note(const char *fmt, ...) {
    int next = note_current == 0 ? 1 : 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(notes[next], sizeof notes[next], fmt, ap);
    va_end(ap);
    for (char *p = notes[next]; *p; p++)
        if ((unsigned char)*p < 32) *p = '?';
    note_current = next;
}

void cli_clear_interrupt_note(void) { note_current = -1; }

static void put(const char *s) { /* async-signal-safe */
    for (size_t n = strlen(s); n > 0;) {
        ssize_t w = write(STDERR_FILENO, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

/* While a checkpoint's commit record is being saved, a signal waits (held) until the note
 * names it: otherwise a signal just after its rename would name the checkpoint before it. */
static volatile sig_atomic_t held, pending;
/* Whether stderr is a terminal, known before any signal (isatty is no signal-safe call): there
 * a Ctrl-C leaves "^C" on the line, which the message begins after; a file gets no empty line. */
static volatile sig_atomic_t stderr_terminal;

static void on_signal(int sig) {
    if (held) {
        pending = sig;
        return;
    }
    io_remove_temporaries();
    io_write_signal_record(); /* summary.json: "interrupted", at the step on disk */
    if (sig == SIGINT && stderr_terminal) put("\n");
    put(sig == SIGINT ? "qkv: interrupted by SIGINT"
        : sig == SIGTERM ? "qkv: interrupted by SIGTERM" : "qkv: interrupted by SIGHUP");
    int note = note_current;
    if (note >= 0) {
        put("; ");
        put(notes[note]);
    }
    put("\n");
    _exit(EXIT_INTERRUPTED);
}

void cli_guard_hold(void) { held = 1; }

void cli_guard_release(void) {
    held = 0;
    if (pending) on_signal(pending);
}

/* ---- the main thread's stack ----
 * The main thread's stack grows as calls go deeper, and a growth that the address-space
 * limit (ulimit -v) refuses is SIGSEGV, not a failed malloc: by then the heap may have taken
 * the room (a training's first evaluation, 200 KB deep, did under 10 MB). So under such a
 * limit the stack is grown to STACK_RESERVE at start; the kernel never shrinks it back. The
 * deepest command measured, train, reaches 236 KB. */
#define STACK_RESERVE ((size_t)1 << 20)

/* Reads one byte of each page of STACK_RESERVE below this frame, from the top down: each
 * read lies within a page of the stack's end, which the kernel then extends (a read maps the
 * zero page: no memory is used). */
static void __attribute__((noinline)) grow_stack(void) {
    volatile char pages[STACK_RESERVE];
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (size_t top = sizeof pages; top >= page; top -= page) (void)pages[top - 1];
}

/* This process's address space in bytes (Linux), or -1. */
static double address_space(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    bool ok = f && fscanf(f, "%lu", &pages) == 1;
    if (f) fclose(f);
    return ok ? (double)pages * (double)sysconf(_SC_PAGESIZE) : -1;
}

int cli_guard_install(void) {
    struct rlimit as, stack;
    bool stack_fits = getrlimit(RLIMIT_STACK, &stack) != 0 || stack.rlim_cur == RLIM_INFINITY ||
                      stack.rlim_cur >= STACK_RESERVE + (64 << 10);
    if (stack_fits && getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
        double used = address_space();
        if (used >= 0 && used + STACK_RESERVE + (64 << 10) > (double)as.rlim_cur) {
            cli_error("out of memory: the address-space limit (ulimit -v %llu) leaves no room "
                      "for qkv's stack (%zu KB beyond the %.0f KB it holds at start)",
                      (unsigned long long)(as.rlim_cur >> 10), STACK_RESERVE >> 10,
                      used / 1024);
            return EXIT_NOMEM;
        }
        grow_stack();
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    stderr_terminal = isatty(STDERR_FILENO);
    sa.sa_handler = on_signal;
    sigfillset(&sa.sa_mask); /* one handler at a time */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGXFSZ, SIG_IGN);
    return EXIT_OK;
}

/* ---- threads ---- */

/* How many of this process's threads are running (state R): /proc/self/task/<id>/stat. */
static int own_running_tasks(void) {
    DIR *dir = opendir("/proc/self/task");
    int n = 0;
    for (struct dirent *e; dir && (e = readdir(dir));) {
        char path[64], line[512];
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "/proc/self/task/%.20s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (f && fgets(line, sizeof line, f)) {
            const char *close = strrchr(line, ')'); /* the name may hold spaces and ')' */
            n += close && close[1] == ' ' && close[2] == 'R';
        }
        if (f) fclose(f);
    }
    if (dir) closedir(dir);
    return n > 0 ? n : 1; /* this thread runs, reading */
}

/* How many cores other programs keep busy now: the fewest tasks running but this process's
 * own over up to five looks a millisecond apart at /proc/loadavg's running count (its fourth
 * field, "running/total"), so that a program running for a moment is not counted. 0 where
 * the file cannot be read (no /proc). */
static int cores_busy_elsewhere(void) {
    int fewest = -1;
    for (int look = 0; look < 5; look++) {
        FILE *f = fopen("/proc/loadavg", "r");
        int running = 0;
        if (!f) return 0;
        int read = fscanf(f, "%*s %*s %*s %d/", &running);
        fclose(f);
        if (read != 1) return 0;
        int others = running - own_running_tasks();
        if (fewest < 0 || others < fewest) fewest = others;
        if (fewest <= 0) break;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    return fewest > 0 ? fewest : 0;
}

static bool threads_follow_load = true;

void cli_threads_ignore_load(void) { threads_follow_load = false; }

static pthread_mutex_t probe_gate = PTHREAD_MUTEX_INITIALIZER;

static void *probe_thread(void *arg) {
    free(malloc(64)); /* a thread's first malloc may reserve an arena: part of its cost */
    pthread_mutex_lock(&probe_gate); /* held by the prober until every thread is up */
    pthread_mutex_unlock(&probe_gate);
    return arg;
}

/* How many of n threads (this one counted) qkv may run. n - 1 threads are started with the
 * default attributes, as OpenMP starts its own, held until all are up, then joined. Under an
 * address-space limit (ulimit -v) they may take no more than half of it, with what the
 * process already holds: the other half is what qkv's memory checks plan data for. */
static int startable_threads(int n) {
    struct rlimit lim;
    double limit = getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY
                       ? (double)lim.rlim_cur : -1;
#if defined(__GLIBC__) && defined(M_ARENA_MAX)
    /* glibc gives a thread that mallocs while another holds the lock an arena of its own,
     * reserving 64 MB of address space each, up to 8 per core: how many depends on timing,
     * so the space the probe measures would not be the space the run takes. Under a limit,
     * every thread shares one arena (warm steps allocate nothing: no speed is lost). */
    if (limit > 0) mallopt(M_ARENA_MAX, 1);
#endif
    double before = address_space(), during = before;
    pthread_t th[QKV_MAX_THREADS];
    int made = 0;
    pthread_mutex_lock(&probe_gate);
    while (made < n - 1 && made < QKV_MAX_THREADS && pthread_create(&th[made], NULL, probe_thread, NULL) == 0)
        made++;
    if (made > 0) during = address_space();
    pthread_mutex_unlock(&probe_gate);
    for (int i = 0; i < made; i++) pthread_join(th[i], NULL);
    int can = made + 1;
    if (limit > 0 && before > 0 && made > 0 && during > before) {
        double each = (during - before) / made, room = limit / 2 - before;
        int fit = 1 + (room > 0 ? (int)(room / each) : 0);
        if (fit < can) can = fit;
    }
    return can;
}

int cli_set_threads(long requested) {
    if (!qkv_has_openmp()) return EXIT_OK; /* one thread, whatever was asked */
    int want = requested > 0 ? (int)requested : qkv_threads();
    const char *omp = getenv("OMP_NUM_THREADS");
    if (requested <= 0 && threads_follow_load && !(omp && *omp)) {
        /* by default, the cores that other programs leave free (at least one): a thread that
         * shares its core with another program holds up every thread that waits for it */
        int free_cores = want - cores_busy_elsewhere();
        want = free_cores > 1 ? free_cores : 1;
    }
    int can = want > 1 ? startable_threads(want) : 1;
    if (can < want && requested > 0) {
        cli_error("cannot start %d threads, only %d: the address-space limit (ulimit -v) or the "
                  "process limit (ulimit -u) leaves no room for more (each thread's stack and "
                  "heap take address space); lower --threads", want, can);
        return EXIT_NOMEM;
    }
    qkv_set_threads(can); /* by default, as many as can start: results do not depend on it */
    return EXIT_OK;
}
