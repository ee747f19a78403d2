/* cmd_ablate.c - `qkv ablate`: each head's output removed in turn, the held-out loss and
 * accuracy without it (explore/explain.c). */
#include "cli.h"
#include "io/paths.h"
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

/* One head of --heads, checked against the model and the heads before it: false after one
 * line. `seen` marks the heads listed so far, by layer then head. */
static bool add_head(const char *item, const qkv_model_config *c, unsigned char *seen,
                     ablate_request *rq) {
    char text[48];
    uint64_t lv, hv;
    snprintf(text, sizeof text, "%s", item);
    if (strlen(item) >= sizeof text || !read_head(text, &lv, &hv)) {
        cli_error("--heads: '%.40s' is not LAYER.HEAD (e.g. 2.1)", item);
        return false;
    }
    int l = lv > INT_MAX ? 0 : (int)lv, h = hv > INT_MAX ? 0 : (int)hv; /* 0: none such */
    if (l < 1 || l > c->layers || h < 1 || h > c->heads) {
        cli_error("--heads: head %s does not exist: the model has %d layer%s of %d head%s", item,
                  c->layers, c->layers == 1 ? "" : "s", c->heads, c->heads == 1 ? "" : "s");
        return false;
    }
    if (seen[(size_t)(l - 1) * c->heads + (h - 1)]++) {
        cli_error("--heads: head %d.%d is listed twice (once as '%s')", l, h, item);
        return false;
    }
    rq->heads[rq->n_heads++] = (explain_head){l - 1, h - 1};
    return true;
}

/* "2.1,2.2" -> heads (0-based), checked against the model. */
static bool parse_heads(const char *text, const loaded_model *lm, ablate_request *rq) {
    const qkv_model_config *c = &lm->model.cfg;
    if (!*text) {
        cli_error("--heads: no head given");
        return false;
    }
    /* each head at most once (a second listing is refused): at most every head */
    unsigned char *seen = calloc((size_t)c->layers * c->heads, 1);
    rq->heads = malloc((size_t)c->layers * c->heads * sizeof *rq->heads);
    char *copy = strdup(text);
    bool ok = seen && copy && rq->heads;
    if (!ok) cli_error("--heads: out of memory");
    /* every item between commas, the empty ones too ("1.1," and "1.1,,2.1" are refused) */
    for (char *item = copy, *next = NULL; ok && item; item = next) {
        next = strchr(item, ',');
        if (next) *next++ = '\0';
        ok = add_head(item, c, seen, rq);
    }
    free(copy);
    free(seen);
    return ok;
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

static int ablate_run(const ablate_args *a) {
    loaded_model lm;
    char path[RUN_PATH_LEN];
    int code = explain_cli_load(a->model, a->dtype, a->threads, &lm, path, sizeof path);
    if (code != EXIT_OK) return code;
    const char *inputs[4] = {path, NULL, NULL, NULL}; /* the model, its data file, --data */
    int k = 1;
    if (lm.data) inputs[k++] = lm.data->path;
    if (a->data) inputs[k++] = a->data;
    eval_file file = {0};
    ablate_request rq = {.mean = a->mode == 1, .together = a->together,
                         .site = (qkv_site)a->site, .over = (explain_over)a->over};
    ablate_result *r = calloc(1, sizeof *r);
    code = cli_check_outputs("ablate", (cli_output[]){{"out", a->out}, {0}}, inputs);
    if (code == EXIT_OK && !r) {
        cli_error("ablate: out of memory");
        code = EXIT_NOMEM;
    }
    if (code == EXIT_OK && a->heads && !parse_heads(a->heads, &lm, &rq)) code = EXIT_USAGE;
    if (code == EXIT_OK && explain_check_site(&lm, rq.site, rq.over) != QKV_OK) {
        cli_error("ablate: %s", qkv_last_error());
        code = EXIT_USAGE;
    }
    if (code == EXIT_OK) {
        example_set set = loaded_model_heldout(&lm);
        qkv_status s = a->data ? eval_file_read(&file, &lm, a->data) : QKV_OK;
        if (a->data && s == QKV_OK)
            set = (example_set){file.n, file.x, file.y, lm.data ? file.len : NULL};
        if (s == QKV_OK) s = explain_ablate(&lm, &set, &rq, r);
        if (s != QKV_OK) {
            cli_error("%s", qkv_last_error());
            code = cli_exit_for(s);
        }
    }
    if (code == EXIT_OK) {
        cJSON *j = explain_ablate_json(&lm, &rq, r, a->data);
        if (!j) code = cli_exit_for(qkv_fail(QKV_ERR_NOMEM, "out of memory"));
        else if ((code = explain_cli_save(j, a->out)) == EXIT_OK) {
            if (!a->json) print_table(&lm, &rq, r, a->data);
            code = explain_cli_print(j, a->json, a->out);
        }
        cJSON_Delete(j);
    }
    eval_file_free(&file);
    if (r) explain_ablate_free(r);
    free(r);
    free(rq.heads);
    loaded_model_free(&lm);
    return code;
}

int cmd_ablate(int argc, char **argv, bool parse_only) {
    ablate_args a;
    int code = ablate_parse(argc, argv, &a);
    return code != CLI_RUN || parse_only ? code : ablate_run(&a);
}
