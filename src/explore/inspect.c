/* inspect.c - one input through a saved model, every part of every head kept (inspect.h). */
#include "explore/inspect.h"
#include "explore/explain.h" /* explain_task_targets */
#include "engine/engine.h" /* memory_limit */
#include "train/checkpoint.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- tokens: the words the user types ---- */

void inspect_token_label(const inspection *in, int32_t t, char *buf, size_t len) {
    if (in->t.data) dataset_label(in->t.data, t, buf, len);
    else qkv_task_token_label(&in->t.cfg.task, t, buf, len);
}

/* A whole number in [0, n) (digits only: engine/numbers.c), or -1. */
static long parse_id(const char *w, long n) {
    uint64_t v;
    return number_u64(w, &v) == NUMBER_OK && v < (uint64_t)n ? (long)v : -1;
}

/* The built-in token whose label is w (s3, k2:v1, ?k2, |), or -1. */
static long labelled_token(const qkv_task *task, const char *w) {
    char label[32];
    for (int t = 0; t < task->vocab; t++) {
        qkv_task_token_label(task, t, label, sizeof label);
        if (!strcmp(label, w)) return t;
    }
    return -1;
}

/* Input word -> token id: a data file's token string; or a task's id or label. -1 if none. */
static long input_token(const inspection *in, const char *w) {
    if (in->t.data) return dataset_token_id(in->t.data, w);
    const qkv_task *task = &in->t.cfg.task;
    long id = parse_id(w, task->vocab);
    return id >= 0 ? id : labelled_token(task, w);
}

/* Target word -> class: _ for none (-1); a data file's token string; an id, a label, or
 * (lookup) a value v<N>. -2 if neither. */
static long target_class(const inspection *in, const char *w) {
    if (!strcmp(w, "_")) return -1;
    long id;
    if (in->t.data) return (id = dataset_token_id(in->t.data, w)) >= 0 ? id : -2;
    const qkv_task *task = &in->t.cfg.task;
    if ((id = parse_id(w, task->vocab)) >= 0) return id;
    if (task->kind == QKV_TASK_LOOKUP)
        return w[0] == 'v' && (id = parse_id(w + 1, task->n_values)) >= 0 ? id : -2;
    return (id = labelled_token(task, w)) >= 0 ? id : -2;
}

/* How a predicted class reads: lookup's classes are values (v1), the other tasks' tokens. */
void inspect_class_label(const inspection *in, int c, char *buf, size_t len) {
    char text[32];
    if (in->t.data && c >= 0) dataset_label(in->t.data, c, buf, len); /* printable, short */
    else snprintf(buf, len, "%s", inspect_class_text(in, c, text, sizeof text));
}

const char *inspect_class_text(const inspection *in, int c, char *buf, size_t len) {
    const qkv_task *task = &in->t.cfg.task;
    if (c < 0) return "_";
    if (!in->t.data && task->kind == QKV_TASK_LOOKUP && c < task->n_values) {
        snprintf(buf, len, "v%d", c);
        return buf;
    }
    return trainer_token_text(&in->t, c, buf, len);
}

/* Splits `text` at spaces into words, each turned into a number by `convert` (bad: below
 * `bad_below`); between `least` and `most` of them (`limit` says why), their count into *n.
 * False otherwise, the error (QKV_ERR_VALUE) naming the culprit. */
static bool parse_words(const inspection *in, const char *option, const char *text, int least,
                        int most, const char *limit, long (*convert)(const inspection *, const char *),
                        long bad_below, const char *expected, int32_t *out, int *n_out) {
    char word[256];
    int n = 0;
    for (const char *p = text;;) {
        p += strspn(p, " \t");
        if (!*p) break;
        size_t len = strcspn(p, " \t");
        if (n >= most) {
            qkv_fail(QKV_ERR_VALUE, "inspect: %s has more than %d tokens; the model reads %s %d "
                     "(%s)", option, most, least == most ? "exactly" : "at most", most, limit);
            return false;
        }
        snprintf(word, sizeof word, "%.*s", (int)(len < sizeof word ? len : sizeof word - 1), p);
        long v = len < sizeof word ? convert(in, word) : bad_below - 1;
        if (v < bad_below) {
            qkv_fail(QKV_ERR_VALUE, "inspect: %s: '%.*s' (token %d) is not %s", option,
                     (int)(len < 40 ? len : 40), p, n, expected);
            return false;
        }
        out[n++] = (int32_t)v;
        p += len;
    }
    if (n < least) {
        qkv_fail(QKV_ERR_VALUE, "inspect: %s has %d token%s; the model reads %s %d (%s)", option,
                 n, n == 1 ? "" : "s", least == most ? "exactly" : "at least", least, limit);
        return false;
    }
    *n_out = n;
    return true;
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
    const qkv_layer_trace *tr = &in->trace[l];
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

/* Reads the model; for a data file's model, the file too (trainer_load), for its vocabulary. */
static qkv_status load_model(inspection *in, const char *path) {
    qkv_status s = trainer_load(&in->t, path);
    if (s != QKV_OK) return s;
    const qkv_model_config *c = &in->t.model.cfg;
    in->model_T = c->seq_len, in->H = c->heads, in->L = c->layers, in->Dk = c->d_model / c->heads;
    in->V = c->vocab, in->cross = c->target_len > 0;
    if (in->model_T > INSPECT_MAX_TOKENS || in->t.target_len > INSPECT_MAX_TOKENS)
        return qkv_fail(QKV_ERR_FORMAT, "%s: --seq-len %d is longer than inspect reads (%d)",
                        path, in->model_T, INSPECT_MAX_TOKENS);
    return QKV_OK;
}

/* The input and the target words -> in->tokens (padded), in->T, in->Tq and in->targets. */
static qkv_status read_words(inspection *in, const char *input, const char *target) {
    const qkv_task *task = &in->t.cfg.task;
    const char *name = qkv_task_name(task->kind);
    int To = in->t.target_len; /* the model's query rows: T, or the decoder's positions */
    char expect[160], limit[80];
    if (in->t.data) {
        snprintf(expect, sizeof expect, "a token of the model's vocabulary (the token strings "
                 "of %.60s)", in->t.data->path);
        snprintf(limit, sizeof limit, "the longest input of its data file");
        if (!parse_words(in, "--input", input, 1, in->model_T, limit, input_token, 0, expect,
                         in->tokens, &in->T))
            return QKV_ERR_VALUE;
        for (int i = in->T; i < in->model_T; i++) in->tokens[i] = DATA_PAD;
    } else {
        char example[32] = "";
        qkv_task_token_label(task, 0, example, sizeof example);
        snprintf(expect, sizeof expect, "a token of %s (an id 0..%d%s%s%s)", name, task->vocab - 1,
                 strcmp(example, "0") ? ", or a label such as " : "",
                 strcmp(example, "0") ? example : "",
                 task->kind == QKV_TASK_LOOKUP ? ", ?k0" : "");
        if (!parse_words(in, "--input", input, in->model_T, in->model_T, "its --seq-len",
                         input_token, 0, expect, in->tokens, &in->T))
            return QKV_ERR_VALUE;
        /* an input the task defines a target for, as every command reads a task's input */
        int32_t task_targets[INSPECT_MAX_TOKENS];
        qkv_status s = explain_task_targets(&in->t, QKV_ERR_VALUE, "inspect: --input",
                                            in->tokens, task_targets);
        if (s != QKV_OK) return s;
    }
    in->Tq = in->cross ? To : in->T;
    for (int i = 0; i < To; i++) in->targets[i] = -1;
    if (target) {
        if (in->t.data)
            snprintf(expect, sizeof expect, "a token of the model's vocabulary (or _ for none)");
        else
            snprintf(expect, sizeof expect, "a class of %s (0..%d%s, or _ for none)", name,
                     in->V - 1, task->kind == QKV_TASK_LOOKUP ? ", or a value such as v1" : "");
        /* one target per output: per input token, or per decoder position (a data file's
         * outputs may be shorter: the rest have none) */
        int most = in->Tq, least = in->cross && in->t.data ? 1 : in->Tq, n;
        snprintf(limit, sizeof limit, "%s", in->cross ? "its decoder positions"
                                             : in->t.data ? "one per input token"
                                                          : "its --seq-len");
        if (!parse_words(in, "--target", target, least, most, limit, target_class, -1, expect,
                         in->targets, &n))
            return QKV_ERR_VALUE;
    }
    return QKV_OK;
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
    const qkv_model_config *c = &in->t.model.cfg;
    int To = in->t.target_len;
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
    in->logits = qkv_model_forward_trace_padded(&in->t.model, in->ctx, in->tokens,
                                                in->t.data ? &length : NULL, 1, in->trace);
    if (target) {
        qkv_tensor *y = qkv_from_array(in->ctx, QKV_I32, 2, (int64_t[]){1, To}, in->targets);
        in->loss = qkv_cross_entropy(in->ctx, in->logits, y, -1);
        qkv_zero_grad(in->t.model.params);
        qkv_backward(in->loss);
    }
    /* the mask, as the model applied it: -inf entered the softmax (the same in every head) */
    for (int i = 0; i < in->Tq; i++)
        for (int j = 0; j < in->T; j++) {
            double m = inspect_part_at(in->trace[0].masked, false, 0, i, j);
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
    if (in->t.eval_ctx) trainer_free(&in->t);
    memset(in, 0, sizeof *in);
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
    const qkv_model_config *c = &in->t.model.cfg;
    char layers[16], heads[16], seq[16], queries[16], step[32];
    snprintf(layers, sizeof layers, "%d", c->layers);
    snprintf(heads, sizeof heads, "%d", c->heads);
    snprintf(seq, sizeof seq, "%d", T);
    snprintf(queries, sizeof queries, "%d", Tq);
    snprintf(step, sizeof step, "%" PRId64, in->t.optim.step);
    /* seq_len: the keys (the input's tokens); queries: the rows of every map */
    const char *meta[] = {"format", "qkv-inspect", "task", qkv_task_name(in->t.cfg.task.kind),
                          "layers", layers, "heads", heads, "seq_len", seq, "queries", queries,
                          "step", step, "causal", c->causal ? "true" : "false",
                          "labels", klabels, "query_labels", qlabels};
    qkv_status s = qkv_st_save(out, n, name_ptr, tensors, (int)(sizeof meta / sizeof meta[0] / 2), meta);
    qkv_ctx_free(ctx);
    free(klabels);
    free(qlabels);
    return s;
}
