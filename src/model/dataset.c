/* dataset.c - a user's task from a file (`qkv train --data FILE`): one example a line, input
 * tokens, a tab, output tokens; tokens are strings without whitespace, separated by spaces;
 * `_` on the output side means no target. docs/model.md ("Data files") defines it. */
#include "model/dataset.h"

#include "engine/engine.h"
#include "model/model.h"
#include "io/io.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DATA_MAX_LEN QKV_MAX_TASK_SEQ_LEN /* tokens on a side */

/* The vocabulary's hash of a token: the held-out split's (model.h). */
static uint64_t token_hash(const char *tok, size_t n) {
    return heldout_hash_finish(heldout_hash_bytes(HELDOUT_HASH_START, (const unsigned char *)tok, n));
}

/* ---- the vocabulary: token strings, id 0 the padding; an open-addressing hash of ids ---- */
static int32_t vocab_find(const dataset *d, const char *tok, size_t n, uint64_t h) {
    for (size_t at = h & (d->slots - 1);; at = (at + 1) & (d->slots - 1)) {
        int32_t id = d->slot[at];
        if (id < 0) return -1;
        if (strlen(d->token[id]) == n && !memcmp(d->token[id], tok, n)) return id;
    }
}

static qkv_status vocab_add(dataset *d, const char *tok, size_t n, int32_t *id) {
    uint64_t h = token_hash(tok, n);
    if (d->slots && (*id = vocab_find(d, tok, n, h)) >= 0) return QKV_OK;
    if ((size_t)d->vocab + 1 > d->slots / 2) { /* grow the table, rehash */
        size_t slots = d->slots ? 2 * d->slots : 1024;
        int32_t *slot = malloc(slots * sizeof *slot);
        char **token = realloc(d->token, slots / 2 * sizeof *token);
        if (!slot || !token) {
            free(slot);
            if (token) d->token = token;
            return qkv_fail(QKV_ERR_NOMEM, "out of memory for the vocabulary of %s", d->path);
        }
        d->token = token;
        for (size_t i = 0; i < slots; i++) slot[i] = -1;
        free(d->slot);
        d->slot = slot;
        d->slots = slots;
        for (int32_t i = 1; i < d->vocab; i++) {
            const char *t = d->token[i];
            size_t at = token_hash(t, strlen(t)) & (slots - 1);
            while (slot[at] >= 0) at = (at + 1) & (slots - 1);
            slot[at] = i;
        }
    }
    char *copy = malloc(n + 1);
    if (!copy) return qkv_fail(QKV_ERR_NOMEM, "out of memory for the vocabulary of %s", d->path);
    memcpy(copy, tok, n);
    copy[n] = '\0';
    size_t at = h & (d->slots - 1);
    while (d->slot[at] >= 0) at = (at + 1) & (d->slots - 1);
    *id = d->vocab;
    d->slot[at] = d->vocab;
    d->token[d->vocab++] = copy;
    return QKV_OK;
}

/* ---- files ---- */
static qkv_status read_whole(const char *path, char **text, size_t *size) {
    FILE *f;
    qkv_status s = io_fopen_regular(path, &f);
    if (s != QKV_OK) return s;
    io_protect(path); /* the run depends on it: no output of this process may replace it */
    struct stat st;
    const char *what;
    double limit = memory_limit(&what);
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
        return qkv_fail(QKV_ERR_IO, "%s: cannot read its size", path);
    }
    /* the text, its tokens as ids (4 bytes a token, at most one per 2 bytes) and the padded
     * examples: about 4 times the file */
    if ((double)st.st_size * 4 > limit / 2) {
        fclose(f);
        return qkv_fail(QKV_ERR_NOMEM, "%s is too large for memory: %.1f GiB of examples need "
                        "about %.1f GiB, more than half of %s (%.1f GiB)", path,
                        (double)st.st_size / (1 << 30), 4.0 * (double)st.st_size / (1 << 30),
                        what, limit / (1 << 30));
    }
    *size = (size_t)st.st_size;
    *text = malloc(*size + 1);
    if (!*text) {
        fclose(f);
        return qkv_fail(QKV_ERR_NOMEM, "out of memory reading %s", path);
    }
    size_t got = fread(*text, 1, *size, f);
    bool bad = ferror(f) || got != *size;
    fclose(f);
    if (bad) {
        free(*text);
        return qkv_fail(QKV_ERR_IO, "%s: read error", path);
    }
    (*text)[*size] = '\0';
    return QKV_OK;
}

/* The offset of the first byte of tok[0..n) that is not part of valid UTF-8 (overlong
 * forms, surrogates and code points past U+10FFFF included), or -1 when it is all valid. A
 * token goes into the safetensors header's JSON and the page's, which must stay valid. */
static long utf8_invalid_at(const unsigned char *tok, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = tok[i];
        size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3
                     : (c & 0xf8) == 0xf0 ? 4 : 0;
        if (len == 0 || i + len > n) return (long)i;
        unsigned cp = len == 1 ? c : c & (0x7f >> len);
        for (size_t k = 1; k < len; k++) {
            if ((tok[i + k] & 0xc0) != 0x80) return (long)i;
            cp = cp << 6 | (tok[i + k] & 0x3f);
        }
        static const unsigned least[5] = {0, 0, 0x80, 0x800, 0x10000}; /* shortest form */
        if (cp < least[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return (long)i;
        i += len;
    }
    return -1;
}

/* One parsed side of a line: token ids. */
typedef struct {
    int32_t *ids;
    int n, cap;
} id_list;

static qkv_status ids_push(id_list *l, int32_t id) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 1024;
        int32_t *p = realloc(l->ids, (size_t)cap * sizeof *p);
        if (!p) return qkv_fail(QKV_ERR_NOMEM, "out of memory reading examples");
        l->ids = p;
        l->cap = cap;
    }
    l->ids[l->n++] = id;
    return QKV_OK;
}

/* The examples of one file, unpadded: for each, its input ids then its output ids (-1: `_`)
 * into `ids`, and its two lengths into `lens`; `held` marks the held-out lines (by hash) when
 * `split`. With `fixed`, tokens not yet in the vocabulary are an error. */
typedef struct {
    id_list ids, lens, held;
    int count;
} examples;

qkv_status dataset_read_line(dataset *d, bool fixed, const char *path, int64_t line_no,
                             const char *line, size_t len, const int most[2], int32_t *in,
                             int32_t *out, int counts[2]) {
    const char *end = line + len;
    counts[0] = counts[1] = 0;
    bool blank = true;
    for (size_t i = 0; i < len; i++) blank &= line[i] == ' ';
    if (blank) return QKV_OK; /* empty lines are skipped */
    const char *tab = memchr(line, '\t', len);
    if (!tab)
        return qkv_fail(QKV_ERR_FORMAT, "%s line %" PRId64 ": no tab between the input and the "
                        "output tokens", path, line_no);
    if (memchr(tab + 1, '\t', (size_t)(end - tab - 1)))
        return qkv_fail(QKV_ERR_FORMAT, "%s line %" PRId64 ": more than one tab (one example a "
                        "line: input tokens, a tab, output tokens)", path, line_no);
    for (int side = 0; side < 2; side++) {
        const char *p = side ? tab + 1 : line, *stop = side ? end : tab;
        const char *what = side ? "output" : "input";
        while (p < stop) {
            while (p < stop && (*p == ' ' || *p == '\v' || *p == '\f')) p++;
            const char *q = p;
            while (q < stop && *q != ' ' && *q != '\v' && *q != '\f') q++;
            if (q == p) break;
            int32_t id = -1;
            int shown = (int)(q - p > 40 ? 40 : q - p);
            long bad = utf8_invalid_at((const unsigned char *)p, (size_t)(q - p));
            if (bad >= 0)
                return qkv_fail(QKV_ERR_FORMAT, "%s line %" PRId64 ": %s token %d is not valid "
                                "UTF-8 (byte 0x%02x at its byte %ld)", path, line_no, what,
                                counts[side] + 1, (unsigned char)p[bad], bad + 1);
            if (counts[side] >= most[side])
                return qkv_fail(QKV_ERR_FORMAT, most[side] < DATA_MAX_LEN
                                ? "%s line %" PRId64 ": more than %d %s tokens: the model reads "
                                  "at most %d (the longest of its examples)"
                                : "%s line %" PRId64 ": more than %d %s tokens (the most a side "
                                  "may hold: %d)", path, line_no, most[side], what, most[side]);
            if (side == 1 && q - p == 1 && *p == '_') {
                id = -1; /* no target here */
            } else if (fixed) {
                uint64_t h = token_hash(p, (size_t)(q - p));
                id = d->slots ? vocab_find(d, p, (size_t)(q - p), h) : -1;
                if (id < 0)
                    return qkv_fail(QKV_ERR_FORMAT, "%s line %" PRId64 ": unknown token '%.*s' "
                                    "(%s token %d, not in %s)", path, line_no, shown, p, what,
                                    counts[side] + 1, d->path);
            } else {
                qkv_status s = vocab_add(d, p, (size_t)(q - p), &id);
                if (s != QKV_OK) return s;
                if (d->vocab > QKV_MAX_VOCAB) /* with the padding */
                    return qkv_fail(QKV_ERR_FORMAT, "%s line %" PRId64 ": more than %d distinct "
                                    "tokens; a model's vocabulary holds at most %d (with the "
                                    "padding)", path, line_no, QKV_MAX_VOCAB - 1, QKV_MAX_VOCAB);
            }
            (side ? out : in)[counts[side]++] = id;
            p = q;
        }
    }
    if (!counts[0] || !counts[1])
        return qkv_fail(QKV_ERR_FORMAT, "%s line %" PRId64 ": the %s side is empty", path,
                        line_no, counts[0] ? "output" : "input");
    /* one length rule for the whole run: outputs as long as inputs, or never */
    bool same = counts[0] == counts[1];
    if (d->rule_line == 0) {
        d->rule_line = line_no;
        d->cross = !same;
        snprintf(d->rule_path, sizeof d->rule_path, "%s", path);
    } else if (same == d->cross) {
        return qkv_fail(QKV_ERR_FORMAT, "%s line %" PRId64 ": %d input and %d output tokens, "
                        "but %s line %" PRId64 " has outputs %s its inputs: every example must "
                        "follow one rule (same length, or an encoder-decoder)", path, line_no,
                        counts[0], counts[1], d->rule_path, d->rule_line,
                        d->cross ? "of another length than" : "as long as");
    }
    return QKV_OK;
}

static qkv_status parse_file(dataset *d, const char *path, bool fixed, bool split, examples *ex) {
    char *text = NULL;
    size_t size = 0;
    qkv_status s = read_whole(path, &text, &size);
    if (s != QKV_OK) return s;
    if (memchr(text, '\0', size)) {
        free(text);
        return qkv_fail(QKV_ERR_FORMAT, "%s: a NUL byte: not a text file of examples", path);
    }
    int32_t *sides = malloc(2 * DATA_MAX_LEN * sizeof *sides); /* one line's input, output */
    if (!sides) s = qkv_fail(QKV_ERR_NOMEM, "out of memory reading examples");
    const int most[2] = {DATA_MAX_LEN, DATA_MAX_LEN};
    int64_t line_no = 0;
    char *start = text;
    if (size >= 3 && !memcmp(text, "\xef\xbb\xbf", 3)) start += 3; /* a UTF-8 byte-order mark */
    for (char *line = start; s == QKV_OK && line < text + size;) {
        char *end = strchr(line, '\n');
        if (!end) end = text + size;
        char *next = end + (end < text + size);
        line_no++;
        if (end > line && end[-1] == '\r') end--;
        size_t len = (size_t)(end - line);
        int counts[2];
        s = dataset_read_line(d, fixed, path, line_no, line, len, most, sides,
                              sides + DATA_MAX_LEN, counts);
        if (s == QKV_OK && counts[0] > 0) { /* an example (a blank line has no side) */
            for (int side = 0; side < 2 && s == QKV_OK; side++)
                for (int i = 0; i < counts[side] && s == QKV_OK; i++)
                    s = ids_push(&ex->ids, sides[side * DATA_MAX_LEN + i]);
            if (s == QKV_OK) s = ids_push(&ex->lens, counts[0]);
            if (s == QKV_OK) s = ids_push(&ex->lens, counts[1]);
            bool held = split && heldout_picks(heldout_hash_finish(heldout_hash_bytes(
                                     HELDOUT_HASH_START, (const unsigned char *)line, len)));
            if (s == QKV_OK) s = ids_push(&ex->held, held);
            if (s == QKV_OK) ex->count++;
        }
        line = next;
    }
    free(sides);
    free(text);
    if (s == QKV_OK && ex->count == 0)
        s = qkv_fail(QKV_ERR_FORMAT, "%s holds no examples", path);
    return s;
}

/* Pads the examples of `ex` with want_held (or not) into x (n, T), y (n, To), len (n). */
static qkv_status pad_examples(const dataset *d, const examples *ex, int want_held,
                               int32_t **x, int32_t **y, int32_t **len, int *n) {
    *n = 0;
    for (int e = 0; e < ex->count; e++) *n += want_held < 0 || ex->held.ids[e] == want_held;
    size_t count = *n ? (size_t)*n : 1;
    *x = malloc(count * (size_t)d->in_len * sizeof **x);
    *y = malloc(count * (size_t)d->out_len * sizeof **y);
    *len = malloc(count * sizeof **len);
    if (!*x || !*y || !*len) return qkv_fail(QKV_ERR_NOMEM, "out of memory for the examples");
    const int32_t *ids = ex->ids.ids;
    int k = 0;
    for (int e = 0; e < ex->count; e++) {
        int ni = ex->lens.ids[2 * e], no = ex->lens.ids[2 * e + 1];
        if (want_held < 0 || ex->held.ids[e] == want_held) {
            int32_t *xr = *x + (size_t)k * d->in_len, *yr = *y + (size_t)k * d->out_len;
            for (int i = 0; i < d->in_len; i++) xr[i] = i < ni ? ids[i] : DATA_PAD;
            for (int i = 0; i < d->out_len; i++) yr[i] = i < no ? ids[ni + i] : -1;
            (*len)[k++] = ni;
        }
        ids += ni + no;
    }
    return QKV_OK;
}

static void examples_free(examples *ex) {
    free(ex->ids.ids);
    free(ex->lens.ids);
    free(ex->held.ids);
}

static uint64_t file_checksum(uint64_t h, const char *path) {
    FILE *f;
    if (io_fopen_regular(path, &f) != QKV_OK) return h;
    char buf[1 << 14];
    for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) h = heldout_hash_bytes(h, (const unsigned char *)buf, n);
    fclose(f);
    return heldout_hash_finish(h);
}

uint64_t dataset_checksum(const char *path, const char *heldout_path) {
    uint64_t h = file_checksum(HELDOUT_HASH_START, path);
    return heldout_path ? file_checksum(h, heldout_path) : h;
}

static bool any_target(const int32_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (y[i] >= 0) return true;
    return false;
}

qkv_status dataset_load(dataset *d, const char *path, const char *heldout_path) {
    memset(d, 0, sizeof *d);
    snprintf(d->path, sizeof d->path, "%s", path);
    snprintf(d->heldout_path, sizeof d->heldout_path, "%s", heldout_path ? heldout_path : "");
    if (strlen(path) >= sizeof d->path || (heldout_path && strlen(heldout_path) >= sizeof d->heldout_path))
        return qkv_fail(QKV_ERR_VALUE, "the path of a data file is longer than %zu bytes",
                        sizeof d->path - 1);
    d->vocab = 1; /* id 0: the padding */
    d->token = malloc(sizeof *d->token);
    if (!d->token) return qkv_fail(QKV_ERR_NOMEM, "out of memory");
    d->token[0] = NULL;
    examples train = {0}, held = {0};
    qkv_status s = parse_file(d, path, false, !heldout_path, &train);
    if (s == QKV_OK && heldout_path) s = parse_file(d, heldout_path, true, false, &held);
    d->token[0] = "<pad>";
    if (s == QKV_OK) {
        /* T and To: the longest input and output of either file */
        examples *all[2] = {&train, &held};
        for (int f = 0; f < 2; f++)
            for (int e = 0; e < all[f]->count; e++) {
                int ni = all[f]->lens.ids[2 * e], no = all[f]->lens.ids[2 * e + 1];
                d->in_len = ni > d->in_len ? ni : d->in_len;
                d->out_len = no > d->out_len ? no : d->out_len;
            }
        if (!d->cross && d->in_len < 2) d->in_len = d->out_len = 2; /* the model needs T >= 2 */
        if (d->cross && d->in_len < 2) d->in_len = 2;
        if (heldout_path) {
            s = pad_examples(d, &train, -1, &d->train_x, &d->train_y, &d->train_len, &d->n_train);
            if (s == QKV_OK)
                s = pad_examples(d, &held, -1, &d->held_x, &d->held_y, &d->held_len, &d->n_held);
        } else {
            s = pad_examples(d, &train, 0, &d->train_x, &d->train_y, &d->train_len, &d->n_train);
            if (s == QKV_OK)
                s = pad_examples(d, &train, 1, &d->held_x, &d->held_y, &d->held_len, &d->n_held);
        }
    }
    if (s == QKV_OK && d->n_train == 0)
        s = qkv_fail(QKV_ERR_FORMAT, "%s: every example is held out: nothing to train on",
                     d->path);
    if (s == QKV_OK && d->n_held == 0)
        s = qkv_fail(QKV_ERR_FORMAT, "%s: no example is held out (a hash of each line picks "
                     "one in %d; %d line%s too few): give them a file of their own (%s)",
                     d->path, HELDOUT_SHARE, d->n_train, d->n_train == 1 ? " is" : "s are",
                     field_name("heldout_path"));
    /* a file whose outputs are all `_` gives nothing to learn or to score */
    if (s == QKV_OK && !any_target(d->train_y, (int64_t)d->n_train * d->out_len))
        s = qkv_fail(QKV_ERR_FORMAT, "%s: every output token is '_': no example has a target "
                     "to train on", d->path);
    if (s == QKV_OK && !any_target(d->held_y, (int64_t)d->n_held * d->out_len))
        s = heldout_path
                ? qkv_fail(QKV_ERR_FORMAT, "%s: every output token is '_': no held-out example "
                           "has a target to score", heldout_path)
                : qkv_fail(QKV_ERR_FORMAT, "%s: every output token of the held-out examples "
                           "(one line in %d, picked by a hash) is '_': nothing to score; give "
                           "them a file of their own (%s)", d->path, HELDOUT_SHARE,
                           field_name("heldout_path"));
    if (s == QKV_OK) {
        /* the output tokens, for the chance level */
        uint8_t *seen = calloc((size_t)d->vocab, 1);
        if (!seen) s = qkv_fail(QKV_ERR_NOMEM, "out of memory");
        for (int64_t i = 0; seen && i < (int64_t)d->n_train * d->out_len; i++)
            if (d->train_y[i] >= 0 && !seen[d->train_y[i]]) {
                seen[d->train_y[i]] = 1;
                d->n_outputs++;
            }
        free(seen);
        d->checksum = dataset_checksum(path, heldout_path);
    }
    examples_free(&train);
    examples_free(&held);
    if (s != QKV_OK) dataset_free(d);
    return s;
}

void dataset_free(dataset *d) {
    for (int i = 1; i < d->vocab && d->token; i++) free(d->token[i]);
    free(d->token);
    free(d->slot);
    free(d->train_x);
    free(d->train_y);
    free(d->train_len);
    free(d->held_x);
    free(d->held_y);
    free(d->held_len);
    memset(d, 0, sizeof *d);
}

void dataset_label(const dataset *d, int32_t id, char *buf, size_t len) {
    const char *t = id >= 0 && id < d->vocab ? d->token[id] : "?";
    size_t k = 0;
    /* printable ASCII only, and no more than 24 bytes: labels go into gnuplot's data files,
     * where '#' starts a comment and quotes start strings */
    for (; t[k] && k < 24 && k + 1 < len; k++) {
        unsigned char c = (unsigned char)t[k];
        buf[k] = c > ' ' && c < 127 && c != '#' && c != '"' && c != '\'' ? (char)c : '?';
    }
    if (len) buf[k < len ? k : len - 1] = '\0';
}

const char *dataset_token_text(const dataset *d, int32_t id) {
    return id >= 0 && id < d->vocab ? d->token[id] : NULL;
}

int32_t dataset_token_id(const dataset *d, const char *tok) {
    size_t n = strlen(tok);
    if (!d->slots || n == 0) return -1;
    return vocab_find(d, tok, n, token_hash(tok, n));
}
