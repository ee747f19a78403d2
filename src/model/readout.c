/* readout.c - what the analyses read of a model, so that only model/ knows its architecture:
 * the stream read through the final LayerNorm and the vocabulary head (the logit lens), the
 * parts that add up to the stream the head reads (embedding, each head, each MLP or neuron),
 * the direct logit of a part, what a head writes into the stream and what a change of the
 * stream does to the input of a part that reads it (path patching). Everything in double,
 * from the tensors of one probed forward (qkv_model_forward_probe) and the weights. */
#include "engine/engine.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Row `row` of x (..., C) into out (C), in double. */
static void read_row(const qkv_tensor *x, int64_t row, int C, double *out) {
    for (int k = 0; k < C; k++) out[k] = qkv_get(x, row * C + k);
}

double model_final_scale(const qkv_model *m, const qkv_tensor *stream, int64_t row) {
    if (m->cfg.norm != QKV_NORM_LAYERNORM) return 1;
    int C = m->cfg.d_model;
    double mean = 0, var = 0;
    for (int k = 0; k < C; k++) mean += qkv_get(stream, row * C + k);
    mean /= C;
    for (int k = 0; k < C; k++) {
        double d = qkv_get(stream, row * C + k) - mean;
        var += d * d;
    }
    return 1 / sqrt(var / C + QKV_LAYERNORM_EPS);
}

double model_direct_logit(const qkv_model *m, const double *part, double scale, int token) {
    int C = m->cfg.d_model, V = m->cfg.vocab;
    bool ln = m->cfg.norm == QKV_NORM_LAYERNORM;
    double mean = 0, logit = 0;
    if (ln) {
        for (int k = 0; k < C; k++) mean += part[k];
        mean /= C;
    }
    for (int k = 0; k < C; k++) {
        double w = qkv_get(m->head_w, (int64_t)k * V + token);
        if (ln) w *= scale * qkv_get(m->ln_final_gain, k);
        logit += (part[k] - mean) * w;
    }
    return logit;
}

double model_logit_bias(const qkv_model *m, int token) {
    int C = m->cfg.d_model, V = m->cfg.vocab;
    double b = qkv_get(m->head_b, token);
    if (m->cfg.norm == QKV_NORM_LAYERNORM)
        for (int k = 0; k < C; k++)
            b += qkv_get(m->ln_final_bias, k) * qkv_get(m->head_w, (int64_t)k * V + token);
    return b;
}

void model_unembed(const qkv_model *m, const qkv_tensor *stream, int64_t row, double *logits,
                   double *scratch) {
    int C = m->cfg.d_model, V = m->cfg.vocab;
    read_row(stream, row, C, scratch);
    double scale = model_final_scale(m, stream, row);
    for (int j = 0; j < V; j++) logits[j] = model_direct_logit(m, scratch, scale, j) +
                                            model_logit_bias(m, j);
}

void model_head_write(const qkv_model *m, int layer, int head, const double *z, double *out) {
    int C = m->cfg.d_model, Dk = C / m->cfg.heads;
    memset(out, 0, (size_t)C * sizeof *out);
    QKV_TYPED(m->w_o[layer]->dtype,
        for (int d = 0; d < Dk; d++) {
            const T *row_w = (const T *)m->w_o[layer]->data + (int64_t)(head * Dk + d) * C;
            for (int k = 0; k < C; k++) out[k] += z[d] * (double)row_w[k];
        });
}

int model_receiver_width(const qkv_model *m, const stream_receiver *r) {
    switch (r->kind) {
    case RECEIVER_MLP: return m->cfg.mlp;
    case RECEIVER_LOGITS: return m->cfg.vocab;
    default: return m->cfg.d_model / m->cfg.heads;
    }
}

/* The LayerNorm's Jacobian at row x (C) applied to du (C), into dy (C): with s = 1/sqrt(var
 * + eps) and x̂ = (x - mean x)·s, dy = gain ⊙ s·(du - mean du - x̂·mean(du ⊙ x̂)). */
static void layernorm_jvp(const qkv_tensor *gain, const double *x, const double *du, int C,
                          double *dy) {
    double mean = 0, var = 0, mean_du = 0, mean_dux = 0;
    for (int k = 0; k < C; k++) mean += x[k], mean_du += du[k];
    mean /= C, mean_du /= C;
    for (int k = 0; k < C; k++) var += (x[k] - mean) * (x[k] - mean);
    double s = 1 / sqrt(var / C + QKV_LAYERNORM_EPS);
    for (int k = 0; k < C; k++) mean_dux += du[k] * (x[k] - mean) * s;
    mean_dux /= C;
    for (int k = 0; k < C; k++)
        dy[k] = qkv_get(gain, k) * s * (du[k] - mean_du - (x[k] - mean) * s * mean_dux);
}

void model_receiver_delta(const qkv_model *m, const qkv_probe *probe, const stream_receiver *r,
                          int64_t row, const double *du, int first, int count, double *out,
                          double *scratch) {
    const qkv_model_config *c = &m->cfg;
    int C = c->d_model, Dk = C / c->heads, l = r->layer;
    QKV_CHECK(r->kind == RECEIVER_LOGITS || (l >= 0 && l < c->layers), "model_receiver_delta",
              "layer %d of a model of %d layers", l, c->layers);
    QKV_CHECK((r->kind != RECEIVER_K && r->kind != RECEIVER_V) || !c->target_len,
              "model_receiver_delta", "an encoder-decoder's keys and values read the encoder's "
              "embeddings, not the stream");
    QKV_CHECK(r->kind != RECEIVER_MLP || c->mlp > 0, "model_receiver_delta", "no MLP");
    /* the stream the receiver reads, its LayerNorm's gain, its weights and their columns */
    const qkv_tensor *stream = r->kind == RECEIVER_MLP      ? probe->resid_mid[l]
                               : r->kind == RECEIVER_LOGITS ? probe->stream[c->layers]
                                                            : probe->stream[l];
    const qkv_tensor *gain = r->kind == RECEIVER_MLP      ? m->ln_mlp_gain[l]
                             : r->kind == RECEIVER_LOGITS ? m->ln_final_gain
                                                          : m->ln_attn_gain[l];
    const qkv_tensor *w = r->kind == RECEIVER_Q        ? m->w_q[l]
                          : r->kind == RECEIVER_K      ? m->w_k[l]
                          : r->kind == RECEIVER_V      ? m->w_v[l]
                          : r->kind == RECEIVER_MLP    ? m->mlp_w_in[l]
                                                       : m->head_w;
    int cols = (int)w->shape[1], at = r->kind <= RECEIVER_V ? r->head * Dk : 0;
    QKV_CHECK(first >= 0 && count >= 0 && first + count <= model_receiver_width(m, r),
              "model_receiver_delta", "columns %d..%d of %d", first, first + count,
              model_receiver_width(m, r));
    const double *dy = du;
    if (c->norm == QKV_NORM_LAYERNORM) { /* scratch: the row (C), then dy (C) */
        read_row(stream, row, C, scratch);
        layernorm_jvp(gain, scratch, du, C, scratch + C);
        dy = scratch + C;
    }
    /* out[e] = Σ_k dy[k]·w[k, at + first + e], summed in k's order, along w's rows */
    memset(out, 0, (size_t)count * sizeof *out);
    QKV_TYPED(w->dtype,
        for (int k = 0; k < C; k++) {
            const T *row_w = (const T *)w->data + (int64_t)k * cols + at + first;
            for (int e = 0; e < count; e++) out[e] += dy[k] * (double)row_w[e];
        });
}

int model_stream_part_count(const qkv_model *m, bool neurons) {
    const qkv_model_config *c = &m->cfg;
    int L = c->layers;
    int n = (c->residual ? L : 1) * c->heads + (c->residual ? 1 : 0);
    if (c->mlp > 0) n += L * (neurons ? c->mlp + 1 : 1);
    return n;
}

int model_stream_parts(const qkv_model *m, const qkv_probe *probe, int b, int position,
                       bool neurons, stream_part *ids, double *vectors) {
    const qkv_model_config *c = &m->cfg;
    int L = c->layers, H = c->heads, C = c->d_model, Dk = C / H, N = c->mlp;
    int64_t To = probe->stream[0]->shape[1], row = (int64_t)b * To + position;
    int n = 0;
    if (c->residual) { /* the stream entering layer 0: embeddings (or the decoder's positions) */
        ids[n] = (stream_part){PART_EMBED, -1, -1, -1};
        read_row(probe->stream[0], row, C, vectors + (size_t)n++ * C);
    }
    for (int l = c->residual ? 0 : L - 1; l < L; l++) {
        /* head h writes z_h · W_O[h·Dk .. h·Dk + Dk, :] */
        for (int h = 0; h < H; h++) {
            double *v = vectors + (size_t)n * C;
            ids[n++] = (stream_part){PART_HEAD, l, h, -1};
            memset(v, 0, (size_t)C * sizeof *v);
            for (int d = 0; d < Dk; d++) {
                double z = qkv_get(probe->z[l], (((int64_t)b * H + h) * To + position) * Dk + d);
                for (int k = 0; k < C; k++)
                    v[k] += z * qkv_get(m->w_o[l], (int64_t)(h * Dk + d) * C + k);
            }
        }
        if (N == 0) continue;
        if (!neurons) { /* the MLP's output as the forward added it, b_out included */
            ids[n] = (stream_part){PART_MLP, l, -1, -1};
            read_row(probe->mlp_out[l], row, C, vectors + (size_t)n++ * C);
            continue;
        }
        for (int u = 0; u < N; u++) { /* neuron u writes post_u · W_out[u, :] */
            double *v = vectors + (size_t)n * C;
            ids[n++] = (stream_part){PART_NEURON, l, -1, u};
            double post = qkv_get(probe->mlp_post[l], row * N + u);
            for (int k = 0; k < C; k++) v[k] = post * qkv_get(m->mlp_w_out[l], (int64_t)u * C + k);
        }
        ids[n] = (stream_part){PART_MLP_BIAS, l, -1, -1};
        read_row(m->mlp_b_out[l], 0, C, vectors + (size_t)n++ * C);
    }
    return n;
}

void model_stream_part_name(const stream_part *p, char *buf, size_t len) {
    switch (p->kind) {
    case PART_EMBED: snprintf(buf, len, "embed"); break;
    case PART_HEAD: snprintf(buf, len, "%d.%d", p->layer + 1, p->head + 1); break;
    case PART_MLP: snprintf(buf, len, "mlp %d", p->layer + 1); break;
    case PART_NEURON: snprintf(buf, len, "mlp %d.%d", p->layer + 1, p->neuron); break;
    case PART_MLP_BIAS: snprintf(buf, len, "mlp %d bias", p->layer + 1); break;
    }
}
