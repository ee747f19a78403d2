/* tasks.c - toy tasks: sequences generated from a seed, a held-out split, ideal patterns. */
#include "engine/engine.h"
#include "model/model.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOOKUP_MAX_KEYS 32
#define LOOKUP_VALUES 4     /* values per key at the default vocabulary */
#define TRANSLATE_MAX_WORDS 4096
#define TRANSLATE_SEED 0x7472616e736c6174ull /* "translat": the dictionary, the same for every run */

/* translate's dictionary: source word s (0 .. n-1) means target word n + dict[s], where dict
 * is a Fisher-Yates shuffle of 0 .. n-1 drawn from TRANSLATE_SEED. */
static int32_t translate_word(int n, int32_t s) {
    int32_t dict[TRANSLATE_MAX_WORDS];
    for (int i = 0; i < n; i++) dict[i] = i;
    qkv_rng rng = qkv_rng_seed(TRANSLATE_SEED);
    for (int i = n - 1; i > 0; i--) {
        int j = (int)qkv_rng_below(&rng, (uint32_t)i + 1);
        int32_t t = dict[i];
        dict[i] = dict[j];
        dict[j] = t;
    }
    return n + dict[s];
}

static const char *const task_names[QKV_TASK_COUNT] = {
    "copy", "reverse", "shift", "lookup", "max", "induction", "recall", "sort", "translate",
    "modular", "data"};

const char *qkv_task_name(qkv_task_kind kind) {
    return kind >= 0 && kind < QKV_TASK_COUNT ? task_names[kind] : "?";
}

static const char *const modular_op_names[QKV_MODULAR_OPS] = {"add", "sub", "mul"};

const char *qkv_modular_op_name(qkv_modular_op op) {
    return op >= 0 && op < QKV_MODULAR_OPS ? modular_op_names[op] : "?";
}

#define MODULAR_MODULUS 113 /* modular's default modulus, train share and data seed */
#define MODULAR_TRAIN_FRAC 0.3
#define MODULAR_DATA_SEED 0

int qkv_task_default_vocab(qkv_task_kind kind, int seq_len) {
    if (seq_len < QKV_MIN_TASK_SEQ_LEN) return 0;
    if (kind == QKV_TASK_LOOKUP) return (seq_len - 1) * (LOOKUP_VALUES + 1);
    if (kind == QKV_TASK_RECALL || kind == QKV_TASK_TRANSLATE) return 32;
    if (kind == QKV_TASK_MODULAR) return MODULAR_MODULUS + 1;
    if (kind == QKV_TASK_INDUCTION || kind == QKV_TASK_SORT)
        return seq_len / 2 + 1 > 16 ? seq_len / 2 + 1 : 16;
    return 16;
}

/* induction: the repeated segment has n tokens, n in induction_min_len .. T/2 */
static int induction_min_len(int T) { return T / 4 > 2 ? T / 4 : 2; }

/* log2 of the number of ways to draw k distinct tokens in order from n: n! / (n-k)! */
static double log2_arrangements(int n, int k) {
    return k > n ? -1 : (lgamma(n + 1.0) - lgamma(n - k + 1.0)) / log(2.0);
}

qkv_status qkv_task_init(qkv_task *task, const char *name, int seq_len, int vocab) {
    memset(task, 0, sizeof *task);
    const char *len_name = field_name("seq_len"), *vocab_name = field_name("vocab");
    int k = 0;
    while (k < QKV_TASK_COUNT && strcmp(name, task_names[k]) != 0) k++;
    if (k == QKV_TASK_COUNT)
        return qkv_fail(QKV_ERR_VALUE, "unknown task '%s' (copy, reverse, shift, lookup, max, "
                        "induction, recall, sort, translate, modular)", name);
    task->kind = (qkv_task_kind)k;
    if (task->kind == QKV_TASK_DATA)
        return qkv_fail(QKV_ERR_VALUE, "a task of your own comes from a file: %s", field_name("data_path"));
    if (task->kind == QKV_TASK_MODULAR) {
        if (seq_len != QKV_MODULAR_SEQ_LEN)
            return qkv_fail(QKV_ERR_VALUE, "%s %d does not fit modular: its input is a b = "
                            "(%d tokens)", len_name, seq_len, QKV_MODULAR_SEQ_LEN);
        return qkv_task_modular(task, vocab > 0 ? vocab - 1 : MODULAR_MODULUS, QKV_MODULAR_ADD,
                                MODULAR_TRAIN_FRAC, MODULAR_DATA_SEED);
    }
    if (seq_len < QKV_MIN_TASK_SEQ_LEN || seq_len > QKV_MAX_TASK_SEQ_LEN)
        return qkv_fail(QKV_ERR_VALUE, "%s %d is out of range for %s (%d..%d)", len_name, seq_len,
                        name, QKV_MIN_TASK_SEQ_LEN, QKV_MAX_TASK_SEQ_LEN);
    if (task->kind == QKV_TASK_LOOKUP && seq_len - 1 > LOOKUP_MAX_KEYS)
        return qkv_fail(QKV_ERR_VALUE,
                        "%s %d is too large for lookup: at most %d key-value pairs + 1 query",
                        len_name, seq_len, LOOKUP_MAX_KEYS);
    if (vocab <= 0) vocab = qkv_task_default_vocab(task->kind, seq_len);
    task->seq_len = seq_len;
    task->vocab = vocab;
    task->causal = task->kind == QKV_TASK_SHIFT || task->kind == QKV_TASK_INDUCTION ||
                   task->kind == QKV_TASK_RECALL || task->kind == QKV_TASK_SORT;
    /* The held-out split needs enough distinct sequences: at least 2^12. */
    double log2_sequences = seq_len * log2((double)vocab);
    if (task->kind == QKV_TASK_LOOKUP) {
        task->n_keys = seq_len - 1;
        task->n_values = (vocab - task->n_keys) / task->n_keys;
        if (task->n_values < 2)
            return qkv_fail(QKV_ERR_VALUE,
                            "%s %d is too small for lookup at %s %d: need at least %d "
                            "(%d keys x 2 values + %d query tokens)",
                            vocab_name, vocab, len_name, seq_len, 3 * task->n_keys, task->n_keys, task->n_keys);
        /* keys in any order, a value for each, a queried key: n! * values^n * n sequences */
        int n = task->n_keys;
        log2_sequences = (lgamma(n + 1.0) + n * log((double)task->n_values) + log((double)n)) / log(2.0);
        if (log2_sequences < 12)
            return qkv_fail(QKV_ERR_VALUE,
                            "%s %d is too small for lookup at %s %d: it allows fewer "
                            "than 4096 distinct sequences", vocab_name, vocab, len_name, seq_len);
        return QKV_OK;
    }
    if (task->kind == QKV_TASK_INDUCTION) {
        /* a segment of distinct tokens, repeated to the end */
        if (seq_len < 4)
            return qkv_fail(QKV_ERR_VALUE, "induction needs %s >= 4 (a segment and its "
                            "repeat), not %d", len_name, seq_len);
        if (vocab < seq_len / 2)
            return qkv_fail(QKV_ERR_VALUE, "induction at %s %d needs %s >= %d (the "
                            "segment's distinct tokens)", len_name, seq_len, vocab_name,
                            seq_len / 2);
        log2_sequences = log2_arrangements(vocab, induction_min_len(seq_len));
    }
    if (task->kind == QKV_TASK_RECALL) {
        /* P = T/3 pairs of a key and a value, then T - 2P queried keys */
        task->n_pairs = seq_len / 3;
        task->n_keys = vocab / 2;
        task->n_values = vocab - task->n_keys;
        if (task->n_pairs < 1)
            return qkv_fail(QKV_ERR_VALUE, "recall needs %s >= 3 (a key, its value and a "
                            "query), not %d", len_name, seq_len);
        if (task->n_keys < task->n_pairs || task->n_values < 2) {
            int values = task->n_pairs > 2 ? task->n_pairs : 2; /* V/2 keys, the rest values */
            return qkv_fail(QKV_ERR_VALUE, "recall at %s %d needs %s >= %d (%d distinct keys, "
                            "%d values)", len_name, seq_len, vocab_name,
                            task->n_pairs + values, task->n_pairs, values);
        }
        log2_sequences = log2_arrangements(task->n_keys, task->n_pairs) +
                         task->n_pairs * log2((double)task->n_values);
    }
    if (task->kind == QKV_TASK_SORT) {
        /* n = (T-1)/2 distinct tokens 0 .. V-2, the separator V-1, the n sorted */
        if (seq_len % 2 == 0 || seq_len < 3)
            return qkv_fail(QKV_ERR_VALUE, "%s %d does not fit sort: it needs an odd "
                            "length, n tokens + a separator + the n sorted", len_name, seq_len);
        if (vocab - 1 < (seq_len - 1) / 2)
            return qkv_fail(QKV_ERR_VALUE, "%s %d is too small for sort at %s %d: "
                            "need at least %d (distinct tokens and a separator)", vocab_name, vocab,
                            len_name, seq_len,
                            (seq_len - 1) / 2 + 1);
        log2_sequences = log2_arrangements(vocab - 1, (seq_len - 1) / 2);
    }
    if (task->kind == QKV_TASK_TRANSLATE) {
        /* source tokens 0 .. V/2-1, target tokens V/2 .. V-1 */
        if (seq_len % 2 || vocab % 2 || vocab < 4 || vocab > 2 * TRANSLATE_MAX_WORDS)
            return qkv_fail(QKV_ERR_VALUE, "translate needs an even %s (%d) and an even "
                            "%s in 4..%d (%d): half source words, half target words",
                            len_name, seq_len, vocab_name, 2 * TRANSLATE_MAX_WORDS, vocab);
        task->target_len = seq_len / 2;
        log2_sequences = seq_len * log2(vocab / 2.0);
    }
    if (vocab < 2 || log2_sequences < 12)
        return qkv_fail(QKV_ERR_VALUE,
                        "%s %d is too small for %s at %s %d: it allows fewer than "
                        "4096 distinct sequences", vocab_name, vocab, name, len_name, seq_len);
    return QKV_OK;
}

qkv_status qkv_task_modular(qkv_task *task, int modulus, qkv_modular_op op, double train_frac,
                            uint64_t data_seed) {
    memset(task, 0, sizeof *task);
    task->kind = QKV_TASK_MODULAR;
    if (modulus < 2 || modulus > QKV_MAX_MODULUS)
        return qkv_fail(QKV_ERR_VALUE, "%s %d is out of range (2..%d: its %d pairs are all "
                        "held in memory)", field_name("modulus"), modulus, QKV_MAX_MODULUS,
                        modulus < 2 ? modulus * modulus : QKV_MAX_MODULUS * QKV_MAX_MODULUS);
    if (op < 0 || op >= QKV_MODULAR_OPS)
        return qkv_fail(QKV_ERR_VALUE, "%s %d is not one of add, sub, mul", field_name("op"),
                        (int)op);
    int64_t pairs = (int64_t)modulus * modulus;
    if (!(train_frac > 0 && train_frac < 1))
        return qkv_fail(QKV_ERR_VALUE, "%s %g is out of range (above 0, below 1)",
                        field_name("train_frac"), train_frac);
    int64_t n_train = (int64_t)floor(train_frac * (double)pairs);
    if (n_train < 1 || n_train > pairs - 1)
        return qkv_fail(QKV_ERR_VALUE, "%s %g of the %" PRId64 " pairs of %s %d leaves %s: "
                        "%s", field_name("train_frac"), train_frac, pairs,
                        field_name("modulus"), modulus,
                        n_train < 1 ? "no training pair" : "no held-out pair",
                        n_train < 1 ? "raise it" : "lower it");
    task->seq_len = QKV_MODULAR_SEQ_LEN;
    task->vocab = modulus + 1;
    task->modulus = modulus;
    task->n_train = (int)n_train;
    task->op = op;
    task->train_frac = train_frac;
    task->data_seed = data_seed;
    return QKV_OK;
}

void qkv_task_modular_split(const qkv_task *task, int32_t *order) {
    int32_t N = task->modulus * task->modulus;
    for (int32_t k = 0; k < N; k++) order[k] = k;
    qkv_rng rng = qkv_rng_seed(task->data_seed ^ QKV_MODULAR_SPLIT_XOR);
    for (int32_t i = 0; i < task->n_train; i++) {
        int32_t j = i + (int32_t)qkv_rng_below(&rng, (uint32_t)(N - i)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

/* Whether pair index k trains: the same shuffle as qkv_task_modular_split, following where k
 * goes. It starts at position k; step i swaps positions i and j: k at i moves to j, k at j
 * moves to i, where it stays (later steps swap only later positions). */
static bool modular_trains(const qkv_task *task, int32_t k) {
    int32_t N = task->modulus * task->modulus, at = k;
    qkv_rng rng = qkv_rng_seed(task->data_seed ^ QKV_MODULAR_SPLIT_XOR);
    for (int32_t i = 0; i < task->n_train; i++) {
        int32_t j = i + (int32_t)qkv_rng_below(&rng, (uint32_t)(N - i));
        if (at == i) at = j;
        else if (at == j) return true; /* placed at i < n_train */
    }
    return at < task->n_train;
}

/* modular: (a op b) mod P, of tokens below P */
static int32_t modular_result(const qkv_task *task, int32_t a, int32_t b) {
    int64_t P = task->modulus;
    int64_t r = task->op == QKV_MODULAR_ADD   ? (int64_t)a + b
                : task->op == QKV_MODULAR_SUB ? (int64_t)a - b + P
                                              : (int64_t)a * b;
    return (int32_t)(r % P);
}

/* modular: whether x holds a pair, a b = */
static bool modular_pair(const qkv_task *task, const int32_t *x) {
    int32_t P = task->modulus;
    return x[0] >= 0 && x[0] < P && x[1] >= 0 && x[1] < P && x[2] == P;
}

uint64_t heldout_hash_bytes(uint64_t h, const unsigned char *bytes, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h ^= bytes[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t heldout_hash_finish(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

bool heldout_picks(uint64_t hash) { return hash % HELDOUT_SHARE == 0; }

/* The held-out hash of a sequence: its tokens' little-endian bytes. */
static uint64_t sequence_hash(const int32_t *tokens, int n) {
    uint64_t h = HELDOUT_HASH_START;
    for (int i = 0; i < n; i++) {
        uint32_t t = (uint32_t)tokens[i];
        unsigned char le[4] = {t & 0xff, (t >> 8) & 0xff, (t >> 16) & 0xff, t >> 24};
        h = heldout_hash_bytes(h, le, sizeof le);
    }
    return heldout_hash_finish(h);
}

bool qkv_task_is_heldout(const qkv_task *task, const int32_t *tokens) {
    if (task->kind == QKV_TASK_MODULAR)
        return modular_pair(task, tokens) &&
               !modular_trains(task, tokens[0] * task->modulus + tokens[1]);
    return heldout_picks(sequence_hash(tokens, task->seq_len));
}

/* k distinct tokens from `first` .. `first + n - 1` into x (k <= n): each is first +
 * below(n), drawn again while it equals an earlier one. O(k^2), and k is at most T. */
static void draw_distinct(qkv_rng *rng, int first, int n, int k, int32_t *x) {
    for (int i = 0; i < k; i++) {
        bool seen;
        do {
            x[i] = first + (int32_t)qkv_rng_below(rng, (uint32_t)n);
            seen = false;
            for (int j = 0; j < i; j++) seen |= x[j] == x[i];
        } while (seen);
    }
}

static int compare_int32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The tasks that draw structured sequences: induction, recall, sort. */
static void draw_structured(const qkv_task *task, qkv_rng *rng, int32_t *x) {
    int T = task->seq_len, V = task->vocab;
    if (task->kind == QKV_TASK_INDUCTION) {
        /* n = min + below(T/2 - min + 1); a segment of n distinct tokens, repeated to the end */
        int lo = induction_min_len(T), n = lo + (int)qkv_rng_below(rng, (uint32_t)(T / 2 - lo + 1));
        draw_distinct(rng, 0, V, n, x);
        for (int i = n; i < T; i++) x[i] = x[i - n];
    } else if (task->kind == QKV_TASK_RECALL) {
        /* P distinct keys, each followed by a random value, then T - 2P keys drawn from them */
        int P = task->n_pairs;
        int32_t keys[QKV_MAX_TASK_SEQ_LEN];
        draw_distinct(rng, 0, task->n_keys, P, keys);
        for (int p = 0; p < P; p++) {
            x[2 * p] = keys[p];
            x[2 * p + 1] = task->n_keys + (int32_t)qkv_rng_below(rng, (uint32_t)task->n_values);
        }
        for (int i = 2 * P; i < T; i++) x[i] = keys[qkv_rng_below(rng, (uint32_t)P)];
    } else { /* sort */
        int n = (T - 1) / 2;
        draw_distinct(rng, 0, V - 1, n, x);
        x[n] = V - 1;
        memcpy(x + n + 1, x, (size_t)n * sizeof *x);
        qsort(x + n + 1, (size_t)n, sizeof *x, compare_int32);
    }
}

static void draw_tokens(const qkv_task *task, qkv_rng *rng, int32_t *x) {
    int T = task->seq_len;
    if (task->kind == QKV_TASK_INDUCTION || task->kind == QKV_TASK_RECALL ||
        task->kind == QKV_TASK_SORT) {
        draw_structured(task, rng, x);
        return;
    }
    if (task->kind == QKV_TASK_TRANSLATE) {
        for (int i = 0; i < T; i++) x[i] = (int32_t)qkv_rng_below(rng, (uint32_t)task->vocab / 2);
        return;
    }
    if (task->kind == QKV_TASK_MODULAR) { /* a, b, then = */
        x[0] = (int32_t)qkv_rng_below(rng, (uint32_t)task->modulus);
        x[1] = (int32_t)qkv_rng_below(rng, (uint32_t)task->modulus);
        x[2] = task->modulus;
        return;
    }
    if (task->kind != QKV_TASK_LOOKUP) {
        for (int i = 0; i < T; i++) x[i] = (int32_t)qkv_rng_below(rng, (uint32_t)task->vocab);
        return;
    }
    /* Every key once, in a random order (Fisher-Yates), each with a random value. */
    int keys[LOOKUP_MAX_KEYS];
    for (int i = 0; i < task->n_keys; i++) keys[i] = i;
    for (int i = task->n_keys - 1; i > 0; i--) {
        int j = (int)qkv_rng_below(rng, (uint32_t)i + 1), t = keys[i];
        keys[i] = keys[j];
        keys[j] = t;
    }
    for (int i = 0; i < T - 1; i++)
        x[i] = keys[i] * task->n_values + (int32_t)qkv_rng_below(rng, (uint32_t)task->n_values);
    x[T - 1] = task->n_keys * task->n_values + (int32_t)qkv_rng_below(rng, (uint32_t)task->n_keys);
}

/* induction: the segment's length n, where x[0] first comes back (its tokens are distinct). */
static int induction_segment(const qkv_task *task, const int32_t *x) {
    int n = 1;
    while (n < task->seq_len && x[n] != x[0]) n++;
    return n;
}

/* recall: the position of the value paired with the key at query position i (the first
 * pair that holds the key), or -1 if no pair holds it. */
static int recall_value_at(const qkv_task *task, const int32_t *x, int i) {
    for (int p = 0; p < task->n_pairs; p++)
        if (x[2 * p] == x[i]) return 2 * p + 1;
    return -1;
}

/* lookup: whether `token` is a pair of key `key` (a query token is no pair). */
static bool lookup_pair_of(const qkv_task *task, int32_t token, int key) {
    return token < task->n_keys * task->n_values && token / task->n_values == key;
}

/* The token at position i of x leaves a target undefined: QKV_ERR_VALUE naming it. */
static qkv_status no_target(const qkv_task *task, const int32_t *x, int i, const char *why, ...)
    __attribute__((format(printf, 4, 5)));
static qkv_status no_target(const qkv_task *task, const int32_t *x, int i, const char *why, ...) {
    char label[32], reason[400];
    qkv_task_token_label(task, x[i], label, sizeof label);
    va_list ap;
    va_start(ap, why);
    vsnprintf(reason, sizeof reason, why, ap);
    va_end(ap);
    return qkv_fail(QKV_ERR_VALUE, "position %d holds '%s', %s", i, label, reason);
}

/* The first token of x[T] for which the task defines no target, refused by no_target; QKV_OK
 * when every target is defined. */
static qkv_status check_targets_defined(const qkv_task *task, const int32_t *x) {
    int T = task->seq_len, V = task->vocab;
    for (int i = 0; i < T; i++)
        if (x[i] < 0 || x[i] >= V)
            return qkv_fail(QKV_ERR_VALUE, "position %d holds token %d, which is not a token of "
                            "%s (0..%d)", i, (int)x[i], qkv_task_name(task->kind), V - 1);
    if (task->kind == QKV_TASK_MODULAR) /* a b =: numbers, then = */
        for (int i = 0; i < T; i++)
            if ((i < T - 1) == (x[i] == task->modulus))
                return no_target(task, x, i, "%s: modular's input is a b =, two numbers "
                                 "(0..%d) and =", i < T - 1 ? "= before the last position"
                                 : "a number at the last position", task->modulus - 1);
    if (task->kind == QKV_TASK_TRANSLATE) /* target i translates source position 2i+1 */
        for (int i = 0; i < T; i++)
            if (x[i] >= V / 2)
                return no_target(task, x, i, "a target word: translate's input holds source "
                                 "words (s0..s%d), whose translations are the targets", V / 2 - 1);
    if (task->kind == QKV_TASK_RECALL) /* every query names one key of the pairs, one value */
        for (int i = 2 * task->n_pairs; i < T; i++) {
            int at = recall_value_at(task, x, i);
            if (at < 0)
                return no_target(task, x, i, "a query of a key that none of the %d pairs before "
                                 "position %d holds: recall's target is the queried key's "
                                 "value", task->n_pairs, 2 * task->n_pairs);
            for (int p = at + 2; p < 2 * task->n_pairs; p += 2) /* later value positions */
                if (x[p - 1] == x[i] && x[p] != x[at])
                    return no_target(task, x, i, "a query of a key that two pairs give "
                                     "different values (positions %d and %d)", at, p);
        }
    if (task->kind == QKV_TASK_LOOKUP) { /* the query's key has one value among the pairs */
        int key = x[T - 1] - task->n_keys * task->n_values, at = -1;
        for (int j = 0; j < T - 1 && key >= 0; j++) {
            if (!lookup_pair_of(task, x[j], key)) continue;
            if (at >= 0 && x[j] % task->n_values != x[at] % task->n_values)
                return no_target(task, x, T - 1, "a query of a key that two pairs give "
                                 "different values (positions %d and %d)", at, j);
            at = at < 0 ? j : at;
        }
    }
    return QKV_OK;
}

/* The targets of x, every one of them defined (check_targets_defined). */
static void fill_targets(const qkv_task *task, const int32_t *x, int32_t *y) {
    int T = task->seq_len;
    if (task->kind == QKV_TASK_MODULAR) { /* one target, at = */
        y[0] = y[1] = -1;
        y[2] = modular_result(task, x[0], x[1]);
        return;
    }
    if (task->kind == QKV_TASK_TRANSLATE) { /* T/2 targets */
        for (int i = 0; i < task->target_len; i++)
            y[i] = translate_word(task->vocab / 2, x[2 * i + 1]);
        return;
    }
    int32_t max = x[0];
    for (int i = 1; i < T; i++) max = x[i] > max ? x[i] : max;
    for (int i = 0; i < T; i++) {
        switch (task->kind) {
        case QKV_TASK_COPY: y[i] = x[i]; break;
        case QKV_TASK_REVERSE: y[i] = x[T - 1 - i]; break;
        case QKV_TASK_SHIFT: y[i] = i ? x[i - 1] : -1; break;
        case QKV_TASK_LOOKUP: y[i] = -1; break;
        case QKV_TASK_MAX: y[i] = max; break;
        default: y[i] = -1; /* set below */
        }
    }
    if (task->kind == QKV_TASK_LOOKUP) {
        int key = x[T - 1] - task->n_keys * task->n_values;
        for (int i = 0; i < T - 1; i++)
            if (lookup_pair_of(task, x[i], key)) y[T - 1] = x[i] % task->n_values;
    }
    if (task->kind == QKV_TASK_INDUCTION) {
        int n = induction_segment(task, x);
        for (int i = n; i < T - 1; i++) y[i] = x[i + 1];
    }
    if (task->kind == QKV_TASK_RECALL)
        for (int i = 2 * task->n_pairs; i < T; i++) y[i] = x[recall_value_at(task, x, i)];
    if (task->kind == QKV_TASK_SORT) /* the separator and each output but the last: the next */
        for (int i = (T - 1) / 2; i < T - 1; i++) y[i] = x[i + 1];
}

qkv_status qkv_task_targets(const qkv_task *task, const int32_t *x, int32_t *y) {
    qkv_status s = check_targets_defined(task, x);
    if (s == QKV_OK) fill_targets(task, x, y);
    return s;
}

void qkv_task_sample(const qkv_task *task, qkv_rng *rng, bool heldout, int32_t *x, int32_t *y) {
    do draw_tokens(task, rng, x);
    while (qkv_task_is_heldout(task, x) != heldout);
    fill_targets(task, x, y); /* a drawn sequence's targets are all defined */
}

void qkv_task_ideal(const qkv_task *task, const int32_t *x, uint8_t *ideal) {
    int T = task->seq_len;
    memset(ideal, 0, (size_t)T * (size_t)T);
    int32_t max = x[0];
    for (int i = 1; i < T; i++) max = x[i] > max ? x[i] : max;
    for (int i = 0; i < T; i++) {
        uint8_t *row = ideal + (size_t)i * (size_t)T;
        switch (task->kind) {
        case QKV_TASK_COPY: row[i] = 1; break;
        case QKV_TASK_REVERSE: row[T - 1 - i] = 1; break;
        case QKV_TASK_SHIFT:
            if (i) row[i - 1] = 1;
            break;
        case QKV_TASK_LOOKUP:
            if (i == T - 1) {
                int key = x[T - 1] - task->n_keys * task->n_values;
                for (int j = 0; j < T - 1; j++) row[j] = lookup_pair_of(task, x[j], key);
            }
            break;
        case QKV_TASK_MAX:
            for (int j = 0; j < T; j++) row[j] = x[j] == max;
            break;
        default: break;
        }
    }
    if (task->kind == QKV_TASK_TRANSLATE) /* decoder position i -> source position 2i+1 */
        for (int i = 0; i < task->target_len; i++) ideal[(size_t)i * T + 2 * i + 1] = 1;
    if (task->kind == QKV_TASK_MODULAR) /* = reads both numbers */
        ideal[2 * T + 0] = ideal[2 * T + 1] = 1;
    if (task->kind == QKV_TASK_INDUCTION) { /* the token after the earlier copy */
        int n = induction_segment(task, x);
        for (int i = n; i < T - 1; i++) /* every earlier copy: the segment repeats */
            for (int j = i - n + 1; j > 0; j -= n) ideal[(size_t)i * T + j] = 1;
    }
    if (task->kind == QKV_TASK_RECALL) /* the value paired with the queried key */
        for (int i = 2 * task->n_pairs; i < T; i++)
            for (int at = recall_value_at(task, x, i); at >= 0; at = -1) ideal[(size_t)i * T + at] = 1;
    if (task->kind == QKV_TASK_SORT) /* the input position holding the next larger token */
        for (int i = (T - 1) / 2; i < T - 1; i++)
            for (int j = 0; j < (T - 1) / 2; j++) ideal[(size_t)i * T + j] = x[j] == x[i + 1];
}

void qkv_task_ideal_layer(const qkv_task *task, const int32_t *x, int layer, int layers,
                          uint8_t *ideal) {
    qkv_task_ideal(task, x, ideal);
    bool two_step = task->kind == QKV_TASK_INDUCTION || task->kind == QKV_TASK_RECALL;
    if (!two_step || layer == layers - 1) return;
    /* the earlier layers of a two-step task: the previous token, on every row but the first */
    int T = task->seq_len;
    memset(ideal, 0, (size_t)T * (size_t)T);
    for (int i = 1; i < T; i++) ideal[(size_t)i * T + i - 1] = 1;
}

int qkv_task_min_layers(const qkv_task *task) {
    return task->kind == QKV_TASK_INDUCTION || task->kind == QKV_TASK_RECALL ? 2 : 1;
}

double qkv_task_chance(const qkv_task *task) {
    switch (task->kind) {
    case QKV_TASK_LOOKUP:
    case QKV_TASK_RECALL: return 1.0 / task->n_values;
    case QKV_TASK_SORT: return 1.0 / (task->vocab - 1);
    case QKV_TASK_TRANSLATE: return 2.0 / task->vocab;
    case QKV_TASK_MODULAR: return 1.0 / task->modulus;
    case QKV_TASK_DATA: return task->n_outputs ? 1.0 / task->n_outputs : 1;
    default: return 1.0 / task->vocab;
    }
}

void qkv_task_token_label(const qkv_task *task, int32_t t, char *buf, size_t len) {
    if (task->kind == QKV_TASK_TRANSLATE)
        snprintf(buf, len, t < task->vocab / 2 ? "s%d" : "w%d", t < task->vocab / 2 ? t : t - task->vocab / 2);
    else if (task->kind == QKV_TASK_SORT && t == task->vocab - 1)
        snprintf(buf, len, "|");
    else if (task->kind == QKV_TASK_MODULAR && t == task->modulus)
        snprintf(buf, len, "=");
    else if (task->kind == QKV_TASK_RECALL)
        snprintf(buf, len, t < task->n_keys ? "k%d" : "v%d", t < task->n_keys ? t : t - task->n_keys);
    else if (task->kind != QKV_TASK_LOOKUP)
        snprintf(buf, len, "%d", t);
    else if (t >= task->n_keys * task->n_values)
        snprintf(buf, len, "?k%d", t - task->n_keys * task->n_values);
    else
        snprintf(buf, len, "k%d:v%d", t / task->n_values, t % task->n_values);
}
