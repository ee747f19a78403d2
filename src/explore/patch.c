/* patch.c - activation patching, exact and by attribution, and path patching, over pairs of
 * clean and corrupted inputs (explain.h). */
#include "explore/explain.h"
#include "explore/explain_internal.h"
#include "engine/engine.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Σ (a - b) · d metric/d site over spot s's entries of sequence `seq`: a and b the site's
 * tensor on two runs, `graph` the recorded run's (its gradient). */
static double spot_dot(const explain_spot *s, const qkv_tensor *a, const qkv_tensor *b,
                       const qkv_tensor *graph, int64_t seq) {
    qkv_head_edit e = explain_spot_edit(s, QKV_HEAD_REPLACE, a);
    bool headless = !explain_site_has_heads(s->site);
    int64_t G = headless ? 1 : a->shape[1], R = a->shape[a->ndim - 2], W = a->shape[a->ndim - 1];
    int64_t g = headless ? 0 : e.head;
    int64_t i0 = e.position < 0 ? 0 : e.position, i1 = e.position < 0 ? R : i0 + 1;
    int64_t j0 = e.key_position < 0 ? 0 : e.key_position, j1 = e.key_position < 0 ? W : j0 + 1;
    double sum = 0;
    for (int64_t i = i0; i < i1; i++)
        for (int64_t j = j0; j < j1; j++) {
            int64_t at = ((seq * G + g) * R + i) * W + j;
            sum += (qkv_get(a, at) - qkv_get(b, at)) * qkv_grad_get(graph, at);
        }
    return sum;
}

/* "the clean run" (one pair) or "the clean run of pair 7" into buf. */
static const char *run_name(const char *run, int pair, int n_pairs, char *buf, size_t len) {
    if (n_pairs == 1) snprintf(buf, len, "%s", run);
    else snprintf(buf, len, "%s of pair %d", run, pair + 1);
    return buf;
}

/* What a patching run of one batch keeps: the site's tensor of every layer (and unit:
 * explain_site_units, each LayerNorm's for ln-scale) on the clean and the corrupted inputs
 * (paths: z, and each MLP's output), the corrupted run's graph (its gradients, for
 * attribution); and what the metric reads besides a run's logits. */
typedef struct {
    qkv_ctx *keep, *graph, *record;
    qkv_tensor *clean[QKV_MAX_LAYERS][QKV_LNS], *corrupt[QKV_MAX_LAYERS][QKV_LNS];
    qkv_tensor *clean_mlp[QKV_MAX_LAYERS], *corrupt_mlp[QKV_MAX_LAYERS]; /* paths: mlp-out */
    qkv_probe cp;                  /* the corrupted run's probe, in graph */
    double *metric;                /* (pairs): a patched run's metric */
    explain_metric kind;           /* what the metric is */
    double *ref;                   /* kl: (pairs, V) each clean run's log softmax at its position */
    double *row;                   /* (V): a row of logits */
    double *weight;                /* (B, V): d metric / d logits of the corrupted run */
} patch_batch;

static const char *const metric_text[] = {"logit difference", "loss", "probability",
                                          "KL divergence"};

/* Sequence b's metric at its position (logit[answer] - logit[wrong], or pb->kind's), of a
 * run's logits (B, To, V), into *m, after check_logit of the logits it reads: both of the
 * logit difference, every one of the others (`run` names the run). */
static qkv_status metric_of(const loaded_model *lm, const patch_batch *pb,
                            const qkv_tensor *logits, int b, int pair, const patch_metric *pm,
                            const char *run, double *m) {
    int64_t To = logits->shape[1], V = logits->shape[2];
    int64_t row = ((int64_t)b * To + pm->position) * V;
    qkv_status s = QKV_OK;
    if (pb->kind == EXPLAIN_METRIC_LOGIT_DIFF) {
        s = explain_check_logit(lm, logits, b, pm->position, pm->answer, run);
        if (s == QKV_OK) s = explain_check_logit(lm, logits, b, pm->position, pm->wrong, run);
        *m = qkv_get(logits, row + pm->answer) - qkv_get(logits, row + pm->wrong);
    } else {
        for (int64_t j = 0; j < V && s == QKV_OK; j++) {
            pb->row[j] = qkv_get(logits, row + j);
            s = explain_check_logit(lm, logits, b, pm->position, (int)j, run);
        }
        *m = s == QKV_OK ? explain_metric_of(pb->kind, pb->row, (int)V, pm->answer, pm->wrong,
                                             pb->ref ? pb->ref + (size_t)pair * V : NULL)
                         : NAN;
    }
    return s == QKV_OK ? explain_check_finite(*m, "the metric (%s) in %s", metric_text[pb->kind],
                                              run)
                       : s;
}

/* Every pair's metric of one batch's run (pairs first .. first+B-1) into m[first ..]. */
static qkv_status batch_metric(const loaded_model *lm, const patch_batch *pb,
                               const qkv_tensor *logits, const patch_pairs *pairs, int first,
                               const char *run, double *m) {
    char name[160];
    qkv_status s = QKV_OK;
    for (int b = 0; s == QKV_OK && b < logits->shape[0]; b++)
        s = metric_of(lm, pb, logits, b, first + b, &pairs->metric[first + b],
                      run_name(run, first + b, pairs->n, name, sizeof name), &m[first + b]);
    return s;
}

/* kl: each pair's reference, the clean run's log softmax at its position, from the clean
 * run's logits (B, To, V) of pairs first .. first+B-1. */
static void fill_reference(const patch_batch *pb, const qkv_tensor *logits,
                           const patch_pairs *pairs, int first) {
    int64_t To = logits->shape[1], V = logits->shape[2];
    for (int b = 0; b < logits->shape[0]; b++) {
        int64_t row = ((int64_t)b * To + pairs->metric[first + b].position) * V;
        for (int64_t j = 0; j < V; j++) pb->row[j] = qkv_get(logits, row + j);
        explain_log_softmax(pb->row, (int)V, pb->ref + (size_t)(first + b) * V);
    }
}

/* A copy in keep of tensor x (its data; no graph). */
static qkv_tensor *kept(qkv_ctx *keep, const qkv_tensor *x) {
    qkv_tensor *out = qkv_new(keep, x->dtype, x->ndim, x->shape);
    memcpy(out->data, x->data, (size_t)x->size * qkv_dtype_size(x->dtype));
    return out;
}

/* Pearson's correlation of n pairs (x[i * stride], y[i * stride]), the finite ones; NAN
 * with fewer than two or a constant column. */
static double pearson(const double *x, const double *y, int n, int stride) {
    double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
    int k = 0;
    for (int i = 0; i < n; i++) {
        double a = x[i * stride], b = y[i * stride];
        if (!isfinite(a) || !isfinite(b)) continue;
        sx += a, sy += b, sxx += a * a, syy += b * b, sxy += a * b, k++;
    }
    if (k < 2) return NAN;
    double cov = sxy - sx * sy / k, vx = sxx - sx * sx / k, vy = syy - sy * sy / k;
    return vx > 0 && vy > 0 ? cov / sqrt(vx * vy) : NAN;
}

int explain_patch_items(const patch_result *r) {
    return r->paths ? r->n_paths : r->n_rows;
}

int explain_patch_columns(const patch_result *r) {
    return explain_patch_items(r) + (r->together ? 1 : 0);
}

/* The paths of a model. Senders: every head and every MLP. Receivers of a sender of layer
 * ls: each head of a later layer its output reaches (through the residual stream any later
 * layer, else the next) by q, and by k and v where the keys read the stream (not an
 * encoder-decoder's); each MLP that reads the stream after it (of layer ls itself after a
 * head, of a later layer after an MLP); and the logits (every layer with the residual stream,
 * else the last). By sender (each layer's heads, then its MLP), then receiver in the order of
 * the forward. (n) malloc'd into *paths. */
static qkv_status list_paths(const loaded_model *lm, patch_path **paths, int *n) {
    const qkv_model_config *c = &lm->model.cfg;
    int L = c->layers, H = c->heads, vias = c->target_len ? 1 : 3, M = c->mlp > 0;
    *paths = malloc((size_t)(L * (H + M)) * (size_t)(L * (H * vias + M) + 1) * sizeof **paths);
    if (!*paths) return qkv_fail(QKV_ERR_NOMEM, "patch: out of memory for the paths");
    *n = 0;
    for (int ls = 0; ls < L; ls++)
        for (int s = 0; s < H + M; s++) {
            int hs = s < H ? s : -1; /* -1: the layer's MLP */
            for (int lr = ls; lr < L && (c->residual || lr <= ls + 1); lr++) {
                for (int hr = 0; lr > ls && hr < H; hr++)
                    for (int v = 0; v < vias; v++)
                        (*paths)[(*n)++] = (patch_path){ls, hs, lr, hr, QKV_SITE_Q + v, NAN, NAN};
                if (M && (lr > ls || hs >= 0))
                    (*paths)[(*n)++] = (patch_path){ls, hs, lr, -1, QKV_SITE_MLP_PRE, NAN, NAN};
            }
            if (c->residual || ls == L - 1)
                (*paths)[(*n)++] = (patch_path){ls, hs, -1, -1, QKV_SITE_Z, NAN, NAN};
        }
    return QKV_OK;
}

/* The corrupted run's patched metric for the batch (pairs first .. first+B-1) under `edits`,
 * into m[first ..]. */
static qkv_status patched_run(loaded_model *lm, const patch_batch *pb, const patch_pairs *pairs,
                              int first, int B, const qkv_head_edit *edits, int n_edits,
                              const char *run, double *m) {
    int T = lm->model.cfg.seq_len;
    qkv_ctx_reset(lm->ctx);
    qkv_probe pp = {.edits = edits, .n_edits = n_edits};
    qkv_tensor *logits = qkv_model_forward_probe(
        &lm->model, lm->ctx, pairs->corrupt + (size_t)first * T,
        pairs->corrupt_len ? pairs->corrupt_len + first : NULL, B, &pp);
    return batch_metric(lm, pb, logits, pairs, first, run, m);
}

/* Spots: each spot's exact patched metric and attribution for the batch's pairs; with
 * together, every spot's at once (the last column): one run under every edit, and the sum of
 * the spots' attributions (their entries do not overlap: the linear term of the union). */
static qkv_status patch_spots(loaded_model *lm, const patch_pairs *pairs, int first, int B,
                              patch_batch *pb, patch_result *r) {
    int cols = explain_patch_columns(r);
    qkv_head_edit *all = r->together ? malloc((size_t)(r->n_rows ? r->n_rows : 1) * sizeof *all)
                                     : NULL;
    qkv_status s = !r->together || all ? QKV_OK : qkv_fail(QKV_ERR_NOMEM, "patch: out of memory");
    for (int k = 0; k < r->n_rows && s == QKV_OK; k++) {
        const explain_spot *sp = &r->rows[k].spot;
        int u = explain_spot_unit(sp);
        char where[128], run[192];
        explain_spot_text(sp, where, sizeof where);
        snprintf(run, sizeof run, "the corrupted run with the clean %s patched in", where);
        qkv_head_edit e = explain_spot_edit(sp, QKV_HEAD_REPLACE, pb->clean[sp->layer][u]);
        if (all) all[k] = e;
        if (r->exact) {
            s = patched_run(lm, pb, pairs, first, B, &e, 1, run, pb->metric);
            for (int b = 0; b < B; b++)
                r->pair_patched[(size_t)(first + b) * cols + k] = pb->metric[first + b];
        }
        for (int b = 0; r->attribution && s == QKV_OK && b < B; b++) {
            double a = spot_dot(sp, pb->clean[sp->layer][u], pb->corrupt[sp->layer][u],
                                explain_probe_tensor(&pb->cp, sp->site, sp->layer, u), b);
            r->pair_attribution[(size_t)(first + b) * cols + k] = a;
            s = explain_check_finite(a, "the attribution of %s (d metric / d site from the corrupted "
                             "run's backward pass)", where);
        }
    }
    if (all && s == QKV_OK && r->exact) {
        s = patched_run(lm, pb, pairs, first, B, all, r->n_rows, "the corrupted run with the "
                        "clean values of every listed head patched in", pb->metric);
        for (int b = 0; b < B; b++)
            r->pair_patched[(size_t)(first + b) * cols + r->n_rows] = pb->metric[first + b];
    }
    for (int b = 0; all && r->attribution && b < B; b++) {
        double a = 0;
        for (int k = 0; k < r->n_rows; k++)
            a += r->pair_attribution[(size_t)(first + b) * cols + k];
        r->pair_attribution[(size_t)(first + b) * cols + r->n_rows] = a;
    }
    free(all);
    return s;
}

/* "head 1.2" or "MLP 1", for messages. */
static const char *part_text(int layer, int head, char *buf, size_t len) {
    if (head >= 0) snprintf(buf, len, "head %d.%d", layer + 1, head + 1);
    else snprintf(buf, len, "MLP %d", layer + 1);
    return buf;
}

/* A path's receiver as the model reads it. */
static stream_receiver receiver_of(const patch_path *p) {
    if (p->receiver_layer < 0) return (stream_receiver){RECEIVER_LOGITS, -1, -1};
    if (p->via == QKV_SITE_MLP_PRE) return (stream_receiver){RECEIVER_MLP, p->receiver_layer, -1};
    return (stream_receiver){(receiver_kind)(RECEIVER_Q + (p->via - QKV_SITE_Q)),
                             p->receiver_layer, p->receiver_head};
}

/* Sequence b's attribution of path p, whose sender changes the stream by u (B, To, C):
 * Σ over the receiver's input of (what u does to it, model_receiver_delta) · d metric / d
 * input from the corrupted run's backward pass; for the logits, the change of logit[answer] -
 * logit[wrong] at the metric's position (of another metric: each logit's change times d
 * metric / d logit). out: the receiver's width (V for the logits), scratch 2·C. */
static double path_attribution(const loaded_model *lm, const patch_batch *pb,
                               const patch_path *p, const patch_metric *pm, const double *u,
                               int b, double *out, double *scratch) {
    const qkv_model *m = &lm->model;
    int C = m->cfg.d_model, To = lm->target_len;
    stream_receiver rc = receiver_of(p);
    if (rc.kind == RECEIVER_LOGITS && pb->kind != EXPLAIN_METRIC_LOGIT_DIFF) {
        /* every logit's change, weighted by d metric / d logit */
        int64_t row = (int64_t)b * To + pm->position;
        int V = m->cfg.vocab;
        model_receiver_delta(m, &pb->cp, &rc, row, u + (size_t)row * C, 0, V, out, scratch);
        double a = 0;
        for (int j = 0; j < V; j++) a += pb->weight[(size_t)b * V + j] * out[j];
        return a;
    }
    if (rc.kind == RECEIVER_LOGITS) {
        int64_t row = (int64_t)b * To + pm->position;
        double answer, wrong;
        model_receiver_delta(m, &pb->cp, &rc, row, u + (size_t)row * C, pm->answer, 1, &answer,
                             scratch);
        model_receiver_delta(m, &pb->cp, &rc, row, u + (size_t)row * C, pm->wrong, 1, &wrong,
                             scratch);
        return answer - wrong;
    }
    /* the receiver's input in the corrupted run, with its gradient: (B, H, rows, Dk) of a
     * head, (B, To, N) of an MLP */
    const qkv_tensor *graph = qkv_probe_site(&pb->cp, p->via, p->receiver_layer);
    bool head = rc.kind != RECEIVER_MLP;
    int64_t G = head ? graph->shape[1] : 1, g = head ? p->receiver_head : 0;
    int64_t rows = graph->shape[graph->ndim - 2], W = graph->shape[graph->ndim - 1];
    double a = 0;
    for (int64_t i = 0; i < rows; i++) {
        int64_t row = (int64_t)b * rows + i;
        model_receiver_delta(m, &pb->cp, &rc, row, u + (size_t)row * C, 0, (int)W, out,
                             scratch);
        for (int64_t d = 0; d < W; d++)
            a += out[d] * qkv_grad_get(graph, (((int64_t)b * G + g) * rows + i) * W + d);
    }
    return a;
}

/* Paths: for each sender, pass 2 (every head's z and every MLP's output frozen at the
 * corrupted run's but the sender's, which carries its clean one) records every receiver's
 * input and gives the logits path; pass 3 replaces only one receiver's input. Attribution:
 * what the sender's change of the stream does to the receiver's input (through its LayerNorm,
 * linearized at the corrupted run's stream) · d metric / d (R's input) from the corrupted
 * run's backward pass. */
static qkv_status patch_paths(loaded_model *lm, const patch_pairs *pairs, int first, int B,
                              patch_batch *pb, patch_result *r) {
    const qkv_model *m = &lm->model;
    const qkv_model_config *c = &m->cfg;
    int L = c->layers, H = c->heads, C = c->d_model, Dk = C / H, To = lm->target_len;
    int N = c->mlp, items = r->n_paths, V = c->vocab;
    int width = N > Dk ? N : Dk; /* the widest receiver's input (the logits: two at a time, */
    if (pb->kind != EXPLAIN_METRIC_LOGIT_DIFF && V > width) width = V; /* or all of them) */
    qkv_head_edit *edits = malloc((size_t)(L * (H + 1)) * sizeof *edits);
    double *u = malloc((size_t)B * To * C * sizeof *u); /* the sender's change of the stream */
    double *m2 = malloc((size_t)pairs->n * sizeof *m2);
    double *dz = malloc((size_t)Dk * sizeof *dz), *out = malloc((size_t)width * sizeof *out);
    double *scratch = malloc((size_t)2 * C * sizeof *scratch);
    qkv_status s = edits && u && m2 && dz && out && scratch
                       ? QKV_OK : qkv_fail(QKV_ERR_NOMEM, "patch: out of memory");
    for (int k = 0; k < items && s == QKV_OK;) {
        int ls = r->path[k].sender_layer, hs = r->path[k].sender_head, end = k;
        while (end < items && r->path[end].sender_layer == ls && r->path[end].sender_head == hs)
            end++;
        /* pass 2 */
        int n = 0;
        for (int l = 0; l < L; l++) {
            for (int h = 0; h < H; h++)
                edits[n++] = explain_spot_edit(&(explain_spot){QKV_SITE_Z, l, h, -1, -1, -1, 0},
                                       QKV_HEAD_REPLACE,
                                       l == ls && h == hs ? pb->clean[l][0] : pb->corrupt[l][0]);
            if (N > 0)
                edits[n++] = explain_spot_edit(
                    &(explain_spot){QKV_SITE_MLP_OUT, l, -1, -1, -1, -1, 0}, QKV_HEAD_REPLACE,
                    l == ls && hs < 0 ? pb->clean_mlp[l] : pb->corrupt_mlp[l]);
        }
        qkv_ctx_reset(pb->record);
        qkv_probe rec = {.edits = edits, .n_edits = n};
        qkv_tensor *logits = qkv_model_forward_probe(
            &lm->model, pb->record, pairs->corrupt + (size_t)first * c->seq_len,
            pairs->corrupt_len ? pairs->corrupt_len + first : NULL, B, &rec);
        char run[200], sender[32], receiver[32];
        part_text(ls, hs, sender, sizeof sender);
        snprintf(run, sizeof run, "the corrupted run with every head%s frozen but %s, which "
                 "carries its clean output", N > 0 ? " and MLP" : "",
                 hs >= 0 ? sender + strlen("head ") : sender);
        if ((s = batch_metric(lm, pb, logits, pairs, first, run, m2)) != QKV_OK) break;
        for (int b = 0; b < B; b++) /* u: the sender's clean output less its corrupted one */
            for (int i = 0; i < To; i++) {
                int64_t row = (int64_t)b * To + i;
                if (hs < 0) {
                    for (int j = 0; j < C; j++)
                        u[(size_t)row * C + j] = qkv_get(pb->clean_mlp[ls], row * C + j) -
                                                 qkv_get(pb->corrupt_mlp[ls], row * C + j);
                    continue;
                }
                for (int e = 0; e < Dk; e++) {
                    int64_t at = (((int64_t)b * H + hs) * To + i) * Dk + e;
                    dz[e] = qkv_get(pb->clean[ls][0], at) - qkv_get(pb->corrupt[ls][0], at);
                }
                model_head_write(m, ls, hs, dz, u + (size_t)row * C);
            }
        for (; k < end && s == QKV_OK; k++) {
            patch_path *p = &r->path[k];
            size_t at0 = (size_t)first * items + k;
            if (p->receiver_layer < 0) { /* the logits: pass 2 is the path */
                for (int b = 0; b < B; b++) {
                    r->pair_patched[at0 + (size_t)b * items] = m2[first + b];
                    if (r->attribution)
                        r->pair_attribution[at0 + (size_t)b * items] = path_attribution(
                            lm, pb, p, &pairs->metric[first + b], u, b, out, scratch);
                }
                continue;
            }
            int lr = p->receiver_layer, hr = p->receiver_head;
            const char *via = explain_site_names[p->via];
            part_text(lr, hr, receiver, sizeof receiver);
            if (r->exact) { /* pass 3: only the receiver's input as pass 2 recorded it */
                qkv_head_edit e = explain_spot_edit(&(explain_spot){p->via, lr, hr, -1, -1, -1, 0},
                                            QKV_HEAD_REPLACE, qkv_probe_site(&rec, p->via, lr));
                snprintf(run, sizeof run, "the corrupted run with the %s of %s as %s's clean "
                         "output alone makes it", via, receiver, sender);
                if ((s = patched_run(lm, pb, pairs, first, B, &e, 1, run, pb->metric)) != QKV_OK)
                    break;
                for (int b = 0; b < B; b++)
                    r->pair_patched[at0 + (size_t)b * items] = pb->metric[first + b];
            }
            for (int b = 0; r->attribution && b < B && s == QKV_OK; b++) {
                double a = path_attribution(lm, pb, p, &pairs->metric[first + b], u, b, out,
                                            scratch);
                r->pair_attribution[at0 + (size_t)b * items] = a;
                s = explain_check_finite(a, "the attribution of the path %s -> %s by %s", sender,
                                         receiver, via);
            }
        }
    }
    free(edits), free(u), free(m2), free(dz), free(out), free(scratch);
    return s;
}

static void batch_free(patch_batch *pb) {
    qkv_ctx_free(pb->keep), qkv_ctx_free(pb->graph), qkv_ctx_free(pb->record);
    free(pb->metric), free(pb->ref), free(pb->row), free(pb->weight);
}

/* The arenas and arrays of patching batches of up to B pairs; QKV_ERR_NOMEM. */
static qkv_status batch_init(loaded_model *lm, const patch_result *r, int n, int B,
                             patch_batch *pb) {
    const qkv_model_config *c = &lm->model.cfg;
    qkv_site site = r->paths ? QKV_SITE_Z : r->site;
    memset(pb, 0, sizeof *pb);
    qkv_status s = loaded_model_reserve(lm, n, NULL);
    if (s != QKV_OK) return s;
    double keep = 2 * explain_site_bytes(lm, site, B);
    if (r->paths && c->mlp > 0) keep += 2 * explain_site_bytes(lm, QKV_SITE_MLP_OUT, B);
    pb->keep = loaded_model_arena(keep, NULL);
    pb->graph = pb->keep ? loaded_model_arena(qkv_model_step_bytes(c, B), NULL) : NULL;
    if (r->paths && pb->graph) pb->record = loaded_model_arena(qkv_model_step_bytes(c, B), NULL);
    if (!pb->graph || (r->paths && !pb->record)) return QKV_ERR_NOMEM;
    int V = c->vocab;
    pb->kind = r->metric;
    pb->metric = malloc((size_t)n * sizeof *pb->metric);
    pb->row = malloc((size_t)V * sizeof *pb->row);
    pb->weight = malloc((size_t)B * V * sizeof *pb->weight);
    if (r->metric == EXPLAIN_METRIC_KL) pb->ref = malloc((size_t)n * V * sizeof *pb->ref);
    return pb->metric && pb->row && pb->weight && (r->metric != EXPLAIN_METRIC_KL || pb->ref)
               ? QKV_OK : qkv_fail(QKV_ERR_NOMEM, "patch: out of memory");
}

/* Every pair's metric on the clean and the corrupted inputs (the means are checked before
 * any patched run). */
static qkv_status base_metrics(loaded_model *lm, const patch_batch *pb, const patch_pairs *pairs,
                               patch_result *r) {
    int T = lm->model.cfg.seq_len;
    qkv_status s = QKV_OK;
    for (int first = 0; first < pairs->n && s == QKV_OK; first += ANALYSIS_BATCH) {
        int B = pairs->n - first < ANALYSIS_BATCH ? pairs->n - first : ANALYSIS_BATCH;
        for (int side = 0; side < 2 && s == QKV_OK; side++) {
            const int32_t *x = side ? pairs->corrupt : pairs->clean;
            const int32_t *len = side ? pairs->corrupt_len : pairs->clean_len;
            qkv_ctx_reset(lm->ctx);
            qkv_probe probe = {0};
            qkv_tensor *logits = qkv_model_forward_probe(&lm->model, lm->ctx,
                                                         x + (size_t)first * T,
                                                         len ? len + first : NULL, B, &probe);
            if (!side && pb->ref) fill_reference(pb, logits, pairs, first);
            s = batch_metric(lm, pb, logits, pairs, first,
                             side ? "the corrupted run" : "the clean run",
                             side ? r->pair_corrupt : r->pair_clean);
        }
    }
    return s;
}

static double mean_of(const double *x, int n, int stride) {
    double sum = 0;
    for (int i = 0; i < n; i++) sum += x[(size_t)i * stride];
    return sum / n;
}

qkv_status explain_fill_predictions(loaded_model *lm, const int32_t *clean, const int32_t *corrupt,
                                    const int32_t *clean_len, const int32_t *corrupt_len, int n,
                                    patch_metric *metric, const char *path,
                                    const int64_t *line) {
    int T = lm->model.cfg.seq_len, V = lm->model.cfg.vocab;
    qkv_status s = loaded_model_reserve(lm, n, NULL);
    for (int side = 0; side < 2 && s == QKV_OK; side++)
        for (int first = 0; first < n; first += ANALYSIS_BATCH) {
            int B = n - first < ANALYSIS_BATCH ? n - first : ANALYSIS_BATCH;
            bool need = false;
            for (int b = 0; b < B; b++)
                need |= (side ? metric[first + b].wrong : metric[first + b].answer) < 0;
            if (!need) continue;
            const int32_t *x = side ? corrupt : clean, *len = side ? corrupt_len : clean_len;
            qkv_ctx_reset(lm->ctx);
            qkv_probe probe = {0};
            qkv_tensor *logits = qkv_model_forward_probe(&lm->model, lm->ctx,
                                                         x + (size_t)first * T,
                                                         len ? len + first : NULL, B, &probe);
            int64_t To = logits->shape[1];
            for (int b = 0; b < B; b++) {
                patch_metric *m = &metric[first + b];
                int *out = side ? &m->wrong : &m->answer;
                if (*out < 0)
                    *out = (int)qkv_argmax(logits, ((int64_t)b * To + m->position) * V, V);
            }
        }
    for (int k = 0; s == QKV_OK && path && k < n; k++)
        if (metric[k].answer == metric[k].wrong) {
            char label[32];
            loaded_model_class_label(lm, metric[k].answer, label, sizeof label);
            s = qkv_fail(QKV_ERR_VALUE, "%s line %lld: the answer and the wrong token are both "
                         "'%s': the metric would be 0 (give them as the line's third and fourth "
                         "fields)", path, (long long)line[k], label);
        }
    return s;
}

qkv_status explain_patch(loaded_model *lm, const patch_pairs *pairs, patch_result *r) {
    const qkv_model_config *c = &lm->model.cfg;
    int n = pairs->n, T = c->seq_len, To = lm->target_len, V = c->vocab;
    r->rows = NULL, r->path = NULL, r->n_rows = r->n_paths = 0, r->agreement = NAN;
    r->pair_clean = r->pair_corrupt = r->pair_patched = r->pair_attribution = NULL;
    r->n_pairs = n;
    if (r->paths && (r->n_heads || r->together))
        return qkv_fail(QKV_ERR_VALUE, "patch: --path lists every path: it takes no --heads or "
                        "--together");
    explain_spot *spots = NULL;
    qkv_status s = r->paths ? list_paths(lm, &r->path, &r->n_paths)
                            : explain_spots(lm, r->site, r->over, pairs->positions, pairs->keys,
                                            &spots, &r->n_rows);
    if (s == QKV_OK && !r->paths && r->n_heads) { /* only the listed heads' rows */
        explain_spot *listed;
        s = explain_select_heads(spots, r->n_rows, r->heads, r->n_heads, &listed, &r->n_rows);
        free(spots);
        spots = s == QKV_OK ? listed : NULL;
    }
    if (s != QKV_OK) return s;
    r->all = (patch_row){.exact = NAN, .attribution = NAN};
    if (!r->paths) {
        r->rows = malloc((size_t)(r->n_rows ? r->n_rows : 1) * sizeof *r->rows);
        for (int k = 0; r->rows && k < r->n_rows; k++)
            r->rows[k] = (patch_row){spots[k], NAN, NAN};
        free(spots);
    }
    int items = explain_patch_items(r), cols = explain_patch_columns(r);
    size_t cells = (size_t)n * (cols ? cols : 1);
    r->pair_clean = malloc((size_t)n * sizeof(double));
    r->pair_corrupt = malloc((size_t)n * sizeof(double));
    r->pair_patched = malloc(cells * sizeof(double));
    r->pair_attribution = malloc(cells * sizeof(double));
    if ((!r->paths && !r->rows) || !r->pair_clean || !r->pair_corrupt || !r->pair_patched ||
        !r->pair_attribution)
        return qkv_fail(QKV_ERR_NOMEM, "patch: out of memory for %d pairs' results", n);
    for (size_t i = 0; i < cells; i++) r->pair_patched[i] = r->pair_attribution[i] = NAN;
    int Bmax = n < ANALYSIS_BATCH ? n : ANALYSIS_BATCH;
    patch_batch pb;
    if ((s = batch_init(lm, r, n, Bmax, &pb)) != QKV_OK ||
        (s = base_metrics(lm, &pb, pairs, r)) != QKV_OK) {
        batch_free(&pb);
        return s;
    }
    r->clean = mean_of(r->pair_clean, n, 1), r->corrupt = mean_of(r->pair_corrupt, n, 1);
    double diff = r->clean - r->corrupt;
    if (!(fabs(diff) > 0)) {
        batch_free(&pb);
        return qkv_fail(QKV_ERR_VALUE, "the clean and the corrupted input%s give the same "
                        "%s (%g%s): there is nothing to recover", n > 1 ? "s" : "",
                        metric_text[r->metric], r->clean, n > 1 ? " on average" : "");
    }
    qkv_site site = r->paths ? QKV_SITE_Z : r->site;
    for (int first = 0; first < n && s == QKV_OK; first += ANALYSIS_BATCH) {
        int B = n - first < ANALYSIS_BATCH ? n - first : ANALYSIS_BATCH;
        qkv_ctx_reset(pb.keep), qkv_ctx_reset(pb.graph), qkv_ctx_reset(lm->ctx);
        qkv_probe clean = {0};
        qkv_model_forward_probe(&lm->model, lm->ctx, pairs->clean + (size_t)first * T,
                                pairs->clean_len ? pairs->clean_len + first : NULL, B, &clean);
        bool mlp_out = r->paths && c->mlp > 0; /* paths: the MLPs' outputs too */
        for (int l = 0; l < c->layers; l++) {
            for (int u = 0; u < explain_site_units(site); u++) {
                const qkv_tensor *x = explain_probe_tensor(&clean, site, l, u);
                pb.clean[l][u] = x ? kept(pb.keep, x) : NULL;
            }
            if (mlp_out) pb.clean_mlp[l] = kept(pb.keep, clean.mlp_out[l]);
        }
        /* the corrupted run, recorded: d metric / d site from one backward pass */
        pb.cp = (qkv_probe){0};
        qkv_tensor *logits = qkv_model_forward_probe(
            &lm->model, pb.graph, pairs->corrupt + (size_t)first * T,
            pairs->corrupt_len ? pairs->corrupt_len + first : NULL, B, &pb.cp);
        for (int l = 0; l < c->layers; l++) {
            for (int u = 0; u < explain_site_units(site); u++) {
                const qkv_tensor *x = explain_probe_tensor(&pb.cp, site, l, u);
                pb.corrupt[l][u] = x ? kept(pb.keep, x) : NULL;
            }
            if (mlp_out) pb.corrupt_mlp[l] = kept(pb.keep, pb.cp.mlp_out[l]);
        }
        if (r->attribution) {
            /* Σ weight · logits, the weights d metric / d logits at each pair's position (of
             * the logit difference: +1 and -1), has the metric's gradient at every site */
            qkv_tensor *pick = qkv_zeros(pb.graph, c->dtype, 3, (int64_t[]){B, To, V});
            for (int b = 0; b < B; b++) {
                const patch_metric *pm = &pairs->metric[first + b];
                int64_t row = ((int64_t)b * To + pm->position) * V;
                double *w = pb.weight + (size_t)b * V;
                for (int j = 0; j < V; j++) pb.row[j] = qkv_get(logits, row + j);
                explain_metric_grad(r->metric, pb.row, V, pm->answer, pm->wrong,
                                    pb.ref ? pb.ref + (size_t)(first + b) * V : NULL, w);
                for (int j = 0; j < V; j++)
                    if (w[j] != 0) qkv_set(pick, row + j, w[j]);
            }
            qkv_backward(qkv_sum(pb.graph, qkv_mul(pb.graph, logits, pick)));
        }
        s = r->paths ? patch_paths(lm, pairs, first, B, &pb, r)
                     : patch_spots(lm, pairs, first, B, &pb, r);
    }
    batch_free(&pb);
    if (s != QKV_OK) return s;
    for (int k = 0; k < cols; k++) {
        double exact =
            r->exact ? (mean_of(r->pair_patched + k, n, cols) - r->corrupt) / diff : NAN;
        double attr = r->attribution ? mean_of(r->pair_attribution + k, n, cols) / diff : NAN;
        if (k == items) r->all.exact = exact, r->all.attribution = attr; /* together */
        else if (r->paths) r->path[k].exact = exact, r->path[k].attribution = attr;
        else r->rows[k].exact = exact, r->rows[k].attribution = attr;
    }
    if (r->exact && r->attribution) {
        double *x = malloc((size_t)(items ? items : 1) * 2 * sizeof *x);
        if (!x) return qkv_fail(QKV_ERR_NOMEM, "patch: out of memory");
        for (int k = 0; k < items; k++) {
            x[k] = r->paths ? r->path[k].exact : r->rows[k].exact;
            x[items + k] = r->paths ? r->path[k].attribution : r->rows[k].attribution;
        }
        r->agreement = pearson(x, x + items, items, 1);
        free(x);
    }
    return QKV_OK;
}

void explain_patch_free(patch_result *r) {
    free(r->rows), free(r->path);
    free(r->pair_clean), free(r->pair_corrupt), free(r->pair_patched), free(r->pair_attribution);
    r->rows = NULL, r->path = NULL;
    r->pair_clean = r->pair_corrupt = r->pair_patched = r->pair_attribution = NULL;
}


/* ---- JSON ---- */

/* A head's name "L.H", or an MLP's "mlp L" (head -1), as attribute names its part. */
static void path_end_name(int layer, int head, char *buf, size_t len) {
    if (head >= 0) explain_head_name(layer, head, buf, len);
    else snprintf(buf, len, "mlp %d", layer + 1);
}

/* A path's fields: sender "L.H" or "mlp L", receiver "L.H", "mlp L" or "logits", via "q",
 * "k", "v", "mlp-pre" or null. */
static void add_path(cJSON *x, const patch_path *p) {
    char name[32];
    path_end_name(p->sender_layer, p->sender_head, name, sizeof name);
    cJSON_AddStringToObject(x, "sender", name);
    if (p->receiver_layer < 0) {
        cJSON_AddStringToObject(x, "receiver", "logits");
        cJSON_AddNullToObject(x, "via");
    } else {
        path_end_name(p->receiver_layer, p->receiver_head, name, sizeof name);
        cJSON_AddStringToObject(x, "receiver", name);
        cJSON_AddStringToObject(x, "via", explain_site_names[p->via]);
    }
}

cJSON *explain_patch_json(const loaded_model *lm, const explain_input *clean,
                          const explain_input *corrupt, const patch_metric *metric,
                          const char *pairs_source, const patch_result *r) {
    cJSON *o = explain_json_header(lm, "patch", clean);
    if (corrupt) cJSON_AddItemToObject(o, "corrupt_tokens", explain_json_token_labels(lm, corrupt));
    cJSON_AddNumberToObject(o, "pairs", r->n_pairs);
    if (!clean) {
        cJSON_AddStringToObject(o, "pairs_from", pairs_source);
        cJSON_AddNumberToObject(o, "pairs_left_out", r->left_out);
    }
    cJSON_AddNumberToObject(o, "position", metric->position);
    cJSON_AddItemToObject(o, "answer", explain_class_json(lm, metric->answer));
    cJSON_AddItemToObject(o, "wrong", explain_class_json(lm, metric->wrong));
    if (r->paths) {
        cJSON_AddNullToObject(o, "site");
        cJSON_AddNullToObject(o, "over");
    } else {
        cJSON_AddStringToObject(o, "site", explain_site_names[r->site]);
        cJSON_AddStringToObject(o, "over", explain_over_names[r->over]);
    }
    cJSON_AddBoolToObject(o, "path", r->paths);
    cJSON_AddStringToObject(o, "method", r->exact && r->attribution ? "both"
                                         : r->exact                  ? "exact"
                                                                     : "attribution");
    if (r->metric != EXPLAIN_METRIC_LOGIT_DIFF) /* absent: the logit difference */
        cJSON_AddStringToObject(o, "metric", explain_metric_names[r->metric]);
    if (r->n_heads) { /* --heads: the rows are theirs alone */
        cJSON *names = cJSON_AddArrayToObject(o, "selected_heads");
        for (int i = 0; i < r->n_heads; i++) {
            char name[32];
            explain_head_name(r->heads[i].layer, r->heads[i].head, name, sizeof name);
            cJSON_AddItemToArray(names, cJSON_CreateString(name));
        }
    }
    explain_json_number(o, "clean", r->clean);
    explain_json_number(o, "corrupt", r->corrupt);
    cJSON *items = cJSON_AddArrayToObject(o, r->paths ? "paths" : "results");
    for (int i = 0; i < explain_patch_items(r); i++) {
        cJSON *x = cJSON_CreateObject();
        if (r->paths) add_path(x, &r->path[i]);
        else explain_json_spot(x, &r->rows[i].spot);
        explain_json_number(x, "exact", r->paths ? r->path[i].exact : r->rows[i].exact);
        explain_json_number(x, "attribution", r->paths ? r->path[i].attribution : r->rows[i].attribution);
        cJSON_AddItemToArray(items, x);
    }
    if (r->together) { /* every row at once: the selected heads' share together */
        cJSON *tg = cJSON_AddObjectToObject(o, "together");
        explain_json_number(tg, "exact", r->all.exact);
        explain_json_number(tg, "attribution", r->all.attribution);
    }
    explain_json_number(o, "agreement", r->agreement);
    return o;
}

/* One column of pair i's line: its patched metric and this pair's own shares (null where
 * its clean and corrupt metrics are equal). */
static void add_pair_column(cJSON *x, const patch_result *r, int i, int k) {
    int cols = explain_patch_columns(r);
    double clean = r->pair_clean[i], corrupt = r->pair_corrupt[i], diff = clean - corrupt;
    double patched = r->pair_patched[(size_t)i * cols + k];
    double change = r->pair_attribution[(size_t)i * cols + k];
    explain_json_number(x, "patched", patched);
    explain_json_number(x, "exact", fabs(diff) > 0 ? (patched - corrupt) / diff : NAN);
    explain_json_number(x, "attribution", fabs(diff) > 0 ? change / diff : NAN);
}

cJSON *explain_patch_pair_json(const patch_result *r, int i) {
    int items = explain_patch_items(r);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "pair", i + 1);
    explain_json_number(o, "clean", r->pair_clean[i]);
    explain_json_number(o, "corrupt", r->pair_corrupt[i]);
    cJSON *rows = cJSON_AddArrayToObject(o, r->paths ? "paths" : "results");
    for (int k = 0; k < items; k++) {
        cJSON *x = cJSON_CreateObject();
        if (r->paths) add_path(x, &r->path[k]);
        else explain_json_spot(x, &r->rows[k].spot);
        add_pair_column(x, r, i, k);
        cJSON_AddItemToArray(rows, x);
    }
    if (r->together) add_pair_column(cJSON_AddObjectToObject(o, "together"), r, i, items);
    return o;
}
