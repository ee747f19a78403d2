/* cmd_attribute.c - `qkv attribute`: direct logit attribution, one logit split exactly into
 * the embedding path, each head's share and the bias (explore/explain.c). */
#include "cli.h"
#include "io/paths.h"
#include "explain_cli.h"
#include "explore/explain.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *model, *input, *token, *out, *data, *per_example;
    long threads, position;
    int dtype;
    bool json, neurons;
} attribute_args;

static int attribute_parse(int argc, char **argv, attribute_args *a) {
    *a = (attribute_args){.dtype = TRAIN_DTYPE_OF_FILE, .position = -1};
    cli_option options[] = {
        {"model", CLI_STRING, &a->model, .arg = "FILE",
         .help = "a model.safetensors, or the directory holding one (or give it as DIR)"},
        {"input", CLI_STRING, &a->input, .arg = "\"...\"", .help = "the input's tokens"},
        {"data", CLI_STRING, &a->data, .arg = "FILE",
         .help = "instead of --input, FILE's examples (the format of qkv eval --data),\n"
                 "or heldout (the model's held-out set): each part's mean over every\n"
                 "target position, of the target's logit"},
        {"per-example", CLI_STRING, &a->per_example, .arg = "FILE",
         .help = "with --data, write each example's own means to FILE, one JSON\n"
                 "object a line"},
        {"position", CLI_INT, &a->position, 0, QKV_MAX_SEQ_LEN - 1, .arg = "I",
         .help = "the position, from 0 (default: the last that had a\n"
                 "target in training)"},
        {"token", CLI_STRING, &a->token, .arg = "TOKEN",
         .help = "whose logit (default: the predicted token)"},
        {"dtype", CLI_CHOICE, &a->dtype, .choices = cli_dtype_names, .arg = "D",
         .help = "f32 or f64 (default: the model's own)"},
        {"threads", CLI_INT, &a->threads, 1, QKV_MAX_THREADS, .arg = "N", .help = "OpenMP threads"},
        {"neurons", CLI_FLAG, &a->neurons,
         .help = "each MLP neuron's part (and each MLP's bias) instead of\n"
                 "each MLP's"},
        {"json", CLI_FLAG, &a->json, .help = "print one JSON object (docs/explain.md)"},
        {"out", CLI_STRING, &a->out, .arg = "FILE",
         .help = "write the same JSON object to FILE (e.g. RUN/attribute.json for qkv plot)"},
        CLI_NO_SELFTEST_ROW,
        {"help", CLI_HELP, .help = "show this help"},
        {0}};
    const cli_command cmd = {
        .name = "attribute",
        .usage = "usage: qkv attribute DIR --input \"...\" [options]\n"
                 "       qkv attribute DIR --data FILE|heldout [options]\n"
                 "Direct logit attribution: a logit split into the embedding path, each head's "
                 "share\n(through W_O and the vocabulary head), each MLP's and the bias; the parts "
                 "add up to the\nlogit. With LayerNorm, each part is read through the final "
                 "LayerNorm at the forward's\nown scale.\n\n",
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
        cli_error("attribute: --input is required (or --data FILE for a set of examples)");
        return EXIT_USAGE;
    }
    if (a->input && a->data) {
        cli_error("attribute: give --input (one input) or --data (a set of examples), not both");
        return EXIT_USAGE;
    }
    if (a->per_example && !a->data) {
        cli_error("attribute: --per-example needs --data FILE");
        return EXIT_USAGE;
    }
    if (a->data && (a->token || a->position >= 0)) {
        cli_error("attribute: --data splits each target position's target logit: it takes no "
                  "--%s", a->token ? "token" : "position");
        return EXIT_USAGE;
    }
    return explain_cli_model("attribute", a->model, argc, argv, first, &a->model);
}

static void print_table(const loaded_model *lm, const explain_input *in, const dla_result *r) {
    char pos[80], tok[32];
    explain_position_label(lm, in, r->position, pos, sizeof pos);
    if (!explain_position_trained(lm, in, r->position)) /* named, never taken for a target */
        snprintf(pos + strlen(pos), sizeof pos - strlen(pos), " (no target in training)");
    loaded_model_class_label(lm, r->token, tok, sizeof tok);
    printf("attribute: the logit of '%s' at position %s is %.9g\n", tok, pos, r->logit);
    if (lm->model.cfg.norm != QKV_NORM_NONE)
        printf("  each part centred and divided by the final LayerNorm's scale (1/sigma %.6g) "
               "of this forward\n", r->final_scale);
    printf("  %-12s %14s\n", "part", "value");
    for (int i = 0; i < r->n_parts; i++) {
        const dla_part *p = &r->parts[i];
        printf("  %-12s %14.6f%s\n", p->name, p->value,
               !strcmp(p->name, "embed") ? "   (embeddings, through the residual stream)" : "");
    }
    printf("  %-12s %14.6f   (logit - sum = %.3g)\n", "sum", r->sum, r->logit - r->sum);
}

/* --data's table: each part's mean. */
static void print_set_table(const char *data, int examples, const dla_mean *m) {
    printf("attribute: over %d example%s of %s, %lld target positions: the target's logit is "
           "%.9g on average\n", examples, examples == 1 ? "" : "s",
           strcmp(data, "heldout") ? data : "the held-out set",
           (long long)m->counted, m->logit);
    printf("  %-12s %14s\n", "part", "mean");
    double sum = 0;
    for (int i = 0; i < m->n_parts; i++) {
        printf("  %-12s %14.6f\n", m->parts[i].name, m->parts[i].value);
        sum += m->parts[i].value;
    }
    printf("  %-12s %14.6f   (logit - sum = %.3g)\n", "sum", sum, m->logit - sum);
}

/* One run of the command: its options, input or examples, result (explain_cli_run's state). */
typedef struct {
    const attribute_args *a;
    explain_input *in;
    dla_result r;
    int position;
    eval_file file;          /* --data's examples */
    int examples;
    dla_mean means;          /* --data's */
    atomic_file per_example;
} attribute_job;

static qkv_status attribute_compute(loaded_model *lm, void *state) {
    attribute_job *job = state;
    const attribute_args *a = job->a;
    bool no_mlp = a->neurons && lm->model.cfg.mlp == 0;
    if (no_mlp && a->data)
        return qkv_fail(QKV_ERR_VALUE, "--neurons splits an MLP's part, and the model has no MLP "
                        "(it was trained without --mlp)");
    if (a->data) {
        example_set set;
        const int64_t *lines;
        qkv_status s = explain_cli_data_set(lm, a->data, &job->file, &set, &lines);
        if (s == QKV_OK && a->per_example) s = atomic_open(&job->per_example, a->per_example);
        job->examples = set.n;
        return s == QKV_OK ? explain_attribute_set(lm, &set, lines, a->neurons,
                                                   a->per_example ? job->per_example.f : NULL,
                                                   &job->means)
                           : s;
    }
    qkv_status s = explain_read_input(lm, "--input", a->input, job->in);
    if (s != QKV_OK) return s;
    int position = a->position >= 0 ? (int)a->position : explain_default_position(lm, job->in);
    if (position < 0)
        return qkv_fail(QKV_ERR_VALUE, "the input has no position with a target: give --position");
    if ((s = explain_check_position(lm, job->in, position)) != QKV_OK) return s;
    int token = -1;
    if (a->token && (token = explain_read_class(lm, "--token", a->token)) < 0) return QKV_ERR_VALUE;
    if (no_mlp)
        return qkv_fail(QKV_ERR_VALUE, "--neurons splits an MLP's part, and the model has no MLP "
                        "(it was trained without --mlp)");
    job->position = position;
    return explain_attribute(lm, job->in, position, token, a->neurons, &job->r);
}

static cJSON *attribute_json(const loaded_model *lm, void *state) {
    attribute_job *job = state;
    if (job->a->data)
        return explain_attribute_set_json(lm, job->a->data, job->examples, &job->means);
    cJSON *j = explain_attribute_json(lm, job->in, &job->r);
    if (j) /* false: a position no training example of this length had a target at */
        cJSON_AddBoolToObject(j, "position_has_target",
                              explain_position_trained(lm, job->in, job->position));
    return j;
}

static qkv_status attribute_table(const loaded_model *lm, void *state) {
    attribute_job *job = state;
    if (job->a->data) print_set_table(job->a->data, job->examples, &job->means);
    else print_table(lm, job->in, &job->r);
    return QKV_OK;
}

static int attribute_run(const attribute_args *a) {
    attribute_job job = {.a = a, .in = malloc(sizeof *job.in)};
    if (!job.in) {
        cli_error("attribute: out of memory");
        return EXIT_NOMEM;
    }
    const cli_output outputs[] = {{"per-example", a->per_example}, {"out", a->out}, {0}};
    const char *input = a->data && strcmp(a->data, "heldout") ? a->data : NULL;
    int code = explain_cli_run(&(explain_cli_job){
        .who = "attribute", .model = a->model, .out = a->out, .input = input,
        .outputs = outputs, .second = &job.per_example, .dtype = a->dtype,
        .threads = a->threads, .print_json = a->json, .run = attribute_compute,
        .json = attribute_json, .table = attribute_table, .state = &job});
    explain_attribute_free(&job.r);
    explain_dla_mean_free(&job.means);
    eval_file_free(&job.file);
    free(job.in);
    return code;
}

int cmd_attribute(int argc, char **argv, bool parse_only) {
    attribute_args a;
    int code = attribute_parse(argc, argv, &a);
    return code != CLI_RUN || parse_only ? code : attribute_run(&a);
}
