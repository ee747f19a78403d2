/* errors.c - what qkv says when something fails: the last error of a call that returns a
 * status (qkv_fail), the names of a config's fields in it, and the one line of a misuse before
 * it aborts (QKV_CHECK). Every other file of the library may call it; it calls none. */
#include "engine/internal.h"

#include <stdarg.h>

static _Thread_local char last_error[1024];

const char *qkv_last_error(void) { return last_error; }

qkv_status qkv_fail(qkv_status status, const char *fmt, ...) {
    /* Format into a copy first: an argument may be qkv_last_error() itself, as in
     * qkv_fail(s, "%s: %s", path, qkv_last_error()), and vsnprintf must not overlap. A
     * message too long for the buffer (a path of 4000 characters) keeps its beginning and its
     * end, where the reason is, and loses the middle of the path to "...". */
    char msg[8192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1;
    if (len < sizeof last_error) {
        memcpy(last_error, msg, len + 1);
    } else {
        size_t head = 200, tail = sizeof last_error - head - 4;
        memcpy(last_error, msg, head);
        memcpy(last_error + head, "...", 3);
        memcpy(last_error + head + 3, msg + len - tail, tail + 1);
    }
    return status;
}

static const char *(*field_names)(const char *field); /* qkv_set_field_names */

void qkv_set_field_names(const char *(*names)(const char *field)) { field_names = names; }

const char *field_name(const char *field) {
    const char *name = field_names ? field_names(field) : NULL;
    return name ? name : field;
}

void qkv_die_(const char *file, int line, const char *op, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "qkv: %s: ", op);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " [%s:%d]\n", file, line);
    va_end(ap);
    abort();
}

