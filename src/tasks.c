/* tasks.c - toy tasks: sequences generated from a seed, a held-out split, ideal patterns. */
#include "internal.h"

#define TASK_MAX_SEQ 4096
#define LOOKUP_MAX_KEYS 32
#define LOOKUP_VALUES 4     /* values per key at the default vocabulary */
#define HELDOUT_SHARE 8     /* one sequence in 8 is held out */

static const char *const task_names[QKV_TASK_COUNT] = {"copy", "reverse", "shift", "lookup",
                                                       "max"};

const char *qkv_task_name(qkv_task_kind kind) {
    return kind >= 0 && kind < QKV_TASK_COUNT ? task_names[kind] : "?";
}

int qkv_task_default_vocab(qkv_task_kind kind, int seq_len) {
    if (seq_len < 2) return 0;
    return kind == QKV_TASK_LOOKUP ? (seq_len - 1) * (LOOKUP_VALUES + 1) : 16;
}

qkv_status qkv_task_init(qkv_task *task, const char *name, int seq_len, int vocab) {
    memset(task, 0, sizeof *task);
    int k = 0;
    while (k < QKV_TASK_COUNT && strcmp(name, task_names[k]) != 0) k++;
    if (k == QKV_TASK_COUNT)
        return qkv_fail(QKV_ERR_VALUE, "unknown task '%s' (copy, reverse, shift, lookup, max)",
                        name);
    task->kind = (qkv_task_kind)k;
    if (seq_len < 2 || seq_len > TASK_MAX_SEQ)
        return qkv_fail(QKV_ERR_VALUE, "--seq-len %d is out of range for %s (2..%d)", seq_len,
                        name, TASK_MAX_SEQ);
    if (task->kind == QKV_TASK_LOOKUP && seq_len - 1 > LOOKUP_MAX_KEYS)
        return qkv_fail(QKV_ERR_VALUE,
                        "--seq-len %d is too large for lookup: at most %d key-value pairs + 1 query",
                        seq_len, LOOKUP_MAX_KEYS);
    if (vocab <= 0) vocab = qkv_task_default_vocab(task->kind, seq_len);
    task->seq_len = seq_len;
    task->vocab = vocab;
    task->causal = task->kind == QKV_TASK_SHIFT;
    /* The held-out split needs enough distinct sequences: at least 2^12. */
    double log2_sequences = seq_len * log2((double)vocab);
    if (task->kind == QKV_TASK_LOOKUP) {
        task->n_keys = seq_len - 1;
        task->n_values = (vocab - task->n_keys) / task->n_keys;
        if (task->n_values < 2)
            return qkv_fail(QKV_ERR_VALUE,
                            "--vocab %d is too small for lookup at --seq-len %d: need at least %d "
                            "(%d keys x 2 values + %d query tokens)",
                            vocab, seq_len, 3 * task->n_keys, task->n_keys, task->n_keys);
        /* keys in any order, a value for each, a queried key: n! * values^n * n sequences */
        int n = task->n_keys;
        log2_sequences = (lgamma(n + 1.0) + n * log((double)task->n_values) + log((double)n)) / log(2.0);
        if (log2_sequences < 12)
            return qkv_fail(QKV_ERR_VALUE,
                            "--vocab %d is too small for lookup at --seq-len %d: it allows fewer "
                            "than 4096 distinct sequences", vocab, seq_len);
        return QKV_OK;
    }
    if (vocab < 2 || log2_sequences < 12)
        return qkv_fail(QKV_ERR_VALUE,
                        "--vocab %d is too small for %s at --seq-len %d: it allows fewer than "
                        "4096 distinct sequences", vocab, name, seq_len);
    return QKV_OK;
}

/* FNV-1a over the tokens' little-endian bytes, then the murmur3 fmix64 finalizer: decides the
 * held-out split, the same on every machine. */
static uint64_t sequence_hash(const int32_t *tokens, int n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++) {
        uint32_t t = (uint32_t)tokens[i];
        for (int b = 0; b < 4; b++) {
            h ^= (t >> (8 * b)) & 0xff;
            h *= 0x100000001b3ull;
        }
    }
    /* FNV-1a's low bits depend only on the inputs' low bits (its prime is odd), so a split on
     * h % 8 would see only tokens mod 8 and could hold out nothing at all. The murmur3
     * finalizer mixes every bit into the low ones. */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

bool qkv_task_is_heldout(const qkv_task *task, const int32_t *tokens) {
    return sequence_hash(tokens, task->seq_len) % HELDOUT_SHARE == 0;
}

static void draw_tokens(const qkv_task *task, qkv_rng *rng, int32_t *x) {
    int T = task->seq_len;
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

void qkv_task_sample(const qkv_task *task, qkv_rng *rng, bool heldout, int32_t *x, int32_t *y) {
    int T = task->seq_len;
    do draw_tokens(task, rng, x);
    while (qkv_task_is_heldout(task, x) != heldout);
    int32_t max = x[0];
    for (int i = 1; i < T; i++) max = x[i] > max ? x[i] : max;
    for (int i = 0; i < T; i++) {
        switch (task->kind) {
        case QKV_TASK_COPY: y[i] = x[i]; break;
        case QKV_TASK_REVERSE: y[i] = x[T - 1 - i]; break;
        case QKV_TASK_SHIFT: y[i] = i ? x[i - 1] : -1; break;
        case QKV_TASK_LOOKUP: y[i] = -1; break;
        case QKV_TASK_MAX: y[i] = max; break;
        default: y[i] = -1;
        }
    }
    if (task->kind == QKV_TASK_LOOKUP) {
        int key = x[T - 1] - task->n_keys * task->n_values;
        for (int i = 0; i < T - 1; i++)
            if (x[i] / task->n_values == key) y[T - 1] = x[i] % task->n_values;
    }
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
                for (int j = 0; j < T - 1; j++) row[j] = x[j] / task->n_values == key;
            }
            break;
        case QKV_TASK_MAX:
            for (int j = 0; j < T; j++) row[j] = x[j] == max;
            break;
        default: break;
        }
    }
}

void qkv_task_token_label(const qkv_task *task, int32_t t, char *buf, size_t len) {
    if (task->kind != QKV_TASK_LOOKUP)
        snprintf(buf, len, "%d", t);
    else if (t >= task->n_keys * task->n_values)
        snprintf(buf, len, "?k%d", t - task->n_keys * task->n_values);
    else
        snprintf(buf, len, "k%d:v%d", t / task->n_values, t % task->n_values);
}
