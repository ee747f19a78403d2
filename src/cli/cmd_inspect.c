/* cmd_inspect.c - `qkv inspect`: run a saved model on any input the user types and show what every
 * attention head computed (Q, K, V, the scores, the weights, the head's output) and, with a
 * target, the loss and the gradients that flow back through the head. */
#include "cli.h"
#include "explain_cli.h"
#include "io/io.h"
#include "explore/inspect.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

typedef struct {
    const char *model, *input, *target, *out;
    bool json, full;
} inspect_args;

static int inspect_parse(int argc, char **argv, inspect_args *a) {
    *a = (inspect_args){0};
    cli_option options[] = {
        {"model", CLI_STRING, &a->model, .arg = "DIR",
         .help = "a model.safetensors, or the directory holding one (a model of a\n"
                 "data file reads the run's copy of its file, as qkv eval does)"},
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
        {"full", CLI_FLAG, &a->full,
         .help = "print every part of every head: Q, K, V, the scores, the weights and\n"
                 "the output (and with --target every gradient); without it the text\n"
                 "shows the weights A (and dS), and --json and --out hold everything"},
        {"json", CLI_FLAG, &a->json, .help = "print one JSON object instead of text"},
        {"out", CLI_STRING, &a->out, .arg = "FILE",
         .help = "write every tensor to FILE (safetensors; qkv plot FILE draws it)"},
        CLI_NO_SELFTEST_ROW,
        {"help", CLI_HELP, .help = "show this help"},
        {0}};
    const cli_command cmd = {
        .name = "inspect",
        .usage = "usage: qkv inspect DIR --input \"t1 t2 ...\" [options]   (or --model DIR)\n"
                 "Runs a saved model on one input and prints its predictions and, for every layer and head,\n"
                 "the weights A = softmax(S/sqrt(d_k) + M); with --full also Q, K, V, the scores S = Q K^T,\n"
                 "S/sqrt(d_k) and the head's output A V. In an encoder-decoder (translate, or a data file whose outputs have\n"
                 "another length than its inputs) every layer is cross-attention: the decoder's positions\n"
                 "are the queries, the input's tokens the keys and values, and the maps are n_q x n_k.\n"
                 "\n",
        .options = options,
        .column = 22,
        .epilog = "\n"
                  "Exit codes: 0 done, 2 bad option or bad token, 3 the model (or its data file) cannot be\n"
                  "read or FILE written, 4 the model file is corrupt, 6 out of memory.\n",
        .operands = true};
    int first;
    int code = cli_parse_options(&cmd, argc, argv, &first);
    if (code != CLI_RUN) return code;
    if ((code = explain_cli_model("inspect", a->model, argc, argv, first, &a->model)) != CLI_RUN)
        return code;
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
    int rows = inspect_part_rows(in, p), cols = inspect_part_cols(in, p), per = columns_per_block();
    bool keys = p->shape == QUERIES_BY_KEYS;
    char (*row_labels)[40] = inspect_part_row_labels(in, p);
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
                if (keys && inspect_masked_at(in, i, j) && (!strcmp(p->name, "weights") || !strcmp(p->name, "dS")))
                    printf(" %10s", "masked");
                else
                    printf(" %10.4g", inspect_part_at(x, grad, h, i, j));
            }
            putchar('\n');
        }
    }
}

/* One row of the table of tokens: a name, then a cell per position. */
static void print_row_name(const char *name) { printf("%-12s", name); }

/* Positions first..last-1 of the table of tokens: the input's rows (position, input) and the
 * output's (prediction, probability, target; an encoder-decoder's under "decoder"). */
static void token_rows(const inspection *in, int first, int last, bool input, bool output,
                       const int32_t *pred, const double *prob) {
    char buf[32];
    if (input || in->cross) {
        print_row_name(input ? "position" : "decoder");
        for (int i = first; i < last; i++) printf(" %7d", i);
        putchar('\n');
    }
    if (input) {
        print_row_name("input");
        for (int i = first; i < last; i++) {
            inspect_token_label(in, in->tokens[i], buf, sizeof buf);
            printf(" %7.7s", buf);
        }
        putchar('\n');
    }
    if (!output || !pred || !prob) return;
    print_row_name("prediction");
    for (int i = first; i < last; i++) {
        inspect_class_label(in, pred[i], buf, sizeof buf);
        printf(" %7.7s", buf);
    }
    putchar('\n');
    print_row_name("probability");
    for (int i = first; i < last; i++) printf(" %7.3f", prob[i]);
    putchar('\n');
    if (!in->loss) return;
    print_row_name("target");
    for (int i = first; i < last; i++) {
        if (in->targets[i] < 0) snprintf(buf, sizeof buf, "_");
        else inspect_class_label(in, in->targets[i], buf, sizeof buf);
        printf(" %7.7s", buf);
    }
    putchar('\n');
}

/* Without --full a head shows what a user comes for: its attention weights and, with a
 * target, the gradient through the softmax. */
static bool shown_by_default(const part *p) {
    return !strcmp(p->name, "weights") || !strcmp(p->name, "dS");
}

static void print_text(const inspection *in, bool full) {
    const qkv_task *task = &in->lm.cfg.task;
    const qkv_model_config *c = &in->lm.model.cfg;
    char blocks[64] = "";
    if (c->mlp > 0)
        snprintf(blocks, sizeof blocks, ", an MLP of %d (%s)", c->mlp, qkv_act_name(c->act));
    if (c->norm != QKV_NORM_NONE)
        snprintf(blocks + strlen(blocks), sizeof blocks - strlen(blocks), ", %s",
                 qkv_norm_name(c->norm));
    printf("%s model: %d layer%s x %d head%s%s, d_model %d, d_k %d%s, after %" PRId64 " step%s\n",
           qkv_task_name(task->kind), c->layers, c->layers > 1 ? "s" : "", c->heads,
           c->heads > 1 ? "s" : "", blocks, c->d_model, in->Dk,
           c->causal ? ", causal mask" : "", in->lm.step, in->lm.step == 1 ? "" : "s");
    if (in->lm.data)
        printf("data file %s; %d of at most %d input tokens%s\n", in->lm.data->path, in->T,
               in->model_T, in->T < in->model_T ? ", padded as in training" : "");
    if (in->cross)
        printf("encoder-decoder: every layer is cross-attention from the %d decoder positions "
               "(queries) to the %d input tokens (keys and values); the decoder has no "
               "self-attention\n", in->Tq, in->T);
    /* the table of tokens, in blocks of positions that fit a terminal (whole when piped) */
    int32_t *pred = malloc((size_t)in->Tq * sizeof *pred);
    double *prob = malloc((size_t)in->Tq * sizeof *prob);
    for (int i = 0; pred && prob && i < in->Tq; i++) pred[i] = inspect_predict(in, i, &prob[i]);
    int width = cli_terminal_columns(stdout);
    int per = width ? (width - 1 - 12) / 8 : in->T > in->Tq ? in->T : in->Tq;
    per = per < 1 ? 1 : per;
    if (in->cross) /* the input's positions, then the decoder's */
        for (int first = 0; first < in->T; first += per)
            token_rows(in, first, first + per < in->T ? first + per : in->T, true, false, pred, prob);
    for (int first = 0; first < in->Tq; first += per)
        token_rows(in, first, first + per < in->Tq ? first + per : in->Tq, !in->cross, true, pred,
                   prob);
    free(pred);
    free(prob);
    if (in->loss)
        printf("loss %.6g (mean cross-entropy over the positions with a target)\n",
               qkv_get(in->loss, 0));
    for (int l = 0; l < in->L; l++)
        for (int h = 0; h < in->H; h++) {
            printf("\n== layer %d, head %d%s\n", l + 1, h + 1, in->cross ? " (cross-attention)" : "");
            for (int i = 0; i < INSPECT_NPARTS; i++)
                if (full || shown_by_default(&inspect_parts[i]))
                    print_matrix(in, &inspect_parts[i], inspect_part_tensor(in, l, false, i), false, h);
            for (int i = 0; in->loss && i < INSPECT_NGRADS; i++)
                if (full || shown_by_default(&inspect_grad_parts[i]))
                    print_matrix(in, &inspect_grad_parts[i], inspect_part_tensor(in, l, true, i), true, h);
        }
    if (!full)
        printf("\n(Q, K, V, the scores and each head's output%s: --full)\n",
               in->loss ? ", and every gradient" : "");
}

/* The line that says what the file of --out holds. */
static void print_written(const inspection *in, const char *out) {
    const qkv_model_config *c = &in->lm.model.cfg;
    printf("wrote %s: %d layer%s x %d head%s, %d tokens%s%s\n", out, c->layers,
           c->layers > 1 ? "s" : "", c->heads, c->heads > 1 ? "s" : "", in->T,
           in->cross ? " (cross-attention from the decoder's positions)" : "",
           in->loss ? ", with the loss and its gradients" : "");
}

int cmd_inspect(int argc, char **argv, bool parse_only) {
    inspect_args a;
    int code = inspect_parse(argc, argv, &a);
    if (code != CLI_RUN || parse_only) return code;
    cli_set_threads(0); /* as many threads as can start: OpenMP's own failure would exit 1 */
    char path[RUN_PATH_LEN];
    if (!cli_model_path(a.model, path, sizeof path)) return EXIT_IO;
    code = cli_check_outputs("inspect", (cli_output[]){{"out", a.out}, {0}},
                             (const char *[]){path, NULL});
    if (code != EXIT_OK) return code;
    io_protect(path); /* and the files it names, as they are loaded */
    inspection *in = malloc(sizeof *in);
    if (!in) {
        cli_error("inspect: out of memory");
        return EXIT_NOMEM;
    }
    qkv_status s = inspection_run(in, path, a.input, a.target);
    if (s == QKV_OK && a.out && (s = inspection_save(in, a.out)) == QKV_OK)
        print_written(in, a.out);
    else if (s == QKV_OK && a.json) {
        cJSON *j = inspection_json(in);
        int code = explain_cli_save(j, NULL); /* every item of it made */
        if (code == EXIT_OK) code = explain_cli_print(j, true, NULL);
        cJSON_Delete(j);
        inspection_free(in);
        free(in);
        return code;
    }
    else if (s == QKV_OK)
        print_text(in, a.full);
    if (s != QKV_OK) cli_error("%s", qkv_last_error());
    inspection_free(in);
    free(in);
    return cli_exit_for(s);
}
