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
    long threads, draws, seed;
    int dtype, mode, site, over, metric;
    bool together, json;
} ablate_args;

static const char *const modes[] = {"zero", "mean", "resample", NULL};

static int ablate_parse(int argc, char **argv, ablate_args *a) {
    *a = (ablate_args){.dtype = TRAIN_DTYPE_OF_FILE, .over = -1, .metric = -1, .draws = 1,
                       .seed = 1};
    cli_option options[] = {
        {"model", CLI_STRING, &a->model, .arg = "FILE",
         .help = "a model.safetensors, or the directory holding one (or give it as DIR)"},
        {"data", CLI_STRING, &a->data, .arg = "FILE",
         .help = "score FILE's examples (the format of qkv eval --data) instead of the\n"
                 "held-out set"},
        {"mode", CLI_CHOICE, &a->mode, .choices = modes, .arg = "M",
         .help = "zero: the head's output set to 0; mean: to its mean over the examples,\n"
                 "per position; resample: to its value in another example's run,\n"
                 "drawn at random (default zero)"},
        {"draws", CLI_INT, &a->draws, 1, EXPLAIN_MAX_DRAWS, .arg = "N",
         .help = "resample: the draws of other examples averaged (default 1)"},
        {"seed", CLI_INT, &a->seed, 0, INT32_MAX, .arg = "N",
         .help = "resample: the seed of the draws (default 1)"},
        {"metric", CLI_CHOICE, &a->metric, .choices = explain_metric_names, .arg = "M",
         .help = "also score each row by loss (the targets' cross-entropy), prob (their\n"
                 "probability) or kl (KL divergence from the unablated run, nats),\n"
                 "averaged over the positions with a target (logit-diff needs a wrong\n"
                 "token, which examples do not give)"},
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
                  "written,\n4 the model file or a line of the --data file is bad, 5 a number "
                  "is not finite,\n6 out of memory.\n",
        .operands = true};
    int first;
    int code = cli_parse_options(&cmd, argc, argv, &first);
    if (code != CLI_RUN) return code;
    if (!a->threads && !cli_default_threads(&a->threads)) return EXIT_USAGE;
    if (a->over < 0) a->over = (int)explain_default_over((qkv_site)a->site);
    if (a->metric == EXPLAIN_METRIC_LOGIT_DIFF) {
        cli_error("ablate: --metric logit-diff needs a wrong token beside each answer, and a set "
                  "of examples gives only targets: ablate takes --metric loss, prob or kl");
        return EXIT_USAGE;
    }
    if ((cli_option_given(&cmd, "draws") || cli_option_given(&cmd, "seed")) && a->mode != 2) {
        cli_error("ablate: --%s is for --mode resample's draws of other examples",
                  cli_option_given(&cmd, "draws") ? "draws" : "seed");
        return EXIT_USAGE;
    }
    if (!explain_site_has_heads((qkv_site)a->site) && a->heads) {
        cli_error("ablate: --heads names heads; --site %s has none: it is removed in every "
                  "layer", explain_site_names[a->site]);
        return EXIT_USAGE;
    }
    return explain_cli_model("ablate", a->model, argc, argv, first, &a->model);
}

/* With --metric, a row's metric and its change from the baseline ("  0.1234  +0.0567"). */
static void print_metric(const ablate_request *rq, const explain_score *x,
                         const explain_score *b) {
    if (rq->scored) printf(" %10.4f %+10.4f", x->metric, x->metric - b->metric);
}

static void print_table(const loaded_model *lm, const ablate_request *rq, const ablate_result *r,
                        const char *data) {
    bool stream = !explain_site_has_heads(rq->site);
    bool neurons = rq->site == QKV_SITE_MLP_PRE || rq->site == QKV_SITE_MLP_POST;
    bool scales = rq->site == QKV_SITE_LN_SCALE;
    char mode[64];
    if (rq->resample)
        snprintf(mode, sizeof mode, "resample (%d draw%s, seed %llu)", rq->draws,
                 rq->draws == 1 ? "" : "s", (unsigned long long)rq->seed);
    else snprintf(mode, sizeof mode, "%s", rq->mean ? "mean" : "zero");
    printf("ablate: %s ablation of %s (--site %s, --over %s), %d layer%s x %d head%s, %lld "
           "positions with a target (%s)\n", mode,
           neurons  ? "the MLP's neurons"
           : scales ? "each LayerNorm's scale"
           : stream ? "the stream"
                    : "each head",
           explain_site_names[rq->site],
           explain_over_names[rq->over], lm->model.cfg.layers, lm->model.cfg.layers == 1 ? "" : "s",
           lm->model.cfg.heads, lm->model.cfg.heads == 1 ? "" : "s",
           (long long)r->baseline.counted, data ? data : "the held-out set");
    printf("  %-16s %10s %9s %10s %10s",
           neurons ? "layer neuron" : scales ? "layer LayerNorm" : stream ? "layer" : "head",
           "loss", "accuracy", "loss +", "accuracy -");
    if (rq->scored) {
        char plus[24];
        snprintf(plus, sizeof plus, "%s +", explain_metric_names[rq->metric]);
        printf(" %10s %10s", explain_metric_names[rq->metric], plus);
    }
    printf("\n");
    printf("  %-16s %10.4f %9.4f", "none", r->baseline.loss, r->baseline.accuracy);
    if (rq->scored) printf(" %10.4f", r->baseline.metric);
    printf("\n");
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
        printf("  %-16s %10.4f %9.4f %+10.4f %+10.4f", name, r->each[i].loss,
               r->each[i].accuracy, r->each[i].loss - r->baseline.loss,
               r->baseline.accuracy - r->each[i].accuracy);
        print_metric(rq, &r->each[i], &r->baseline);
        printf("\n");
    }
    if (rq->together) {
        printf("  %-16s %10.4f %9.4f %+10.4f %+10.4f", "together", r->together.loss,
               r->together.accuracy, r->together.loss - r->baseline.loss,
               r->baseline.accuracy - r->together.accuracy);
        print_metric(rq, &r->together, &r->baseline);
        printf("   (every row above at once)\n");
    }
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
    qkv_status s = a->heads ? explain_cli_parse_heads(a->heads, lm, &job->rq.heads,
                                                      &job->rq.n_heads)
                            : QKV_OK;
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
    ablate_job job = {.a = a, .rq = {.mean = a->mode == 1, .resample = a->mode == 2,
                                     .draws = (int)a->draws, .seed = (uint64_t)a->seed,
                                     .together = a->together, .site = (qkv_site)a->site,
                                     .over = (explain_over)a->over, .scored = a->metric >= 0,
                                     .metric = a->metric >= 0 ? (explain_metric)a->metric
                                                              : EXPLAIN_METRIC_LOSS}};
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
