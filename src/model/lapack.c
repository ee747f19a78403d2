/* lapack.c - LAPACK, loaded the first time an eigenvalue is needed (the copying scores of
 * circuits.c: qkv circuits, and the metrics rows of a training run), never at start-up.
 *
 * Why not linked: LAPACK is often OpenBLAS's (Debian's default alternative), a 30 MB library
 * that, loaded, starts a thread per core, each reserving a 128 MiB buffer and retrying
 * forever when it cannot; at exit the main thread waits for them. Linked into qkv, it made
 * every command (`qkv --version` too) hang under `ulimit -v` 64 to 128 MB, and fail in the
 * dynamic loader, before main and without a `qkv:` line, below that. Loaded here, a command
 * that needs no eigenvalue never maps it, and one that does gets a status: QKV_ERR_NOMEM when
 * the memory to load it is missing, QKV_ERR_IO when it cannot be found.
 *
 * The library is QKV_LAPACK_SONAME (CMakeLists.txt: the SONAME of pkg-config's lapack), found
 * as the dynamic loader finds any library (LD_LIBRARY_PATH, the system's alternatives). It is
 * loaded once (pthread_once); while it loads, the process's OPENBLAS_NUM_THREADS is "1". */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE */
#include "model/model.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#ifndef MAP_NORESERVE
#define MAP_NORESERVE 0
#endif
#ifndef QKV_LAPACK_SONAME
#error "QKV_LAPACK_SONAME (the LAPACK library to load) comes from CMakeLists.txt"
#endif

/* dgeev (column-major; the trailing lengths are those of the two one-letter strings, as
 * Fortran passes them). */
typedef void dgeev_fn(const char *jobvl, const char *jobvr, const int *n, double *a,
                      const int *lda, double *wr, double *wi, double *vl, const int *ldvl,
                      double *vr, const int *ldvr, double *work, const int *lwork, int *info,
                      size_t jobvl_len, size_t jobvr_len);

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static dgeev_fn *dgeev;
static bool openblas;        /* the library loaded is OpenBLAS's (or runs on it) */
static qkv_status load_status;
static char load_error[600]; /* the reason it could not be loaded */

/* OpenBLAS's blocked routines (dgeev from n = 75 on: dhseqr's multishift QR) take a buffer of
 * BUFFER_SIZE per thread (128 MiB on x86-64) the first time, and retry forever when the
 * address space has no room for it. Room for this much is checked first. */
#define OPENBLAS_BUFFER_ROOM ((size_t)160 << 20)
#define OPENBLAS_UNBLOCKED_BELOW 64 /* below dgeev's crossovers (75, 128), with a margin */
static _Thread_local bool openblas_buffer_held; /* this thread's buffer is taken */

/* The environment variable `name` set to `value` for the length of a call; the old value is
 * put back by env_restore. */
typedef struct {
    const char *name;
    char *old; /* NULL: it was not set */
} env_saved;

static env_saved env_set(const char *name, const char *value) {
    const char *old = getenv(name);
    env_saved e = {name, old ? strdup(old) : NULL};
    setenv(name, value, 1);
    return e;
}

static void env_restore(env_saved *e) {
    if (e->old) setenv(e->name, e->old, 1);
    else unsetenv(e->name);
    free(e->old);
}

static void load(void) {
    /* QKV_TEST_LAPACK=NAME loads NAME instead (tests: a library that is not there) */
    const char *name = getenv("QKV_TEST_LAPACK");
    if (!name || !*name) name = QKV_LAPACK_SONAME;
    /* One OpenBLAS thread: the matrices are (Dk, Dk), too small to share out, and no worker
     * thread then reserves a buffer (above) while loading. Put back after: the process's
     * environment, and its children's, stay as they were. */
    env_saved threads = env_set("OPENBLAS_NUM_THREADS", "1");
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    env_restore(&threads);
    if (!lib) {
        const char *why = dlerror();
        snprintf(load_error, sizeof load_error, "%s", why ? why : name);
        /* glibc says "failed to map segment from shared object" or "cannot allocate memory"
         * when the address space has no room for the library */
        bool memory = strstr(load_error, "map") || strstr(load_error, "allocate");
        load_status = memory ? QKV_ERR_NOMEM : QKV_ERR_IO;
        return;
    }
    /* a pointer to function from dlsym's void *: POSIX guarantees the conversion */
    void *sym = dlsym(lib, "dgeev_");
    memcpy(&dgeev, &sym, sizeof dgeev);
    if (!dgeev) {
        snprintf(load_error, sizeof load_error, "%s has no dgeev_", name);
        load_status = QKV_ERR_IO;
        return;
    }
    openblas = dlsym(lib, "openblas_get_config") != NULL;
    load_status = QKV_OK;
}

/* Whether the address space has room for OpenBLAS's buffer: a mapping of that size is made
 * and undone (writable and private, so that `ulimit -d` counts it as it counts the buffer). */
static bool room_for_openblas_buffer(void) {
    void *p = mmap(NULL, OPENBLAS_BUFFER_ROOM, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return false;
    munmap(p, OPENBLAS_BUFFER_ROOM);
    return true;
}

qkv_status lapack_dgeev(int n, double *a, double *wr, double *wi, double *work, int lwork,
                        int *info) {
    pthread_once(&load_once, load);
    if (load_status == QKV_ERR_NOMEM)
        return qkv_fail(QKV_ERR_NOMEM, "out of memory loading LAPACK (%s), which the copying "
                        "scores need", load_error);
    if (load_status != QKV_OK)
        return qkv_fail(load_status, "cannot load LAPACK, which the copying scores need: %s",
                        load_error);
    bool blocked = openblas && !openblas_buffer_held && n >= OPENBLAS_UNBLOCKED_BELOW;
    if (blocked && !room_for_openblas_buffer())
        return qkv_fail(QKV_ERR_NOMEM, "out of memory for LAPACK: OpenBLAS needs %zu MiB of "
                        "address space for the eigenvalues of a %d x %d matrix",
                        OPENBLAS_BUFFER_ROOM >> 20, n, n);
    int one = 1;
    double unused = 0;
    dgeev("N", "N", &n, a, &n, wr, wi, &unused, &one, &unused, &one, work, &lwork, info, 1, 1);
    if (blocked) openblas_buffer_held = true;
    return QKV_OK;
}
