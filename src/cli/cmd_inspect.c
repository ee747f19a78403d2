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

#define INSPECT_MAX_TOKENS QKV_MAX_TASK_SEQ_LEN /* the longest sequence a task or a data file allows */

typedef struct {
    const char *model, *input, *target, *out;
    bool json;
} inspect_args;

static int inspect_parse(int argc, char **argv, inspect_args *a) {
    *a = (inspect_args){0};
    cli_option options[] = {
        {"model", CLI_STRING, &a->model, .arg = "DIR",
         .help = "a model.safetensors, or the directory holding one (a model of a\n"
                 "data file reads its file again, as qkv eval does)"},
        {"input", CLI_STRING, &a->input, .arg = "\"...\"",
         .help = "tokens separated by spaces: exactly --seq-len of the task's tokens\n"
                 "(ids such as 3 14 7, or labels such as s3, k2:v1, ?k2); for a data\n"
                 "file, 1 to its longest input of the file's token strings, padded\n"
                 "as in training (the padding gets no attention, and is not shown)"},
        {"target", CLI_STRING, &a->target, .arg = "\"...\"",
         .help = "the wanted output at each output position (an id or label, for\n"
                 "lookup also v1, for a data file a token string; _ for none): adds\n"
                 "the loss and dA, dS, dQ, dK, dV. Decoder rows are labelled by\n"
                 "their target, or without --target by the model's prediction"},
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
                 "the head's output A V. In an encoder-decoder (translate, or a data file whose outputs have\n"
                 "another length than its inputs) every layer is cross-attention: the decoder's positions\n"
                 "are the queries, the input's tokens the keys and values, and the maps are n_q x n_k.\n"
                 "\n",
        .options = options,
        .column = 22,
        .epilog = "\n"
                  "Exit codes: 0 done, 2 bad option or bad token, 3 the model (or its data file) cannot be\n"
                  "read or FILE written, 4 the model file is corrupt, 6 out of memory.\n"};
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

/* ---- what the model computed ---- */

/* Which rows and columns a part of a head has: rows of queries or of keys by d_k columns, or
 * queries by keys. Queries are the input positions in self-attention and the decoder's
 * positions in an encoder-decoder; keys are always the input positions. */
typedef enum { QUERY_ROWS, KEY_ROWS, QUERIES_BY_KEYS } part_shape;

typedef struct {
    trainer t;
    int T;          /* the keys shown: the input's tokens (a data file's: as many as typed) */
    int Tq;         /* the queries shown: T, or an encoder-decoder's decoder positions */
    int model_T;    /* the model's --seq-len: the input is padded to it */
    int H, L, Dk, V;
    bool cross;     /* an encoder-decoder: every layer is cross-attention */
    int32_t tokens[INSPECT_MAX_TOKENS];  /* (model_T): ids, the padding after the first T */
    int32_t targets[INSPECT_MAX_TOKENS]; /* (model Tq): classes, -1 for none */
    char (*klabels)[40];   /* (T): "position:token", e.g. "3:14" */
    char (*qlabels)[40];   /* (Tq): the same as klabels, or "position:target" of the decoder */
    uint8_t *masked;       /* (Tq, T): 1 where the mask drops the key */
    qkv_ctx *ctx;
    qkv_tensor *logits;    /* (1, model Tq, V) */
    qkv_tensor *loss;      /* a scalar, or NULL without --target */
    qkv_layer_trace trace[QKV_MAX_LAYERS];
} inspection;

/* ---- tokens: the words the user types ---- */

static void token_label(const inspection *in, int32_t t, char *buf, size_t len) {
    if (in->t.data) dataset_label(in->t.data, t, buf, len);
    else qkv_task_token_label(&in->t.cfg.task, t, buf, len);
}

/* A whole decimal number in [0, n), or -1. */
static long parse_id(const char *w, long n) {
    if (*w < '0' || *w > '9' || strlen(w) > 9) return -1;
    char *end;
    long v = strtol(w, &end, 10);
    return *end == '\0' && v < n ? v : -1;
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
static void class_label(const inspection *in, int c, char *buf, size_t len) {
    const qkv_task *task = &in->t.cfg.task;
    if (!in->t.data && task->kind == QKV_TASK_LOOKUP && c < task->n_values)
        snprintf(buf, len, "v%d", c);
    else
        token_label(in, c, buf, len);
}

/* Splits `text` at spaces into words, each turned into a number by `convert` (bad: below
 * `bad_below`); between `least` and `most` of them (`limit` says why), their count into *n.
 * One line naming the culprit and false otherwise. */
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
            cli_error("inspect: %s has more than %d tokens; the model reads %s %d (%s)", option,
                      most, least == most ? "exactly" : "at most", most, limit);
            return false;
        }
        snprintf(word, sizeof word, "%.*s", (int)(len < sizeof word ? len : sizeof word - 1), p);
        long v = len < sizeof word ? convert(in, word) : bad_below - 1;
        if (v < bad_below) {
            cli_error("inspect: %s: '%.*s' (token %d) is not %s", option,
                      (int)(len < 40 ? len : 40), p, n, expected);
            return false;
        }
        out[n++] = (int32_t)v;
        p += len;
    }
    if (n < least) {
        cli_error("inspect: %s has %d token%s; the model reads %s %d (%s)", option, n,
                  n == 1 ? "" : "s", least == most ? "exactly" : "at least", least, limit);
        return false;
    }
    *n_out = n;
    return true;
}

/* Element (h, i, j) of a (1, H, R, C) tensor, or of its gradient, in the model's dtype. */
static double part_at(const qkv_tensor *x, bool grad, int h, int i, int j) {
    int64_t at = ((int64_t)h * x->shape[2] + i) * x->shape[3] + j;
    return grad ? qkv_grad_get(x, at) : qkv_get(x, at);
}

/* The parts of one head that inspect shows, in order: name, what it is, its shape. */
typedef struct {
    const char *name, *what, *cross_what; /* cross_what: in an encoder-decoder, or NULL */
    part_shape shape;
} part;
static const part parts[] = {
    {"q", "Q = X W_Q (queries)", "Q = D W_Q (queries, from the decoder's stream D)", QUERY_ROWS},
    {"k", "K = X W_K (keys)", "K = X W_K (keys, from the embedded input X)", KEY_ROWS},
    {"v", "V = X W_V (values)", "V = X W_V (values, from the embedded input X)", KEY_ROWS},
    {"scores", "S = Q K^T", NULL, QUERIES_BY_KEYS},
    {"scaled", "S / sqrt(d_k)", NULL, QUERIES_BY_KEYS},
    {"weights", "A = softmax(S / sqrt(d_k) + M)", NULL, QUERIES_BY_KEYS},
    {"out", "A V (the head's output)", NULL, QUERY_ROWS},
};
static const part grad_parts[] = {
    {"dA", "dA = dLoss/dA", NULL, QUERIES_BY_KEYS},
    {"dS", "dS = dLoss/d(S / sqrt(d_k) + M) = A * (dA - rowsum(dA * A))", NULL, QUERIES_BY_KEYS},
    {"dQ", "dQ = dLoss/dQ", NULL, QUERY_ROWS},
    {"dK", "dK = dLoss/dK", NULL, KEY_ROWS},
    {"dV", "dV = dLoss/dV", NULL, KEY_ROWS},
};
#define NPARTS ((int)(sizeof parts / sizeof parts[0]))
#define NGRADS ((int)(sizeof grad_parts / sizeof grad_parts[0]))

/* The tensor of part i (of parts[] or, with grad, grad_parts[]) of layer l. */
static const qkv_tensor *part_tensor(const inspection *in, int l, bool grad, int i) {
    const qkv_layer_trace *tr = &in->trace[l];
    const qkv_tensor *x[NPARTS] = {tr->q, tr->k, tr->v, tr->scores, tr->scaled, tr->weights,
                                   tr->head_out};
    const qkv_tensor *g[NGRADS] = {tr->weights, tr->masked, tr->q, tr->k, tr->v};
    return grad ? g[i] : x[i];
}

static int part_rows(const inspection *in, const part *p) { return p->shape == KEY_ROWS ? in->T : in->Tq; }
static int part_cols(const inspection *in, const part *p) {
    return p->shape == QUERIES_BY_KEYS ? in->T : in->Dk;
}
static char (*part_row_labels(const inspection *in, const part *p))[40] {
    return p->shape == KEY_ROWS ? in->klabels : in->qlabels;
}

static bool masked_at(const inspection *in, int i, int j) { return in->masked[(size_t)i * in->T + j]; }

/* Reads the model; for a data file's model, the file too (trainer_load), for its vocabulary. */
static int load_model(inspection *in, const inspect_args *a) {
    char path[1100];
    if (!cli_model_path(a->model, path, sizeof path)) return EXIT_IO;
    if (a->out && cli_output_clashes("inspect: --out ", a->out, path)) return EXIT_USAGE;
    qkv_status s = trainer_load(&in->t, path);
    if (s != QKV_OK) {
        cli_error("%s", qkv_last_error());
        return cli_exit_for(s);
    }
    const qkv_model_config *c = &in->t.model.cfg;
    in->model_T = c->seq_len, in->H = c->heads, in->L = c->layers, in->Dk = c->d_model / c->heads;
    in->V = c->vocab, in->cross = c->target_len > 0;
    if (in->model_T > INSPECT_MAX_TOKENS || in->t.target_len > INSPECT_MAX_TOKENS) {
        cli_error("%s: --seq-len %d is longer than inspect reads (%d)", path, in->model_T,
                  INSPECT_MAX_TOKENS);
        return EXIT_FORMAT;
    }
    return EXIT_OK;
}

/* The input and the target words -> in->tokens (padded), in->T, in->Tq and in->targets. */
static int read_words(inspection *in, const inspect_args *a) {
    const qkv_task *task = &in->t.cfg.task;
    const char *name = qkv_task_name(task->kind);
    int To = in->t.target_len; /* the model's query rows: T, or the decoder's positions */
    char expect[160], limit[80];
    if (in->t.data) {
        snprintf(expect, sizeof expect, "a token of the model's vocabulary (the token strings "
                 "of %.60s)", in->t.data->path);
        snprintf(limit, sizeof limit, "the longest input of its data file");
        if (!parse_words(in, "--input", a->input, 1, in->model_T, limit, input_token, 0, expect,
                         in->tokens, &in->T))
            return EXIT_USAGE;
        for (int i = in->T; i < in->model_T; i++) in->tokens[i] = DATA_PAD;
    } else {
        char example[32] = "";
        qkv_task_token_label(task, 0, example, sizeof example);
        snprintf(expect, sizeof expect, "a token of %s (an id 0..%d%s%s%s)", name, task->vocab - 1,
                 strcmp(example, "0") ? ", or a label such as " : "",
                 strcmp(example, "0") ? example : "",
                 task->kind == QKV_TASK_LOOKUP ? ", ?k0" : "");
        if (!parse_words(in, "--input", a->input, in->model_T, in->model_T, "its --seq-len",
                         input_token, 0, expect, in->tokens, &in->T))
            return EXIT_USAGE;
    }
    in->Tq = in->cross ? To : in->T;
    for (int i = 0; i < To; i++) in->targets[i] = -1;
    if (a->target) {
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
        if (!parse_words(in, "--target", a->target, least, most, limit, target_class, -1, expect,
                         in->targets, &n))
            return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* Softmax of output position i's logits: the predicted class and its probability. */
static int predict(const inspection *in, int i, double *prob) {
    int64_t row = (int64_t)i * in->V;
    int best = 0;
    for (int j = 1; j < in->V; j++)
        if (qkv_get(in->logits, row + j) > qkv_get(in->logits, row + best)) best = j;
    double top = qkv_get(in->logits, row + best), sum = 0;
    for (int j = 0; j < in->V; j++) sum += exp(qkv_get(in->logits, row + j) - top);
    *prob = 1 / sum;
    return best;
}

static int run_model(inspection *in, const inspect_args *a) {
    int code = load_model(in, a);
    if (code == EXIT_OK) code = read_words(in, a);
    if (code != EXIT_OK) return code;
    const qkv_model_config *c = &in->t.model.cfg;
    int To = in->t.target_len;
    const char *what;
    double need = qkv_model_step_bytes(c, 1), have = memory_limit(&what);
    in->klabels = malloc((size_t)in->T * sizeof *in->klabels);
    in->qlabels = malloc((size_t)in->Tq * sizeof *in->qlabels);
    in->masked = malloc((size_t)in->Tq * in->T);
    if (need > have / 2 || !in->klabels || !in->qlabels || !in->masked ||
        !(in->ctx = qkv_ctx_new((size_t)need + (1 << 20)))) {
        cli_error("inspect: out of memory (about %.1f MiB needed, %s allows %.1f MiB)",
                  need / (1 << 20), what, have / (1 << 20));
        return EXIT_NOMEM;
    }
    qkv_ctx_set_no_grad(in->ctx, !a->target); /* gradients only when there is a loss */
    /* a data file's input is padded as in training: lengths = the typed tokens */
    int32_t length = in->T;
    in->logits = qkv_model_forward_trace_padded(&in->t.model, in->ctx, in->tokens,
                                                in->t.data ? &length : NULL, 1, in->trace);
    if (a->target) {
        qkv_tensor *y = qkv_from_array(in->ctx, QKV_I32, 2, (int64_t[]){1, To}, in->targets);
        in->loss = qkv_cross_entropy(in->ctx, in->logits, y, -1);
        qkv_zero_grad(in->t.model.params);
        qkv_backward(in->loss);
    }
    /* the mask, as the model applied it: -inf entered the softmax (the same in every head) */
    for (int i = 0; i < in->Tq; i++)
        for (int j = 0; j < in->T; j++) {
            double m = part_at(in->trace[0].masked, false, 0, i, j);
            in->masked[(size_t)i * in->T + j] = isinf(m) && m < 0;
        }
    char tok[32];
    for (int j = 0; j < in->T; j++) {
        token_label(in, in->tokens[j], tok, sizeof tok);
        snprintf(in->klabels[j], sizeof in->klabels[j], "%d:%.28s", j, tok);
    }
    for (int i = 0; i < in->Tq; i++) {
        if (!in->cross) {
            memcpy(in->qlabels[i], in->klabels[i], sizeof in->qlabels[i]);
            continue;
        }
        /* a decoder position: by its target, as a run's attention/ files; else its prediction */
        if (a->target && in->targets[i] < 0) snprintf(tok, sizeof tok, "_");
        else if (a->target) class_label(in, in->targets[i], tok, sizeof tok);
        else {
            double prob;
            class_label(in, predict(in, i, &prob), tok, sizeof tok);
        }
        snprintf(in->qlabels[i], sizeof in->qlabels[i], "%d:%.28s", i, tok);
    }
    return EXIT_OK;
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

static void print_matrix(const inspection *in, const part *p, const qkv_tensor *x, bool grad,
                         int h) {
    int rows = part_rows(in, p), cols = part_cols(in, p), per = columns_per_block();
    bool keys = p->shape == QUERIES_BY_KEYS;
    char (*row_labels)[40] = part_row_labels(in, p);
    const char *row_what = p->shape == KEY_ROWS  ? (in->cross ? "input positions" : "positions")
                           : in->cross          ? "decoder positions"
                           : keys               ? "queries"
                                                : "positions";
    printf("%s   (%d x %d, rows: %s%s)\n", in->cross && p->cross_what ? p->cross_what : p->what,
           rows, cols, row_what, keys ? (in->cross ? " (queries), columns: input positions (keys)"
                                                   : ", columns: keys")
                                      : "");
    for (int first = 0; first < cols; first += per) {
        int last = first + per < cols ? first + per : cols;
        if (cols > per) printf("  columns %d..%d\n", first, last - 1);
        printf("%10s", "");
        for (int j = first; j < last; j++) {
            if (keys) printf(" %10.10s", in->klabels[j]);
            else printf(" %10d", j);
        }
        putchar('\n');
        for (int i = 0; i < rows; i++) {
            printf("%10.10s", row_labels[i]);
            for (int j = first; j < last; j++) {
                /* A and dS are 0 where the mask dropped a key; the scores before the mask and
                 * dA are not, and are shown as they are */
                if (keys && masked_at(in, i, j) && (!strcmp(p->name, "weights") || !strcmp(p->name, "dS")))
                    printf(" %10s", "masked");
                else
                    printf(" %10.4g", part_at(x, grad, h, i, j));
            }
            putchar('\n');
        }
    }
}

/* One row of the table of tokens: a name, then a cell per position. */
static void print_row_name(const char *name) { printf("%-12s", name); }

static void print_text(const inspection *in) {
    const qkv_task *task = &in->t.cfg.task;
    const qkv_model_config *c = &in->t.model.cfg;
    printf("%s model: %d layer%s x %d head%s, d_model %d, d_k %d%s, after %" PRId64 " steps\n",
           qkv_task_name(task->kind), c->layers, c->layers > 1 ? "s" : "", c->heads,
           c->heads > 1 ? "s" : "", c->d_model, in->Dk, c->causal ? ", causal mask" : "",
           in->t.optim.step);
    if (in->t.data)
        printf("data file %s; %d of at most %d input tokens%s\n", in->t.data->path, in->T,
               in->model_T, in->T < in->model_T ? ", padded as in training" : "");
    if (in->cross)
        printf("encoder-decoder: every layer is cross-attention from the %d decoder positions "
               "(queries) to the %d input tokens (keys and values); the decoder has no "
               "self-attention\n", in->Tq, in->T);
    char buf[32];
    print_row_name("position");
    for (int i = 0; i < in->T; i++) printf(" %7d", i);
    putchar('\n');
    print_row_name("input");
    for (int i = 0; i < in->T; i++) {
        token_label(in, in->tokens[i], buf, sizeof buf);
        printf(" %7.7s", buf);
    }
    putchar('\n');
    if (in->cross) {
        print_row_name("decoder");
        for (int i = 0; i < in->Tq; i++) printf(" %7d", i);
        putchar('\n');
    }
    print_row_name("prediction");
    double *prob = malloc((size_t)in->Tq * sizeof *prob);
    for (int i = 0; i < in->Tq; i++) {
        double p;
        class_label(in, predict(in, i, &p), buf, sizeof buf);
        if (prob) prob[i] = p;
        printf(" %7.7s", buf);
    }
    putchar('\n');
    print_row_name("probability");
    for (int i = 0; prob && i < in->Tq; i++) printf(" %7.3f", prob[i]);
    free(prob);
    if (in->loss) {
        putchar('\n');
        print_row_name("target");
        for (int i = 0; i < in->Tq; i++) {
            if (in->targets[i] < 0) snprintf(buf, sizeof buf, "_");
            else class_label(in, in->targets[i], buf, sizeof buf);
            printf(" %7.7s", buf);
        }
        printf("\nloss %.6g (mean cross-entropy over the positions with a target)",
               qkv_get(in->loss, 0));
    }
    putchar('\n');
    for (int l = 0; l < in->L; l++)
        for (int h = 0; h < in->H; h++) {
            printf("\n== layer %d, head %d%s\n", l + 1, h + 1, in->cross ? " (cross-attention)" : "");
            for (int i = 0; i < NPARTS; i++)
                print_matrix(in, &parts[i], part_tensor(in, l, false, i), false, h);
            for (int i = 0; in->loss && i < NGRADS; i++)
                print_matrix(in, &grad_parts[i], part_tensor(in, l, true, i), true, h);
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

/* A part of head h as rows of numbers; with `null_masked`, null where the mask dropped a key. */
static void json_matrix(const inspection *in, const part *p, const qkv_tensor *x, bool grad, int h,
                        bool null_masked) {
    int rows = part_rows(in, p), cols = part_cols(in, p);
    putchar('[');
    for (int i = 0; i < rows; i++) {
        printf("%s[", i ? "," : "");
        for (int j = 0; j < cols; j++) {
            if (j) putchar(',');
            if (null_masked && p->shape == QUERIES_BY_KEYS && masked_at(in, i, j)) fputs("null", stdout);
            else json_number(part_at(x, grad, h, i, j));
        }
        putchar(']');
    }
    putchar(']');
}

static void json_labels(const char *key, char (*labels)[40], int n) {
    printf(",\"%s\":[", key);
    for (int i = 0; i < n; i++) {
        if (i) putchar(',');
        json_string(labels[i]);
    }
    putchar(']');
}

static void print_json(const inspection *in) {
    const qkv_task *task = &in->t.cfg.task;
    const qkv_model_config *c = &in->t.model.cfg;
    char buf[32];
    printf("{\"command\":\"inspect\",\"task\":\"%s\",\"layers\":%d,\"heads\":%d,\"d_model\":%d,"
           "\"d_k\":%d,\"seq_len\":%d,\"vocab\":%d,\"causal\":%s,\"cross_attention\":%s,"
           "\"queries\":%d,\"keys\":%d,\"step\":%" PRId64,
           qkv_task_name(task->kind), c->layers, c->heads, c->d_model, in->Dk, in->model_T, in->V,
           c->causal ? "true" : "false", in->cross ? "true" : "false", in->Tq, in->T,
           in->t.optim.step);
    if (in->t.data) {
        fputs(",\"data\":", stdout);
        json_string(in->t.data->path);
    }
    fputs(",\"tokens\":[", stdout);
    for (int i = 0; i < in->T; i++) printf("%s%d", i ? "," : "", in->tokens[i]);
    putchar(']');
    json_labels("labels", in->klabels, in->T);
    json_labels("query_labels", in->qlabels, in->Tq);
    fputs(",\"predictions\":[", stdout);
    for (int i = 0; i < in->Tq; i++) {
        double prob;
        int best = predict(in, i, &prob);
        class_label(in, best, buf, sizeof buf);
        printf("%s{\"class\":%d,\"label\":", i ? "," : "", best);
        json_string(buf);
        printf(",\"probability\":%.6g}", prob);
    }
    putchar(']');
    if (in->loss) {
        fputs(",\"targets\":[", stdout);
        for (int i = 0; i < in->Tq; i++) {
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
                /* the scores before the softmax are shown as they are; A is null where masked */
                json_matrix(in, &parts[i], part_tensor(in, l, false, i), false, h,
                            strcmp(parts[i].name, "scores") && strcmp(parts[i].name, "scaled"));
            }
            for (int i = 0; in->loss && i < NGRADS; i++) {
                printf(",\"%s\":", grad_parts[i].name);
                json_matrix(in, &grad_parts[i], part_tensor(in, l, true, i), true, h, false);
            }
            putchar('}');
        }
    fputs("]}\n", stdout);
}

/* ---- safetensors ---- */

/* The labels as one space-separated string (they hold no space), malloc'd. */
static char *join_labels(char (*labels)[40], int n) {
    char *s = malloc((size_t)n * 40 + 1), *p = s;
    for (int i = 0; s && i < n; i++) p += sprintf(p, "%s%s", i ? " " : "", labels[i]);
    return s;
}

/* layer<L>.<part>: (H, Tq, Dk), (H, T, Dk) or (H, Tq, T) per layer, all heads; the masked
 * scores are kept as `scaled` (finite: safetensors files hold no Inf) and `mask` (1 kept, 0
 * dropped). */
static int write_file(const inspection *in, const char *out) {
    enum { PER_LAYER = NPARTS + NGRADS };
    qkv_ctx *ctx = qkv_ctx_new(0);
    char *klabels = join_labels(in->klabels, in->T), *qlabels = join_labels(in->qlabels, in->Tq);
    if (!ctx || !klabels || !qlabels) {
        qkv_ctx_free(ctx);
        free(klabels);
        free(qlabels);
        cli_error("inspect: out of memory");
        return EXIT_NOMEM;
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
        for (int j = 0; j < T; j++) qkv_set(mask, (int64_t)i * T + j, !masked_at(in, i, j));
    ADD(mask, "mask");
    if (in->loss) {
        ADD(qkv_from_array(ctx, QKV_I32, 1, (int64_t[]){Tq}, in->targets), "targets");
        qkv_tensor *loss = qkv_zeros(ctx, QKV_F32, 0, NULL);
        qkv_set(loss, 0, qkv_get(in->loss, 0));
        ADD(loss, "loss");
    }
    for (int l = 0; l < in->L; l++) {
        for (int g = 0; g < (in->loss ? 2 : 1); g++)
            for (int i = 0; i < (g ? NGRADS : NPARTS); i++) {
                const part *p = g ? &grad_parts[i] : &parts[i];
                const qkv_tensor *src = part_tensor(in, l, g, i);
                int rows = part_rows(in, p), cols = part_cols(in, p);
                qkv_tensor *x = qkv_zeros(ctx, QKV_F32, 3, (int64_t[]){in->H, rows, cols});
                bool zero_masked = !g && !strcmp(p->name, "weights"); /* exact zeros there */
                for (int h = 0; h < in->H; h++)
                    for (int r = 0; r < rows; r++)
                        for (int k = 0; k < cols; k++) {
                            double v = part_at(src, g, h, r, k);
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
    if (s != QKV_OK) {
        cli_error("%s", qkv_last_error());
        return cli_exit_for(s);
    }
    printf("wrote %s: %d layer%s x %d head%s, %d tokens%s%s\n", out, c->layers,
           c->layers > 1 ? "s" : "", c->heads, c->heads > 1 ? "s" : "", T,
           in->cross ? " (cross-attention from the decoder's positions)" : "",
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
    free(in->klabels);
    free(in->qlabels);
    free(in->masked);
    if (in->t.eval_ctx) trainer_free(&in->t);
    free(in);
    return code;
}
