/* engine.h - what the engine offers the layers above it (model, io, train and the tools)
 * besides the public API: typed loops, the check of a programming error, the names of config
 * fields in messages, and the memory budget.
 * Users of the library never see it; the engine's own files share more (internal.h). */
#ifndef QKV_ENGINE_H
#define QKV_ENGINE_H

#include "qkv.h"

/* Runs the statements in __VA_ARGS__ with T bound to the C type of a float dtype, so that an
 * op's loops are written once and compiled for f32 and for f64. */
#define QKV_TYPED(dtype, ...)                                                             \
    do {                                                                                  \
        if ((dtype) == QKV_F32) {                                                         \
            typedef float T;                                                              \
            __VA_ARGS__                                                                   \
        } else {                                                                          \
            typedef double T;                                                             \
            __VA_ARGS__                                                                   \
        }                                                                                 \
    } while (0)

/* A programming error: print one line naming the op and the problem, then stop. Stays on in
 * release builds, because a wrong shape must never become a segfault or silent garbage. */
#define QKV_CHECK(cond, op, ...)                                                          \
    do {                                                                                  \
        if (!(cond)) qkv_die_(__FILE__, __LINE__, (op), __VA_ARGS__);                     \
    } while (0)
_Noreturn void qkv_die_(const char *file, int line, const char *op, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* t's shape as text, e.g. "(2, 3)", for QKV_CHECK messages: inside a check's arguments it
 * is formatted only when the check fails, into a buffer that lives to the end of the block. */
#define SHAPE(t) qkv_shape_str((t), (char[64]){0}, 64)

#define QKV_PI 3.14159265358979323846 /* C11's math.h names no π */

/* ---- errors (errors.c) ---- */
/* What a message calls config field `field` ("seq_len"): the field itself, or the name that a
 * front end gave it with qkv_set_field_names ("--seq-len"). */
const char *field_name(const char *field);

/* ---- tensors (tensor.c) ---- */
/* A leaf of ctx over x's data (no copy, no gradient): another owner for the same numbers
 * (model_replica gives each shard of a step the trainer's weights this way). */
qkv_tensor *tensor_share(qkv_ctx *ctx, const qkv_tensor *x);

/* ---- memory (memory.c) ---- */
/* The bytes qkv may plan for: the smallest of the physical memory, the cgroup's memory limit,
 * RLIMIT_AS, RLIMIT_DATA and a limit set with memory_limit_set. *what (if not NULL) names
 * which one it is, for messages ("this machine's memory", ...). */
double memory_limit(const char **what);
/* Lowers the limit for this process (0: no own limit): the fuzz targets and tests use it. */
void memory_limit_set(double bytes);
/* The unit of the sizes of a message about a limit of `limit` bytes: "GiB", or "MiB" under
 * 2 GiB (where a size in GiB would read 0.0); memory_in gives bytes in it. Every size of one
 * message takes the limit's unit. */
const char *memory_unit(double limit);
double memory_in(double bytes, double limit);

/* ---- numbers in text (numbers.c): the one syntax every reader of qkv holds a number to ----
 * Options, lists of heads and tokens, a sweep's grid, a model file's metadata: a number begins
 * with a digit, or with one '-' and a digit where a sign may stand (number_int, number_real).
 *   whole: digits                                       ("12", "007"; "-3" for number_int)
 *   real:  digits, then optionally '.' and digits, then optionally e or E, a sign and digits
 *          ("0.5", "1.", "1e-3"; not ".5", "+1", " 1", "1 ", "0x10", "inf", "nan")
 * The text must end where the number does. A value too large for its type, or a real that
 * overflows or underflows (1e999, 1e-999), is not a number either: NUMBER_BAD. */
typedef enum {
    NUMBER_OK,
    NUMBER_BAD,   /* not a number of this syntax (or beyond what the type holds) */
    NUMBER_RANGE, /* a number outside lo..hi: *out holds it, for the message */
} number_read;
/* An optional '-', then digits: a whole number in lo..hi. */
number_read number_int(const char *text, int64_t lo, int64_t hi, int64_t *out);
/* Digits only: a whole number of 0..2^64-1. */
number_read number_u64(const char *text, uint64_t *out);
/* A real number as above (an optional '-' first), finite. */
number_read number_real(const char *text, double *out);

#endif
