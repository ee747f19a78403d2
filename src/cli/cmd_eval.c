/* cmd_eval.c - `qkv eval`: a saved model on its task's held-out set. */
#include "cli.h"
#include "report.h"
#include "train/checkpoint.h"
#include "train/run.h"

#include <inttypes.h>
#include <stdio.h>

typedef struct {
    const char *model;
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
        {"help", CLI_HELP, .help = "show this help"},
        {0}};
    const cli_command cmd = {
        .name = "eval",
        .usage = "usage: qkv eval --model FILE [options]\n"
                 "Evaluates a saved model on its task's held-out set (rebuilt from the saved seed).\n"
                 "\n",
        .options = options,
        .column = 22};
    int code = cli_parse_options(&cmd, argc, argv, NULL);
    if (code != CLI_RUN) return code;
    if (!a->threads && !cli_default_threads(&a->threads)) return EXIT_USAGE;
    if (!a->model) {
        cli_error("eval: --model FILE is required");
        return EXIT_USAGE;
    }
    return CLI_RUN;
}

static int eval_run(const eval_args *a) {
    int code = cli_set_threads(a->threads);
    if (code != EXIT_OK) return code;
    char path[1100];
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
    if (json)
        cli_print_result_json(&t, r, NULL, t.optim.step, seconds, "eval", false);
    else {
        char tail[64];
        snprintf(tail, sizeof tail, "after %" PRId64 " steps", t.optim.step);
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
