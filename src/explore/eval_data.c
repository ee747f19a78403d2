/* eval_data.c - a saved model on a new file of examples (eval_data.h). */
#include "explore/eval_data.h"
#include "io/io.h"
#include "train/loaded_model.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>


void eval_file_free(eval_file *f) {
    free(f->x), free(f->y), free(f->len), free(f->line);
    f->x = f->y = f->len = NULL, f->line = NULL;
}

/* A task model's line: its input tokens (ids or labels) split at spaces into `out`, at most
 * `most`. The count, or -1 with the error set (naming the file, the line and the word). */
static int read_task_input(const loaded_model *lm, const char *path, int64_t line, char *side,
                           int most, int32_t *out) {
    int n = 0;
    for (char *p = side;;) {
        p += strspn(p, " ");
        if (!*p) break;
        size_t len = strcspn(p, " ");
        char save = p[len];
        p[len] = '\0';
        if (n >= most) {
            qkv_fail(QKV_ERR_FORMAT, "%s line %lld: more than %d input tokens: the model reads "
                     "at most %d", path, (long long)line, most, most);
            return -1;
        }
        int id = explain_read_token(lm, p);
        if (id < 0) {
            qkv_fail(QKV_ERR_FORMAT, "%s line %lld: unknown token '%.40s' (input token %d): the "
                     "model does not know it", path, (long long)line, p, n + 1);
            return -1;
        }
        out[n++] = id;
        p[len] = save;
        p += len;
    }
    return n;
}

static qkv_status grow(eval_file *f, size_t *cap, int T, int To) {
    if ((size_t)f->n < *cap) return QKV_OK;
    size_t c = *cap ? 2 * *cap : 256;
    int32_t *x = realloc(f->x, c * T * sizeof *x);
    if (x) f->x = x;
    int32_t *y = realloc(f->y, c * To * sizeof *y);
    if (y) f->y = y;
    int32_t *len = realloc(f->len, c * sizeof *len);
    if (len) f->len = len;
    int64_t *line = realloc(f->line, c * sizeof *line);
    if (line) f->line = line;
    if (!x || !y || !len || !line) return qkv_fail(QKV_ERR_NOMEM, "out of memory for the examples");
    *cap = c;
    return QKV_OK;
}

qkv_status eval_file_read(eval_file *f, const loaded_model *lm, const char *path) {
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", path);
    FILE *in;
    qkv_status s = io_fopen_regular(path, &in);
    if (s != QKV_OK) return s;
    int T = lm->model.cfg.seq_len, To = lm->target_len;
    char *buf = NULL;
    size_t bufcap = 0, cap = 0;
    ssize_t got;
    int64_t line = 0;
    /* errno tells a line that did not fit in memory (ENOMEM) from the end of the file */
    while (s == QKV_OK && (errno = 0, got = getline(&buf, &bufcap, in)) >= 0) {
        line++;
        size_t len = strlen(buf);
        if ((size_t)got != len) {
            s = qkv_fail(QKV_ERR_FORMAT, "%s line %lld: a NUL byte", path, (long long)line);
            break;
        }
        if (len && buf[len - 1] == '\n') buf[--len] = '\0'; /* the line's end, as training's */
        if (len && buf[len - 1] == '\r') buf[--len] = '\0';
        if (line == 1 && !strncmp(buf, "\xef\xbb\xbf", 3)) /* a UTF-8 byte-order mark */
            memmove(buf, buf + 3, (len -= 3) + 1);
        if (!buf[strspn(buf, " ")]) continue; /* spaces only */
        if ((s = grow(f, &cap, T, To)) != QKV_OK) break;
        int32_t *x = f->x + (size_t)f->n * T, *y = f->y + (size_t)f->n * To;
        for (int i = 0; i < To; i++) y[i] = -1;
        int n;
        if (lm->data) { /* a data file's model: its lines read as training reads a --heldout file */
            int counts[2];
            const int most[2] = {T, To};
            s = dataset_read_line(lm->data, true, path, line, buf, len, most, x, y, counts);
            if (s != QKV_OK) break;
            n = counts[0];
        } else {
            if (strchr(buf, '\t')) {
                const char *task = qkv_task_name(lm->cfg.task.kind);
                s = qkv_fail(QKV_ERR_FORMAT, "%s line %lld: a tab: %s %s model's examples are "
                             "lines of input tokens only (the task gives the targets)", path,
                             (long long)line, strchr("aeiou", task[0]) ? "an" : "a", task);
                break;
            }
            if ((n = read_task_input(lm, path, line, buf, T, x)) < 0) {
                s = QKV_ERR_FORMAT;
                break;
            }
            if (n != T) {
                s = qkv_fail(QKV_ERR_FORMAT, "%s line %lld: %d input tokens; the model reads "
                             "exactly %d", path, (long long)line, n, T);
                break;
            }
            char where[FILE_PATH_LEN + 40];
            snprintf(where, sizeof where, "%s line %lld", path, (long long)line);
            if ((s = explain_task_targets(lm, QKV_ERR_FORMAT, where, x, y)) != QKV_OK) break;
        }
        for (int i = n; i < T; i++) x[i] = DATA_PAD;
        f->len[f->n] = n;
        f->line[f->n++] = line;
    }
    if (s == QKV_OK && got < 0 && errno == ENOMEM)
        s = qkv_fail(QKV_ERR_NOMEM, "%s line %lld: out of memory reading the line", path,
                     (long long)line + 1);
    if (s == QKV_OK && ferror(in)) s = qkv_fail(QKV_ERR_IO, "%s: read error", path);
    if (s == QKV_OK && f->n == 0) s = qkv_fail(QKV_ERR_FORMAT, "%s: no example in it", path);
    bool target = false; /* outputs all `_`: nothing to score */
    for (size_t i = 0; s == QKV_OK && !target && i < (size_t)f->n * To; i++) target = f->y[i] >= 0;
    if (s == QKV_OK && !target)
        s = qkv_fail(QKV_ERR_FORMAT, "%s: every output token is '_': no example has a target "
                     "to score", path);
    free(buf);
    fclose(in);
    return s;
}

void eval_data_result_free(eval_data_result *r) {
    free(r->by_position), free(r->by_length), free(r->entropy);
    r->by_position = r->by_length = NULL;
    r->entropy = NULL;
}

/* One example's line of --per-example. */
static void write_example(const loaded_model *lm, const eval_file *f, int e,
                          const qkv_tensor *logits, int b, FILE *out) {
    int T = lm->model.cfg.seq_len, To = lm->target_len, V = lm->model.cfg.vocab;
    const int32_t *x = f->x + (size_t)e * T, *y = f->y + (size_t)e * To;
    cJSON *o = cJSON_CreateObject(), *in = cJSON_AddArrayToObject(o, "input");
    cJSON_AddNumberToObject(o, "example", e + 1);
    cJSON_AddNumberToObject(o, "line", (double)f->line[e]);
    for (int i = 0; i < f->len[e]; i++) cJSON_AddItemToArray(in, explain_token_json(lm, x[i]));
    cJSON *tg = cJSON_AddArrayToObject(o, "targets");
    cJSON *pr = cJSON_AddArrayToObject(o, "predictions");
    cJSON *pb = cJSON_AddArrayToObject(o, "probabilities");
    cJSON *ok = cJSON_AddArrayToObject(o, "right");
    int queries = lm->model.cfg.target_len ? To : f->len[e], right = 0, counted = 0;
    for (int i = 0; i < queries; i++) {
        int64_t row = ((int64_t)b * To + i) * V;
        int best = (int)qkv_argmax(logits, row, V);
        double max = qkv_get(logits, row + best), z = 0;
        for (int j = 0; j < V; j++) z += exp(qkv_get(logits, row + j) - max);
        cJSON_AddItemToArray(pr, explain_class_json(lm, best));
        cJSON_AddItemToArray(pb, cJSON_CreateNumber(1.0 / z));
        if (y[i] < 0) {
            cJSON_AddItemToArray(tg, cJSON_CreateNull());
            cJSON_AddItemToArray(ok, cJSON_CreateNull());
        } else {
            cJSON_AddItemToArray(tg, explain_class_json(lm, y[i]));
            cJSON_AddItemToArray(ok, cJSON_CreateBool(best == y[i]));
            right += best == y[i], counted++;
        }
    }
    cJSON_AddNumberToObject(o, "correct", right);
    cJSON_AddNumberToObject(o, "counted", counted);
    char *text = cJSON_PrintUnformatted(o);
    if (text) fprintf(out, "%s\n", text);
    free(text);
    cJSON_Delete(o);
}

qkv_status eval_data_run(loaded_model *lm, const eval_file *f, FILE *per_example,
                         eval_data_result *r) {
    const qkv_model_config *c = &lm->model.cfg;
    int T = c->seq_len, To = lm->target_len, L = c->layers, H = c->heads, V = c->vocab;
    memset(r, 0, sizeof *r);
    r->by_position = calloc((size_t)To, sizeof *r->by_position);
    r->by_length = calloc((size_t)T + 1, sizeof *r->by_length);
    r->entropy = calloc((size_t)L * H, sizeof *r->entropy);
    if (!r->by_position || !r->by_length || !r->entropy)
        return qkv_fail(QKV_ERR_NOMEM, "eval: out of memory");
    qkv_status s = loaded_model_reserve(lm, f->n, "eval");
    if (s != QKV_OK) return s;
    const int32_t *lengths = lm->data ? f->len : NULL;
    r->chance = qkv_task_chance(&lm->cfg.task);
    /* loss, accuracy and the head scores, as training defines them, over the file */
    r->heads = loaded_model_evaluate(lm, (example_set){f->n, f->x, f->y, lengths});
    r->score = (explain_score){r->heads.loss, r->heads.accuracy, r->heads.counted, 0};
    int64_t ent_rows = 0;
    for (int start = 0; start < f->n; start += ANALYSIS_BATCH) {
        int B = f->n - start < ANALYSIS_BATCH ? f->n - start : ANALYSIS_BATCH;
        qkv_ctx_reset(lm->ctx);
        qkv_probe probe = {0};
        qkv_tensor *logits = qkv_model_forward_probe(&lm->model, lm->ctx,
                                                     f->x + (size_t)start * T,
                                                     lengths ? lengths + start : NULL, B, &probe);
        s = explain_check_scored_logits(lm, logits, f->y + (size_t)start * To, start,
                                                   NULL, 0);
        if (s != QKV_OK) return qkv_fail(s, "eval: %s", qkv_last_error());
        for (int b = 0; b < B; b++) {
            int e = start + b, queries = c->target_len ? To : f->len[e];
            const int32_t *y = f->y + (size_t)e * To;
            int64_t hits = 0, counted = 0;
            for (int i = 0; i < To; i++) {
                if (y[i] < 0) continue;
                int64_t row = ((int64_t)b * To + i) * V;
                int best = (int)qkv_argmax(logits, row, V);
                r->by_position[i].hits += best == y[i];
                r->by_position[i].counted++;
                hits += best == y[i], counted++;
            }
            r->by_length[f->len[e]].hits += hits;
            r->by_length[f->len[e]].counted += counted;
            for (int l = 0; l < L; l++)
                for (int h = 0; h < H; h++)
                    for (int i = 0; i < queries; i++) {
                        double ent = 0;
                        int64_t row = (((int64_t)b * H + h) * To + i) * T;
                        for (int j = 0; j < T; j++) {
                            double a = qkv_get(probe.attn[l], row + j);
                            if (a > 0) ent -= a * log(a);
                        }
                        r->entropy[l * H + h] += ent; /* summed here, averaged below */
                    }
            ent_rows += queries;
            if (per_example) write_example(lm, f, e, logits, b, per_example);
        }
    }
    for (int k = 0; k < L * H; k++) r->entropy[k] = ent_rows ? r->entropy[k] / ent_rows : 0;
    return QKV_OK;
}

static void add_number(cJSON *o, const char *key, double v) {
    if (isfinite(v)) cJSON_AddNumberToObject(o, key, v);
    else cJSON_AddNullToObject(o, key);
}

cJSON *eval_data_json(const loaded_model *lm, const eval_file *f, const eval_data_result *r) {
    const qkv_model_config *c = &lm->model.cfg;
    cJSON *o = explain_json_header(lm, "eval", NULL);
    cJSON_AddStringToObject(o, "data", f->path);
    cJSON_AddNumberToObject(o, "examples", f->n);
    cJSON_AddNumberToObject(o, "counted", (double)r->score.counted);
    add_number(o, "loss", r->score.loss);
    add_number(o, "accuracy", r->score.accuracy);
    add_number(o, "chance", r->chance);
    cJSON *bp = cJSON_AddArrayToObject(o, "by_position");
    for (int i = 0; i < lm->target_len; i++) {
        if (!r->by_position[i].counted) continue;
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "position", i);
        cJSON_AddNumberToObject(x, "counted", (double)r->by_position[i].counted);
        add_number(x, "accuracy", (double)r->by_position[i].hits / r->by_position[i].counted);
        cJSON_AddItemToArray(bp, x);
    }
    cJSON *bl = cJSON_AddArrayToObject(o, "by_length");
    for (int n = 1; n <= c->seq_len; n++) {
        if (!r->by_length[n].counted) continue;
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "length", n);
        cJSON_AddNumberToObject(x, "counted", (double)r->by_length[n].counted);
        add_number(x, "accuracy", (double)r->by_length[n].hits / r->by_length[n].counted);
        cJSON_AddItemToArray(bl, x);
    }
    cJSON *hs = cJSON_AddArrayToObject(o, "head_scores");
    for (int l = 0; l < c->layers; l++)
        for (int h = 0; h < c->heads; h++) {
            /* training's evaluation scores the first EVAL_MAX_HEADS heads of a layer: a later
             * head's prev_token, duplicate and induction are null (docs/explain.md) */
            bool scored = h < EVAL_MAX_HEADS;
            cJSON *x = cJSON_CreateObject();
            cJSON_AddNumberToObject(x, "layer", l + 1);
            cJSON_AddNumberToObject(x, "head", h + 1);
            add_number(x, "entropy", r->entropy[l * c->heads + h]);
            add_number(x, "prev_token", scored ? r->heads.prev_token[l][h] : NAN);
            add_number(x, "duplicate", scored ? r->heads.duplicate[l][h] : NAN);
            add_number(x, "induction", scored ? r->heads.induction[l][h] : NAN);
            cJSON_AddItemToArray(hs, x);
        }
    /* the hint plain eval gives, from the numbers over the file (null when none is due) */
    char hint[512];
    if (loaded_model_hint(lm, &r->heads, hint, sizeof hint) != HINT_NONE)
        cJSON_AddStringToObject(o, "hint", hint + strlen("hint: "));
    else
        cJSON_AddNullToObject(o, "hint");
    return o;
}
