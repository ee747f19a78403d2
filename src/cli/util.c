/* util.c - messages, exit codes and strict value parsing for the qkv commands. */
#include "cli.h"
#include "io/io.h"
#include "train/options.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
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

/* strtol and its kin skip leading white space and take a sign: " -1" would pass a check
 * for '-' on the first byte and wrap to 2^64-1 in strtoull. Numbers here begin with a digit
 * (or, where allowed, one '-' and a digit). */
static bool starts_like_number(const char *text, bool sign) {
    if (sign && *text == '-') text++;
    return isdigit((unsigned char)*text) || (sign && *text == '.');
}

bool cli_parse_int(const char *name, const char *text, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (!starts_like_number(text, true) || *end != '\0' || errno) {
        cli_error("--%s: '%s' is not a whole number", name, text);
        return false;
    }
    if (v < lo || v > hi) {
        cli_error("--%s: %ld is out of range (%ld..%ld)", name, v, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_u64(const char *name, const char *text, uint64_t *out) {
    char *end;
    errno = 0;
    if (!starts_like_number(text, false)) {
        cli_error("--%s: '%s' is not a non-negative whole number", name, text);
        return false;
    }
    unsigned long long v = strtoull(text, &end, 10);
    if (*end != '\0' || errno) {
        cli_error("--%s: '%s' is not a non-negative whole number", name, text);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_double(const char *name, const char *text, double lo, double hi, bool lo_open,
                      double *out) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (!starts_like_number(text, true) || *end != '\0' || errno || !isfinite(v)) {
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

bool cli_output_clashes(const char *who, const char *out, const char *in) {
    /* The same file under any name: a hard link, a symbolic link, "./x" for "x". */
    struct stat so, si;
    if (stat(out, &so) != 0 || stat(in, &si) != 0) return false; /* a new file clashes with none */
    if (so.st_dev != si.st_dev || so.st_ino != si.st_ino) return false;
    cli_error("%s%s is the input %s: writing it would destroy what is being read", who, out, in);
    return true;
}

bool cli_default_threads(long *threads) {
    *threads = 0;
    const char *omp = getenv("OMP_NUM_THREADS"), *slurm = getenv("SLURM_CPUS_PER_TASK");
    if ((omp && *omp) || !slurm || !*slurm) return true; /* OpenMP reads its own variable */
    char *end;
    errno = 0;
    long n = strtol(slurm, &end, 10);
    if (*end != '\0' || errno || n < 1 || n > QKV_MAX_THREADS) {
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
