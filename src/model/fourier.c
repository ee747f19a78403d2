/* fourier.c - the Fourier measures of a modular model (docs/grokking.md defines each): the
 * embedding's and the neuron-logit map's norm in each frequency of Z/P, the key frequencies,
 * their Gini coefficients, the sum of squared weights, and from one forward over every pair
 * a b = the train and test loss, the restricted and excluded loss, the logits' share along
 * the key frequencies' cos(w(a + b - c)) and sin(w(a + b - c)), and each MLP neuron's share
 * of variance in one frequency. Everything in double, whatever the model's dtype.
 *
 * Z/P's real orthonormal basis (fourier_basis): row 0 the constant 1/sqrt(P); for k = 1 ..
 * (P-1)/2, row 2k-1 sqrt(2/P)·cos(w_k x) and row 2k sqrt(2/P)·sin(w_k x), w_k = 2πk/P; for an
 * even P, row P-1 the Nyquist term (-1)^x / sqrt(P). Frequency k = 0 .. P/2 owns rows 0, or
 * 2k-1 and 2k, or P-1: a frequency's norm combines its rows. */
#include "engine/engine.h"
#include "model/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A frequency is key when its squared norm in the embedding is at least KEY_RATIO times the
 * median over the frequencies 1 .. P/2 and at least KEY_SHARE_OF_TOP of the largest
 * (docs/grokking.md, "Key frequencies"). */
#define KEY_RATIO 4.0
#define KEY_SHARE_OF_TOP 0.1
/* A neuron whose variance over the inputs is at most this share of its mean square is
 * constant (dead): it has no frequency share and no cluster. */
#define CONSTANT_NEURON 1e-12
#define TWO_PI 6.28318530717958647692

int fourier_top_frequency(int P) {
    return P / 2;
}

/* The frequency of basis row r. */
static int row_frequency(int P, int r) {
    return P % 2 == 0 && r == P - 1 ? P / 2 : (r + 1) / 2;
}

/* cos and sin of 2πj/P for j = 0 .. P-1: w_k·x is read at (k·x) mod P, exact for every k, x. */
typedef struct {
    int P;
    double *cos, *sin;
} trig_table;

static bool trig_init(trig_table *t, int P) {
    t->P = P;
    t->cos = malloc((size_t)P * sizeof *t->cos);
    t->sin = malloc((size_t)P * sizeof *t->sin);
    if (!t->cos || !t->sin) return false;
    for (int j = 0; j < P; j++) {
        t->cos[j] = cos(TWO_PI * j / P);
        t->sin[j] = sin(TWO_PI * j / P);
    }
    if (P % 2 == 0) t->sin[P / 2] = 0; /* exactly: the Nyquist term has no sine */
    return true;
}

static void trig_free(trig_table *t) {
    free(t->cos), free(t->sin);
    t->cos = t->sin = NULL;
}

static int at(const trig_table *t, int k, int x) {
    return (int)(((int64_t)k * x) % t->P);
}

void fourier_basis(int P, double *basis) {
    for (int x = 0; x < P; x++) basis[x] = 1 / sqrt((double)P);
    for (int k = 1; 2 * k < P; k++)
        for (int x = 0; x < P; x++) {
            int j = (int)(((int64_t)k * x) % P);
            basis[(int64_t)(2 * k - 1) * P + x] = sqrt(2.0 / P) * cos(TWO_PI * j / P);
            basis[(int64_t)(2 * k) * P + x] = sqrt(2.0 / P) * sin(TWO_PI * j / P);
        }
    if (P % 2 == 0)
        for (int x = 0; x < P; x++) basis[(int64_t)(P - 1) * P + x] = (x % 2 ? -1 : 1) / sqrt((double)P);
}

void fourier_norms(const double *basis, int P, const double *x, int n, double *norm) {
    int F = P / 2;
    for (int k = 0; k <= F; k++) norm[k] = 0;
    for (int r = 0; r < P; r++) {
        const double *row = basis + (int64_t)r * P;
        double sum = 0;
        for (int j = 0; j < n; j++) {
            double c = 0;
            for (int i = 0; i < P; i++) c += row[i] * x[(int64_t)i * n + j];
            sum += c * c;
        }
        norm[row_frequency(P, r)] += sum;
    }
    for (int k = 0; k <= F; k++) norm[k] = sqrt(norm[k]);
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double fourier_gini(const double *x, int n) {
    if (n < 1) return NAN;
    double *s = malloc((size_t)n * sizeof *s);
    if (!s) return NAN;
    memcpy(s, x, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, compare_doubles);
    /* Σ_i Σ_j |x_i - x_j| / (2 n Σ x): with x ascending, Σ_i (2i - n + 1)·x_i / (n Σ x) */
    double weighted = 0, total = 0;
    for (int i = 0; i < n; i++) {
        weighted += (2.0 * i - n + 1) * s[i];
        total += s[i];
    }
    free(s);
    return total > 0 ? weighted / (n * total) : NAN;
}

int fourier_key_frequencies(const double *norm, int P, int *keys) {
    int F = P / 2, n = 0;
    if (F < 1) return 0;
    double *sq = malloc((size_t)F * sizeof *sq);
    if (!sq) return 0;
    for (int k = 1; k <= F; k++) sq[k - 1] = norm[k] * norm[k];
    qsort(sq, (size_t)F, sizeof *sq, compare_doubles);
    double median = F % 2 ? sq[F / 2] : (sq[F / 2 - 1] + sq[F / 2]) / 2, top = sq[F - 1];
    free(sq);
    for (int k = 1; k <= F; k++) {
        double e = norm[k] * norm[k];
        if (e > 0 && e >= KEY_RATIO * median && e >= KEY_SHARE_OF_TOP * top) keys[n++] = k;
    }
    return n;
}

double model_sum_squared_weights(const qkv_model *m) {
    double sum = 0;
    for (int i = 0; i < m->nparams; i++) {
        const qkv_tensor *p = m->param[i];
        QKV_TYPED(p->dtype,
            const T *d = (const T *)p->data;
            for (int64_t j = 0; j < p->size; j++) sum += (double)d[j] * (double)d[j];);
    }
    return sum;
}

void fourier_measures_free(fourier_measures *f) {
    free(f->embed_norm), free(f->logit_map_norm), free(f->keys), free(f->key_share);
    free(f->neuron_share), free(f->neuron_cluster), free(f->neuron_freq_share);
    memset(f, 0, sizeof *f);
}

/* ---- what the weights alone give ---- */

/* The embedding's rows 0 .. P-1 (the numbers) as x (P, C), and the neuron-logit map of every
 * layer's MLP (qkv_neuron_logits), its columns 0 .. P-1 (the numbers' logits), as x (P, L·N):
 * each transformed over its first axis. */
static qkv_status weight_norms(const qkv_model *m, int P, const double *basis,
                               fourier_measures *f) {
    const qkv_model_config *c = &m->cfg;
    int C = c->d_model, V = c->vocab, N = c->mlp, L = c->layers, F = P / 2;
    double *x = malloc((size_t)P * C * sizeof *x);
    if (!x) return qkv_fail(QKV_ERR_NOMEM, "out of memory for the Fourier measures");
    for (int t = 0; t < P; t++)
        for (int k = 0; k < C; k++) x[(int64_t)t * C + k] = qkv_get(m->tok_emb, (int64_t)t * C + k);
    fourier_norms(basis, P, x, C, f->embed_norm);
    free(x);
    f->gini_embed = fourier_gini(f->embed_norm + 1, F);
    f->n_keys = fourier_key_frequencies(f->embed_norm, P, f->keys);
    f->sum_squared_weights = model_sum_squared_weights(m);
    f->gini_neuron_logits = NAN;
    if (N == 0) return QKV_OK;
    double *map = malloc((size_t)N * V * sizeof *map);
    x = malloc((size_t)P * L * N * sizeof *x);
    qkv_status s = map && x && f->logit_map_norm
                       ? QKV_OK : qkv_fail(QKV_ERR_NOMEM, "out of memory for the Fourier measures");
    for (int l = 0; s == QKV_OK && l < L; l++) {
        if ((s = qkv_neuron_logits(m, l, map)) != QKV_OK) break;
        for (int t = 0; t < P; t++)
            for (int u = 0; u < N; u++)
                x[(int64_t)t * L * N + l * N + u] = map[(int64_t)u * V + t];
    }
    if (s == QKV_OK) {
        fourier_norms(basis, P, x, L * N, f->logit_map_norm);
        f->gini_neuron_logits = fourier_gini(f->logit_map_norm + 1, F);
    }
    free(map), free(x);
    return s;
}

/* ---- what a forward over every pair gives ---- */

/* The sums one pass over the pairs keeps. For the logits (of the numbers, c < P), with s =
 * a + b (sub: a - b) mod P, for each key frequency k: A[k][c] = Σ L[ab, c]·cos(w_k s) and
 * B[k][c] = Σ L[ab, c]·sin(w_k s) over every pair, and mean[c] = Σ L[ab, c] / P²: the
 * projections of each output's logits onto cos(w_k s) and sin(w_k s) over the inputs. For each
 * neuron u (at `=`), the 2-D transform's sums: its sums over each row a, each column b, each
 * diagonal a + b and a - b, and its sum and sum of squares. */
typedef struct {
    int P, V, K, sign; /* sign: +1 add, -1 sub, 0 mul (no logit measures) */
    const int *keys;
    const uint8_t *trains; /* (P²): pair a·P + b trains */
    const trig_table *trig;
    double *A, *B, *mean;  /* (K, P), (K, P), (P) */
    double *logit;         /* (V): one pair's logits, scratch */
    int64_t *held_at;      /* (P): held-out pairs of each s */
    double train_loss, test_loss, sq_centred;
    int64_t train_right, test_right, n_train, n_held;
    /* neurons */
    int U;                 /* L·N, 0: none */
    double *row, *col, *dplus, *dminus, *sum, *sumsq; /* (P, U) x 4, (U) x 2 */
    /* pass 2: the excluded loss */
    double excluded;
} pair_sums;

/* -log softmax(logit[0 .. n-1])[target], in double. */
static double nll(const double *logit, int n, int target) {
    double top = -INFINITY, z = 0;
    for (int j = 0; j < n; j++) top = logit[j] > top ? logit[j] : top;
    for (int j = 0; j < n; j++) z += exp(logit[j] - top);
    return top + log(z) - logit[target];
}

/* The projection of one output's logits onto the key frequencies' directions, at s:
 * Σ_k (A[k][c] cos(w_k s) + B[k][c] sin(w_k s)) / |cos(w_k s)|², |cos(w_k ·)|² over the P²
 * pairs being P²/2 (P²: the Nyquist term's). */
static double key_part(const pair_sums *p, int c, int s) {
    double v = 0;
    for (int i = 0; i < p->K; i++) {
        int k = p->keys[i], j = at(p->trig, k, s);
        double n2 = 2 * k == p->P ? (double)p->P * p->P : (double)p->P * p->P / 2;
        v += (p->A[i * p->P + c] * p->trig->cos[j] + p->B[i * p->P + c] * p->trig->sin[j]) / n2;
    }
    return v;
}

static int pair_s(const pair_sums *p, int a, int b) {
    return (int)(((int64_t)a + (p->sign < 0 ? p->P - b : b)) % p->P);
}

/* Pass 1: one pair's logits (V) and neurons (U, NULL: none) into the sums. */
static void add_pair(pair_sums *p, int64_t k, const double *logit, int target, int argmax,
                     const double *neuron) {
    int P = p->P, a = (int)(k / P), b = (int)(k % P);
    bool trains = p->trains[k];
    double loss = nll(logit, p->V, target);
    if (trains) p->train_loss += loss, p->train_right += argmax == target, p->n_train++;
    else p->test_loss += loss, p->test_right += argmax == target, p->n_held++;
    if (p->sign) {
        int s = pair_s(p, a, b);
        if (!trains) p->held_at[s]++;
        double row_mean = 0;
        for (int c = 0; c < P; c++) row_mean += logit[c];
        row_mean /= P;
        for (int c = 0; c < P; c++) {
            p->mean[c] += logit[c];
            p->sq_centred += (logit[c] - row_mean) * (logit[c] - row_mean);
        }
        for (int i = 0; i < p->K; i++) {
            int j = at(p->trig, p->keys[i], s);
            double cs = p->trig->cos[j], sn = p->trig->sin[j];
            double *A = p->A + (int64_t)i * P, *B = p->B + (int64_t)i * P;
            for (int c = 0; c < P; c++) A[c] += logit[c] * cs, B[c] += logit[c] * sn;
        }
    }
    if (!neuron) return;
    int U = p->U, plus = (a + b) % P, minus = (a - b + P) % P;
    for (int u = 0; u < U; u++) {
        double f = neuron[u];
        p->row[(int64_t)a * U + u] += f;
        p->col[(int64_t)b * U + u] += f;
        p->dplus[(int64_t)plus * U + u] += f;
        p->dminus[(int64_t)minus * U + u] += f;
        p->sum[u] += f;
        p->sumsq[u] += f * f;
    }
}

/* Pass 2: a training pair's excluded loss, its logits less their key part. */
static void add_excluded(pair_sums *p, int64_t k, double *logit, int target) {
    int s = pair_s(p, (int)(k / p->P), (int)(k % p->P));
    for (int c = 0; c < p->P; c++) logit[c] -= key_part(p, c, s);
    p->excluded += nll(logit, p->P, target);
}

/* The forward over pairs `pairs` (n of them; NULL: every pair in index order), `batch` at a
 * time in ctx, each pair's logits handed to add_pair (pass 1) or add_excluded (pass 2). */
static qkv_status forward_pairs(qkv_model *m, const qkv_task *task, qkv_ctx *ctx, int batch,
                                const int32_t *pairs, int64_t n, bool pass2, pair_sums *p) {
    int P = p->P, V = p->V, N = m->cfg.mlp, L = m->cfg.layers, T = QKV_MODULAR_SEQ_LEN;
    int32_t *x = malloc((size_t)batch * T * sizeof *x), y[QKV_MODULAR_SEQ_LEN];
    double *neuron = p->U && !pass2 ? malloc((size_t)p->U * sizeof *neuron) : NULL;
    if (!x || (p->U && !pass2 && !neuron)) {
        free(x), free(neuron);
        return qkv_fail(QKV_ERR_NOMEM, "out of memory for the Fourier measures");
    }
    for (int64_t start = 0; start < n; start += batch) {
        int B = n - start < batch ? (int)(n - start) : batch;
        for (int i = 0; i < B; i++) {
            int64_t k = pairs ? pairs[start + i] : start + i;
            x[i * T] = (int32_t)(k / P), x[i * T + 1] = (int32_t)(k % P), x[i * T + 2] = P;
        }
        qkv_ctx_reset(ctx);
        qkv_probe probe = {0};
        qkv_tensor *logits = neuron ? qkv_model_forward_probe(m, ctx, x, NULL, B, &probe)
                                    : qkv_model_forward_padded(m, ctx, x, NULL, B, NULL);
        for (int i = 0; i < B; i++) {
            int64_t k = pairs ? pairs[start + i] : start + i, r = (int64_t)i * T + T - 1;
            qkv_task_targets(task, x + i * T, y);
            for (int c = 0; c < V; c++) p->logit[c] = qkv_get(logits, r * V + c);
            if (pass2) {
                add_excluded(p, k, p->logit, y[T - 1]);
                continue;
            }
            for (int l = 0; neuron && l < L; l++)
                for (int u = 0; u < N; u++)
                    neuron[l * N + u] = qkv_get(probe.mlp_post[l], r * N + u);
            add_pair(p, k, p->logit, y[T - 1], (int)qkv_argmax(logits, r * V, V), neuron);
        }
    }
    free(x), free(neuron);
    return QKV_OK;
}

/* Each neuron's share of variance in each frequency, from its sums (docs/grokking.md): with
 * f(a, b) its activation, R, Cl, D+ and D- its sums over rows, columns and the diagonals a + b
 * and a - b, frequency k's terms of the 2-D transform are the linear ones (cos and sin of w a,
 * of w b: from R and Cl) and the products (cos w a · cos w b ... : from D+ and D-, as
 * cos w a cos w b = (cos w(a - b) + cos w(a + b)) / 2 ...); its variance is Σ f² - (Σ f)²/P². */
static void neuron_shares(const pair_sums *p, fourier_measures *f) {
    int P = p->P, U = p->U, F = P / 2;
    const trig_table *t = p->trig;
    for (int u = 0; u < U; u++) {
        double total = p->sumsq[u] - p->sum[u] * p->sum[u] / ((double)P * P);
        double *by_frequency = f->neuron_freq_share + (int64_t)u * (F + 1);
        f->neuron_share[u] = NAN;
        f->neuron_cluster[u] = 0;
        by_frequency[0] = 0;
        for (int k = 1; k <= F; k++) by_frequency[k] = NAN;
        if (!(total > CONSTANT_NEURON * p->sumsq[u])) continue;
        for (int k = 1; k <= F; k++) {
            double lin[4] = {0}, quad[4] = {0}; /* cos, sin of the rows', columns'; C+ S+ C- S- */
            for (int x = 0; x < P; x++) {
                int j = at(t, k, x);
                double cs = t->cos[j], sn = t->sin[j];
                lin[0] += cs * p->row[(int64_t)x * U + u], lin[1] += sn * p->row[(int64_t)x * U + u];
                lin[2] += cs * p->col[(int64_t)x * U + u], lin[3] += sn * p->col[(int64_t)x * U + u];
                quad[0] += cs * p->dplus[(int64_t)x * U + u], quad[1] += sn * p->dplus[(int64_t)x * U + u];
                quad[2] += cs * p->dminus[(int64_t)x * U + u], quad[3] += sn * p->dminus[(int64_t)x * U + u];
            }
            double PP = (double)P * P, energy;
            if (2 * k == P) /* one row: (-1)^x / sqrt(P); its product (-1)^(a+b) / P */
                energy = (lin[0] * lin[0] + lin[2] * lin[2] + quad[0] * quad[0]) / PP;
            else
                energy = 2 * (lin[0] * lin[0] + lin[1] * lin[1] + lin[2] * lin[2] + lin[3] * lin[3]) / PP +
                         2 * (quad[0] * quad[0] + quad[1] * quad[1] + quad[2] * quad[2] + quad[3] * quad[3]) / PP;
            double share = energy / total;
            by_frequency[k] = share;
            if (k == 1 || share > f->neuron_share[u]) f->neuron_share[u] = share, f->neuron_cluster[u] = k;
        }
    }
}

/* The logits' measures from pass 1's sums (restricted loss, logit share) and pass 2's. */
static void logit_measures(const pair_sums *p, fourier_measures *f) {
    int P = p->P;
    const trig_table *t = p->trig;
    /* the share along cos(w(s - c)) and sin(w(s - c)): <L, cos(w(s - c))> = Σ_c A[c] cos(w c)
     * + B[c] sin(w c), <L, sin(w(s - c))> = Σ_c B[c] cos(w c) - A[c] sin(w c); each direction's
     * squared norm over the P³ entries is P³/2 (the Nyquist cosine's P³, its sine 0) */
    f->logit_share = 0;
    for (int i = 0; i < p->K; i++) {
        int k = p->keys[i];
        double alpha = 0, beta = 0;
        for (int c = 0; c < P; c++) {
            int j = at(t, k, c);
            alpha += p->A[i * P + c] * t->cos[j] + p->B[i * P + c] * t->sin[j];
            beta += p->B[i * P + c] * t->cos[j] - p->A[i * P + c] * t->sin[j];
        }
        double n2 = (double)P * P * P / (2 * k == P ? 1 : 2);
        f->key_share[i] = p->sq_centred > 0 ? (alpha * alpha + beta * beta) / n2 / p->sq_centred : NAN;
        f->logit_share += f->key_share[i];
    }
    /* the restricted logits depend on the pair through s alone: mean[c] + the key part at s;
     * each held-out pair of s (its target is s) has the loss of row s */
    double restricted = 0;
    int64_t right = 0;
    for (int s = 0; s < P; s++) {
        if (!p->held_at[s]) continue;
        int top = 0; /* the first largest, as qkv_argmax */
        for (int c = 0; c < P; c++) {
            p->logit[c] = p->mean[c] + key_part(p, c, s);
            if (p->logit[c] > p->logit[top]) top = c;
        }
        restricted += (double)p->held_at[s] * nll(p->logit, P, s);
        right += top == s ? p->held_at[s] : 0;
    }
    f->restricted_loss = p->n_held ? restricted / (double)p->n_held : NAN;
    f->restricted_acc = p->n_held ? (double)right / (double)p->n_held : NAN;
    f->excluded_loss = p->n_train ? p->excluded / (double)p->n_train : NAN;
}

static qkv_status measure_pairs(qkv_model *m, const qkv_task *task, qkv_ctx *ctx, int batch,
                                bool neurons, fourier_measures *f) {
    int P = task->modulus, V = m->cfg.vocab;
    int64_t PP = (int64_t)P * P;
    pair_sums p = {.P = P, .V = V, .K = f->n_keys, .keys = f->keys,
                   .sign = task->op == QKV_MODULAR_ADD ? 1 : task->op == QKV_MODULAR_SUB ? -1 : 0,
                   .U = neurons ? m->cfg.layers * m->cfg.mlp : 0};
    trig_table trig = {0};
    int32_t *order = malloc((size_t)PP * sizeof *order);
    uint8_t *trains = calloc((size_t)PP, 1);
    int K = p.K > 0 ? p.K : 1, U = p.U;
    p.A = calloc((size_t)K * P, sizeof *p.A), p.B = calloc((size_t)K * P, sizeof *p.B);
    p.mean = calloc((size_t)P, sizeof *p.mean), p.logit = malloc((size_t)V * sizeof *p.logit);
    p.held_at = calloc((size_t)P, sizeof *p.held_at);
    if (U) {
        p.row = calloc((size_t)P * U, sizeof(double)), p.col = calloc((size_t)P * U, sizeof(double));
        p.dplus = calloc((size_t)P * U, sizeof(double)), p.dminus = calloc((size_t)P * U, sizeof(double));
        p.sum = calloc((size_t)U, sizeof(double)), p.sumsq = calloc((size_t)U, sizeof(double));
    }
    qkv_status s = QKV_OK;
    if (!order || !trains || !p.A || !p.B || !p.mean || !p.logit || !p.held_at ||
        (U && (!p.row || !p.col || !p.dplus || !p.dminus || !p.sum || !p.sumsq)) ||
        !trig_init(&trig, P))
        s = qkv_fail(QKV_ERR_NOMEM, "out of memory for the Fourier measures");
    if (s == QKV_OK) {
        p.trig = &trig, p.trains = trains;
        qkv_task_modular_split(task, order);
        for (int32_t i = 0; i < task->n_train; i++) trains[order[i]] = 1;
        s = forward_pairs(m, task, ctx, batch, NULL, PP, false, &p);
    }
    if (s == QKV_OK) {
        f->train_loss = p.n_train ? p.train_loss / (double)p.n_train : NAN;
        f->train_acc = p.n_train ? (double)p.train_right / (double)p.n_train : NAN;
        f->test_loss = p.n_held ? p.test_loss / (double)p.n_held : NAN;
        f->test_acc = p.n_held ? (double)p.test_right / (double)p.n_held : NAN;
        if (U) neuron_shares(&p, f);
    }
    if (s == QKV_OK && p.sign) {
        for (int c = 0; c < P; c++) p.mean[c] /= (double)PP;
        /* pass 2 over the training pairs, in index order */
        int64_t n = 0;
        for (int64_t k = 0; k < PP; k++)
            if (trains[k]) order[n++] = (int32_t)k;
        s = forward_pairs(m, task, ctx, batch, order, n, true, &p);
        if (s == QKV_OK) logit_measures(&p, f);
    }
    free(order), free(trains), free(p.A), free(p.B), free(p.mean), free(p.logit), free(p.held_at);
    free(p.row), free(p.col), free(p.dplus), free(p.dminus), free(p.sum), free(p.sumsq);
    trig_free(&trig);
    return s;
}

qkv_status fourier_measure(qkv_model *m, const qkv_task *task, qkv_ctx *ctx, int batch,
                           bool neurons, fourier_measures *f) {
    QKV_CHECK(task->kind == QKV_TASK_MODULAR && m->cfg.vocab > task->modulus, "fourier_measure",
              "a modular model of modulus %d and vocabulary %d", task->modulus, m->cfg.vocab);
    int P = task->modulus, F = P / 2, U = neurons ? m->cfg.layers * m->cfg.mlp : 0;
    memset(f, 0, sizeof *f);
    f->P = P;
    f->neurons = U;
    f->embed_norm = malloc((size_t)(F + 1) * sizeof *f->embed_norm);
    f->logit_map_norm = m->cfg.mlp ? malloc((size_t)(F + 1) * sizeof *f->logit_map_norm) : NULL;
    f->keys = malloc((size_t)(F + 1) * sizeof *f->keys);
    f->key_share = malloc((size_t)(F + 1) * sizeof *f->key_share);
    f->neuron_share = U ? malloc((size_t)U * sizeof *f->neuron_share) : NULL;
    f->neuron_cluster = U ? malloc((size_t)U * sizeof *f->neuron_cluster) : NULL;
    f->neuron_freq_share = U ? malloc((size_t)U * (F + 1) * sizeof *f->neuron_freq_share) : NULL;
    double *basis = malloc((size_t)P * P * sizeof *basis);
    qkv_status s = QKV_OK;
    if (!f->embed_norm || (m->cfg.mlp && !f->logit_map_norm) || !f->keys || !f->key_share ||
        (U && (!f->neuron_share || !f->neuron_cluster || !f->neuron_freq_share)) || !basis)
        s = qkv_fail(QKV_ERR_NOMEM, "out of memory for the Fourier measures");
    f->restricted_loss = f->restricted_acc = f->excluded_loss = f->logit_share = NAN;
    if (s == QKV_OK) {
        fourier_basis(P, basis);
        s = weight_norms(m, P, basis, f);
    }
    free(basis);
    if (s == QKV_OK) s = measure_pairs(m, task, ctx, batch, neurons, f);
    if (s != QKV_OK) fourier_measures_free(f);
    return s;
}
