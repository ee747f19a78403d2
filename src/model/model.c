/* model.c - the attention model: token + position embeddings, L layers of multi-head
 * self-attention (W_Q, W_K, W_V, W_O), and a head giving vocabulary logits. */
#include "engine/engine.h"
#include "model/model.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the parameters: one list, in the order they are drawn ----
 * model_params gives every parameter of a config: its name, shape, how it is drawn and where
 * the model keeps it. qkv_model_init draws them in this order, qkv_model_param_bytes counts
 * them and model_replica points a replica's fields at its own, so a new tensor is one row
 * here. The attention model's rows come first, in the order they always had (so a model
 * without MLP or LayerNorm draws the same weights as before), then each layer's MLP, then
 * the LayerNorms. */
typedef enum { INIT_NORMAL, INIT_ZEROS, INIT_ONES } param_init;
typedef struct {
    char name[32];
    int ndim;
    int64_t shape[2];
    param_init init;
    double std;   /* INIT_NORMAL: the standard deviation */
    size_t field; /* the offset in qkv_model of the pointer to it */
} param_spec;

static int model_params(const qkv_model_config *c, param_spec *out) {
    int n = 0, V = c->vocab, T = c->seq_len, C = c->d_model, N = c->mlp;
    /* the standard deviations of the embeddings (se), of the weight matrices that read the
     * stream (sw), of the head (sh) and of W_out (sn): qkv's N(0, s²/fan_in) with embeddings
     * N(0, s²), or the paper's s/√C everywhere but the head's s/√V (qkv_init, qkv.h) */
    double s = c->init_scale, sw = s / sqrt((double)C);
    bool paper = c->init == QKV_INIT_PAPER;
    double se = paper ? sw : s, sh = paper ? s / sqrt((double)V) : sw;
    double sn = paper ? sw : N ? s / sqrt((double)N) : 0;
#define ROW(member, init_, std_, d0, d1, ...)                                                \
    do {                                                                                     \
        param_spec *r = &out[n++];                                                           \
        snprintf(r->name, sizeof r->name, __VA_ARGS__);                                      \
        r->ndim = (d1) > 0 ? 2 : 1;                                                          \
        r->shape[0] = d0, r->shape[1] = d1;                                                  \
        r->init = init_, r->std = std_, r->field = offsetof(qkv_model, member);              \
    } while (0)
    ROW(tok_emb, INIT_NORMAL, se, V, C, "tok_emb");
    ROW(pos_emb, INIT_NORMAL, se, T, C, "pos_emb");
    for (int l = 0; l < c->layers; l++) {
        ROW(w_q[l], INIT_NORMAL, sw, C, C, "attn.%d.w_q", l);
        ROW(w_k[l], INIT_NORMAL, sw, C, C, "attn.%d.w_k", l);
        ROW(w_v[l], INIT_NORMAL, sw, C, C, "attn.%d.w_v", l);
        ROW(w_o[l], INIT_NORMAL, sw, C, C, "attn.%d.w_o", l);
    }
    ROW(head_w, INIT_NORMAL, sh, C, V, "head.w");
    ROW(head_b, INIT_ZEROS, 0, V, 0, "head.b");
    if (c->target_len > 0) /* after the head, so a self-attention model draws what it always did */
        ROW(dec_pos_emb, INIT_NORMAL, se, c->target_len, C, "dec_pos_emb");
    for (int l = 0; l < c->layers && N > 0; l++) {
        ROW(mlp_w_in[l], INIT_NORMAL, sw, C, N, "mlp.%d.w_in", l);
        ROW(mlp_b_in[l], INIT_ZEROS, 0, N, 0, "mlp.%d.b_in", l);
        ROW(mlp_w_out[l], INIT_NORMAL, sn, N, C, "mlp.%d.w_out", l);
        ROW(mlp_b_out[l], INIT_ZEROS, 0, C, 0, "mlp.%d.b_out", l);
    }
    if (c->norm == QKV_NORM_LAYERNORM) {
        for (int l = 0; l < c->layers; l++) {
            ROW(ln_attn_gain[l], INIT_ONES, 0, C, 0, "attn.%d.ln.gain", l);
            ROW(ln_attn_bias[l], INIT_ZEROS, 0, C, 0, "attn.%d.ln.bias", l);
            if (N > 0) {
                ROW(ln_mlp_gain[l], INIT_ONES, 0, C, 0, "mlp.%d.ln.gain", l);
                ROW(ln_mlp_bias[l], INIT_ZEROS, 0, C, 0, "mlp.%d.ln.bias", l);
            }
        }
        ROW(ln_final_gain, INIT_ONES, 0, C, 0, "ln_final.gain");
        ROW(ln_final_bias, INIT_ZEROS, 0, C, 0, "ln_final.bias");
    }
#undef ROW
    return n;
}

/* Where model m keeps the parameter of row r. */
static qkv_tensor **param_slot(qkv_model *m, const param_spec *r) {
    return (qkv_tensor **)((char *)m + r->field);
}

double qkv_model_param_bytes(const qkv_model_config *c) {
    param_spec spec[QKV_MAX_PARAMS];
    int n = model_params(c, spec);
    double elems = 0;
    for (int i = 0; i < n; i++)
        elems += (double)spec[i].shape[0] * (spec[i].ndim == 2 ? spec[i].shape[1] : 1);
    return elems * 4 * (double)qkv_dtype_size(c->dtype); /* weights, gradients, two Adam moments */
}

double qkv_model_step_bytes(const qkv_model_config *c, int batch) {
    /* Per layer: ~14 copies of a (B,T,C) activation (projections, head splits, merges) and
     * 4 of the (B,H,T,T) scores; the head adds (B,T,V) logits: 4 copies counted, where ~3
     * are measured (the logits, the biased logits, a backward temporary). An MLP adds 4
     * copies of its (B,T,N) hidden layer (x·W_in, + b_in, the activation, a backward
     * temporary) and 3 of the stream; each LayerNorm 2 of the stream. Twice that with
     * gradients. Backward adds one pass's gradient of every parameter (qkv_backward stages
     * them in the step's arena). tests/test_faults.c checks that a real step stays within it. */
    int Tq = c->target_len > c->seq_len ? c->target_len : c->seq_len;
    double btc = (double)batch * Tq * c->d_model;
    /* a padding mask, (B, 1, Tq, T), is H times smaller than one copy of the scores */
    double bhtt = (double)batch * c->heads * Tq * c->seq_len;
    double btv = (double)batch * Tq * c->vocab, btn = (double)batch * Tq * c->mlp;
    bool ln = c->norm == QKV_NORM_LAYERNORM;
    double per_layer = 14 * btc + 4 * bhtt;
    if (c->mlp > 0) per_layer += 4 * btn + 3 * btc + (ln ? 2 * btc : 0);
    if (ln) per_layer += 2 * btc;
    double staged = qkv_model_param_bytes(c) / 4, es = (double)qkv_dtype_size(c->dtype);
    return 2.0 * es * (c->layers * per_layer + 3 * btc + 4 * btv + (ln ? 2 * btc : 0)) + staged;
}

qkv_status qkv_model_config_check(const qkv_model_config *c) {
    /* F(field): the field's name in messages (the CLI's flag, under qkv train) */
#define F(field) field_name(#field)
    if (c->vocab < 2 || c->vocab > QKV_MAX_VOCAB)
        return qkv_fail(QKV_ERR_VALUE, "%s %d is out of range (2..%d)", F(vocab), c->vocab,
                        QKV_MAX_VOCAB);
    if (c->seq_len < 1 || c->seq_len > QKV_MAX_SEQ_LEN)
        return qkv_fail(QKV_ERR_VALUE, "%s %d is out of range (1..%d)", F(seq_len), c->seq_len,
                        QKV_MAX_SEQ_LEN);
    if (c->d_model < 1 || c->d_model > QKV_MAX_D_MODEL)
        return qkv_fail(QKV_ERR_VALUE, "%s %d is out of range (1..%d)", F(d_model), c->d_model,
                        QKV_MAX_D_MODEL);
    if (c->heads < 1 || c->heads > c->d_model)
        return qkv_fail(QKV_ERR_VALUE, "%s %d is out of range (1..%d)", F(heads), c->heads,
                        c->d_model);
    if (c->d_model % c->heads != 0)
        return qkv_fail(QKV_ERR_VALUE, "%s %d does not divide %s %d", F(heads), c->heads,
                        F(d_model), c->d_model);
    if (c->layers < 1 || c->layers > QKV_MAX_LAYERS)
        return qkv_fail(QKV_ERR_VALUE, "%s %d is out of range (1..%d)", F(layers), c->layers,
                        QKV_MAX_LAYERS);
    if (c->dtype != QKV_F32 && c->dtype != QKV_F64)
        return qkv_fail(QKV_ERR_VALUE, "%s must be f32 or f64", F(dtype));
    if (c->target_len < 0 || c->target_len > QKV_MAX_SEQ_LEN)
        return qkv_fail(QKV_ERR_VALUE, "%s %d is out of range (0..%d)", F(target_len),
                        c->target_len, QKV_MAX_SEQ_LEN);
    if (!(c->init_scale > 0 && c->init_scale <= QKV_MAX_INIT_SCALE))
        return qkv_fail(QKV_ERR_VALUE, "%s %g is out of range (above 0..%g)", F(init_scale),
                        c->init_scale, QKV_MAX_INIT_SCALE);
    if ((int)c->init < 0 || c->init >= QKV_INITS)
        return qkv_fail(QKV_ERR_VALUE, "%s must be qkv or paper", F(init));
    if (c->mlp < 0 || c->mlp > QKV_MAX_MLP)
        return qkv_fail(QKV_ERR_VALUE, "%s %d is out of range (0..%d)", F(mlp), c->mlp,
                        QKV_MAX_MLP);
    if ((int)c->act < 0 || c->act >= QKV_ACTS)
        return qkv_fail(QKV_ERR_VALUE, "%s must be relu, gelu or gelu-tanh", F(act));
    if (c->norm != QKV_NORM_NONE && c->norm != QKV_NORM_LAYERNORM)
        return qkv_fail(QKV_ERR_VALUE, "%s must be none or layernorm", F(norm));
    /* an MLP and a LayerNorm are blocks of the residual stream: without it, a LayerNorm would
     * be the whole input of the next layer and an MLP would replace the attention's output */
    if (!c->residual && (c->mlp > 0 || c->norm != QKV_NORM_NONE)) {
        if (c->mlp > 0)
            return qkv_fail(QKV_ERR_VALUE, "%s %d needs the residual stream (add %s)", F(mlp),
                            c->mlp, F(residual));
        return qkv_fail(QKV_ERR_VALUE, "%s layernorm needs the residual stream (add %s)",
                        F(norm), F(residual));
    }
#undef F
    return QKV_OK;
}

qkv_status qkv_model_init(qkv_model *m, const qkv_model_config *cfg, uint64_t seed) {
    memset(m, 0, sizeof *m);
    const qkv_model_config *c = cfg;
    qkv_status st = qkv_model_config_check(c);
    if (st != QKV_OK) return st;
    const char *what;
    double need = qkv_model_param_bytes(c), have = memory_limit(&what);
    if (need > have / 2)
        return qkv_fail(QKV_ERR_NOMEM, "the model needs %.1f %s for its parameters, more than "
                        "half of %s (%.1f %s): lower %s, %s or %s",
                        memory_in(need, have), memory_unit(have), what, memory_in(have, have),
                        memory_unit(have), field_name("d_model"),
                        field_name("vocab"), field_name("layers"));
    m->cfg = *c;
    m->params = qkv_ctx_new((size_t)need + 4096 * 64);
    if (!m->params) return qkv_fail(QKV_ERR_NOMEM, "out of memory for the parameters");
    qkv_rng rng = qkv_rng_seed(seed);
    param_spec spec[QKV_MAX_PARAMS];
    int n = model_params(c, spec);
    for (int i = 0; i < n; i++) {
        const param_spec *r = &spec[i];
        qkv_tensor *t =
            r->init == INIT_NORMAL ? qkv_randn(m->params, c->dtype, r->ndim, r->shape, r->std, &rng)
            : r->init == INIT_ONES ? qkv_ones(m->params, c->dtype, r->ndim, r->shape)
                                   : qkv_zeros(m->params, c->dtype, r->ndim, r->shape);
        _Static_assert(sizeof m->param_name[i] == sizeof r->name, "a parameter's name");
        memcpy(m->param_name[i], r->name, sizeof r->name);
        t->name = m->param_name[i];
        m->param[i] = *param_slot(m, r) = qkv_param(m->params, t);
    }
    m->nparams = n;
    return QKV_OK;
}

qkv_status model_replica(qkv_model *r, const qkv_model *m) {
    *r = *m;
    size_t bytes = 64 * 1024;
    for (int i = 0; i < m->nparams; i++)
        bytes += (size_t)m->param[i]->size * qkv_dtype_size(m->cfg.dtype) + 2 * sizeof(qkv_tensor) + 128;
    r->params = qkv_ctx_new(bytes);
    if (!r->params) return qkv_fail(QKV_ERR_NOMEM, "out of memory for a model replica");
    param_spec spec[QKV_MAX_PARAMS];
    int n = model_params(&m->cfg, spec);
    QKV_CHECK(n == m->nparams, "model_replica", "%d parameters, the config gives %d",
              m->nparams, n);
    for (int i = 0; i < n; i++) {
        r->param[i] = *param_slot(r, &spec[i]) =
            qkv_param(r->params, tensor_share(r->params, m->param[i]));
        r->param[i]->name = r->param_name[i];
    }
    return QKV_OK;
}

void qkv_model_free(qkv_model *m) {
    qkv_ctx_free(m->params);
    m->params = NULL;
}

/* (B, T, C) -> (B, H, T, Dk): split the width into heads. */
static qkv_tensor *split_heads(qkv_ctx *ctx, qkv_tensor *x, int B, int T, int H, int Dk) {
    x = qkv_reshape(ctx, x, 4, (int64_t[]){B, T, H, Dk});
    return H > 1 ? qkv_transpose(ctx, x, 1, 2) : qkv_reshape(ctx, x, 4, (int64_t[]){B, 1, T, Dk});
}

/* (B, H, T, Dk) -> (B, T, C): the inverse of split_heads. */
static qkv_tensor *merge_heads(qkv_ctx *ctx, qkv_tensor *x, int B, int T, int H, int Dk) {
    if (H > 1) x = qkv_transpose(ctx, x, 1, 2);
    return qkv_reshape(ctx, x, 3, (int64_t[]){B, T, H * Dk});
}

/* The mask of one layer, (B, 1, Tq, T): -inf on keys past each sequence's length and, with
 * a causal mask, on keys after the query (query i at position at[i], or aligned at the end
 * when Tq < T, as qkv_mask_causal does); 0 elsewhere. Built in place as a leaf (no gradient
 * flows into a mask); (1, 1, Tq, T) without lengths. NULL when nothing is masked. */
static qkv_tensor *attention_mask(qkv_ctx *step, const qkv_model_config *c, int B, int Tq,
                                  int T, const int32_t *lengths, const int32_t *at) {
    if (!lengths && !(at && c->causal))
        return c->causal ? qkv_mask_causal(step, c->dtype, Tq, T) : NULL;
    if (!lengths) B = 1;
    qkv_tensor *mask = qkv_zeros(step, c->dtype, 4, (int64_t[]){B, 1, Tq, T});
    for (int b = 0; b < B; b++)
        for (int i = 0; i < Tq; i++)
            for (int j = 0; j < T; j++)
                if ((lengths && j >= lengths[b]) ||
                    (c->causal && j > (at ? at[i] : i + (T - Tq)))) {
                    int64_t at = ((int64_t)b * Tq + i) * T + j;
                    if (c->dtype == QKV_F64) ((double *)mask->data)[at] = -INFINITY;
                    else ((float *)mask->data)[at] = -INFINITY;
                }
    return mask;
}

static const char *const site_names[QKV_SITES] = {
    "z", "q", "k", "v", "pattern", "resid_pre", "resid_post", "resid_mid", "mlp_pre", "mlp_post",
    "mlp_out", "ln_scale"};

/* The sites without heads, (B, R, W): the stream's, the MLP's, the LayerNorms' scales. */
static bool headless_site(qkv_site site) {
    return site == QKV_SITE_RESID_PRE || site == QKV_SITE_RESID_POST || site >= QKV_SITE_RESID_MID;
}

/* The sites of a model with an MLP only. */
static bool mlp_site(qkv_site site) {
    return site == QKV_SITE_RESID_MID || site == QKV_SITE_MLP_PRE || site == QKV_SITE_MLP_POST ||
           site == QKV_SITE_MLP_OUT;
}

/* The sites whose columns an edit may pick: the pattern's keys, the MLP's neurons. */
static bool column_site(qkv_site site) {
    return site == QKV_SITE_PATTERN || site == QKV_SITE_MLP_PRE || site == QKV_SITE_MLP_POST;
}

/* The probe's hook at y, the tensor of `site` at layer l after the probe's edits: where the
 * tensor the hook returns differs from y bit for bit, keep 0 and put its value (y·keep + put,
 * as edit_site); y itself when it returns NULL or the same bits everywhere. */
static qkv_tensor *hook_site(qkv_ctx *step, const qkv_probe *probe, qkv_site site, int l,
                             qkv_ln ln, qkv_tensor *y) {
    const qkv_tensor *h = probe->hook(probe->hook_user, site, l, ln, y, step);
    if (!h) return y;
    bool same = h->dtype == y->dtype && h->ndim == y->ndim;
    for (int d = 0; same && d < y->ndim; d++) same = h->shape[d] == y->shape[d];
    QKV_CHECK(same, "model_forward_probe", "the hook's value of %s at layer %d is %s, not %s "
              "of the model's dtype", site_names[site], l, SHAPE(h), SHAPE(y));
    size_t width = qkv_dtype_size(y->dtype);
    const unsigned char *a = y->data, *b = h->data;
    qkv_tensor *keep = NULL, *put = NULL;
    for (int64_t i = 0; i < y->size; i++) {
        if (!memcmp(a + (size_t)i * width, b + (size_t)i * width, width)) continue;
        if (!keep) {
            keep = qkv_ones(step, y->dtype, y->ndim, y->shape);
            put = qkv_zeros(step, y->dtype, y->ndim, y->shape);
        }
        qkv_set(keep, i, 0.0);
        memcpy((unsigned char *)put->data + (size_t)i * width, b + (size_t)i * width, width);
    }
    return keep ? qkv_add(step, qkv_mul(step, y, keep), put) : y;
}

/* Tensor y of `site` at layer l (for ln_scale, of its LayerNorm `ln`; else ln is not read)
 * after the probe's edits of it: y * keep + put, where keep is 1 and put 0 except at an
 * edited entry (keep 0, put the new value), so an unedited entry is y exactly and the
 * gradient reaching y is dz * keep. y itself when no edit touches it. A head's site is
 * (B, H, R, W), the stream's, the MLP's and a scale (B, R, W) (one "head"): an edit covers
 * head `head`, row `position` (all: -1) and, for the pattern and the MLP's neurons, column
 * `key_position` (all: -1). Then the probe's hook, if it has one, edits it the same way
 * (hook_site). */
static qkv_tensor *edit_site(qkv_ctx *step, const qkv_probe *probe, qkv_site site, int l,
                             qkv_ln ln, qkv_tensor *y) {
    bool stream = headless_site(site);
    int64_t B = y->shape[0], G = stream ? 1 : y->shape[1];
    int64_t R = y->shape[y->ndim - 2], W = y->shape[y->ndim - 1];
    qkv_tensor *keep = NULL, *put = NULL;
    for (int e = 0; e < probe->n_edits; e++) {
        const qkv_head_edit *ed = &probe->edits[e];
        if (ed->layer != l || ed->site != site || ed->kind == QKV_HEAD_KEEP) continue;
        if (site == QKV_SITE_LN_SCALE && ed->ln != ln) continue;
        int g = stream ? 0 : ed->head;
        int col = column_site(site) ? ed->key_position : -1;
        QKV_CHECK(g >= 0 && g < G && ed->position >= -1 && ed->position < R && col >= -1 &&
                      col < W && ed->kind >= QKV_HEAD_KEEP && ed->kind <= QKV_HEAD_REPLACE,
                  "model_forward_probe", "edit %d of %s: head %d, position %d, key position "
                  "%d out of range for %s", e, site_names[site], ed->head, ed->position, col,
                  SHAPE(y));
        const qkv_tensor *v = ed->value;
        if (ed->kind != QKV_HEAD_ZERO) {
            int64_t vb = ed->kind == QKV_HEAD_MEAN ? 1 : B;
            bool same = v && v->dtype == y->dtype && v->ndim == y->ndim && v->shape[0] == vb;
            for (int d = 1; same && d < y->ndim; d++) same = v->shape[d] == y->shape[d];
            QKV_CHECK(same, "model_forward_probe", "edit %d of %s: value is %s, not %s (first "
                      "dim %lld) of the model's dtype", e, site_names[site],
                      v ? SHAPE(v) : "NULL", SHAPE(y), (long long)vb);
        }
        if (!keep) {
            keep = qkv_ones(step, y->dtype, y->ndim, y->shape);
            put = qkv_zeros(step, y->dtype, y->ndim, y->shape);
        }
        int64_t i0 = ed->position < 0 ? 0 : ed->position, i1 = ed->position < 0 ? R : i0 + 1;
        int64_t j0 = col < 0 ? 0 : col, j1 = col < 0 ? W : j0 + 1;
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = i0; i < i1; i++)
                for (int64_t j = j0; j < j1; j++) {
                    int64_t at = ((b * G + g) * R + i) * W + j;
                    int64_t from = ed->kind == QKV_HEAD_MEAN ? at - b * G * R * W : at;
                    qkv_set(keep, at, 0.0);
                    qkv_set(put, at, ed->kind == QKV_HEAD_ZERO ? 0.0 : qkv_get(v, from));
                }
    }
    if (keep) y = qkv_add(step, qkv_mul(step, y, keep), put);
    return probe->hook ? hook_site(step, probe, site, l, ln, y) : y;
}

/* Layer l's attention from its parts (matmul, scale, mask, softmax, matmul: the composed
 * form), each head's q, k, v, pattern and z edited as the probe says, every part kept in
 * *tr. Returns z (B, H, Tq, Dk). */
static qkv_tensor *probe_attention(qkv_ctx *step, const qkv_probe *probe, int l, qkv_tensor *q,
                                   qkv_tensor *k, qkv_tensor *v, qkv_tensor *mask, int Dk,
                                   qkv_layer_trace *tr) {
    tr->q = q = edit_site(step, probe, QKV_SITE_Q, l, 0, q);
    tr->k = k = edit_site(step, probe, QKV_SITE_K, l, 0, k);
    tr->v = v = edit_site(step, probe, QKV_SITE_V, l, 0, v);
    tr->scores = qkv_matmul_ex(step, q, false, k, true); /* (B,H,Tq,T), no copy of Kᵀ */
    tr->scaled = qkv_scale(step, tr->scores, 1.0 / sqrt((double)Dk));
    tr->masked = mask ? qkv_mask(step, tr->scaled, mask) : tr->scaled;
    tr->weights = edit_site(step, probe, QKV_SITE_PATTERN, l, 0, qkv_softmax(step, tr->masked));
    return tr->head_out =
               edit_site(step, probe, QKV_SITE_Z, l, 0, qkv_matmul(step, tr->weights, v));
}

const char *qkv_norm_name(qkv_norm norm) {
    return norm == QKV_NORM_NONE ? "none" : norm == QKV_NORM_LAYERNORM ? "layernorm" : "?";
}

/* The LayerNorm of x (B, T, C) by gain and bias, or x itself in a model without one: its
 * scale s (B, T, 1), then x's rows centred, times s, gain, plus bias. A probe edits s (the
 * ln_scale site of layer l's LayerNorm `ln`) before it is applied, and keeps it. */
static qkv_tensor *norm(qkv_ctx *step, const qkv_model *m, qkv_tensor *x, qkv_tensor *gain,
                        qkv_tensor *bias, qkv_probe *probe, int l, qkv_ln ln) {
    if (m->cfg.norm != QKV_NORM_LAYERNORM) return x;
    qkv_tensor *s = qkv_layernorm_scale(step, x, QKV_LAYERNORM_EPS);
    if (probe) probe->ln_scale[l][ln] = s = edit_site(step, probe, QKV_SITE_LN_SCALE, l, ln, s);
    return qkv_layernorm_apply(step, x, s, gain, bias);
}

/* The positions of each sequence that a forward computes past its last layer's keys and
 * values (qkv_model_forward_at): n of seq_len, at[0] < ... < at[n-1]. */
typedef struct {
    int seq_len, n;
    const int32_t *at;
} tail_rows;

/* x·w, x's rows being the positions `rows` of longer sequences when rows is not NULL. */
static qkv_tensor *product(qkv_ctx *step, qkv_tensor *x, qkv_tensor *w, const tail_rows *rows) {
    return rows ? qkv_matmul_rows(step, x, w, rows->seq_len, rows->n, rows->at)
                : qkv_matmul(step, x, w);
}

/* Layer l's MLP on the stream d (B, T, C), with its LayerNorm first: what it adds to the
 * stream, act(norm(d)·W_in + b_in)·W_out + b_out (B, T, C); d's rows are positions `rows` of
 * the sequences when that is not NULL. A probe keeps its parts. */
static qkv_tensor *mlp_block(qkv_ctx *step, const qkv_model *m, int l, qkv_tensor *d,
                             qkv_probe *probe, const tail_rows *rows) {
    qkv_tensor *x = norm(step, m, d, m->ln_mlp_gain[l], m->ln_mlp_bias[l], probe, l, QKV_LN_MLP);
    /* (B, T, N) */
    qkv_tensor *pre = qkv_add(step, product(step, x, m->mlp_w_in[l], rows), m->mlp_b_in[l]);
    if (probe) probe->mlp_pre[l] = pre = edit_site(step, probe, QKV_SITE_MLP_PRE, l, 0, pre);
    qkv_tensor *post = qkv_activation(step, pre, m->cfg.act);
    if (probe)
        probe->mlp_post[l] = post = edit_site(step, probe, QKV_SITE_MLP_POST, l, 0, post);
    qkv_tensor *out = qkv_add(step, product(step, post, m->mlp_w_out[l], rows), m->mlp_b_out[l]);
    if (probe) probe->mlp_out[l] = out = edit_site(step, probe, QKV_SITE_MLP_OUT, l, 0, out);
    return out;
}

/* The forward pass. Without a probe, training's: the fused attention (or, asking for the
 * weights in attn, the composed one). With a probe, every layer's attention built from its
 * parts, edited and kept (probe_attention), and the stream edited and kept. Each layer is
 * attention, then (with cfg.mlp) an MLP, each reading the stream through its LayerNorm
 * (with cfg.norm) and adding to it; the head reads the stream through the final LayerNorm.
 * With `tail` (training's, qkv_model_forward_at), the last layer's queries and everything
 * after them are computed at the positions tail->at only: the logits are (B, n, V). */
static qkv_tensor *model_forward(qkv_model *m, qkv_ctx *step, const int32_t *tokens,
                                 const int32_t *lengths, int batch, qkv_tensor **attn,
                                 qkv_probe *probe, const tail_rows *tail) {
    const qkv_model_config *c = &m->cfg;
    int B = batch, T = c->seq_len, H = c->heads, Dk = c->d_model / c->heads;
    int Tq = c->target_len ? c->target_len : T; /* query positions */
    qkv_tensor *idx = qkv_from_array(step, QKV_I32, 2, (int64_t[]){B, T}, tokens);
    qkv_tensor *x = qkv_add(step, qkv_embedding(step, m->tok_emb, idx), m->pos_emb); /* (B,T,C) */
    qkv_tensor *mask = attention_mask(step, c, B, Tq, T, lengths, NULL);
    /* Self-attention: the stream is x itself. Encoder-decoder: the decoder stream starts as
     * dec_pos_emb broadcast over the batch (B, To, C) and is the query side of every layer;
     * the keys and values always come from the embedded inputs x (not normalized: the
     * LayerNorms are the decoder stream's). */
    qkv_tensor *d = x;
    if (c->target_len)
        d = qkv_add(step, qkv_zeros(step, c->dtype, 3, (int64_t[]){B, Tq, c->d_model}),
                    m->dec_pos_emb);
    for (int l = 0; l < c->layers; l++) {
        if (probe) probe->stream[l] = d = edit_site(step, probe, QKV_SITE_RESID_PRE, l, 0, d);
        qkv_tensor *a_in =
            norm(step, m, d, m->ln_attn_gain[l], m->ln_attn_bias[l], probe, l, QKV_LN_ATTN);
        qkv_tensor *kv_in = c->target_len ? x : a_in;
        /* The last layer's queries at the tail's positions only: picked from a_in before the
         * keys' and values' products, and the residual's rows of d after the attention, so
         * that the backward pass adds into the stream's gradient in the order it does through
         * every position (the residual's, the values', the keys', then the queries'). */
        const tail_rows *rows = tail && l == c->layers - 1 ? tail : NULL;
        if (rows) a_in = qkv_select_rows(step, a_in, rows->n, rows->at);
        /* (B,Tq,C): the heads side by side */
        qkv_tensor *q = product(step, a_in, m->w_q[l], rows);
        qkv_tensor *k = qkv_matmul(step, kv_in, m->w_k[l]); /* (B,T,C) */
        qkv_tensor *v = qkv_matmul(step, kv_in, m->w_v[l]);
        qkv_tensor *y;
        if (rows) {
            qkv_tensor *rows_mask = attention_mask(step, c, B, rows->n, T, lengths, rows->at);
            y = qkv_attention_heads(step, q, k, v, rows_mask, H, 0); /* (B,n,C) */
        } else if (!probe && !attn) {
            /* the fused op reads each head's columns in place and writes its output there:
             * no heads split or merged (the same bits as through split_heads) */
            y = qkv_attention_heads(step, q, k, v, mask, H, 0); /* (B,Tq,C) */
        } else {
            q = split_heads(step, q, B, Tq, H, Dk);
            k = split_heads(step, k, B, T, H, Dk);
            v = split_heads(step, v, B, T, H, Dk);
            if (probe) {
                y = probe->z[l] =
                    probe_attention(step, probe, l, q, k, v, mask, Dk, &probe->layer[l]);
                probe->attn[l] = probe->layer[l].weights;
            } else {
                y = qkv_attention(step, q, k, v, mask, 0, &attn[l]); /* composed: weights kept */
            }
            y = merge_heads(step, y, B, Tq, H, Dk);
        }
        y = product(step, y, m->w_o[l], rows); /* (B,Tq,C) */
        if (probe) probe->attn_out[l] = y;
        if (rows && c->residual) d = qkv_select_rows(step, d, rows->n, rows->at);
        d = c->residual ? qkv_add(step, d, y) : y;
        if (c->mlp > 0) {
            if (probe)
                probe->resid_mid[l] = d = edit_site(step, probe, QKV_SITE_RESID_MID, l, 0, d);
            d = qkv_add(step, d, mlp_block(step, m, l, d, probe, rows));
        }
        if (probe)
            probe->resid_post[l] = d = edit_site(step, probe, QKV_SITE_RESID_POST, l, 0, d);
    }
    if (probe) probe->stream[c->layers] = d;
    d = norm(step, m, d, m->ln_final_gain, m->ln_final_bias, probe, c->layers - 1, QKV_LN_FINAL);
    return qkv_add(step, product(step, d, m->head_w, tail), m->head_b); /* (B,Tq,V) */
}

qkv_tensor *qkv_model_forward(qkv_model *m, qkv_ctx *step, const int32_t *tokens, int batch,
                              qkv_tensor **attn) {
    return model_forward(m, step, tokens, NULL, batch, attn, NULL, NULL);
}

qkv_tensor *qkv_model_forward_padded(qkv_model *m, qkv_ctx *step, const int32_t *tokens,
                                     const int32_t *lengths, int batch, qkv_tensor **attn) {
    return model_forward(m, step, tokens, lengths, batch, attn, NULL, NULL);
}

qkv_tensor *qkv_model_forward_at(qkv_model *m, qkv_ctx *step, const int32_t *tokens,
                                 const int32_t *lengths, int batch, int n, const int32_t *at) {
    const qkv_model_config *c = &m->cfg;
    int T = c->target_len ? c->target_len : c->seq_len;
    QKV_CHECK(at && n >= 1 && n <= T, "model_forward_at", "%d positions of %d", n, T);
    for (int i = 0; i < n; i++)
        QKV_CHECK(at[i] >= (i ? at[i - 1] + 1 : 0) && at[i] < T, "model_forward_at",
                  "position %d is %d: the positions must rise within 0..%d", i, at[i], T - 1);
    /* A LayerNorm sums its gain's and bias's gradients over the rows in blocks that depend on
     * their count (layernorm_blocks), and an encoder-decoder's positions are its decoder's:
     * those compute every position, and the rows are picked from the logits. */
    if (n == T || c->target_len || c->norm != QKV_NORM_NONE)
        return n == T ? model_forward(m, step, tokens, lengths, batch, NULL, NULL, NULL)
                      : qkv_select_rows(step,
                                        model_forward(m, step, tokens, lengths, batch, NULL,
                                                      NULL, NULL),
                                        n, at);
    tail_rows tail = {T, n, at};
    return model_forward(m, step, tokens, lengths, batch, NULL, NULL, &tail);
}

qkv_tensor *qkv_model_forward_trace(qkv_model *m, qkv_ctx *step, const int32_t *tokens,
                                    int batch, qkv_layer_trace *trace) {
    return qkv_model_forward_trace_padded(m, step, tokens, NULL, batch, trace);
}

qkv_tensor *qkv_model_forward_trace_padded(qkv_model *m, qkv_ctx *step, const int32_t *tokens,
                                           const int32_t *lengths, int batch,
                                           qkv_layer_trace *trace) {
    qkv_probe probe = {0};
    qkv_tensor *logits = model_forward(m, step, tokens, lengths, batch, NULL, &probe, NULL);
    memcpy(trace, probe.layer, sizeof probe.layer[0] * (size_t)m->cfg.layers);
    return logits;
}

qkv_tensor *qkv_probe_site(const qkv_probe *probe, qkv_site site, int layer) {
    QKV_CHECK(site >= QKV_SITE_Z && site < QKV_SITES && layer >= 0 && layer < QKV_MAX_LAYERS,
              "probe_site", "site %d of layer %d", (int)site, layer);
    const qkv_layer_trace *tr = &probe->layer[layer];
    switch (site) {
    case QKV_SITE_Z: return tr->head_out;
    case QKV_SITE_Q: return tr->q;
    case QKV_SITE_K: return tr->k;
    case QKV_SITE_V: return tr->v;
    case QKV_SITE_PATTERN: return tr->weights;
    case QKV_SITE_RESID_PRE: return probe->stream[layer];
    case QKV_SITE_RESID_MID: return probe->resid_mid[layer];
    case QKV_SITE_MLP_PRE: return probe->mlp_pre[layer];
    case QKV_SITE_MLP_POST: return probe->mlp_post[layer];
    case QKV_SITE_MLP_OUT: return probe->mlp_out[layer];
    case QKV_SITE_LN_SCALE: return NULL; /* one a LayerNorm: probe->ln_scale */
    default: return probe->resid_post[layer];
    }
}

qkv_tensor *qkv_model_forward_probe(qkv_model *m, qkv_ctx *step, const int32_t *tokens,
                                    const int32_t *lengths, int batch, qkv_probe *probe) {
    QKV_CHECK(probe && probe->n_edits >= 0 && (probe->edits || !probe->n_edits),
              "model_forward_probe", "no probe, or %d edits without an array",
              probe ? probe->n_edits : 0);
    const qkv_model_config *c = &m->cfg;
    for (int e = 0; e < probe->n_edits; e++) {
        const qkv_head_edit *ed = &probe->edits[e];
        bool scale = ed->site == QKV_SITE_LN_SCALE;
        /* a LayerNorm's scale: one the model has (the MLP's with an MLP, the final one on
         * the last layer) */
        bool ln_ok = !scale || (c->norm == QKV_NORM_LAYERNORM &&
                                (ed->ln == QKV_LN_ATTN || (ed->ln == QKV_LN_MLP && c->mlp > 0) ||
                                 (ed->ln == QKV_LN_FINAL && ed->layer == c->layers - 1)));
        QKV_CHECK(ed->layer >= 0 && ed->layer < c->layers && ed->site >= QKV_SITE_Z &&
                      ed->site < QKV_SITES && (c->mlp > 0 || !mlp_site(ed->site)) && ln_ok,
                  "model_forward_probe", "edit %d: layer %d of a model of %d layers, site %d, "
                  "LayerNorm %d (an MLP's needs an MLP, ln_scale LayerNorm)", e, ed->layer,
                  c->layers, (int)ed->site, (int)ed->ln);
    }
    return model_forward(m, step, tokens, lengths, batch, NULL, probe, NULL);
}
