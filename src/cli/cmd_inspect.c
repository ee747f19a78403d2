/* cmd_inspect.c - `qkv inspect`: run a saved model on any input the user types and show what every
 * attention head computed (Q, K, V, the scores, the weights, the head's output) and, with a
 * target, the loss and the gradients that flow back through the head. */
#include "cli.h"
#include "train/checkpoint.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "engine/internal.h"
#include "io/io.h"

#define INSPECT_MAX_TOKENS QKV_MAX_TASK_SEQ_LEN /* the longest sequence a task allows */

typedef struct {
    const char *model, *input, *target, *out;
    bool json;
} inspect_args;

static int inspect_parse(int argc, char **argv, inspect_args *a) {
    *a = (inspect_args){0};
    cli_option options[] = {
        {"model", CLI_STRING, &a->model, .arg = "DIR",
         .help = "a model.safetensors, or the directory holding one"},
        {"input", CLI_STRING, &a->input, .arg = "\"...\"",
         .help = "exactly --seq-len tokens, separated by spaces: the task's token\n"
                 "strings (ids such as 3 14 7; for lookup also k2:v1 and ?k2)"},
        {"target", CLI_STRING, &a->target, .arg = "\"...\"",
         .help = "the wanted output at each position (an id, for lookup also v1;\n"
                 "_ for none): adds the loss and dA, dS, dQ, dK, dV"},
        {"json", CLI_FLAG, &a->json, .help = "print one JSON object instead of text"},
        {"out", CLI_STRING, &a->out, .arg = "FILE",
         .help = "write every tensor to FILE (safetensors; qkv plot FILE draws it)"},
        {"help", CLI_HELP, .help = "show this help"},
        {0}};
    const cli_command cmd = {
        .name = "inspect",
        .usage = "usage: qkv inspect --model DIR --input \"t1 t2 ...\" [options]\n"
                 "Runs a saved model on one input and prints its predictions and, for every layer and head,\n"
                 "Q, K, V, the scores S = Q K^T, S/sqrt(d_k), the weights A = softmax(S/sqrt(d_k) + M) and\n"
                 "the head's output A V.\n"
                 "\n",
        .options = options,
        .column = 22,
        .epilog = "\n"
                  "Exit codes: 0 done, 2 bad option or bad token, 3 the model cannot be read or FILE\n"
                  "written, 4 the model file is corrupt, 6 out of memory.\n"};
    int code = cli_parse_options(&cmd, argc, argv, NULL);
    if (code != CLI_RUN) return code;
    if (!a->model) {
        cli_error("inspect: --model DIR is required");
        return EXIT_USAGE;
    }
    if (!a->input) {
        cli_error("inspect: --input \"t1 t2 ...\" is required");
        return EXIT_USAGE;
    }
    if (a->json && a->out) {
        cli_error("inspect: --json and --out are two outputs; give one");
        return EXIT_USAGE;
    }
    return CLI_RUN;
}

/* ---- tokens: the words the user types ---- */

/* A whole decimal number in [0, n), or -1. */
static long parse_id(const char *w, long n) {
    if (*w < '0' || *w > '9' || strlen(w) > 9) return -1;
    char *end;
    long v = strtol(w, &end, 10);
    return *end == '\0' && v < n ? v : -1;
}

/* Input word -> token id: an id, or (lookup) a label such as k2:v1 or ?k2; -1 if neither. */
static long input_token(const qkv_task *task, const char *w) {
    long id = parse_id(w, task->vocab);
    if (id >= 0 || task->kind != QKV_TASK_LOOKUP) return id;
    char label[32];
    for (int t = 0; t < task->vocab; t++) {
        qkv_task_token_label(task, t, label, sizeof label);
        if (!strcmp(label, w)) return t;
    }
    return -1;
}

/* Target word -> class: an id, _ for none (-1), or (lookup) a value v<N>; -2 if neither. */
static long target_class(const qkv_task *task, const char *w) {
    if (!strcmp(w, "_")) return -1;
    long id = parse_id(w, task->vocab);
    if (id >= 0) return id;
    if (task->kind == QKV_TASK_LOOKUP && w[0] == 'v' && (id = parse_id(w + 1, task->n_values)) >= 0)
        return id;
    return -2;
}

/* How a predicted class reads: lookup's classes are values (v1), the other tasks' tokens. */
static void class_label(const qkv_task *task, int c, char *buf, size_t len) {
    if (task->kind == QKV_TASK_LOOKUP && c < task->n_values)
        snprintf(buf, len, "v%d", c);
    else
        qkv_task_token_label(task, c, buf, len);
}

/* Splits `text` at spaces into words, each turned into a number by `convert` (bad: below
 * `bad_below`); exactly `want` of them. One line naming the culprit and false otherwise. */
static bool parse_words(const char *option, const char *text, const qkv_task *task, int want,
                        long (*convert)(const qkv_task *, const char *), long bad_below,
                        const char *expected, int32_t *out) {
    char word[64];
    int n = 0;
    for (const char *p = text;;) {
        p += strspn(p, " \t");
        if (!*p) break;
        size_t len = strcspn(p, " \t");
        if (n >= want) {
            cli_error("inspect: %s has more than %d tokens; the model reads exactly %d "
                      "(its --seq-len)", option, want, want);
            return false;
        }
        snprintf(word, sizeof word, "%.*s", (int)(len < sizeof word ? len : sizeof word - 1), p);
        long v = len < sizeof word ? convert(task, word) : bad_below - 1;
        if (v < bad_below) {
            cli_error("inspect: %s: '%.*s' (token %d) is not %s", option,
                      (int)(len < 40 ? len : 40), p, n, expected);
            return false;
        }
        out[n++] = (int32_t)v;
        p += len;
    }
    if (n != want) {
        cli_error("inspect: %s has %d token%s; the model reads exactly %d (its --seq-len)", option,
                  n, n == 1 ? "" : "s", want);
        return false;
    }
    return true;
}

/* ---- what the model computed ---- */

typedef struct {
    trainer t;
    int T, H, L, Dk, V;
    int32_t tokens[INSPECT_MAX_TOKENS], targets[INSPECT_MAX_TOKENS];
    char (*labels)[40];    /* (T): "position:token", e.g. "3:14" */
    qkv_ctx *ctx;
    qkv_tensor *logits;    /* (1, T, V) */
    qkv_tensor *loss;      /* a scalar, or NULL without --target */
    qkv_layer_trace trace[QKV_MAX_LAYERS];
    bool causal;
} inspection;

/* Head h of a (1, H, R, X) tensor: R x X floats. */
static const float *head_of(const qkv_tensor *x, int h) {
    return (const float *)x->data + (size_t)h * x->shape[2] * x->shape[3];
}
static const float *grad_of(const qkv_tensor *x, int h) {
    return (const float *)x->grad + (size_t)h * x->shape[2] * x->shape[3];
}

/* The parts of one head that inspect shows, in order: name, what it is, tensor, gradient? */
typedef struct {
    const char *name, *what;
    int rows_cols; /* 0: (T, Dk), 1: (T, T) */
} part;
static const part parts[] = {
    {"q", "Q = X W_Q (queries)", 0},          {"k", "K = X W_K (keys)", 0},
    {"v", "V = X W_V (values)", 0},           {"scores", "S = Q K^T", 1},
    {"scaled", "S / sqrt(d_k)", 1},           {"weights", "A = softmax(S / sqrt(d_k) + M)", 1},
    {"out", "A V (the head's output)", 0},
};
static const part grad_parts[] = {
    {"dA", "dA = dLoss/dA", 1},
    {"dS", "dS = dLoss/d(S / sqrt(d_k) + M) = A * (dA - rowsum(dA * A))", 1},
    {"dQ", "dQ = dLoss/dQ", 0},               {"dK", "dK = dLoss/dK", 0},
    {"dV", "dV = dLoss/dV", 0},
};
#define NPARTS ((int)(sizeof parts / sizeof parts[0]))
#define NGRADS ((int)(sizeof grad_parts / sizeof grad_parts[0]))

/* The tensor of part i (of parts[] or, with grad, grad_parts[]) of layer l, head h. */
static const float *part_data(const inspection *in, int l, bool grad, int i, int h) {
    const qkv_layer_trace *tr = &in->trace[l];
    if (!grad) {
        const qkv_tensor *x[NPARTS] = {tr->q, tr->k, tr->v, tr->scores, tr->scaled, tr->weights,
                                       tr->head_out};
        return head_of(x[i], h);
    }
    const qkv_tensor *x[NGRADS] = {tr->weights, tr->masked, tr->q, tr->k, tr->v};
    return grad_of(x[i], h);
}

static bool masked_at(const inspection *in, int i, int j) { return in->causal && j > i; }

static int run_model(inspection *in, const inspect_args *a) {
    char path[1100];
    if (!cli_model_path(a->model, path, sizeof path)) return EXIT_IO;
    if (a->out && cli_output_clashes("inspect: --out ", a->out, path)) return EXIT_USAGE;
    qkv_status s = trainer_load(&in->t, path);
    if (s != QKV_OK) {
        cli_error("%s", qkv_last_error());
        return cli_exit_for(s);
    }
    const qkv_model_config *c = &in->t.model.cfg;
    const qkv_task *task = &in->t.cfg.task;
    if (in->t.data || c->target_len) {
        cli_error("inspect: %s: a model of a data file or an encoder-decoder task (%s); qkv "
                  "inspect reads the built-in self-attention tasks only", path,
                  qkv_task_name(task->kind));
        return EXIT_USAGE;
    }
    in->T = c->seq_len, in->H = c->heads, in->L = c->layers, in->Dk = c->d_model / c->heads;
    in->V = c->vocab, in->causal = c->causal;
    if (in->T > INSPECT_MAX_TOKENS) {
        cli_error("%s: --seq-len %d is longer than inspect reads (%d)", path, in->T,
                  INSPECT_MAX_TOKENS);
        return EXIT_FORMAT;
    }
    char expect[96];
    snprintf(expect, sizeof expect, "a token of %s (an id 0..%d%s)", qkv_task_name(task->kind),
             task->vocab - 1, task->kind == QKV_TASK_LOOKUP ? ", or a label such as k0:v1, ?k0" : "");
    if (!parse_words("--input", a->input, task, in->T, input_token, 0, expect, in->tokens))
        return EXIT_USAGE;
    if (a->target) {
        snprintf(expect, sizeof expect, "a class of %s (0..%d%s, or _ for none)",
                 qkv_task_name(task->kind), in->V - 1,
                 task->kind == QKV_TASK_LOOKUP ? ", or a value such as v1" : "");
        if (!parse_words("--target", a->target, task, in->T, target_class, -1, expect,
                         in->targets))
            return EXIT_USAGE;
    }
    const char *what;
    double need = qkv_model_step_bytes(c, 1), have = memory_limit(&what);
    in->labels = malloc((size_t)in->T * sizeof *in->labels);
    if (need > have / 2 || !in->labels || !(in->ctx = qkv_ctx_new((size_t)need + (1 << 20)))) {
        cli_error("inspect: out of memory (about %.1f MiB needed, %s allows %.1f MiB)",
                  need / (1 << 20), what, have / (1 << 20));
        return EXIT_NOMEM;
    }
    for (int i = 0; i < in->T; i++) {
        char tok[32];
        qkv_task_token_label(task, in->tokens[i], tok, sizeof tok);
        snprintf(in->labels[i], sizeof in->labels[i], "%d:%s", i, tok);
    }
    qkv_ctx_set_no_grad(in->ctx, !a->target); /* gradients only when there is a loss */
    in->logits = qkv_model_forward_trace(&in->t.model, in->ctx, in->tokens, 1, in->trace);
    if (a->target) {
        qkv_tensor *y = qkv_from_array(in->ctx, QKV_I32, 2, (int64_t[]){1, in->T}, in->targets);
        in->loss = qkv_cross_entropy(in->ctx, in->logits, y, -1);
        qkv_zero_grad(in->t.model.params);
        qkv_backward(in->loss);
    }
    return EXIT_OK;
}

/* Softmax of position i's logits: the predicted class and its probability. */
static int predict(const inspection *in, int i, double *prob) {
    const float *x = (const float *)in->logits->data + (size_t)i * in->V;
    int best = 0;
    for (int j = 1; j < in->V; j++)
        if (x[j] > x[best]) best = j;
    double sum = 0;
    for (int j = 0; j < in->V; j++) sum += exp((double)x[j] - x[best]);
    *prob = 1 / sum;
    return best;
}

/* ---- text ---- */

/* Columns of 11 characters after a 10-character row label that fit the terminal (or 100
 * characters when stdout is not one): wider matrices are printed in blocks of columns, as
 * numpy prints them, so that no line wraps. */
static int columns_per_block(void) {
    struct winsize ws;
    int width = isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0
                    ? ws.ws_col
                    : 100;
    int n = (width - 1 - 10) / 11;
    return n < 1 ? 1 : n;
}

static void print_matrix(const inspection *in, const part *p, const float *m, bool keys) {
    int cols = keys ? in->T : in->Dk, per = columns_per_block();
    printf("%s   (%d x %d%s)\n", p->what, in->T, cols, keys ? ", rows: queries, columns: keys"
                                                           : ", rows: positions");
    for (int first = 0; first < cols; first += per) {
        int last = first + per < cols ? first + per : cols;
        if (cols > per) printf("  columns %d..%d\n", first, last - 1);
        printf("%10s", "");
        for (int j = first; j < last; j++) {
            if (keys) printf(" %10.10s", in->labels[j]);
            else printf(" %10d", j);
        }
        putchar('\n');
        for (int i = 0; i < in->T; i++) {
            printf("%10.10s", in->labels[i]);
            for (int j = first; j < last; j++) {
                /* A and dS are 0 where the mask dropped a key; the scores before the mask and
                 * dA are not, and are shown as they are */
                if (keys && masked_at(in, i, j) && (!strcmp(p->name, "weights") || !strcmp(p->name, "dS")))
                    printf(" %10s", "masked");
                else
                    printf(" %10.4g", m[(size_t)i * cols + j]);
            }
            putchar('\n');
        }
    }
}

static void print_text(const inspection *in) {
    const qkv_task *task = &in->t.cfg.task;
    const qkv_model_config *c = &in->t.model.cfg;
    printf("%s model: %d layer%s x %d head%s, d_model %d, d_k %d%s, after %" PRId64 " steps\n",
           qkv_task_name(task->kind), c->layers, c->layers > 1 ? "s" : "", c->heads,
           c->heads > 1 ? "s" : "", c->d_model, in->Dk, c->causal ? ", causal mask" : "",
           in->t.optim.step);
    printf("%-12s", "position");
    for (int i = 0; i < in->T; i++) printf(" %7d", i);
    printf("\n%-12s", "input");
    char buf[32];
    for (int i = 0; i < in->T; i++) {
        qkv_task_token_label(task, in->tokens[i], buf, sizeof buf);
        printf(" %7.7s", buf);
    }
    printf("\n%-12s", "prediction");
    double prob[INSPECT_MAX_TOKENS];
    for (int i = 0; i < in->T; i++) {
        class_label(task, predict(in, i, &prob[i]), buf, sizeof buf);
        printf(" %7.7s", buf);
    }
    printf("\n%-12s", "probability");
    for (int i = 0; i < in->T; i++) printf(" %7.3f", prob[i]);
    if (in->loss) {
        printf("\n%-12s", "target");
        for (int i = 0; i < in->T; i++) {
            if (in->targets[i] < 0) snprintf(buf, sizeof buf, "_");
            else class_label(task, in->targets[i], buf, sizeof buf);
            printf(" %7.7s", buf);
        }
        printf("\nloss %.6g (mean cross-entropy over the positions with a target)",
               qkv_get(in->loss, 0));
    }
    putchar('\n');
    for (int l = 0; l < in->L; l++)
        for (int h = 0; h < in->H; h++) {
            printf("\n== layer %d, head %d\n", l + 1, h + 1);
            for (int i = 0; i < NPARTS; i++)
                print_matrix(in, &parts[i], part_data(in, l, false, i, h), parts[i].rows_cols);
            for (int i = 0; in->loss && i < NGRADS; i++)
                print_matrix(in, &grad_parts[i], part_data(in, l, true, i, h),
                             grad_parts[i].rows_cols);
        }
}

/* ---- JSON ---- */

static void json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') printf("\\%c", ch);
        else if (ch < 0x20 || ch == '<') printf("\\u%04x", ch); /* '<': safe inside HTML too */
        else putchar(ch);
    }
    putchar('"');
}

static void json_number(double v) {
    if (isfinite(v)) printf("%.7g", v);
    else fputs("null", stdout); /* a masked score, -inf, has no JSON number */
}

static void json_matrix(const inspection *in, const float *m, int cols, bool keys, bool raw) {
    putchar('[');
    for (int i = 0; i < in->T; i++) {
        printf("%s[", i ? "," : "");
        for (int j = 0; j < cols; j++) {
            if (j) putchar(',');
            if (keys && !raw && masked_at(in, i, j)) fputs("null", stdout);
            else json_number(m[(size_t)i * cols + j]);
        }
        putchar(']');
    }
    putchar(']');
}

static void print_json(const inspection *in) {
    const qkv_task *task = &in->t.cfg.task;
    const qkv_model_config *c = &in->t.model.cfg;
    char buf[32];
    printf("{\"command\":\"inspect\",\"task\":\"%s\",\"layers\":%d,\"heads\":%d,\"d_model\":%d,"
           "\"d_k\":%d,\"seq_len\":%d,\"vocab\":%d,\"causal\":%s,\"step\":%" PRId64 ",\"tokens\":[",
           qkv_task_name(task->kind), c->layers, c->heads, c->d_model, in->Dk, in->T, in->V,
           c->causal ? "true" : "false", in->t.optim.step);
    for (int i = 0; i < in->T; i++) printf("%s%d", i ? "," : "", in->tokens[i]);
    fputs("],\"labels\":[", stdout);
    for (int i = 0; i < in->T; i++) {
        if (i) putchar(',');
        json_string(in->labels[i]);
    }
    fputs("],\"predictions\":[", stdout);
    for (int i = 0; i < in->T; i++) {
        double prob;
        int best = predict(in, i, &prob);
        class_label(task, best, buf, sizeof buf);
        printf("%s{\"class\":%d,\"label\":", i ? "," : "", best);
        json_string(buf);
        printf(",\"probability\":%.6g}", prob);
    }
    putchar(']');
    if (in->loss) {
        fputs(",\"targets\":[", stdout);
        for (int i = 0; i < in->T; i++) {
            if (i) putchar(',');
            if (in->targets[i] < 0) fputs("null", stdout);
            else printf("%d", in->targets[i]);
        }
        fputs("],\"loss\":", stdout);
        json_number(qkv_get(in->loss, 0));
    }
    fputs(",\"attention\":[", stdout);
    for (int l = 0; l < in->L; l++)
        for (int h = 0; h < in->H; h++) {
            printf("%s{\"layer\":%d,\"head\":%d", l + h ? "," : "", l + 1, h + 1);
            for (int i = 0; i < NPARTS; i++) {
                printf(",\"%s\":", parts[i].name);
                json_matrix(in, part_data(in, l, false, i, h), parts[i].rows_cols ? in->T : in->Dk,
                            parts[i].rows_cols, !strcmp(parts[i].name, "scores") ||
                                                    !strcmp(parts[i].name, "scaled"));
            }
            for (int i = 0; in->loss && i < NGRADS; i++) {
                printf(",\"%s\":", grad_parts[i].name);
                json_matrix(in, part_data(in, l, true, i, h),
                            grad_parts[i].rows_cols ? in->T : in->Dk, false, true);
            }
            putchar('}');
        }
    fputs("]}\n", stdout);
}

/* ---- safetensors ---- */

/* layer<L>.<part>: (H, T, Dk) or (H, T, T) per layer, all heads; the masked scores are kept
 * as `scaled` (finite: safetensors files hold no Inf) and `mask` (1 kept, 0 dropped). */
static int write_file(const inspection *in, const char *out) {
    enum { PER_LAYER = NPARTS + NGRADS };
    qkv_ctx *ctx = qkv_ctx_new(0);
    if (!ctx) {
        cli_error("inspect: out of memory");
        return EXIT_NOMEM;
    }
    char names[8 + QKV_MAX_LAYERS * PER_LAYER][32];
    const char *name_ptr[8 + QKV_MAX_LAYERS * PER_LAYER];
    const qkv_tensor *tensors[8 + QKV_MAX_LAYERS * PER_LAYER];
    int n = 0, T = in->T;
#define ADD(t, ...) (snprintf(names[n], sizeof names[n], __VA_ARGS__), name_ptr[n] = names[n], \
                     tensors[n++] = (t))
    ADD(qkv_from_array(ctx, QKV_I32, 1, (int64_t[]){T}, in->tokens), "tokens");
    ADD(qkv_from_array(ctx, QKV_F32, 2, (int64_t[]){T, in->V}, in->logits->data), "logits");
    qkv_tensor *mask = qkv_zeros(ctx, QKV_F32, 2, (int64_t[]){T, T});
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) qkv_set(mask, (int64_t)i * T + j, !masked_at(in, i, j));
    ADD(mask, "mask");
    if (in->loss) {
        ADD(qkv_from_array(ctx, QKV_I32, 1, (int64_t[]){T}, in->targets), "targets");
        ADD(in->loss, "loss");
    }
    for (int l = 0; l < in->L; l++) {
        for (int g = 0; g < (in->loss ? 2 : 1); g++)
            for (int i = 0; i < (g ? NGRADS : NPARTS); i++) {
                const part *p = g ? &grad_parts[i] : &parts[i];
                int64_t shape[3] = {in->H, T, p->rows_cols ? T : in->Dk};
                qkv_tensor *x = qkv_zeros(ctx, QKV_F32, 3, shape);
                size_t per = (size_t)shape[1] * shape[2];
                for (int h = 0; h < in->H; h++)
                    memcpy((float *)x->data + h * per, part_data(in, l, g, i, h), per * sizeof(float));
                if (!g && !strcmp(p->name, "weights")) /* exact zeros where masked */
                    for (size_t e = 0; e < (size_t)x->size; e++)
                        if (!isfinite(((float *)x->data)[e])) ((float *)x->data)[e] = 0;
                ADD(x, "layer%d.%s", l + 1, p->name);
            }
    }
#undef ADD
    const qkv_model_config *c = &in->t.model.cfg;
    char layers[16], heads[16], seq[16], step[32], labels[INSPECT_MAX_TOKENS * 8 + 64];
    snprintf(layers, sizeof layers, "%d", c->layers);
    snprintf(heads, sizeof heads, "%d", c->heads);
    snprintf(seq, sizeof seq, "%d", T);
    snprintf(step, sizeof step, "%" PRId64, in->t.optim.step);
    size_t used = 0;
    labels[0] = '\0';
    for (int i = 0; i < T && used < sizeof labels - 48; i++)
        used += (size_t)snprintf(labels + used, sizeof labels - used, "%s%s", i ? " " : "",
                                 in->labels[i]);
    const char *meta[] = {"format", "qkv-inspect", "task", qkv_task_name(in->t.cfg.task.kind),
                          "layers", layers, "heads", heads, "seq_len", seq, "step", step,
                          "causal", c->causal ? "true" : "false", "labels", labels};
    qkv_status s = qkv_st_save(out, n, name_ptr, tensors, 8, meta);
    qkv_ctx_free(ctx);
    if (s != QKV_OK) {
        cli_error("%s", qkv_last_error());
        return cli_exit_for(s);
    }
    printf("wrote %s: %d layer%s x %d head%s, %d tokens%s\n", out, c->layers,
           c->layers > 1 ? "s" : "", c->heads, c->heads > 1 ? "s" : "", T,
           in->loss ? ", with the loss and its gradients" : "");
    return EXIT_OK;
}

int cmd_inspect(int argc, char **argv, bool parse_only) {
    inspect_args a;
    int code = inspect_parse(argc, argv, &a);
    if (code != CLI_RUN || parse_only) return code;
    inspection *in = calloc(1, sizeof *in);
    if (!in) {
        cli_error("inspect: out of memory");
        return EXIT_NOMEM;
    }
    code = run_model(in, &a);
    if (code == EXIT_OK) {
        if (a.out) code = write_file(in, a.out);
        else if (a.json) print_json(in);
        else print_text(in);
    }
    qkv_ctx_free(in->ctx);
    free(in->labels);
    if (in->t.eval_ctx) trainer_free(&in->t);
    free(in);
    return code;
}
