/* test_circuits.c - the circuits of src/model/circuits.c on hand-built weights, whose circuits and
 * scores are known exactly: a head whose OV circuit is the identity copies (score 1), its
 * negation writes against the token (-1), a rotation has complex eigenvalues, each head reads
 * its own columns of W_V and rows of W_O, and composition is 1 for aligned heads and 0 for
 * heads that read what the other never writes. (scripts/circuits_torch.py checks trained
 * models against PyTorch.) */
#include "qkv.h"

#include "fixtures.h"
#include "model/model.h"

#include <math.h>
#include <string.h>

enum { C = 4 }; /* vocab = d_model = 4: tok_emb and head.w can be the identity */

/* A model of `layers` layers and `heads` heads of width 4, every weight 0. */
static void zero_model(qkv_model *m, qkv_dtype dt, int layers, int heads) {
    qkv_model_config cfg = {.vocab = C, .seq_len = 3, .d_model = C, .heads = heads,
                            .layers = layers, .residual = true, .init_scale = 1, .dtype = dt};
    ck_assert_int_eq(qkv_model_init(m, &cfg, 1), QKV_OK);
    for (int i = 0; i < m->nparams; i++)
        for (int64_t k = 0; k < m->param[i]->size; k++) qkv_set(m->param[i], k, 0);
}

/* w (C, C) = s · the identity. */
static void identity(qkv_tensor *w, double s) {
    for (int i = 0; i < C; i++) qkv_set(w, i * C + i, s);
}

/* One head, tok_emb = head.w = W_V = I, W_O = sign · I: OV = sign · I, every eigenvalue sign. */
START_TEST(test_copying_identity) {
    for (int d = 0; d < 2; d++)
        for (int sign = -1; sign <= 1; sign += 2) {
            qkv_model m;
            zero_model(&m, FLOATS[d], 1, 1);
            identity(m.tok_emb, 1), identity(m.head_w, 1), identity(m.w_v[0], 1);
            identity(m.w_o[0], sign);
            double score = 0, ov[C * C];
            ck_assert_int_eq(qkv_copying_scores(&m, &score), QKV_OK);
            ck_assert_double_eq_tol(score, sign, 1e-12);
            ck_assert_int_eq(qkv_head_circuits(&m, 0, 0, NULL, NULL, ov), QKV_OK);
            for (int i = 0; i < C * C; i++)
                ck_assert_double_eq_tol(ov[i], i % (C + 1) == 0 ? sign : 0, 1e-12);
            qkv_model_free(&m);
        }
}
END_TEST

/* W_V turns the plane of tokens 0 and 1 by 90 degrees and keeps 2 and 3: eigenvalues i, -i, 1,
 * 1, so Σ Re λ / Σ |λ| = 2 / 4. */
START_TEST(test_copying_rotation) {
    qkv_model m;
    zero_model(&m, QKV_F64, 1, 1);
    identity(m.tok_emb, 1), identity(m.head_w, 1), identity(m.w_o[0], 1);
    qkv_set(m.w_v[0], 0 * C + 1, 1), qkv_set(m.w_v[0], 1 * C + 0, -1);
    qkv_set(m.w_v[0], 2 * C + 2, 1), qkv_set(m.w_v[0], 3 * C + 3, 1);
    double score = 0;
    ck_assert_int_eq(qkv_copying_scores(&m, &score), QKV_OK);
    ck_assert_double_eq_tol(score, 0.5, 1e-12);
    /* all zero: no eigenvalue, no score */
    qkv_set(m.w_v[0], 2 * C + 2, 0), qkv_set(m.w_v[0], 3 * C + 3, 0);
    qkv_set(m.w_v[0], 0 * C + 1, 0), qkv_set(m.w_v[0], 1 * C + 0, 0);
    ck_assert_int_eq(qkv_copying_scores(&m, &score), QKV_OK);
    ck_assert(isnan(score));
    qkv_model_free(&m);
}
END_TEST

/* Two heads of width 2: W_V = I, W_O = diag(1, 1, -1, -1). Head 1 owns columns 0-1 of W_V and
 * rows 0-1 of W_O (it copies tokens 0 and 1), head 2 columns and rows 2-3 (it negates 2 and
 * 3). Taking the wrong slice would give both heads the same score. */
START_TEST(test_copying_heads_slices) {
    for (int d = 0; d < 2; d++) {
        qkv_model m;
        zero_model(&m, FLOATS[d], 1, 2);
        identity(m.tok_emb, 1), identity(m.head_w, 1), identity(m.w_v[0], 1);
        for (int i = 0; i < C; i++) qkv_set(m.w_o[0], i * C + i, i < 2 ? 1 : -1);
        double score[2];
        ck_assert_int_eq(qkv_copying_scores(&m, score), QKV_OK);
        ck_assert_double_eq_tol(score[0], 1, 1e-12);
        ck_assert_double_eq_tol(score[1], -1, 1e-12);
        double ov[C * C];
        ck_assert_int_eq(qkv_head_circuits(&m, 0, 1, NULL, NULL, ov), QKV_OK);
        for (int i = 0; i < C * C; i++)
            ck_assert_double_eq_tol(ov[i], i == 2 * (C + 1) || i == 3 * (C + 1) ? -1 : 0, 1e-12);
        qkv_model_free(&m);
    }
}
END_TEST

/* QK circuit: tok_emb = I, W_Q = I, W_K = 2 I, one head of width 4 (scale 1/2): qk = I. The
 * positional part: pos_emb row p = e_p, so qk_pos (3, 3) = I too; with W_K = 0 both are 0. */
START_TEST(test_qk_circuit) {
    qkv_model m;
    zero_model(&m, QKV_F64, 1, 1);
    identity(m.tok_emb, 1), identity(m.w_q[0], 1), identity(m.w_k[0], 2);
    for (int p = 0; p < 3; p++) qkv_set(m.pos_emb, p * C + p, 1);
    double qk[C * C], qk_pos[9];
    ck_assert_int_eq(qkv_head_circuits(&m, 0, 0, qk, qk_pos, NULL), QKV_OK);
    for (int i = 0; i < C * C; i++) ck_assert_double_eq_tol(qk[i], i % (C + 1) == 0, 1e-12);
    for (int i = 0; i < 9; i++) ck_assert_double_eq_tol(qk_pos[i], i % 4 == 0, 1e-12);
    qkv_model_free(&m);
}
END_TEST

/* Two layers of one head. Layer 1 writes only direction 0 (W_V = E00, W_O = I: OV = E00).
 * Layer 2's queries and keys read direction 0 (W_Q = W_K = E00): Q and K composition 1; its
 * values read direction 1 (W_V = E11, W_O = I): V composition 0. With W_V = 0 in layer 2 the
 * V score has a zero norm: NaN. */
START_TEST(test_composition) {
    for (int d = 0; d < 2; d++) {
        qkv_model m;
        zero_model(&m, FLOATS[d], 2, 1);
        qkv_set(m.w_v[0], 0, 1), identity(m.w_o[0], 1);
        qkv_set(m.w_q[1], 0, 1), qkv_set(m.w_k[1], 0, 1);
        qkv_set(m.w_v[1], 1 * C + 1, 1), identity(m.w_o[1], 1);
        double s[3];
        ck_assert_int_eq(qkv_composition_scores(&m, s), QKV_OK);
        ck_assert_double_eq_tol(s[QKV_COMPOSE_Q], 1, 1e-12);
        ck_assert_double_eq_tol(s[QKV_COMPOSE_K], 1, 1e-12);
        ck_assert_double_eq_tol(s[QKV_COMPOSE_V], 0, 1e-12);
        /* keys that read direction 1 instead: K composition 0, Q still 1 */
        qkv_set(m.w_k[1], 0, 0), qkv_set(m.w_k[1], 1 * C + 0, 1);
        ck_assert_int_eq(qkv_composition_scores(&m, s), QKV_OK);
        ck_assert_double_eq_tol(s[QKV_COMPOSE_Q], 1, 1e-12);
        ck_assert_double_eq_tol(s[QKV_COMPOSE_K], 0, 1e-12);
        qkv_set(m.w_v[1], 1 * C + 1, 0);
        ck_assert_int_eq(qkv_composition_scores(&m, s), QKV_OK);
        ck_assert(isnan(s[QKV_COMPOSE_V]));
        qkv_model_free(&m);
    }
}
END_TEST

/* The mapping view's top targets: each key token's largest logit, counted against the
 * expected target where there is one. */
START_TEST(test_mapping_top_targets) {
    const double ov[3 * 3] = {0, 5, 1,   /* token 0 -> 1 */
                              2, 0, 9,   /* token 1 -> 2 */
                              7, 0, 0};  /* token 2 -> 0, but no key token */
    const bool keys[3] = {true, true, false};
    const int32_t expected[3] = {1, 0, 0};
    int32_t top[3];
    int sources = -1;
    ck_assert_int_eq(circuits_top_targets(ov, 3, keys, expected, top, &sources), 1);
    ck_assert_int_eq(sources, 2);
    ck_assert_int_eq(top[0], 1);
    ck_assert_int_eq(top[1], 2);
    ck_assert_int_eq(top[2], -1);
}
END_TEST

/* A data file's expected targets: each input token to the output token its presence raises
 * most. Tokens: 0 the padding, 1 a, 2 b, 3 A, 4 B; "a b -> B", "a a -> A", "b b -> B",
 * "a -> A": a -> A (P(A | a) 2/3 against 0 without), b -> B (1 against 0); A and B are in no
 * input, and the padding is no token. */
START_TEST(test_mapping_data) {
    const int32_t x[4 * 2] = {1, 2, 1, 1, 2, 2, 1, 0}, y[4 * 1] = {4, 3, 4, 3};
    int32_t expected[5];
    bool keys[5];
    ck_assert_int_eq(circuits_data_mapping(5, 4, 2, 1, x, y, expected, keys), QKV_OK);
    const int32_t want[5] = {-1, 3, 4, -1, -1};
    for (int t = 0; t < 5; t++) {
        ck_assert_int_eq(expected[t], want[t]);
        ck_assert(keys[t] == (t == 1 || t == 2));
    }
}
END_TEST

/* A built-in task's expected targets, from its ideal pattern: copy maps each token to itself;
 * translate each source word to one target word, one to one, and its keys are the source
 * words only (the encoder never sees a target word). */
START_TEST(test_mapping_tasks) {
    qkv_task task;
    int32_t expected[32], seen[32] = {0};
    bool keys[32];
    ck_assert_int_eq(qkv_task_init(&task, "copy", 8, 16), QKV_OK);
    ck_assert_int_eq(circuits_task_mapping(&task, expected, keys), QKV_OK);
    for (int t = 0; t < 16; t++) ck_assert(keys[t] && expected[t] == t);
    ck_assert_int_eq(qkv_task_init(&task, "translate", 16, 32), QKV_OK);
    ck_assert_int_eq(circuits_task_mapping(&task, expected, keys), QKV_OK);
    for (int t = 0; t < 32; t++) {
        ck_assert(keys[t] == (t < 16));
        if (t >= 16) {
            ck_assert_int_eq(expected[t], -1);
            continue;
        }
        ck_assert(expected[t] >= 16 && expected[t] < 32);
        ck_assert_int_eq(seen[expected[t]]++, 0);
    }
}
END_TEST

static Suite *circuits_suite(void) {
    Suite *s = suite_create("circuits");
    TCase *tc = tcase_create("circuits");
    tcase_add_test(tc, test_copying_identity);
    tcase_add_test(tc, test_copying_rotation);
    tcase_add_test(tc, test_copying_heads_slices);
    tcase_add_test(tc, test_qk_circuit);
    tcase_add_test(tc, test_composition);
    tcase_add_test(tc, test_mapping_top_targets);
    tcase_add_test(tc, test_mapping_data);
    tcase_add_test(tc, test_mapping_tasks);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return run_suite(circuits_suite()); }
