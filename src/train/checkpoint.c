/* checkpoint.c - a trainer's state as a safetensors file, and back: the parameters, the
 * optimizer's moments and, in __metadata__, the config (one row of config_fields per key, its
 * type, range and words from train's option schema), the step and the data RNG. */
#include "train/checkpoint.h"

#include "engine/engine.h"
#include "io/io.h"
#include "train/options.h"

#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A config field of the file: a key of train's option schema (train/options.c), whose row
 * gives its type, range, words and default, and the train_config field that holds it. */
typedef struct {
    const char *key;      /* the metadata key: the option's config key */
    size_t offset, size;  /* the field of train_config */
    bool absent_default;  /* a file may lack it (older files): the option's default then */
    bool omit_absent;     /* not written at that default: a field newer than the files of
                             models without it, which stay what they were */
    const char *true_word; /* a choice held as a bool (schedule's cosine): the word of true */
    const train_option *row; /* a key that is no option of its own: its row here; else NULL */
} config_field;

/* full_batch is no option of its own (--batch full sets it, with batch the training set's
 * size): a bool, false unless set. */
static const train_option full_batch_row = {.key = "full_batch", .type = OPTION_FLAG,
                                            .deflt = "false"};

#define FIELD(member)                                                                       \
    .offset = offsetof(train_config, member), .size = sizeof(((train_config *)0)->member)

/* The config in a file, in the order it is written (not the help's order of the schema).
 * seq_len and vocab are the task's (and the model's: they are the same). */
static const config_field config_fields[] = {
    {"seq_len", FIELD(task.seq_len)},
    {"vocab", FIELD(task.vocab)},
    {"d_model", FIELD(model.d_model)},
    {"heads", FIELD(model.heads)},
    {"layers", FIELD(model.layers)},
    {"residual", FIELD(model.residual)},
    {"causal", FIELD(model.causal)},
    {"init_scale", FIELD(model.init_scale)},
    /* how the weights were drawn: files from before --init have none (qkv's), and a qkv
     * model writes none, so its file is what it was */
    {"init", FIELD(model.init), .absent_default = true, .omit_absent = true},
    /* files from before f64 models have no dtype: f32 */
    {"dtype", FIELD(model.dtype), .absent_default = true},
    /* files from before MLP and LayerNorm models have none; a model without them writes no
     * such key, so its file is what it always was */
    {"mlp", FIELD(model.mlp), .absent_default = true, .omit_absent = true},
    {"act", FIELD(model.act), .absent_default = true, .omit_absent = true},
    {"norm", FIELD(model.norm), .absent_default = true, .omit_absent = true},
    {"optim", FIELD(optim)},
    {"lr", FIELD(lr)},
    {"weight_decay", FIELD(weight_decay)},
    {"clip", FIELD(clip)},
    {"schedule", FIELD(cosine), .true_word = "cosine"},
    {"warmup", FIELD(warmup)},
    {"batch", FIELD(batch)},
    {"steps", FIELD(steps)},
    {"seed", FIELD(seed)},
    /* Adam's decay rates and the full batch (modular's training): files from before them
     * have none, and a run at their defaults writes none, so its file is what it was */
    {"beta1", FIELD(beta1), .absent_default = true, .omit_absent = true},
    {"beta2", FIELD(beta2), .absent_default = true, .omit_absent = true},
    {"full_batch", FIELD(full_batch), .absent_default = true, .omit_absent = true,
     .row = &full_batch_row},
};
#define N_CONFIG_FIELDS ((int)(sizeof config_fields / sizeof config_fields[0]))

/* A choice's value is its index in the row's words: the enums count from 0 in that order
 * (train/options.c checks them); a bool option's words are these. */
static const char *const bool_words[] = {"false", "true", NULL};
_Static_assert(sizeof(qkv_optim_kind) == sizeof(int) && sizeof(qkv_dtype) == sizeof(int) &&
                   sizeof(qkv_act) == sizeof(int) && sizeof(qkv_norm) == sizeof(int) &&
                   sizeof(qkv_init) == sizeof(int),
               "an enum field is stored as an int");

/* The schema's row of the field, and its words (a choice's, or false and true). */
static const train_option *field_row(const config_field *f) {
    const train_option *r = f->row ? f->row : train_option_find(f->key);
    QKV_CHECK(r && r->type != OPTION_HEADING && r->type != OPTION_TEXT, "checkpoint",
              "metadata '%s' is no option of train's schema", f->key);
    return r;
}

static const char *const *field_words(const train_option *r) {
    return r->type == OPTION_CHOICE ? r->choices : bool_words;
}

/* The field's value as text, into buf. */
static void field_text(const config_field *f, const train_config *c, char *buf, size_t len) {
    const train_option *r = field_row(f);
    const char *at = (const char *)c + f->offset;
    switch (r->type) {
    case OPTION_INT:
        if (f->size == sizeof(int64_t)) snprintf(buf, len, "%" PRId64, *(const int64_t *)at);
        else snprintf(buf, len, "%d", *(const int *)at);
        break;
    case OPTION_DOUBLE: snprintf(buf, len, "%.17g", *(const double *)at); break;
    case OPTION_U64: snprintf(buf, len, "%" PRIu64, *(const uint64_t *)at); break;
    default: { /* a word: a choice's, or false or true */
        const char *const *words = field_words(r);
        int value = f->size == sizeof(bool) ? *(const bool *)at : *(const int *)at;
        if (f->true_word) { /* a bool choice: the true word, or the first other one */
            bool is_true = value;
            for (value = 0; !strcmp(words[value], f->true_word) != is_true; value++) {}
        }
        snprintf(buf, len, "%s", words[value]);
        break;
    }
    }
}

/* Reads the field's value from `text` into c: QKV_ERR_FORMAT, naming the key, for a value
 * out of range or not one of its words. */
static qkv_status read_value(const config_field *f, const char *text, const char *path,
                             train_config *c) {
    const train_option *r = field_row(f);
    char *at = (char *)c + f->offset;
    if (r->type != OPTION_INT && r->type != OPTION_DOUBLE && r->type != OPTION_U64) {
        const char *const *words = field_words(r);
        for (int i = 0; words[i]; i++) {
            if (strcmp(text, words[i])) continue;
            if (f->true_word) *(bool *)at = !strcmp(words[i], f->true_word);
            else if (f->size == sizeof(bool)) *(bool *)at = i;
            else *(int *)at = i;
            return QKV_OK;
        }
        char list[64] = "";
        for (int i = 0; words[i]; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                     words[i]);
        return qkv_fail(QKV_ERR_FORMAT, "%s: metadata '%s' is not one of qkv's values (%s)", path,
                        f->key, list);
    }
    /* numbers by the one syntax of engine/numbers.c: no "+4", " 4", "0x4" or "4.0" */
    if (r->type == OPTION_U64) {
        if (number_u64(text, (uint64_t *)at) != NUMBER_OK)
            return qkv_fail(QKV_ERR_FORMAT, "%s: metadata '%s' is not a number of 0..2^64-1",
                            path, f->key);
        return QKV_OK;
    }
    double v = 0;
    int64_t whole = 0;
    bool real = r->type == OPTION_DOUBLE;
    number_read got = real ? number_real(text, &v)
                           : number_int(text, (int64_t)r->lo, (int64_t)r->hi, &whole);
    if (got == NUMBER_BAD && !real && number_real(text, &v) == NUMBER_OK)
        return qkv_fail(QKV_ERR_FORMAT, "%s: metadata '%s' is not a whole number", path, f->key);
    if (got == NUMBER_BAD)
        return qkv_fail(QKV_ERR_FORMAT, "%s: metadata '%s' is not a number ('%.40s')", path,
                        f->key, text);
    if (got == NUMBER_RANGE || (real && !((r->lo_open ? v > r->lo : v >= r->lo) && v <= r->hi)))
        return qkv_fail(QKV_ERR_FORMAT, "%s: metadata '%s' is out of range (%s%g..%g)", path,
                        f->key, r->lo_open ? "above " : "", r->lo, r->hi);
    if (real) *(double *)at = v;
    else if (f->size == sizeof(int64_t)) *(int64_t *)at = whole;
    else *(int *)at = (int)whole;
    return QKV_OK;
}

/* Reads the field from the file's metadata into c (a key a file may lack: its default):
 * QKV_ERR_FORMAT, naming the key, for a value missing, out of range or not one of its
 * words. */
static qkv_status read_field(const config_field *f, const qkv_st *st, const char *path,
                             train_config *c) {
    const char *text = qkv_st_meta(st, f->key);
    if (!text && f->absent_default) text = field_row(f)->deflt;
    if (!text) return qkv_fail(QKV_ERR_FORMAT, "%s: metadata '%s' is missing", path, f->key);
    return read_value(f, text, path, c);
}

/* Whether `text`, the field as written, is its default as written ("0.9" is written
 * "0.90000000000000002"). */
static bool is_default(const config_field *f, const char *text) {
    train_config d = {0};
    char deflt[96];
    QKV_CHECK(read_value(f, field_row(f)->deflt, "", &d) == QKV_OK, "checkpoint",
              "the default of '%s' does not read", f->key);
    field_text(f, &d, deflt, sizeof deflt);
    return !strcmp(text, deflt);
}

/* The first element of x that is not finite (or, with nonneg, negative); -1 if none. */
static int64_t first_bad(const qkv_tensor *x, bool nonneg) {
    if (x->dtype == QKV_F32) { /* the common case, read directly: a save checks every weight */
        const float *p = x->data;
        for (int64_t i = 0; i < x->size; i++)
            if (!isfinite(p[i]) || (nonneg && p[i] < 0)) return i;
        return -1;
    }
    for (int64_t i = 0; i < x->size; i++) {
        double v = qkv_get(x, i);
        if (!isfinite(v) || (nonneg && v < 0)) return i;
    }
    return -1;
}

qkv_status trainer_check_state(const trainer *t, qkv_status status) {
    const qkv_model *m = &t->model;
    const qkv_optim *o = &t->optim;
    for (int i = 0; i < m->nparams; i++) {
        const char *what[3] = {"the weights", "the optimizer's first moments",
                               "the optimizer's second moments"};
        const qkv_tensor *x[3] = {m->param[i], o->m[i], o->v[i]};
        for (int k = 0; k < 3; k++) {
            int64_t at = x[k] ? first_bad(x[k], k == 2) : -1;
            if (at < 0) continue;
            double v = qkv_get(x[k], at);
            return qkv_fail(status, "%s of '%s' hold %s at element %" PRId64 " after step %"
                            PRId64 "%s%s%s", what[k], m->param_name[i], isnan(v) ? "NaN" : isinf(v)
                            ? "Inf" : "a negative value", at, o->step,
                            status == QKV_ERR_NUMERIC ? ": training diverged (lower " : "",
                            status == QKV_ERR_NUMERIC ? field_name("lr") : "",
                            status == QKV_ERR_NUMERIC ? ")" : "");
        }
    }
    return QKV_OK;
}

#define META_MAX 40 /* metadata keys of a file */

qkv_status trainer_save(const trainer *t, const char *path) {
    qkv_status bad = trainer_check_state(t, QKV_ERR_NUMERIC);
    if (bad != QKV_OK) return bad;
    const train_config *c = &t->cfg;
    const qkv_model *m = &t->model;
    char vals[META_MAX][96];
    const char *meta[2 * META_MAX];
    int nm = 0;
#define META(key, ...)                                                                     \
    do {                                                                                   \
        snprintf(vals[nm], sizeof vals[nm], __VA_ARGS__);                                  \
        meta[2 * nm] = key;                                                                \
        meta[2 * nm + 1] = vals[nm];                                                       \
        nm++;                                                                              \
    } while (0)
    META("format", "qkv-model");
    META("qkv_version", "%s", QKV_VERSION_STRING);
    META("task", "%s", qkv_task_name(c->task.kind));
    for (int i = 0; i < N_CONFIG_FIELDS; i++) {
        field_text(&config_fields[i], c, vals[nm], sizeof vals[nm]);
        const config_field *f = &config_fields[i];
        if (f->omit_absent && is_default(f, vals[nm])) continue;
        meta[2 * nm] = config_fields[i].key;
        meta[2 * nm + 1] = vals[nm];
        nm++;
    }
    if (c->task.kind == QKV_TASK_MODULAR) { /* the modulus is vocab - 1 */
        META("op", "%s", qkv_modular_op_name(c->task.op));
        META("train_frac", "%.17g", c->task.train_frac);
        META("data_seed", "%" PRIu64, c->task.data_seed);
    }
    META("step", "%" PRId64, t->optim.step);
    if (t->metrics_rows >= 0) META("metrics_rows", "%" PRId64, t->metrics_rows);
    META("data_rng", "%016" PRIx64 "%016" PRIx64 "%016" PRIx64 "%016" PRIx64, t->data_rng.s[0],
         t->data_rng.s[1], t->data_rng.s[2], t->data_rng.s[3]);
    char *vocab_text = NULL;
    if (t->data) { /* the files, their checksum, the output length and the token strings */
        const dataset *d = t->data;
        META("target_len", "%d", m->cfg.target_len);
        META("data_checksum", "%016" PRIx64, d->checksum);
        meta[2 * nm] = "data"; /* the files as the run was given them, not its copies */
        meta[2 * nm + 1] = c->data_path;
        nm++;
        meta[2 * nm] = "heldout";
        meta[2 * nm + 1] = c->heldout_path;
        nm++;
        if (t->data_copied) {
            META("data_copy", RUN_DATA_COPY);
            if (c->heldout_path[0]) META("heldout_copy", RUN_HELDOUT_COPY);
        }
        size_t bytes = 1;
        for (int i = 1; i < d->vocab; i++) bytes += strlen(d->token[i]) + 1;
        vocab_text = malloc(bytes);
        if (!vocab_text) return qkv_fail(QKV_ERR_NOMEM, "out of memory saving %s", path);
        char *p = vocab_text;
        for (int i = 1; i < d->vocab; i++) /* ids 1.., space-separated (tokens have none) */
            p += sprintf(p, "%s%s", i > 1 ? " " : "", d->token[i]);
        *p = '\0';
        meta[2 * nm] = "tokens";
        meta[2 * nm + 1] = vocab_text;
        nm++;
    }
#undef META
    const qkv_optim *o = &t->optim;
    const char *names[3 * QKV_MAX_PARAMS];
    const qkv_tensor *tensors[3 * QKV_MAX_PARAMS];
    char state_names[2 * QKV_MAX_PARAMS][48];
    int n = 0, ns = 0;
    for (int i = 0; i < m->nparams; i++) {
        names[n] = m->param_name[i];
        tensors[n++] = m->param[i];
    }
    for (int i = 0; i < o->n; i++) {
        if (o->m[i]) {
            snprintf(state_names[ns], sizeof state_names[ns], "optim.m.%s", m->param_name[i]);
            names[n] = state_names[ns++];
            tensors[n++] = o->m[i];
        }
        if (o->v[i]) {
            snprintf(state_names[ns], sizeof state_names[ns], "optim.v.%s", m->param_name[i]);
            names[n] = state_names[ns++];
            tensors[n++] = o->v[i];
        }
    }
    qkv_status s = qkv_st_save(path, n, names, tensors, nm, meta);
    free(vocab_text);
    return s;
}

/* The 64-bit word written as 16 hexadecimal digits at text (as "%016" PRIx64 writes it: no
 * sign, space or 0x, which strtoull would take); false if those 16 characters are not. */
static bool hex_word(const char *text, uint64_t *out) {
    uint64_t v = 0;
    for (int i = 0; i < 16; i++) {
        char c = text[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return false;
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return true;
}

/* Reads metadata value `key` as a whole number within [lo, hi] (engine/numbers.c). */
static qkv_status meta_whole(const qkv_st *st, const char *path, const char *key, int64_t lo,
                             int64_t hi, int64_t *out) {
    const char *s = qkv_st_meta(st, key);
    if (!s) return qkv_fail(QKV_ERR_FORMAT, "%s: metadata '%s' is missing", path, key);
    number_read r = number_int(s, lo, hi, out);
    if (r != NUMBER_OK)
        return qkv_fail(QKV_ERR_FORMAT, "%s: metadata '%s' is %s", path, key,
                        r == NUMBER_RANGE ? "out of range" : "not a whole number");
    return QKV_OK;
}

/* The run directory's copies of a data model's files (RUN_DATA_COPY), when its metadata names
 * them and they are there beside the model file: c->data_copy and c->heldout_copy. Without
 * them (a model file moved alone, or saved before runs kept copies) the files are read by
 * their own paths. Either way trainer_init checks the bytes against the checksum. */
static qkv_status find_copies(const qkv_st *st, const char *path, train_config *c) {
    const char *copy = qkv_st_meta(st, "data_copy"), *held_copy = qkv_st_meta(st, "heldout_copy");
    if (!copy) return QKV_OK;
    /* only the names qkv writes: a model file never leads reading elsewhere */
    if (strcmp(copy, RUN_DATA_COPY) || (held_copy && strcmp(held_copy, RUN_HELDOUT_COPY)) ||
        !held_copy != !c->heldout_path[0])
        return qkv_fail(QKV_ERR_FORMAT, "%s: metadata 'data_copy' or 'heldout_copy' is wrong", path);
    const char *slash = strrchr(path, '/');
    int dir_len = slash ? (int)(slash - path) : 1;
    const char *dir = slash ? path : ".";
    char data[sizeof c->data_copy], held[sizeof c->heldout_copy];
    if ((size_t)snprintf(data, sizeof data, "%.*s/%s", dir_len, dir, copy) >= sizeof data ||
        (held_copy &&
         (size_t)snprintf(held, sizeof held, "%.*s/%s", dir_len, dir, held_copy) >= sizeof held))
        return QKV_OK; /* too long a path for a copy: the files' own paths */
    /* a copy that is there but cannot be read (a link to nowhere, no permission) is read, and
     * says so: never taken for a missing one */
    if (io_absent(data) || (held_copy && io_absent(held))) return QKV_OK;
    snprintf(c->data_copy, sizeof c->data_copy, "%s", data);
    if (held_copy) snprintf(c->heldout_copy, sizeof c->heldout_copy, "%s", held);
    return QKV_OK;
}

/* A run's config from a file's metadata: every row of config_fields, and the task (a data
 * file's paths and checksum; the file is not read). The model's dtype is the file's, also in
 * *file_dtype. */
static qkv_status read_config(const qkv_st *st, const char *path, train_config *c,
                              qkv_dtype *file_dtype) {
    memset(c, 0, sizeof *c);
    const char *fmt = qkv_st_meta(st, "format"), *task = qkv_st_meta(st, "task");
    const char *rng = qkv_st_meta(st, "data_rng");
    if (!fmt || strcmp(fmt, "qkv-model") || !task || !rng || strlen(rng) != 64)
        return qkv_fail(QKV_ERR_FORMAT, "%s is not " ST_MODEL_FILE ": its metadata is missing or "
                        "wrong", path);
    for (int i = 0; i < N_CONFIG_FIELDS; i++) {
        qkv_status s = read_field(&config_fields[i], st, path, c);
        if (s != QKV_OK) return s;
    }
    *file_dtype = c->model.dtype;
    c->model.seq_len = c->task.seq_len;
    c->model.vocab = c->task.vocab;
    if (!strcmp(task, "data")) { /* the examples are read again, and must be the same */
        const char *data = qkv_st_meta(st, "data"), *held = qkv_st_meta(st, "heldout");
        const char *sum = qkv_st_meta(st, "data_checksum");
        if (!data || !held || !sum || strlen(data) >= sizeof c->data_path ||
            strlen(held) >= sizeof c->heldout_path || strlen(sum) != 16 ||
            !hex_word(sum, &c->data_checksum))
            return qkv_fail(QKV_ERR_FORMAT, "%s: metadata 'data', 'heldout' or 'data_checksum' is "
                            "missing or wrong", path);
        snprintf(c->data_path, sizeof c->data_path, "%s", data);
        snprintf(c->heldout_path, sizeof c->heldout_path, "%s", held);
        c->task.kind = QKV_TASK_DATA;
        qkv_status s = find_copies(st, path, c);
        if (s != QKV_OK) return s;
    } else if (!strcmp(task, "modular")) { /* the modulus is vocab - 1 */
        const char *op = qkv_st_meta(st, "op"), *frac = qkv_st_meta(st, "train_frac");
        const char *seed = qkv_st_meta(st, "data_seed");
        int k = 0;
        while (op && k < QKV_MODULAR_OPS && strcmp(op, qkv_modular_op_name((qkv_modular_op)k))) k++;
        double train_frac = 0;
        uint64_t data_seed = 0;
        if (!op || k == QKV_MODULAR_OPS || !frac || number_real(frac, &train_frac) != NUMBER_OK ||
            !seed || number_u64(seed, &data_seed) != NUMBER_OK)
            return qkv_fail(QKV_ERR_FORMAT, "%s: metadata 'op', 'train_frac' or 'data_seed' is "
                            "missing or wrong", path);
        if (c->task.seq_len != QKV_MODULAR_SEQ_LEN)
            return qkv_fail(QKV_ERR_FORMAT, "%s: modular's seq_len is not %d", path,
                            QKV_MODULAR_SEQ_LEN);
        if (qkv_task_modular(&c->task, c->task.vocab - 1, (qkv_modular_op)k, train_frac,
                             data_seed) != QKV_OK)
            return qkv_fail(QKV_ERR_FORMAT, "%s: %s", path, qkv_last_error());
        c->model.seq_len = c->task.seq_len; /* the same: vocab and seq_len */
    } else if (qkv_task_init(&c->task, task, c->task.seq_len, c->task.vocab) != QKV_OK) {
        return qkv_fail(QKV_ERR_FORMAT, "%s: %s", path, qkv_last_error());
    }
    c->model.target_len = c->task.target_len; /* a data file's: from the file (trainer_init) */
    return QKV_OK;
}

qkv_status trainer_load(trainer *t, const char *path) {
    return trainer_load_as(t, path, TRAIN_DTYPE_OF_FILE);
}

qkv_status trainer_load_as(trainer *t, const char *path, int dtype) {
    memset(t, 0, sizeof *t);
    qkv_st *st;
    qkv_status s = st_load_as(path, ST_MODEL_FILE, &st);
    if (s != QKV_OK) return s;
    s = trainer_load_st_as(t, st, path, dtype);
    qkv_st_free(st);
    return s;
}

/* Reads tensor `name` of the file into dst; with `widen`, the file's f32 tensor into an f64
 * dst (exact: every f32 is a double). `tmp` is scratch for the f32 copy. */
static qkv_status read_widened(const qkv_st *st, const char *name, qkv_tensor *dst, bool widen,
                               qkv_ctx *tmp) {
    if (!widen) return qkv_st_read(st, name, dst);
    qkv_ctx_reset(tmp);
    qkv_tensor *f = qkv_zeros(tmp, QKV_F32, dst->ndim, dst->shape);
    qkv_status s = qkv_st_read(st, name, f);
    if (s == QKV_OK)
        for (int64_t i = 0; i < dst->size; i++) ((double *)dst->data)[i] = ((const float *)f->data)[i];
    return s;
}

qkv_status trainer_load_st(trainer *t, const qkv_st *st, const char *path) {
    return trainer_load_st_as(t, st, path, TRAIN_DTYPE_OF_FILE);
}

qkv_status trainer_load_st_as(trainer *t, const qkv_st *st, const char *path, int as) {
    memset(t, 0, sizeof *t);
    train_config c;
    qkv_dtype file_dtype = QKV_F32;
    qkv_status s = read_config(st, path, &c, &file_dtype);
    if (s != QKV_OK) return s;
    if (as == QKV_F32 && file_dtype == QKV_F64)
        return qkv_fail(QKV_ERR_MISMATCH, "%s: the model is f64; %s f32 would round its "
                        "weights (leave %s out, or give f64)", path, field_name("dtype"),
                        field_name("dtype"));
    if (as != TRAIN_DTYPE_OF_FILE) c.model.dtype = (qkv_dtype)as;
    if ((s = trainer_init_for(t, &c, "loading the model")) != QKV_OK)
        /* a value out of range here came from the file: the file is bad, not the command line */
        return qkv_fail(s == QKV_ERR_VALUE ? QKV_ERR_FORMAT : s, "%s: %s", path, qkv_last_error());
    if (t->data && (t->model.cfg.vocab != c.task.vocab || t->model.cfg.seq_len != c.task.seq_len)) {
        trainer_free(t);
        return qkv_fail(QKV_ERR_FORMAT, "%s: its vocab or seq_len is not that of %s", path,
                        c.data_path);
    }
    qkv_model *m = &t->model;
    qkv_optim *o = &t->optim;
    /* for widening an f32 file to an f64 model: the largest tensor's f32 copy */
    bool widen = file_dtype != c.model.dtype; /* an f32 file asked for as f64 */
    qkv_ctx *tmp = qkv_ctx_new(widen ? 4096 + (size_t)(qkv_model_param_bytes(&c.model) / 8) : 0);
    if (!tmp) s = qkv_fail(QKV_ERR_NOMEM, "out of memory reading %s", path);
    for (int i = 0; i < m->nparams && s == QKV_OK; i++) {
        char name[48];
        s = read_widened(st, m->param_name[i], m->param[i], widen, tmp);
        snprintf(name, sizeof name, "optim.m.%s", m->param_name[i]);
        if (s == QKV_OK && o->m[i]) s = read_widened(st, name, o->m[i], widen, tmp);
        snprintf(name, sizeof name, "optim.v.%s", m->param_name[i]);
        if (s == QKV_OK && o->v[i]) s = read_widened(st, name, o->v[i], widen, tmp);
    }
    qkv_ctx_free(tmp);
    int64_t step = 0;
    if (s == QKV_OK) s = meta_whole(st, path, "step", 0, (int64_t)1e15, &step);
    o->step = step;
    const char *rng = qkv_st_meta(st, "data_rng"); /* 64 characters (read_config) */
    for (int i = 0; i < 4 && s == QKV_OK; i++) {
        if (!hex_word(rng + 16 * i, &t->data_rng.s[i]))
            s = qkv_fail(QKV_ERR_FORMAT, "%s: metadata 'data_rng' is not hexadecimal", path);
    }
    int64_t rows = -1;
    if (s == QKV_OK && qkv_st_meta(st, "metrics_rows"))
        s = meta_whole(st, path, "metrics_rows", 0, (int64_t)1e15, &rows);
    t->metrics_rows = rows;
    if (s == QKV_OK && (s = trainer_check_state(t, QKV_ERR_FORMAT)) != QKV_OK)
        s = qkv_fail(s, "%s: %s", path, qkv_last_error());
    if (s != QKV_OK) trainer_free(t);
    return s;
}

qkv_status qkv_model_load(qkv_model *m, qkv_task *task, const char *path) {
    memset(m, 0, sizeof *m);
    qkv_st *st;
    qkv_status s = st_load_as(path, ST_MODEL_FILE, &st);
    if (s != QKV_OK) return s;
    train_config c;
    qkv_dtype file_dtype;
    int64_t target_len = 0;
    s = read_config(st, path, &c, &file_dtype);
    /* a data file's model: its output length, which trainer_load takes from the file itself */
    if (s == QKV_OK && c.task.kind == QKV_TASK_DATA &&
        (s = meta_whole(st, path, "target_len", 0, 65536, &target_len)) == QKV_OK) {
        c.model.target_len = (int)target_len;
        c.task.target_len = (int)target_len;
    }
    if (s == QKV_OK && (s = qkv_model_init(m, &c.model, c.seed)) != QKV_OK)
        /* a value out of range here came from the file: the file is bad */
        s = qkv_fail(s == QKV_ERR_VALUE ? QKV_ERR_FORMAT : s, "%s: %s", path, qkv_last_error());
    for (int i = 0; i < m->nparams && s == QKV_OK; i++) s = qkv_st_read(st, m->param_name[i], m->param[i]);
    qkv_st_free(st);
    if (s != QKV_OK) {
        qkv_model_free(m);
        memset(m, 0, sizeof *m);
        return s;
    }
    if (task) *task = c.task;
    return QKV_OK;
}
