/* test_tasks.c - the toy tasks (src/model/tasks.c): each generates what it claims, its held-out
 * split is never trained on and holds out about one sequence in eight, and a task refuses the
 * lengths and vocabularies it cannot use. */
#include "qkv.h"

#include "fixtures.h"

#include <math.h>
#include <string.h>

/* ---- tasks --------------------------------------------------------------------------------- */
static const char *const task_names[] = {"copy", "reverse", "shift", "lookup", "max"};

/* Training draws never hit the held-out split, held-out draws always do, and the split holds
 * out about one sequence in eight (drawn uniformly where the task allows it). */
START_TEST(test_heldout_never_trained) {
    qkv_task task;
    ck_assert_int_eq(qkv_task_init(&task, task_names[_i], 8, 0), QKV_OK);
    qkv_rng rng = qkv_rng_seed(7);
    int32_t x[8], y[8];
    for (int n = 0; n < 10000; n++) {
        qkv_task_sample(&task, &rng, false, x, y);
        ck_assert_msg(!qkv_task_is_heldout(&task, x), "%s: training sequence %d is held out",
                      task_names[_i], n);
    }
    for (int n = 0; n < 1000; n++) {
        qkv_task_sample(&task, &rng, true, x, y);
        ck_assert(qkv_task_is_heldout(&task, x));
    }
}
END_TEST

/* The split must depend on every bit of the tokens: with tokens below 8 a hash whose low bits
 * see only tokens mod 8 held out nothing (and sampling a held-out set never finished). */
START_TEST(test_heldout_share) {
    static const struct { int seq_len, vocab; } shapes[] = {{8, 16}, {8, 4}, {12, 2}, {6, 8}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        qkv_task task;
        ck_assert_int_eq(qkv_task_init(&task, "copy", shapes[s].seq_len, shapes[s].vocab), QKV_OK);
        qkv_rng rng = qkv_rng_seed(3);
        int32_t x[16];
        int held = 0, n = 20000;
        for (int k = 0; k < n; k++) {
            for (int i = 0; i < task.seq_len; i++)
                x[i] = (int32_t)qkv_rng_below(&rng, (uint32_t)task.vocab);
            held += qkv_task_is_heldout(&task, x);
        }
        double share = (double)held / n;
        ck_assert_msg(share > 0.11 && share < 0.14, "seq-len %d vocab %d: %.4f held out, not ~1/8",
                      task.seq_len, task.vocab, share);
    }
    /* lookup at its shortest allowed length: the held-out set can be drawn */
    qkv_task task;
    ck_assert_int_eq(qkv_task_init(&task, "lookup", 5, 0), QKV_OK);
    qkv_rng rng = qkv_rng_seed(3);
    int32_t x[5], y[5];
    for (int k = 0; k < 100; k++) qkv_task_sample(&task, &rng, true, x, y);
}
END_TEST

START_TEST(test_targets_and_ideal) {
    enum { T = 8 };
    qkv_task task;
    ck_assert_int_eq(qkv_task_init(&task, task_names[_i], T, 0), QKV_OK);
    qkv_rng rng = qkv_rng_seed(11);
    int32_t x[T], y[T];
    uint8_t ideal[T * T];
    for (int n = 0; n < 2000; n++) {
        qkv_task_sample(&task, &rng, n % 2, x, y);
        qkv_task_ideal(&task, x, ideal);
        int32_t max = x[0];
        for (int i = 0; i < T; i++) {
            ck_assert(x[i] >= 0 && x[i] < task.vocab);
            max = x[i] > max ? x[i] : max;
        }
        for (int i = 0; i < T; i++) {
            int32_t want = -1;
            switch (task.kind) {
            case QKV_TASK_COPY: want = x[i]; break;
            case QKV_TASK_REVERSE: want = x[T - 1 - i]; break;
            case QKV_TASK_SHIFT: want = i ? x[i - 1] : -1; break;
            case QKV_TASK_MAX: want = max; break;
            default: break;
            }
            if (task.kind != QKV_TASK_LOOKUP)
                ck_assert_msg(y[i] == want, "%s: target %d is %d, expected %d", task_names[_i], i,
                              y[i], want);
            for (int j = 0; j < T; j++) {
                int w = 0;
                switch (task.kind) {
                case QKV_TASK_COPY: w = j == i; break;
                case QKV_TASK_REVERSE: w = j == T - 1 - i; break;
                case QKV_TASK_SHIFT: w = i > 0 && j == i - 1; break;
                case QKV_TASK_MAX: w = x[j] == max; break;
                default: w = ideal[i * T + j]; break; /* lookup: checked below */
                }
                ck_assert_msg(ideal[i * T + j] == w, "%s: ideal[%d][%d]", task_names[_i], i, j);
            }
        }
    }
    ck_assert_int_eq(task.causal, task.kind == QKV_TASK_SHIFT);
}
END_TEST

/* induction, recall and sort against their definitions, from the tokens alone. */
static const char *const structured_tasks[] = {"induction", "recall", "sort"};

START_TEST(test_structured_targets) {
    enum { T = 17 };
    qkv_task task;
    int len = _i == 2 ? T : T - 1;
    ck_assert_int_eq(qkv_task_init(&task, structured_tasks[_i], len, 0), QKV_OK);
    ck_assert(task.causal);
    qkv_rng rng = qkv_rng_seed(5);
    int32_t x[T], y[T];
    uint8_t ideal[T * T], prev[T * T];
    /* Check marks every assertion that passes (a write to its pipe): assert only on failure */
#define EXPECT(cond) do { if (!(cond)) ck_abort_msg("%s: draw %d: %s", structured_tasks[_i], n, #cond); } while (0)
    for (int n = 0; n < 600; n++) {
        bool held = n % 3 == 0;
        qkv_task_sample(&task, &rng, held, x, y);
        EXPECT(qkv_task_is_heldout(&task, x) == held);
        qkv_task_ideal(&task, x, ideal);
        qkv_task_ideal_layer(&task, x, 0, 2, prev);
        for (int i = 0; i < len; i++) EXPECT(x[i] >= 0 && x[i] < task.vocab);
        if (task.kind == QKV_TASK_INDUCTION) {
            /* the segment: distinct tokens up to the first repeat of x[0], then repeated */
            int seg = 1;
            while (x[seg] != x[0]) seg++;
            EXPECT(seg >= len / 4 && seg <= len / 2);
            for (int i = 0; i < len; i++) {
                if (i >= seg) EXPECT((x[i]) == (x[i - seg]));
                for (int j = 0; j < i && i < seg; j++) EXPECT(x[j] != x[i]);
                EXPECT((y[i]) == (i >= seg && i < len - 1 ? x[i + 1] : -1));
                for (int j = 0; j < len; j++) {
                    /* after an earlier copy of x[i], for the rows with a target */
                    bool w = y[i] >= 0 && j >= 1 && j <= i && x[j - 1] == x[i];
                    EXPECT(ideal[i * len + j] == w);
                    EXPECT((prev[i * len + j]) == (j == i - 1));
                }
            }
        } else if (task.kind == QKV_TASK_RECALL) {
            int P = len / 3;
            for (int p = 0; p < P; p++) {
                EXPECT(x[2 * p] < task.n_keys && x[2 * p + 1] >= task.n_keys);
                for (int q = 0; q < p; q++) EXPECT(x[2 * q] != x[2 * p]);
            }
            for (int i = 0; i < len; i++) {
                int32_t want = -1;
                int at = -1;
                for (int p = 0; p < P && i >= 2 * P; p++)
                    if (x[2 * p] == x[i]) want = x[at = 2 * p + 1];
                EXPECT(i < 2 * P || want >= 0); /* every query names a key of the pairs */
                EXPECT((y[i]) == (want));
                for (int j = 0; j < len; j++) EXPECT((ideal[i * len + j]) == (j == at));
            }
        } else {
            int k = (len - 1) / 2;
            EXPECT((x[k]) == (task.vocab - 1));
            for (int i = 0; i < k; i++) {
                int rank = 0;
                for (int j = 0; j < k; j++) {
                    rank += x[j] < x[i];
                    EXPECT(j == i || x[j] != x[i]);
                }
                EXPECT((x[k + 1 + rank]) == (x[i])); /* the output is the input sorted */
            }
            for (int i = 0; i < len; i++) {
                EXPECT((y[i]) == (i >= k && i < len - 1 ? x[i + 1] : -1));
                for (int j = 0; j < len; j++)
                    EXPECT((ideal[i * len + j]) == (y[i] >= 0 && j < k && x[j] == y[i]));
            }
        }
    }
#undef EXPECT
}
END_TEST

START_TEST(test_lookup_layout) {
    enum { T = 8 };
    qkv_task task;
    ck_assert_int_eq(qkv_task_init(&task, "lookup", T, 0), QKV_OK);
    ck_assert_int_eq(task.n_keys, T - 1);
    ck_assert_int_eq(task.n_values, 4);
    ck_assert_int_eq(task.vocab, qkv_task_default_vocab(QKV_TASK_LOOKUP, T));
    ck_assert_int_eq(task.vocab, 35);
    int K = task.n_keys, V = task.n_values;
    qkv_rng rng = qkv_rng_seed(5);
    int32_t x[T], y[T];
    uint8_t ideal[T * T];
    for (int n = 0; n < 2000; n++) {
        qkv_task_sample(&task, &rng, n % 3 == 0, x, y);
        qkv_task_ideal(&task, x, ideal);
        /* pairs: every key exactly once, token = key*V + value */
        int seen[T] = {0};
        for (int i = 0; i < T - 1; i++) {
            ck_assert(x[i] >= 0 && x[i] < K * V);
            seen[x[i] / V]++;
        }
        for (int k = 0; k < K; k++) ck_assert_int_eq(seen[k], 1);
        /* the query: token = K*V + key */
        ck_assert(x[T - 1] >= K * V && x[T - 1] < K * V + K);
        int key = x[T - 1] - K * V, pair = -1;
        for (int i = 0; i < T - 1; i++)
            if (x[i] / V == key) pair = i;
        ck_assert_int_ge(pair, 0);
        /* only the last position has a target: the value paired with the queried key */
        for (int i = 0; i < T - 1; i++) ck_assert_int_eq(y[i], -1);
        ck_assert_int_eq(y[T - 1], x[pair] % V);
        /* the ideal pattern: the query attends to that pair, nothing else anywhere */
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++)
                ck_assert_int_eq(ideal[i * T + j], i == T - 1 && j == pair);
    }
    char label[32];
    qkv_task_token_label(&task, 2 * V + 3, label, sizeof label);
    ck_assert_str_eq(label, "k2:v3");
    qkv_task_token_label(&task, K * V + 4, label, sizeof label);
    ck_assert_str_eq(label, "?k4");
}
END_TEST

START_TEST(test_task_init_rejects) {
    qkv_task task;
    ck_assert_int_eq(qkv_task_init(&task, "bubble", 8, 0), QKV_ERR_VALUE);
    ck_assert_ptr_nonnull(strstr(qkv_last_error(), "unknown task 'bubble'"));
    /* lookup holds at most 32 pairs + the query */
    ck_assert_int_eq(qkv_task_init(&task, "lookup", 33, 0), QKV_OK);
    ck_assert_int_eq(qkv_task_init(&task, "lookup", 34, 0), QKV_ERR_VALUE);
    ck_assert_ptr_nonnull(strstr(qkv_last_error(), "too large for lookup"));
    /* lookup needs 2 values per key: 7 keys * 2 + 7 query tokens = 21 */
    ck_assert_int_eq(qkv_task_init(&task, "lookup", 8, 21), QKV_OK);
    ck_assert_int_eq(qkv_task_init(&task, "lookup", 8, 20), QKV_ERR_VALUE);
    ck_assert_ptr_nonnull(strstr(qkv_last_error(), "too small"));
    /* lookup with too few distinct sequences for a held-out split */
    ck_assert_int_eq(qkv_task_init(&task, "lookup", 4, 0), QKV_ERR_VALUE);
    ck_assert_ptr_nonnull(strstr(qkv_last_error(), "too small"));
    /* the others need 2^12 distinct sequences: vocab 2 at length 8 has 256 */
    ck_assert_int_eq(qkv_task_init(&task, "copy", 8, 2), QKV_ERR_VALUE);
    ck_assert_ptr_nonnull(strstr(qkv_last_error(), "too small"));
    ck_assert_int_eq(qkv_task_init(&task, "max", 12, 2), QKV_OK);
    ck_assert_int_eq(qkv_task_init(&task, "copy", 1, 0), QKV_ERR_VALUE);
    ck_assert_int_eq(qkv_task_init(&task, "copy", 5000, 0), QKV_ERR_VALUE);
    /* the messages name the fields as C does */
    ck_assert_str_eq(qkv_last_error(), "seq_len 5000 is out of range for copy (2..4096)");
    ck_assert_int_eq(qkv_task_init(&task, "copy", 8, 2), QKV_ERR_VALUE);
    ck_assert_str_eq(qkv_last_error(), "vocab 2 is too small for copy at seq_len 8: it allows "
                                       "fewer than 4096 distinct sequences");
}
END_TEST

static Suite *tasks_suite(void) {
    Suite *s = suite_create("tasks");
    TCase *tc = tcase_create("tasks");
    tcase_add_loop_test(tc, test_heldout_never_trained, 0, 5);
    tcase_add_test(tc, test_heldout_share);
    tcase_add_loop_test(tc, test_targets_and_ideal, 0, 5);
    tcase_add_test(tc, test_lookup_layout);
    tcase_add_loop_test(tc, test_structured_targets, 0, 3);
    tcase_add_test(tc, test_task_init_rejects);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return run_suite(tasks_suite()); }
