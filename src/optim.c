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

double qkv_optim_step(qkv_optim *o) {
    double sq = 0;
    for (int i = 0; i < o->n; i++) {
        const float *g = o->param[i]->grad;
        for (int64_t j = 0; j < o->param[i]->size; j++) sq += (double)g[j] * g[j];
    }
    double norm = sqrt(sq);
    float gscale = o->clip > 0 && norm > o->clip ? (float)(o->clip / norm) : 1.0f;
    o->step++;
    float lr = (float)o->lr, wd = (float)o->weight_decay, mu = (float)o->momentum;
    float b1 = (float)o->beta1, b2 = (float)o->beta2, eps = (float)o->eps;
    float bc1 = (float)(1 - pow(o->beta1, (double)o->step));
    float bc2 = (float)(1 - pow(o->beta2, (double)o->step));
    for (int i = 0; i < o->n; i++) {
        qkv_tensor *p = o->param[i];
        float *w = p->data, *g = p->grad;
        float *m = o->m[i] ? o->m[i]->data : NULL, *v = o->v[i] ? o->v[i]->data : NULL;
        for (int64_t j = 0; j < p->size; j++) {
            float gj = g[j] * gscale;
            switch (o->kind) {
            case QKV_SGD: w[j] -= lr * (gj + wd * w[j]); break;
            case QKV_MOMENTUM:
                m[j] = mu * m[j] + gj + wd * w[j];
                w[j] -= lr * m[j];
                break;
            case QKV_ADAM: /* decoupled weight decay (AdamW) */
                m[j] = b1 * m[j] + (1 - b1) * gj;
                v[j] = b2 * v[j] + (1 - b2) * gj * gj;
                w[j] -= lr * ((m[j] / bc1) / (sqrtf(v[j] / bc2) + eps) + wd * w[j]);
                break;
            }
        }
    }
    return norm;
}
