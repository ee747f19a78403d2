/* test_tasks.c - the toy tasks (src/model/tasks.c): each generates what it claims, its held-out
 * split is never trained on and holds out about one sequence in eight, and a task refuses the
 * lengths and vocabularies it cannot use. */
#include "qkv.h"

#include "fixtures.h"

#include <math.h>
#include <string.h>

/* ---- tasks --------------------------------------------------------------------------------- */
/* Every built-in task at a length it accepts with its default vocabulary: the first five at 8;
 * the four of issue 15 at their CLI defaults (induction at 8 allows too few sequences for a
 * held-out split, sort needs an odd length). */
static const struct {
    const char *name;
    int seq_len;
} all_tasks[] = {{"copy", 8},       {"reverse", 8}, {"shift", 8}, {"lookup", 8},     {"max", 8},
                 {"induction", 16}, {"recall", 16}, {"sort", 17}, {"translate", 16}};
#define N_TASKS ((int)(sizeof all_tasks / sizeof all_tasks[0]))
enum { MAX_T = 17 };

static uint64_t tokens_hash(const int32_t *x, int n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++) h = (h ^ (uint32_t)x[i]) * 0x100000001b3ull;
    return h;
}

static int compare_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Training draws never hit the held-out split, held-out draws always do, and the held-out
 * draws are many different sequences, not a few drawn again and again. (That the split holds
 * out about one sequence in eight: test_heldout_share.) */
START_TEST(test_heldout_never_trained) {
    const char *name = all_tasks[_i].name;
    qkv_task task;
    ck_assert_int_eq(qkv_task_init(&task, name, all_tasks[_i].seq_len, 0), QKV_OK);
    qkv_rng rng = qkv_rng_seed(7);
    int32_t x[MAX_T], y[MAX_T];
    for (int n = 0; n < 10000; n++) {
        qkv_task_sample(&task, &rng, false, x, y);
        ck_assert_msg(!qkv_task_is_heldout(&task, x), "%s: training sequence %d is held out",
                      name, n);
    }
    enum { HELD = 1000 };
    uint64_t held[HELD];
    for (int n = 0; n < HELD; n++) {
        qkv_task_sample(&task, &rng, true, x, y);
        ck_assert(qkv_task_is_heldout(&task, x));
        held[n] = tokens_hash(x, task.seq_len);
    }
    /* induction at 16 has the fewest: 43680 segments of 4 tokens, an eighth held out, drawn
     * one time in five: about 4 repeats in 1000 draws */
    qsort(held, HELD, sizeof held[0], compare_u64);
    int distinct = 1;
    for (int n = 1; n < HELD; n++) distinct += held[n] != held[n - 1];
    ck_assert_msg(distinct >= 900, "%s: only %d distinct sequences in %d held-out draws", name,
                  distinct, HELD);
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

/* Each task's targets and ideal pattern against its definition. The first five: as stated. The
 * four of issue 15 as properties of the tokens (test_structured_targets checks induction,
 * recall and sort from their layout): induction's target is the token that followed the
 * earlier copy of the current one, and its ideal keys are those followers; recall answers a
 * queried key with the value that followed it; sort's outputs are its inputs in ascending
 * order, each attending to where it stood; translate maps source token 2i+1 through one
 * fixed dictionary (a bijection onto the second half of the vocabulary) and attends there. */
START_TEST(test_targets_and_ideal) {
    const char *name = all_tasks[_i].name;
    const int T = all_tasks[_i].seq_len;
    qkv_task task;
    ck_assert_int_eq(qkv_task_init(&task, name, T, 0), QKV_OK);
    const int V = task.vocab, To = task.target_len ? task.target_len : T;
    const bool translate = task.kind == QKV_TASK_TRANSLATE;
    ck_assert_int_eq(task.target_len, translate ? T / 2 : 0);
    qkv_rng rng = qkv_rng_seed(11);
    int32_t x[MAX_T], y[MAX_T], dict[MAX_T * 4], inverse[MAX_T * 4];
    uint8_t ideal[MAX_T * MAX_T];
    ck_assert(!translate || V / 2 <= MAX_T * 4);
    for (int s = 0; s < MAX_T * 4; s++) dict[s] = inverse[s] = -1;
    int targets = 0;
    /* Check marks every assertion that passes (a write to its pipe): assert only on failure */
#define EXPECT(cond, ...) do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)
    for (int n = 0; n < 2000; n++) {
        qkv_task_sample(&task, &rng, n % 2, x, y);
        qkv_task_ideal(&task, x, ideal);
        int32_t max = x[0];
        for (int i = 0; i < T; i++) {
            EXPECT(x[i] >= 0 && x[i] < (translate ? V / 2 : V), "%s: token %d is %d", name, i, x[i]);
            max = x[i] > max ? x[i] : max;
        }
        int P = T / 3, k = (T - 1) / 2; /* recall's pairs; sort's inputs */
        for (int i = 0; i < To; i++) {
            int32_t want = -1;
            bool earlier = false; /* induction: x[i] occurred before */
            for (int j = 0; j < i; j++) earlier |= x[j] == x[i];
            switch (task.kind) {
            case QKV_TASK_COPY: want = x[i]; break;
            case QKV_TASK_REVERSE: want = x[T - 1 - i]; break;
            case QKV_TASK_SHIFT: want = i ? x[i - 1] : -1; break;
            case QKV_TASK_MAX: want = max; break;
            case QKV_TASK_INDUCTION: want = earlier && i < T - 1 ? x[i + 1] : -1; break;
            case QKV_TASK_RECALL:
                for (int p = 0; p < P && i >= 2 * P; p++)
                    if (x[2 * p] == x[i]) want = x[2 * p + 1];
                EXPECT(i < 2 * P || want >= 0, "%s: query %d names no key", name, i);
                break;
            case QKV_TASK_SORT: want = i >= k && i < T - 1 ? x[i + 1] : -1; break;
            case QKV_TASK_TRANSLATE: {
                int32_t s = x[2 * i + 1];
                EXPECT(y[i] >= V / 2 && y[i] < V, "%s: target %d is %d", name, i, y[i]);
                if (dict[s] < 0) dict[s] = y[i];
                if (inverse[y[i] - V / 2] < 0) inverse[y[i] - V / 2] = s;
                EXPECT(dict[s] == y[i] && inverse[y[i] - V / 2] == s,
                       "%s: source word %d -> %d, earlier %d -> %d, %d -> %d", name, s, y[i], s,
                       dict[s], inverse[y[i] - V / 2], y[i]);
                want = dict[s];
                break;
            }
            default: break;
            }
            if (task.kind != QKV_TASK_LOOKUP)
                EXPECT(y[i] == want, "%s: draw %d: target %d is %d, expected %d", name, n, i,
                       y[i], want);
            targets += y[i] >= 0;
            int marked = 0;
            for (int j = 0; j < T; j++) {
                int w = 0;
                switch (task.kind) {
                case QKV_TASK_COPY: w = j == i; break;
                case QKV_TASK_REVERSE: w = j == T - 1 - i; break;
                case QKV_TASK_SHIFT: w = i > 0 && j == i - 1; break;
                case QKV_TASK_MAX: w = x[j] == max; break;
                /* every key that followed an earlier copy of x[i]: each holds the target */
                case QKV_TASK_INDUCTION: w = y[i] >= 0 && j >= 1 && j <= i && x[j - 1] == x[i]; break;
                /* the value right after the queried key */
                case QKV_TASK_RECALL: w = y[i] >= 0 && j % 2 == 1 && j < 2 * P && x[j - 1] == x[i]; break;
                /* the input position holding the token to output next */
                case QKV_TASK_SORT: w = y[i] >= 0 && j < k && x[j] == y[i]; break;
                case QKV_TASK_TRANSLATE: w = j == 2 * i + 1; break;
                default: w = ideal[i * T + j]; break; /* lookup: test_lookup_layout */
                }
                EXPECT(ideal[i * T + j] == w, "%s: draw %d: ideal[%d][%d] is %d", name, n, i, j,
                       ideal[i * T + j]);
                marked += w;
                /* the keys the ideal pattern marks hold the target (or its source word) */
                if (w && y[i] >= 0 && task.kind >= QKV_TASK_INDUCTION && !translate)
                    EXPECT(x[j] == y[i], "%s: ideal key %d of row %d holds %d, not %d", name, j,
                           i, x[j], y[i]);
            }
            if (task.kind >= QKV_TASK_INDUCTION && y[i] >= 0)
                EXPECT(marked >= 1, "%s: row %d has a target and no ideal key", name, i);
        }
        for (int i = To; i < T; i++) /* translate: no decoder row beyond T/2 */
            for (int j = 0; j < T; j++)
                EXPECT(!ideal[i * T + j], "%s: ideal[%d][%d] beyond the decoder's rows", name, i, j);
        if (task.kind == QKV_TASK_SORT) {
            EXPECT(x[k] == V - 1, "%s: no separator at %d", name, k);
            for (int i = k + 1; i < T - 1; i++)
                EXPECT(x[i] < x[i + 1], "%s: the output is not ascending at %d", name, i);
            for (int i = k + 1; i < T; i++) {
                int found = 0;
                for (int j = 0; j < k; j++) found += x[j] == x[i];
                EXPECT(found == 1, "%s: output %d is not one of the inputs", name, i);
            }
        }
    }
#undef EXPECT
    /* how many rows have a target: induction's second half and more, recall's queries,
     * sort's separator and outputs but the last, every decoder row of translate */
    if (task.kind == QKV_TASK_RECALL) ck_assert_int_eq(targets, 2000 * (T - 2 * (T / 3)));
    if (task.kind == QKV_TASK_SORT) ck_assert_int_eq(targets, 2000 * (T - 1) / 2);
    if (translate) {
        ck_assert_int_eq(targets, 2000 * To);
        /* every source word was seen: the dictionary is a bijection, and not the identity */
        int fixed = 0;
        for (int s = 0; s < V / 2; s++) {
            ck_assert_msg(dict[s] >= 0 && inverse[s] >= 0, "source word %d never drawn", s);
            fixed += dict[s] == V / 2 + s;
        }
        ck_assert_int_lt(fixed, V / 2 - 1);
    }
    if (task.kind == QKV_TASK_INDUCTION) /* segments of T/4 .. T/2 tokens: T/2-1 .. 3T/4-1 rows */
        ck_assert(targets >= 2000 * (T / 2 - 1) && targets <= 2000 * (3 * T / 4 - 1));
    bool causal = task.kind == QKV_TASK_SHIFT || task.kind == QKV_TASK_INDUCTION ||
                  task.kind == QKV_TASK_RECALL || task.kind == QKV_TASK_SORT;
    ck_assert_int_eq(task.causal, causal);
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

/* The four tasks of issue 15 refuse what they cannot use, each at its rule's edge: the value
 * just inside is accepted, the one just outside refused with a message naming the rule. */
static const struct {
    const char *task;
    int seq_len, vocab; /* vocab 0: the task's default */
    qkv_status want;
    const char *message; /* the whole message (C field names), or NULL */
    const char *fragment;
} new_task_rules[] = {
    /* induction: a segment of T/4..T/2 distinct tokens, 4096 sequences of the shortest */
    {"induction", 3, 0, QKV_ERR_VALUE, NULL, "induction needs seq_len >= 4"},
    {"induction", 16, 7, QKV_ERR_VALUE,
     "induction at seq_len 16 needs vocab >= 8 (the segment's distinct tokens)", NULL},
    {"induction", 16, 9, QKV_ERR_VALUE, /* 9*8*7*6 = 3024 segments of 4 */
     "vocab 9 is too small for induction at seq_len 16: it allows fewer than 4096 distinct "
     "sequences", NULL},
    {"induction", 16, 10, QKV_OK, NULL, NULL}, /* 10*9*8*7 = 5040 */
    {"induction", 12, 0, QKV_ERR_VALUE, NULL, "too small for induction"}, /* 16*15*14 */
    {"induction", 16, 0, QKV_OK, NULL, NULL},
    /* recall: T/3 pairs of distinct keys (V/2 of them) and values (at least 2) */
    {"recall", 2, 0, QKV_ERR_VALUE, NULL, "recall needs seq_len >= 3"},
    {"recall", 16, 9, QKV_ERR_VALUE,
     "recall at seq_len 16 needs vocab >= 10 (5 distinct keys, 5 values)", NULL},
    {"recall", 16, 10, QKV_OK, NULL, NULL},
    {"recall", 3, 3, QKV_ERR_VALUE, NULL, "vocab 3 is too small for recall at seq_len 3"},
    {"recall", 48, 0, QKV_OK, NULL, NULL},       /* 16 pairs: the 16 keys of vocab 32 */
    {"recall", 51, 0, QKV_ERR_VALUE, NULL, "vocab >= 34 (17 distinct keys"},
    {"recall", 5, 2, QKV_ERR_VALUE, "recall at seq_len 5 needs vocab >= 3 (1 distinct keys, 2 "
     "values)", NULL},
    /* sort: an odd length, n tokens + a separator + the n sorted; n distinct tokens */
    {"sort", 16, 0, QKV_ERR_VALUE,
     "seq_len 16 does not fit sort: it needs an odd length, n tokens + a separator + the n "
     "sorted", NULL},
    {"sort", 2, 0, QKV_ERR_VALUE, NULL, "does not fit sort"},
    {"sort", 17, 8, QKV_ERR_VALUE,
     "vocab 8 is too small for sort at seq_len 17: need at least 9 (distinct tokens and a "
     "separator)", NULL},
    {"sort", 17, 9, QKV_OK, NULL, NULL},
    {"sort", 7, 0, QKV_ERR_VALUE, NULL, "too small for sort at seq_len 7"}, /* 15*14*13 */
    {"sort", 9, 0, QKV_OK, NULL, NULL},
    /* translate: even length and vocabulary (half source, half target words), 4..8192 */
    {"translate", 15, 0, QKV_ERR_VALUE,
     "translate needs an even seq_len (15) and an even vocab in 4..8192 (32): half source "
     "words, half target words", NULL},
    {"translate", 16, 31, QKV_ERR_VALUE, NULL, "an even vocab in 4..8192 (31)"},
    {"translate", 16, 2, QKV_ERR_VALUE, NULL, "an even vocab in 4..8192 (2)"},
    {"translate", 128, 4, QKV_OK, NULL, NULL}, /* 2^128 sequences */
    {"translate", 16, 8192, QKV_OK, NULL, NULL},
    {"translate", 16, 8194, QKV_ERR_VALUE, NULL, "an even vocab in 4..8192 (8194)"},
    {"translate", 4, 8, QKV_ERR_VALUE, NULL, "vocab 8 is too small for translate at seq_len 4"},
    {"translate", 4, 16, QKV_OK, NULL, NULL}, /* 8^4 = 4096 exactly */
};

START_TEST(test_new_task_init_rejects) {
    for (size_t k = 0; k < sizeof new_task_rules / sizeof new_task_rules[0]; k++) {
        const char *name = new_task_rules[k].task;
        int T = new_task_rules[k].seq_len, V = new_task_rules[k].vocab;
        qkv_task task;
        qkv_status s = qkv_task_init(&task, name, T, V);
        ck_assert_msg(s == new_task_rules[k].want, "%s seq_len %d vocab %d: status %d, expected "
                      "%d (%s)", name, T, V, s, new_task_rules[k].want,
                      s ? qkv_last_error() : "accepted");
        if (s == QKV_OK) { /* accepted as asked */
            ck_assert_int_eq(task.seq_len, T);
            ck_assert_int_eq(task.vocab, V ? V : qkv_task_default_vocab(task.kind, T));
            ck_assert_int_eq(task.target_len, task.kind == QKV_TASK_TRANSLATE ? T / 2 : 0);
            continue;
        }
        if (new_task_rules[k].message)
            ck_assert_str_eq(qkv_last_error(), new_task_rules[k].message);
        else
            ck_assert_msg(strstr(qkv_last_error(), new_task_rules[k].fragment), "%s seq_len %d "
                          "vocab %d: '%s' lacks '%s'", name, T, V, qkv_last_error(),
                          new_task_rules[k].fragment);
    }
    /* translate at its largest vocabulary: a dictionary of 4096 words, each mapped once */
    qkv_task task;
    ck_assert_int_eq(qkv_task_init(&task, "translate", 16, 8192), QKV_OK);
    qkv_rng rng = qkv_rng_seed(2);
    int32_t x[16], y[8];
    for (int n = 0; n < 20; n++) {
        qkv_task_sample(&task, &rng, n % 2, x, y);
        for (int i = 0; i < 8; i++)
            ck_assert(x[2 * i + 1] < 4096 && y[i] >= 4096 && y[i] < 8192);
    }
}
END_TEST

/* qkv_task_targets of any input: a drawn sequence's targets are qkv_task_sample's, and a token
 * for which the task defines no target is refused, naming its position and the token, never
 * answered with a target made up (translate read its dictionary past the words it filled). */
/* recall: the pair (of P) whose key is `key`, or -1. */
static int recall_pair_of(const int32_t *x, int P, int32_t key) {
    for (int p = 0; p < P; p++)
        if (x[2 * p] == key) return p;
    return -1;
}

static void expect_refused(const qkv_task *task, const int32_t *x, const char *fragment) {
    int32_t y[MAX_T];
    ck_assert_int_eq(qkv_task_targets(task, x, y), QKV_ERR_VALUE);
    ck_assert_msg(strstr(qkv_last_error(), fragment), "%s: '%s' lacks '%s'",
                  qkv_task_name(task->kind), qkv_last_error(), fragment);
}

START_TEST(test_targets_of_any_input) {
    const char *name = all_tasks[_i].name;
    const int T = all_tasks[_i].seq_len;
    qkv_task task;
    ck_assert_int_eq(qkv_task_init(&task, name, T, 0), QKV_OK);
    const int V = task.vocab, To = task.target_len ? task.target_len : T;
    qkv_rng rng = qkv_rng_seed(3);
    int32_t x[MAX_T], y[MAX_T], again[MAX_T];
    for (int n = 0; n < 200; n++) {
        qkv_task_sample(&task, &rng, n % 2, x, y);
        ck_assert_int_eq(qkv_task_targets(&task, x, again), QKV_OK);
        ck_assert_mem_eq(again, y, (size_t)To * sizeof *y);
    }
    int32_t bad[MAX_T];
    memcpy(bad, x, sizeof bad);
    bad[2] = V; /* past the vocabulary, in every task */
    expect_refused(&task, bad, "position 2 holds token");
    if (task.kind == QKV_TASK_TRANSLATE) /* a target word, where a target is read or not */
        for (int at = 0; at < 2; at++) {
            memcpy(bad, x, sizeof bad);
            bad[at] = V / 2 + 1;
            char fragment[64];
            snprintf(fragment, sizeof fragment, "position %d holds 'w1', a target word", at);
            expect_refused(&task, bad, fragment);
        }
    if (task.kind == QKV_TASK_RECALL) {
        int P = task.n_pairs, q = 2 * P; /* the first query */
        memcpy(bad, x, sizeof bad);
        for (int key = 0; key < task.n_keys; key++) { /* a key none of the pairs holds */
            bool held = false;
            for (int p = 0; p < P; p++) held |= x[2 * p] == key;
            if (!held) bad[q] = key;
        }
        expect_refused(&task, bad, "a query of a key that none of the 5 pairs");
        memcpy(bad, x, sizeof bad); /* the queried key in a second pair, with another value */
        int first = recall_pair_of(x, P, x[q]), other = first == 0 ? 1 : 0;
        bad[2 * other] = x[q];
        bad[2 * other + 1] = x[2 * first + 1] == V - 1 ? V - 2 : V - 1;
        expect_refused(&task, bad, "two pairs give different values");
        bad[2 * other + 1] = x[2 * first + 1]; /* the same value twice: one target */
        ck_assert_int_eq(qkv_task_targets(&task, bad, y), QKV_OK);
        ck_assert_int_eq(y[q], x[2 * first + 1]);
    }
    if (task.kind == QKV_TASK_LOOKUP) {
        int K = task.n_keys, Vn = task.n_values, key = x[T - 1] - K * Vn, pair = 0;
        while (x[pair] / Vn != key) pair++;
        memcpy(bad, x, sizeof bad); /* the queried key twice, with two values */
        int other = pair == 0 ? 1 : 0;
        bad[other] = key * Vn + (x[pair] % Vn + 1) % Vn;
        expect_refused(&task, bad, "position 7 holds '?k");
        bad[other] = x[pair]; /* the same pair twice: one target */
        ck_assert_int_eq(qkv_task_targets(&task, bad, y), QKV_OK);
        ck_assert_int_eq(y[T - 1], x[pair] % Vn);
        bad[T - 1] = x[0]; /* a pair where the query should be: no target, as documented */
        ck_assert_int_eq(qkv_task_targets(&task, bad, y), QKV_OK);
        ck_assert_int_eq(y[T - 1], -1);
    }
}
END_TEST

/* lookup with a vocabulary one token past its keys' queries: that token ("?k7") queries a key
 * no pair can hold, and a query token standing among the pairs is no pair of it. */
START_TEST(test_lookup_query_of_no_key) {
    enum { T = 8 };
    qkv_task task;
    ck_assert_int_eq(qkv_task_init(&task, "lookup", T, 36), QKV_OK);
    int K = task.n_keys, Vn = task.n_values;
    ck_assert_int_eq(K * Vn + K, 35);
    int32_t x[T] = {K * Vn, 1 * Vn, 2 * Vn, 3 * Vn, 4 * Vn, 5 * Vn, 6 * Vn, 35}, y[T];
    char label[32];
    qkv_task_token_label(&task, 35, label, sizeof label);
    ck_assert_str_eq(label, "?k7");
    ck_assert_int_eq(qkv_task_targets(&task, x, y), QKV_OK);
    for (int i = 0; i < T; i++) ck_assert_int_eq(y[i], -1);
    uint8_t ideal[T * T];
    qkv_task_ideal(&task, x, ideal);
    for (int i = 0; i < T * T; i++) ck_assert_int_eq(ideal[i], 0);
}
END_TEST

/* modular: the split holds floor(F·P²) training pairs, a permutation's first; each pair's
 * qkv_task_is_heldout agrees with it; the data seed moves it and the op does not; the targets,
 * the ideal row, the labels; qkv_task_init("modular") is the defaults; bad values refused. */
START_TEST(test_modular) {
    enum { P = 13, N = P * P };
    qkv_task task, other;
    ck_assert_int_eq(qkv_task_modular(&task, P, QKV_MODULAR_SUB, 0.3, 7), QKV_OK);
    ck_assert_int_eq(task.n_train, (int)floor(0.3 * N));
    ck_assert_int_eq(task.vocab, P + 1);
    ck_assert_int_eq(task.seq_len, 3);
    int32_t order[N], again[N];
    qkv_task_modular_split(&task, order);
    uint8_t seen[N] = {0}, trains[N] = {0};
    for (int i = 0; i < N; i++) seen[order[i]]++, trains[order[i]] = i < task.n_train;
    for (int k = 0; k < N; k++) ck_assert_int_eq(seen[k], 1); /* a permutation */
    for (int k = 0; k < N; k++) {
        int32_t x[3] = {k / P, k % P, P}, y[3];
        ck_assert(qkv_task_is_heldout(&task, x) == !trains[k]);
        ck_assert_int_eq(qkv_task_targets(&task, x, y), QKV_OK);
        ck_assert(y[0] == -1 && y[1] == -1 && y[2] == ((k / P - k % P) % P + P) % P);
    }
    /* another op, the same split; another data seed, another */
    ck_assert_int_eq(qkv_task_modular(&other, P, QKV_MODULAR_MUL, 0.3, 7), QKV_OK);
    qkv_task_modular_split(&other, again);
    ck_assert_int_eq(memcmp(order, again, sizeof order), 0);
    ck_assert_int_eq(qkv_task_modular(&other, P, QKV_MODULAR_SUB, 0.3, 8), QKV_OK);
    qkv_task_modular_split(&other, again);
    ck_assert_int_ne(memcmp(order, again, sizeof order), 0);
    /* mul, with a·b past int32 for the largest modulus */
    ck_assert_int_eq(qkv_task_modular(&other, QKV_MAX_MODULUS, QKV_MODULAR_MUL, 0.5, 0), QKV_OK);
    int32_t big[3] = {QKV_MAX_MODULUS - 1, QKV_MAX_MODULUS - 2, QKV_MAX_MODULUS}, y[3];
    ck_assert_int_eq(qkv_task_targets(&other, big, y), QKV_OK);
    ck_assert_int_eq(y[2], (int32_t)(((int64_t)big[0] * big[1]) % QKV_MAX_MODULUS));
    /* = at the end only; the ideal row; the labels */
    int32_t bad[3] = {P, 1, P};
    ck_assert_int_eq(qkv_task_targets(&task, bad, y), QKV_ERR_VALUE);
    ck_assert_ptr_nonnull(strstr(qkv_last_error(), "a b ="));
    uint8_t ideal[9];
    int32_t x[3] = {2, 5, P};
    qkv_task_ideal(&task, x, ideal);
    for (int i = 0; i < 9; i++) ck_assert_int_eq(ideal[i], i == 6 || i == 7);
    char label[16];
    qkv_task_token_label(&task, P, label, sizeof label);
    ck_assert_str_eq(label, "=");
    ck_assert_double_eq(qkv_task_chance(&task), 1.0 / P);
    /* the defaults, and what is refused */
    ck_assert_int_eq(qkv_task_init(&other, "modular", 3, 0), QKV_OK);
    ck_assert(other.modulus == 113 && other.op == QKV_MODULAR_ADD && other.train_frac == 0.3 &&
              other.data_seed == 0 && other.n_train == 3830);
    ck_assert_int_eq(qkv_task_init(&other, "modular", 4, 0), QKV_ERR_VALUE);
    ck_assert_int_eq(qkv_task_modular(&other, 1, QKV_MODULAR_ADD, 0.3, 0), QKV_ERR_VALUE);
    ck_assert_int_eq(qkv_task_modular(&other, QKV_MAX_MODULUS + 1, QKV_MODULAR_ADD, 0.3, 0),
                     QKV_ERR_VALUE);
    ck_assert_int_eq(qkv_task_modular(&other, P, QKV_MODULAR_OPS, 0.3, 0), QKV_ERR_VALUE);
    ck_assert_int_eq(qkv_task_modular(&other, P, QKV_MODULAR_ADD, 1, 0), QKV_ERR_VALUE);
    ck_assert_int_eq(qkv_task_modular(&other, 2, QKV_MODULAR_ADD, 0.2, 0), QKV_ERR_VALUE);
    ck_assert_ptr_nonnull(strstr(qkv_last_error(), "no training pair"));
}
END_TEST

static Suite *tasks_suite(void) {
    Suite *s = suite_create("tasks");
    TCase *tc = tcase_create("tasks");
    tcase_add_loop_test(tc, test_heldout_never_trained, 0, N_TASKS);
    tcase_add_test(tc, test_heldout_share);
    tcase_add_loop_test(tc, test_targets_and_ideal, 0, N_TASKS);
    tcase_add_test(tc, test_lookup_layout);
    tcase_add_loop_test(tc, test_structured_targets, 0, 3);
    tcase_add_test(tc, test_task_init_rejects);
    tcase_add_test(tc, test_new_task_init_rejects);
    tcase_add_loop_test(tc, test_targets_of_any_input, 0, N_TASKS);
    tcase_add_test(tc, test_lookup_query_of_no_key);
    tcase_add_test(tc, test_modular);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return run_suite(tasks_suite()); }
