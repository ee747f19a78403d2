/* cmd_patch.c - `qkv patch`: activation patching, a part of the forward on a clean input
 * copied into the run on a corrupted one, exactly and by attribution, for one pair or a set
 * of pairs; and path patching (explore/explain.c, explore/pairs.c). */
#include "cli.h"
#include "explain_cli.h"
#include "explore/explain.h"
#include "explore/pairs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *model, *clean, *corrupt, *answer, *wrong, *out, *pairs, *per_pair, *heads;
    long threads, position, seed;
    int dtype, site, over, method, corrupt_from, metric;
    bool json, path, together;
} patch_args;

static const char *const methods[] = {"exact", "attribution", "both", NULL};
static const char *const corruptions[] = {"shuffle", "resample", "other", NULL}; /* corrupt_kind */

static int patch_parse(int argc, char **argv, patch_args *a) {
    *a = (patch_args){.dtype = TRAIN_DTYPE_OF_FILE, .position = -1, .method = 2, .over = -1,
                      .corrupt_from = -1, .seed = 1, .metric = EXPLAIN_METRIC_LOGIT_DIFF};
    cli_option options[] = {
        {"model", CLI_STRING, &a->model, .arg = "FILE",
         .help = "a model.safetensors, or the directory holding one (or give it as DIR)"},
        {"clean", CLI_STRING, &a->clean, .arg = "\"...\"", .help = "the clean input's tokens"},
        {"corrupt", CLI_STRING, &a->corrupt, .arg = "\"...\"",
         .help = "the corrupted input's tokens (as many as --clean)"},
        {"pairs", CLI_STRING, &a->pairs, .arg = "FILE",
         .help = "a set of pairs instead: lines of clean, a tab, corrupt, and optionally\n"
                 "a tab and the answer, a tab and the wrong token; the metric is\n"
                 "averaged over the pairs first"},
        {"corrupt-from", CLI_CHOICE, &a->corrupt_from, .choices = corruptions, .arg = "HOW",
         .help = "pairs from the held-out examples, each corrupted: resample (an\n"
                 "induction model: the segment's first occurrence drawn again),\n"
                 "shuffle (a lookup model: the pairs' values dealt to other keys) or\n"
                 "other (any model, a data file's too: another held-out example of\n"
                 "the same length whose answer differs, drawn at random)"},
        {"seed", CLI_INT, &a->seed, 0, INT32_MAX, .arg = "N",
         .help = "the seed of --corrupt-from's draws (default 1)"},
        {"answer", CLI_STRING, &a->answer, .arg = "TOKEN",
         .help = "the metric is logit[answer] - logit[wrong] (default: the clean\n"
                 "input's prediction)"},
        {"wrong", CLI_STRING, &a->wrong, .arg = "TOKEN",
         .help = "(default: the corrupted input's prediction)"},
        {"metric", CLI_CHOICE, &a->metric, .choices = explain_metric_names, .arg = "M",
         .help = "what is measured at the position: logit-diff (the default), loss\n"
                 "(-log p(answer)), prob (p(answer)) or kl (KL divergence from the\n"
                 "clean run's distribution, nats)"},
        {"position", CLI_INT, &a->position, 0, QKV_MAX_SEQ_LEN - 1, .arg = "I",
         .help = "the position of the metric, from 0 (default: the last that had a\n"
                 "target in training)"},
        EXPLAIN_CLI_SITE_ROWS("patched", &a->site, &a->over),
        {"heads", CLI_STRING, &a->heads, .arg = "L.H,...",
         .help = "only these heads' rows (layers and heads from 1), e.g. 2.1,2.2"},
        {"together", CLI_FLAG, &a->together,
         .help = "also patch the rows of --heads all at once: the set's share"},
        {"path", CLI_FLAG, &a->path,
         .help = "path patching: each head's (and MLP's) clean output carried only to\n"
                 "one later head's q, k or v, MLP's input, or the logits, every other\n"
                 "path frozen"},
        {"method", CLI_CHOICE, &a->method, .choices = methods, .arg = "M",
         .help = "exact (one forward per row), attribution (one backward pass on the\n"
                 "corrupted input), or both side by side (default both)"},
        {"dtype", CLI_CHOICE, &a->dtype, .choices = cli_dtype_names, .arg = "D",
         .help = "f32 or f64 (default: the model's own)"},
        {"threads", CLI_INT, &a->threads, 1, QKV_MAX_THREADS, .arg = "N", .help = "OpenMP threads"},
        {"json", CLI_FLAG, &a->json, .help = "print one JSON object (docs/explain.md)"},
        {"out", CLI_STRING, &a->out, .arg = "FILE",
         .help = "write the same JSON object to FILE (e.g. RUN/patch.json for qkv plot)"},
        {"per-pair", CLI_STRING, &a->per_pair, .arg = "FILE",
         .help = "write each pair's own clean, corrupt and rows to FILE, one JSON\n"
                 "object a line"},
        CLI_NO_SELFTEST_ROW,
        {"help", CLI_HELP, .help = "show this help"},
        {0}};
    const cli_command cmd = {
        .name = "patch",
        .usage = "usage: qkv patch DIR --clean \"...\" --corrupt \"...\" [options]\n"
                 "       qkv patch DIR --pairs FILE | --corrupt-from HOW [options]\n"
                 "The share of the clean - corrupted difference of logit[answer] - logit[wrong] "
                 "that\neach head (or site, or path) recovers when its clean value replaces its "
                 "corrupted\none (1 all, 0 none); or of the answer's loss or probability, or the "
                 "KL divergence\nfrom the clean run (--metric).\n\n",
        .options = options,
        .column = 22,
        .epilog = "\nExit codes: 0 done, 2 bad option or input, 3 a file cannot be read or "
                  "written,\n4 the model file is corrupt or a line of the --pairs file is bad, 5 a "
                  "number is not\nfinite, 6 out of memory.\n",
        .operands = true};
    int first;
    int code = cli_parse_options(&cmd, argc, argv, &first);
    if (code != CLI_RUN) return code;
    if (!a->threads && !cli_default_threads(&a->threads)) return EXIT_USAGE;
    int sources = (a->clean || a->corrupt) + (a->pairs != NULL) + (a->corrupt_from >= 0);
    if (sources != 1) {
        cli_error("patch: give the inputs one way: --clean and --corrupt, --pairs FILE, or "
                  "--corrupt-from HOW");
        return EXIT_USAGE;
    }
    if ((a->clean || a->corrupt) && !(a->clean && a->corrupt)) {
        cli_error("patch: --clean and --corrupt must be given together");
        return EXIT_USAGE;
    }
    if ((a->answer || a->wrong) && !a->clean) {
        cli_error("patch: --%s is for one pair; a pairs file gives each pair's in its third "
                  "and fourth fields", a->answer ? "answer" : "wrong");
        return EXIT_USAGE;
    }
    if (cli_option_given(&cmd, "seed") && a->corrupt_from < 0) {
        cli_error("patch: --seed draws --corrupt-from's corrupted inputs: give --corrupt-from");
        return EXIT_USAGE;
    }
    if (a->path && (cli_option_given(&cmd, "site") || a->over >= 0)) {
        cli_error("patch: --path carries each head's output (z) along every path: it takes "
                  "no --site or --over");
        return EXIT_USAGE;
    }
    if (a->together && !a->heads) {
        cli_error("patch: --together patches the heads of --heads at once: give --heads");
        return EXIT_USAGE;
    }
    if (a->heads && a->path) {
        cli_error("patch: --path lists every path: it takes no --heads or --together");
        return EXIT_USAGE;
    }
    if (a->heads && !explain_site_has_heads((qkv_site)a->site)) {
        cli_error("patch: --heads names heads; --site %s has none: give --site z, q, k, v or "
                  "pattern", explain_site_names[a->site]);
        return EXIT_USAGE;
    }
    if (a->wrong && a->metric != EXPLAIN_METRIC_LOGIT_DIFF) {
        cli_error("patch: --wrong is the logit difference's second token; --metric %s reads %s",
                  explain_metric_names[a->metric],
                  a->metric == EXPLAIN_METRIC_KL ? "the whole distribution" : "the answer alone");
        return EXIT_USAGE;
    }
    if (a->answer && a->metric == EXPLAIN_METRIC_KL) {
        cli_error("patch: --metric kl compares the whole distribution with the clean run's: "
                  "it reads no --answer");
        return EXIT_USAGE;
    }
    if (a->over < 0) a->over = (int)explain_default_over((qkv_site)a->site);
    return explain_cli_model("patch", a->model, argc, argv, first, &a->model);
}

/* Words separated by spaces or tabs. */
static int count_words(const char *text) {
    int n = 0;
    for (const char *p = text + strspn(text, " \t"); *p; p += strspn(p, " \t"), n++)
        p += strcspn(p, " \t");
    return n;
}

/* The one pair of --clean and --corrupt as a set: in[0], in[1] read, the metric's position,
 * answer and wrong token (given, or the predictions). */
static qkv_status one_pair(loaded_model *lm, const patch_args *a, explain_input *in, pair_set *p) {
    memset(p, 0, sizeof *p);
    if (count_words(a->clean) != count_words(a->corrupt))
        return qkv_fail(QKV_ERR_VALUE, "--clean has %d tokens and --corrupt %d: patching needs "
                        "inputs of one length", count_words(a->clean), count_words(a->corrupt));
    qkv_status s;
    if ((s = explain_read_input(lm, "--clean", a->clean, &in[0])) != QKV_OK ||
        (s = explain_read_input(lm, "--corrupt", a->corrupt, &in[1])) != QKV_OK)
        return s;
    int T = lm->model.cfg.seq_len;
    p->clean = malloc((size_t)T * sizeof *p->clean);
    p->corrupt = malloc((size_t)T * sizeof *p->corrupt);
    p->metric = malloc(sizeof *p->metric);
    if (!p->clean || !p->corrupt || !p->metric) return qkv_fail(QKV_ERR_NOMEM, "out of memory");
    memcpy(p->clean, in[0].tokens, (size_t)T * sizeof *p->clean);
    memcpy(p->corrupt, in[1].tokens, (size_t)T * sizeof *p->corrupt);
    p->clean_len = &in[0].len, p->corrupt_len = &in[1].len; /* not owned: see patch_run */
    p->n = 1, p->keys = in[0].n;
    p->positions = lm->model.cfg.target_len ? lm->target_len : in[0].n;
    patch_metric *m = p->metric;
    m->position = a->position >= 0 ? (int)a->position : explain_default_position(lm, &in[0]);
    if (m->position < 0)
        return qkv_fail(QKV_ERR_VALUE, "the clean input has no position with a target: give "
                        "--position");
    if ((s = explain_check_position(lm, &in[0], m->position)) != QKV_OK) return s;
    m->answer = a->answer ? explain_read_class(lm, "--answer", a->answer) : -1;
    m->wrong = a->wrong ? explain_read_class(lm, "--wrong", a->wrong) : -1;
    if ((a->answer && m->answer < 0) || (a->wrong && m->wrong < 0))
        return QKV_ERR_VALUE; /* explain_read_class's */
    if ((s = explain_fill_predictions(lm, p->clean, p->corrupt, lm->data ? p->clean_len : NULL,
                                      lm->data ? p->corrupt_len : NULL, 1, m, NULL, NULL)) !=
        QKV_OK)
        return s;
    if (m->answer == m->wrong && a->metric == EXPLAIN_METRIC_LOGIT_DIFF) {
        char label[32];
        loaded_model_class_label(lm, m->answer, label, sizeof label);
        return qkv_fail(QKV_ERR_VALUE, "the answer and the wrong token are both '%s'%s: the "
                        "metric would be 0", label,
                        a->answer && a->wrong ? "" : " (give another --position, or --answer "
                                                     "and --wrong)");
    }
    return QKV_OK;
}

static void print_share(double v) {
    if (isfinite(v)) printf(" %12.6f", v);
    else printf(" %12s", "-");
}

/* Why --corrupt-from left examples out. */
static const char *skipped_why(const pair_set *p) {
    return p->other ? "no other example of its length has another answer there"
                    : "the model predicts the answer on the corrupted input too";
}

static void print_table(const loaded_model *lm, const explain_input *clean, const pair_set *p,
                        const patch_result *r) {
    char pos[80], ans[32], wr[32];
    const patch_metric *m = &p->metric[0];
    loaded_model_class_label(lm, m->answer, ans, sizeof ans);
    loaded_model_class_label(lm, m->wrong, wr, sizeof wr);
    char what[96]; /* the metric in words (the logit difference's: as before) */
    if (r->metric == EXPLAIN_METRIC_LOSS)
        snprintf(what, sizeof what, "the loss (-log p) of '%s'", ans);
    else if (r->metric == EXPLAIN_METRIC_PROB)
        snprintf(what, sizeof what, "the probability of '%s'", ans);
    else snprintf(what, sizeof what, "KL(clean || run) in nats");
    if (clean && r->metric != EXPLAIN_METRIC_LOGIT_DIFF) {
        explain_position_label(lm, clean, m->position, pos, sizeof pos);
        if (!explain_position_trained(lm, clean, m->position))
            snprintf(pos + strlen(pos), sizeof pos - strlen(pos), " (no target in training)");
        printf("patch: %s at position %s: clean %.6g, corrupted %.6g\n", what, pos, r->clean,
               r->corrupt);
    } else if (clean) {
        explain_position_label(lm, clean, m->position, pos, sizeof pos);
        if (!explain_position_trained(lm, clean, m->position)) /* named, never taken for one */
            snprintf(pos + strlen(pos), sizeof pos - strlen(pos), " (no target in training)");
        printf("patch: logit[%s] - logit[%s] at position %s: clean %.6g, corrupted %.6g\n", ans,
               wr, pos, r->clean, r->corrupt);
    } else if (r->metric != EXPLAIN_METRIC_LOGIT_DIFF) {
        char first[64] = "";
        if (r->metric != EXPLAIN_METRIC_KL) snprintf(first, sizeof first, ": of '%s'", ans);
        printf("patch: %s over %d pair%s (the first%s at position %d): mean clean %.6g, mean "
               "corrupted %.6g\n", r->metric == EXPLAIN_METRIC_LOSS ? "the answer's loss (-log p)"
                                   : r->metric == EXPLAIN_METRIC_PROB ? "the answer's probability"
                                                                      : what,
               p->n, p->n == 1 ? "" : "s", first, m->position, r->clean, r->corrupt);
        if (p->skipped)
            printf("  (%d held-out examples left out: %s)\n", p->skipped, skipped_why(p));
    } else {
        printf("patch: logit[answer] - logit[wrong] over %d pair%s (the first: logit[%s] - "
               "logit[%s] at position %d): mean clean %.6g, mean corrupted %.6g\n", p->n,
               p->n == 1 ? "" : "s", ans, wr, m->position, r->clean, r->corrupt);
        if (p->skipped)
            printf("  (%d held-out examples left out: %s)\n", p->skipped, skipped_why(p));
    }
    if (r->paths) {
        printf("  share recovered when only the path from the sender carries its clean output "
               "(1 all, 0 none)\n");
        int via_w = lm->model.cfg.mlp > 0 ? 7 : 4; /* "mlp-pre" */
        printf("  %-6s %-8s %-*s %12s %12s\n", "sender", "receiver", via_w, "via", "exact",
               "attribution");
        for (int i = 0; i < r->n_paths; i++) {
            const patch_path *q = &r->path[i];
            char s[32], rc[32] = "logits";
            /* a head "L.H", an MLP "mlp L" (as the JSON names them) */
            if (q->sender_head >= 0)
                snprintf(s, sizeof s, "%d.%d", q->sender_layer + 1, q->sender_head + 1);
            else snprintf(s, sizeof s, "mlp %d", q->sender_layer + 1);
            if (q->receiver_layer >= 0 && q->receiver_head >= 0)
                snprintf(rc, sizeof rc, "%d.%d", q->receiver_layer + 1, q->receiver_head + 1);
            else if (q->receiver_layer >= 0)
                snprintf(rc, sizeof rc, "mlp %d", q->receiver_layer + 1);
            printf("  %-6s %-8s %-*s", s, rc, via_w,
                   q->receiver_layer >= 0 ? explain_site_names[q->via] : "-");
            print_share(q->exact);
            print_share(q->attribution);
            printf("\n");
        }
    } else {
        const char *unit = r->over == EXPLAIN_OVER_NEURON ||
                                   r->over == EXPLAIN_OVER_NEURON_POSITION ? "neuron"
                           : r->site == QKV_SITE_LN_SCALE              ? "LayerNorm"
                           : explain_site_has_heads(r->site)           ? "head"
                                                                       : "layer";
        printf("  share of the difference recovered by patching each %s's clean %s (1 all, "
               "0 none)\n", unit, explain_site_names[r->site]);
        printf("  %-9s %-10s %-6s %12s %12s\n", unit, "position", "key", "exact", "attribution");
        for (int i = 0; i < r->n_rows; i++) {
            const explain_spot *s = &r->rows[i].spot;
            char name[32], at[48] = "all", key[16] = "all";
            if (s->head < 0) snprintf(name, sizeof name, "%d", s->layer + 1);
            else snprintf(name, sizeof name, "%d.%d", s->layer + 1, s->head + 1);
            size_t end = strlen(name);
            if (s->neuron >= 0 && (s->site == QKV_SITE_MLP_PRE || s->site == QKV_SITE_MLP_POST))
                snprintf(name + end, sizeof name - end, " n%d", s->neuron);
            if (s->site == QKV_SITE_LN_SCALE) /* "2 attn", "2 mlp", "2 final" */
                snprintf(name + end, sizeof name - end, " %s", explain_ln_names[s->ln]);
            if (s->position >= 0) {
                if (clean) explain_position_label(lm, clean, s->position, at, sizeof at);
                else snprintf(at, sizeof at, "%d", s->position);
            }
            if (s->key_position >= 0) snprintf(key, sizeof key, "%d", s->key_position);
            else if (s->site != QKV_SITE_K && s->site != QKV_SITE_V && s->site != QKV_SITE_PATTERN)
                snprintf(key, sizeof key, "-");
            printf("  %-9s %-10s %-6s", name, at, key);
            print_share(r->rows[i].exact);
            print_share(r->rows[i].attribution);
            printf("\n");
        }
        if (r->together) {
            printf("  %-9s %-10s %-6s", "together", "", "");
            print_share(r->all.exact);
            print_share(r->all.attribution);
            printf("   (every row above at once)\n");
        }
    }
    if (r->exact && r->attribution) {
        if (isfinite(r->agreement))
            printf("  agreement of exact and attribution (correlation): %.4f\n", r->agreement);
        else
            printf("  agreement of exact and attribution: undefined (a column is constant)\n");
    }
}

/* Each pair's own numbers, a JSON object a line, into af; of --corrupt-from other, which
 * held-out examples (from 1) it pairs. */
static qkv_status write_per_pair(const patch_result *r, const pair_set *p, atomic_file *af) {
    for (int i = 0; i < r->n_pairs; i++) {
        cJSON *o = explain_patch_pair_json(r, i);
        if (o && p->partner) {
            cJSON_AddNumberToObject(o, "example", (double)p->line[i]);
            cJSON_AddNumberToObject(o, "partner", (double)p->partner[i]);
        }
        qkv_status s = explain_json_line(af->f, o, "--per-pair's lines");
        if (s != QKV_OK) return s;
    }
    return QKV_OK;
}

/* One run of the command: its options, inputs, pairs, result and --per-pair's file
 * (explain_cli_run's state). */
typedef struct {
    const patch_args *a;
    explain_input *in; /* --clean and --corrupt's, or NULL */
    pair_set pairs;
    patch_result r;
    explain_head *heads; /* --heads's */
    atomic_file per_pair;
} patch_job;

static qkv_status patch_compute(loaded_model *lm, void *state) {
    patch_job *job = state;
    const patch_args *a = job->a;
    qkv_status s = QKV_OK;
    if (a->clean && !job->in) return qkv_fail(QKV_ERR_NOMEM, "out of memory");
    if (a->heads && (s = explain_cli_parse_heads(a->heads, lm, &job->heads, &job->r.n_heads)) !=
                        QKV_OK)
        return s;
    job->r.heads = job->heads;
    if (!a->path && (s = explain_check_site(lm, job->r.site, job->r.over)) != QKV_OK) return s;
    if (a->clean) s = one_pair(lm, a, job->in, &job->pairs);
    else if (a->pairs)
        s = pair_set_read(&job->pairs, lm, a->pairs, (int)a->position, job->r.metric);
    else s = pair_set_corrupt_from(&job->pairs, lm, (corrupt_kind)a->corrupt_from,
                                   (int)a->position, (uint64_t)a->seed);
    if (s != QKV_OK) return s;
    job->r.left_out = job->pairs.skipped;
    patch_pairs view = pair_set_view(&job->pairs, lm);
    if ((s = explain_patch(lm, &view, &job->r)) != QKV_OK) return s;
    if (a->per_pair && (s = atomic_open(&job->per_pair, a->per_pair)) == QKV_OK)
        s = write_per_pair(&job->r, &job->pairs, &job->per_pair);
    return s;
}

static cJSON *patch_json(const loaded_model *lm, void *state) {
    patch_job *job = state;
    const patch_args *a = job->a;
    const explain_input *in = job->in;
    const char *source = a->pairs              ? a->pairs
                         : a->corrupt_from >= 0 ? corruptions[a->corrupt_from]
                                                : NULL; /* --clean and --corrupt: one pair */
    cJSON *j = explain_patch_json(lm, in ? &in[0] : NULL, in ? &in[1] : NULL,
                                  &job->pairs.metric[0], source, &job->r);
    if (j && in) /* false: a position no training example of this length had a target at */
        cJSON_AddBoolToObject(j, "position_has_target",
                              explain_position_trained(lm, &in[0], job->pairs.metric[0].position));
    return j;
}

static qkv_status patch_table(const loaded_model *lm, void *state) {
    patch_job *job = state;
    print_table(lm, job->in ? &job->in[0] : NULL, &job->pairs, &job->r);
    return QKV_OK;
}

static int patch_run(const patch_args *a) {
    patch_job job = {.a = a, .in = a->clean ? malloc(2 * sizeof *job.in) : NULL,
                     .r = {.site = (qkv_site)a->site, .over = (explain_over)a->over,
                           .paths = a->path, .exact = a->method != 1,
                           .attribution = a->method != 0, .metric = (explain_metric)a->metric,
                           .together = a->together}};
    const cli_output outputs[] = {{"per-pair", a->per_pair}, {"out", a->out}, {0}};
    int code = explain_cli_run(&(explain_cli_job){
        .who = "patch", .model = a->model, .out = a->out, .input = a->pairs, .outputs = outputs,
        .second = &job.per_pair, .dtype = a->dtype, .threads = a->threads, .print_json = a->json,
        .run = patch_compute, .json = patch_json, .table = patch_table, .state = &job});
    if (a->clean) job.pairs.clean_len = job.pairs.corrupt_len = NULL; /* in[]'s */
    pair_set_free(&job.pairs);
    explain_patch_free(&job.r);
    free(job.in), free(job.heads);
    return code;
}

int cmd_patch(int argc, char **argv, bool parse_only) {
    patch_args a;
    int code = patch_parse(argc, argv, &a);
    return code != CLI_RUN || parse_only ? code : patch_run(&a);
}
