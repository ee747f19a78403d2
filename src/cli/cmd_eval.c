/* cmd_eval.c - `qkv eval`: a saved model on its task's held-out set. */
#include "cli.h"
#include "explain_cli.h"
#include "explore/eval_data.h"
#include "io/io.h"
#include "report.h"
#include "train/checkpoint.h"
#include "train/run.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

typedef struct {
    const char *model, *data, *per_example, *out;
    long threads;
    int dtype; /* TRAIN_DTYPE_OF_FILE or a qkv_dtype */
    bool json;
} eval_args;

static int eval_parse(int argc, char **argv, eval_args *a) {
    *a = (eval_args){.dtype = TRAIN_DTYPE_OF_FILE};
    cli_option options[] = {
        {"model", CLI_STRING, &a->model, .arg = "FILE",
         .help = "a model.safetensors, or the directory holding one"},
        {"dtype", CLI_CHOICE, &a->dtype, .choices = cli_dtype_names, .arg = "D",
         .help = "f32 or f64: evaluate in this precision (default: the model's own;\n"
                 "an f32 model runs in f64 exactly widened, an f64 one is never rounded)"},
        {"threads", CLI_INT, &a->threads, 1, QKV_MAX_THREADS, .arg = "N",
         .help = "OpenMP threads (default: $OMP_NUM_THREADS, else $SLURM_CPUS_PER_TASK,\n"
                 "else all cores)"},
        {"json", CLI_FLAG, &a->json, .help = "print one JSON object"},
        {"data", CLI_STRING, &a->data, .arg = "FILE",
         .help = "evaluate on FILE's examples instead of the held-out set: a data\n"
                 "file's model reads input<TAB>output lines, a task's model lines of\n"
                 "input tokens (docs/explain.md)"},
        {"per-example", CLI_STRING, &a->per_example, .arg = "FILE",
         .help = "with --data: one JSON line per example into FILE"},
        {"out", CLI_STRING, &a->out, .arg = "FILE",
         .help = "with --data: write its JSON object to FILE too"},
        CLI_NO_SELFTEST_ROW,
        {"help", CLI_HELP, .help = "show this help"},
        {0}};
    const cli_command cmd = {
        .name = "eval",
        .usage = "usage: qkv eval --model FILE [options]   (or qkv eval DIR)\n"
                 "Evaluates a saved model on its task's held-out set (rebuilt from the saved seed).\n"
                 "\n",
        .options = options,
        .column = 22,
        .epilog = "\nExit codes: 0 done, 2 bad option or input, 3 a file cannot be read or "
                  "written,\n4 the model file is corrupt or a line of the --data file is bad, 5 a "
                  "number is not\nfinite, 6 out of memory.\n",
        .operands = true};
    int first;
    int code = cli_parse_options(&cmd, argc, argv, &first);
    if (code != CLI_RUN) return code;
    if (!a->threads && !cli_default_threads(&a->threads)) return EXIT_USAGE;
    if (first < argc && (code = explain_cli_model("eval", a->model, argc, argv, first,
                                                  &a->model)) != CLI_RUN)
        return code;
    if ((a->per_example || a->out) && !a->data) {
        cli_error("eval: --%s needs --data FILE", a->per_example ? "per-example" : "out");
        return EXIT_USAGE;
    }
    if (!a->model) {
        cli_error("eval: which model? (qkv eval DIR, or --model FILE)");
        return EXIT_USAGE;
    }
    return CLI_RUN;
}

/* A column of the head table: the score, or "-" where it is undefined (NaN: induction with
 * one layer, a score no row of the file can show). */
static void print_score(int width, double v) {
    if (isnan(v)) printf("%*s", width, "-");
    else printf("%*.4f", width, v);
}

static void print_data_result(const loaded_model *lm, const eval_file *f,
                              const eval_data_result *r) {
    const qkv_model_config *c = &lm->model.cfg;
    printf("eval: %s, %d example%s, %lld position%s with a target\n", f->path, f->n,
           f->n == 1 ? "" : "s", (long long)r->score.counted, r->score.counted == 1 ? "" : "s");
    printf("  loss %.4f, accuracy %.2f%% (chance %.2f%%)\n", r->score.loss,
           100 * r->score.accuracy, 100 * r->chance);
    printf("  accuracy by position:");
    for (int i = 0; i < lm->target_len; i++)
        if (r->by_position[i].counted)
            printf(" %d: %.3f", i, (double)r->by_position[i].hits / r->by_position[i].counted);
    printf("\n  accuracy by input length:");
    for (int n = 1; n <= c->seq_len; n++)
        if (r->by_length[n].counted)
            printf(" %d: %.3f", n, (double)r->by_length[n].hits / r->by_length[n].counted);
    printf("\n  %-6s %9s %11s %10s %10s\n", "head", "entropy", "prev-token", "duplicate",
           "induction");
    for (int l = 0; l < c->layers; l++)
        for (int h = 0; h < c->heads; h++) {
            char name[32];
            snprintf(name, sizeof name, "%d.%d", l + 1, h + 1);
            printf("  %-6s", name);
            bool scored = h < EVAL_MAX_HEADS; /* as eval_data_json: training scores so many */
            print_score(10, r->entropy[l * c->heads + h]);
            print_score(12, scored ? r->heads.prev_token[l][h] : NAN);
            print_score(11, scored ? r->heads.duplicate[l][h] : NAN);
            print_score(11, scored ? r->heads.induction[l][h] : NAN);
            putchar('\n');
        }
}

/* eval --data FILE: the model on a file of examples. */
static int eval_data(loaded_model *lm, const eval_args *a, const char *path) {
    /* both outputs checked before the data is read or anything written; written together */
    const char *inputs[] = {path, a->data, lm->data ? lm->data->path : NULL, NULL};
    const cli_output outputs[] = {{"per-example", a->per_example}, {"out", a->out}, {0}};
    int code = cli_check_outputs("eval", outputs, inputs);
    if (code != EXIT_OK) return code;
    eval_file f;
    eval_data_result r = {0};
    atomic_file af = {0};
    qkv_status s = eval_file_read(&f, lm, a->data);
    if (s == QKV_OK && a->per_example) s = atomic_open(&af, a->per_example);
    if (s == QKV_OK) s = eval_data_run(lm, &f, a->per_example ? af.f : NULL, &r);
    cJSON *j = NULL;
    if (s == QKV_OK && !(j = eval_data_json(lm, &f, &r)))
        s = qkv_fail(QKV_ERR_NOMEM, "out of memory");
    if (s != QKV_OK) {
        if (af.f) atomic_abort(&af);
        cli_error("%s", qkv_last_error());
        code = cli_exit_for(s);
    } else if ((code = explain_cli_save_both(j, a->out, &af)) == EXIT_OK) {
        if (!a->json) {
            print_data_result(lm, &f, &r);
            char hint[512]; /* as plain eval's, over the file */
            loaded_model_hint(lm, &r.heads, hint, sizeof hint);
            cli_print_hint_text(hint, false);
        }
        code = explain_cli_print(j, a->json, a->out);
    }
    cJSON_Delete(j);
    eval_data_result_free(&r);
    eval_file_free(&f);
    return code;
}

static int eval_run(const eval_args *a) {
    char path[RUN_PATH_LEN];
    if (a->data) { /* an analysis of the loaded model */
        loaded_model lm;
        int code = explain_cli_load(a->model, a->dtype, a->threads, &lm, path, sizeof path);
        if (code != EXIT_OK) return code;
        code = eval_data(&lm, a, path);
        loaded_model_free(&lm);
        return code;
    }
    int code = cli_set_threads(a->threads);
    if (code != EXIT_OK) return code;
    if (!cli_model_path(a->model, path, sizeof path)) return EXIT_IO;
    bool json = a->json;
    trainer t;
    qkv_status s = trainer_load_as(&t, path, a->dtype);
    if (s != QKV_OK) {
        cli_error("%s", qkv_last_error());
        return cli_exit_for(s);
    }
    double t0 = run_files_now();
    eval_result r = trainer_evaluate(&t);
    double seconds = run_files_now() - t0;
    if (!isfinite(r.loss)) { /* a model whose forward overflows: no summary of NaNs */
        cli_error("eval: the held-out loss is not finite (%s): the model's forward overflows "
                  "(weights too large for its numbers)", isnan(r.loss) ? "NaN" : "Inf");
        trainer_free(&t);
        return EXIT_NUMERIC;
    }
    if (json)
        cli_print_result_json(&t, r, NULL, t.optim.step, seconds, "eval", false);
    else {
        char tail[64];
        snprintf(tail, sizeof tail, "after %" PRId64 " step%s", t.optim.step,
                 t.optim.step == 1 ? "" : "s");
        cli_print_summary(&t, &r, tail, false);
        cli_print_hint(&t, &r, NULL, false);
        cli_print_example(&t);
    }
    trainer_free(&t);
    return EXIT_OK;
}

int cmd_eval(int argc, char **argv, bool parse_only) {
    eval_args a;
    int code = eval_parse(argc, argv, &a);
    return code != CLI_RUN || parse_only ? code : eval_run(&a);
}
