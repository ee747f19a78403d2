/* cmd_grads.c - `qkv grads`: one batch and the gradient of every parameter, for study. */
#include "cli.h"
#include "explain_cli.h"
#include "io/io.h"
#include "train/checkpoint.h"
#include "train/grads.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>


typedef struct {
    const char *model, *out;
    uint64_t seed;
    long batch;
    int dtype; /* TRAIN_DTYPE_OF_FILE or a qkv_dtype */
} grads_args;

static int grads_parse(int argc, char **argv, grads_args *a) {
    *a = (grads_args){.seed = 1, .batch = 8, .dtype = TRAIN_DTYPE_OF_FILE};
    cli_option options[] = {
        {"model", CLI_STRING, &a->model, .arg = "FILE",
         .help = "a model.safetensors, or the directory holding one"},
        {"out", CLI_STRING, &a->out, .arg = "FILE", .help = "the safetensors file to write"},
        {"seed", CLI_U64, &a->seed, .arg = "S", .help = "seed of the batch (default 1)"},
        {"batch", CLI_INT, &a->batch, 1, 4096, .arg = "B",
         .help = "sequences in the batch (default 8)"},
        {"dtype", CLI_CHOICE, &a->dtype, .choices = cli_dtype_names, .arg = "D",
         .help = "f32 or f64: the precision of the pass and of the file's logits, loss and\n"
                 "gradients (default: the model's own; an f32 model is widened exactly)"},
        CLI_NO_SELFTEST_ROW,
        {"help", CLI_HELP, .help = "show this help"},
        {0}};
    const cli_command cmd = {
        .name = "grads",
        .usage = "usage: qkv grads DIR --out FILE [options]   (or --model FILE)\n"
                 "Draws one training batch of the model's task (or of its --data file), runs forward and\n"
                 "backward, and writes the batch (tokens, targets; lengths of a data file's padded inputs),\n"
                 "the loss, the logits and the gradient of every parameter (grad.<name>) to a safetensors\n"
                 "file.\n"
                 "\n",
        .options = options,
        .column = 17,
        .operands = true};
    int first;
    int code = cli_parse_options(&cmd, argc, argv, &first);
    if (code != CLI_RUN) return code;
    if ((code = explain_cli_model("grads", a->model, argc, argv, first, &a->model)) != CLI_RUN)
        return code;
    if (!a->out) {
        cli_error("grads: --out FILE is required");
        return EXIT_USAGE;
    }
    return CLI_RUN;
}

static int grads_run(const grads_args *a) {
    cli_set_threads(0); /* as many threads as can start: OpenMP's own failure would exit 1 */
    char path[RUN_PATH_LEN];
    if (!cli_model_path(a->model, path, sizeof path)) return EXIT_IO;
    int code = cli_check_outputs("grads", (cli_output[]){{"out", a->out}, {0}},
                                 (const char *[]){path, NULL});
    if (code != EXIT_OK) return code;
    io_protect(path); /* and the files it names, as they are loaded */
    trainer t;
    qkv_status s = trainer_load_as(&t, path, a->dtype);
    if (s != QKV_OK) {
        cli_error("%s", qkv_last_error());
        return cli_exit_for(s);
    }
    batch_grads g;
    s = trainer_batch_grads(&t, a->seed, (int)a->batch, &g);
    if (s == QKV_OK) s = batch_grads_save(&g, &t, a->seed, path, a->out);
    code = EXIT_OK;
    if (s != QKV_OK) {
        cli_error("%s", qkv_last_error());
        code = cli_exit_for(s);
    } else {
        printf("wrote %s: batch %d x %d, loss %.6f, %d parameter gradients\n", a->out, g.batch,
               t.cfg.task.seq_len, qkv_get(g.loss, 0), t.model.nparams);
    }
    batch_grads_free(&g);
    trainer_free(&t);
    return code;
}

int cmd_grads(int argc, char **argv, bool parse_only) {
    grads_args a;
    int code = grads_parse(argc, argv, &a);
    return code != CLI_RUN || parse_only ? code : grads_run(&a);
}
