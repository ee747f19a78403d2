/* optim.c - SGD, SGD with momentum, and Adam over a model's parameters. */
#include "internal.h"

const char *qkv_optim_name(qkv_optim_kind kind) {
    return kind == QKV_SGD ? "sgd" : kind == QKV_MOMENTUM ? "momentum" : "adam";
}

void qkv_optim_init(qkv_optim *o, qkv_model *model, qkv_optim_kind kind, double lr) {
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->lr = lr;
    o->momentum = 0.9;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->eps = 1e-8;
    o->n = model->nparams;
    for (int i = 0; i < o->n; i++) {
        qkv_tensor *p = model->param[i];
        o->param[i] = p;
        if (kind != QKV_SGD) o->m[i] = qkv_zeros(model->params, QKV_F32, p->ndim, p->shape);
        if (kind == QKV_ADAM) o->v[i] = qkv_zeros(model->params, QKV_F32, p->ndim, p->shape);
    }
}

/* Σ g² in double, with 8 partial sums in a fixed order, so that the loop vectorises (one
 * running sum would be a chain of dependent adds) and the result never varies. */
static double sum_squares(const float *g, int64_t n) {
    double part[8] = {0};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++) part[k] += (double)g[j + k] * g[j + k];
    for (; j < n; j++) part[0] += (double)g[j] * g[j];
    double sum = 0;
    for (int k = 0; k < 8; k++) sum += part[k];
    return sum;
}

double qkv_optim_step(qkv_optim *o) {
    double sq = 0;
    for (int i = 0; i < o->n; i++) sq += sum_squares(o->param[i]->grad, o->param[i]->size);
    double norm = sqrt(sq);
    float gscale = o->clip > 0 && norm > o->clip ? (float)(o->clip / norm) : 1.0f;
    o->step++;
    float lr = (float)o->lr, wd = (float)o->weight_decay, mu = (float)o->momentum;
    float b1 = (float)o->beta1, b2 = (float)o->beta2, eps = (float)o->eps;
    float bc1 = (float)(1 - pow(o->beta1, (double)o->step));
    float bc2 = (float)(1 - pow(o->beta2, (double)o->step));
    for (int i = 0; i < o->n; i++) {
        qkv_tensor *p = o->param[i];
        float *restrict w = p->data;
        const float *restrict g = p->grad;
        float *restrict m = o->m[i] ? o->m[i]->data : NULL;
        float *restrict v = o->v[i] ? o->v[i]->data : NULL;
        int64_t n = p->size;
        switch (o->kind) { /* one loop per kind, so that each vectorises */
        case QKV_SGD:
            for (int64_t j = 0; j < n; j++) w[j] -= lr * (g[j] * gscale + wd * w[j]);
            break;
        case QKV_MOMENTUM:
            for (int64_t j = 0; j < n; j++) {
                m[j] = mu * m[j] + g[j] * gscale + wd * w[j];
                w[j] -= lr * m[j];
            }
            break;
        case QKV_ADAM: /* decoupled weight decay (AdamW) */
            for (int64_t j = 0; j < n; j++) {
                float gj = g[j] * gscale;
                m[j] = b1 * m[j] + (1 - b1) * gj;
                v[j] = b2 * v[j] + (1 - b2) * gj * gj;
                w[j] -= lr * ((m[j] / bc1) / (sqrtf(v[j] / bc2) + eps) + wd * w[j]);
            }
            break;
        }
    }
    return norm;
}
