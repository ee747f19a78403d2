/* util.c - messages, exit codes and strict value parsing for the qkv commands. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("qkv: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
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

bool cli_parse_int(const char *name, const char *text, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || errno) {
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
    if (*text == '-' || *text == '\0') {
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
    if (*text == '\0' || *end != '\0' || errno || !isfinite(v)) {
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
