/* cmd_patch.c - `qkv patch`: activation patching, each head's output on a clean input copied
 * into the run on a corrupted one, exactly and by attribution (explore/explain.c). */
#include "cli.h"
#include "io/paths.h"
#include "explain_cli.h"
#include "explore/explain.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *model, *clean, *corrupt, *answer, *wrong, *out;
    long threads, position;
    int dtype, over, method;
    bool json;
} patch_args;

static const char *const overs[] = {"head", "head-position", NULL};
static const char *const methods[] = {"exact", "attribution", "both", NULL};

static int patch_parse(int argc, char **argv, patch_args *a) {
    *a = (patch_args){.dtype = TRAIN_DTYPE_OF_FILE, .position = -1, .method = 2};
    cli_option options[] = {
        {"model", CLI_STRING, &a->model, .arg = "FILE",
         .help = "a model.safetensors, or the directory holding one (or give it as DIR)"},
        {"clean", CLI_STRING, &a->clean, .arg = "\"...\"", .help = "the clean input's tokens"},
        {"corrupt", CLI_STRING, &a->corrupt, .arg = "\"...\"",
         .help = "the corrupted input's tokens (as many as --clean)"},
        {"answer", CLI_STRING, &a->answer, .arg = "TOKEN",
         .help = "the metric is logit[answer] - logit[wrong] (default: the clean\n"
                 "input's prediction)"},
        {"wrong", CLI_STRING, &a->wrong, .arg = "TOKEN",
         .help = "(default: the corrupted input's prediction)"},
        {"position", CLI_INT, &a->position, 0, QKV_MAX_SEQ_LEN - 1, .arg = "I",
         .help = "the position of the metric, from 0 (default: the last that had a\n"
                 "target in training)"},
        {"over", CLI_CHOICE, &a->over, .choices = overs, .arg = "W",
         .help = "head: each head at every position; head-position: each head at each\n"
                 "position (default head)"},
        {"method", CLI_CHOICE, &a->method, .choices = methods, .arg = "M",
         .help = "exact (one forward per head), attribution (one backward pass on the\n"
                 "corrupted input), or both side by side (default both)"},
        {"dtype", CLI_CHOICE, &a->dtype, .choices = cli_dtype_names, .arg = "D",
         .help = "f32 or f64 (default: the model's own)"},
        {"threads", CLI_INT, &a->threads, 1, QKV_MAX_THREADS, .arg = "N", .help = "OpenMP threads"},
        {"json", CLI_FLAG, &a->json, .help = "print one JSON object (docs/explain.md)"},
        {"out", CLI_STRING, &a->out, .arg = "FILE",
         .help = "write the same JSON object to FILE (e.g. RUN/patch.json for qkv plot)"},
        CLI_NO_SELFTEST_ROW,
        {"help", CLI_HELP, .help = "show this help"},
        {0}};
    const cli_command cmd = {
        .name = "patch",
        .usage = "usage: qkv patch DIR --clean \"...\" --corrupt \"...\" [options]\n"
                 "The share of the clean - corrupted difference of logit[answer] - logit[wrong] "
                 "that\neach head recovers when its clean output replaces its corrupted one "
                 "(1 all, 0 none).\n\n",
        .options = options,
        .column = 22,
        .epilog = "\nExit codes: 0 done, 2 bad option or input, 3 a file cannot be read or "
                  "written,\n4 the model file is corrupt, 6 out of memory.\n",
        .operands = true};
    int first;
    int code = cli_parse_options(&cmd, argc, argv, &first);
    if (code != CLI_RUN) return code;
    if (!a->threads && !cli_default_threads(&a->threads)) return EXIT_USAGE;
    if (!a->clean || !a->corrupt) {
        cli_error("patch: --clean and --corrupt are required");
        return EXIT_USAGE;
    }
    return explain_cli_model("patch", a->model, argc, argv, first, &a->model);
}

/* Words separated by spaces or tabs. */
static int count_words(const char *text) {
    int n = 0;
    for (const char *p = text + strspn(text, " \t"); *p; p += strspn(p, " \t"), n++)
        p += strcspn(p, " \t");
    return n;
}

/* The most likely class at position i of input `in`; -1 with *s set when the run fails. */
static int predicted(trainer *t, const explain_input *in, int i, qkv_status *s) {
    dla_result r;
    qkv_status st = explain_attribute(t, in, i, -1, &r);
    int token = r.token;
    explain_attribute_free(&r);
    if (st != QKV_OK) {
        *s = st;
        return -1;
    }
    return token;
}

static void print_table(const trainer *t, const explain_input *clean, const patch_result *r) {
    char pos[80], ans[32], wr[32];
    explain_position_label(t, clean, r->position, pos, sizeof pos);
    if (!explain_position_trained(t, clean, r->position)) /* named, never taken for a target */
        snprintf(pos + strlen(pos), sizeof pos - strlen(pos), " (no target in training)");
    trainer_token_label(t, r->answer, ans, sizeof ans);
    trainer_token_label(t, r->wrong, wr, sizeof wr);
    printf("patch: logit[%s] - logit[%s] at position %s: clean %.6g, corrupted %.6g\n", ans, wr,
           pos, r->clean, r->corrupt);
    printf("  share of the difference recovered by patching each head's clean output "
           "(1 all, 0 none)\n");
    printf("  %-6s %-10s %12s %12s\n", "head", "position", "exact", "attribution");
    for (int i = 0; i < r->n_rows; i++) {
        const patch_row *p = &r->rows[i];
        char name[32], at[48] = "all";
        snprintf(name, sizeof name, "%d.%d", p->layer + 1, p->head + 1);
        if (p->position >= 0) explain_position_label(t, clean, p->position, at, sizeof at);
        printf("  %-6s %-10s", name, at);
        if (isfinite(p->exact)) printf(" %12.6f", p->exact);
        else printf(" %12s", "-");
        if (isfinite(p->attribution)) printf(" %12.6f\n", p->attribution);
        else printf(" %12s\n", "-");
    }
    if (r->exact && r->attribution) {
        if (isfinite(r->agreement))
            printf("  agreement of exact and attribution (correlation): %.4f\n", r->agreement);
        else
            printf("  agreement of exact and attribution: undefined (a column is constant)\n");
    }
}

static int patch_run(const patch_args *a) {
    trainer t;
    char path[RUN_PATH_LEN];
    int code = explain_cli_load(a->model, a->dtype, a->threads, &t, path, sizeof path);
    if (code != EXIT_OK) return code;
    const char *inputs[] = {path, t.data ? t.data->path : NULL, NULL};
    explain_input *in = malloc(2 * sizeof *in);
    patch_result r = {.over_positions = a->over == 1, .exact = a->method != 1,
                      .attribution = a->method != 0};
    qkv_status s = QKV_OK;
    if ((code = cli_check_outputs("patch", (cli_output[]){{"out", a->out}, {0}}, inputs)) !=
        EXIT_OK)
        goto done;
    if (!in) {
        cli_error("patch: out of memory");
        code = EXIT_NOMEM;
        goto done;
    }
    if (count_words(a->clean) != count_words(a->corrupt)) {
        cli_error("patch: --clean has %d tokens and --corrupt %d: patching needs inputs of one "
                  "length", count_words(a->clean), count_words(a->corrupt));
        code = EXIT_USAGE;
        goto done;
    }
    if ((s = explain_read_input(&t, "--clean", a->clean, &in[0])) != QKV_OK ||
        (s = explain_read_input(&t, "--corrupt", a->corrupt, &in[1])) != QKV_OK)
        goto fail;
    r.position = a->position >= 0 ? (int)a->position : explain_default_position(&t, &in[0]);
    if (r.position < 0) {
        cli_error("patch: the clean input has no position with a target: give --position");
        code = EXIT_USAGE;
        goto done;
    }
    if ((s = explain_check_position(&t, &in[0], r.position)) != QKV_OK) goto fail;
    r.answer = a->answer ? explain_read_class(&t, "--answer", a->answer)
                         : predicted(&t, &in[0], r.position, &s);
    r.wrong = a->wrong ? explain_read_class(&t, "--wrong", a->wrong)
                       : predicted(&t, &in[1], r.position, &s);
    if (r.answer < 0 || r.wrong < 0) {
        if (s == QKV_OK) s = QKV_ERR_VALUE; /* explain_read_class's */
        goto fail;
    }
    if (r.answer == r.wrong) {
        char label[32];
        trainer_token_label(&t, r.answer, label, sizeof label);
        cli_error("patch: the answer and the wrong token are both '%s'%s: the metric would be 0",
                  label, a->answer && a->wrong ? "" : " (give --answer and --wrong)");
        code = EXIT_USAGE;
        goto done;
    }
    if ((s = explain_patch(&t, &in[0], &in[1], &r)) != QKV_OK) goto fail;
    cJSON *j = explain_patch_json(&t, &in[0], &in[1], &r);
    if (j) /* false: a position no training example of this length had a target at */
        cJSON_AddBoolToObject(j, "position_has_target",
                              explain_position_trained(&t, &in[0], r.position));
    if (!j) code = cli_exit_for(qkv_fail(QKV_ERR_NOMEM, "out of memory"));
    else if ((code = explain_cli_save(j, a->out)) == EXIT_OK) {
        if (!a->json) print_table(&t, &in[0], &r);
        code = explain_cli_print(j, a->json, a->out);
    }
    cJSON_Delete(j);
    goto done;
fail:
    cli_error("patch: %s", qkv_last_error());
    code = s == QKV_ERR_VALUE ? EXIT_USAGE : cli_exit_for(s);
done:
    explain_patch_free(&r);
    free(in);
    trainer_free(&t);
    return code;
}

int cmd_patch(int argc, char **argv, bool parse_only) {
    patch_args a;
    int code = patch_parse(argc, argv, &a);
    return code != CLI_RUN || parse_only ? code : patch_run(&a);
}
