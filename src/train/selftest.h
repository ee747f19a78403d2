/* selftest.h - every SIMD path this CPU runs against the plain C path, bit for bit (qkv
 * selftest): each kernel family over shapes that reach every branch (kernels.h,
 * kernel_isa_check), then a short training of a 2-layer, 2-head model on both. */
#ifndef QKV_SELFTEST_H
#define QKV_SELFTEST_H

#include "qkv.h"

#define SELFTEST_MAX_PATHS 8
#define SELFTEST_STEPS 20 /* the training's steps */

typedef struct {
    char name[16];               /* "avx512", "avx2", "neon", "scalar" */
    bool native;                 /* runs on this CPU's own instructions, not emulated */
    bool same_bits;              /* every kernel case and the training agree with plain C */
    int cases;                   /* kernel cases that agreed (before the first difference) */
    char first_difference[320];  /* "" when same_bits; else the case and the first output */
} selftest_path;

typedef struct {
    selftest_path path[SELFTEST_MAX_PATHS]; /* best first, the plain C path last */
    int npaths;
    double seconds;
} selftest_result;

/* Checks every path this CPU runs (native, and emulated ones of this build) against the plain
 * C path; each path's result goes to `progress` (if not NULL) as soon as it is known. The
 * process's path is restored afterwards. QKV_OK when it ran (whatever it found); an error
 * status when the plain C reference itself could not be made, and QKV_ERR_NOMEM when a path's
 * kernel cases or training found no memory (no answer, never reported as a difference: the
 * paths checked before it stay in r). */
qkv_status selftest_run(selftest_result *r, void (*progress)(const selftest_path *, void *),
                        void *arg);
/* Whether every path agreed. */
bool selftest_passed(const selftest_result *r);

#endif
