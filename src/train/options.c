/* options.c - the schema of `qkv train`'s options (options.h), the task defaults, and the
 * config a run's options make. */
#include "train/options.h"

#include "engine/engine.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const optim_names[] = {"sgd", "momentum", "adam", NULL};
static const char *const schedule_names[] = {"cosine", "constant", NULL};
static const char *const dtype_names[] = {"f32", "f64", NULL};
static const char *const act_names[] = {"relu", "gelu", "gelu-tanh", NULL};
static const char *const norm_names[] = {"none", "layernorm", NULL};
static const char *const op_names[] = {"add", "sub", "mul", NULL};
static const char *const init_names[] = {"qkv", "paper", NULL};
_Static_assert(QKV_SGD == 0 && QKV_MOMENTUM == 1 && QKV_ADAM == 2, "optim_names out of order");
_Static_assert(QKV_F32 == 0 && QKV_F64 == 1, "dtype_names out of order");
_Static_assert(QKV_ACT_RELU == 0 && QKV_ACT_GELU == 1 && QKV_ACT_GELU_TANH == 2 && QKV_ACTS == 3,
               "act_names out of order");
_Static_assert(QKV_NORM_NONE == 0 && QKV_NORM_LAYERNORM == 1, "norm_names out of order");
_Static_assert(QKV_INIT_QKV == 0 && QKV_INIT_PAPER == 1 && QKV_INITS == 2,
               "init_names out of order");
_Static_assert(QKV_MODULAR_ADD == 0 && QKV_MODULAR_SUB == 1 && QKV_MODULAR_MUL == 2,
               "op_names out of order");

#define AT(field) offsetof(train_options, field)

/* The rows, in the order of `qkv train --help`. Each help text ends with its default, as
 * `deflt` says it (tests/man_test.sh checks the man page's "Default:" against `deflt`). */
const train_option train_option_table[] = {
    {"config", "config", OPTION_TEXT, AT(config), .arg = "FILE", .deflt = "none",
     .command_line_only = true,
     .help = "read options from a JSON file, e.g. a run's summary.json (which\n"
             "repeats that run); options given here override it (default: none)"},
    {NULL, NULL, OPTION_HEADING, .help = "task and model:"},
    {"task", "task", OPTION_TEXT, AT(task), .arg = "T", .deflt = "copy", .saved = SAVED_TASK,
     .help = "the task (default copy): copy, reverse, shift, lookup, max,\n"
             "induction, recall, sort, translate or modular; options not given take\n"
             "the task's defaults (induction: --seq-len 16 --layers 2 --heads 2\n"
             "--residual --steps 600; see qkv(1))"},
    /* modular arithmetic (--task modular), and its split */
    {"modulus", "modulus", OPTION_INT, AT(modulus), 2, QKV_MAX_MODULUS, .arg = "P",
     .deflt = "113", .saved = SAVED_MODULAR,
     .help = "modular: the modulus; inputs a b = (vocabulary P + 1), one target\n"
             "(a op b) mod P at = (default 113)"},
    {"op", "op", OPTION_CHOICE, AT(op), .choices = op_names, .arg = "OP", .deflt = "add",
     .saved = SAVED_MODULAR, .help = "modular: add, sub or mul (default add)"},
    {"train-frac", "train_frac", OPTION_DOUBLE, AT(train_frac), 0, 1, true, .arg = "F",
     .deflt = "0.3", .saved = SAVED_MODULAR,
     .help = "modular: the share of all P^2 pairs that trains, the rest held out\n"
             "(default 0.3)"},
    {"data-seed", "data_seed", OPTION_U64, AT(data_seed), .arg = "S", .deflt = "0",
     .saved = SAVED_MODULAR,
     .help = "modular: the seed of the split into training and held-out pairs,\n"
             "apart from --seed's weights (default 0)"},
    {"data", "data", OPTION_TEXT, AT(data), .field = "data_path", .arg = "FILE",
     .saved = SAVED_DATA,
     .help = "your own task: one example a line, input tokens, a tab, output\n"
             "tokens (`_`: no target); padded, vocabulary from the file"},
    {"heldout", "heldout", OPTION_TEXT, AT(heldout), .field = "heldout_path", .arg = "FILE",
     .saved = SAVED_DATA,
     .help = "held-out examples of --data (default: a hash holds out 1 line in 8)"},
    {"seq-len", "seq_len", OPTION_INT, AT(seq_len), QKV_MIN_TASK_SEQ_LEN, QKV_MAX_TASK_SEQ_LEN,
     .arg = "N", .deflt = "8", .saved = SAVED_TASK,
     .help = "sequence length (default 8; or the task's)"},
    {"vocab", "vocab", OPTION_INT, AT(vocab), 2, QKV_MAX_VOCAB, .arg = "N", .deflt = "16",
     .saved = SAVED_TASK, .help = "vocabulary size (default 16; lookup: 5 per key)"},
    {"d-model", "d_model", OPTION_INT, AT(d_model), 1, QKV_MAX_D_MODEL, .arg = "N",
     .deflt = "64", .saved = SAVED_ALWAYS, .help = "model width (default 64; modular 128)"},
    {"heads", "heads", OPTION_INT, AT(heads), 1, QKV_MAX_HEADS, .arg = "N", .deflt = "1",
     .saved = SAVED_ALWAYS,
     .help = "attention heads; must divide --d-model (default 1; modular 4)"},
    {"layers", "layers", OPTION_INT, AT(layers), 1, QKV_MAX_LAYERS, .arg = "N", .deflt = "1",
     .saved = SAVED_ALWAYS,
     .help = "attention layers, 1..8 (default 1; 2 for induction and recall)"},
    {"residual", "residual", OPTION_SET, AT(residual), .set_value = 1, .deflt = "off",
     .saved = SAVED_ALWAYS,
     .help = "add a residual connection around each layer (default off; on for\n"
             "induction, recall and modular)"},
    {"no-residual", "residual", OPTION_SET, AT(residual), .set_value = 0,
     .help = "no residual connection, whatever the task's default"},
    {"mlp", "mlp", OPTION_INT, AT(mlp), 0, QKV_MAX_MLP, .arg = "N", .deflt = "0",
     .saved = SAVED_ALWAYS,
     .help = "an MLP of N hidden units after each attention layer, in the\n"
             "residual stream (needs --residual; default 0: none; modular 512)"},
    {"act", "act", OPTION_CHOICE, AT(act), .choices = act_names, .arg = "A", .deflt = "relu",
     .saved = SAVED_ALWAYS,
     .help = "the MLP's activation: relu, gelu (the erf form) or gelu-tanh\n"
             "(default relu)"},
    {"norm", "norm", OPTION_CHOICE, AT(norm), .choices = norm_names, .arg = "N",
     .deflt = "none", .saved = SAVED_ALWAYS,
     .help = "none, or layernorm: LayerNorm before each attention and MLP and\n"
             "before the vocabulary head (needs --residual; default none)"},
    {"causal", "causal", OPTION_FLAG, AT(causal), .deflt = "off", .saved = SAVED_ALWAYS,
     .help = "causal mask on every layer (default off; always on for shift)"},
    {"init", "init", OPTION_CHOICE, AT(init), .choices = init_names, .arg = "I",
     .deflt = "qkv", .saved = SAVED_ALWAYS,
     .help = "how the weights are drawn: qkv (weights ~ N(0, X^2/fan_in),\n"
             "embeddings ~ N(0, X^2)) or paper (Nanda et al. 2023: every tensor\n"
             "~ N(0, X^2/d_model), the head ~ N(0, X^2/vocab)), X = --init-scale;\n"
             "biases 0 (default qkv; modular paper)"},
    {"init-scale", "init_scale", OPTION_DOUBLE, AT(init_scale), 0, QKV_MAX_INIT_SCALE, true,
     .arg = "X", .deflt = "0.5", .saved = SAVED_ALWAYS,
     .help = "the scale X of --init's standard deviations (default 0.5;\n"
             "--init paper 1, the paper's)"},
    {"dtype", "dtype", OPTION_CHOICE, AT(dtype), .choices = dtype_names, .arg = "D",
     .deflt = "f32", .saved = SAVED_ALWAYS,
     .help = "f32 or f64: the precision of the weights, activations, gradients\n"
             "and optimizer state, saved as F32 or F64 tensors (default f32)"},
    {NULL, NULL, OPTION_HEADING, .help = "training:"},
    {"optim", "optim", OPTION_CHOICE, AT(optim), .choices = optim_names, .arg = "O",
     .deflt = "adam", .saved = SAVED_ALWAYS, .help = "sgd, momentum or adam (default adam)"},
    {"lr", "lr", OPTION_DOUBLE, AT(lr), 0, TRAIN_MAX_LR, true, .arg = "X",
     .deflt = "adam 0.005, momentum 0.1, sgd 1", .saved = SAVED_ALWAYS,
     .help = "learning rate (default: adam 0.005, momentum 0.1, sgd 1; modular\n"
             "adam 0.001)"},
    {"batch", "batch", OPTION_INT, AT(batch), 1, TRAIN_MAX_BATCH, .arg = "N", .deflt = "32",
     .saved = SAVED_ALWAYS, .word = "full", .word_value = 0,
     .help = "sequences per step (default 32; modular full: every training pair\n"
             "each step, in order, which only modular has)"},
    {"steps", "steps", OPTION_INT, AT(steps), 1, TRAIN_MAX_STEPS, .arg = "N", .deflt = "3000",
     .saved = SAVED_ALWAYS, .with_resume = true,
     .help = "optimizer steps (default 3000; or the task's)"},
    {"weight-decay", "weight_decay", OPTION_DOUBLE, AT(weight_decay), 0, TRAIN_MAX_WEIGHT_DECAY,
     .arg = "X", .deflt = "0", .saved = SAVED_ALWAYS,
     .help = "L2 for sgd/momentum, decoupled for adam (default 0; modular 1)"},
    {"beta1", "beta1", OPTION_DOUBLE, AT(beta1), 0, TRAIN_MAX_BETA, true, .arg = "X",
     .deflt = "0.9", .saved = SAVED_ALWAYS,
     .help = "adam: the first moment's decay (default 0.9)"},
    {"beta2", "beta2", OPTION_DOUBLE, AT(beta2), 0, TRAIN_MAX_BETA, true, .arg = "X",
     .deflt = "0.999", .saved = SAVED_ALWAYS,
     .help = "adam: the second moment's decay (default 0.999; modular 0.98)"},
    {"clip", "clip", OPTION_DOUBLE, AT(clip), 0, TRAIN_MAX_CLIP, .arg = "X", .deflt = "1",
     .saved = SAVED_ALWAYS,
     .help = "clip the gradient norm to X; 0 = off (default 1; modular 0)"},
    {"schedule", "schedule", OPTION_CHOICE, AT(schedule), .choices = schedule_names,
     .arg = "S", .deflt = "cosine", .saved = SAVED_ALWAYS,
     .help = "learning rate: cosine (decay to 0) or constant (default cosine;\n"
             "modular constant)"},
    {"warmup", "warmup", OPTION_INT, AT(warmup), 0, TRAIN_MAX_STEPS, .arg = "N",
     .deflt = "steps/20", .saved = SAVED_ALWAYS,
     .help = "linear warm-up steps (default steps/20; modular 10)"},
    {"seed", "seed", OPTION_U64, AT(seed), .arg = "S", .deflt = "1", .saved = SAVED_ALWAYS,
     .help = "seed of weights, data and held-out set (default 1; modular: of the\n"
             "weights and drawn batches, --data-seed splits the pairs)"},
    {"threads", "threads", OPTION_INT, AT(threads), 1, QKV_MAX_THREADS, .arg = "N",
     .with_resume = true,
     .help = "OpenMP threads (default: $OMP_NUM_THREADS, else $SLURM_CPUS_PER_TASK,\n"
             "else all cores); results do not depend on it"},
    {NULL, NULL, OPTION_HEADING, .help = "output:"},
    {"out", "out", OPTION_TEXT, AT(out), .arg = "DIR", .with_resume = true,
     .command_line_only = true,
     .help = "write model.safetensors, metrics.csv and attention/ to DIR\n"
             "(default: none, nothing is written)"},
    {"resume", "resume", OPTION_TEXT, AT(resume), .arg = "DIR", .deflt = "off",
     .with_resume = true, .command_line_only = true,
     .help = "continue the run saved in DIR (up to --steps in total; default off)"},
    {"force", "force", OPTION_FLAG, AT(force), .deflt = "off", .with_resume = true,
     .help = "train into an --out that holds another run: its files are removed\n"
             "first, and only those (default off: refused)"},
    {"eval-every", "eval_every", OPTION_INT, AT(eval_every), 1, TRAIN_MAX_STEPS, .arg = "N",
     .deflt = "steps/20", .saved = SAVED_ALWAYS, .with_resume = true,
     .help = "held-out evaluation and metrics row every N steps (default steps/20,\n"
             "and at steps 1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100, ... before\n"
             "that); a new run's first row is step 0, before any update"},
    {"save-every", "save_every", OPTION_INT, AT(save_every), 0, TRAIN_MAX_STEPS, .arg = "N",
     .deflt = "0", .saved = SAVED_ALWAYS, .with_resume = true,
     .help = "also save a checkpoint every N steps (default 0: at the end)"},
    {"snapshot-every", "snapshot_every", OPTION_INT, AT(snapshot_every), 0, TRAIN_MAX_STEPS,
     .arg = "K", .deflt = "0", .saved = SAVED_ALWAYS, .with_resume = true,
     .help = "keep the attention of the fixed held-out example at step 0 and every\n"
             "K steps in DIR/snapshots/, and between them where it moved most: it is\n"
             "measured every K/4 steps and kept when it moved by over 0.1 since the\n"
             "last snapshot (default 0: off)"},
    {"plot", "plot", OPTION_FLAG, AT(plot), .deflt = "off", .with_resume = true,
     .help = "after saving, draw DIR/plots/ with gnuplot, as `qkv plot DIR` does;\n"
             "without gnuplot it says so and still exits 0 (default off)"},
    {"json", "json", OPTION_FLAG, AT(json), .deflt = "off", .with_resume = true,
     .help = "print one JSON object on stdout at the end (default off)"},
    {"quiet", "quiet", OPTION_FLAG, AT(quiet), .deflt = "off", .with_resume = true,
     .help = "no progress bar or log lines, only the one-line result (and a\n"
             "hint, on stderr; default off)"},
    {0},
};
_Static_assert(sizeof train_option_table / sizeof *train_option_table == TRAIN_OPTION_ROWS + 1,
               "TRAIN_OPTION_ROWS (options.h) is not the table's row count");

const train_option *train_option_find(const char *flag) {
    for (const train_option *r = train_option_table; r->flag || r->help; r++) {
        if (!r->flag) continue;
        size_t i = 0;
        while (r->flag[i] && (flag[i] == r->flag[i] || (flag[i] == '_' && r->flag[i] == '-'))) i++;
        if (!r->flag[i] && !flag[i]) return r;
    }
    return NULL;
}

const train_option *train_option_of_field(const char *field) {
    for (const train_option *r = train_option_table; r->flag || r->help; r++)
        if (r->flag && !strcmp(r->field ? r->field : r->key, field)) return r;
    return NULL;
}

void train_options_init(train_options *o) {
    /* -1: the task's (qkv_train_defaults) */
    *o = (train_options){.task = "copy", .optim = QKV_ADAM, .dtype = QKV_F32, .residual = -1,
                         .seq_len = -1, .d_model = -1, .heads = -1, .layers = -1, .steps = -1,
                         .batch = -1, .warmup = -1, .init_scale = -1, .clip = -1, .seed = 1,
                         .mlp = -1, .weight_decay = -1, .schedule = -1, .beta1 = 0.9,
                         .beta2 = -1, .modulus = 113, .train_frac = 0.3, .data_seed = 0,
                         .init = -1};
}

void *train_option_value(train_options *o, const train_option *row) {
    return (char *)o + row->offset;
}

void train_option_format(const train_options *o, const train_option *row, char *buf,
                         size_t len) {
    const void *v = (const char *)o + row->offset;
    switch (row->type) {
    case OPTION_INT:
        if (row->word && *(const long *)v == row->word_value) snprintf(buf, len, "%s", row->word);
        else snprintf(buf, len, "%ld", *(const long *)v);
        break;
    case OPTION_U64: snprintf(buf, len, "%" PRIu64, *(const uint64_t *)v); break;
    case OPTION_DOUBLE: snprintf(buf, len, "%.17g", *(const double *)v); break;
    case OPTION_TEXT: {
        const char *text = *(const char *const *)v;
        snprintf(buf, len, "%s", text ? text : "");
        break;
    }
    case OPTION_CHOICE: /* -1: the task's, not chosen yet */
        snprintf(buf, len, "%s", *(const int *)v >= 0 ? row->choices[*(const int *)v] : "");
        break;
    case OPTION_FLAG: snprintf(buf, len, "%s", *(const bool *)v ? "true" : "false"); break;
    case OPTION_SET: snprintf(buf, len, "%s", *(const int *)v == 1 ? "true" : "false"); break;
    case OPTION_HEADING: snprintf(buf, len, "%s", ""); break;
    }
}

/* By task: seq_len, d_model, heads, layers, residual, steps, lr by optimizer; then mlp,
 * batch, weight decay, clip, beta2, cosine, warmup, init (TRAINING: every task's but
 * modular). */
#define TRAINING 0, 32, 0, 1, 0.999, true, -1, QKV_INIT_QKV
static const struct {
    const char *task;
    qkv_task_defaults d;
} task_defaults[] = {
    {"induction", {16, 64, 2, 2, true, 600, {1, 0.1, 0.005}, TRAINING}},
    {"recall", {16, 64, 2, 2, true, 800, {1, 0.1, 0.005}, TRAINING}},
    {"sort", {17, 64, 1, 1, false, 1500, {1, 0.1, 0.005}, TRAINING}},
    {"translate", {16, 64, 1, 1, false, 500, {1, 0.1, 0.005}, TRAINING}},
    /* Nanda et al. (2023): one layer of width 128, 4 heads, an MLP of 512 ReLUs, no
     * LayerNorm; AdamW lr 1e-3, weight decay 1, betas (0.9, 0.98), the full batch, a
     * constant rate after 10 steps of warm-up, no clipping, 25 000 steps, their weights
     * (qkv_init) */
    {"modular", {QKV_MODULAR_SEQ_LEN, 128, 4, 1, true, 25000, {1, 0.1, 0.001},
                 512, 0, 1, 0, 0.98, false, 10, QKV_INIT_PAPER}},
    {"data", {8, 64, 1, 1, false, 3000, {1, 0.1, 0.005}, TRAINING}},
    {NULL, {8, 64, 1, 1, false, 3000, {1, 0.1, 0.005}, TRAINING}}, /* copy, reverse, shift, lookup, max */
};
#undef TRAINING

qkv_task_defaults qkv_train_defaults(const char *task) {
    size_t i = 0;
    while (task_defaults[i].task && (!task || strcmp(task_defaults[i].task, task))) i++;
    return task_defaults[i].d;
}

qkv_status train_options_to_config(const train_options *o, bool steps_given,
                                   train_config *cfg) {
    const char *task_name = o->data ? "data" : o->task;
    qkv_task_defaults d = qkv_train_defaults(task_name);
    long seq_len = o->seq_len >= 0 ? o->seq_len : d.seq_len;
    int64_t steps = steps_given ? o->steps : d.steps;
    int64_t warmup = o->warmup >= 0 ? o->warmup : d.warmup >= 0 ? d.warmup : steps / 20;
    *cfg = (train_config){.batch = (int)(o->batch >= 0 ? o->batch : d.batch), .steps = steps,
                          .seed = o->seed,
                          .weight_decay = o->weight_decay >= 0 ? o->weight_decay : d.weight_decay,
                          .clip = o->clip >= 0 ? o->clip : d.clip,
                          .optim = (qkv_optim_kind)o->optim,
                          .cosine = o->schedule >= 0 ? !strcmp(schedule_names[o->schedule], "cosine")
                                                     : d.cosine,
                          .warmup = warmup, .beta1 = o->beta1,
                          .beta2 = o->beta2 >= 0 ? o->beta2 : d.beta2};
    cfg->lr = o->lr > 0 ? o->lr : d.lr[cfg->optim];
    qkv_status bs = train_check_betas(cfg->beta1, cfg->beta2);
    if (bs != QKV_OK) return bs;
    if (o->data) {
        const char *paths[2] = {o->data, o->heldout};
        char *dst[2] = {cfg->data_path, cfg->heldout_path};
        for (int k = 0; k < 2; k++)
            if (paths[k] && (size_t)snprintf(dst[k], sizeof cfg->data_path, "%s", paths[k]) >=
                                sizeof cfg->data_path)
                return qkv_fail(QKV_ERR_VALUE, "%s: the path is too long", paths[k]);
        cfg->task.kind = QKV_TASK_DATA; /* its sizes come from the file (trainer_init) */
        seq_len = 2;
    } else if (!strcmp(task_name, "modular")) { /* its sizes come from the modulus */
        if ((o->vocab && o->vocab != o->modulus + 1) || seq_len != QKV_MODULAR_SEQ_LEN)
            return qkv_fail(QKV_ERR_VALUE, "modular's input is a b = (%s %d) over a vocabulary "
                            "of %s + 1: leave out %s", field_name("seq_len"), QKV_MODULAR_SEQ_LEN,
                            field_name("modulus"),
                            seq_len != QKV_MODULAR_SEQ_LEN ? field_name("seq_len")
                                                           : field_name("vocab"));
        qkv_status s = qkv_task_modular(&cfg->task, (int)o->modulus, (qkv_modular_op)o->op,
                                        o->train_frac, o->data_seed);
        if (s != QKV_OK) return s;
    } else {
        qkv_status s = qkv_task_init(&cfg->task, task_name, (int)seq_len, (int)o->vocab);
        if (s != QKV_OK) return s;
    }
    if (cfg->batch == 0) { /* --batch full: every training pair, which modular alone has */
        if (cfg->task.kind != QKV_TASK_MODULAR)
            return qkv_fail(QKV_ERR_VALUE, "%s full takes every training example each step: "
                            "modular's pairs (--task modular), not a task drawn from the seed "
                            "or a data file", field_name("batch"));
        if (cfg->task.n_train > TRAIN_MAX_BATCH)
            return qkv_fail(QKV_ERR_VALUE, "%s full would be %d training pairs, more than "
                            "%d: lower %s or %s, or give %s N", field_name("batch"),
                            cfg->task.n_train, TRAIN_MAX_BATCH, field_name("modulus"),
                            field_name("train_frac"), field_name("batch"));
        cfg->full_batch = true;
        cfg->batch = cfg->task.n_train;
    }
    cfg->model = (qkv_model_config){
        .vocab = cfg->task.vocab, .seq_len = (int)seq_len,
        .d_model = (int)(o->d_model >= 0 ? o->d_model : d.d_model),
        .heads = (int)(o->heads >= 0 ? o->heads : d.heads),
        .layers = (int)(o->layers >= 0 ? o->layers : d.layers),
        .residual = o->residual >= 0 ? o->residual == 1 : d.residual,
        .causal = o->causal || cfg->task.causal,
        .dtype = (qkv_dtype)o->dtype, .target_len = cfg->task.target_len,
        .mlp = (int)(o->mlp >= 0 ? o->mlp : d.mlp),
        .act = (qkv_act)o->act, .norm = (qkv_norm)o->norm,
        .init = o->init >= 0 ? (qkv_init)o->init : d.init};
    /* --init-scale not given: the scheme's, 1 for the paper's (its own scales) */
    cfg->model.init_scale = o->init_scale > 0 ? o->init_scale
                            : cfg->model.init == QKV_INIT_PAPER ? 1.0 : 0.5;
    return QKV_OK;
}

void train_options_of_run(const train_config *cfg, int64_t eval_every, int64_t save_every,
                          int64_t snapshot_every, train_options *o) {
    train_options_init(o);
    const qkv_model_config *m = &cfg->model;
    if (cfg->task.kind == QKV_TASK_DATA) {
        o->data = cfg->data_path;
        o->heldout = cfg->heldout_path[0] ? cfg->heldout_path : NULL;
    } else {
        o->task = qkv_task_name(cfg->task.kind);
    }
    if (cfg->task.kind == QKV_TASK_MODULAR) {
        o->modulus = cfg->task.modulus, o->op = (int)cfg->task.op;
        o->train_frac = cfg->task.train_frac, o->data_seed = cfg->task.data_seed;
    }
    o->seq_len = cfg->task.seq_len, o->vocab = cfg->task.vocab;
    o->d_model = m->d_model, o->heads = m->heads, o->layers = m->layers;
    o->residual = m->residual, o->causal = m->causal, o->init_scale = m->init_scale;
    o->mlp = m->mlp, o->act = (int)m->act, o->norm = (int)m->norm, o->init = (int)m->init;
    o->dtype = m->dtype, o->optim = cfg->optim, o->lr = cfg->lr;
    o->batch = cfg->full_batch ? 0 : cfg->batch, o->beta1 = cfg->beta1, o->beta2 = cfg->beta2;
    o->steps = (long)cfg->steps, o->weight_decay = cfg->weight_decay, o->clip = cfg->clip;
    o->schedule = cfg->cosine ? 0 : 1, o->warmup = (long)cfg->warmup, o->seed = cfg->seed;
    o->eval_every = (long)eval_every, o->save_every = (long)save_every;
    o->snapshot_every = (long)snapshot_every;
}

qkv_status train_option_check(const char *key, double value) {
    const train_option *r = train_option_find(key);
    if (!r || (r->type != OPTION_INT && r->type != OPTION_DOUBLE)) return QKV_OK;
    bool below = r->lo_open ? !(value > r->lo) : !(value >= r->lo);
    if (!below && value <= r->hi) return QKV_OK;
    return qkv_fail(QKV_ERR_VALUE, "%s %.17g is out of range (%s%.17g..%.17g)",
                    field_name(r->key), value, r->lo_open ? "above " : "", r->lo, r->hi);
}
