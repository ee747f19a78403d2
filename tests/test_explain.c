/* test_explain.c - the intervention point (qkv_model_forward_probe) and the drivers over it
 * (src/explore/explain.c), each against a second route: DLA parts add up to the logit,
 * removing a head whose output is zero changes nothing, patching every head with the clean
 * run recovers the clean metric exactly, attribution equals exact patching where the metric is
 * linear in the patched head (the last layer), and on a trained induction model the targets
 * of issue 23. */
#include "explore/eval_data.h"
#include "explore/explain.h"
#include "explore/lens.h"
#include "fixtures.h"
#include "model/model.h"
#include "train/checkpoint.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A config as qkv train makes it for a task, its sizes, residual or not. */
static train_config make_config(const char *task, int seq_len, int d_model, int heads,
                                int layers, bool residual, qkv_dtype dtype) {
    train_config c;
    memset(&c, 0, sizeof c);
    ck_assert_int_eq(qkv_task_init(&c.task, task, seq_len, 0), QKV_OK);
    c.model = (qkv_model_config){.vocab = c.task.vocab, .seq_len = seq_len, .d_model = d_model,
                                 .heads = heads, .layers = layers, .residual = residual,
                                 .causal = c.task.causal, .init_scale = 1.0, .dtype = dtype,
                                 .target_len = c.task.target_len};
    c.optim = QKV_ADAM;
    c.lr = 0.005;
    c.clip = 1;
    c.cosine = true;
    c.warmup = 30;
    c.batch = 32;
    c.steps = 600;
    c.seed = 1;
    return c;
}

/* A model with random weights (no step taken), and a bias that is not zero. */
static void make_trainer(loaded_model *t, const char *task, int seq_len, int d_model, int heads,
                         int layers, bool residual, qkv_dtype dtype) {
    train_config c = make_config(task, seq_len, d_model, heads, layers, residual, dtype);
    trainer fresh;
    ck_assert_int_eq(trainer_init(&fresh, &c), QKV_OK);
    loaded_model_take(t, &fresh);
    for (int64_t v = 0; v < t->model.head_b->size; v++)
        qkv_set(t->model.head_b, v, 0.25 * (double)(v % 7 - 3));
}

/* Held-out example i as an input (a task's targets included). */
static void heldout_input(const loaded_model *t, int i, explain_input *in) {
    int T = t->model.cfg.seq_len, To = t->target_len;
    memset(in, 0, sizeof *in);
    memcpy(in->tokens, t->held_tokens + (size_t)i * T, sizeof(int32_t) * T);
    memcpy(in->targets, t->held_targets + (size_t)i * To, sizeof(int32_t) * To);
    in->n = in->len = T;
}

static const struct {
    const char *task;
    int seq_len, layers;
    bool residual;
} models[] = {
    {"induction", 16, 2, true}, {"copy", 8, 1, false}, {"reverse", 8, 3, true},
    {"translate", 8, 2, true},  {"shift", 8, 2, false},
};
#define NMODELS (int)(sizeof models / sizeof models[0])

static void make_model(loaded_model *t, int i, qkv_dtype dt) {
    make_trainer(t, models[i].task, models[i].seq_len, 16, 2, models[i].layers,
                 models[i].residual, dt);
}

/* explain_patch of pairs clean[i], corrupt[i] (n of them, the model's T tokens each) with
 * metrics m; r's request fields set by the caller. */
static qkv_status patch_of(loaded_model *t, const explain_input *clean,
                           const explain_input *corrupt, const patch_metric *m, int n,
                           patch_result *r) {
    int T = t->model.cfg.seq_len;
    int32_t *x = malloc(sizeof(int32_t) * (size_t)(2 * n * T));
    for (int i = 0; i < n; i++) {
        memcpy(x + (size_t)i * T, clean[i].tokens, sizeof(int32_t) * T);
        memcpy(x + (size_t)(n + i) * T, corrupt[i].tokens, sizeof(int32_t) * T);
    }
    patch_pairs p = {.n = n, .positions = t->target_len, .keys = T, .clean = x,
                     .corrupt = x + (size_t)n * T, .metric = m};
    qkv_status s = explain_patch(t, &p, r);
    free(x);
    return s;
}

/* No edit (and a KEEP edit): the same logits, bit for bit, as the forward asking for the
 * weights (the composed attention). */
START_TEST(test_probe_is_the_forward) {
    for (int d = 0; d < 2; d++) {
        loaded_model t;
        make_model(&t, _i, FLOATS[d]);
        const qkv_model_config *c = &t.model.cfg;
        qkv_tensor *attn[QKV_MAX_LAYERS];
        qkv_tensor *want = qkv_model_forward_padded(&t.model, ctx, t.held_tokens, NULL, 4, attn);
        qkv_probe probe = {0};
        qkv_tensor *got = qkv_model_forward_probe(&t.model, ctx, t.held_tokens, NULL, 4, &probe);
        qkv_head_edit keep = {.kind = QKV_HEAD_KEEP, .layer = c->layers - 1, .head = 1, .position = -1};
        qkv_probe kp = {.edits = &keep, .n_edits = 1};
        qkv_tensor *kept = qkv_model_forward_probe(&t.model, ctx, t.held_tokens, NULL, 4, &kp);
        ck_assert_int_eq(got->size, want->size);
        for (int64_t k = 0; k < want->size; k++) {
            ck_assert(qkv_get(got, k) == qkv_get(want, k));
            ck_assert(qkv_get(kept, k) == qkv_get(want, k));
        }
        for (int l = 0; l < c->layers; l++) {
            ck_assert_ptr_nonnull(probe.z[l]);
            ck_assert_int_eq(probe.z[l]->shape[1], c->heads);
            ck_assert_ptr_nonnull(probe.stream[l + 1]);
        }
        loaded_model_free(&t);
    }
}
END_TEST

/* What the probe's hook of test_probe_hook saw and does: it counts its calls, and at z of
 * layer `layer` returns a copy with head `head` zeroed (or, with `same`, an unchanged copy). */
typedef struct {
    int calls, layer, head;
    bool same;
    qkv_site first;
} hook_state;

static const qkv_tensor *zero_head_hook(void *user, qkv_site site, int layer, qkv_ln ln,
                                        const qkv_tensor *y, qkv_ctx *step) {
    hook_state *st = user;
    (void)ln;
    if (st->calls++ == 0) st->first = site;
    if (site != QKV_SITE_Z || layer != st->layer) return NULL;
    qkv_tensor *h = qkv_from_array(step, y->dtype, y->ndim, y->shape, y->data);
    int64_t per = y->shape[2] * y->shape[3]; /* (B, H, To, Dk) */
    for (int64_t b = 0; !st->same && b < y->shape[0]; b++)
        for (int64_t k = 0; k < per; k++) qkv_set(h, (b * y->shape[1] + st->head) * per + k, 0);
    return h;
}

/* The probe's hook (qkv_probe.hook): called at every site, the first resid_pre; one that
 * returns NULL, or the site's own bits, changes nothing; one that zeroes a head's z gives the
 * zero edit's logits, bit for bit. attn_out is what the layer adds to the stream. And
 * qkv_struct_size is the C layout's. */
START_TEST(test_probe_hook) {
    for (int d = 0; d < 2; d++) {
        loaded_model t;
        make_model(&t, _i, FLOATS[d]);
        const qkv_model_config *c = &t.model.cfg;
        int L = c->layers;
        qkv_probe plain = {0};
        qkv_tensor *want = qkv_model_forward_probe(&t.model, ctx, t.held_tokens, NULL, 4, &plain);
        hook_state st = {.layer = L - 1, .head = 1, .same = true};
        qkv_probe hp = {.hook = zero_head_hook, .hook_user = &st};
        qkv_tensor *same = qkv_model_forward_probe(&t.model, ctx, t.held_tokens, NULL, 4, &hp);
        ck_assert_int_eq(st.calls, 7 * L); /* q, k, v, pattern, z, resid-pre, resid-post */
        ck_assert_int_eq(st.first, QKV_SITE_RESID_PRE);
        qkv_head_edit zero = {.kind = QKV_HEAD_ZERO, .layer = L - 1, .head = 1, .position = -1};
        qkv_probe zp = {.edits = &zero, .n_edits = 1};
        qkv_tensor *zeroed = qkv_model_forward_probe(&t.model, ctx, t.held_tokens, NULL, 4, &zp);
        st = (hook_state){.layer = L - 1, .head = 1};
        hp = (qkv_probe){.hook = zero_head_hook, .hook_user = &st};
        qkv_tensor *hooked = qkv_model_forward_probe(&t.model, ctx, t.held_tokens, NULL, 4, &hp);
        bool differs = false;
        for (int64_t k = 0; k < want->size; k++) {
            ck_assert(qkv_get(same, k) == qkv_get(want, k));
            ck_assert(qkv_get(hooked, k) == qkv_get(zeroed, k));
            differs |= qkv_get(zeroed, k) != qkv_get(want, k);
        }
        ck_assert(differs);
        for (int l = 0; l < L; l++) { /* resid_post = stream + attn_out, or attn_out */
            qkv_tensor *a = plain.attn_out[l], *post = plain.resid_post[l];
            ck_assert_ptr_nonnull(a);
            const qkv_tensor *sum = c->residual ? qkv_add(ctx, plain.stream[l], a) : a;
            ck_assert_int_eq(sum->size, post->size);
            for (int64_t k = 0; k < a->size; k++) ck_assert(qkv_get(post, k) == qkv_get(sum, k));
        }
        loaded_model_free(&t);
    }
    ck_assert_uint_eq(qkv_struct_size("qkv_probe"), sizeof(qkv_probe));
    ck_assert_uint_eq(qkv_struct_size("qkv_model"), sizeof(qkv_model));
    ck_assert_uint_eq(qkv_struct_size("qkv_probe "), 0);
    ck_assert_uint_eq(qkv_struct_size(NULL), 0);
}
END_TEST

/* The DLA parts add up to the logit: f64 to 1e-12, f32 to 1e-5, relative to the largest of
 * the logit and the parts' absolute sum (the scale of the sum's roundings), at every position
 * with a target, for the predicted token and for another. */
START_TEST(test_dla_adds_up) {
    for (int d = 0; d < 2; d++) {
        loaded_model t;
        make_model(&t, _i, FLOATS[d]);
        double tol = d ? 1e-12 : 1e-5, worst = 0;
        for (int ex = 0; ex < 3; ex++) {
            explain_input in;
            heldout_input(&t, ex, &in);
            for (int p = 0; p < t.target_len; p++)
                for (int which = 0; which < 2; which++) {
                    dla_result r;
                    ck_assert_int_eq(explain_attribute(&t, &in, p, which ? 1 : -1, false, &r), QKV_OK);
                    double scale = fabs(r.logit), sum = 0;
                    for (int k = 0; k < r.n_parts; k++) {
                        scale += fabs(r.parts[k].value);
                        sum += r.parts[k].value;
                    }
                    ck_assert(sum == r.sum);
                    double err = fabs(r.sum - r.logit) / scale;
                    worst = err > worst ? err : worst;
                    int heads = t.model.cfg.heads * (models[_i].residual ? t.model.cfg.layers : 1);
                    ck_assert_int_eq(r.n_parts, heads + 1 + models[_i].residual);
                    explain_attribute_free(&r);
                }
        }
        ck_assert_msg(worst <= tol, "%s %s: DLA sum off by %.3g relative (tolerance %g)",
                      models[_i].task, d ? "f64" : "f32", worst, tol);
        loaded_model_free(&t);
    }
}
END_TEST

/* A head whose output is exactly zero (its W_V columns zero): zero-ablating it changes no
 * loss or accuracy bit; and a one-layer model without the residual stream, every head
 * removed, predicts head.b alone. */
START_TEST(test_ablating_nothing_changes_nothing) {
    for (int d = 0; d < 2; d++) {
        loaded_model t;
        make_trainer(&t, "reverse", 8, 16, 2, 2, true, FLOATS[d]);
        qkv_tensor *wv = t.model.w_v[1];
        int C = 16, Dk = 8;
        for (int i = 0; i < C; i++)
            for (int j = Dk; j < 2 * Dk; j++) qkv_set(wv, (int64_t)i * C + j, 0.0); /* head 2 */
        example_set set = loaded_model_heldout(&t);
        set.n = 100;
        explain_head heads[2] = {{1, 1}, {1, 0}};
        ablate_request rq = {.n_heads = 2, .heads = heads};
        ablate_result r;
        ck_assert_int_eq(explain_ablate(&t, &set, &rq, &r), QKV_OK);
        ck_assert(r.each[0].loss == r.baseline.loss);
        ck_assert(r.each[0].accuracy == r.baseline.accuracy);
        ck_assert(r.each[1].loss != r.baseline.loss); /* the other head does matter */
        explain_ablate_free(&r);
        loaded_model_free(&t);

        make_trainer(&t, "copy", 8, 16, 4, 1, false, FLOATS[d]);
        qkv_head_edit all[4];
        for (int h = 0; h < 4; h++) all[h] = (qkv_head_edit){.kind = QKV_HEAD_ZERO, .head = h, .position = -1};
        qkv_probe probe = {.edits = all, .n_edits = 4};
        qkv_tensor *logits = qkv_model_forward_probe(&t.model, ctx, t.held_tokens, NULL, 2, &probe);
        int64_t V = logits->shape[2];
        for (int64_t k = 0; k < logits->size; k++)
            ck_assert(qkv_get(logits, k) == qkv_get(t.model.head_b, k % V));
        loaded_model_free(&t);
    }
}
END_TEST

/* The analysis covers every head of a model with more heads per layer than training's
 * evaluation scores (EVAL_MAX_HEADS): 72 heads of width 2. Attribution has a part for each
 * and they add up to the logit; ablation lists and removes each, the last too; eval --data
 * gives every head's entropy. */
START_TEST(test_every_head_of_a_wide_layer) {
    enum { H = 72 };
    ck_assert_int_gt(H, EVAL_MAX_HEADS);
    loaded_model t;
    make_trainer(&t, "copy", 4, 2 * H, H, 1, true, QKV_F64);
    explain_input in;
    heldout_input(&t, 0, &in);
    dla_result d;
    ck_assert_int_eq(explain_attribute(&t, &in, 3, -1, false, &d), QKV_OK);
    ck_assert_int_eq(d.n_parts, H + 2); /* embed, every head, bias */
    ck_assert_str_eq(d.parts[H].name, "1.72");
    double scale = fabs(d.logit);
    for (int k = 0; k < d.n_parts; k++) scale += fabs(d.parts[k].value);
    ck_assert_msg(fabs(d.sum - d.logit) <= 1e-12 * scale, "parts %.17g, logit %.17g", d.sum,
                  d.logit);
    explain_attribute_free(&d);

    example_set set = loaded_model_heldout(&t);
    set.n = 3;
    ablate_request rq = {0};
    ablate_result r;
    ck_assert_int_eq(explain_ablate(&t, &set, &rq, &r), QKV_OK);
    ck_assert_int_eq(r.n, H);
    ck_assert_int_eq(r.spots[H - 1].head, H - 1);
    ck_assert(r.each[H - 1].counted == r.baseline.counted);
    explain_ablate_free(&r);

    eval_file f = {.n = 3, .x = t.held_tokens, .y = t.held_targets};
    int32_t len[3] = {4, 4, 4};
    int64_t line[3] = {1, 2, 3};
    f.len = len, f.line = line;
    eval_data_result e;
    ck_assert_int_eq(eval_data_run(&t, &f, NULL, &e), QKV_OK);
    for (int h = 0; h < H; h++) ck_assert_msg(e.entropy[h] > 0, "head %d: no entropy", h + 1);
    cJSON *j = eval_data_json(&t, &f, &e);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "head_scores")), H);
    cJSON_Delete(j);
    eval_data_result_free(&e);
    loaded_model_free(&t);
}
END_TEST

/* The metric logit[a] - logit[b] at position p of logits (1, To, V). */
static double metric(const qkv_tensor *logits, int p, int a, int b) {
    int64_t V = logits->shape[2];
    return qkv_get(logits, p * V + a) - qkv_get(logits, p * V + b);
}

/* Patching every head of every layer with the clean run's outputs gives the clean metric
 * (share 1) exactly where the heads are the only path from the input (no residual stream, or
 * an encoder-decoder's decoder stream), and otherwise differs from it by the embeddings' own
 * path alone; with the corrupted run's own outputs, the corrupted metric (share 0). */
START_TEST(test_patching_everything_recovers_all) {
    for (int d = 0; d < 2; d++) {
        loaded_model t;
        make_model(&t, _i, FLOATS[d]);
        const qkv_model_config *c = &t.model.cfg;
        explain_input clean, corrupt;
        heldout_input(&t, 0, &clean);
        heldout_input(&t, 1, &corrupt);
        int p = t.target_len - 1;
        qkv_probe cp = {0}, xp = {0};
        qkv_tensor *cl = qkv_model_forward_probe(&t.model, ctx, clean.tokens, NULL, 1, &cp);
        qkv_tensor *xl = qkv_model_forward_probe(&t.model, ctx, corrupt.tokens, NULL, 1, &xp);
        qkv_head_edit to_clean[QKV_MAX_LAYERS * 2], to_self[QKV_MAX_LAYERS * 2];
        int n = 0;
        for (int l = 0; l < c->layers; l++)
            for (int h = 0; h < c->heads; h++, n++) {
                to_clean[n] = (qkv_head_edit){QKV_HEAD_REPLACE, l, h, -1, cp.z[l], QKV_SITE_Z, -1, 0};
                to_self[n] = (qkv_head_edit){QKV_HEAD_REPLACE, l, h, -1, xp.z[l], QKV_SITE_Z, -1, 0};
            }
        qkv_probe pc = {.edits = to_clean, .n_edits = n}, ps = {.edits = to_self, .n_edits = n};
        qkv_tensor *patched = qkv_model_forward_probe(&t.model, ctx, corrupt.tokens, NULL, 1, &pc);
        qkv_tensor *same = qkv_model_forward_probe(&t.model, ctx, corrupt.tokens, NULL, 1, &ps);
        ck_assert(metric(same, p, 0, 1) == metric(xl, p, 0, 1));
        if (!c->residual || c->target_len) { /* the heads are the only path from the input */
            ck_assert(metric(patched, p, 0, 1) == metric(cl, p, 0, 1));
        } else { /* the embeddings' own path stays the corrupted one's: that difference alone */
            double embed = 0, scale = fabs(metric(cl, p, 0, 1)) + fabs(metric(xl, p, 0, 1));
            int C = c->d_model, V = c->vocab;
            for (int k = 0; k < C; k++)
                embed += (qkv_get(xp.stream[0], p * C + k) - qkv_get(cp.stream[0], p * C + k)) *
                         (qkv_get(t.model.head_w, k * V) - qkv_get(t.model.head_w, k * V + 1));
            double err = fabs(metric(patched, p, 0, 1) - metric(cl, p, 0, 1) - embed) / scale;
            ck_assert_msg(err <= (d ? 1e-12 : 1e-5), "%s: off by %.3g", models[_i].task, err);
        }
        loaded_model_free(&t);
    }
}
END_TEST

/* Each metric's gradient (explain_metric_grad) against central differences of the metric
 * itself (explain_metric_of), in double, to 1e-8; kl of a distribution against itself is 0. */
START_TEST(test_metric_gradients) {
    enum { V = 7 };
    double logits[V], ref[V], grad[V], up[V], down[V];
    for (int j = 0; j < V; j++) {
        logits[j] = 0.7 * sin(1.3 * j + 0.4) + 0.1 * j;
        ref[j] = cos(0.9 * j) - 0.2 * j;
    }
    explain_log_softmax(ref, V, ref);
    for (int m = 0; m < 4; m++) {
        explain_metric kind = (explain_metric)m;
        explain_metric_grad(kind, logits, V, 2, 5, ref, grad);
        for (int j = 0; j < V; j++) {
            double h = 1e-5;
            memcpy(up, logits, sizeof up), memcpy(down, logits, sizeof down);
            up[j] += h, down[j] -= h;
            double fd = (explain_metric_of(kind, up, V, 2, 5, ref) -
                         explain_metric_of(kind, down, V, 2, 5, ref)) / (2 * h);
            ck_assert_msg(fabs(fd - grad[j]) <= 1e-8, "%s d/d logit %d: %.12g, differences %.12g",
                          explain_metric_names[m], j, grad[j], fd);
        }
    }
    double self[V];
    explain_log_softmax(logits, V, self);
    ck_assert(explain_metric_of(EXPLAIN_METRIC_KL, logits, V, 0, 0, self) == 0);
}
END_TEST

/* Every metric: where the heads are the only path from the input (no residual stream, or an
 * encoder-decoder), patching all of them at once (--heads of every head, --together) gives
 * the clean run's logits, so a share of 1 of any metric, and kl's clean value 0; the
 * together's attribution is the sum of the rows'. */
START_TEST(test_metrics_together) {
    if (models[_i].residual && strcmp(models[_i].task, "translate")) return;
    for (int d = 0; d < 2; d++) {
        loaded_model t;
        make_model(&t, _i, FLOATS[d]);
        const qkv_model_config *c = &t.model.cfg;
        explain_input clean, corrupt;
        heldout_input(&t, 0, &clean);
        heldout_input(&t, 1, &corrupt);
        explain_head heads[QKV_MAX_LAYERS * 2];
        int n = 0;
        for (int l = 0; l < c->layers; l++)
            for (int h = 0; h < c->heads; h++) heads[n++] = (explain_head){l, h};
        for (int m = 0; m < 4; m++) {
            patch_result r = {.exact = true, .attribution = true, .metric = (explain_metric)m,
                              .n_heads = n, .heads = heads, .together = true};
            patch_metric pm = {t.target_len - 1, 0, 1};
            ck_assert_int_eq(patch_of(&t, &clean, &corrupt, &pm, 1, &r), QKV_OK);
            ck_assert_int_eq(r.n_rows, n);
            ck_assert_msg(fabs(r.all.exact - 1) <= 1e-12, "%s %s: together %.15g",
                          models[_i].task, explain_metric_names[m], r.all.exact);
            if (m == EXPLAIN_METRIC_KL) ck_assert(r.clean == 0);
            double sum = 0;
            for (int k = 0; k < n; k++) sum += r.rows[k].attribution;
            ck_assert(fabs(sum - r.all.attribution) <= 1e-12 * (1 + fabs(sum)));
            explain_patch_free(&r);
        }
        loaded_model_free(&t);
    }
}
END_TEST

/* Resample ablation over a set of copies of one example takes every value from a run of the
 * same input: every score is the baseline's (its accuracy exactly; the loss and the metric,
 * sums over the draws, to 1e-12), whatever the draws; kl's is 0. */
START_TEST(test_resample_of_copies) {
    for (int d = 0; d < 2; d++) {
        loaded_model t;
        make_trainer(&t, "reverse", 8, 16, 2, 2, true, FLOATS[d]);
        int T = 8, n = 20;
        int32_t x[20 * 8], y[20 * 8];
        for (int e = 0; e < n; e++) {
            memcpy(x + e * T, t.held_tokens, sizeof(int32_t) * T);
            memcpy(y + e * T, t.held_targets, sizeof(int32_t) * T);
        }
        example_set set = {n, x, y, NULL};
        for (int m = 1; m < 4; m++) {
            ablate_request rq = {.resample = true, .draws = 3, .seed = 7, .together = true,
                                 .scored = true, .metric = (explain_metric)m};
            ablate_result r;
            ck_assert_int_eq(explain_ablate(&t, &set, &rq, &r), QKV_OK);
            ck_assert_int_eq(r.n, 4);
            for (int i = 0; i <= r.n; i++) { /* (the draws' sums: to rounding) */
                const explain_score *x1 = i < r.n ? &r.each[i] : &r.together;
                ck_assert(x1->accuracy == r.baseline.accuracy);
                ck_assert(fabs(x1->loss - r.baseline.loss) <= 1e-12 * r.baseline.loss);
                ck_assert(fabs(x1->metric - r.baseline.metric) <= 1e-12 * r.baseline.metric);
            }
            if (m == EXPLAIN_METRIC_KL) ck_assert(r.baseline.metric == 0);
            explain_ablate_free(&r);
        }
        loaded_model_free(&t);
    }
}
END_TEST

/* explain_patch: attribution equals exact patching for the last layer's heads (the metric is
 * linear in them): f64 to 1e-9, f32 to 1e-3; both methods give a share for every head, and
 * head-position rows of a last-layer head add up to the head's. */
START_TEST(test_attribution_is_exact_on_the_last_layer) {
    for (int d = 0; d < 2; d++) {
        loaded_model t;
        make_model(&t, _i, FLOATS[d]);
        const qkv_model_config *c = &t.model.cfg;
        explain_input clean, corrupt;
        heldout_input(&t, 0, &clean);
        heldout_input(&t, 1, &corrupt);
        double tol = d ? 1e-9 : 1e-3;
        for (int over = 0; over < 2; over++) {
            patch_result r = {.over = over ? EXPLAIN_OVER_HEAD_POSITION : EXPLAIN_OVER_HEAD,
                              .exact = true, .attribution = true};
            patch_metric m = {t.target_len - 1, 0, 1};
            ck_assert_int_eq(patch_of(&t, &clean, &corrupt, &m, 1, &r), QKV_OK);
            int per_head = over ? t.target_len : 1;
            ck_assert_int_eq(r.n_rows, c->layers * c->heads * per_head);
            for (int k = 0; k < r.n_rows; k++) {
                const patch_row *row = &r.rows[k];
                ck_assert(isfinite(row->exact) && isfinite(row->attribution));
                if (row->spot.layer == c->layers - 1)
                    ck_assert_msg(fabs(row->exact - row->attribution) <= tol,
                                  "%s %s head %d.%d pos %d: exact %.12g attribution %.12g",
                                  models[_i].task, d ? "f64" : "f32", row->spot.layer + 1,
                                  row->spot.head + 1, row->spot.position, row->exact,
                                  row->attribution);
            }
            explain_patch_free(&r);
        }
        loaded_model_free(&t);
    }
}
END_TEST

/* Where the metric is linear in a site (the last layer's z, v and pattern: z = A·V; the
 * stream leaving the last layer), attribution equals exact patching, f64 to 1e-9, for every
 * --over the site takes; patching the stream leaving the last layer at the metric's position
 * recovers all of it. */
START_TEST(test_linear_sites_agree) {
    loaded_model t;
    make_model(&t, _i, QKV_F64);
    const qkv_model_config *c = &t.model.cfg;
    explain_input in[2];
    heldout_input(&t, 0, &in[0]);
    heldout_input(&t, 1, &in[1]);
    patch_metric m = {t.target_len - 1, 0, 1};
    const struct { qkv_site site; explain_over over; } cases[] = {
        {QKV_SITE_Z, EXPLAIN_OVER_HEAD},         {QKV_SITE_V, EXPLAIN_OVER_KEY_POSITION},
        {QKV_SITE_PATTERN, EXPLAIN_OVER_HEAD},   {QKV_SITE_PATTERN, EXPLAIN_OVER_KEY_POSITION},
        {QKV_SITE_PATTERN, EXPLAIN_OVER_HEAD_POSITION},
        {QKV_SITE_RESID_POST, EXPLAIN_OVER_LAYER_POSITION}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        if (cases[k].site == QKV_SITE_RESID_POST && !c->residual) continue;
        ck_assert_int_eq(explain_check_site(&t, cases[k].site, cases[k].over), QKV_OK);
        patch_result r = {.site = cases[k].site, .over = cases[k].over, .exact = true,
                          .attribution = true};
        ck_assert_int_eq(patch_of(&t, &in[0], &in[1], &m, 1, &r), QKV_OK);
        int last = 0;
        for (int i = 0; i < r.n_rows; i++) {
            const patch_row *row = &r.rows[i];
            ck_assert_int_eq(row->spot.site, cases[k].site);
            if (row->spot.layer != c->layers - 1) continue;
            last++;
            ck_assert_msg(fabs(row->exact - row->attribution) <= 1e-9,
                          "%s %s row %d: exact %.15g attribution %.15g", models[_i].task,
                          explain_site_names[cases[k].site], i, row->exact, row->attribution);
            if (cases[k].site == QKV_SITE_RESID_POST && row->spot.position == m.position)
                ck_assert_msg(fabs(row->exact - 1) <= 1e-9, "%.15g", row->exact);
        }
        ck_assert_int_gt(last, 0);
        explain_patch_free(&r);
    }
    /* a site the model lacks, an --over the site does not take */
    if (!c->residual)
        ck_assert_int_eq(explain_check_site(&t, QKV_SITE_RESID_PRE, EXPLAIN_OVER_LAYER_POSITION),
                         QKV_ERR_VALUE);
    ck_assert_int_eq(explain_check_site(&t, QKV_SITE_Z, EXPLAIN_OVER_KEY_POSITION), QKV_ERR_VALUE);
    ck_assert_int_eq(explain_check_site(&t, QKV_SITE_K, EXPLAIN_OVER_HEAD_POSITION), QKV_ERR_VALUE);
    loaded_model_free(&t);
}
END_TEST

/* A set of pairs: the means over the pairs first, each share (mean patched - mean corrupt) /
 * (mean clean - mean corrupt), from single-pair runs' own numbers (f64, 1e-12). */
START_TEST(test_pairs_are_means_of_single_pairs) {
    loaded_model t;
    make_model(&t, _i, QKV_F64);
    enum { N = 3 };
    explain_input clean[N], corrupt[N];
    patch_metric m[N];
    for (int i = 0; i < N; i++) {
        heldout_input(&t, 2 * i, &clean[i]);
        heldout_input(&t, 2 * i + 1, &corrupt[i]);
        m[i] = (patch_metric){t.target_len - 1 - i % 2, i % 3, 3 - i % 3};
    }
    patch_result all = {.site = QKV_SITE_Q, .over = EXPLAIN_OVER_HEAD_POSITION, .exact = true,
                        .attribution = true};
    ck_assert_int_eq(patch_of(&t, clean, corrupt, m, N, &all), QKV_OK);
    double cl = 0, co = 0, *patched = calloc((size_t)all.n_rows, sizeof *patched);
    double *attr = calloc((size_t)all.n_rows, sizeof *attr);
    for (int i = 0; i < N; i++) {
        patch_result one = {.site = QKV_SITE_Q, .over = EXPLAIN_OVER_HEAD_POSITION,
                            .exact = true, .attribution = true};
        ck_assert_int_eq(patch_of(&t, &clean[i], &corrupt[i], &m[i], 1, &one), QKV_OK);
        ck_assert_int_eq(one.n_rows, all.n_rows);
        double d = one.clean - one.corrupt;
        cl += one.clean / N, co += one.corrupt / N;
        for (int k = 0; k < one.n_rows; k++) {
            patched[k] += (one.corrupt + one.rows[k].exact * d) / N;
            attr[k] += one.rows[k].attribution * d / N;
            /* the per-pair numbers of the set are the single run's */
            ck_assert(fabs(all.pair_patched[i * all.n_rows + k] -
                           (one.corrupt + one.rows[k].exact * d)) <= 1e-12);
        }
        explain_patch_free(&one);
    }
    ck_assert(fabs(all.clean - cl) <= 1e-12 && fabs(all.corrupt - co) <= 1e-12);
    for (int k = 0; k < all.n_rows; k++) {
        ck_assert_msg(fabs(all.rows[k].exact - (patched[k] - co) / (cl - co)) <= 1e-12,
                      "row %d: %.15g vs %.15g", k, all.rows[k].exact,
                      (patched[k] - co) / (cl - co));
        ck_assert(fabs(all.rows[k].attribution - attr[k] / (cl - co)) <= 1e-12);
    }
    free(patched), free(attr);
    explain_patch_free(&all);
    loaded_model_free(&t);
}
END_TEST

/* Path patching's identities in f64: (1) the receiver's input recorded in pass 2 (every head
 * frozen at its corrupted output but the sender, which carries its clean one) equals its
 * corrupted input plus ΔS·W_O^S·W^R, to 1e-12; (2) a sender -> logits path's exact share
 * equals its attribution and the difference of the head's direct logit attribution between
 * the two inputs (qkv attribute), over clean - corrupt, each to 1e-12. */
START_TEST(test_path_identities) {
    loaded_model t;
    make_model(&t, _i, QKV_F64);
    const qkv_model_config *c = &t.model.cfg;
    int L = c->layers, H = c->heads, C = c->d_model, Dk = C / H, T = c->seq_len;
    int To = t.target_len;
    explain_input in[2];
    heldout_input(&t, 0, &in[0]);
    heldout_input(&t, 1, &in[1]);
    patch_metric m = {To - 1, 0, 1};
    patch_result r = {.paths = true, .exact = true, .attribution = true};
    ck_assert_int_eq(patch_of(&t, &in[0], &in[1], &m, 1, &r), QKV_OK);
    double worst = 0;
    for (int k = 0; k < r.n_paths; k++) {
        const patch_path *p = &r.path[k];
        if (p->receiver_layer >= 0) continue;
        double dla[2][2]; /* [clean, corrupt][answer, wrong]: the sender's part */
        for (int side = 0; side < 2; side++)
            for (int w = 0; w < 2; w++) {
                dla_result d;
                ck_assert_int_eq(explain_attribute(&t, &in[side], m.position,
                                                   w ? m.wrong : m.answer, false, &d), QKV_OK);
                for (int q = 0; q < d.n_parts; q++)
                    if (d.parts[q].layer == p->sender_layer && d.parts[q].head == p->sender_head)
                        dla[side][w] = d.parts[q].value;
                explain_attribute_free(&d);
            }
        double want = ((dla[0][0] - dla[0][1]) - (dla[1][0] - dla[1][1])) / (r.clean - r.corrupt);
        worst = fmax(worst, fmax(fabs(p->exact - p->attribution), fabs(p->exact - want)));
    }
    ck_assert_msg(worst <= 1e-12, "%s: logits paths off by %.3g", models[_i].task, worst);
    printf("path identities, %s: logits paths' exact - attribution - DLA within %.2g\n",
           models[_i].task, worst);
    explain_patch_free(&r);
    /* (1), by hand: every sender, every later layer's q (and k, v where keys read the stream) */
    qkv_ctx *ctx = qkv_ctx_new(1 << 20);
    qkv_probe cl = {0}, co = {0};
    qkv_model_forward_probe(&t.model, ctx, in[0].tokens, NULL, 1, &cl);
    qkv_model_forward_probe(&t.model, ctx, in[1].tokens, NULL, 1, &co);
    qkv_head_edit *e = malloc(sizeof *e * (size_t)(L * H));
    worst = 0;
    for (int ls = 0; ls < L - 1; ls++)
        for (int hs = 0; hs < H; hs++) {
            for (int l = 0, n = 0; l < L; l++)
                for (int h = 0; h < H; h++, n++)
                    e[n] = (qkv_head_edit){.kind = QKV_HEAD_REPLACE, .layer = l, .head = h,
                                           .position = -1, .site = QKV_SITE_Z,
                                           .value = l == ls && h == hs ? cl.z[l] : co.z[l]};
            qkv_probe rec = {.edits = e, .n_edits = L * H};
            qkv_model_forward_probe(&t.model, ctx, in[1].tokens, NULL, 1, &rec);
            int lr = ls + 1; /* the next layer: reached with or without the residual stream */
            for (int via = 0; via < (c->target_len ? 1 : 3); via++) {
                const qkv_tensor *w = via == 0 ? t.model.w_q[lr] : via == 1 ? t.model.w_k[lr]
                                                                            : t.model.w_v[lr];
                qkv_site site = (qkv_site)(QKV_SITE_Q + via);
                const qkv_tensor *got = qkv_probe_site(&rec, site, lr);
                const qkv_tensor *base = qkv_probe_site(&co, site, lr);
                int rows = via ? T : To;
                for (int hr = 0; hr < H; hr++)
                    for (int i = 0; i < rows; i++)
                        for (int d = 0; d < Dk; d++) {
                            double add = 0;
                            for (int j = 0; j < C; j++) {
                                double u = 0;
                                for (int q = 0; q < Dk; q++) {
                                    int64_t at = ((int64_t)hs * To + i) * Dk + q;
                                    u += (qkv_get(cl.z[ls], at) - qkv_get(co.z[ls], at)) *
                                         qkv_get(t.model.w_o[ls], (int64_t)(hs * Dk + q) * C + j);
                                }
                                add += u * qkv_get(w, (int64_t)j * C + hr * Dk + d);
                            }
                            int64_t at = ((int64_t)hr * rows + i) * Dk + d;
                            worst = fmax(worst, fabs(qkv_get(got, at) - (qkv_get(base, at) + add)));
                        }
            }
        }
    ck_assert_msg(worst <= 1e-12, "%s: recorded inputs off by %.3g", models[_i].task, worst);
    printf("path identities, %s: recorded receiver inputs within %.2g\n", models[_i].task, worst);
    free(e);
    qkv_ctx_free(ctx);
    loaded_model_free(&t);
}
END_TEST

/* ---- the targets on a trained induction model (issue 23) ---- */

/* The default induction model (qkv train --task induction: 600 steps), in f32, and the same
 * weights widened to f64. The layer-2 heads with an induction score of 0.5 or more, removed
 * together, drop held-out accuracy by 0.5 or more; patching a clean repeated sequence against
 * one whose first half differs, their shares sum to 0.7 or more; attribution equals exact
 * patching for them (f64 1e-6, f32 1e-3). */
START_TEST(test_induction_targets) {
    trainer t;
    train_config c = make_config("induction", 16, 64, 2, 2, true, QKV_F32);
    c.model.init_scale = 0.5;
    ck_assert_int_eq(trainer_init(&t, &c), QKV_OK);
    for (int64_t s = 0; s < c.steps; s++) ck_assert_int_eq(trainer_step(&t), QKV_OK);
    char path[] = "/tmp/qkv-explain-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(trainer_save(&t, path), QKV_OK);
    eval_result ev = trainer_evaluate(&t);
    trainer_free(&t);
    loaded_model lm;
    for (int d = 0; d < 2; d++) {
        ck_assert_int_eq(loaded_model_load(&lm, path, FLOATS[d]), QKV_OK);
        explain_head heads[2];
        ablate_request rq = {.together = true, .heads = heads};
        for (int h = 0; h < 2; h++)
            if (ev.induction[1][h] >= 0.5) rq.heads[rq.n_heads++] = (explain_head){1, h};
        ck_assert_int_ge(rq.n_heads, 1);
        ablate_result *ar = malloc(sizeof *ar);
        example_set set = loaded_model_heldout(&lm);
        ck_assert_int_eq(explain_ablate(&lm, &set, &rq, ar), QKV_OK);
        double drop = ar->baseline.accuracy - ar->together.accuracy;
        ck_assert_msg(drop >= 0.5, "ablating the induction heads drops accuracy by %.3f", drop);
        explain_ablate_free(ar);
        free(ar);
        /* a segment of 8 and its repeat; the corrupted first half differs */
        explain_input clean, corrupt;
        memset(&clean, 0, sizeof clean);
        const int32_t seg[8] = {6, 12, 11, 9, 3, 1, 14, 2}, other[8] = {0, 4, 5, 7, 8, 10, 13, 15};
        for (int i = 0; i < 16; i++) clean.tokens[i] = seg[i % 8];
        clean.n = clean.len = 16;
        ck_assert_int_eq(qkv_task_targets(&lm.cfg.task, clean.tokens, clean.targets), QKV_OK);
        corrupt = clean;
        for (int i = 0; i < 8; i++) corrupt.tokens[i] = other[i];
        patch_result r = {.exact = true, .attribution = true};
        patch_metric m = {explain_default_position(&lm, &clean), seg[7], other[7]};
        ck_assert_int_eq(m.position, 14);
        ck_assert_int_eq(patch_of(&lm, &clean, &corrupt, &m, 1, &r), QKV_OK);
        double share = 0, tol = d ? 1e-6 : 1e-3;
        for (int k = 0; k < r.n_rows; k++) {
            const patch_row *row = &r.rows[k];
            if (row->spot.layer != 1) continue;
            for (int i = 0; i < rq.n_heads; i++)
                if (rq.heads[i].head == row->spot.head) share += row->exact;
            ck_assert_msg(fabs(row->exact - row->attribution) <= tol, "2.%d: %.9g vs %.9g",
                          row->spot.head + 1, row->exact, row->attribution);
        }
        ck_assert_msg(share >= 0.7, "the induction heads' patching shares sum to %.3f", share);
        ck_assert(isfinite(r.agreement));
        explain_patch_free(&r);
        loaded_model_free(&lm);
    }
    unlink(path);
}
END_TEST


/* The logit lens in f64, against the model's own forward: the stream after the last layer
 * read through the vocabulary head is the model's logits, and the final prediction's parts
 * add up to its logit, each to 1e-12 (relative to the logit's size, at least 1); with the
 * residual stream, the lens's logit of that token after layer b is the embedding part, the
 * parts of the heads of layers 1..b and the bias. The last row ranks the final prediction
 * first, with the model's softmax probability. */
START_TEST(test_lens_identities) {
    loaded_model t;
    make_model(&t, _i, QKV_F64);
    const qkv_model_config *c = &t.model.cfg;
    int V = c->vocab, L = c->layers, H = c->heads;
    double worst = 0;
    double *logits = malloc((size_t)V * sizeof *logits);
    double *scratch = malloc((size_t)t.model.cfg.d_model * sizeof *scratch);
    ck_assert_ptr_nonnull(logits);
    for (int ex = 0; ex < 3; ex++) {
        explain_input in;
        heldout_input(&t, ex, &in);
        lens_result r;
        ck_assert_int_eq(lens_run(&t, &in, 3, &r), QKV_OK);
        int P = explain_query_positions(&t, &in);
        ck_assert_int_eq(r.boundaries, L + 1);
        ck_assert_int_eq(r.positions, P);
        qkv_ctx_reset(ctx);
        qkv_probe probe = {0};
        qkv_tensor *model = qkv_model_forward_probe(&t.model, ctx, in.tokens, NULL, 1, &probe);
        for (int i = 0; i < P; i++) {
            const dla_result *f = &r.final[i];
            int best = 0;
            for (int j = 1; j < V; j++)
                if (qkv_get(model, (int64_t)i * V + j) > qkv_get(model, (int64_t)i * V + best))
                    best = j;
            ck_assert_int_eq(f->token, best);
            /* the last row is the model's logits */
            model_unembed(&t.model, probe.stream[L], i, logits, scratch);
            double most = -INFINITY, sum = 0;
            for (int j = 0; j < V; j++) {
                double want = qkv_get(model, (int64_t)i * V + j);
                double err = fabs(logits[j] - want) / fmax(1, fabs(want));
                worst = fmax(worst, err);
                most = fmax(most, want);
            }
            for (int j = 0; j < V; j++) sum += exp(qkv_get(model, (int64_t)i * V + j) - most);
            size_t last = (size_t)L * P + i;
            ck_assert_int_eq(r.rank_of_final[last], 1);
            ck_assert_int_eq(r.top_token[last * 3], best);
            worst = fmax(worst, fabs(r.top_prob[last * 3] - 1 / sum));
            /* the parts add up to the logit */
            double parts = 0;
            for (int k = 0; k < f->n_parts; k++) parts += f->parts[k].value;
            worst = fmax(worst, fabs(parts - f->logit) / fmax(1, fabs(f->logit)));
            /* with the residual stream, each row is the parts of the layers before it */
            for (int b = 0; b <= L && c->residual; b++) {
                model_unembed(&t.model, probe.stream[b], i, logits, scratch);
                double want = f->parts[0].value + f->parts[f->n_parts - 1].value;
                for (int k = 1; k <= b * H; k++) want += f->parts[k].value;
                worst = fmax(worst, fabs(logits[f->token] - want) / fmax(1, fabs(want)));
            }
            /* every cell: probabilities in (0, 1], most probable first */
            for (int b = 0; b <= L; b++) {
                const double *pr = r.top_prob + ((size_t)b * P + i) * 3;
                ck_assert(pr[0] > 0 && pr[0] <= 1 && pr[1] <= pr[0] && pr[2] <= pr[1]);
                ck_assert(pr[0] + pr[1] + pr[2] <= 1 + 1e-12);
                ck_assert(r.rank_of_final[(size_t)b * P + i] >= 1);
            }
        }
        lens_free(&r);
    }
    free(logits);
    free(scratch);
    ck_assert_msg(worst <= 1e-12, "%s: a lens identity is off by %.3g", models[_i].task, worst);
    /* --top: 1 to the vocabulary (and LENS_MAX_TOP) */
    explain_input in;
    heldout_input(&t, 0, &in);
    lens_result r;
    ck_assert_int_eq(lens_run(&t, &in, V + 1, &r), QKV_ERR_VALUE);
    lens_free(&r);
    ck_assert_int_eq(lens_run(&t, &in, 0, &r), QKV_ERR_VALUE);
    lens_free(&r);
    loaded_model_free(&t);
}
END_TEST

/* ---- transformer blocks (MLP, LayerNorm) ---- */
static const struct {
    const char *task;
    int seq_len, layers;
    qkv_act act;
    bool norm;
} blocks[] = {
    {"induction", 16, 2, QKV_ACT_RELU, true},
    {"reverse", 8, 2, QKV_ACT_GELU, false},
    {"translate", 8, 1, QKV_ACT_GELU_TANH, true},
};
#define NBLOCKS (int)(sizeof blocks / sizeof blocks[0])

/* A block model with random weights, biases and LayerNorm gains that are not 0 and 1. */
static void make_block_model(loaded_model *t, int i, qkv_dtype dt) {
    train_config c = make_config(blocks[i].task, blocks[i].seq_len, 16, 2, blocks[i].layers,
                                 true, dt);
    c.model.mlp = 24;
    c.model.act = blocks[i].act;
    c.model.norm = blocks[i].norm ? QKV_NORM_LAYERNORM : QKV_NORM_NONE;
    trainer fresh;
    ck_assert_int_eq(trainer_init(&fresh, &c), QKV_OK);
    loaded_model_take(t, &fresh);
    qkv_model *m = &t->model;
    for (int i_param = 0; i_param < m->nparams; i_param++) {
        qkv_tensor *p = m->param[i_param];
        if (p->ndim != 1) continue; /* biases and gains: 1 + or 0 + a pattern */
        bool gain = strstr(m->param_name[i_param], "gain") != NULL;
        for (int64_t v = 0; v < p->size; v++)
            qkv_set(p, v, (gain ? 1 : 0) + 0.25 * (double)(v % 7 - 3));
    }
}

/* On MLP and LayerNorm models, in f64: the probe is the forward bit for bit; the DLA parts
 * (embedding, heads, MLPs or their neurons and biases, bias) add up to the logit to 1e-12 and
 * a layer's neurons and bias to its MLP's part; the lens's last row is the model's logits;
 * patching resid-post of the last layer at the metric position gives the clean metric
 * exactly (share 1). */
START_TEST(test_block_identities) {
    loaded_model t;
    make_block_model(&t, _i, QKV_F64);
    const qkv_model_config *c = &t.model.cfg;
    int V = c->vocab, L = c->layers, To = t.target_len;
    qkv_tensor *attn[QKV_MAX_LAYERS];
    qkv_tensor *want = qkv_model_forward_padded(&t.model, ctx, t.held_tokens, NULL, 2, attn);
    qkv_probe probe = {0};
    qkv_tensor *got = qkv_model_forward_probe(&t.model, ctx, t.held_tokens, NULL, 2, &probe);
    for (int64_t k = 0; k < want->size; k++) ck_assert(qkv_get(got, k) == qkv_get(want, k));
    for (int l = 0; l < L; l++)
        ck_assert(probe.mlp_pre[l] && probe.mlp_post[l] && probe.mlp_out[l] && probe.resid_mid[l]);
    double worst = 0;
    explain_input in;
    heldout_input(&t, 0, &in);
    double *logits = malloc((size_t)V * sizeof *logits);
    double *scratch = malloc((size_t)c->d_model * sizeof *scratch);
    for (int p = 0; p < To; p++) {
        dla_result whole, split;
        ck_assert_int_eq(explain_attribute(&t, &in, p, -1, false, &whole), QKV_OK);
        ck_assert_int_eq(explain_attribute(&t, &in, p, whole.token, true, &split), QKV_OK);
        ck_assert(whole.logit == split.logit);
        ck_assert_int_eq(split.n_parts, whole.n_parts + L * c->mlp);
        double scale = fmax(1, fabs(whole.logit));
        worst = fmax(worst, fabs(whole.sum - whole.logit) / scale);
        worst = fmax(worst, fabs(split.sum - split.logit) / scale);
        for (int k = 0, q = 0; k < whole.n_parts; k++) { /* the MLP's part, neuron by neuron */
            const dla_part *w = &whole.parts[k];
            if (w->layer < 0 || w->head >= 0) {
                ck_assert_str_eq(w->name, split.parts[q++].name);
                continue;
            }
            double sum = 0;
            for (int u = 0; u <= c->mlp; u++, q++) {
                ck_assert_int_eq(split.parts[q].neuron, u < c->mlp ? u : -1);
                sum += split.parts[q].value;
            }
            worst = fmax(worst, fabs(sum - w->value) / scale);
        }
        { /* a neuron's part: its activation times its row of the neuron-logit map (with
           * LayerNorm folded into it) times the final LayerNorm's scale */
            double *map = malloc((size_t)c->mlp * V * sizeof *map);
            qkv_probe one = {0};
            qkv_model_forward_probe(&t.model, ctx, in.tokens, NULL, 1, &one);
            for (int k = 0; k < split.n_parts; k++) {
                const dla_part *q = &split.parts[k];
                if (q->neuron < 0) continue;
                ck_assert_int_eq(qkv_neuron_logits(&t.model, q->layer, map), QKV_OK);
                double post = qkv_get(one.mlp_post[q->layer], (int64_t)p * c->mlp + q->neuron);
                worst = fmax(worst, fabs(q->value - post * split.final_scale *
                                                        map[(size_t)q->neuron * V + split.token]) /
                                        scale);
            }
            free(map);
        }
        explain_attribute_free(&whole);
        explain_attribute_free(&split);
    }
    qkv_ctx_reset(ctx);
    qkv_probe one = {0};
    qkv_tensor *out = qkv_model_forward_probe(&t.model, ctx, in.tokens, NULL, 1, &one);
    for (int p = 0; p < To; p++) {
        model_unembed(&t.model, one.stream[L], p, logits, scratch);
        for (int j = 0; j < V; j++)
            worst = fmax(worst, fabs(logits[j] - qkv_get(out, (int64_t)p * V + j)) /
                                    fmax(1, fabs(qkv_get(out, (int64_t)p * V + j))));
    }
    ck_assert_msg(worst <= 1e-12, "%s: off by %.3g", blocks[_i].task, worst);
    /* resid-post of the last layer at the metric position, from the clean run */
    explain_input corrupt;
    heldout_input(&t, 1, &corrupt);
    int p = To - 1;
    qkv_probe cp = {0};
    qkv_tensor *cl = qkv_model_forward_probe(&t.model, ctx, in.tokens, NULL, 1, &cp);
    qkv_head_edit e = {QKV_HEAD_REPLACE, L - 1, 0, p, cp.resid_post[L - 1], QKV_SITE_RESID_POST,
                       -1, 0};
    qkv_probe pp = {.edits = &e, .n_edits = 1};
    qkv_tensor *patched = qkv_model_forward_probe(&t.model, ctx, corrupt.tokens, NULL, 1, &pp);
    ck_assert(metric(patched, p, 0, 1) == metric(cl, p, 0, 1));
    free(logits);
    free(scratch);
    loaded_model_free(&t);
}
END_TEST

/* The MLP's sites on block models (f64): resid-mid and resid-post of the last layer at the
 * metric position carry all of it (the MLP and the LayerNorms read one position), so their
 * exact share there is 1; without LayerNorm the metric is linear in the last layer's mlp-post
 * (a neuron at a time) and mlp-out, so attribution equals exact patching there (1e-9); the
 * neurons' rows are one per neuron; a site the model lacks or an --over it does not take is
 * refused. */
START_TEST(test_block_sites) {
    loaded_model t;
    make_block_model(&t, _i, QKV_F64);
    const qkv_model_config *c = &t.model.cfg;
    explain_input in[2];
    heldout_input(&t, 0, &in[0]);
    heldout_input(&t, 1, &in[1]);
    patch_metric m = {t.target_len - 1, 0, 1};
    const struct { qkv_site site; explain_over over; } cases[] = {
        {QKV_SITE_RESID_MID, EXPLAIN_OVER_LAYER_POSITION},
        {QKV_SITE_RESID_POST, EXPLAIN_OVER_LAYER_POSITION},
        {QKV_SITE_MLP_OUT, EXPLAIN_OVER_LAYER_POSITION},
        {QKV_SITE_MLP_POST, EXPLAIN_OVER_NEURON},
        {QKV_SITE_MLP_PRE, EXPLAIN_OVER_NEURON_POSITION}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ck_assert_int_eq(explain_check_site(&t, cases[k].site, cases[k].over), QKV_OK);
        patch_result r = {.site = cases[k].site, .over = cases[k].over, .exact = true,
                          .attribution = true};
        ck_assert_int_eq(patch_of(&t, &in[0], &in[1], &m, 1, &r), QKV_OK);
        int per = cases[k].over == EXPLAIN_OVER_NEURON ? c->mlp
                  : cases[k].over == EXPLAIN_OVER_NEURON_POSITION ? c->mlp * t.target_len
                                                                  : t.target_len;
        ck_assert_int_eq(r.n_rows, c->layers * per);
        bool linear = !blocks[_i].norm && (cases[k].site == QKV_SITE_MLP_OUT ||
                                           cases[k].site == QKV_SITE_MLP_POST);
        for (int i = 0; i < r.n_rows; i++) {
            const explain_spot *s = &r.rows[i].spot;
            bool by_neuron = cases[k].over != EXPLAIN_OVER_LAYER_POSITION;
            ck_assert_int_eq(s->head, -1);
            ck_assert(by_neuron ? s->neuron >= 0 && s->neuron < c->mlp : s->neuron == -1);
            if (s->layer != c->layers - 1) continue;
            if (linear)
                ck_assert_msg(fabs(r.rows[i].exact - r.rows[i].attribution) <= 1e-9,
                              "%s %s row %d: exact %.15g attribution %.15g", blocks[_i].task,
                              explain_site_names[cases[k].site], i, r.rows[i].exact,
                              r.rows[i].attribution);
            if ((cases[k].site == QKV_SITE_RESID_MID || cases[k].site == QKV_SITE_RESID_POST) &&
                s->position == m.position)
                ck_assert_msg(fabs(r.rows[i].exact - 1) <= 1e-12, "%.15g", r.rows[i].exact);
        }
        explain_patch_free(&r);
    }
    ck_assert_int_eq(explain_check_site(&t, QKV_SITE_MLP_OUT, EXPLAIN_OVER_NEURON), QKV_ERR_VALUE);
    ck_assert_int_eq(explain_check_site(&t, QKV_SITE_Z, EXPLAIN_OVER_NEURON), QKV_ERR_VALUE);
    ck_assert_int_eq(explain_check_site(&t, QKV_SITE_MLP_PRE, EXPLAIN_OVER_HEAD), QKV_ERR_VALUE);
    loaded_model_free(&t);
    loaded_model attention_only;
    make_model(&attention_only, 0, QKV_F64);
    ck_assert_int_eq(explain_check_site(&attention_only, QKV_SITE_MLP_POST, EXPLAIN_OVER_NEURON),
                     QKV_ERR_VALUE);
    ck_assert_int_eq(explain_check_site(&attention_only, QKV_SITE_RESID_MID,
                                        EXPLAIN_OVER_LAYER_POSITION), QKV_ERR_VALUE);
    loaded_model_free(&attention_only);
}
END_TEST

/* The metric of a corrupted input under one edit: site of layer l (head h, or -1) at every
 * position, replaced by `value`. */
static double edited_metric(loaded_model *t, const explain_input *corrupt, qkv_site site, int l,
                            int h, const qkv_tensor *value, const patch_metric *m) {
    qkv_head_edit e = {.kind = QKV_HEAD_REPLACE, .layer = l, .head = h, .position = -1,
                       .value = value, .site = site, .key_position = -1};
    qkv_probe pp = {.edits = &e, .n_edits = 1};
    qkv_tensor *out = qkv_model_forward_probe(&t->model, ctx, corrupt->tokens, NULL, 1, &pp);
    return metric(out, m->position, m->answer, m->wrong);
}

/* Path patching on block models, in f64. The paths: every head and MLP a sender, each MLP a
 * receiver of the heads of its own layer and earlier and of the MLPs before it (by mlp-pre),
 * each later head one by q (and k, v where the keys read the stream). Identities: (1) the
 * last MLP's path to the logits is patching its whole output (mlp-out, every position); (2)
 * without LayerNorm the logits are linear in the stream: every path into them has its
 * attribution equal to its exact share, and a last-layer head's two paths (to its MLP and to
 * the logits) add up to patching its whole z; (3) a sender whose clean and corrupted outputs
 * are equal (a head with W_V's columns 0, an MLP with W_out 0) leaves the corrupted metric as
 * it is: share 0 and attribution 0 on every path from it, bit for bit. Each to 1e-12. */
START_TEST(test_block_paths) {
    loaded_model t;
    make_block_model(&t, _i, QKV_F64);
    const qkv_model_config *c = &t.model.cfg;
    int L = c->layers, H = c->heads, To = t.target_len, vias = c->target_len ? 1 : 3;
    bool ln = blocks[_i].norm;
    explain_input in[2];
    heldout_input(&t, 0, &in[0]);
    heldout_input(&t, 1, &in[1]);
    patch_metric m = {To - 1, 0, 1};
    patch_result r = {.paths = true, .exact = true, .attribution = true};
    ck_assert_int_eq(patch_of(&t, &in[0], &in[1], &m, 1, &r), QKV_OK);
    /* the list: each head of layer ls reaches L - ls MLPs, (L - 1 - ls)·H heads by each via
     * and the logits; each MLP one MLP fewer */
    int want = 0;
    for (int ls = 0; ls < L; ls++)
        want += H * ((L - ls) + (L - 1 - ls) * H * vias + 1) + (L - 1 - ls) * (1 + H * vias) + 1;
    ck_assert_int_eq(r.n_paths, want);
    double diff = r.clean - r.corrupt, worst = 0;
    qkv_probe cl = {0};
    qkv_model_forward_probe(&t.model, ctx, in[0].tokens, NULL, 1, &cl);
    for (int k = 0; k < r.n_paths; k++) {
        const patch_path *p = &r.path[k];
        if (p->receiver_layer >= 0) {
            bool mlp = p->via == QKV_SITE_MLP_PRE;
            ck_assert(mlp ? p->receiver_head == -1 && (p->receiver_layer > p->sender_layer ||
                                                       (p->receiver_layer == p->sender_layer &&
                                                        p->sender_head >= 0))
                          : p->receiver_head >= 0 && p->receiver_layer > p->sender_layer);
            continue;
        }
        if (!ln) /* (2): the logits are linear in the stream */
            worst = fmax(worst, fabs(p->exact - p->attribution));
        if (p->sender_layer == L - 1 && p->sender_head < 0) { /* (1) */
            double got = edited_metric(&t, &in[1], QKV_SITE_MLP_OUT, L - 1, -1,
                                       cl.mlp_out[L - 1], &m);
            worst = fmax(worst, fabs(p->exact - (got - r.corrupt) / diff));
        }
        if (!ln && p->sender_layer == L - 1 && p->sender_head >= 0) { /* (2): its two paths */
            double to_mlp = NAN, got = edited_metric(&t, &in[1], QKV_SITE_Z, L - 1,
                                                     p->sender_head, cl.z[L - 1], &m);
            for (int q = 0; q < r.n_paths; q++)
                if (r.path[q].sender_layer == L - 1 && r.path[q].sender_head == p->sender_head &&
                    r.path[q].via == QKV_SITE_MLP_PRE)
                    to_mlp = r.path[q].exact;
            worst = fmax(worst, fabs(p->exact + to_mlp - (got - r.corrupt) / diff));
        }
    }
    ck_assert_msg(worst <= 1e-12, "%s: paths off by %.3g", blocks[_i].task, worst);
    printf("block paths, %s: %d paths, identities within %.2g\n", blocks[_i].task, r.n_paths,
           worst);
    explain_patch_free(&r);
    /* (3): head 1.1 writes 0 on both inputs, MLP 1 its b_out alone */
    int C = c->d_model, Dk = C / H;
    for (int j = 0; j < C; j++)
        for (int d = 0; d < Dk; d++) qkv_set(t.model.w_v[0], (int64_t)j * C + d, 0.0);
    for (int64_t i = 0; i < t.model.mlp_w_out[0]->size; i++) qkv_set(t.model.mlp_w_out[0], i, 0.0);
    r = (patch_result){.paths = true, .exact = true, .attribution = true};
    ck_assert_int_eq(patch_of(&t, &in[0], &in[1], &m, 1, &r), QKV_OK);
    int silent = 0;
    for (int k = 0; k < r.n_paths; k++) {
        const patch_path *p = &r.path[k];
        if (p->sender_layer != 0 || p->sender_head > 0) continue; /* 1.1 and MLP 1 */
        ck_assert_msg(r.pair_patched[k] == r.pair_corrupt[0] && p->exact == 0 &&
                          p->attribution == 0,
                      "%s path %d: patched %.17g corrupt %.17g attribution %.3g",
                      blocks[_i].task, k, r.pair_patched[k], r.pair_corrupt[0], p->attribution);
        silent++;
    }
    ck_assert_int_gt(silent, 2);
    explain_patch_free(&r);
    loaded_model_free(&t);
}
END_TEST

/* ln-scale, each LayerNorm's 1/sigma, on block models (f64). Its rows name every LayerNorm
 * (before each attention, before each MLP, the final one on the last layer). Patching the
 * scales with the corrupted run's own values gives the corrupted metric exactly, one at a
 * time and all at once, and mean-ablating them over one example gives the baseline exactly
 * (the mean of one is itself). The final LayerNorm reads one position and its logits are
 * linear in its scale: its row's attribution is its exact share (1e-9); by position, its
 * rows at every other position than the metric's are 0, exact and attribution, exactly; and
 * its scale zeroed leaves the logits its bias part alone (model_logit_bias: the LayerNorm
 * outputs its bias). A model without LayerNorm refuses the site. */
START_TEST(test_ln_scale) {
    loaded_model t;
    make_block_model(&t, _i, QKV_F64);
    const qkv_model_config *c = &t.model.cfg;
    if (!blocks[_i].norm) {
        ck_assert_int_eq(explain_check_site(&t, QKV_SITE_LN_SCALE, EXPLAIN_OVER_LN),
                         QKV_ERR_VALUE);
        ck_assert_ptr_nonnull(strstr(qkv_last_error(), "has no LayerNorm"));
        loaded_model_free(&t);
        return;
    }
    ck_assert_int_eq(explain_check_site(&t, QKV_SITE_LN_SCALE, EXPLAIN_OVER_LN_POSITION), QKV_OK);
    ck_assert_int_eq(explain_check_site(&t, QKV_SITE_LN_SCALE, EXPLAIN_OVER_HEAD), QKV_ERR_VALUE);
    ck_assert_int_eq(explain_check_site(&t, QKV_SITE_Z, EXPLAIN_OVER_LN), QKV_ERR_VALUE);
    int L = c->layers, To = t.target_len, V = c->vocab;
    explain_input in[2];
    heldout_input(&t, 0, &in[0]);
    heldout_input(&t, 1, &in[1]);
    patch_metric m = {To - 1, 0, 1};
    /* the corrupted run's own scales */
    qkv_probe xp = {0};
    qkv_tensor *xl = qkv_model_forward_probe(&t.model, ctx, in[1].tokens, NULL, 1, &xp);
    qkv_head_edit own[QKV_MAX_LAYERS * QKV_LNS];
    int n = 0;
    for (int l = 0; l < L; l++)
        for (int u = 0; u < QKV_LNS; u++)
            if (xp.ln_scale[l][u])
                own[n++] = (qkv_head_edit){.kind = QKV_HEAD_REPLACE, .layer = l, .position = -1,
                                           .value = xp.ln_scale[l][u],
                                           .site = QKV_SITE_LN_SCALE, .ln = (qkv_ln)u};
    ck_assert_int_eq(n, 2 * L + 1);
    ck_assert_ptr_nonnull(xp.ln_scale[L - 1][QKV_LN_FINAL]);
    for (int k = 0; k <= n; k++) {
        qkv_probe pp = {.edits = k < n ? &own[k] : own, .n_edits = k < n ? 1 : n};
        qkv_tensor *pl = qkv_model_forward_probe(&t.model, ctx, in[1].tokens, NULL, 1, &pp);
        ck_assert(metric(pl, m.position, 0, 1) == metric(xl, m.position, 0, 1));
    }
    /* the final scale zeroed: the bias part alone, at every position */
    qkv_head_edit zero = {.kind = QKV_HEAD_ZERO, .layer = L - 1, .position = -1,
                          .site = QKV_SITE_LN_SCALE, .ln = QKV_LN_FINAL};
    qkv_probe zp = {.edits = &zero, .n_edits = 1};
    qkv_tensor *zl = qkv_model_forward_probe(&t.model, ctx, in[1].tokens, NULL, 1, &zp);
    for (int64_t k = 0; k < zl->size; k++) {
        double want = model_logit_bias(&t.model, (int)(k % V));
        ck_assert_msg(fabs(qkv_get(zl, k) - want) <= 1e-12 * fmax(1, fabs(want)),
                      "logit %lld: %.15g, its bias part %.15g", (long long)k, qkv_get(zl, k), want);
    }
    /* the rows, and the final LayerNorm's */
    for (int by_position = 0; by_position < 2; by_position++) {
        patch_result r = {.site = QKV_SITE_LN_SCALE,
                          .over = by_position ? EXPLAIN_OVER_LN_POSITION : EXPLAIN_OVER_LN,
                          .exact = true, .attribution = true};
        ck_assert_int_eq(patch_of(&t, &in[0], &in[1], &m, 1, &r), QKV_OK);
        int per = by_position ? To : 1;
        ck_assert_int_eq(r.n_rows, n * per);
        for (int i = 0; i < r.n_rows; i++) {
            const explain_spot *sp = &r.rows[i].spot;
            const qkv_head_edit *e = &own[i / per];
            ck_assert(sp->site == QKV_SITE_LN_SCALE && sp->layer == e->layer &&
                      sp->ln == e->ln && sp->head == -1 && sp->neuron == -1 &&
                      sp->key_position == -1 && sp->position == (by_position ? i % per : -1));
            if (sp->ln != QKV_LN_FINAL) continue;
            if (by_position && sp->position != m.position) {
                ck_assert(r.rows[i].exact == 0 && r.rows[i].attribution == 0);
                continue;
            }
            ck_assert_msg(fabs(r.rows[i].exact - r.rows[i].attribution) <= 1e-9,
                          "%s final LayerNorm row %d: exact %.15g attribution %.15g",
                          blocks[_i].task, i, r.rows[i].exact, r.rows[i].attribution);
            ck_assert(fabs(r.rows[i].exact) > 1e-6); /* it does move the metric */
        }
        explain_patch_free(&r);
    }
    /* mean ablation over one example */
    example_set set = loaded_model_heldout(&t);
    set.n = 1;
    ablate_request rq = {.mean = true, .site = QKV_SITE_LN_SCALE,
                         .over = EXPLAIN_OVER_LN_POSITION, .together = true};
    ablate_result ar;
    ck_assert_int_eq(explain_ablate(&t, &set, &rq, &ar), QKV_OK);
    ck_assert_int_eq(ar.n, n * To);
    for (int i = 0; i < ar.n; i++) ck_assert(ar.each[i].loss == ar.baseline.loss);
    ck_assert(ar.together.loss == ar.baseline.loss);
    explain_ablate_free(&ar);
    loaded_model_free(&t);
}
END_TEST

static Suite *explain_suite(void) {
    Suite *s = suite_create("explain");
    TCase *tc = tcase_create("exact");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_probe_is_the_forward, 0, NMODELS);
    tcase_add_loop_test(tc, test_probe_hook, 0, NMODELS);
    tcase_add_loop_test(tc, test_dla_adds_up, 0, NMODELS);
    tcase_add_test(tc, test_ablating_nothing_changes_nothing);
    tcase_add_test(tc, test_every_head_of_a_wide_layer);
    tcase_add_loop_test(tc, test_patching_everything_recovers_all, 0, NMODELS);
    tcase_add_test(tc, test_metric_gradients);
    tcase_add_loop_test(tc, test_metrics_together, 0, NMODELS);
    tcase_add_test(tc, test_resample_of_copies);
    tcase_add_loop_test(tc, test_attribution_is_exact_on_the_last_layer, 0, NMODELS);
    tcase_add_loop_test(tc, test_linear_sites_agree, 0, NMODELS);
    tcase_add_loop_test(tc, test_pairs_are_means_of_single_pairs, 0, NMODELS);
    tcase_add_loop_test(tc, test_path_identities, 0, NMODELS);
    tcase_add_loop_test(tc, test_lens_identities, 0, NMODELS);
    tcase_add_loop_test(tc, test_block_identities, 0, 1); /* the others: "blocks" below */
    tcase_add_loop_test(tc, test_block_paths, 1, 2);
    suite_add_tcase(s, tc);
    /* the other block models and the MLP's sites: "slow", so that valgrind, which runs the
     * block forward and its readouts in the case above, skips them */
    tc = tcase_create("blocks");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_tags(tc, "slow");
    tcase_add_loop_test(tc, test_block_identities, 1, NBLOCKS);
    tcase_add_loop_test(tc, test_block_sites, 0, NBLOCKS);
    tcase_add_loop_test(tc, test_block_paths, 0, 1);
    tcase_add_loop_test(tc, test_block_paths, 2, NBLOCKS);
    tcase_add_loop_test(tc, test_ln_scale, 0, NBLOCKS);
    suite_add_tcase(s, tc);

    tc = tcase_create("trained");
    /* 600 training steps: left out under valgrind and qemu (.ci/run), as test_train's
     * learning runs are */
    tcase_set_tags(tc, "slow long");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_induction_targets);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return run_suite(explain_suite()); }
