/* cmd_grads.c - `qkv grads`: one batch and the gradient of every parameter, for study. */
#include "cli.h"
#include "train/trainer.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "engine/internal.h"

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
        {"help", CLI_HELP, .help = "show this help"},
        {0}};
    const cli_command cmd = {
        .name = "grads",
        .usage = "usage: qkv grads --model FILE --out FILE [options]\n"
                 "Draws one training batch of the model's task, runs forward and backward, and writes the\n"
                 "batch (tokens, targets), the loss, the logits and the gradient of every parameter\n"
                 "(grad.<name>) to a safetensors file.\n"
                 "\n",
        .options = options,
        .column = 17};
    int code = cli_parse_options(&cmd, argc, argv, NULL);
    if (code != CLI_RUN) return code;
    if (!a->model || !a->out) {
        cli_error("grads: --model FILE and --out FILE are required");
        return EXIT_USAGE;
    }
    return CLI_RUN;
}

static int grads_run(const grads_args *a) {
    const char *model = a->model, *out = a->out;
    uint64_t seed = a->seed;
    long batch = a->batch;
    char path[1100];
    if (!cli_model_path(model, path, sizeof path)) return EXIT_IO;
    if (cli_output_clashes("grads: --out ", out, path)) return EXIT_USAGE;
    trainer t;
    qkv_status s = trainer_load_as(&t, path, a->dtype);
    if (s != QKV_OK) {
        cli_error("%s", qkv_last_error());
        return cli_exit_for(s);
    }
    if (t.data || t.model.cfg.target_len) {
        cli_error("grads: %s: a model of a data file or an encoder-decoder task (%s); qkv grads "
                  "draws batches of the built-in self-attention tasks only", path,
                  qkv_task_name(t.cfg.task.kind));
        trainer_free(&t);
        return EXIT_USAGE;
    }
    int T = t.cfg.task.seq_len, B = (int)batch;
    const char *what;
    double need = qkv_model_step_bytes(&t.model.cfg, B), have = memory_limit(&what);
    if (need > have / 2) {
        cli_error("grads: a batch of %d needs about %.1f GiB, more than half of %s (%.1f GiB): "
                  "lower --batch", B, need / (1 << 30), what, have / (1 << 30));
        trainer_free(&t);
        return EXIT_NOMEM;
    }
    qkv_ctx *ctx = qkv_ctx_new(0);
    qkv_tensor *tokens = qkv_zeros(ctx, QKV_I32, 2, (int64_t[]){B, T});
    qkv_tensor *targets = qkv_zeros(ctx, QKV_I32, 2, (int64_t[]){B, T});
    qkv_rng rng = qkv_rng_seed(seed);
    for (int b = 0; b < B; b++)
        qkv_task_sample(&t.cfg.task, &rng, false, (int32_t *)tokens->data + b * T,
                        (int32_t *)targets->data + b * T);
    qkv_tensor *logits = qkv_model_forward(&t.model, ctx, tokens->data, B, NULL);
    qkv_tensor *loss = qkv_cross_entropy(ctx, logits, targets, -1);
    qkv_zero_grad(t.model.params);
    qkv_backward(loss);

    const char *names[3 + QKV_MAX_PARAMS];
    const qkv_tensor *tensors[3 + QKV_MAX_PARAMS];
    char grad_names[QKV_MAX_PARAMS][48];
    int n = 0;
    names[n] = "tokens", tensors[n++] = tokens;
    names[n] = "targets", tensors[n++] = targets;
    names[n] = "loss", tensors[n++] = loss;
    names[n] = "logits", tensors[n++] = logits;
    for (int i = 0; i < t.model.nparams; i++) {
        qkv_tensor *p = t.model.param[i];
        snprintf(grad_names[i], sizeof grad_names[i], "grad.%s", t.model.param_name[i]);
        /* The gradient as a tensor of its own, sharing the parameter's shape. */
        qkv_tensor *g = qkv_from_array(ctx, p->dtype, p->ndim, p->shape, p->grad);
        names[n] = grad_names[i], tensors[n++] = g;
    }
    char seed_s[24], batch_s[16], model_s[1100];
    snprintf(seed_s, sizeof seed_s, "%" PRIu64, seed);
    snprintf(batch_s, sizeof batch_s, "%d", B);
    snprintf(model_s, sizeof model_s, "%s", path);
    const char *meta[] = {"format", "qkv-grads", "task", qkv_task_name(t.cfg.task.kind),
                          "seed", seed_s, "batch", batch_s, "model", model_s,
                          "loss_definition",
                          "mean cross-entropy over positions whose target is not -1",
                          /* the same text under its name of before 0.2, kept through 0.2 */
                          "loss", "mean cross-entropy over positions whose target is not -1",
                          "dtype", qkv_dtype_name(t.model.cfg.dtype)};
    s = qkv_st_save(out, n, names, tensors, (int)(sizeof meta / sizeof meta[0] / 2), meta);
    int code = EXIT_OK;
    if (s != QKV_OK) {
        cli_error("%s", qkv_last_error());
        code = cli_exit_for(s);
    } else {
        printf("wrote %s: batch %d x %d, loss %.6f, %d parameter gradients\n", out, B, T,
               qkv_get(loss, 0), t.model.nparams);
    }
    qkv_ctx_free(ctx);
    trainer_free(&t);
    return code;
}

int cmd_grads(int argc, char **argv, bool parse_only) {
    grads_args a;
    int code = grads_parse(argc, argv, &a);
    return code != CLI_RUN || parse_only ? code : grads_run(&a);
}
