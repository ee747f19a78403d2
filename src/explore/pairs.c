/* pairs.c - sets of clean/corrupted input pairs for qkv patch (pairs.h). */
#include "explore/pairs.h"
#include "io/io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pair_set_free(pair_set *p) {
    free(p->clean), free(p->corrupt), free(p->clean_len), free(p->corrupt_len);
    free(p->metric), free(p->line), free(p->partner);
    memset(p, 0, sizeof *p);
}

/* Room for `want` pairs of T tokens; QKV_ERR_NOMEM. */
static qkv_status reserve(pair_set *p, int *cap, int want, int T) {
    if (want <= *cap) return QKV_OK;
    int c = *cap ? *cap * 2 : 64;
    while (c < want) c *= 2;
    void *a = realloc(p->clean, (size_t)c * T * sizeof *p->clean);
    if (a) p->clean = a;
    void *b = realloc(p->corrupt, (size_t)c * T * sizeof *p->corrupt);
    if (b) p->corrupt = b;
    void *d = realloc(p->clean_len, (size_t)c * sizeof *p->clean_len);
    if (d) p->clean_len = d;
    void *e = realloc(p->corrupt_len, (size_t)c * sizeof *p->corrupt_len);
    if (e) p->corrupt_len = e;
    void *f = realloc(p->metric, (size_t)c * sizeof *p->metric);
    if (f) p->metric = f;
    void *g = realloc(p->line, (size_t)c * sizeof *p->line);
    if (g) p->line = g;
    if (!a || !b || !d || !e || !f || !g)
        return qkv_fail(QKV_ERR_NOMEM, "out of memory for %d pairs", c);
    *cap = c;
    return QKV_OK;
}

/* Pair k's inputs from in[0] (clean) and in[1] (corrupt). */
static void store(pair_set *p, int k, int T, const explain_input *in) {
    memcpy(p->clean + (size_t)k * T, in[0].tokens, (size_t)T * sizeof *p->clean);
    memcpy(p->corrupt + (size_t)k * T, in[1].tokens, (size_t)T * sizeof *p->corrupt);
    p->clean_len[k] = in[0].len, p->corrupt_len[k] = in[1].len;
}

/* The metric's position of a pair: `position` checked, or the clean input's default. */
static qkv_status pair_position(const loaded_model *lm, const explain_input *clean, int position,
                                const char *where, int *out) {
    *out = position >= 0 ? position : explain_default_position(lm, clean);
    if (*out < 0)
        return qkv_fail(QKV_ERR_VALUE, "%s: the clean input has no position with a target", where);
    qkv_status s = explain_check_position(lm, clean, *out);
    return s == QKV_OK ? s : qkv_fail(s, "%s: %s", where, qkv_last_error());
}

/* The tab-separated fields of line (at most 5 looked for): their count. */
static int split_fields(char *line, char **field) {
    int n = 0;
    for (char *p = line; n < 5; n++) {
        field[n] = p;
        char *tab = strchr(p, '\t');
        if (!tab) return n + 1;
        *tab = '\0';
        p = tab + 1;
    }
    return n;
}

qkv_status pair_set_read(pair_set *p, loaded_model *lm, const char *path, int position,
                         explain_metric metric) {
    memset(p, 0, sizeof *p);
    FILE *f;
    qkv_status s = io_fopen_regular(path, &f);
    if (s != QKV_OK) return s;
    int T = lm->model.cfg.seq_len, cap = 0;
    explain_input *in = malloc(2 * sizeof *in);
    char *buf = NULL, where[FILE_PATH_LEN + 48];
    size_t bufcap = 0;
    ssize_t got;
    int64_t line = 0;
    if (!in) s = qkv_fail(QKV_ERR_NOMEM, "out of memory");
    /* errno tells a line that did not fit in memory (ENOMEM) from the end of the file */
    while (s == QKV_OK && (errno = 0, got = getline(&buf, &bufcap, f)) >= 0) {
        line++;
        size_t len = strlen(buf);
        if ((size_t)got != len) {
            s = qkv_fail(QKV_ERR_VALUE, "%s line %lld: a NUL byte", path, (long long)line);
            break;
        }
        if (len && buf[len - 1] == '\n') buf[--len] = '\0';
        if (len && buf[len - 1] == '\r') buf[--len] = '\0';
        if (line == 1 && !strncmp(buf, "\xef\xbb\xbf", 3)) memmove(buf, buf + 3, (len -= 3) + 1);
        if (!buf[strspn(buf, " \t")]) continue; /* blank */
        char *field[5] = {0};
        int nf = split_fields(buf, field);
        snprintf(where, sizeof where, "%s line %lld", path, (long long)line);
        if (nf < 2 || nf > 4) {
            s = qkv_fail(QKV_ERR_VALUE, "%s: %d tab-separated field%s; a pair is clean, a tab, "
                         "corrupt, and optionally a tab and the answer, a tab and the wrong "
                         "token", where, nf, nf == 1 ? "" : "s");
            break;
        }
        char what[FILE_PATH_LEN + 64];
        snprintf(what, sizeof what, "%s (clean)", where);
        if ((s = explain_read_input(lm, what, field[0], &in[0])) != QKV_OK) break;
        snprintf(what, sizeof what, "%s (corrupt)", where);
        if ((s = explain_read_input(lm, what, field[1], &in[1])) != QKV_OK) break;
        if (in[0].n != in[1].n) {
            s = qkv_fail(QKV_ERR_VALUE, "%s: the clean input has %d tokens and the corrupted "
                         "%d: a pair's inputs have one length", where, in[0].n, in[1].n);
            break;
        }
        /* one length for every pair, on every model: the inputs' (an encoder-decoder's
         * positions are its decoder's, the same for every pair, its keys the inputs') */
        if (p->n && in[0].n != p->keys) {
            s = qkv_fail(QKV_ERR_VALUE, "%s: inputs of %d tokens, but the first pair's have %d: "
                         "every pair has one length", where, in[0].n, p->keys);
            break;
        }
        if ((s = reserve(p, &cap, p->n + 1, T)) != QKV_OK) break;
        patch_metric *m = &p->metric[p->n];
        if ((s = pair_position(lm, &in[0], position, where, &m->position)) != QKV_OK) break;
        snprintf(what, sizeof what, "%s (answer)", where);
        m->answer = nf > 2 ? explain_read_class(lm, what, field[2]) : -1;
        snprintf(what, sizeof what, "%s (wrong)", where);
        m->wrong = nf > 3 ? explain_read_class(lm, what, field[3]) : -1;
        if ((nf > 2 && m->answer < 0) || (nf > 3 && m->wrong < 0)) {
            s = QKV_ERR_VALUE;
            break;
        }
        store(p, p->n, T, in);
        p->positions = lm->model.cfg.target_len ? lm->target_len : in[0].n;
        p->keys = in[0].n;
        p->line[p->n++] = line;
    }
    if (s == QKV_OK && errno == ENOMEM)
        s = qkv_fail(QKV_ERR_NOMEM, "%s line %lld: out of memory for the line", path,
                     (long long)line + 1);
    else if (s == QKV_OK && ferror(f))
        s = qkv_fail(QKV_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    if (s == QKV_OK && p->n == 0)
        s = qkv_fail(QKV_ERR_VALUE, "%s holds no pairs (lines of clean tokens, a tab, corrupted "
                     "tokens)", path);
    free(buf), free(in);
    fclose(f);
    if (s == QKV_OK)
        s = explain_fill_predictions(lm, p->clean, p->corrupt, p->clean_len, p->corrupt_len,
                                     p->n, p->metric,
                                     metric == EXPLAIN_METRIC_LOGIT_DIFF ? path : NULL, p->line);
    /* what is wrong is the file's (a line of it, or no pair at all): exit 4, as a bad line of
     * every file qkv reads (docs/errors.md) */
    return s == QKV_ERR_VALUE ? qkv_fail(QKV_ERR_FORMAT, "%s", qkv_last_error()) : s;
}

/* resample: the segment's first occurrence x[0 .. n) drawn again, distinct tokens that avoid
 * the segment's own where the vocabulary allows; the repeat is kept. */
static void resample_segment(const qkv_task *task, qkv_rng *rng, const int32_t *x, int32_t *out) {
    int T = task->seq_len, V = task->vocab, n = 1;
    while (n < T && x[n] != x[0]) n++;
    memcpy(out, x, (size_t)T * sizeof *out);
    unsigned char used[QKV_MAX_VOCAB > 65536 ? 65536 : QKV_MAX_VOCAB] = {0};
    bool avoid = V >= 2 * n && V <= (int)sizeof used;
    for (int i = 0; avoid && i < n; i++) used[x[i]] = 1;
    for (int i = 0; i < n; i++) {
        int32_t tok;
        bool fresh;
        do {
            tok = (int32_t)qkv_rng_below(rng, (uint32_t)V);
            fresh = !(avoid && used[tok]);
            for (int j = 0; fresh && j < i; j++) fresh = out[j] != tok;
        } while (!fresh);
        out[i] = tok;
    }
}

/* shuffle: the pairs' values dealt out to their keys again (a random permutation). */
static void shuffle_values(const qkv_task *task, qkv_rng *rng, const int32_t *x, int32_t *out) {
    int T = task->seq_len, nv = task->n_values;
    memcpy(out, x, (size_t)T * sizeof *out);
    for (int i = T - 2; i > 0; i--) { /* Fisher-Yates over the T - 1 pairs' values */
        int j = (int)qkv_rng_below(rng, (uint32_t)i + 1);
        int32_t vi = out[i] % nv, vj = out[j] % nv;
        out[i] = out[i] - vi + vj, out[j] = out[j] - vj + vi;
    }
}

/* Example e's input length (T for a task's model). */
static int held_length(const loaded_model *lm, int e) {
    return lm->held_lengths ? lm->held_lengths[e] : lm->model.cfg.seq_len;
}

/* other: each held-out example with another of its length whose target at the position
 * differs (pairs.h). */
static qkv_status pair_other(pair_set *p, loaded_model *lm, int position, uint64_t seed) {
    int T = lm->model.cfg.seq_len, To = lm->target_len, n = lm->n_held, cap = 0;
    qkv_rng rng = qkv_rng_seed(seed);
    explain_input *in = calloc(2, sizeof *in);
    p->partner = malloc((size_t)(n > 0 ? n : 1) * sizeof *p->partner);
    qkv_status s = in && p->partner ? reserve(p, &cap, n > 0 ? n : 1, T)
                                    : qkv_fail(QKV_ERR_NOMEM, "out of memory");
    for (int e = 0; s == QKV_OK && e < n; e++) {
        const int32_t *y = lm->held_targets + (size_t)e * To;
        int len = held_length(lm, e), at = position;
        if (at < 0) /* the last position with a target */
            for (int i = 0; i < To; i++) at = y[i] >= 0 ? i : at;
        if (at < 0 || at >= To || y[at] < 0 || (!lm->model.cfg.target_len && at >= len)) {
            p->skipped++;
            continue;
        }
        int count = 0, pick = -1;
        for (int f = 0; f < n; f++) {
            int32_t yf = lm->held_targets[(size_t)f * To + at];
            count += f != e && held_length(lm, f) == len && yf >= 0 && yf != y[at];
        }
        if (count == 0) {
            p->skipped++;
            continue;
        }
        int r = (int)qkv_rng_below(&rng, (uint32_t)count);
        for (int f = 0; pick < 0; f++) {
            int32_t yf = lm->held_targets[(size_t)f * To + at];
            if (f != e && held_length(lm, f) == len && yf >= 0 && yf != y[at] && r-- == 0) pick = f;
        }
        memcpy(in[0].tokens, lm->held_tokens + (size_t)e * T, (size_t)T * sizeof(int32_t));
        memcpy(in[1].tokens, lm->held_tokens + (size_t)pick * T, (size_t)T * sizeof(int32_t));
        in[0].n = in[0].len = in[1].n = in[1].len = len;
        p->metric[p->n] = (patch_metric){at, y[at], lm->held_targets[(size_t)pick * To + at]};
        store(p, p->n, T, in);
        p->partner[p->n] = pick + 1;
        p->line[p->n++] = e + 1;
        p->keys = len > p->keys ? len : p->keys;
    }
    p->positions = lm->model.cfg.target_len ? To : p->keys;
    free(in);
    if (s == QKV_OK && p->n == 0)
        s = qkv_fail(QKV_ERR_VALUE, "--corrupt-from other: no held-out example (of %d) has "
                     "another of its length whose target differs at %s: nothing to patch", n,
                     position >= 0 ? "--position" : "its own last position with a target");
    return s;
}

qkv_status pair_set_corrupt_from(pair_set *p, loaded_model *lm, corrupt_kind kind, int position,
                                 uint64_t seed) {
    memset(p, 0, sizeof *p);
    p->other = kind == CORRUPT_OTHER;
    if (kind == CORRUPT_OTHER) return pair_other(p, lm, position, seed);
    const qkv_task *task = &lm->cfg.task;
    qkv_task_kind need = kind == CORRUPT_RESAMPLE ? QKV_TASK_INDUCTION : QKV_TASK_LOOKUP;
    if (lm->data || task->kind != need)
        return qkv_fail(QKV_ERR_VALUE, "--corrupt-from %s builds corrupted inputs for a%s %s "
                        "model; this is a%s %s model", kind == CORRUPT_RESAMPLE ? "resample"
                                                                                : "shuffle",
                        need == QKV_TASK_INDUCTION ? "n" : "", qkv_task_name(need),
                        lm->data ? "" : task->kind == QKV_TASK_INDUCTION ? "n" : "",
                        lm->data ? "data file's" : qkv_task_name(task->kind));
    int T = lm->model.cfg.seq_len, cap = 0;
    explain_input *in = malloc(2 * sizeof *in);
    qkv_status s = in ? reserve(p, &cap, lm->n_held, T)
                      : qkv_fail(QKV_ERR_NOMEM, "out of memory");
    qkv_rng rng = qkv_rng_seed(seed);
    for (int e = 0; s == QKV_OK && e < lm->n_held; e++) {
        memset(in, 0, 2 * sizeof *in);
        const int32_t *x = lm->held_tokens + (size_t)e * T;
        memcpy(in[0].tokens, x, (size_t)T * sizeof *x);
        if (kind == CORRUPT_RESAMPLE) resample_segment(task, &rng, x, in[1].tokens);
        else shuffle_values(task, &rng, x, in[1].tokens);
        in[0].n = in[0].len = in[1].n = in[1].len = T;
        char where[64];
        snprintf(where, sizeof where, "held-out example %d", e + 1);
        s = explain_task_targets(lm, QKV_ERR_VALUE, where, in[0].tokens, in[0].targets);
        if (s != QKV_OK) break;
        patch_metric *m = &p->metric[p->n];
        if ((s = pair_position(lm, &in[0], position, where, &m->position)) != QKV_OK) break;
        m->answer = in[0].targets[m->position], m->wrong = -1;
        store(p, p->n, T, in);
        p->line[p->n++] = e + 1;
    }
    p->positions = p->keys = T;
    free(in);
    if (s == QKV_OK)
        s = explain_fill_predictions(lm, p->clean, p->corrupt, NULL, NULL, p->n, p->metric, NULL,
                                     p->line);
    if (s != QKV_OK) return s;
    int kept = 0; /* leave out the examples whose corrupted prediction is the answer */
    for (int k = 0; k < p->n; k++) {
        if (p->metric[k].answer == p->metric[k].wrong) continue;
        memmove(p->clean + (size_t)kept * T, p->clean + (size_t)k * T,
                (size_t)T * sizeof *p->clean);
        memmove(p->corrupt + (size_t)kept * T, p->corrupt + (size_t)k * T,
                (size_t)T * sizeof *p->corrupt);
        p->clean_len[kept] = p->clean_len[k], p->corrupt_len[kept] = p->corrupt_len[k];
        p->metric[kept] = p->metric[k], p->line[kept++] = p->line[k];
    }
    p->skipped = p->n - kept, p->n = kept;
    if (kept == 0)
        return qkv_fail(QKV_ERR_VALUE, "--corrupt-from: on every one of the %d held-out "
                        "examples the model predicts the answer on the corrupted input too: "
                        "nothing to patch", p->skipped);
    return QKV_OK;
}

patch_pairs pair_set_view(const pair_set *p, const loaded_model *lm) {
    return (patch_pairs){.n = p->n, .positions = p->positions, .keys = p->keys,
                         .clean = p->clean, .corrupt = p->corrupt,
                         .clean_len = lm->data ? p->clean_len : NULL,
                         .corrupt_len = lm->data ? p->corrupt_len : NULL, .metric = p->metric};
}
