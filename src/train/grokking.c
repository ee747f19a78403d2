/* grokking.c - a modular run's phases from its metrics history (docs/grokking.md, "The
 * phases"): a pure function of the history, and summary.json's "grokking" object. */
#include "train/grokking.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>

grok_phases grok_phases_of(const grok_point *h, int n) {
    grok_phases p = {.memorized = -1, .formed = -1, .generalized_at = -1, .cleaned = -1};
    int mem = -1, formed = -1, gen = -1;
    for (int i = 0; i < n && mem < 0; i++)
        if (h[i].train_acc >= GROK_ACCURACY) mem = i;
    /* the circuit formed: the key frequencies alone (the restricted logits) compute the
     * held-out pairs, once the training pairs are memorized */
    for (int i = mem; i >= 0 && i < n && formed < 0; i++)
        if (h[i].restricted_acc >= GROK_ACCURACY) formed = i;
    /* generalized: every evaluation from gen to the last */
    for (int i = n - 1; i >= 0 && h[i].test_acc >= GROK_ACCURACY; i--) gen = i;
    if (mem >= 0) p.memorized = h[mem].step;
    if (formed >= 0) p.formed = h[formed].step;
    if (gen >= 0) p.generalized_at = h[gen].step, p.generalized = true;
    /* cleaned up: the held-out pairs are predicted about as well as the training pairs, the
     * memorization gone */
    for (int i = formed > gen ? formed : gen; formed >= 0 && gen >= 0 && i < n; i++)
        if (h[i].test_loss <= GROK_CLEAN_RATIO * h[i].train_loss) {
            p.cleaned = h[i].step;
            break;
        }
    return p;
}

static void add_step(cJSON *j, const char *key, int64_t step) {
    if (step >= 0) cJSON_AddNumberToObject(j, key, (double)step);
    else cJSON_AddNullToObject(j, key);
}

cJSON *grokking_json(const metrics_table *m, const int *keys, int n_keys) {
    if (m->first_fourier_column < 0) return NULL;
    grok_point *h = malloc((size_t)(m->n ? m->n : 1) * sizeof *h);
    if (!h) return NULL;
    for (int i = 0; i < m->n; i++) {
        const metrics_row *r = &m->rows[i];
        const double *f = r->scores ? r->scores + m->first_fourier_column : NULL;
        h[i] = (grok_point){.step = r->step, .test_loss = r->heldout_loss,
                            .test_acc = r->heldout_acc,
                            .train_loss = f ? f[FOURIER_COL_TRAIN_LOSS] : NAN,
                            .train_acc = f ? f[FOURIER_COL_TRAIN_ACC] : NAN,
                            .restricted_acc = f ? f[FOURIER_COL_RESTRICTED_ACC] : NAN};
    }
    grok_phases p = grok_phases_of(h, m->n);
    free(h);
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    cJSON_AddBoolToObject(j, "generalized", p.generalized);
    add_step(j, "memorization_end", p.memorized);
    add_step(j, "circuit_formation_end", p.formed);
    add_step(j, "generalization_step", p.generalized_at);
    add_step(j, "cleanup_end", p.cleaned);
    if (n_keys >= 0) cJSON_AddItemToObject(j, "key_frequencies", cJSON_CreateIntArray(keys, n_keys));
    else cJSON_AddNullToObject(j, "key_frequencies");
    return j;
}
