/* cmd_lens.c - `qkv lens`: the logit lens (the stream after each layer read through the
 * vocabulary head) and the final prediction's logit split into its parts at every position
 * (explore/lens.c). */
#include "cli.h"
#include "io/paths.h"
#include "explain_cli.h"
#include "explore/eval_data.h"
#include "explore/lens.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *model, *input, *out, *data, *per_example;
    long threads, top;
    int dtype;
    bool json;
} lens_args;

static int lens_parse(int argc, char **argv, lens_args *a) {
    *a = (lens_args){.dtype = TRAIN_DTYPE_OF_FILE}; /* top 0: LENS_DEFAULT_TOP */
    cli_option options[] = {
        {"model", CLI_STRING, &a->model, .arg = "FILE",
         .help = "a model.safetensors, or the directory holding one (or give it as DIR)"},
        {"input", CLI_STRING, &a->input, .arg = "\"...\"", .help = "the input's tokens"},
        {"data", CLI_STRING, &a->data, .arg = "FILE",
         .help = "instead of --input, FILE's examples (the format of qkv eval --data),\n"
                 "or heldout (the model's held-out set): the means over every target\n"
                 "position of the target's probability, loss and rank through the lens\n"
                 "and of its logit's parts"},
        {"per-example", CLI_STRING, &a->per_example, .arg = "FILE",
         .help = "with --data, write each example's own means to FILE, one JSON\n"
                 "object a line"},
        {"top", CLI_INT, &a->top, 1, LENS_MAX_TOP, .arg = "K",
         .help = "tokens listed per layer and position (default 5, or the vocabulary if smaller)"},
        {"dtype", CLI_CHOICE, &a->dtype, .choices = cli_dtype_names, .arg = "D",
         .help = "f32 or f64 (default: the model's own)"},
        {"threads", CLI_INT, &a->threads, 1, QKV_MAX_THREADS, .arg = "N", .help = "OpenMP threads"},
        {"json", CLI_FLAG, &a->json, .help = "print one JSON object (docs/explain.md)"},
        {"out", CLI_STRING, &a->out, .arg = "FILE",
         .help = "write the same JSON object to FILE (e.g. RUN/lens.json for qkv plot)"},
        CLI_NO_SELFTEST_ROW,
        {"help", CLI_HELP, .help = "show this help"},
        {0}};
    const cli_command cmd = {
        .name = "lens",
        .usage = "usage: qkv lens DIR --input \"...\" [options]\n"
                 "       qkv lens DIR --data FILE|heldout [options]\n"
                 "The logit lens: the stream after each layer (after 0: the embeddings) read "
                 "through the\nvocabulary head at every position, its most probable tokens and "
                 "the rank of the final\nprediction; and the final prediction's logit split into "
                 "the embeddings, each head and\nthe bias (as qkv attribute splits it).\n\n",
        .options = options,
        .column = 22,
        .epilog = "\nExit codes: 0 done, 2 bad option or input, 3 a file cannot be read or "
                  "written,\n4 the model file is corrupt, 5 a number is not finite, 6 out of "
                  "memory.\n",
        .operands = true};
    int first;
    int code = cli_parse_options(&cmd, argc, argv, &first);
    if (code != CLI_RUN) return code;
    if (!a->threads && !cli_default_threads(&a->threads)) return EXIT_USAGE;
    if (!a->input && !a->data) {
        cli_error("lens: --input is required (or --data FILE for a set of examples)");
        return EXIT_USAGE;
    }
    if (a->input && a->data) {
        cli_error("lens: give --input (one input) or --data (a set of examples), not both");
        return EXIT_USAGE;
    }
    if (a->per_example && !a->data) {
        cli_error("lens: --per-example needs --data FILE");
        return EXIT_USAGE;
    }
    if (a->data && a->top) {
        cli_error("lens: --top lists each cell's tokens of one input; --data gives means");
        return EXIT_USAGE;
    }
    return explain_cli_model("lens", a->model, argc, argv, first, &a->model);
}

/* Position i's label, "*" after it where it had no target in training (the table's note). */
static void position_label(const loaded_model *lm, const explain_input *in, int i, char *buf,
                           size_t len) {
    explain_position_label(lm, in, i, buf, len);
    if (!explain_position_trained(lm, in, i))
        snprintf(buf + strlen(buf), len - strlen(buf), "*");
}

/* A table: for each position, the top token and its probability after each layer (with the
 * final prediction's rank when it is not on top), then the parts of the final logit. */
static void print_table(const loaded_model *lm, const explain_input *in, const lens_result *r) {
    char pos[48], tok[32];
    printf("lens: the most probable token after each layer (its probability), and [the rank of "
           "the final prediction] where it is not that token\n");
    printf("  %-12s %-8s", "position", "final");
    for (int b = 0; b < r->boundaries; b++) {
        char head[24];
        snprintf(head, sizeof head, b ? "after %d" : "after 0 (embed)", b);
        printf(b + 1 < r->boundaries ? " %-18s" : " %s", head);
    }
    printf("\n");
    for (int i = 0; i < r->positions; i++) {
        position_label(lm, in, i, pos, sizeof pos);
        loaded_model_class_label(lm, r->final[i].token, tok, sizeof tok);
        printf("  %-12s %-8s", pos, tok);
        for (int b = 0; b < r->boundaries; b++) {
            size_t cell = (size_t)b * r->positions + i;
            char text[64], rank[16] = "";
            loaded_model_class_label(lm, r->top_token[cell * r->top], tok, sizeof tok);
            if (r->rank_of_final[cell] != 1)
                snprintf(rank, sizeof rank, " [%d]", (int)r->rank_of_final[cell]);
            snprintf(text, sizeof text, "%s %.3f%s", tok, r->top_prob[cell * r->top], rank);
            printf(b + 1 < r->boundaries ? " %-18s" : " %s", text);
        }
        printf("\n");
    }
    bool untrained = false;
    for (int i = 0; i < r->positions; i++) untrained |= !explain_position_trained(lm, in, i);
    printf("  (--json or --out lists the top %d of each%s)\n", r->top,
           untrained ? "; * a position with no target in training" : "");
    printf("decomposition: the final prediction's logit = the sum of its parts\n");
    printf("  %-12s %-8s %12s", "position", "token", "logit");
    const dla_result *f0 = &r->final[0];
    for (int k = 0; k < f0->n_parts; k++) printf(" %10s", f0->parts[k].name);
    printf("\n");
    for (int i = 0; i < r->positions; i++) {
        const dla_result *f = &r->final[i];
        position_label(lm, in, i, pos, sizeof pos);
        loaded_model_class_label(lm, f->token, tok, sizeof tok);
        printf("  %-12s %-8s %12.6f", pos, tok, f->logit);
        for (int k = 0; k < f->n_parts; k++) printf(" %10.4f", f->parts[k].value);
        printf("\n");
    }
}

/* lens --data's table: each boundary's means, then the parts' means. */
static void print_set_table(const loaded_model *lm, const char *data, const lens_set_result *r) {
    printf("lens: over %d example%s of %s, %lld target positions: the mean through the lens "
           "after each layer of the target's probability, loss and rank, how often it is the "
           "top token, and how often the top token is the final prediction\n", r->examples,
           r->examples == 1 ? "" : "s", strcmp(data, "heldout") ? data : "the held-out set",
           (long long)r->parts.counted);
    printf("  %-16s %10s %10s %10s %10s %10s\n", "after", "prob", "loss", "rank", "accuracy",
           "final");
    for (int b = 0; b < r->boundaries; b++) {
        const lens_mean *m = &r->layer[b];
        char head[24];
        snprintf(head, sizeof head, b ? "%d" : "0 (embed)", b);
        printf("  %-16s %10.4f %10.4f %10.3f %10.4f %10.4f\n", head, m->target_prob,
               m->target_loss, m->target_rank, m->accuracy, m->final_agreement);
    }
    printf("the target's logit, %.6f on average = the sum of its parts' means\n", r->parts.logit);
    for (int i = 0; i < r->parts.n_parts; i++)
        printf("  %-12s %14.6f\n", r->parts.parts[i].name, r->parts.parts[i].value);
    (void)lm;
}

/* One run of the command: its options, input or examples, result (explain_cli_run's state). */
typedef struct {
    const lens_args *a;
    explain_input *in;
    lens_result r;
    eval_file file;       /* --data's examples */
    lens_set_result set;  /* --data's means */
    atomic_file per_example;
} lens_job;

static qkv_status lens_compute(loaded_model *lm, void *state) {
    lens_job *job = state;
    if (job->a->data) {
        example_set set;
        const int64_t *lines;
        qkv_status s = explain_cli_data_set(lm, job->a->data, &job->file, &set, &lines);
        if (s == QKV_OK && job->a->per_example)
            s = atomic_open(&job->per_example, job->a->per_example);
        return s == QKV_OK ? lens_run_set(lm, &set, lines, job->a->per_example
                                                               ? job->per_example.f : NULL,
                                          &job->set)
                           : s;
    }
    qkv_status s = explain_read_input(lm, "--input", job->a->input, job->in);
    if (s != QKV_OK) return s;
    int vocab = lm->model.cfg.vocab;
    int top = job->a->top ? (int)job->a->top : vocab < LENS_DEFAULT_TOP ? vocab : LENS_DEFAULT_TOP;
    return lens_run(lm, job->in, top, &job->r);
}

static cJSON *lens_json_of(const loaded_model *lm, void *state) {
    lens_job *job = state;
    if (job->a->data) return lens_set_json(lm, job->a->data, &job->set);
    return lens_json(lm, job->in, &job->r);
}

static qkv_status lens_table(const loaded_model *lm, void *state) {
    lens_job *job = state;
    if (job->a->data) print_set_table(lm, job->a->data, &job->set);
    else print_table(lm, job->in, &job->r);
    return QKV_OK;
}

static int lens_command(const lens_args *a) {
    lens_job job = {.a = a, .in = malloc(sizeof *job.in)};
    if (!job.in) {
        cli_error("lens: out of memory");
        return EXIT_NOMEM;
    }
    const cli_output outputs[] = {{"per-example", a->per_example}, {"out", a->out}, {0}};
    const char *input = a->data && strcmp(a->data, "heldout") ? a->data : NULL;
    int code = explain_cli_run(&(explain_cli_job){
        .who = "lens", .model = a->model, .out = a->out, .input = input, .outputs = outputs,
        .second = &job.per_example, .dtype = a->dtype, .threads = a->threads,
        .print_json = a->json, .run = lens_compute, .json = lens_json_of, .table = lens_table,
        .state = &job});
    lens_free(&job.r);
    lens_set_free(&job.set);
    eval_file_free(&job.file);
    free(job.in);
    return code;
}

int cmd_lens(int argc, char **argv, bool parse_only) {
    lens_args a;
    int code = lens_parse(argc, argv, &a);
    return code != CLI_RUN || parse_only ? code : lens_command(&a);
}
