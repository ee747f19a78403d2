/* test_grokking.c - the Fourier measures of src/model/fourier.c (the basis of Z/P, the norms
 * per frequency, the Gini coefficient, the key-frequency rule, the measures of a small modular
 * model against training's own evaluation) and the phases of src/train/grokking.c on
 * hand-made metric histories (docs/grokking.md). tests/fourier_numpy.py checks every measure
 * against numpy's FFT. */
#include "qkv.h"
#include "model/model.h"
#include "train/grokking.h"
#include "train/options.h"
#include "train/trainer.h"

#include "fixtures.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>

#define TWO_PI 6.28318530717958647692

/* The basis is orthonormal for odd and even moduli, and its rows are the constant, then the
 * cosine and sine of each frequency (the Nyquist term last for an even P). */
START_TEST(test_fourier_basis) {
    static const int moduli[] = {2, 3, 4, 7, 12, 113};
    for (size_t m = 0; m < sizeof moduli / sizeof moduli[0]; m++) {
        int P = moduli[m];
        double *b = malloc((size_t)P * P * sizeof *b);
        ck_assert_ptr_nonnull(b);
        fourier_basis(P, b);
        for (int r = 0; r < P; r++)
            for (int s = 0; s < P; s++) {
                double dot = 0;
                for (int x = 0; x < P; x++) dot += b[r * P + x] * b[s * P + x];
                ck_assert_msg(fabs(dot - (r == s)) < 1e-12, "P %d rows %d, %d: %g", P, r, s, dot);
            }
        for (int x = 0; x < P; x++) {
            ck_assert_double_eq_tol(b[x], 1 / sqrt(P), 1e-15);
            if (P > 2) ck_assert_double_eq_tol(b[P + x], sqrt(2.0 / P) * cos(TWO_PI * x / P), 1e-12);
            if (P > 2) ck_assert_double_eq_tol(b[2 * P + x], sqrt(2.0 / P) * sin(TWO_PI * x / P), 1e-12);
            if (P % 2 == 0) ck_assert_double_eq_tol(b[(P - 1) * P + x], (x % 2 ? -1 : 1) / sqrt(P), 1e-15);
        }
        ck_assert_int_eq(fourier_top_frequency(P), P / 2);
        free(b);
    }
}
END_TEST

/* A column of 3 cos(w_k x) + 4 sin(w_k x) has norm 5 sqrt(P/2) in frequency k and none
 * elsewhere; the Nyquist column (-1)^x has norm sqrt(P) in frequency P/2. */
START_TEST(test_fourier_norms) {
    for (int P = 9; P <= 10; P++) {
        int F = P / 2;
        double b[100], x[10 * 2], norm[6];
        fourier_basis(P, b);
        for (int t = 0; t < P; t++) {
            x[t * 2] = 3 * cos(TWO_PI * 2 * t / P) + 4 * sin(TWO_PI * 2 * t / P);
            x[t * 2 + 1] = P % 2 ? 0 : (t % 2 ? -1 : 1);
        }
        fourier_norms(b, P, x, 2, norm);
        double nyquist = P % 2 ? 0 : sqrt(P);
        for (int k = 0; k <= F; k++) {
            double want = k == 2 ? 5 * sqrt(P / 2.0) : 0;
            if (k == F) want = sqrt(want * want + nyquist * nyquist);
            ck_assert_msg(fabs(norm[k] - want) < 1e-12, "P %d k %d: %g, not %g", P, k, norm[k], want);
        }
    }
}
END_TEST

START_TEST(test_fourier_gini) {
    double equal[4] = {2, 2, 2, 2}, one[4] = {0, 0, 0, 4}, three[3] = {1, 2, 3}, zeros[2] = {0, 0};
    ck_assert_double_eq_tol(fourier_gini(equal, 4), 0, 1e-15);
    ck_assert_double_eq_tol(fourier_gini(one, 4), 0.75, 1e-15); /* (n - 1)/n */
    /* Σ|x_i - x_j| = 2 (1 + 2 + 1) = 8, over 2 n Σx = 36 */
    ck_assert_double_eq_tol(fourier_gini(three, 3), 8.0 / 36, 1e-15);
    ck_assert(isnan(fourier_gini(zeros, 2)));
}
END_TEST

/* A frequency is key when its squared norm is at least 4 times the median of frequencies
 * 1 .. P/2 and a tenth of the largest: none of a flat spectrum, the two that stand out, none
 * below P = 6, not a small one that stands out of a cleaned-up spectrum only. */
START_TEST(test_key_frequencies) {
    int keys[8];
    double flat[8] = {9, 1, 1.2, 0.9, 1, 1.1, 1, 0.95}; /* frequency 0 is not a candidate */
    ck_assert_int_eq(fourier_key_frequencies(flat, 15, keys), 0);
    double two[8] = {0, 1, 5, 1, 1.2, 1, 2.1, 0.9}; /* squares: 25 and 4.41 against 1 */
    ck_assert_int_eq(fourier_key_frequencies(two, 15, keys), 2);
    ck_assert_int_eq(keys[0], 2);
    ck_assert_int_eq(keys[1], 6);
    double at_ratio[4] = {0, 1, 2, 1}; /* 2² = 4 × the median 1: key */
    ck_assert_int_eq(fourier_key_frequencies(at_ratio, 7, keys), 1);
    ck_assert_int_eq(keys[0], 2);
    double small[3] = {1, 10, 0}; /* P = 5: the median of two is their mean */
    ck_assert_int_eq(fourier_key_frequencies(small, 5, keys), 0);
    /* after cleanup the unused frequencies are near 0: one 5 times the median but under a
     * tenth of the largest (3² = 9 < 12.1) is not key */
    double clean[8] = {0, 10, 0.1, 0.2, 3, 0.1, 11, 0.3};
    ck_assert_int_eq(fourier_key_frequencies(clean, 15, keys), 2);
    ck_assert_int_eq(keys[0], 1);
    ck_assert_int_eq(keys[1], 6);
}
END_TEST

/* The measures of a small modular model: the test loss and accuracy over every held-out pair
 * are training's own evaluation's, the sum of squared weights is the parameters', the logit
 * share of no key frequency is 0 and the excluded loss then the training loss over the number
 * outputs; each neuron has a cluster and a share in (0, 1]. */
START_TEST(test_measures_of_a_model) {
    train_options o;
    train_options_init(&o);
    o.task = "modular", o.modulus = 7, o.d_model = 16, o.mlp = 8, o.steps = 1;
    train_config c;
    ck_assert_int_eq(train_options_to_config(&o, true, &c), QKV_OK);
    c.model.dtype = QKV_F64;
    trainer t;
    ck_assert_int_eq(trainer_init(&t, &c), QKV_OK);
    fourier_measures f;
    ck_assert_int_eq(fourier_measure(&t.model, &t.cfg.task, t.eval_ctx, EVAL_BATCH, true, &f),
                     QKV_OK);
    eval_result r = trainer_evaluate(&t);
    ck_assert_double_eq_tol(f.test_loss, r.loss, 1e-12);
    ck_assert_double_eq_tol(f.test_acc, r.accuracy, 1e-15);
    double sq = 0;
    for (int i = 0; i < t.model.nparams; i++)
        for (int64_t j = 0; j < t.model.param[i]->size; j++)
            sq += qkv_get(t.model.param[i], j) * qkv_get(t.model.param[i], j);
    ck_assert_double_eq_tol(f.sum_squared_weights, sq, 1e-9 * sq);
    ck_assert_int_eq(f.neurons, 8);
    for (int u = 0; u < f.neurons; u++)
        if (f.neuron_cluster[u]) {
            ck_assert(f.neuron_cluster[u] >= 1 && f.neuron_cluster[u] <= 3);
            ck_assert(f.neuron_share[u] > 0 && f.neuron_share[u] <= 1 + 1e-12);
        }
    ck_assert(f.gini_embed >= 0 && f.gini_embed < 1);
    ck_assert(f.gini_neuron_logits >= 0 && f.gini_neuron_logits < 1);
    if (f.n_keys == 0) ck_assert_double_eq(f.logit_share, 0);
    ck_assert(isfinite(f.restricted_loss) && isfinite(f.excluded_loss));
    fourier_measures_free(&f);
    trainer_free(&t);
}
END_TEST

/* ---- the phases (docs/grokking.md, "The phases") on hand-made histories ---- */

/* A history of n evaluations 1000 steps apart, from arrays (NAN where unknown). */
static int history(grok_point *h, int n, const double *train_loss, const double *train_acc,
                   const double *test_loss, const double *test_acc, const double *restricted_acc) {
    for (int i = 0; i < n; i++)
        h[i] = (grok_point){.step = 1000 * i, .train_loss = train_loss[i], .train_acc = train_acc[i],
                            .test_loss = test_loss[i], .test_acc = test_acc[i],
                            .restricted_acc = restricted_acc[i]};
    return n;
}

/* The paper's story: memorized at 1000, the circuit alone right at 4000 while the test loss
 * is still high, generalized at 6000, cleaned up at 7000 (test loss 4e-7 <= 10 x 5e-8). */
START_TEST(test_phases_grokking) {
    grok_point h[9];
    double trl[9] = {3.4, 1e-3, 1e-7, 1e-7, 1e-7, 9e-8, 7e-8, 5e-8, 5e-8};
    double tra[9] = {0.03, 0.995, 1, 1, 1, 1, 1, 1, 1};
    double tel[9] = {3.5, 20, 25, 18, 9, 2, 1e-3, 4e-7, 2e-7};
    double tea[9] = {0.03, 0.02, 0.03, 0.05, 0.2, 0.8, 0.995, 1, 1};
    double rea[9] = {0.03, 0.03, 0.1, 0.5, 0.999, 1, 1, 1, 1};
    grok_phases p = grok_phases_of(h, history(h, 9, trl, tra, tel, tea, rea));
    ck_assert(p.generalized);
    ck_assert_int_eq(p.memorized, 1000);
    ck_assert_int_eq(p.formed, 4000);
    ck_assert_int_eq(p.generalized_at, 6000);
    ck_assert_int_eq(p.cleaned, 7000);
}
END_TEST

/* A run that memorizes and never generalizes: no circuit, no generalization, no cleanup. */
START_TEST(test_phases_memorizing) {
    grok_point h[5];
    double trl[5] = {3.4, 0.5, 1e-3, 1e-7, 1e-7}, tra[5] = {0.03, 0.8, 1, 1, 1};
    double tel[5] = {3.5, 8, 20, 40, 38}, tea[5] = {0.03, 0.01, 0, 0.005, 0.005};
    double rea[5] = {0.04, 0.04, 0.04, 0.03, 0.04};
    grok_phases p = grok_phases_of(h, history(h, 5, trl, tra, tel, tea, rea));
    ck_assert(!p.generalized);
    ck_assert_int_eq(p.memorized, 2000);
    ck_assert_int_eq(p.formed, -1);
    ck_assert_int_eq(p.generalized_at, -1);
    ck_assert_int_eq(p.cleaned, -1);
}
END_TEST

/* Stopped in the middle: the circuit formed (3000) but the run has not generalized yet; a
 * restricted accuracy of 99% before memorization ends does not count (1000). */
START_TEST(test_phases_formed_only) {
    grok_point h[5];
    double trl[5] = {3.4, 0.2, 1e-7, 1e-7, 1e-7}, tra[5] = {0.03, 0.9, 1, 1, 1};
    double tel[5] = {3.5, 8, 20, 15, 10}, tea[5] = {0.03, 0.2, 0.1, 0.3, 0.6};
    double rea[5] = {0.03, 0.995, 0.5, 0.992, 1};
    grok_phases p = grok_phases_of(h, history(h, 5, trl, tra, tel, tea, rea));
    ck_assert(!p.generalized);
    ck_assert_int_eq(p.memorized, 2000);
    ck_assert_int_eq(p.formed, 3000);
    ck_assert_int_eq(p.generalized_at, -1);
    ck_assert_int_eq(p.cleaned, -1);
}
END_TEST

/* Generalization counts from the first of the last evaluations at 99%: a test accuracy that
 * reached it (3000) and fell back does not; the test loss within 10 x the train loss before
 * then (the end of training, 2000) does not clean up; a loss that stays 20 x does not. */
START_TEST(test_phases_generalized_late) {
    grok_point h[7];
    double trl[7] = {3.4, 1e-6, 1e-6, 1e-6, 1e-6, 1e-6, 1e-6}, tra[7] = {0.03, 1, 1, 1, 1, 1, 1};
    double tel[7] = {3.5, 1, 5e-6, 0.1, 0.5, 2e-5, 2e-5}, tea[7] = {0.03, 0.5, 0.9, 0.995, 0.9, 0.999, 1};
    double rea[7] = {0.03, 0.999, 1, 1, 1, 1, 1};
    grok_phases p = grok_phases_of(h, history(h, 7, trl, tra, tel, tea, rea));
    ck_assert(p.generalized);
    ck_assert_int_eq(p.memorized, 1000);
    ck_assert_int_eq(p.formed, 1000);
    ck_assert_int_eq(p.generalized_at, 5000);
    ck_assert_int_eq(p.cleaned, -1);
}
END_TEST

/* Without the restricted accuracy (a mul run: NaN), generalization is still named, but not
 * the circuit's formation nor the cleanup that follows it; an empty history names nothing. */
START_TEST(test_phases_without_measures) {
    grok_point h[3];
    double trl[3] = {3.4, 1e-7, 1e-7}, tra[3] = {0.03, 1, 1};
    double tel[3] = {3.5, 1e-6, 2e-7}, tea[3] = {0.03, 1, 1};
    double rea[3] = {NAN, NAN, NAN};
    grok_phases p = grok_phases_of(h, history(h, 3, trl, tra, tel, tea, rea));
    ck_assert(p.generalized);
    ck_assert_int_eq(p.memorized, 1000);
    ck_assert_int_eq(p.generalized_at, 1000);
    ck_assert_int_eq(p.formed, -1);
    ck_assert_int_eq(p.cleaned, -1);
    p = grok_phases_of(h, 0);
    ck_assert(!p.generalized);
    ck_assert_int_eq(p.memorized + p.formed + p.generalized_at + p.cleaned, -4);
}
END_TEST

/* summary.json's object from a metrics table: the phases of its rows and the key
 * frequencies, null where a phase is not reached. */
START_TEST(test_grokking_json) {
    metrics_table m;
    metrics_init(&m, 1, 1);
    metrics_add_fourier_columns(&m);
    double tra[3] = {0.05, 1, 1}, tea[3] = {0.03, 0.5, 1}, rea[3] = {0.05, 1, 1};
    for (int i = 0; i < 3; i++) {
        double *s = metrics_new_scores(&m);
        ck_assert_ptr_nonnull(s);
        s[m.first_fourier_column + FOURIER_COL_TRAIN_ACC] = tra[i];
        s[m.first_fourier_column + FOURIER_COL_TRAIN_LOSS] = 1e-3;
        s[m.first_fourier_column + FOURIER_COL_RESTRICTED_ACC] = rea[i];
        metrics_add(&m, (metrics_row){.step = 500 * i, .heldout_acc = tea[i],
                                      .heldout_loss = i == 2 ? 5e-3 : 4, .scores = s});
    }
    int keys[2] = {4, 11};
    cJSON *j = grokking_json(&m, keys, 2);
    ck_assert_ptr_nonnull(j);
    char *text = cJSON_PrintUnformatted(j);
    ck_assert_str_eq(text, "{\"generalized\":true,\"memorization_end\":500,"
                           "\"circuit_formation_end\":500,\"generalization_step\":1000,"
                           "\"cleanup_end\":1000,\"key_frequencies\":[4,11]}");
    free(text);
    cJSON_Delete(j);
    j = grokking_json(&m, NULL, -1);
    ck_assert(cJSON_IsNull(cJSON_GetObjectItem(j, "key_frequencies")));
    cJSON_Delete(j);
    metrics_free(&m);
    metrics_init(&m, 1, 1); /* another task's table has no phases */
    ck_assert_ptr_null(grokking_json(&m, keys, 2));
}
END_TEST

static Suite *grokking_suite(void) {
    Suite *s = suite_create("grokking");
    TCase *tc = tcase_create("fourier");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_fourier_basis);
    tcase_add_test(tc, test_fourier_norms);
    tcase_add_test(tc, test_fourier_gini);
    tcase_add_test(tc, test_key_frequencies);
    tcase_add_test(tc, test_measures_of_a_model);
    suite_add_tcase(s, tc);
    TCase *phases = tcase_create("phases");
    tcase_add_test(phases, test_phases_grokking);
    tcase_add_test(phases, test_phases_memorizing);
    tcase_add_test(phases, test_phases_formed_only);
    tcase_add_test(phases, test_phases_generalized_late);
    tcase_add_test(phases, test_phases_without_measures);
    tcase_add_test(phases, test_grokking_json);
    suite_add_tcase(s, phases);
    return s;
}

int main(void) { return run_suite(grokking_suite()); }
