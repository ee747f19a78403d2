/* cmd_ablate.c - `qkv ablate`: each head's output removed in turn, the held-out loss and
 * accuracy without it (explore/explain.c). */
#include "cli.h"
#include "explain_cli.h"
#include "explore/eval_data.h"
#include "engine/engine.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *model, *heads, *out, *data;
    long threads;
    int dtype, mode, site, over;
    bool together, json;
} ablate_args;

static const char *const modes[] = {"zero", "mean", NULL};

static int ablate_parse(int argc, char **argv, ablate_args *a) {
    *a = (ablate_args){.dtype = TRAIN_DTYPE_OF_FILE, .over = -1};
    cli_option options[] = {
        {"model", CLI_STRING, &a->model, .arg = "FILE",
         .help = "a model.safetensors, or the directory holding one (or give it as DIR)"},
        {"data", CLI_STRING, &a->data, .arg = "FILE",
         .help = "score FILE's examples (the format of qkv eval --data) instead of the\n"
                 "held-out set"},
        {"mode", CLI_CHOICE, &a->mode, .choices = modes, .arg = "M",
         .help = "zero: the head's output set to 0; mean: to its mean over the examples,\n"
                 "per position (default zero)"},
        {"heads", CLI_STRING, &a->heads, .arg = "L.H,...",
         .help = "only these heads (layers and heads from 1), e.g. 2.1,2.2 (default: all)"},
        EXPLAIN_CLI_SITE_ROWS("removed", &a->site, &a->over),
        {"together", CLI_FLAG, &a->together,
         .help = "also remove the listed heads (every row) at once"},
        {"dtype", CLI_CHOICE, &a->dtype, .choices = cli_dtype_names, .arg = "D",
         .help = "f32 or f64 (default: the model's own; an f32 model runs in f64 exactly\n"
                 "widened)"},
        {"threads", CLI_INT, &a->threads, 1, QKV_MAX_THREADS, .arg = "N", .help = "OpenMP threads"},
        {"json", CLI_FLAG, &a->json, .help = "print one JSON object (docs/explain.md)"},
        {"out", CLI_STRING, &a->out, .arg = "FILE",
         .help = "write the same JSON object to FILE (e.g. RUN/ablate.json for qkv plot)"},
        CLI_NO_SELFTEST_ROW,
        {"help", CLI_HELP, .help = "show this help"},
        {0}};
    const cli_command cmd = {
        .name = "ablate",
        .usage = "usage: qkv ablate DIR [options]   (or --model FILE)\n"
                 "For every head (or those listed), the held-out loss and accuracy with that "
                 "head's\noutput removed.\n\n",
        .options = options,
        .column = 22,
        .epilog = "\nExit codes: 0 done, 2 bad option or head, 3 a file cannot be read or "
                  "written,\n4 the model file is corrupt, 6 out of memory.\n",
        .operands = true};
    int first;
    int code = cli_parse_options(&cmd, argc, argv, &first);
    if (code != CLI_RUN) return code;
    if (!a->threads && !cli_default_threads(&a->threads)) return EXIT_USAGE;
    if (a->over < 0) a->over = (int)explain_default_over((qkv_site)a->site);
    if (!explain_site_has_heads((qkv_site)a->site) && a->heads) {
        cli_error("ablate: --heads names heads; --site %s has none: it is removed in every "
                  "layer", explain_site_names[a->site]);
        return EXIT_USAGE;
    }
    return explain_cli_model("ablate", a->model, argc, argv, first, &a->model);
}

/* "L.H": two whole numbers, each digits only (engine/numbers.c: " 1.+1" and "1.1x" are not). */
static bool read_head(char *item, uint64_t *layer, uint64_t *head) {
    char *dot = strchr(item, '.');
    if (!dot) return false;
    *dot = '\0';
    bool ok = number_u64(item, layer) == NUMBER_OK && number_u64(dot + 1, head) == NUMBER_OK;
    *dot = '.';
    return ok;
}

/* One head of --heads, checked against the model and the heads before it: QKV_ERR_VALUE
 * naming it. `seen` marks the heads listed so far, by layer then head. */
static qkv_status add_head(const char *item, const qkv_model_config *c, unsigned char *seen,
                           ablate_request *rq) {
    char text[48];
    uint64_t lv, hv;
    snprintf(text, sizeof text, "%s", item);
    if (strlen(item) >= sizeof text || !read_head(text, &lv, &hv))
        return qkv_fail(QKV_ERR_VALUE, "--heads: '%.40s' is not LAYER.HEAD (e.g. 2.1)", item);
    int l = lv > INT_MAX ? 0 : (int)lv, h = hv > INT_MAX ? 0 : (int)hv; /* 0: none such */
    if (l < 1 || l > c->layers || h < 1 || h > c->heads)
        return qkv_fail(QKV_ERR_VALUE, "--heads: head %s does not exist: the model has %d layer%s "
                        "of %d head%s", item, c->layers, c->layers == 1 ? "" : "s", c->heads,
                        c->heads == 1 ? "" : "s");
    if (seen[(size_t)(l - 1) * c->heads + (h - 1)]++)
        return qkv_fail(QKV_ERR_VALUE, "--heads: head %d.%d is listed twice (once as '%s')", l, h,
                        item);
    rq->heads[rq->n_heads++] = (explain_head){l - 1, h - 1};
    return QKV_OK;
}

/* "2.1,2.2" -> heads (0-based), checked against the model. */
static qkv_status parse_heads(const char *text, const loaded_model *lm, ablate_request *rq) {
    const qkv_model_config *c = &lm->model.cfg;
    if (!*text) return qkv_fail(QKV_ERR_VALUE, "--heads: no head given");
    /* each head at most once (a second listing is refused): at most every head */
    unsigned char *seen = calloc((size_t)c->layers * c->heads, 1);
    rq->heads = malloc((size_t)c->layers * c->heads * sizeof *rq->heads);
    char *copy = strdup(text);
    qkv_status s = seen && copy && rq->heads ? QKV_OK
                                             : qkv_fail(QKV_ERR_NOMEM, "--heads: out of memory");
    /* every item between commas, the empty ones too ("1.1," and "1.1,,2.1" are refused) */
    for (char *item = copy, *next = NULL; s == QKV_OK && item; item = next) {
        next = strchr(item, ',');
        if (next) *next++ = '\0';
        s = add_head(item, c, seen, rq);
    }
    free(copy);
    free(seen);
    return s;
}

static void print_table(const loaded_model *lm, const ablate_request *rq, const ablate_result *r,
                        const char *data) {
    bool stream = !explain_site_has_heads(rq->site);
    bool neurons = rq->site == QKV_SITE_MLP_PRE || rq->site == QKV_SITE_MLP_POST;
    bool scales = rq->site == QKV_SITE_LN_SCALE;
    printf("ablate: %s ablation of %s (--site %s, --over %s), %d layer%s x %d head%s, %lld "
           "positions with a target (%s)\n", rq->mean ? "mean" : "zero",
           neurons  ? "the MLP's neurons"
           : scales ? "each LayerNorm's scale"
           : stream ? "the stream"
                    : "each head",
           explain_site_names[rq->site],
           explain_over_names[rq->over], lm->model.cfg.layers, lm->model.cfg.layers == 1 ? "" : "s",
           lm->model.cfg.heads, lm->model.cfg.heads == 1 ? "" : "s",
           (long long)r->baseline.counted, data ? data : "the held-out set");
    printf("  %-16s %10s %9s %10s %10s\n",
           neurons ? "layer neuron" : scales ? "layer LayerNorm" : stream ? "layer" : "head",
           "loss", "accuracy", "loss +", "accuracy -");
    printf("  %-16s %10.4f %9.4f\n", "none", r->baseline.loss, r->baseline.accuracy);
    for (int i = 0; i < r->n; i++) {
        const explain_spot *s = &r->spots[i];
        char name[48];
        if (s->head < 0) snprintf(name, sizeof name, "%d", s->layer + 1);
        else snprintf(name, sizeof name, "%d.%d", s->layer + 1, s->head + 1);
        size_t at = strlen(name);
        if (neurons && s->neuron >= 0) snprintf(name + at, sizeof name - at, " n%d", s->neuron);
        if (scales) snprintf(name + at, sizeof name - at, " %s", explain_ln_names[s->ln]);
        at = strlen(name);
        if (s->position >= 0) snprintf(name + at, sizeof name - at, " @%d", s->position);
        else if (s->key_position >= 0)
            snprintf(name + at, sizeof name - at, " key %d", s->key_position);
        printf("  %-16s %10.4f %9.4f %+10.4f %+10.4f\n", name, r->each[i].loss,
               r->each[i].accuracy, r->each[i].loss - r->baseline.loss,
               r->baseline.accuracy - r->each[i].accuracy);
    }
    if (rq->together)
        printf("  %-16s %10.4f %9.4f %+10.4f %+10.4f   (every row above at once)\n",
               "together", r->together.loss, r->together.accuracy,
               r->together.loss - r->baseline.loss, r->baseline.accuracy - r->together.accuracy);
}

/* One run of the command: its options, request, examples, result (explain_cli_run's state).
 * Its messages are printed as they are: --heads's name the option, the analysis's the file. */
typedef struct {
    const ablate_args *a;
    ablate_request rq;
    eval_file file; /* --data's examples */
    ablate_result r;
} ablate_job;

static qkv_status ablate_compute(loaded_model *lm, void *state) {
    ablate_job *job = state;
    const ablate_args *a = job->a;
    qkv_status s = a->heads ? parse_heads(a->heads, lm, &job->rq) : QKV_OK;
    if (s != QKV_OK) return s;
    if (explain_check_site(lm, job->rq.site, job->rq.over) != QKV_OK)
        return qkv_fail(QKV_ERR_VALUE, "ablate: %s", qkv_last_error());
    example_set set = loaded_model_heldout(lm);
    if (a->data) {
        if ((s = eval_file_read(&job->file, lm, a->data)) != QKV_OK) return s;
        set = (example_set){job->file.n, job->file.x, job->file.y, lm->data ? job->file.len : NULL};
    }
    return explain_ablate(lm, &set, &job->rq, &job->r);
}

static cJSON *ablate_json(const loaded_model *lm, void *state) {
    ablate_job *job = state;
    cJSON *j = explain_ablate_json(lm, &job->rq, &job->r, job->a->data);
    if (!j) qkv_fail(QKV_ERR_NOMEM, "ablate: out of memory");
    return j;
}

static qkv_status ablate_table(const loaded_model *lm, void *state) {
    ablate_job *job = state;
    print_table(lm, &job->rq, &job->r, job->a->data);
    return QKV_OK;
}

static int ablate_run(const ablate_args *a) {
    ablate_job job = {.a = a, .rq = {.mean = a->mode == 1, .together = a->together,
                                     .site = (qkv_site)a->site, .over = (explain_over)a->over}};
    int code = explain_cli_run(&(explain_cli_job){
        .who = "ablate", .model = a->model, .out = a->out, .input = a->data, .dtype = a->dtype,
        .threads = a->threads, .print_json = a->json, .plain_errors = true,
        .run = ablate_compute, .json = ablate_json, .table = ablate_table, .state = &job});
    eval_file_free(&job.file);
    explain_ablate_free(&job.r);
    free(job.rq.heads);
    return code;
}

int cmd_ablate(int argc, char **argv, bool parse_only) {
    ablate_args a;
    int code = ablate_parse(argc, argv, &a);
    return code != CLI_RUN || parse_only ? code : ablate_run(&a);
}
