/* util.c - messages, exit codes and strict value parsing for the qkv commands. */
#include "cli.h"
#include "engine/engine.h"
#include "io/io.h"
#include "io/paths.h"
#include "train/options.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *error_context; /* cli_error_context */

void cli_error_context(const char *context) { error_context = context; }

void cli_error(const char *fmt, ...) {
    /* One line whatever the values in it hold: control characters (a newline in an option's
     * value, say) are shown as '?'. */
    char small[512], *msg = small;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof small && (msg = malloc((size_t)n + 1)) != NULL) {
        va_start(ap, fmt);
        vsnprintf(msg, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    if (!msg) msg = small; /* out of memory: the message cut short */
    for (char *p = msg; *p; p++)
        if (iscntrl((unsigned char)*p)) *p = '?';
    if (error_context) {
        char context[256];
        snprintf(context, sizeof context, "%s", error_context);
        for (char *p = context; *p; p++)
            if (iscntrl((unsigned char)*p)) *p = '?';
        fprintf(stderr, "qkv: %s: %s\n", context, msg);
    } else {
        fprintf(stderr, "qkv: %s\n", msg);
    }
    if (msg != small) free(msg);
}

const char *cli_flag_of_field(const char *field) {
    /* "--seq-len" for each row of train's schema (train/options.c), made at the first call */
    enum { ROWS = 64, LEN = 40 };
    static char flags[ROWS][LEN];
    const train_option *r = train_option_of_field(field);
    size_t i = r ? (size_t)(r - train_option_table) : ROWS;
    if (i >= ROWS) return NULL;
    if (!flags[i][0]) snprintf(flags[i], LEN, "--%s", r->flag);
    return flags[i];
}

int cli_exit_for(qkv_status status) {
    switch (status) {
    case QKV_OK: return EXIT_OK;
    case QKV_ERR_IO: return EXIT_IO;
    case QKV_ERR_FORMAT:
    case QKV_ERR_MISMATCH: return EXIT_FORMAT;
    case QKV_ERR_VALUE: return EXIT_USAGE;
    case QKV_ERR_NOMEM: return EXIT_NOMEM;
    case QKV_ERR_NUMERIC: return EXIT_NUMERIC;
    }
    return EXIT_FAILED;
}

const char *const cli_dtype_names[] = {"f32", "f64", NULL};
_Static_assert(QKV_F32 == 0 && QKV_F64 == 1, "cli_dtype_names out of order");

/* Option values are read by the one syntax of engine/numbers.c: a number begins with a digit
 * (or, where allowed, one '-' and a digit), and the value must end where the number does. */
bool cli_parse_int(const char *name, const char *text, long lo, long hi, long *out) {
    int64_t v;
    number_read r = number_int(text, lo, hi, &v);
    if (r == NUMBER_BAD || (int64_t)(long)v != v) {
        cli_error("--%s: '%s' is not a whole number", name, text);
        return false;
    }
    if (r == NUMBER_RANGE) {
        cli_error("--%s: %lld is out of range (%ld..%ld)", name, (long long)v, lo, hi);
        return false;
    }
    *out = (long)v;
    return true;
}

bool cli_parse_u64(const char *name, const char *text, uint64_t *out) {
    if (number_u64(text, out) != NUMBER_OK) {
        cli_error("--%s: '%s' is not a non-negative whole number", name, text);
        return false;
    }
    return true;
}

bool cli_parse_double(const char *name, const char *text, double lo, double hi, bool lo_open,
                      double *out) {
    double v;
    if (number_real(text, &v) != NUMBER_OK) {
        cli_error("--%s: '%s' is not a finite number", name, text);
        return false;
    }
    if ((lo_open ? v <= lo : v < lo) || v > hi) {
        cli_error("--%s: %g is out of range (%s%g..%g)", name, v, lo_open ? "above " : "", lo, hi);
        return false;
    }
    *out = v;
    return true;
}

bool cli_model_path(const char *arg, char *out, size_t len) {
    struct stat sb;
    bool dir = stat(arg, &sb) == 0 && S_ISDIR(sb.st_mode);
    if ((size_t)snprintf(out, len, dir ? "%s/model.safetensors" : "%s", arg) >= len) {
        cli_error("%.200s...: path too long", arg);
        return false;
    }
    return true;
}

bool cli_make_dirs(const char *who, const char *dir) {
    if (io_make_dirs(dir) == QKV_OK) return true;
    cli_error("%s%s", who, qkv_last_error());
    return false;
}

/* ---- a command's outputs (cli.h, cli_check_outputs) ---- */

/* True, after one line, when output `out` already exists as the input `in` (under any name,
 * hard or symbolic link, "./x" for "x"). */
static bool output_is_input(const char *who, const cli_output *out, const char *in) {
    struct stat so, si;
    if (stat(out->path, &so) != 0 || stat(in, &si) != 0) return false; /* a new file is none */
    if (so.st_dev != si.st_dev || so.st_ino != si.st_ino) return false;
    cli_error("%s: --%s %s is the input %s: writing it would destroy what is being read", who,
              out->option, out->path, in);
    return true;
}

/* Where `path` puts its file: the device and inode of its directory, and its last name (what
 * the rename of atomic_commit replaces). False when the directory is not there. */
static bool place_of(const char *path, struct stat *dir, const char **name) {
    char d[FILE_PATH_LEN];
    const char *slash = strrchr(path, '/');
    *name = slash ? slash + 1 : path;
    if (!slash) return stat(".", dir) == 0;
    size_t len = (size_t)(slash - path);
    if (len >= sizeof d) return false;
    memcpy(d, path, len);
    d[len] = '\0';
    return stat(len ? d : "/", dir) == 0;
}

/* Whether outputs a and b would be one file: one that exists under both names (a hard or
 * symbolic link, "./x" for "x"), or, not there yet, one name in one directory ("d/../x"). */
static bool same_output(const char *a, const char *b) {
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    const char *na, *nb;
    if (place_of(a, &sa, &na) && place_of(b, &sb, &nb))
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino && !strcmp(na, nb);
    return !strcmp(a, b);
}

int cli_check_outputs(const char *who, const cli_output *outs, const char *const *inputs) {
    for (int i = 0; outs[i].option; i++) {
        if (!outs[i].path) continue;
        for (int k = 0; inputs && inputs[k]; k++)
            if (output_is_input(who, &outs[i], inputs[k])) return EXIT_USAGE;
        for (int j = 0; j < i; j++)
            if (outs[j].path && same_output(outs[j].path, outs[i].path)) {
                cli_error("%s: --%s %s and --%s %s are one file: each output needs its own", who,
                          outs[j].option, outs[j].path, outs[i].option, outs[i].path);
                return EXIT_USAGE;
            }
    }
    for (int i = 0; outs[i].option; i++) {
        qkv_status s = outs[i].path ? io_check_writable(outs[i].path) : QKV_OK;
        if (s != QKV_OK) {
            cli_error("%s: --%s: %s", who, outs[i].option, qkv_last_error());
            return cli_exit_for(s);
        }
    }
    return EXIT_OK;
}

bool cli_default_threads(long *threads) {
    *threads = 0;
    const char *omp = getenv("OMP_NUM_THREADS"), *slurm = getenv("SLURM_CPUS_PER_TASK");
    if ((omp && *omp) || !slurm || !*slurm) return true; /* OpenMP reads its own variable */
    int64_t n;
    if (number_int(slurm, 1, QKV_MAX_THREADS, &n) != NUMBER_OK) {
        cli_error("SLURM_CPUS_PER_TASK is '%s', not a number of threads (1..%d)", slurm,
                  QKV_MAX_THREADS);
        return false;
    }
    *threads = n;
    return true;
}

/* ---- the start-up probe of the SIMD path (cli.h) ---- */

bool cli_no_selftest;
static bool probe_armed;

void cli_arm_simd_probe(bool armed) { probe_armed = armed; }

void cli_simd_probe(void) {
    static bool probed;
    const char *skip = getenv("QKV_NO_SELFTEST"); /* set and not empty: as --no-selftest */
    if (!probe_armed || probed || (skip && *skip)) return;
    probed = true;
    char note[512];
    if (!qkv_simd_probe(note, sizeof note)) cli_error("warning: %s", note);
}
