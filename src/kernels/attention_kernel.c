/* attention_kernel.c - which form the fused attention's backward pass takes (attention_form),
 * and the forms' names; whether the forward pass keeps P for it (attention_probs). The
 * kernels themselves are attention_kernel_f32.c and attention_kernel_f64.c, one body for both
 * (attention_kernel.inc). */
#include "kernels.h"
#include "qkv.h"

#include <string.h>

attention_form_kind attention_form = ATTENTION_FORM_D_FROM_P;

static const char *const attention_form_names[ATTENTION_FORM_COUNT + 1] = {
    [ATTENTION_FORM_LEGACY] = "legacy", [ATTENTION_FORM_SPLIT_L] = "split-l",
    [ATTENTION_FORM_WIDE_D] = "wide-d", [ATTENTION_FORM_D_FROM_P] = "d-from-p", NULL};

const char *attention_form_name(attention_form_kind form) {
    return form >= 0 && form < ATTENTION_FORM_COUNT ? attention_form_names[form] : "?";
}

const char *const *qkv_attention_forms(void) { return attention_form_names; }
const char *qkv_attention_form(void) { return attention_form_name(attention_form); }
bool qkv_set_attention_form(const char *name) { return attention_form_parse(name, &attention_form); }

/* The index of name among the first count of names, or -1. */
static int name_index(const char *const *names, int count, const char *name) {
    for (int i = 0; i < count; i++)
        if (!strcmp(name, names[i])) return i;
    return -1;
}

bool attention_form_parse(const char *name, attention_form_kind *form) {
    int f = name_index(attention_form_names, ATTENTION_FORM_COUNT, name);
    if (f >= 0) *form = (attention_form_kind)f;
    return f >= 0;
}

bool attention_backward_stores(const attention_dims *d) {
    return attention_form == ATTENTION_FORM_D_FROM_P && d->Nq > 0 && d->Nk > 0;
}

bool attention_few_keys_off = false;

bool attention_few_keys(const attention_dims *d, bool backward) {
    return !attention_few_keys_off && d->Nk >= 1 && d->Nk <= ATTENTION_FEW_KEYS && d->Nq >= 1 &&
           d->Nq <= ATTENTION_BR && (!backward || attention_form == ATTENTION_FORM_D_FROM_P);
}

size_t attention_few_floats(const attention_dims *d, bool backward) {
    /* forward: S, the output accumulator, m and l; backward: P, dP and 4 row terms */
    return (size_t)(backward ? 2 * d->Nq * d->Nk + 4 * d->Nq
                             : d->Nq * d->Nk + d->Nq * d->Dv + 2 * d->Nq);
}

attention_probs_kind attention_probs = ATTENTION_PROBS_AUTO;

static const char *const attention_probs_names[ATTENTION_PROBS_COUNT + 1] = {
    [ATTENTION_PROBS_AUTO] = "auto", [ATTENTION_PROBS_KEEP] = "keep",
    [ATTENTION_PROBS_RECOMPUTE] = "recompute", NULL};

static const char *attention_probs_name(attention_probs_kind kind) {
    return kind >= 0 && kind < ATTENTION_PROBS_COUNT ? attention_probs_names[kind] : "?";
}

const char *const *qkv_attention_probs_modes(void) { return attention_probs_names; }
const char *qkv_attention_probs(void) { return attention_probs_name(attention_probs); }
bool qkv_set_attention_probs(const char *name) {
    int k = name_index(attention_probs_names, ATTENTION_PROBS_COUNT, name);
    if (k >= 0) attention_probs = (attention_probs_kind)k;
    return k >= 0;
}

/* A kept P is written by the forward pass and read by the backward, layers later: past the
 * caches it costs more in memory traffic than the tile product and the exps it saves. Medium's
 * (8 MB a layer, 2× its operands) took 1.04× the step's time kept (the AVX-512 path; AVX2
 * forced: 1.01×), long's (16 MB a layer, 8× its operands; its step memory would double)
 * 1.02×; tiny's (128 KB a layer) 0.99× (AVX2: 0.98×): medians of pairs timed in turn, one
 * thread, on a 2-core Xeon of model 207 (docs/performance.md). So only a P that may stay in
 * cache is kept. */
size_t attention_kept_probs(const attention_dims *d, size_t elem_size) {
    if (attention_form != ATTENTION_FORM_D_FROM_P || attention_probs == ATTENTION_PROBS_RECOMPUTE)
        return 0;
    double probs = (double)d->G * (double)d->Nq * (double)d->Nk;
    if (probs == 0) return 0;
    if (attention_probs == ATTENTION_PROBS_KEEP) return (size_t)probs;
    double operands = (double)d->G * (double)((d->Nq + d->Nk) * (d->Dk + d->Dv)); /* q o k v */
    bool fits = probs <= ATTENTION_PROBS_PER_OPERANDS * operands &&
                probs * (double)elem_size <= (double)ATTENTION_PROBS_CEILING;
    return fits ? (size_t)probs : 0;
}
