/* inspect.c - one input through a saved model, every part of every head kept (inspect.h). */
#include "explore/inspect.h"
#include "explore/explain.h" /* explain_task_targets */
#include "engine/engine.h" /* memory_limit */
#include "train/loaded_model.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- tokens: the words the user types ---- */

void inspect_token_label(const inspection *in, int32_t t, char *buf, size_t len) {
    if (in->lm.data) dataset_label(in->lm.data, t, buf, len);
    else qkv_task_token_label(&in->lm.cfg.task, t, buf, len);
}

/* How a predicted class reads: lookup's classes are values (v1), the other tasks' tokens. */
void inspect_class_label(const inspection *in, int c, char *buf, size_t len) {
    char text[32];
    if (in->lm.data && c >= 0) dataset_label(in->lm.data, c, buf, len); /* printable, short */
    else snprintf(buf, len, "%s", inspect_class_text(in, c, text, sizeof text));
}

const char *inspect_class_text(const inspection *in, int c, char *buf, size_t len) {
    if (c < 0) return "_";
    return loaded_model_class_text(&in->lm, c, buf, len);
}

/* x is (1, H, R, C) */
double inspect_part_at(const qkv_tensor *x, bool grad, int h, int i, int j) {
    int64_t at = ((int64_t)h * x->shape[2] + i) * x->shape[3] + j;
    return grad ? qkv_grad_get(x, at) : qkv_get(x, at);
}

const part inspect_parts[INSPECT_NPARTS] = {
    {"q", "Q = X W_Q (queries)", "Q = D W_Q (queries, from the decoder's stream D)", QUERY_ROWS},
    {"k", "K = X W_K (keys)", "K = X W_K (keys, from the embedded input X)", KEY_ROWS},
    {"v", "V = X W_V (values)", "V = X W_V (values, from the embedded input X)", KEY_ROWS},
    {"scores", "S = Q K^T", NULL, QUERIES_BY_KEYS},
    {"scaled", "S / sqrt(d_k)", NULL, QUERIES_BY_KEYS},
    {"weights", "A = softmax(S / sqrt(d_k) + M)", NULL, QUERIES_BY_KEYS},
    {"out", "A V (the head's output)", NULL, QUERY_ROWS},
};
const part inspect_grad_parts[INSPECT_NGRADS] = {
    {"dA", "dA = dLoss/dA", NULL, QUERIES_BY_KEYS},
    {"dS", "dS = dLoss/d(S / sqrt(d_k) + M) = A * (dA - rowsum(dA * A))", NULL, QUERIES_BY_KEYS},
    {"dQ", "dQ = dLoss/dQ", NULL, QUERY_ROWS},
    {"dK", "dK = dLoss/dK", NULL, KEY_ROWS},
    {"dV", "dV = dLoss/dV", NULL, KEY_ROWS},
};
/* The tensor of part i (of inspect_parts[] or, with grad, inspect_grad_parts[]) of layer l. */
const qkv_tensor *inspect_part_tensor(const inspection *in, int l, bool grad, int i) {
    const qkv_layer_trace *tr = &in->probe.layer[l];
    const qkv_tensor *x[INSPECT_NPARTS] = {tr->q,      tr->k,       tr->v,       tr->scores,
                                           tr->scaled, tr->weights, tr->head_out};
    const qkv_tensor *g[INSPECT_NGRADS] = {tr->weights, tr->masked, tr->q, tr->k, tr->v};
    return grad ? g[i] : x[i];
}

int inspect_part_rows(const inspection *in, const part *p) {
    return p->shape == KEY_ROWS ? in->T : in->Tq;
}
int inspect_part_cols(const inspection *in, const part *p) {
    return p->shape == QUERIES_BY_KEYS ? in->T : in->Dk;
}
char (*inspect_part_row_labels(const inspection *in, const part *p))[40] {
    return p->shape == KEY_ROWS ? in->klabels : in->qlabels;
}

bool inspect_masked_at(const inspection *in, int i, int j) {
    return in->masked[(size_t)i * in->T + j];
}

/* Reads the model; for a data file's model, the file too (loaded_model_load), for its
 * vocabulary. */
static qkv_status load_model(inspection *in, const char *path) {
    qkv_status s = loaded_model_load(&in->lm, path, TRAIN_DTYPE_OF_FILE);
    if (s != QKV_OK) return s;
    const qkv_model_config *c = &in->lm.model.cfg;
    in->model_T = c->seq_len, in->H = c->heads, in->L = c->layers, in->Dk = c->d_model / c->heads;
    in->V = c->vocab, in->cross = c->target_len > 0;
    if (in->model_T > INSPECT_MAX_TOKENS || in->lm.target_len > INSPECT_MAX_TOKENS)
        return qkv_fail(QKV_ERR_FORMAT, "%s: --seq-len %d is longer than inspect reads (%d)",
                        path, in->model_T, INSPECT_MAX_TOKENS);
    return QKV_OK;
}

/* The input and the target words (explain.c's readers, as every command reads an input) ->
 * in->tokens (padded), in->T, in->Tq and in->targets. */
static qkv_status read_words(inspection *in, const char *input, const char *target) {
    explain_input *words = malloc(sizeof *words);
    if (!words) return qkv_fail(QKV_ERR_NOMEM, "inspect: out of memory");
    qkv_status s = explain_read_input(&in->lm, "--input", input, words);
    if (s == QKV_OK && target) s = explain_read_targets(&in->lm, "--target", target, words);
    if (s == QKV_OK) {
        in->T = words->n;
        in->Tq = in->cross ? in->lm.target_len : in->T;
        memcpy(in->tokens, words->tokens, sizeof in->tokens);
        for (int i = 0; i < in->lm.target_len; i++)
            in->targets[i] = target ? words->targets[i] : -1;
    }
    free(words);
    return s == QKV_OK ? s : qkv_fail(s, "inspect: %s", qkv_last_error());
}

int inspect_predict(const inspection *in, int i, double *prob) {
    int64_t row = (int64_t)i * in->V;
    int best = (int)qkv_argmax(in->logits, row, in->V);
    double top = qkv_get(in->logits, row + best), sum = 0;
    for (int j = 0; j < in->V; j++) sum += exp(qkv_get(in->logits, row + j) - top);
    *prob = 1 / sum;
    return best;
}

int inspect_query_class(const inspection *in, int i) {
    double prob;
    return in->loss ? in->targets[i] : inspect_predict(in, i, &prob);
}

qkv_status inspection_run(inspection *in, const char *model_path, const char *input,
                          const char *target) {
    memset(in, 0, sizeof *in);
    qkv_status s = load_model(in, model_path);
    if (s == QKV_OK) s = read_words(in, input, target);
    if (s != QKV_OK) return s;
    const qkv_model_config *c = &in->lm.model.cfg;
    int To = in->lm.target_len;
    const char *what;
    double need = qkv_model_step_bytes(c, 1), have = memory_limit(&what);
    in->klabels = malloc((size_t)in->T * sizeof *in->klabels);
    in->qlabels = malloc((size_t)in->Tq * sizeof *in->qlabels);
    in->masked = malloc((size_t)in->Tq * in->T);
    if (need > have / 2 || !in->klabels || !in->qlabels || !in->masked ||
        !(in->ctx = qkv_ctx_new((size_t)need + (1 << 20)))) {
        return qkv_fail(QKV_ERR_NOMEM, "inspect: out of memory (about %.1f MiB needed, %s "
                        "allows %.1f MiB)", need / (1 << 20), what, have / (1 << 20));
    }
    qkv_ctx_set_no_grad(in->ctx, !target); /* gradients only when there is a loss */
    /* a data file's input is padded as in training: lengths = the typed tokens */
    int32_t length = in->T;
    in->logits = qkv_model_forward_probe(&in->lm.model, in->ctx, in->tokens,
                                         in->lm.data ? &length : NULL, 1, &in->probe);
    if (target) {
        qkv_tensor *y = qkv_from_array(in->ctx, QKV_I32, 2, (int64_t[]){1, To}, in->targets);
        in->loss = qkv_cross_entropy(in->ctx, in->logits, y, -1);
        qkv_zero_grad(in->lm.model.params);
        qkv_backward(in->loss);
    }
    /* the mask, as the model applied it: -inf entered the softmax (the same in every head) */
    for (int i = 0; i < in->Tq; i++)
        for (int j = 0; j < in->T; j++) {
            double m = inspect_part_at(in->probe.layer[0].masked, false, 0, i, j);
            in->masked[(size_t)i * in->T + j] = isinf(m) && m < 0;
        }
    char tok[32];
    for (int j = 0; j < in->T; j++) {
        inspect_token_label(in, in->tokens[j], tok, sizeof tok);
        snprintf(in->klabels[j], sizeof in->klabels[j], "%d:%.28s", j, tok);
    }
    for (int i = 0; i < in->Tq; i++) {
        if (!in->cross) {
            memcpy(in->qlabels[i], in->klabels[i], sizeof in->qlabels[i]);
            continue;
        }
        inspect_class_label(in, inspect_query_class(in, i), tok, sizeof tok);
        snprintf(in->qlabels[i], sizeof in->qlabels[i], "%d:%.28s", i, tok);
    }
    return QKV_OK;
}

void inspection_free(inspection *in) {
    qkv_ctx_free(in->ctx);
    free(in->klabels);
    free(in->qlabels);
    free(in->masked);
    if (in->lm.ctx) loaded_model_free(&in->lm);
    memset(in, 0, sizeof *in);
}


/* ---- the JSON object of --json ---- */

/* A number, or null where it has none (a masked score, -inf). */
static cJSON *json_number(double v) {
    return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
}

/* A part of head h as rows of numbers; with `null_masked`, null where the mask dropped a key. */
static cJSON *json_matrix(const inspection *in, const part *p, const qkv_tensor *x, bool grad,
                          int h, bool null_masked) {
    int rows = inspect_part_rows(in, p), cols = inspect_part_cols(in, p);
    cJSON *m = cJSON_CreateArray();
    for (int i = 0; i < rows; i++) {
        cJSON *row = cJSON_CreateArray();
        for (int j = 0; j < cols; j++) {
            bool drop = null_masked && p->shape == QUERIES_BY_KEYS && inspect_masked_at(in, i, j);
            cJSON_AddItemToArray(row, drop ? cJSON_CreateNull()
                                           : json_number(inspect_part_at(x, grad, h, i, j)));
        }
        cJSON_AddItemToArray(m, row);
    }
    return m;
}

/* The positions' labels, "3:tok", each token whole (the terminal's tables shorten them):
 * keys by their input token; queries (queries) of a decoder by inspect_query_class's class. */
static cJSON *json_labels(const inspection *in, int n, bool queries) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        char buf[32], label[320];
        const char *text = queries && in->cross
                               ? inspect_class_text(in, inspect_query_class(in, i), buf, sizeof buf)
                               : loaded_model_token_text(&in->lm, in->tokens[i], buf, sizeof buf);
        size_t len = strlen(text) + 16;
        char *whole = len > sizeof label ? malloc(len) : label;
        if (whole) snprintf(whole, len > sizeof label ? len : sizeof label, "%d:%s", i, text);
        cJSON_AddItemToArray(a, whole ? cJSON_CreateString(whole) : NULL);
        if (whole != label) free(whole);
    }
    return a;
}

cJSON *inspection_json(const inspection *in) {
    const qkv_model_config *c = &in->lm.model.cfg;
    char buf[32];
    cJSON *o = explain_json_header(&in->lm, "inspect", NULL);
    cJSON_AddNumberToObject(o, "d_model", c->d_model);
    cJSON_AddNumberToObject(o, "d_k", in->Dk);
    cJSON_AddNumberToObject(o, "seq_len", in->model_T);
    cJSON_AddNumberToObject(o, "vocab", in->V);
    cJSON_AddBoolToObject(o, "causal", c->causal);
    cJSON_AddBoolToObject(o, "cross_attention", in->cross);
    cJSON_AddNumberToObject(o, "queries", in->Tq);
    cJSON_AddNumberToObject(o, "keys", in->T);
    cJSON_AddNumberToObject(o, "step", (double)in->lm.step);
    if (in->lm.data) /* the file the run was given, not its copy */
        cJSON_AddStringToObject(o, "data", in->lm.cfg.data_path);
    cJSON *tokens = cJSON_AddArrayToObject(o, "tokens");
    for (int i = 0; i < in->T; i++) cJSON_AddItemToArray(tokens, cJSON_CreateNumber(in->tokens[i]));
    cJSON_AddItemToObject(o, "labels", json_labels(in, in->T, false));
    cJSON_AddItemToObject(o, "query_labels", json_labels(in, in->Tq, true));
    cJSON *predictions = cJSON_AddArrayToObject(o, "predictions");
    for (int i = 0; i < in->Tq; i++) {
        double prob;
        int best = inspect_predict(in, i, &prob);
        cJSON *p = cJSON_CreateObject();
        cJSON_AddNumberToObject(p, "class", best);
        cJSON_AddStringToObject(p, "label", inspect_class_text(in, best, buf, sizeof buf));
        cJSON_AddNumberToObject(p, "probability", prob);
        cJSON_AddItemToArray(predictions, p);
    }
    if (in->loss) {
        cJSON *targets = cJSON_AddArrayToObject(o, "targets");
        for (int i = 0; i < in->Tq; i++)
            cJSON_AddItemToArray(targets, in->targets[i] < 0 ? cJSON_CreateNull()
                                                             : cJSON_CreateNumber(in->targets[i]));
        cJSON_AddItemToObject(o, "loss", json_number(qkv_get(in->loss, 0)));
    }
    cJSON *attention = cJSON_AddArrayToObject(o, "attention");
    for (int l = 0; l < in->L; l++)
        for (int h = 0; h < in->H; h++) {
            cJSON *head = cJSON_CreateObject();
            cJSON_AddNumberToObject(head, "layer", l + 1);
            cJSON_AddNumberToObject(head, "head", h + 1);
            for (int i = 0; i < INSPECT_NPARTS; i++) {
                /* the scores before the softmax are shown as they are; A is null where masked */
                const char *name = inspect_parts[i].name;
                cJSON_AddItemToObject(head, name,
                                      json_matrix(in, &inspect_parts[i],
                                                  inspect_part_tensor(in, l, false, i), false, h,
                                                  strcmp(name, "scores") && strcmp(name, "scaled")));
            }
            for (int i = 0; in->loss && i < INSPECT_NGRADS; i++)
                cJSON_AddItemToObject(head, inspect_grad_parts[i].name,
                                      json_matrix(in, &inspect_grad_parts[i],
                                                  inspect_part_tensor(in, l, true, i), true, h,
                                                  false));
            cJSON_AddItemToArray(attention, head);
        }
    return o;
}

/* ---- the file of --out ---- */

/* The labels as one space-separated string (they hold no space), malloc'd. */
static char *join_labels(char (*labels)[40], int n) {
    char *s = malloc((size_t)n * 40 + 1), *p = s;
    for (int i = 0; s && i < n; i++) p += sprintf(p, "%s%s", i ? " " : "", labels[i]);
    return s;
}

/* layer<L>.<part>: (H, Tq, Dk), (H, T, Dk) or (H, Tq, T) per layer, all heads; the masked
 * scores are kept as `scaled` (finite: safetensors files hold no Inf) and `mask` (1 kept, 0
 * dropped). */
qkv_status inspection_save(const inspection *in, const char *out) {
    enum { PER_LAYER = INSPECT_NPARTS + INSPECT_NGRADS };
    qkv_ctx *ctx = qkv_ctx_new(0);
    char *klabels = join_labels(in->klabels, in->T), *qlabels = join_labels(in->qlabels, in->Tq);
    if (!ctx || !klabels || !qlabels) {
        qkv_ctx_free(ctx);
        free(klabels);
        free(qlabels);
        return qkv_fail(QKV_ERR_NOMEM, "inspect: out of memory");
    }
    char names[8 + QKV_MAX_LAYERS * PER_LAYER][32];
    const char *name_ptr[8 + QKV_MAX_LAYERS * PER_LAYER];
    const qkv_tensor *tensors[8 + QKV_MAX_LAYERS * PER_LAYER];
    int n = 0, T = in->T, Tq = in->Tq;
#define ADD(t, ...) (snprintf(names[n], sizeof names[n], __VA_ARGS__), name_ptr[n] = names[n], \
                     tensors[n++] = (t))
    ADD(qkv_from_array(ctx, QKV_I32, 1, (int64_t[]){T}, in->tokens), "tokens");
    qkv_tensor *logits = qkv_zeros(ctx, QKV_F32, 2, (int64_t[]){Tq, in->V});
    for (int64_t e = 0; e < logits->size; e++) qkv_set(logits, e, qkv_get(in->logits, e));
    ADD(logits, "logits");
    qkv_tensor *mask = qkv_zeros(ctx, QKV_F32, 2, (int64_t[]){Tq, T});
    for (int i = 0; i < Tq; i++)
        for (int j = 0; j < T; j++) qkv_set(mask, (int64_t)i * T + j, !inspect_masked_at(in, i, j));
    ADD(mask, "mask");
    if (in->loss) {
        ADD(qkv_from_array(ctx, QKV_I32, 1, (int64_t[]){Tq}, in->targets), "targets");
        qkv_tensor *loss = qkv_zeros(ctx, QKV_F32, 0, NULL);
        qkv_set(loss, 0, qkv_get(in->loss, 0));
        ADD(loss, "loss");
    }
    for (int l = 0; l < in->L; l++) {
        for (int g = 0; g < (in->loss ? 2 : 1); g++)
            for (int i = 0; i < (g ? INSPECT_NGRADS : INSPECT_NPARTS); i++) {
                const part *p = g ? &inspect_grad_parts[i] : &inspect_parts[i];
                const qkv_tensor *src = inspect_part_tensor(in, l, g, i);
                int rows = inspect_part_rows(in, p), cols = inspect_part_cols(in, p);
                qkv_tensor *x = qkv_zeros(ctx, QKV_F32, 3, (int64_t[]){in->H, rows, cols});
                bool zero_masked = !g && !strcmp(p->name, "weights"); /* exact zeros there */
                for (int h = 0; h < in->H; h++)
                    for (int r = 0; r < rows; r++)
                        for (int k = 0; k < cols; k++) {
                            double v = inspect_part_at(src, g, h, r, k);
                            if (zero_masked && !isfinite(v)) v = 0;
                            qkv_set(x, ((int64_t)h * rows + r) * cols + k, v);
                        }
                ADD(x, "layer%d.%s", l + 1, p->name);
            }
    }
#undef ADD
    const qkv_model_config *c = &in->lm.model.cfg;
    char layers[16], heads[16], seq[16], queries[16], step[32];
    snprintf(layers, sizeof layers, "%d", c->layers);
    snprintf(heads, sizeof heads, "%d", c->heads);
    snprintf(seq, sizeof seq, "%d", T);
    snprintf(queries, sizeof queries, "%d", Tq);
    snprintf(step, sizeof step, "%" PRId64, in->lm.step);
    /* seq_len: the keys (the input's tokens); queries: the rows of every map */
    const char *meta[] = {"format", "qkv-inspect", "task", qkv_task_name(in->lm.cfg.task.kind),
                          "layers", layers, "heads", heads, "seq_len", seq, "queries", queries,
                          "step", step, "causal", c->causal ? "true" : "false",
                          "labels", klabels, "query_labels", qlabels};
    qkv_status s = qkv_st_save(out, n, name_ptr, tensors, (int)(sizeof meta / sizeof meta[0] / 2), meta);
    qkv_ctx_free(ctx);
    free(klabels);
    free(qlabels);
    return s;
}
