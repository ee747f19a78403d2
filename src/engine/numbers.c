/* numbers.c - numbers read from text, by one strict syntax (engine.h).
 *
 * strtol and its kin skip leading white space, take a '+' and read "0x10" and "inf": " -1"
 * passed a check for '-' on the first byte and wrapped to 2^64-1 in strtoull, and sscanf's
 * "%d" read 4294967297 as 1. Here the syntax is checked first, digit by digit, and the value
 * must fit its type; only then is a real number handed to strtod. */
#include "engine/engine.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Moves *p past a run of digits; whether there was at least one. */
static bool skip_digits(const char **p) {
    const char *start = *p;
    while (is_digit(**p)) (*p)++;
    return *p != start;
}

number_read number_u64(const char *text, uint64_t *out) {
    const char *end = text;
    if (!text || !skip_digits(&end) || *end) return NUMBER_BAD;
    uint64_t v = 0;
    for (const char *p = text; p < end; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) return NUMBER_BAD; /* past 2^64-1 */
        v = 10 * v + d;
    }
    *out = v;
    return NUMBER_OK;
}

number_read number_int(const char *text, int64_t lo, int64_t hi, int64_t *out) {
    if (!text) return NUMBER_BAD;
    bool negative = *text == '-';
    uint64_t magnitude;
    if (number_u64(text + negative, &magnitude) != NUMBER_OK) return NUMBER_BAD;
    uint64_t most = negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    if (magnitude > most) return NUMBER_BAD;
    int64_t v = !negative ? (int64_t)magnitude
                : magnitude == most ? INT64_MIN : -(int64_t)magnitude;
    *out = v;
    return v < lo || v > hi ? NUMBER_RANGE : NUMBER_OK;
}

number_read number_real(const char *text, double *out) {
    if (!text) return NUMBER_BAD;
    const char *p = text + (*text == '-');
    if (!skip_digits(&p)) return NUMBER_BAD; /* ".5", "+1", " 1", "inf" */
    if (*p == '.') {
        p++;
        skip_digits(&p);
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!skip_digits(&p)) return NUMBER_BAD;
    }
    if (*p) return NUMBER_BAD; /* "0x10", "1 ", "1,2" */
    errno = 0;
    char *end;
    double v = strtod(text, &end);
    if (end != p || errno == ERANGE || !isfinite(v)) return NUMBER_BAD;
    *out = v;
    return NUMBER_OK;
}
