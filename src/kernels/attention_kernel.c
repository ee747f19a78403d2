/* attention_kernel.c - which form the fused attention's backward pass takes (attention_form),
 * and the forms' names. The kernels themselves are attention_kernel_f32.c and
 * attention_kernel_f64.c, one body for both (attention_kernel.inc). */
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

bool attention_form_parse(const char *name, attention_form_kind *form) {
    for (int f = 0; f < ATTENTION_FORM_COUNT; f++)
        if (!strcmp(name, attention_form_names[f])) {
            *form = (attention_form_kind)f;
            return true;
        }
    return false;
}

bool attention_backward_stores(const attention_dims *d) {
    return attention_form == ATTENTION_FORM_D_FROM_P && d->Nq > 0 && d->Nk > 0;
}
