/* circuits.c - what each head computes, read from the weights alone: its QK and OV circuits
 * over the vocabulary, the OV circuit's copying score, and the composition scores between
 * heads of consecutive layers, or of any earlier and later layer (docs/explain.md defines
 * each). Everything is computed in
 * double from the model's weights, f32 or f64. */
#include "engine/engine.h"
#include "model/model.h"

#include <math.h>
#include <stdlib.h>

/* The weights of one head, in double: w_q, w_k, w_v (C, Dk), the head's columns of W_Q, W_K,
 * W_V; w_o (Dk, C), its rows of W_O. */
typedef struct {
    double *w_q, *w_k, *w_v, *w_o;
} head_weights;

/* dst (rows, cols) = the block of the 2-D tensor t at (row0, col0). */
static void block(double *dst, const qkv_tensor *t, int row0, int col0, int rows, int cols) {
    int64_t width = t->shape[1];
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            dst[(int64_t)i * cols + j] = qkv_get(t, (int64_t)(row0 + i) * width + col0 + j);
}

/* c (n, m) = a (n, k) · b (k, m), or with b_t: a · bᵀ where b is (m, k). */
static void matmul(double *c, const double *a, const double *b, int n, int k, int m, bool b_t) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < m; j++) {
            double s = 0;
            for (int p = 0; p < k; p++)
                s += a[(int64_t)i * k + p] * (b_t ? b[(int64_t)j * k + p] : b[(int64_t)p * m + j]);
            c[(int64_t)i * m + j] = s;
        }
}

static double frobenius(const double *a, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * a[i];
    return sqrt(s);
}

/* ---- LayerNorm folded into the weights ----
 * A LayerNorm model reads every stream through LN(x) = (x − mean x)/σ(x) ⊙ gain + bias. Its
 * circuits are those of the equivalent model whose LayerNorms keep only the division by σ
 * (docs/explain.md, "Circuits"): each gain folded into the rows of the weights that read the
 * normalized stream (W_Q, W_K, W_V of the layer, W_U), and the centring into the weights
 * that write to the stream (the embeddings and W_O's rows: the stream is then centred, and
 * subtracting its mean changes nothing). The biases become biases of the queries, keys,
 * values and logits, which the circuits (products of weights) leave out; the division by σ,
 * a positive number a position, is left out too. Without LayerNorm every reader is the
 * weights as they are. */

/* Row i of dst (rows, C) minus its mean, when the model has LayerNorm. */
static void center_rows(const qkv_model *m, double *dst, int rows, int C) {
    if (m->cfg.norm != QKV_NORM_LAYERNORM) return;
    for (int i = 0; i < rows; i++) {
        double mean = 0;
        for (int k = 0; k < C; k++) mean += dst[(int64_t)i * C + k];
        mean /= C;
        for (int k = 0; k < C; k++) dst[(int64_t)i * C + k] -= mean;
    }
}

/* Row k of dst (C, cols) times gain[k], when the model has LayerNorm (gain NULL: none). */
static void scale_rows(const qkv_model *m, double *dst, const qkv_tensor *gain, int C, int cols) {
    if (m->cfg.norm != QKV_NORM_LAYERNORM || !gain) return;
    for (int k = 0; k < C; k++) {
        double g = qkv_get(gain, k);
        for (int j = 0; j < cols; j++) dst[(int64_t)k * cols + j] *= g;
    }
}

/* dst (rows, C) = the rows of a tensor that writes to the stream (an embedding), centred. */
static void writer_rows(const qkv_model *m, double *dst, const qkv_tensor *t, int rows) {
    int C = m->cfg.d_model;
    block(dst, t, 0, 0, rows, C);
    center_rows(m, dst, rows, C);
}

/* dst (rows, C) = the rows of an embedding as the keys and values read it: centred with the
 * stream in self-attention; an encoder-decoder's keys and values read the embedded inputs
 * as they are, not through a LayerNorm. */
static void key_rows(const qkv_model *m, double *dst, const qkv_tensor *t, int rows) {
    if (m->cfg.target_len) block(dst, t, 0, 0, rows, m->cfg.d_model);
    else writer_rows(m, dst, t, rows);
}

/* dst (C, V) = W_U with the final LayerNorm's gain folded in. */
static void unembedding(const qkv_model *m, double *dst) {
    int C = m->cfg.d_model, V = m->cfg.vocab;
    block(dst, m->head_w, 0, 0, C, V);
    scale_rows(m, dst, m->ln_final_gain, C, V);
}

static void head_free(head_weights *w) {
    free(w->w_q), free(w->w_k), free(w->w_v), free(w->w_o);
    *w = (head_weights){0};
}

static qkv_status head_load(head_weights *w, const qkv_model *m, int l, int h) {
    int C = m->cfg.d_model, Dk = C / m->cfg.heads;
    size_t bytes = (size_t)C * Dk * sizeof(double);
    *w = (head_weights){malloc(bytes), malloc(bytes), malloc(bytes), malloc(bytes)};
    if (!w->w_q || !w->w_k || !w->w_v || !w->w_o) {
        head_free(w);
        return qkv_fail(QKV_ERR_NOMEM, "out of memory for the circuits");
    }
    block(w->w_q, m->w_q[l], 0, h * Dk, C, Dk);
    block(w->w_k, m->w_k[l], 0, h * Dk, C, Dk);
    block(w->w_v, m->w_v[l], 0, h * Dk, C, Dk);
    block(w->w_o, m->w_o[l], h * Dk, 0, Dk, C);
    /* the layer's LayerNorm reads the queries' stream, and in self-attention the keys' and
     * values' too (an encoder-decoder's read the embeddings as they are) */
    const qkv_tensor *gain = m->ln_attn_gain[l];
    scale_rows(m, w->w_q, gain, C, Dk);
    scale_rows(m, w->w_k, m->cfg.target_len ? NULL : gain, C, Dk);
    scale_rows(m, w->w_v, m->cfg.target_len ? NULL : gain, C, Dk);
    center_rows(m, w->w_o, Dk, C);
    return QKV_OK;
}

/* out (R, N) = scale · (a W_Q)(b W_K)ᵀ for the R rows of a (the queries' stream) and the N
 * rows of b (the keys'), each with C columns: the attention scores between those inputs
 * through one head (LayerNorm folded). */
static qkv_status qk_part(double *out, const qkv_model *m, const qkv_tensor *a,
                          const qkv_tensor *b, const head_weights *w, int C, int Dk) {
    int R = (int)a->shape[0], N = (int)b->shape[0];
    double *ad = malloc((size_t)R * C * sizeof *ad), *bd = malloc((size_t)N * C * sizeof *bd);
    double *q = malloc((size_t)R * Dk * sizeof *q), *k = malloc((size_t)N * Dk * sizeof *k);
    if (!ad || !bd || !q || !k) {
        free(ad), free(bd), free(q), free(k);
        return qkv_fail(QKV_ERR_NOMEM, "out of memory for the circuits");
    }
    writer_rows(m, ad, a, R);
    key_rows(m, bd, b, N);
    matmul(q, ad, w->w_q, R, C, Dk, false);
    matmul(k, bd, w->w_k, N, C, Dk, false);
    matmul(out, q, k, R, Dk, N, true);
    double scale = 1.0 / sqrt((double)Dk); /* as the model's forward scales its scores */
    for (int64_t i = 0; i < (int64_t)R * N; i++) out[i] *= scale;
    free(ad), free(bd), free(q), free(k);
    return QKV_OK;
}

qkv_status qkv_head_circuits(const qkv_model *m, int layer, int head, double *qk, double *qk_pos,
                             double *ov) {
    const qkv_model_config *c = &m->cfg;
    QKV_CHECK(layer >= 0 && layer < c->layers && head >= 0 && head < c->heads,
              "qkv_head_circuits", "no head %d of layer %d", head, layer);
    int V = c->vocab, C = c->d_model, Dk = C / c->heads;
    head_weights w;
    qkv_status s = head_load(&w, m, layer, head);
    if (s != QKV_OK) return s;
    /* the query side's own embedding: tokens, or an encoder-decoder's decoder positions */
    const qkv_tensor *query_tok = c->target_len ? m->dec_pos_emb : m->tok_emb;
    const qkv_tensor *query_pos = c->target_len ? m->dec_pos_emb : m->pos_emb;
    if (qk) s = qk_part(qk, m, query_tok, m->tok_emb, &w, C, Dk);
    if (s == QKV_OK && qk_pos) s = qk_part(qk_pos, m, query_pos, m->pos_emb, &w, C, Dk);
    if (s == QKV_OK && ov) {
        /* ov (V, V) = E W_V W_O W_U: row t, the logits the head adds when it attends to t */
        double *e = malloc((size_t)V * C * sizeof *e), *u = malloc((size_t)C * V * sizeof *u);
        double *ev = malloc((size_t)V * Dk * sizeof *ev), *ou = malloc((size_t)Dk * V * sizeof *ou);
        if (e && u && ev && ou) {
            key_rows(m, e, m->tok_emb, V);
            unembedding(m, u);
            matmul(ev, e, w.w_v, V, C, Dk, false);
            matmul(ou, w.w_o, u, Dk, C, V, false);
            matmul(ov, ev, ou, V, Dk, V, false);
        } else {
            s = qkv_fail(QKV_ERR_NOMEM, "out of memory for the circuits");
        }
        free(e), free(u), free(ev), free(ou);
    }
    head_free(&w);
    return s;
}

/* Σ Re λ / Σ |λ| over the eigenvalues λ of the (n, n) matrix a (overwritten); NaN when every
 * eigenvalue is 0. */
static qkv_status copying_score(double *a, int n, double *score) {
    double *wr = malloc((size_t)n * sizeof *wr), *wi = malloc((size_t)n * sizeof *wi);
    int lwork = 8 * n, info = 0;
    double *work = malloc((size_t)lwork * sizeof *work);
    if (!wr || !wi || !work) {
        free(wr), free(wi), free(work);
        return qkv_fail(QKV_ERR_NOMEM, "out of memory for the circuits");
    }
    /* a is row-major, LAPACK reads it as aᵀ: the same eigenvalues */
    qkv_status s = lapack_dgeev(n, a, wr, wi, work, lwork, &info);
    if (s != QKV_OK) {
        free(wr), free(wi), free(work);
        return s;
    }
    double re = 0, abs = 0;
    for (int i = 0; i < n; i++) {
        re += wr[i];
        abs += hypot(wr[i], wi[i]);
    }
    free(wr), free(wi), free(work);
    if (info != 0)
        return qkv_fail(QKV_ERR_NUMERIC, "the eigenvalues of an OV circuit did not converge");
    *score = abs > 0 ? re / abs : NAN;
    return QKV_OK;
}

qkv_status qkv_copying_scores(const qkv_model *m, double *scores) {
    const qkv_model_config *c = &m->cfg;
    int V = c->vocab, C = c->d_model, Dk = C / c->heads;
    /* The OV circuit (E W_V)(W_O W_U) is (V, Dk)·(Dk, V); its nonzero eigenvalues are those
     * of the product the other way round, (W_O W_U)(E W_V), only (Dk, Dk). */
    double *e = malloc((size_t)V * C * sizeof *e), *u = malloc((size_t)C * V * sizeof *u);
    double *ou = malloc((size_t)Dk * V * sizeof *ou), *oue = malloc((size_t)Dk * C * sizeof *oue);
    double *small = malloc((size_t)Dk * Dk * sizeof *small);
    qkv_status s = QKV_OK;
    if (!e || !u || !ou || !oue || !small)
        s = qkv_fail(QKV_ERR_NOMEM, "out of memory for the circuits");
    if (s == QKV_OK) {
        key_rows(m, e, m->tok_emb, V);
        unembedding(m, u);
    }
    for (int l = 0; s == QKV_OK && l < c->layers; l++)
        for (int h = 0; s == QKV_OK && h < c->heads; h++) {
            head_weights w;
            if ((s = head_load(&w, m, l, h)) != QKV_OK) break;
            matmul(ou, w.w_o, u, Dk, C, V, false);
            matmul(oue, ou, e, Dk, V, C, false);
            matmul(small, oue, w.w_v, Dk, C, Dk, false);
            s = copying_score(small, Dk, &scores[l * c->heads + h]);
            head_free(&w);
        }
    free(e), free(u), free(ou), free(oue), free(small);
    return s;
}

/* ‖W_V1 W_O1 · X Yᵀ‖ / (‖W_V1 W_O1‖ ‖X Yᵀ‖), X and Y (C, Dk): the earlier head's OV
 * matrix times the later head's matrix X Yᵀ (C, C), computed as (W_V1 (W_O1 X)) Yᵀ. t1 (Dk, Dk),
 * t2 (C, Dk), t3 (C, C) are scratch. NaN when a norm is 0. */
static double compose(const head_weights *first, const double *x, const double *y, int C, int Dk,
                      double ov_norm, double *t1, double *t2, double *t3) {
    matmul(t3, x, y, C, Dk, C, true);
    double later_norm = frobenius(t3, (int64_t)C * C);
    matmul(t1, first->w_o, x, Dk, C, Dk, false);
    matmul(t2, first->w_v, t1, C, Dk, Dk, false);
    matmul(t3, t2, y, C, Dk, C, true);
    double denominator = ov_norm * later_norm;
    return denominator > 0 ? frobenius(t3, (int64_t)C * C) / denominator : NAN;
}

/* The composition scores of the pairs of layers (l1, l2), l1 < l2, that `all` asks for: every
 * pair (by l1, then l2) or only the consecutive ones, each pair's (3, H, H) block after the
 * last. */
static qkv_status composition_scores(const qkv_model *m, bool all, double *scores) {
    const qkv_model_config *c = &m->cfg;
    int L = c->layers, H = c->heads, C = c->d_model, Dk = C / H;
    if (L < 2) return QKV_OK;
    head_weights *w = calloc((size_t)L * H, sizeof *w);
    double *t1 = malloc((size_t)Dk * Dk * sizeof *t1), *t2 = malloc((size_t)C * Dk * sizeof *t2);
    double *t3 = malloc((size_t)C * C * sizeof *t3);
    double *ov_norm = malloc((size_t)L * H * sizeof *ov_norm);
    double *w_ot = malloc((size_t)C * Dk * sizeof *w_ot);
    qkv_status s = QKV_OK;
    if (!w || !t1 || !t2 || !t3 || !ov_norm || !w_ot)
        s = qkv_fail(QKV_ERR_NOMEM, "out of memory for the circuits");
    for (int i = 0; s == QKV_OK && i < L * H; i++) {
        s = head_load(&w[i], m, i / H, i % H);
        if (s != QKV_OK) break;
        matmul(t3, w[i].w_v, w[i].w_o, C, Dk, C, false);
        ov_norm[i] = frobenius(t3, (int64_t)C * C);
    }
    int64_t pair = 0; /* the block being written */
    for (int l = 0; s == QKV_OK && l + 1 < L; l++)
        for (int l2 = l + 1; l2 < (all ? L : l + 2); l2++, pair++)
            for (int h2 = 0; h2 < H; h2++) {
                const head_weights *later = &w[l2 * H + h2];
                for (int i = 0; i < Dk; i++) /* w_ot (C, Dk) = the later head's W_Oᵀ */
                    for (int j = 0; j < C; j++)
                        w_ot[(int64_t)j * Dk + i] = later->w_o[(int64_t)i * C + j];
                for (int h1 = 0; h1 < H; h1++) {
                    const head_weights *first = &w[l * H + h1];
                    double n1 = ov_norm[l * H + h1];
                    double *at = &scores[(pair * 3 * H) * H + h1 * H + h2];
                    /* Q: the later W_Q W_Kᵀ; K: its transpose W_K W_Qᵀ; V: the later W_V W_O.
                     * An encoder-decoder's keys and values read the embeddings, never a head. */
                    at[(int64_t)QKV_COMPOSE_Q * H * H] =
                        compose(first, later->w_q, later->w_k, C, Dk, n1, t1, t2, t3);
                    at[(int64_t)QKV_COMPOSE_K * H * H] = c->target_len ? NAN :
                        compose(first, later->w_k, later->w_q, C, Dk, n1, t1, t2, t3);
                    at[(int64_t)QKV_COMPOSE_V * H * H] = c->target_len ? NAN :
                        compose(first, later->w_v, w_ot, C, Dk, n1, t1, t2, t3);
                }
            }
    for (int i = 0; w && i < L * H; i++) head_free(&w[i]);
    free(w), free(t1), free(t2), free(t3), free(ov_norm), free(w_ot);
    return s;
}

qkv_status qkv_composition_scores(const qkv_model *m, double *scores) {
    return composition_scores(m, false, scores);
}

qkv_status qkv_composition_scores_all(const qkv_model *m, double *scores) {
    return composition_scores(m, true, scores);
}

/* ---- the mapping view: which token a head's OV circuit writes for each token it attends to,
 * against the token the task or the data asks for (docs/explain.md, "Mapping") ---- */

#define MAPPING_SEQUENCES 2048 /* a built-in task's sequences read for its token mapping, */
#define MAPPING_CELLS (1 << 24) /* fewer where their ideal patterns (T, T) pass this many cells */
#define MAPPING_SEED 0x6d617070696e6773ull /* "mappings": the same sequences for every model */

/* expected[t] = the y of the largest count[t][y] (the lowest y of a tie), -1 where t has none;
 * count is (V, V). */
static void argmax_rows(const double *count, int V, int32_t *expected) {
    for (int t = 0; t < V; t++) {
        expected[t] = -1;
        double best = 0;
        for (int y = 0; y < V; y++)
            if (count[(int64_t)t * V + y] > best) best = count[(int64_t)t * V + y], expected[t] = y;
    }
}

qkv_status circuits_task_mapping(const qkv_task *task, int32_t *expected, bool *key_token) {
    int T = task->seq_len, V = task->vocab, To = task->target_len ? task->target_len : T;
    double *count = calloc((size_t)V * V, sizeof *count);
    int32_t *x = malloc((size_t)T * sizeof *x), *y = malloc((size_t)To * sizeof *y);
    uint8_t *ideal = malloc((size_t)T * T);
    if (!count || !x || !y || !ideal) {
        free(count), free(x), free(y), free(ideal);
        return qkv_fail(QKV_ERR_NOMEM, "out of memory for the circuits' mapping");
    }
    for (int t = 0; t < V; t++) key_token[t] = false;
    /* each target y of a query and each key its ideal pattern attends to, holding token t:
     * one vote for t -> y (translate: source word -> its translation; copy, induction, sort:
     * t -> t; lookup: a pair's token -> its value) */
    qkv_rng rng = qkv_rng_seed(MAPPING_SEED);
    int64_t sequences = MAPPING_CELLS / ((int64_t)T * T);
    sequences = sequences < 4 ? 4 : sequences > MAPPING_SEQUENCES ? MAPPING_SEQUENCES : sequences;
    for (int64_t n = 0; n < sequences; n++) {
        qkv_task_sample(task, &rng, false, x, y);
        qkv_task_ideal(task, x, ideal);
        for (int j = 0; j < T; j++) key_token[x[j]] = true;
        for (int i = 0; i < To; i++)
            for (int j = 0; j < T && y[i] >= 0; j++)
                if (ideal[(int64_t)i * T + j]) count[(int64_t)x[j] * V + y[i]] += 1;
    }
    argmax_rows(count, V, expected);
    free(count), free(x), free(y), free(ideal);
    return QKV_OK;
}

qkv_status circuits_data_mapping(int V, int n, int in_len, int out_len, const int32_t *x,
                                 const int32_t *y, int32_t *expected, bool *key_token) {
    /* in[t]: examples whose input holds t; out[u]: whose output holds u; both[t*V+u] */
    double *both = calloc((size_t)V * V, sizeof *both);
    double *in = calloc((size_t)V, sizeof *in), *out = calloc((size_t)V, sizeof *out);
    int *seen_at = malloc((size_t)V * sizeof *seen_at); /* the last example t was counted in */
    if (!both || !in || !out || !seen_at) {
        free(both), free(in), free(out), free(seen_at);
        return qkv_fail(QKV_ERR_NOMEM, "out of memory for the circuits' mapping");
    }
    for (int t = 0; t < V; t++) seen_at[t] = -1;
    for (int e = 0; e < n; e++) {
        const int32_t *xe = x + (int64_t)e * in_len, *ye = y + (int64_t)e * out_len;
        for (int k = 0; k < out_len; k++) /* each output token once per example */
            if (ye[k] >= 0 && seen_at[ye[k]] != e) seen_at[ye[k]] = e, out[ye[k]] += 1;
        for (int j = 0; j < in_len; j++) {
            int t = xe[j];
            if (t <= 0 || seen_at[t] == 2 * n + e) continue; /* the padding, or t counted */
            seen_at[t] = 2 * n + e, in[t] += 1;
            for (int k = 0; k < out_len; k++) { /* each output token u once: it was the first */
                int u = ye[k], first = 1;
                for (int q = 0; q < k && u >= 0; q++) first &= ye[q] != u;
                if (u >= 0 && first) both[(int64_t)t * V + u] += 1;
            }
        }
    }
    /* t -> the output token whose presence t raises most: P(u | t in the input) - P(u | t not
     * in it), a contrast that a token in every output (which every input token "predicts")
     * does not win */
    for (int t = 0; t < V; t++) {
        key_token[t] = in[t] > 0;
        for (int u = 0; u < V; u++) {
            double *b = &both[(int64_t)t * V + u];
            if (!key_token[t]) {
                *b = 0;
                continue;
            }
            double without = n - in[t] > 0 ? (out[u] - *b) / (n - in[t]) : 0;
            *b = *b / in[t] - without;
        }
    }
    argmax_rows(both, V, expected);
    free(both), free(in), free(out), free(seen_at);
    return QKV_OK;
}

int circuits_top_targets(const double *ov, int V, const bool *key_token, const int32_t *expected,
                         int32_t *top, int *sources) {
    int right = 0;
    *sources = 0;
    for (int t = 0; t < V; t++) {
        top[t] = -1;
        if (!key_token[t]) continue;
        const double *row = ov + (int64_t)t * V;
        top[t] = 0;
        for (int u = 1; u < V; u++)
            if (row[u] > row[top[t]]) top[t] = u;
        if (expected[t] < 0) continue;
        ++*sources;
        right += top[t] == expected[t];
    }
    return right;
}

qkv_status qkv_neuron_logits(const qkv_model *m, int layer, double *out) {
    const qkv_model_config *c = &m->cfg;
    QKV_CHECK(layer >= 0 && layer < c->layers, "qkv_neuron_logits", "no layer %d", layer);
    if (c->mlp == 0) return qkv_fail(QKV_ERR_VALUE, "the model has no MLP");
    qkv_status s = QKV_OK;
    int N = c->mlp, C = c->d_model, V = c->vocab;
    double *w = malloc((size_t)N * C * sizeof *w), *u = malloc((size_t)C * V * sizeof *u);
    if (!w || !u) s = qkv_fail(QKV_ERR_NOMEM, "out of memory for the neuron-logit map");
    if (s == QKV_OK) {
        block(w, m->mlp_w_out[layer], 0, 0, N, C);
        center_rows(m, w, N, C); /* W_out writes to the stream */
        unembedding(m, u);
        matmul(out, w, u, N, C, V, false); /* row n: what neuron n adds to the logits per unit */
    }
    free(w), free(u);
    return s;
}
