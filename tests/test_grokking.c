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
 * 1 .. P/2: none of a flat spectrum, the two that stand out, none below P = 6. */
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
    return s;
}

int main(void) { return run_suite(grokking_suite()); }
