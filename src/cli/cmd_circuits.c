/* cmd_circuits.c - `qkv circuits`: every head's QK and OV circuits, its copying score, and the
 * composition scores between heads of consecutive layers (and in the JSON, of any earlier and
 * later layer), read from a saved model's weights (the numbers come from src/model/circuits.c;
 * docs/explain.md defines them). */
#include "cli.h"
#include "explain_cli.h"
#include "explore/explain.h"
#include "io/io.h"
#include "model/model.h"
#include "train/loaded_model.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *model, *out;
    bool json;
} circuits_args;

static const char *const kind_names[] = {"q", "k", "v"}; /* by qkv_composition_kind */

/* The mapping view (docs/explain.md, "Mapping"): the token each token should make a head
 * write, whether keys hold the token at all, and per head the OV circuit's top target. */
typedef struct {
    int32_t *expected;  /* (V): the task's or the data's target of each token, -1: none */
    bool *key_token;    /* (V): inputs hold it (an encoder-decoder's: the encoder sees it) */
    int32_t *top;       /* (L*H, V): each head's OV top target per key token, -1 elsewhere */
    int *right, *sources; /* (L*H): key tokens whose top target is the expected one, of those
                             with one */
} mapping;

static void mapping_free(mapping *mp) {
    free(mp->expected), free(mp->key_token), free(mp->top), free(mp->right), free(mp->sources);
    *mp = (mapping){0};
}

/* Every head's mapping: the expected targets from the model's task or data file, then each
 * head's OV circuit's top target per key token. */
static qkv_status mapping_build(const loaded_model *lm, mapping *mp) {
    const qkv_model_config *c = &lm->model.cfg;
    int V = c->vocab, LH = c->layers * c->heads;
    *mp = (mapping){malloc((size_t)V * sizeof *mp->expected), malloc((size_t)V),
                    malloc((size_t)LH * V * sizeof *mp->top), malloc((size_t)LH * sizeof(int)),
                    malloc((size_t)LH * sizeof(int))};
    double *ov = malloc((size_t)V * V * sizeof *ov);
    qkv_status s = mp->expected && mp->key_token && mp->top && mp->right && mp->sources && ov
                       ? QKV_OK : qkv_fail(QKV_ERR_NOMEM, "circuits: out of memory");
    const dataset *d = lm->data;
    if (s == QKV_OK)
        s = d ? circuits_data_mapping(V, d->n_train, d->in_len, d->out_len, d->train_x,
                                      d->train_y, mp->expected, mp->key_token)
              : circuits_task_mapping(&lm->cfg.task, mp->expected, mp->key_token);
    for (int i = 0; s == QKV_OK && i < LH; i++) {
        s = qkv_head_circuits(&lm->model, i / c->heads, i % c->heads, NULL, NULL, ov);
        if (s == QKV_OK)
            mp->right[i] = circuits_top_targets(ov, V, mp->key_token, mp->expected,
                                                mp->top + (size_t)i * V, &mp->sources[i]);
    }
    free(ov);
    if (s != QKV_OK) mapping_free(mp);
    return s;
}

/* A token list as JSON: the names of tokens[i] for each key token i, null where -1. */
static cJSON *key_tokens_json(const loaded_model *lm, const mapping *mp, const int32_t *tokens) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < lm->model.cfg.vocab; i++)
        if (mp->key_token[i])
            cJSON_AddItemToArray(a, tokens[i] >= 0 ? explain_class_json(lm, tokens[i])
                                                   : cJSON_CreateNull());
    return a;
}

static int circuits_parse(int argc, char **argv, circuits_args *a) {
    *a = (circuits_args){0};
    cli_option options[] = {
        {"model", CLI_STRING, &a->model, .arg = "FILE",
         .help = "the model, instead of the operand DIR: a model.safetensors, or the\n"
                 "directory holding one"},
        {"json", CLI_FLAG, &a->json, .help = "print one JSON object instead of the table"},
        {"out", CLI_STRING, &a->out, .arg = "FILE",
         .help = "write the same JSON object to FILE (qkv plot draws DIR/circuits.json)"},
        CLI_NO_SELFTEST_ROW,
        {"help", CLI_HELP, .help = "show this help"},
        {0}};
    const cli_command cmd = {
        .name = "circuits",
        .usage = "usage: qkv circuits DIR [--json] [--out FILE]   (or --model FILE)\n"
                 "Reads what each head computes from the weights alone: its QK circuit (how strongly a\n"
                 "query token attends to a key token, through the embeddings and W_Q W_K^T; the positional\n"
                 "part apart), its OV circuit (the logits it writes for a token it attends to, through\n"
                 "W_V W_O and the vocabulary head) and that circuit's copying score (1: the head copies),\n"
                 "its mapping (the OV circuit's top target for each token keys hold, against the\n"
                 "task's or the training data's target), and the Q-, K- and V-composition scores\n"
                 "between heads of consecutive layers (--json and --out: of every earlier and later\n"
                 "layer too).\n"
                 "docs/explain.md defines each number.\n"
                 "\n",
        .options = options,
        .column = 22,
        .epilog = "\n"
                  "Exit codes: 0 done, 2 bad option or --out naming the model, 3 the model cannot be read,\n"
                  "FILE written or LAPACK loaded, 4 the model file is corrupt, 5 the eigenvalues did not\n"
                  "converge, 6 out of memory.\n",
        .operands = true};
    int first;
    int code = cli_parse_options(&cmd, argc, argv, &first);
    if (code != CLI_RUN) return code;
    return explain_cli_model("circuits", a->model, argc, argv, first, &a->model);
}

/* A JSON array of the rows x cols matrix m. */
static cJSON *matrix_json(const double *m, int rows, int cols) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < rows; i++) {
        cJSON *row = cJSON_CreateDoubleArray(m + (size_t)i * cols, cols);
        if (!row) {
            cJSON_Delete(a);
            return NULL;
        }
        cJSON_AddItemToArray(a, row);
    }
    return a;
}

/* n labels: the tokens (or with `classes`, the output classes) 0..n-1, or the numbers. */
static void add_labels(cJSON *j, const char *key, const loaded_model *lm, int n, bool tokens,
                       bool classes) {
    cJSON *a = cJSON_AddArrayToObject(j, key);
    for (int i = 0; a && i < n; i++) {
        char label[64];
        snprintf(label, sizeof label, "%d", i);
        cJSON_AddItemToArray(a, classes  ? explain_class_json(lm, i)
                                : tokens ? explain_token_json(lm, i)
                                         : cJSON_CreateString(label));
    }
}

/* The whole answer as one JSON object (NULL with the status in *s). */
/* One composition entry: from "L.H", to "L.H", kind, score (null: undefined). */
static void add_composition(cJSON *comp, int l1, int h1, int l2, int h2, int kind, double score) {
    char from[32], to[32];
    snprintf(from, sizeof from, "%d.%d", l1 + 1, h1 + 1);
    snprintf(to, sizeof to, "%d.%d", l2 + 1, h2 + 1);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToArray(comp, o);
    cJSON_AddStringToObject(o, "from", from);
    cJSON_AddStringToObject(o, "to", to);
    cJSON_AddStringToObject(o, "kind", kind_names[kind]);
    cJSON_AddNumberToObject(o, "score", score);
}

static cJSON *circuits_json(const loaded_model *lm, const double *copying,
                            const double *composition, const double *composition_all,
                            const mapping *mp, qkv_status *s) {
    const qkv_model *m = &lm->model;
    const qkv_model_config *c = &m->cfg;
    int L = c->layers, H = c->heads, V = c->vocab, T = c->seq_len;
    int Rq = c->target_len ? c->target_len : V, Tq = c->target_len ? c->target_len : T;
    cJSON *j = cJSON_CreateObject();
    double *qk = malloc((size_t)Rq * V * sizeof *qk);
    double *qk_pos = malloc((size_t)Tq * T * sizeof *qk_pos);
    double *ov = malloc((size_t)V * V * sizeof *ov);
    *s = j && qk && qk_pos && ov ? QKV_OK : qkv_fail(QKV_ERR_NOMEM, "circuits: out of memory");
    if (*s == QKV_OK) {
        cJSON_AddStringToObject(j, "command", "circuits");
        cJSON_AddNumberToObject(j, "layers", L);
        cJSON_AddNumberToObject(j, "heads_per_layer", H);
        cJSON_AddNumberToObject(j, "d_k", c->d_model / H);
        cJSON_AddNumberToObject(j, "scale", 1.0 / sqrt((double)(c->d_model / H)));
        cJSON_AddBoolToObject(j, "encoder_decoder", c->target_len > 0);
        add_labels(j, "vocab", lm, V, true, false); /* rows and columns of ov, columns of qk */
        add_labels(j, "output_labels", lm, V, true, true); /* ov's columns as outputs */
        add_labels(j, "query_labels", lm, Rq, !c->target_len, false); /* rows of qk */
        cJSON_AddNumberToObject(j, "query_positions", Tq); /* qk_pos is (query_positions, */
        cJSON_AddNumberToObject(j, "key_positions", T);    /*            key_positions) */
        /* the mapping view: the tokens keys can hold (indices into vocab; an encoder-
         * decoder's: the encoder's tokens), and the target the task or data gives each */
        cJSON *keys = cJSON_AddArrayToObject(j, "key_tokens");
        for (int i = 0; keys && i < V; i++)
            if (mp->key_token[i]) cJSON_AddItemToArray(keys, cJSON_CreateNumber(i));
        cJSON_AddStringToObject(j, "mapping_source", lm->data ? "data" : "task");
        cJSON_AddItemToObject(j, "expected_targets", key_tokens_json(lm, mp, mp->expected));
    }
    cJSON *heads = *s == QKV_OK ? cJSON_AddArrayToObject(j, "heads") : NULL;
    for (int l = 0; *s == QKV_OK && l < L; l++)
        for (int h = 0; *s == QKV_OK && h < H; h++) {
            if ((*s = qkv_head_circuits(m, l, h, qk, qk_pos, ov)) != QKV_OK) break;
            cJSON *o = cJSON_CreateObject();
            cJSON_AddItemToArray(heads, o);
            cJSON_AddNumberToObject(o, "layer", l + 1);
            cJSON_AddNumberToObject(o, "head", h + 1);
            cJSON_AddNumberToObject(o, "copying_score", copying[l * H + h]); /* NaN: null */
            int i = l * H + h;
            cJSON *map = cJSON_AddObjectToObject(o, "mapping");
            cJSON_AddItemToObject(map, "top_targets",
                                  key_tokens_json(lm, mp, mp->top + (size_t)i * V));
            cJSON_AddNumberToObject(map, "right", mp->right[i]);
            cJSON_AddNumberToObject(map, "sources", mp->sources[i]);
            cJSON_AddNumberToObject(map, "share", mp->sources[i] ? (double)mp->right[i] / mp->sources[i]
                                                                  : NAN);
            cJSON_AddItemToObject(o, "qk", matrix_json(qk, Rq, V));
            cJSON_AddItemToObject(o, "qk_pos", matrix_json(qk_pos, Tq, T));
            cJSON_AddItemToObject(o, "ov", matrix_json(ov, V, V));
        }
    cJSON *comp = *s == QKV_OK ? cJSON_AddArrayToObject(j, "composition") : NULL;
    for (int l = 0; comp && l + 1 < L; l++)
        for (int k = 0; k < 3; k++)
            for (int h1 = 0; h1 < H; h1++)
                for (int h2 = 0; h2 < H; h2++) {
                    double score = composition[(((size_t)l * 3 + k) * H + h1) * H + h2];
                    if (c->target_len && k != QKV_COMPOSE_Q) continue; /* none: see qkv.h */
                    add_composition(comp, l, h1, l + 1, h2, k, score);
                }
    /* every earlier layer into every later one (the consecutive pairs again among them): by
     * earlier layer, later layer, kind, from, to */
    cJSON *all = comp ? cJSON_AddArrayToObject(j, "composition_all") : NULL;
    const double *block = composition_all;
    for (int l1 = 0; all && l1 + 1 < L; l1++)
        for (int l2 = l1 + 1; l2 < L; l2++, block += (size_t)3 * H * H)
            for (int k = 0; k < 3; k++)
                for (int h1 = 0; h1 < H; h1++)
                    for (int h2 = 0; h2 < H; h2++)
                        if (!c->target_len || k == QKV_COMPOSE_Q)
                            add_composition(all, l1, h1, l2, h2, k,
                                            block[((size_t)k * H + h1) * H + h2]);
    /* each MLP's neuron-logit map W_out·head.w: (neurons, vocab) */
    cJSON *mlps = *s == QKV_OK && c->mlp > 0 ? cJSON_AddArrayToObject(j, "mlp") : NULL;
    double *nl = mlps ? malloc((size_t)c->mlp * V * sizeof *nl) : NULL;
    if (mlps && !nl) *s = qkv_fail(QKV_ERR_NOMEM, "circuits: out of memory");
    for (int l = 0; mlps && *s == QKV_OK && l < L; l++) {
        if ((*s = qkv_neuron_logits(m, l, nl)) != QKV_OK) break;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(mlps, o);
        cJSON_AddNumberToObject(o, "layer", l + 1);
        cJSON_AddNumberToObject(o, "neurons", c->mlp);
        cJSON_AddItemToObject(o, "neuron_logits", matrix_json(nl, c->mlp, V));
    }
    free(nl);
    free(qk), free(qk_pos), free(ov);
    if (*s != QKV_OK) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* Each MLP's neurons with the largest rows of the neuron-logit map (their Euclidean norm), and
 * the token each raises most: where an MLP writes to the logits directly. */
static qkv_status print_neurons(const loaded_model *lm) {
    const qkv_model_config *c = &lm->model.cfg;
    int N = c->mlp, V = c->vocab, top = N < 8 ? N : 8;
    double *nl = malloc((size_t)N * V * sizeof *nl), *norm = malloc((size_t)N * sizeof *norm);
    int *order = malloc((size_t)N * sizeof *order);
    qkv_status s = nl && norm && order ? QKV_OK
                                       : qkv_fail(QKV_ERR_NOMEM, "circuits: out of memory");
    for (int l = 0; s == QKV_OK && l < c->layers; l++) {
        if ((s = qkv_neuron_logits(&lm->model, l, nl)) != QKV_OK) break;
        for (int n = 0; n < N; n++) {
            norm[n] = 0;
            for (int t = 0; t < V; t++) norm[n] += nl[(size_t)n * V + t] * nl[(size_t)n * V + t];
            norm[n] = sqrt(norm[n]);
            int at = n; /* insertion: largest first, the lower neuron first among equals */
            while (at > 0 && norm[order[at - 1]] < norm[n]) order[at] = order[at - 1], at--;
            order[at] = n;
        }
        printf("MLP %d: the %d neurons that write most to the logits (norm of their row of "
               "W_out·W_U; the token each raises most)\n", l + 1, top);
        for (int k = 0; k < top; k++) {
            int n = order[k], best = 0;
            for (int t = 1; t < V; t++)
                if (nl[(size_t)n * V + t] > nl[(size_t)n * V + best]) best = t;
            char tok[32];
            printf("  neuron %-5d %10.4f   %s %+.4f\n", n, norm[n],
                   loaded_model_class_text(lm, best, tok, sizeof tok), nl[(size_t)n * V + best]);
        }
    }
    free(nl), free(norm), free(order);
    return s;
}

/* "0.973" or "-" for an undefined score. */
static const char *score_text(double v, char *buf, size_t len) {
    if (isfinite(v)) snprintf(buf, len, "%6.3f", v);
    else snprintf(buf, len, "%6s", "-");
    return buf;
}

/* Each head's OV top target per key token: "  1.1  s0->w5 s1->w3! ..." ('!' where the task
 * or data gives another target, '?' where it gives none). */
static void print_mapping(const loaded_model *lm, const mapping *mp) {
    const qkv_model_config *c = &lm->model.cfg;
    int V = c->vocab;
    printf("top target of each key token (the OV circuit's largest logit; ! not the %s's "
           "target, ? no target)\n", lm->data ? "data" : "task");
    for (int i = 0; i < c->layers * c->heads; i++) {
        printf("  %d.%d ", i / c->heads + 1, i % c->heads + 1);
        for (int k = 0; k < V; k++) {
            int32_t top = mp->top[(size_t)i * V + k];
            if (!mp->key_token[k]) continue;
            char from[32], to[32];
            printf(" %s->%s%s", loaded_model_token_text(lm, k, from, sizeof from),
                   loaded_model_class_text(lm, top, to, sizeof to),
                   mp->expected[k] < 0 ? "?" : mp->expected[k] != top ? "!" : "");
        }
        printf("\n");
    }
}

static void print_table(const loaded_model *lm, const double *copying, const double *composition,
                        const mapping *mp) {
    const qkv_model_config *c = &lm->model.cfg;
    int L = c->layers, H = c->heads;
    char b[3][32];
    printf("heads (copying score: 1 copies the attended token, -1 writes against it)\n");
    printf("  layer  head  copying  mapping\n");
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            int i = l * H + h;
            printf("  %5d  %4d   %s  ", l + 1, h + 1, score_text(copying[i], b[0], 32));
            if (mp->sources[i])
                printf("%d/%d (%.3f)\n", mp->right[i], mp->sources[i],
                       (double)mp->right[i] / mp->sources[i]);
            else
                printf("-\n");
        }
    printf("copying: sum Re(l) / sum |l| over the OV circuit's eigenvalues l. It measures copying\n"
           "only: a head that writes another token for the one it attends to (a translation, a\n"
           "lookup) scores near 0 or below 0 however right it is, and a score near 1 says that\n"
           "the circuit favours the attended token, not that it wins every row.\n"
           "mapping: of the tokens %s that the %s gives a target, how many the\n"
           "OV circuit writes as its top logit (docs/explain.md, \"Mapping\").\n",
           c->target_len ? "the encoder sees" : "the inputs hold",
           lm->data ? "training data" : "task");
    print_mapping(lm, mp);
    if (L < 2) return;
    printf("composition (how much a head of layer L+1 reads what a head of layer L writes)\n");
    printf("  from   to         Q       K       V\n");
    for (int l = 0; l + 1 < L; l++)
        for (int h1 = 0; h1 < H; h1++)
            for (int h2 = 0; h2 < H; h2++) {
                const double *at = composition + ((size_t)l * 3 * H + h1) * H + h2;
                printf("  %d.%-3d  %d.%-3d  %s  %s  %s\n", l + 1, h1 + 1, l + 2, h2 + 1,
                       score_text(at[0], b[0], 32), score_text(at[(size_t)H * H], b[1], 32),
                       score_text(at[(size_t)2 * H * H], b[2], 32));
            }
}

/* One run of the command: the scores (explain_cli_run's state). Its messages are printed as
 * they are: they name circuits, LAPACK or the file themselves. */
typedef struct {
    double *copying;         /* (L*H) */
    double *composition;     /* (L-1, 3, H, H) */
    double *composition_all; /* (L(L-1)/2, 3, H, H): every earlier layer into every later */
    mapping mp;
} circuits_job;

static qkv_status circuits_compute(loaded_model *lm, void *state) {
    circuits_job *job = state;
    const qkv_model_config *c = &lm->model.cfg;
    int L = c->layers, H = c->heads;
    job->copying = malloc((size_t)L * H * sizeof *job->copying);
    job->composition = malloc((size_t)(L > 1 ? L - 1 : 1) * 3 * H * H * sizeof *job->composition);
    job->composition_all = malloc((size_t)(L > 1 ? L * (L - 1) / 2 : 1) * 3 * H * H *
                                  sizeof *job->composition_all);
    qkv_status s = job->copying && job->composition && job->composition_all
                       ? QKV_OK : qkv_fail(QKV_ERR_NOMEM, "circuits: out of memory");
    if (s == QKV_OK) s = qkv_copying_scores(&lm->model, job->copying);
    if (s == QKV_OK) s = qkv_composition_scores(&lm->model, job->composition);
    if (s == QKV_OK && L > 2) s = qkv_composition_scores_all(&lm->model, job->composition_all);
    else if (s == QKV_OK && L == 2) /* one pair: the consecutive one */
        memcpy(job->composition_all, job->composition, (size_t)3 * H * H * sizeof(double));
    if (s == QKV_OK) s = mapping_build(lm, &job->mp);
    return s;
}

static cJSON *circuits_json_of(const loaded_model *lm, void *state) {
    circuits_job *job = state;
    qkv_status s; /* not QKV_OK only out of memory, after qkv_fail */
    return circuits_json(lm, job->copying, job->composition, job->composition_all, &job->mp, &s);
}

static qkv_status circuits_table(const loaded_model *lm, void *state) {
    circuits_job *job = state;
    const qkv_model_config *c = &lm->model.cfg;
    print_table(lm, job->copying, job->composition, &job->mp);
    if (c->norm == QKV_NORM_LAYERNORM)
        printf("LayerNorm folded: each gain into the weights that read the stream, the "
               "centring into those that write it (docs/explain.md)\n");
    if (c->mlp == 0) return QKV_OK;
    printf("the heads' circuits are their direct paths: the MLPs are beside them\n");
    return print_neurons(lm);
}

static int circuits_run(const circuits_args *a) {
    circuits_job job = {0};
    int code = explain_cli_run(&(explain_cli_job){
        .who = "circuits", .model = a->model, .out = a->out, .dtype = TRAIN_DTYPE_OF_FILE,
        .threads = -1, .print_json = a->json, .json_when_asked = true, .plain_errors = true,
        .run = circuits_compute, .json = circuits_json_of, .table = circuits_table,
        .state = &job});
    mapping_free(&job.mp);
    free(job.copying), free(job.composition), free(job.composition_all);
    return code;
}

int cmd_circuits(int argc, char **argv, bool parse_only) {
    circuits_args a;
    int code = circuits_parse(argc, argv, &a);
    return code != CLI_RUN || parse_only ? code : circuits_run(&a);
}
