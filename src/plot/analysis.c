/* analysis.c - the pictures of the analysis commands' files in a run directory, when it holds
 * them: circuits.json (qkv circuits --out: each head's QK and OV circuits over the vocabulary,
 * the composition scores), ablate.json (the loss increase of each head knocked out, layers x
 * heads), patch.json (the share recovered by patching each head, or head and position) and
 * attribute.json (the logit's parts, as bars) and lens.json (qkv lens: the top token and its
 * probability after each layer at each position, the final logit's parts). Each JSON file is turned into plain text
 * matrices under DIR/plots/ (labelled rows and columns, as the attention maps are), which
 * matrix.gp and bars.gp draw; so the pictures can be redrawn from those files by hand. */
#include "engine/engine.h"
#include "explore/lens.h"
#include "io/io.h"
#include "plot/plot.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_JSON_BYTES (256 << 20) /* a larger analysis file is refused, not read */
#define LABEL_LEN 48

/* DIR/NAME parsed, NULL when there is none (*s QKV_OK) or it cannot be read or parsed (*s set):
 * a link to nowhere, a directory or a file without read permission is there (io_absent). */
cJSON *plot_read_json(const char *dir, const char *name, qkv_status *s) {
    char path[PLOT_PATH_LEN + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    *s = QKV_OK;
    if (io_absent(path)) return NULL;
    int fd;
    size_t size;
    if ((*s = io_open_regular(path, &fd, &size)) != QKV_OK) {
        *s = qkv_fail(*s, "plot: %s", qkv_last_error());
        return NULL;
    }
    if (size > MAX_JSON_BYTES) {
        close(fd);
        *s = qkv_fail(QKV_ERR_FORMAT, "plot: %s is larger than %d MiB", path, MAX_JSON_BYTES >> 20);
        return NULL;
    }
    char *text = malloc(size + 1);
    size_t got = 0;
    ssize_t n = 1;
    while (text && got < size && (n = read(fd, text + got, size - got)) > 0) got += (size_t)n;
    close(fd);
    if (!text || got != size) {
        free(text);
        *s = text ? qkv_fail(QKV_ERR_IO, "plot: cannot read %s", path)
                  : qkv_fail(QKV_ERR_NOMEM, "plot: out of memory");
        return NULL;
    }
    /* nothing after the object: cJSON wants the '\0' that ends the text inside its length,
     * and a '\0' in the file would end it early */
    text[size] = '\0';
    cJSON *j = memchr(text, '\0', size) ? NULL
                                         : cJSON_ParseWithLengthOpts(text, size + 1, NULL, true);
    free(text);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        *s = qkv_fail(QKV_ERR_FORMAT, "plot: %s is not a JSON object", path);
    }
    return cJSON_IsObject(j) ? j : NULL;
}

/* A label gnuplot reads as one word: spaces and quotes become '_'. */
static void clean_label(char *dst, const char *src) {
    snprintf(dst, LABEL_LEN, "%s", src && *src ? src : "_");
    /* a token (whole in the JSON) cut to LABEL_LEN bytes ends at a character, not inside one:
     * drop a last UTF-8 sequence the cut left incomplete */
    size_t n = strlen(dst), start = n;
    while (start > 0 && ((unsigned char)dst[start - 1] & 0xC0) == 0x80) start--;
    if (start > 0 && (unsigned char)dst[start - 1] >= 0xC0) {
        unsigned char lead = (unsigned char)dst[start - 1];
        size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
        if (n - (start - 1) < need) dst[start - 1] = '\0';
    }
    for (char *p = dst; *p; p++)
        if (*p == ' ' || *p == '"' || *p == '\'' || *p == '#' || (unsigned char)*p < 32)
            *p = '_';
}

/* A matrix (rows, cols) with labelled rows and columns as DIR/REL, the layout of the attention
 * maps: a '#' comment, "row\col c1 c2 ...", then "r v v ...". NaN for a missing value. */
typedef struct {
    int rows, cols;
    char (*row_label)[LABEL_LEN], (*col_label)[LABEL_LEN];
    double *v;
} matrix;

static bool matrix_new(matrix *m, int rows, int cols) {
    *m = (matrix){rows, cols, calloc((size_t)rows, LABEL_LEN), calloc((size_t)cols, LABEL_LEN),
                  malloc((size_t)rows * cols * sizeof(double))};
    for (int64_t i = 0; m->v && i < (int64_t)rows * cols; i++) m->v[i] = NAN;
    return m->row_label && m->col_label && m->v;
}

static void matrix_free(matrix *m) {
    free(m->row_label), free(m->col_label), free(m->v);
    *m = (matrix){0};
}

static qkv_status matrix_write(const matrix *m, const char *dir, const char *rel,
                               const char *what) {
    char path[PLOT_PATH_LEN + 64];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    atomic_file af;
    qkv_status s = atomic_open(&af, path);
    if (s != QKV_OK) return s;
    fprintf(af.f, "# qkv %s\nrow\\column", what);
    for (int j = 0; j < m->cols; j++) fprintf(af.f, " %s", m->col_label[j]);
    fputc('\n', af.f);
    for (int i = 0; i < m->rows; i++) {
        fprintf(af.f, "%s", m->row_label[i]);
        for (int j = 0; j < m->cols; j++) {
            double v = m->v[(int64_t)i * m->cols + j];
            if (isfinite(v)) fprintf(af.f, " %.6g", v);
            else fputs(" NaN", af.f);
        }
        fputc('\n', af.f);
    }
    return atomic_commit(&af);
}

/* The member `key` of o that is an array (a file may also carry a count of that name). */
static const cJSON *array_item(const cJSON *o, const char *key) {
    const cJSON *c;
    cJSON_ArrayForEach(c, o) if (c->string && !strcmp(c->string, key) && cJSON_IsArray(c)) return c;
    return NULL;
}

static double number(const cJSON *o, const char *key) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(n) ? n->valuedouble : NAN;
}

/* The format's error for a file that is JSON but not what its command writes. */
static qkv_status not_like(const char *dir, const char *name, const char *why) {
    return qkv_fail(QKV_ERR_FORMAT, "plot: %s/%s: %s", dir, name, why);
}

/* The member `key` of o as a whole number in lo..hi (lo >= 0); -1 when it is missing, not a
 * whole number (1.5, "1", true) or out of range. */
static int64_t whole_in(const cJSON *o, const char *key, int64_t lo, int64_t hi) {
    double v = number(o, key);
    return isfinite(v) && v == floor(v) && v >= (double)lo && v <= (double)hi ? (int64_t)v : -1;
}

/* ---- the checks of an analysis file against its own content and the run's model ----
 * Every count a file states is checked against the arrays it holds and against the model of
 * the run it sits in (layers, heads per layer), before anything is drawn: so no .dat is
 * larger than the file and the model allow, arithmetic on the counts is in int64_t within
 * qkv's limits, and each check walks its arrays once (linear in the file's size). */

static bool number_or_null(const cJSON *c) { return cJSON_IsNumber(c) || cJSON_IsNull(c); }

/* The length of array a if it holds only strings and at most `most` of them, else -1. */
static int64_t strings(const cJSON *a, int64_t most) {
    if (!cJSON_IsArray(a)) return -1;
    int64_t n = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, a) if (!cJSON_IsString(c) || ++n > most) return -1;
    return n;
}

/* Whether a is an array of `rows` arrays of `cols` numbers (null standing for a NaN). */
static bool numbers_matrix(const cJSON *a, int64_t rows, int64_t cols) {
    if (!cJSON_IsArray(a)) return false;
    int64_t r = 0;
    const cJSON *row, *c;
    cJSON_ArrayForEach(row, a) {
        if (++r > rows || !cJSON_IsArray(row)) return false;
        int64_t n = 0;
        cJSON_ArrayForEach(c, row) if (++n > cols || !number_or_null(c)) return false;
        if (n != cols) return false;
    }
    return r == rows;
}

/* "L.H" (as head_name writes it) with 1 <= L <= layers, 1 <= H <= heads, read strictly. */
static bool head_label(const cJSON *c, int64_t layers, int64_t heads, int *l, int *h) {
    if (!cJSON_IsString(c)) return false;
    const char *dot = strchr(c->valuestring, '.');
    char first[24];
    if (!dot || dot - c->valuestring >= (ptrdiff_t)sizeof first) return false;
    snprintf(first, sizeof first, "%.*s", (int)(dot - c->valuestring), c->valuestring);
    int64_t a, b;
    if (number_int(first, 1, layers, &a) != NUMBER_OK ||
        number_int(dot + 1, 1, heads, &b) != NUMBER_OK)
        return false;
    *l = (int)a, *h = (int)b;
    return true;
}

/* Whether c is an MLP part's name of a model of `layers` layers (qkv attribute's and the lens's
 * parts of transformer blocks): "mlp L", "mlp L.N" (a neuron, N from 0) or "mlp L bias", L
 * in 1..layers; *l is L. */
static bool mlp_label(const cJSON *c, int64_t layers, int *l) {
    if (!cJSON_IsString(c) || strncmp(c->valuestring, "mlp ", 4)) return false;
    char word[24], rest[24] = "";
    const char *name = c->valuestring + 4;
    size_t n = strcspn(name, ". ");
    if (n == 0 || n >= sizeof word || strlen(name + n) >= sizeof rest) return false;
    snprintf(word, sizeof word, "%.*s", (int)n, name);
    snprintf(rest, sizeof rest, "%s", name + n);
    int64_t a, u;
    if (number_int(word, 1, layers, &a) != NUMBER_OK) return false;
    *l = (int)a;
    return !rest[0] || !strcmp(rest, " bias") ||
           (rest[0] == '.' && number_int(rest + 1, 0, QKV_MAX_MLP - 1, &u) == NUMBER_OK);
}

/* Whether entry e names a head of the model: "layer" in 1..L and "head" in 1..H. */
static bool model_head(const cJSON *e, const plot_source *src) {
    return whole_in(e, "layer", 1, src->layers) > 0 && whole_in(e, "head", 1, src->heads) > 0;
}

/* An entry's layer, head and position once checked (-1: none, as patch's position null). */
#define LAYER(e) whole_in(e, "layer", 1, QKV_MAX_LAYERS)
#define HEAD(e) whole_in(e, "head", 1, QKV_MAX_HEADS)
#define POSITION(e) whole_in(e, "position", 0, QKV_MAX_SEQ_LEN - 1)

/* circuits.json's key_tokens (optional: a file of before has none): indices into vocab, each
 * below V and above the one before, at least one (the circuits' rows and columns); false when
 * it is anything else. */
static bool key_tokens_valid(const cJSON *j, int64_t V) {
    const cJSON *keys = cJSON_GetObjectItemCaseSensitive(j, "key_tokens"), *k;
    if (!keys) return true;
    if (!cJSON_IsArray(keys) || cJSON_GetArraySize(keys) == 0) return false;
    double before = -1;
    cJSON_ArrayForEach(k, keys) {
        if (!cJSON_IsNumber(k) || k->valuedouble != floor(k->valuedouble) ||
            k->valuedouble <= before || k->valuedouble >= (double)V)
            return false;
        before = k->valuedouble;
    }
    return true;
}

static const char *check_circuits(const cJSON *j, const plot_source *src) {
    int64_t L = src->layers, H = src->heads;
    int64_t V = strings(array_item(j, "vocab"), QKV_MAX_VOCAB);
    int64_t R = strings(array_item(j, "query_labels"), QKV_MAX_VOCAB);
    bool decoder = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "encoder_decoder"));
    if (V < 1 || R < 1) return "vocab or query_labels is not a list of token names";
    /* the model's sizes: its vocabulary, and the QK circuit's rows (an encoder-decoder's
     * decoder positions, else the vocabulary) */
    if (V != src->vocab || decoder != src->cross || R != (decoder ? src->queries : V))
        return "its vocab, query_labels or encoder_decoder are not those of the model beside it";
    if (!key_tokens_valid(j, V))
        return "key_tokens is not a non-empty rising list of indices into vocab";
    const cJSON *heads = array_item(j, "heads"), *e;
    if (!heads) return "no heads";
    /* each head of the model once: L x H flags, at most 8 x 8192 bytes */
    bool seen[QKV_MAX_LAYERS * QKV_MAX_HEADS] = {false};
    int64_t n = 0;
    cJSON_ArrayForEach(e, heads) {
        if (++n > L * H || !model_head(e, src)) return "its heads are not the model's";
        int64_t at = (LAYER(e) - 1) * H + HEAD(e) - 1;
        if (seen[at]) return "its heads are not the model's";
        seen[at] = true;
        if (!numbers_matrix(cJSON_GetObjectItemCaseSensitive(e, "qk"), R, V) ||
            !numbers_matrix(cJSON_GetObjectItemCaseSensitive(e, "ov"), V, V))
            return "a circuit is not a (query_labels, vocab) or (vocab, vocab) matrix of numbers";
        if (!number_or_null(cJSON_GetObjectItemCaseSensitive(e, "copying_score")))
            return "a copying_score is not a number";
    }
    if (n != L * H) return "its heads are not the model's";
    const cJSON *comp = cJSON_GetObjectItemCaseSensitive(j, "composition");
    if (!comp) return NULL;
    if (!cJSON_IsArray(comp)) return "composition is not a list";
    /* none, or each pair of heads of consecutive layers once per kind (Q only in an
     * encoder-decoder): the matrices drawn, (L - 1) H by (L - 1) H, are then at most L - 1
     * times as many numbers as the file holds */
    int64_t want = (decoder ? 1 : 3) * (L - 1) * H * H;
    n = 0;
    cJSON_ArrayForEach(e, comp) {
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(e, "kind");
        int la, ha, lb, hb;
        if (++n > 3 * (L - 1) * H * H || !cJSON_IsString(kind) ||
            strlen(kind->valuestring) != 1 || !strchr("qkv", kind->valuestring[0]) ||
            !head_label(cJSON_GetObjectItemCaseSensitive(e, "from"), L - 1, H, &la, &ha) ||
            !head_label(cJSON_GetObjectItemCaseSensitive(e, "to"), L, H, &lb, &hb) ||
            lb != la + 1 || !number_or_null(cJSON_GetObjectItemCaseSensitive(e, "score")))
            return "a composition score is not of two heads of consecutive layers of the model";
    }
    return n == 0 || n == want ? NULL : "composition does not score every pair of heads";
}

/* A row's LayerNorm (ln-scale's "ln": 0 "attn", 1 "mlp", 2 "final"), -1 if it names none,
 * -2 if its "ln" is something else. */
static int row_ln(const cJSON *e) {
    static const char *const names[] = {"attn", "mlp", "final"};
    const cJSON *ln = cJSON_GetObjectItemCaseSensitive(e, "ln");
    if (!ln) return -1;
    for (int i = 0; i < 3 && cJSON_IsString(ln); i++)
        if (!strcmp(ln->valuestring, names[i])) return i;
    return -2;
}

/* Whether entry e names a spot of the model (ablate's and patch's rows): a head of it, or for
 * the sites without heads (head null: the stream's, the MLP's, the LayerNorms' scales) a
 * layer; position null or in 0..T-1, key_position null (or missing) or in 0..K-1, neuron
 * null (or missing) or in 0..QKV_MAX_MLP-1, ln missing or one of a layer's LayerNorms. */
static bool model_spot(const cJSON *e, const plot_source *src, int64_t T, int64_t K) {
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(e, "head");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "position");
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(e, "key_position");
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(e, "neuron");
    bool head = cJSON_IsNull(h) ? whole_in(e, "layer", 1, src->layers) > 0 : model_head(e, src);
    return head && (!t || cJSON_IsNull(t) || whole_in(e, "position", 0, T - 1) >= 0) &&
           (!k || cJSON_IsNull(k) || whole_in(e, "key_position", 0, K - 1) >= 0) &&
           (!u || cJSON_IsNull(u) || whole_in(e, "neuron", 0, QKV_MAX_MLP - 1) >= 0) &&
           row_ln(e) >= -1;
}

/* The most rows a layer of ablate or patch may have per position: a row per head, or per
 * neuron of an MLP (there are never more heads than an MLP may have neurons). */
#define ROWS_PER_LAYER QKV_MAX_MLP
_Static_assert(QKV_MAX_HEADS <= QKV_MAX_MLP, "a layer's rows: its heads or its neurons");

static const char *check_ablate(const cJSON *j, const plot_source *src) {
    const cJSON *heads = array_item(j, "heads"), *e;
    if (!heads || !isfinite(number(cJSON_GetObjectItemCaseSensitive(j, "baseline"), "loss")))
        return "no baseline loss or heads";
    /* at most a row per head (or layer) and position of the model's inputs */
    int64_t T = src->queries > src->seq_len ? src->queries : src->seq_len, n = 0;
    cJSON_ArrayForEach(e, heads)
        if (++n > (int64_t)src->layers * ROWS_PER_LAYER * T ||
            !model_spot(e, src, src->queries, src->seq_len) ||
            !number_or_null(cJSON_GetObjectItemCaseSensitive(e, "loss")))
            return "its heads are not the model's";
    return NULL;
}

/* A path's end (patch --path): a head "L.H" (*h from 1), or an MLP "mlp L" (*h 0), of a
 * model of `layers` layers and `heads` heads. */
static bool path_end(const cJSON *c, int64_t layers, int64_t heads, int *l, int *h) {
    if (head_label(c, layers, heads, l, h)) return true;
    *h = 0;
    return mlp_label(c, layers, l) && !strpbrk(c->valuestring + 4, ". ");
}

/* patch.json's "paths" (--path): a sender (a head or an MLP of the model) and a receiver
 * that reads the stream after it: a head of a later layer by q, k or v, an MLP by mlp-pre
 * (of the sender's layer after a head, of a later one after an MLP), or the logits (via
 * null). */
static const char *check_paths(const cJSON *paths, const plot_source *src) {
    int64_t L = src->layers, H = src->heads, n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, paths) {
        const cJSON *rc = cJSON_GetObjectItemCaseSensitive(e, "receiver");
        const cJSON *via = cJSON_GetObjectItemCaseSensitive(e, "via");
        int ls, hs, lr, hr;
        bool logits = cJSON_IsString(rc) && !strcmp(rc->valuestring, "logits");
        bool ok = ++n <= L * (H + 1) * (L * (3 * H + 1) + 1) &&
                  path_end(cJSON_GetObjectItemCaseSensitive(e, "sender"), L, H, &ls, &hs);
        if (ok && logits) ok = cJSON_IsNull(via);
        else if (ok)
            ok = path_end(rc, L, H, &lr, &hr) && cJSON_IsString(via) &&
                 (hr ? lr > ls && strlen(via->valuestring) == 1 &&
                           strchr("qkv", via->valuestring[0])
                     : (lr > ls || (lr == ls && hs)) && !strcmp(via->valuestring, "mlp-pre"));
        if (!ok || !number_or_null(cJSON_GetObjectItemCaseSensitive(e, "exact")) ||
            !number_or_null(cJSON_GetObjectItemCaseSensitive(e, "attribution")))
            return "a path is not from a head or MLP of the model to a later head (by q, k or "
                   "v), an MLP that reads it (by mlp-pre) or the logits";
    }
    return NULL;
}

static const char *check_patch(const cJSON *j, const plot_source *src) {
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "path"))) {
        const cJSON *paths = array_item(j, "paths");
        return paths ? check_paths(paths, src) : "no paths";
    }
    const cJSON *results = array_item(j, "results"), *e;
    if (!results) return "no results";
    /* positions index the input's query positions, key positions its tokens; both listed,
     * and no more than the model has */
    int64_t T = strings(array_item(j, "positions"), QKV_MAX_SEQ_LEN), n = 0;
    int64_t K = strings(array_item(j, "tokens"), QKV_MAX_SEQ_LEN);
    if (T > src->queries || K > src->seq_len)
        return "its positions or tokens are more than the model beside it has";
    bool pairs = !array_item(j, "positions"); /* a set of pairs: the model's positions */
    T = pairs ? src->queries : T > 0 ? T : 0;
    K = pairs ? src->seq_len : K > 0 ? K : 0;
    int64_t most = T > K ? T : K;
    cJSON_ArrayForEach(e, results) {
        if (++n > (int64_t)src->layers * ROWS_PER_LAYER * (most > 0 ? most : 1) ||
            !model_spot(e, src, T, K) ||
            !number_or_null(cJSON_GetObjectItemCaseSensitive(e, "exact")) ||
            !number_or_null(cJSON_GetObjectItemCaseSensitive(e, "attribution")))
            return "a result is not of a head of the model and a position of its input";
    }
    return NULL;
}

static const char *check_attribute(const cJSON *j, const plot_source *src) {
    const cJSON *parts = array_item(j, "parts"), *e;
    if (!parts) return "no parts";
    cJSON_ArrayForEach(e, parts) {
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(e, "layer");
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(e, "head");
        bool layer = l && !cJSON_IsNull(l), head = layer && h && !cJSON_IsNull(h);
        int ml;
        bool mlp = layer && !head && mlp_label(cJSON_GetObjectItemCaseSensitive(e, "name"),
                                               src->layers, &ml) && LAYER(e) == ml;
        if ((head && !model_head(e, src)) || (layer && !head && !mlp) ||
            !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "name")) ||
            !number_or_null(cJSON_GetObjectItemCaseSensitive(e, "value")))
            return "a part is not a named value, or not of a head or an MLP of the model";
    }
    return NULL;
}

/* lens.json: "layers", one entry per boundary of the model (after 0 .. L, in order), each with
 * one entry per query position (0 .. P - 1, P the file's "positions" labels) listing the same
 * number (1 .. LENS_MAX_TOP) of tokens, most probable first, with probabilities in [0, 1] and a
 * rank; "decomposition", one entry per position, its parts named "embed", "bias" or a head of
 * the model. */
static const char *check_lens_cell(const cJSON *e, int64_t i, int64_t *top) {
    const cJSON *list = array_item(e, "top"), *c;
    if (whole_in(e, "position", 0, QKV_MAX_SEQ_LEN - 1) != i || !list)
        return "a lens position is not the next of its layer's";
    int64_t n = 0;
    double last = 1;
    cJSON_ArrayForEach(c, list) {
        double p = number(c, "prob");
        if (++n > LENS_MAX_TOP || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(c, "token")) ||
            !(p >= 0 && p <= last))
            return "a lens cell's top is not tokens with probabilities from 1 down to 0";
        last = p;
    }
    if (n == 0) return "a lens cell's top is empty";
    if (*top && n != *top) return "the lens's cells list different numbers of tokens";
    *top = n;
    if (whole_in(e, "rank_of_final", 1, QKV_MAX_VOCAB) < 0)
        return "a lens cell's rank_of_final is not a rank";
    return NULL;
}

static const char *check_lens(const cJSON *j, const plot_source *src) {
    if (cJSON_GetObjectItemCaseSensitive(j, "data")) /* lens --data: means, not cells */
        return "a lens over a set of examples (lens --data), which qkv plot does not draw";
    int64_t P = strings(array_item(j, "positions"), QKV_MAX_SEQ_LEN), b = 0, top = 0;
    const cJSON *layers = array_item(j, "layers"), *e, *c;
    if (P < 1 || !layers) return "no positions or layers";
    if (P > src->queries) return "its positions are more than the model beside it has";
    cJSON_ArrayForEach(e, layers) {
        if (b > src->layers || whole_in(e, "after", 0, QKV_MAX_LAYERS) != b)
            return "its layers are not after 0 .. each layer of the model, in order";
        const cJSON *cells = array_item(e, "positions");
        int64_t i = 0;
        if (!cells) return "a lens layer has no positions";
        cJSON_ArrayForEach(c, cells) {
            const char *why = i < P ? check_lens_cell(c, i, &top) : "a lens layer has more "
                                                                     "positions than the input";
            if (why) return why;
            i++;
        }
        if (i != P) return "a lens layer has fewer positions than the input";
        b++;
    }
    if (b != src->layers + 1) return "its layers are not after 0 .. each layer of the model, in order";
    const cJSON *dec = array_item(j, "decomposition");
    int64_t i = 0;
    if (!dec) return "no decomposition";
    cJSON_ArrayForEach(e, dec) {
        const cJSON *parts = array_item(e, "parts"), *part;
        if (i >= P || whole_in(e, "position", 0, QKV_MAX_SEQ_LEN - 1) != i ||
            !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "token")) ||
            !number_or_null(cJSON_GetObjectItemCaseSensitive(e, "logit")) || !parts)
            return "a decomposition entry is not of the next position, a token and its logit";
        int64_t n = 0;
        cJSON_ArrayForEach(part, parts) {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(part, "name");
            int l, h;
            if (++n > (int64_t)src->layers * (src->heads + 1) + 2 || !cJSON_IsString(name) ||
                !(!strcmp(name->valuestring, "embed") || !strcmp(name->valuestring, "bias") ||
                  head_label(name, src->layers, src->heads, &l, &h) ||
                  mlp_label(name, src->layers, &l)) ||
                !number_or_null(cJSON_GetObjectItemCaseSensitive(part, "value")))
                return "a part is not embed, bias, a head or an MLP of the model, with a value";
        }
        i++;
    }
    return i == P ? NULL : "the decomposition does not cover every position";
}

qkv_status plot_read_analysis(const char *dir, const char *name, const plot_source *src,
                              cJSON **out) {
    static const struct {
        const char *file;
        const char *(*check)(const cJSON *, const plot_source *);
    } kinds[] = {{"circuits.json", check_circuits},
                 {"ablate.json", check_ablate},
                 {"patch.json", check_patch},
                 {"attribute.json", check_attribute},
                 {"lens.json", check_lens}};
    qkv_status s;
    *out = plot_read_json(dir, name, &s);
    if (!*out) return s;
    /* the counts it states, where it states them (its entries are checked either way) */
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(*out, "layers");
    const cJSON *per_layer = cJSON_GetObjectItemCaseSensitive(*out, "heads_per_layer");
    const char *why = "not a file of qkv's analysis commands";
    if (!strcmp(name, "lens.json")) /* its "layers" is its list, checked by check_lens */
        layers = NULL;
    if ((layers && whole_in(*out, "layers", 1, QKV_MAX_LAYERS) != src->layers) ||
        (per_layer && whole_in(*out, "heads_per_layer", 1, QKV_MAX_HEADS) != src->heads))
        why = "its layers and heads_per_layer are not those of the model beside it";
    else
        for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
            if (!strcmp(name, kinds[i].file)) why = kinds[i].check(*out, src);
    if (!why) return QKV_OK;
    cJSON_Delete(*out);
    *out = NULL;
    return not_like(dir, name, why);
}

/* The length of m's longest label, rows or columns. */
static size_t longest_label(const matrix *m) {
    size_t n = 0;
    for (int i = 0; i < m->rows; i++) n = strlen(m->row_label[i]) > n ? strlen(m->row_label[i]) : n;
    for (int j = 0; j < m->cols; j++) n = strlen(m->col_label[j]) > n ? strlen(m->col_label[j]) : n;
    return n;
}

/* Draws DATA (under plots/), the matrix m, with matrix.gp into plots/OUT.FORMAT. */
static plot_status draw_matrix(plotter *p, const char *dir, const char *data, const matrix *m,
                               const char *out, const char *format, const char *title,
                               const char *xlabel, const char *ylabel, const char *cblabel,
                               const char *mode) {
    char image[160], values[32];
    snprintf(image, sizeof image, "plots/%s.%s", out, format);
    snprintf(values, sizeof values, "1 %zu", longest_label(m));
    return plotter_run(p, dir, "matrix.gp", image, format, 7,
                       (const char *[]){data, title, xlabel, ylabel, cblabel, mode, values});
}

/* A JSON number, NaN for null (what cJSON writes for a value that is not finite). */
static double value_of(const cJSON *c) { return cJSON_IsNumber(c) ? c->valuedouble : NAN; }

/* ---- what produced a picture, for its title ----
 * Every analysis picture's title names what it was made of: the input (its tokens, the first
 * MAX_SHOWN characters of them), the position, the token, or the answer and the wrong token;
 * a set of pairs by its count and source. Strings of the file are cleaned as labels are. */
#define MAX_SHOWN 30

/* The array of strings `key` of j as "t t t" (clean_label's words), cut to MAX_SHOWN
 * characters with "..."; "" when j has none. */
static void tokens_text(const cJSON *j, const char *key, char *buf, size_t len) {
    const cJSON *c;
    size_t n = 0;
    *buf = '\0';
    cJSON_ArrayForEach(c, array_item(j, key)) {
        char word[LABEL_LEN];
        clean_label(word, cJSON_IsString(c) ? c->valuestring : NULL);
        if (n + strlen(word) + 1 > MAX_SHOWN) {
            snprintf(buf + n, len - n, "%s...", n ? " " : "");
            return;
        }
        n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? " " : "", word);
        if (n >= len) return;
    }
}

/* The string `key` of j cleaned as a label, or "?" when it has none. */
static void string_of(const cJSON *j, const char *key, char *buf) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, key);
    clean_label(buf, cJSON_IsString(c) ? c->valuestring : "?");
}

/* The position `key` of j with its label from "positions" ("14:2"), or its number; "" when
 * it has none. */
static void position_text(const cJSON *j, const char *key, char *buf, size_t len) {
    int64_t at = whole_in(j, key, 0, QKV_MAX_SEQ_LEN - 1);
    const cJSON *labels = array_item(j, "positions");
    const cJSON *label = at >= 0 && labels ? cJSON_GetArrayItem(labels, (int)at) : NULL;
    char word[LABEL_LEN];
    if (at < 0) {
        *buf = '\0';
    } else if (cJSON_IsString(label)) {
        clean_label(word, label->valuestring);
        snprintf(buf, len, "%s", word);
    } else {
        snprintf(buf, len, "%lld", (long long)at);
    }
}

/* patch.json's inputs and metric as more lines of a title: "\nposition 14:2, answer 8, wrong
 * 12\nclean: 3 9 ... | corrupt: 6 12 ...", or for a set of pairs "\nover 300 pairs of
 * FILE\nthe first's position 4, answer 8, wrong 12"; "" for a file that says neither (one
 * written by hand). */
static void patch_made_of(const cJSON *j, char *buf, size_t len) {
    char at[LABEL_LEN + 8], answer[LABEL_LEN], wrong[LABEL_LEN], clean[MAX_SHOWN + 8],
        corrupt[MAX_SHOWN + 8], from[LABEL_LEN];
    position_text(j, "position", at, sizeof at);
    string_of(j, "answer", answer);
    string_of(j, "wrong", wrong);
    if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "pairs_from"))) {
        string_of(j, "pairs_from", from);
        int64_t pairs = whole_in(j, "pairs", 1, INT32_MAX);
        snprintf(buf, len, "\nover %lld pair%s of %s\nthe first's position %s, answer %s, wrong %s",
                 (long long)pairs, pairs == 1 ? "" : "s", from, *at ? at : "?", answer, wrong);
        return;
    }
    tokens_text(j, "tokens", clean, sizeof clean);
    tokens_text(j, "corrupt_tokens", corrupt, sizeof corrupt);
    if (!*at && !*clean) *buf = '\0';
    else
        snprintf(buf, len, "\nposition %s, answer %s, wrong %s\nclean: %s | corrupt: %s",
                 *at ? at : "?", answer, wrong, *clean ? clean : "?", *corrupt ? corrupt : "?");
}

/* circuits.json (checked by check_circuits): each head's QK and OV circuits, and the
 * composition scores of each kind. Every array is walked once, in order. */
static plot_status plot_circuits(plotter *p, const char *dir, const char *format,
                                 const cJSON *j, const plot_source *src) {
    const cJSON *vocab = array_item(j, "vocab"), *qrows = array_item(j, "query_labels");
    const cJSON *heads = array_item(j, "heads");
    int V = cJSON_GetArraySize(vocab), R = cJSON_GetArraySize(qrows), H = src->heads,
        L = src->layers;
    bool decoder = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "encoder_decoder"));
    /* the tokens keys can hold (key_tokens, checked; every token in a file without it): the
     * QK circuit's columns, and the rows of the OV circuit and of a self-attention QK circuit
     * (an encoder-decoder's keys are the encoder's tokens, never the decoder's) */
    int *keep = malloc((size_t)V * sizeof *keep), K = 0;
    if (!keep) return qkv_fail(QKV_ERR_NOMEM, "plot: out of memory");
    const cJSON *keys = cJSON_GetObjectItemCaseSensitive(j, "key_tokens"), *k;
    if (keys)
        cJSON_ArrayForEach(k, keys) keep[K++] = (int)k->valuedouble;
    else
        for (K = 0; K < V; K++) keep[K] = K;
    plot_status code = QKV_OK;
    const cJSON *head;
    cJSON_ArrayForEach(head, heads) {
        int l = (int)whole_in(head, "layer", 1, L), h = (int)whole_in(head, "head", 1, H);
        static const char *const kinds[] = {"qk", "ov"};
        for (int k = 0; k < 2 && code == QKV_OK; k++) {
            const cJSON *rows = cJSON_GetObjectItemCaseSensitive(head, kinds[k]);
            /* rows: the decoder's positions, or the key tokens; columns: the key tokens (QK),
             * every token (OV: the logits it writes) */
            bool key_rows = k == 1 || !decoder, key_cols = k == 0;
            int nr = key_rows ? K : R, nc = key_cols ? K : V;
            matrix m;
            if (!matrix_new(&m, nr, nc)) {
                matrix_free(&m);
                free(keep);
                return qkv_fail(QKV_ERR_NOMEM, "plot: out of memory");
            }
            const cJSON *lab = (k == 0 ? qrows : vocab)->child, *row = rows->child;
            for (int i = 0, r = 0; r < nr; i++, lab = lab->next, row = row->next) {
                if (key_rows && i != keep[r]) continue;
                clean_label(m.row_label[r], lab->valuestring);
                const cJSON *c = row->child;
                for (int col = 0, at = 0; at < nc; col++, c = c->next)
                    if (!key_cols || col == keep[at]) m.v[(int64_t)r * nc + at++] = value_of(c);
                r++;
            }
            lab = vocab->child;
            for (int c = 0, at = 0; at < nc; c++, lab = lab->next)
                if (!key_cols || c == keep[at]) clean_label(m.col_label[at++], lab->valuestring);
            /* a data file's vocabulary starts with its padding token, which no example
             * attends to or predicts: no value (drawn grey), in its column and in its row
             * (with key_tokens, the padding is no key token: it has neither) */
            if (nc > 0 && !strcmp(m.col_label[0], DAT_PAD_TOKEN)) {
                for (int i = 0; i < nr; i++) m.v[(int64_t)i * nc] = NAN;
                if (!strcmp(m.row_label[0], DAT_PAD_TOKEN))
                    for (int c = 0; c < nc; c++) m.v[c] = NAN;
            }
            char data[96], out[96], title[160];
            snprintf(data, sizeof data, "plots/circuit_%s_layer%d_head%d.dat", kinds[k], l, h);
            snprintf(out, sizeof out, "circuit_%s_layer%d_head%d", kinds[k], l, h);
            code = matrix_write(&m, dir, data, k == 0 ? "QK circuit (qkv circuits)"
                                                      : "OV circuit (qkv circuits)");
            if (code != QKV_OK) {
                matrix_free(&m);
                free(keep);
                return code;
            }
            double score = number(head, "copying_score");
            /* the mapping (a file of before has none): key tokens whose top logit is their
             * target, of those with one; the copying score alone misreads a head that maps
             * tokens to others */
            const cJSON *map = cJSON_GetObjectItemCaseSensitive(head, "mapping");
            double right = number(map, "right"), sources = number(map, "sources");
            char mapped[64] = "";
            if (isfinite(right) && isfinite(sources) && sources > 0 && right >= 0 && right <= sources)
                snprintf(mapped, sizeof mapped, ", top logit the target for %.0f of %.0f", right,
                         sources);
            if (k == 0)
                snprintf(title, sizeof title, "QK circuit of layer %d, head %d (scaled scores)",
                         l, h);
            else if (isfinite(score))
                snprintf(title, sizeof title,
                         "OV circuit of layer %d, head %d (copying score %.3f%s)", l, h, score,
                         mapped);
            else
                snprintf(title, sizeof title, "OV circuit of layer %d, head %d%s%s%s", l, h,
                         *mapped ? " (" : "", *mapped ? mapped + 2 : "", *mapped ? ")" : "");
            code = k == 0 ? draw_matrix(p, dir, data, &m, out, format, title, "key token",
                                        decoder ? "decoder position" : "query token",
                                        "score", "diverging")
                          : draw_matrix(p, dir, data, &m, out, format, title, "logit of token",
                                        "token attended to", "logit", "diverging");
            matrix_free(&m);
        }
        if (code != QKV_OK) break;
    }
    free(keep);
    if (code != QKV_OK) return code;
    /* composition: one matrix per kind, heads of layer L (rows) by heads of layer L+1 */
    const cJSON *comp = array_item(j, "composition");
    if (!cJSON_IsArray(comp) || cJSON_GetArraySize(comp) == 0 || L < 2) return code;
    static const char kinds[] = "qkv";
    for (int k = 0; k < 3 && code == QKV_OK; k++) {
        matrix m;
        if (!matrix_new(&m, (L - 1) * H, (L - 1) * H)) { /* L <= 8, H heads of the model */
            matrix_free(&m);
            return qkv_fail(QKV_ERR_NOMEM, "plot: out of memory");
        }
        for (int i = 0; i < (L - 1) * H; i++) {
            snprintf(m.row_label[i], LABEL_LEN, "%d.%d", i / H + 1, i % H + 1);
            snprintf(m.col_label[i], LABEL_LEN, "%d.%d", i / H + 2, i % H + 1);
        }
        int found = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, comp) {
            const cJSON *kind = cJSON_GetObjectItemCaseSensitive(e, "kind");
            int la, ha, lb, hb; /* checked: la + 1 = lb <= L, heads <= H */
            if (kind->valuestring[0] != kinds[k]) continue;
            head_label(cJSON_GetObjectItemCaseSensitive(e, "from"), L - 1, H, &la, &ha);
            head_label(cJSON_GetObjectItemCaseSensitive(e, "to"), L, H, &lb, &hb);
            /* rows: (la, ha); columns: (lb, hb); only consecutive layers have a score */
            int64_t at = (int64_t)((la - 1) * H + ha - 1) * m.cols + (lb - 2) * H + hb - 1;
            m.v[at] = value_of(cJSON_GetObjectItemCaseSensitive(e, "score"));
            found++;
        }
        char data[64], out[64], title[160];
        snprintf(data, sizeof data, "plots/composition_%c.dat", kinds[k]);
        snprintf(out, sizeof out, "composition_%c", kinds[k]);
        snprintf(title, sizeof title, "%c-composition: how much a head reads what one before wrote",
                 kinds[k] - 32);
        if (found) code = matrix_write(&m, dir, data, "composition scores (qkv circuits)");
        if (found && code == QKV_OK)
            code = draw_matrix(p, dir, data, &m, out, format, title, "later head (layer.head)",
                               "earlier head (layer.head)", "score", "sequential");
        matrix_free(&m);
    }
    return code;
}

/* ablate.json: the loss increase of each head removed, as a grid of layers by heads. */
/* The rows of spots (ablate's "heads", patch's "results") as a matrix of value(row): one per
 * head (layer x head), or per MLP neuron (layer x neuron), or per LayerNorm (layer x attn,
 * mlp, final), when no row names a position; else a row per head, "L.H" (a layer, "L", for
 * the stream's sites; "L.N" for a neuron; "L.attn" for a LayerNorm), by position or by key
 * position. NaN where no row is. */
static qkv_status spot_matrix(const cJSON *rows, const plot_source *src, double base,
                              double (*value)(const cJSON *e, double base), matrix *m,
                              const char **xlabel, const char **ylabel) {
    static const char *const ln_names[] = {"attn", "mlp", "final"};
    int64_t L = src->layers, T = 0, N = 0;
    bool stream = false, keys = false, positions = false, lns = false;
    const cJSON *e;
    cJSON_ArrayForEach(e, rows) {
        stream |= cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(e, "head"));
        lns |= row_ln(e) >= 0;
        int64_t t = whole_in(e, "position", 0, QKV_MAX_SEQ_LEN - 1);
        int64_t k = whole_in(e, "key_position", 0, QKV_MAX_SEQ_LEN - 1);
        int64_t u = whole_in(e, "neuron", 0, QKV_MAX_MLP - 1);
        if (k >= 0) keys = true, t = k;
        else if (t >= 0) positions = true;
        T = t + 1 > T ? t + 1 : T;
        N = u + 1 > N ? u + 1 : N;
    }
    bool by_position = keys || positions, neurons = N > 0 && !lns;
    /* rows per layer, or columns */
    int64_t groups = lns ? 3 : neurons ? N : stream ? 1 : src->heads;
    if (!matrix_new(m, by_position ? (int)(L * groups) : (int)L,
                    by_position ? (int)T : (int)groups))
        return qkv_fail(QKV_ERR_NOMEM, "plot: out of memory");
    for (int i = 0; i < m->rows; i++)
        if (!by_position) snprintf(m->row_label[i], LABEL_LEN, "layer_%d", i + 1);
        else if (lns) snprintf(m->row_label[i], LABEL_LEN, "%d.%s", (int)(i / groups + 1),
                               ln_names[i % groups]);
        else if (stream && !neurons) snprintf(m->row_label[i], LABEL_LEN, "%d", i + 1);
        else snprintf(m->row_label[i], LABEL_LEN, "%d.%d", (int)(i / groups + 1),
                      (int)(i % groups + !neurons)); /* heads from 1, neurons from 0 */
    for (int c = 0; c < m->cols; c++)
        if (lns && !by_position) snprintf(m->col_label[c], LABEL_LEN, "%s", ln_names[c]);
        else snprintf(m->col_label[c], LABEL_LEN, "%d", by_position || neurons ? c : c + 1);
    cJSON_ArrayForEach(e, rows) {
        int64_t l = LAYER(e) - 1;
        int64_t g = lns       ? row_ln(e)
                    : neurons ? whole_in(e, "neuron", 0, QKV_MAX_MLP - 1)
                    : stream  ? 0
                              : HEAD(e) - 1;
        int64_t t = keys ? whole_in(e, "key_position", 0, QKV_MAX_SEQ_LEN - 1) : POSITION(e);
        if ((by_position && t < 0) || g < 0) continue;
        m->v[by_position ? (l * groups + g) * T + t : l * groups + g] = value(e, base);
    }
    *xlabel = keys          ? "key position"
              : by_position ? "position"
              : lns         ? "LayerNorm"
              : neurons     ? "neuron"
                            : "head";
    *ylabel = !by_position ? "layer"
              : lns        ? "layer.LayerNorm"
              : neurons    ? "layer.neuron"
              : stream     ? "layer"
                           : "layer.head";
    return QKV_OK;
}

static double loss_increase(const cJSON *e, double base) { return number(e, "loss") - base; }

/* The exact share where there is one, else the attribution. */
static double share(const cJSON *e, double base) {
    (void)base;
    double v = number(e, "exact");
    return isfinite(v) ? v : number(e, "attribution");
}

/* The --site of a file (ablate's, patch's), "z" for one written before there were sites. */
static const char *site_of(const cJSON *j) {
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "site");
    return cJSON_IsString(s) ? s->valuestring : "z";
}

/* ablate.json: the loss increase with each head (or its site at each position) removed. */
static plot_status plot_ablate(plotter *p, const char *dir, const char *format, const cJSON *j,
                       const plot_source *src) {
    const cJSON *heads = array_item(j, "heads"); /* checked by check_ablate */
    double base = number(cJSON_GetObjectItemCaseSensitive(j, "baseline"), "loss");
    if (!cJSON_GetArraySize(heads)) return QKV_OK;
    matrix m;
    const char *x, *y;
    plot_status code = spot_matrix(heads, src, base, loss_increase, &m, &x, &y);
    if (code == QKV_OK)
        code = matrix_write(&m, dir, "plots/ablate.dat", "ablation: loss increase (qkv ablate)");
    char title[320], mode[LABEL_LEN], data[LABEL_LEN];
    string_of(j, "mode", mode);
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(j, "data");
    if (cJSON_IsString(file)) clean_label(data, file->valuestring);
    snprintf(title, sizeof title, "ablation of %s (%s): loss increase with each removed\n"
             "over %s%s (baseline loss %.4g)", site_of(j), strcmp(mode, "?") ? mode : "zero",
             cJSON_IsString(file) ? "the examples of " : "the held-out set",
             cJSON_IsString(file) ? data : "", base);
    if (code == QKV_OK)
        code = draw_matrix(p, dir, "plots/ablate.dat", &m, "ablate", format, title, x, y,
                           "loss increase", "diverging");
    matrix_free(&m);
    return code;
}

/* patch.json --path: senders (rows, "L.H", and with MLPs "mlp_L" after each layer's heads)
 * by receivers (a later head's q, k or v, "L.H.q"; with MLPs each layer's "mlp_L" after its
 * heads; the logits last), in the forward's order. */
static plot_status plot_paths(plotter *p, const char *dir, const char *format, const cJSON *j,
                              const plot_source *src) {
    const cJSON *paths = array_item(j, "paths"), *e; /* checked by check_patch */
    if (!cJSON_GetArraySize(paths)) return QKV_OK; /* no path: nothing to draw */
    int64_t L = src->layers, H = src->heads, M = 0; /* M: 1 where the paths name MLPs */
    int l, h;
    cJSON_ArrayForEach(e, paths)
        for (int end = 0; end < 2; end++)
            if (path_end(cJSON_GetObjectItemCaseSensitive(e, end ? "receiver" : "sender"), L, H,
                         &l, &h) && !h)
                M = 1;
    /* receiver columns: layer 1 its MLP, each later layer its heads' q, k, v and its MLP */
    int64_t per = 3 * H + M, R = M + (L - 1) * per + 1, S = L * (H + M);
#define LAYER_COL(lr) ((lr) == 1 ? 0 : M + ((int64_t)(lr) - 2) * per)
    matrix m;
    if (!matrix_new(&m, (int)S, (int)R)) {
        matrix_free(&m);
        return qkv_fail(QKV_ERR_NOMEM, "plot: out of memory");
    }
    for (int i = 0; i < m.rows; i++) {
        int layer = (int)(i / (H + M) + 1), head = (int)(i % (H + M) + 1);
        if (head > H) snprintf(m.row_label[i], LABEL_LEN, "mlp_%d", layer); /* one word */
        else snprintf(m.row_label[i], LABEL_LEN, "%d.%d", layer, head);
    }
    for (int lr = 1; lr <= L; lr++) {
        for (int hr = 1; lr > 1 && hr <= H; hr++)
            for (int v = 0; v < 3; v++)
                snprintf(m.col_label[LAYER_COL(lr) + (hr - 1) * 3 + v], LABEL_LEN, "%d.%d.%c",
                         lr, hr, "qkv"[v]);
        if (M)
            snprintf(m.col_label[LAYER_COL(lr) + (lr > 1 ? 3 * H : 0)], LABEL_LEN, "mlp_%d", lr);
    }
    snprintf(m.col_label[R - 1], LABEL_LEN, "logits");
    cJSON_ArrayForEach(e, paths) {
        int ls, hs, lr, hr;
        path_end(cJSON_GetObjectItemCaseSensitive(e, "sender"), L, H, &ls, &hs);
        const cJSON *rc = cJSON_GetObjectItemCaseSensitive(e, "receiver");
        int64_t c = R - 1;
        if (path_end(rc, L, H, &lr, &hr)) {
            const char *via = cJSON_GetObjectItemCaseSensitive(e, "via")->valuestring;
            c = hr ? LAYER_COL(lr) + (int64_t)(hr - 1) * 3 + (strchr("qkv", via[0]) - "qkv")
                   : LAYER_COL(lr) + (lr > 1 ? 3 * H : 0);
        }
        int64_t row = (int64_t)(ls - 1) * (H + M) + (hs ? hs - 1 : H);
        m.v[row * R + c] = share(e, 0);
    }
#undef LAYER_COL
    plot_status code = matrix_write(&m, dir, "plots/patch.dat",
                                    "path patching: share recovered (qkv patch --path)");
    char title[400], made_of[300];
    patch_made_of(j, made_of, sizeof made_of);
    snprintf(title, sizeof title, "path patching: share recovered by each path, sender to "
             "receiver%s", made_of);
    if (code == QKV_OK)
        code = draw_matrix(p, dir, "plots/patch.dat", &m, "patch", format, title,
                           M ? "receiver (layer.head.input, or mlp_layer)"
                             : "receiver (layer.head.input)",
                           "sender", "share recovered", "diverging");
    matrix_free(&m);
    return code;
}

/* patch.json: the share recovered by patching each head (layer x head), or each head (or
 * layer) at each position or key position; the exact share where there is one, else the
 * attribution. */
static plot_status plot_patch(plotter *p, const char *dir, const char *format, const cJSON *j,
                       const plot_source *src) {
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "path")))
        return plot_paths(p, dir, format, j, src);
    const cJSON *results = array_item(j, "results"), *e; /* checked by check_patch */
    if (!cJSON_GetArraySize(results)) return QKV_OK;
    bool exact = false;
    cJSON_ArrayForEach(e, results) exact |= isfinite(number(e, "exact"));
    matrix m;
    const char *x, *y;
    plot_status code = spot_matrix(results, src, 0, share, &m, &x, &y);
    if (code == QKV_OK)
        code = matrix_write(&m, dir, "plots/patch.dat",
                            "activation patching: share recovered (qkv patch)");
    char title[400], made_of[300];
    patch_made_of(j, made_of, sizeof made_of);
    snprintf(title, sizeof title, "patching %s: share of the clean-corrupt difference "
             "recovered%s%s", site_of(j), exact ? "" : " (attribution)", made_of);
    if (code == QKV_OK)
        code = draw_matrix(p, dir, "plots/patch.dat", &m, "patch", format, title, x, y,
                           "share recovered", "diverging");
    matrix_free(&m);
    return code;
}

/* attribute.json: the logit's parts as bars (embedding path, each head, bias). */
static plot_status plot_attribute(plotter *p, const char *dir, const char *format, const cJSON *j,
                       const plot_source *src) {
    (void)src; /* the file is checked against it */
    const cJSON *parts = array_item(j, "parts"); /* checked by check_attribute */
    if (!cJSON_GetArraySize(parts)) return QKV_OK; /* no part: nothing to draw */
    char path[PLOT_PATH_LEN + 64];
    snprintf(path, sizeof path, "%s/plots/attribute.dat", dir);
    atomic_file af;
    qkv_status s = atomic_open(&af, path);
    if (s != QKV_OK) return s;
    fprintf(af.f, "# qkv direct logit attribution (qkv attribute): part value\n");
    const cJSON *e;
    cJSON_ArrayForEach(e, parts) {
        char label[LABEL_LEN];
        int l = (int)LAYER(e), h = (int)HEAD(e);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (l >= 1 && h >= 1) snprintf(label, sizeof label, "%d.%d", l, h);
        else clean_label(label, cJSON_IsString(name) ? name->valuestring : NULL);
        double v = number(e, "value");
        if (isfinite(v)) fprintf(af.f, "%s %.6g\n", label, v);
        else fprintf(af.f, "%s NaN\n", label);
    }
    if ((s = atomic_commit(&af)) != QKV_OK) return s;
    char title[320], image[64], token[LABEL_LEN], at[LABEL_LEN + 8], input[MAX_SHOWN + 8];
    double logit = number(j, "logit");
    string_of(j, "token", token);
    position_text(j, "position", at, sizeof at);
    tokens_text(j, "tokens", input, sizeof input);
    bool untrained = cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "position_has_target"));
    if (*at || *input) /* a file of qkv attribute: what it was made of */
        snprintf(title, sizeof title, "direct logit attribution: the logit of %s at position %s%s "
                 "(%.4g), by part\ninput: %s", token, *at ? at : "?",
                 untrained ? " (no target in training)" : "", logit, *input ? input : "?");
    else
        snprintf(title, sizeof title, "direct logit attribution: the parts of the logit %.4g",
                 logit);
    snprintf(image, sizeof image, "plots/attribute.%s", format);
    return plotter_run(p, dir, "bars.gp", image, format, 3,
                       (const char *[]){"plots/attribute.dat", title, "logit"});
}

/* lens.json: the lens as a (boundaries, positions) matrix of the top token's probability,
 * each cell labelled with that token (plots/lens.dat and lens_cells.dat, drawn by lens.gp),
 * and the decomposition as a (parts, positions) matrix (plots/lens_parts.dat, matrix.gp). */
static plot_status plot_lens(plotter *p, const char *dir, const char *format, const cJSON *j,
                             const plot_source *src) {
    const cJSON *labels = array_item(j, "positions"), *layers = array_item(j, "layers");
    const cJSON *dec = array_item(j, "decomposition"); /* checked by check_lens */
    int P = cJSON_GetArraySize(labels), B = src->layers + 1;
    matrix m;
    if (!matrix_new(&m, B, P)) {
        matrix_free(&m);
        return qkv_fail(QKV_ERR_NOMEM, "plot: out of memory");
    }
    /* the positions' labels, for both pictures; a position without a target in training (the
     * decomposition's has_target false, in files that say it) is marked '*', as the lens's
     * table marks it */
    const cJSON *lab = labels->child, *row = layers->child, *d = dec->child;
    bool starred = false;
    for (int i = 0; i < P; i++, lab = lab->next, d = d ? d->next : NULL) {
        clean_label(m.col_label[i], lab->valuestring);
        if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(d, "has_target")) &&
            strlen(m.col_label[i]) + 1 < LABEL_LEN) {
            strcat(m.col_label[i], "*");
            starred = true;
        }
    }
    char (*columns)[LABEL_LEN] = malloc((size_t)P * LABEL_LEN);
    char path[PLOT_PATH_LEN + 64];
    snprintf(path, sizeof path, "%s/plots/lens_cells.dat", dir);
    atomic_file af;
    qkv_status s = columns ? atomic_open(&af, path) : qkv_fail(QKV_ERR_NOMEM, "plot: out of memory");
    if (s != QKV_OK) {
        free(columns);
        matrix_free(&m);
        return s;
    }
    memcpy(columns, m.col_label, (size_t)P * LABEL_LEN);
    fprintf(af.f, "# qkv logit lens (qkv lens): column row probability top-token\n");
    char input[MAX_SHOWN + 8], title[200], xlabel[64];
    tokens_text(j, "tokens", input, sizeof input);
    snprintf(xlabel, sizeof xlabel, "position%s", starred ? " (*: no target in training)" : "");
    for (int b = 0; b < B; b++, row = row->next) {
        snprintf(m.row_label[b], LABEL_LEN, "after_%d", b);
        const cJSON *cell = array_item(row, "positions")->child;
        for (int i = 0; i < P; i++, cell = cell->next) {
            const cJSON *first = array_item(cell, "top")->child;
            char token[LABEL_LEN];
            clean_label(token, cJSON_GetObjectItemCaseSensitive(first, "token")->valuestring);
            m.v[(int64_t)b * P + i] = number(first, "prob");
            fprintf(af.f, "%d %d %.6g %s\n", i, b, m.v[(int64_t)b * P + i], token);
        }
    }
    s = atomic_commit(&af);
    if (s == QKV_OK) s = matrix_write(&m, dir, "plots/lens.dat",
                                      "logit lens: the top token's probability (qkv lens)");
    if (s == QKV_OK) {
        char image[64], longest[32];
        snprintf(image, sizeof image, "plots/lens.%s", format);
        snprintf(longest, sizeof longest, "%zu", longest_label(&m));
        snprintf(title, sizeof title, "logit lens: the most probable token after each layer, "
                 "shaded by its probability%s%s", *input ? "\ninput: " : "", input);
        s = plotter_run(p, dir, "lens.gp", image, format, 5,
                        (const char *[]){"plots/lens.dat", "plots/lens_cells.dat", longest, title,
                                         xlabel});
    }
    matrix_free(&m);
    /* the decomposition, parts down and positions across (as the lens): the parts of the
     * first position name the rows */
    const cJSON *parts = array_item(dec->child, "parts"), *e;
    int n = cJSON_GetArraySize(parts);
    if (s != QKV_OK || n == 0) {
        free(columns);
        return s;
    }
    if (!matrix_new(&m, n, P)) {
        free(columns);
        matrix_free(&m);
        return qkv_fail(QKV_ERR_NOMEM, "plot: out of memory");
    }
    memcpy(m.col_label, columns, (size_t)P * LABEL_LEN);
    free(columns);
    int k = 0;
    cJSON_ArrayForEach(e, parts)
        clean_label(m.row_label[k++], cJSON_GetObjectItemCaseSensitive(e, "name")->valuestring);
    int i = 0;
    cJSON_ArrayForEach(row, dec) {
        k = 0;
        cJSON_ArrayForEach(e, array_item(row, "parts")) {
            char name[LABEL_LEN];
            clean_label(name, cJSON_GetObjectItemCaseSensitive(e, "name")->valuestring);
            if (k < n && !strcmp(name, m.row_label[k])) m.v[(int64_t)k * P + i] = number(e, "value");
            k++;
        }
        i++;
    }
    s = matrix_write(&m, dir, "plots/lens_parts.dat",
                     "the final prediction's logit by part, at each position (qkv lens)");
    snprintf(title, sizeof title, "the final prediction's logit split into parts, at each "
             "position%s%s", *input ? "\ninput: " : "", input);
    if (s == QKV_OK)
        s = draw_matrix(p, dir, "plots/lens_parts.dat", &m, "lens_parts", format, title, xlabel,
                        "part (layer.head for a head)", "logit", "diverging");
    matrix_free(&m);
    return s;
}

/* The files drawn, in the order of PLOT_ANALYSIS_FILES. */
static const struct {
    const char *file;
    plot_status (*draw)(plotter *, const char *, const char *, const cJSON *, const plot_source *);
} analysis_files[PLOT_ANALYSIS_FILES] = {{"circuits.json", plot_circuits},
                                         {"ablate.json", plot_ablate},
                                         {"patch.json", plot_patch},
                                         {"attribute.json", plot_attribute},
                                         {"lens.json", plot_lens}};

qkv_status plot_read_analyses(const char *dir, const plot_source *src,
                              cJSON *j[PLOT_ANALYSIS_FILES]) {
    for (int i = 0; i < PLOT_ANALYSIS_FILES; i++) j[i] = NULL;
    for (int i = 0; i < PLOT_ANALYSIS_FILES; i++) {
        qkv_status s = plot_read_analysis(dir, analysis_files[i].file, src, &j[i]);
        if (s != QKV_OK) {
            plot_free_analyses(j);
            return s;
        }
    }
    return QKV_OK;
}

void plot_free_analyses(cJSON *j[PLOT_ANALYSIS_FILES]) {
    for (int i = 0; i < PLOT_ANALYSIS_FILES; i++) cJSON_Delete(j[i]), j[i] = NULL;
}

plot_status plot_analysis(plotter *p, const char *dir, const char *format,
                          const plot_source *src, cJSON *const j[PLOT_ANALYSIS_FILES]) {
    plot_status code = QKV_OK;
    for (int i = 0; i < PLOT_ANALYSIS_FILES && code == QKV_OK; i++)
        if (j[i]) code = analysis_files[i].draw(p, dir, format, j[i], src);
    return code;
}
