/* grokking.c - a modular run's phases from its metrics history (docs/grokking.md, "The
 * phases"): a pure function of the history, and summary.json's "grokking" object. */
#include "train/grokking.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>

/* Cleanup begins after the last evaluation whose test accuracy is below this, before the run
 * generalized; it ends where the test loss and the restricted loss meet, within this
 * factor. */
#define GROK_FORMED_ACCURACY 0.1
#define GROK_MEET_FACTOR 2.0

grok_phases grok_phases_of(const grok_point *h, int n) {
    grok_phases p = {.memorized = -1, .generalized_at = -1, .formed = -1, .cleaned = -1};
    int mem = -1, gen = -1;
    for (int i = 0; i < n && mem < 0; i++)
        if (h[i].train_acc >= GROK_ACCURACY) mem = i;
    /* generalized: from an evaluation on, every test accuracy is at least GROK_ACCURACY */
    for (int i = n - 1; i >= 0 && h[i].test_acc >= GROK_ACCURACY; i--) gen = i;
    if (mem >= 0) p.memorized = h[mem].step;
    if (gen < 0) return p;
    p.generalized = true;
    p.generalized_at = h[gen].step;
    int formed = -1;
    for (int i = mem >= 0 ? mem : 0; i < gen; i++)
        if (h[i].test_acc < GROK_FORMED_ACCURACY) formed = i;
    if (formed >= 0) p.formed = h[formed].step;
    for (int i = gen; i < n; i++) {
        double t = h[i].test_loss, r = h[i].restricted_loss;
        if (t > 0 && r > 0 && t <= GROK_MEET_FACTOR * r && r <= GROK_MEET_FACTOR * t) {
            p.cleaned = h[i].step;
            break;
        }
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
    int n = 0;
    for (int i = 0; i < m->n; i++) {
        const metrics_row *r = &m->rows[i];
        const double *f = r->scores ? r->scores + m->first_fourier_column : NULL;
        h[n++] = (grok_point){.step = r->step, .test_acc = r->heldout_acc,
                              .test_loss = r->heldout_loss,
                              .train_acc = f ? f[FOURIER_COL_TRAIN_ACC] : NAN,
                              .restricted_loss = f ? f[FOURIER_COL_RESTRICTED] : NAN,
                              .excluded_loss = f ? f[FOURIER_COL_EXCLUDED] : NAN};
    }
    grok_phases p = grok_phases_of(h, n);
    free(h);
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    cJSON_AddBoolToObject(j, "generalized", p.generalized);
    add_step(j, "memorization_end", p.memorized);
    add_step(j, "circuit_formation_end", p.formed);
    add_step(j, "cleanup_end", p.cleaned);
    add_step(j, "generalization_step", p.generalized_at);
    if (n_keys >= 0) cJSON_AddItemToObject(j, "key_frequencies", cJSON_CreateIntArray(keys, n_keys));
    else cJSON_AddNullToObject(j, "key_frequencies");
    return j;
}
