/* cmd_grads.c - `qkv grads`: one batch and the gradient of every parameter, for study. */
#include "cli.h"
#include "train/checkpoint.h"
#include "train/grads.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char usage[] =
    "usage: qkv grads --model FILE --out FILE [options]\n"
    "Draws one training batch of the model's task (or of its --data file), runs forward and\n"
    "backward, and writes the batch (tokens, targets; lengths of a data file's padded inputs),\n"
    "the loss, the logits and the gradient of every parameter (grad.<name>) to a safetensors\n"
    "file.\n"
    "\n"
    "  --model FILE   a model.safetensors, or the directory holding one\n"
    "  --out FILE     the safetensors file to write\n"
    "  --seed S       seed of the batch (default 1)\n"
    "  --batch B      sequences in the batch (default 8)\n"
    "  --dtype D      f32 or f64: the precision of the pass and of the file's logits, loss and\n"
    "                 gradients (default: the model's own; an f32 model is widened exactly)\n"
    "  -h, --help     show this help\n";

typedef struct {
    const char *model, *out;
    uint64_t seed;
    long batch;
    int dtype; /* TRAIN_DTYPE_OF_FILE or a qkv_dtype */
} grads_args;

enum { OPT_MODEL = 256, OPT_OUT, OPT_SEED, OPT_BATCH, OPT_DTYPE };

static int grads_parse(int argc, char **argv, grads_args *a) {
    static const struct option opts[] = {{"model", required_argument, 0, OPT_MODEL},
                                         {"out", required_argument, 0, OPT_OUT},
                                         {"seed", required_argument, 0, OPT_SEED},
                                         {"batch", required_argument, 0, OPT_BATCH},
                                         {"dtype", required_argument, 0, OPT_DTYPE},
                                         {"help", no_argument, 0, CLI_OPT_HELP},
                                         {0, 0, 0, 0}};
    *a = (grads_args){.seed = 1, .batch = 8, .dtype = TRAIN_DTYPE_OF_FILE};
    qkv_dtype dt;
    cli_getopt_reset();
    for (int c; (c = getopt_long(argc, argv, ":h", opts, NULL)) != -1;) {
        bool ok = true;
        switch (c) {
        case OPT_MODEL: a->model = optarg; break;
        case OPT_OUT: a->out = optarg; break;
        case OPT_SEED: ok = cli_parse_u64("seed", optarg, &a->seed); break;
        case OPT_BATCH: ok = cli_parse_int("batch", optarg, 1, 4096, &a->batch); break;
        case OPT_DTYPE:
            if ((ok = cli_parse_dtype(optarg, &dt))) a->dtype = (int)dt;
            break;
        case 'h':
        case CLI_OPT_HELP: fputs(usage, stdout); return EXIT_OK;
        default: return cli_bad_option("grads", argv, c);
        }
        if (!ok) return EXIT_USAGE;
    }
    if (optind < argc) {
        cli_error("grads: unexpected argument '%s'", argv[optind]);
        return EXIT_USAGE;
    }
    if (!a->model || !a->out) {
        cli_error("grads: --model FILE and --out FILE are required");
        return EXIT_USAGE;
    }
    return CLI_RUN;
}

static int grads_run(const grads_args *a) {
    char path[1100];
    if (!cli_model_path(a->model, path, sizeof path)) return EXIT_IO;
    if (cli_output_clashes("grads: --out ", a->out, path)) return EXIT_USAGE;
    trainer t;
    qkv_status s = trainer_load_as(&t, path, a->dtype);
    if (s != QKV_OK) {
        cli_error("%s", qkv_last_error());
        return cli_exit_for(s);
    }
    batch_grads g;
    s = trainer_batch_grads(&t, a->seed, (int)a->batch, &g);
    if (s == QKV_OK) s = batch_grads_save(&g, &t, a->seed, path, a->out);
    int code = EXIT_OK;
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
