/* optimizer.c - SGD, SGD with momentum, and Adam over a model's parameters. */
#include "engine/engine.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        if (kind != QKV_SGD) o->m[i] = qkv_zeros(model->params, p->dtype, p->ndim, p->shape);
        if (kind == QKV_ADAM) o->v[i] = qkv_zeros(model->params, p->dtype, p->ndim, p->shape);
    }
}

double qkv_optim_step(qkv_optim *o) {
    _Static_assert(sizeof o->param / sizeof o->param[0] <= OPTIM_MAX_PARAMS, "too many params");
    void *w[OPTIM_MAX_PARAMS], *m[OPTIM_MAX_PARAMS], *v[OPTIM_MAX_PARAMS];
    const void *g[OPTIM_MAX_PARAMS];
    int64_t size[OPTIM_MAX_PARAMS];
    for (int i = 0; i < o->n; i++) {
        w[i] = o->param[i]->data;
        g[i] = o->param[i]->grad;
        m[i] = o->m[i] ? o->m[i]->data : NULL;
        v[i] = o->v[i] ? o->v[i]->data : NULL;
        size[i] = o->param[i]->size;
    }
    bool f64 = o->n > 0 && o->param[0]->dtype == QKV_F64; /* one dtype for all: one model's */
    double norm = sqrt(f64 ? optim_grad_sq_f64(o->n, (const double *const *)g, size)
                           : optim_grad_sq_f32(o->n, (const float *const *)g, size));
    o->step++;
    optim_rule r = {
        .kind = o->kind == QKV_SGD ? OPTIM_SGD : o->kind == QKV_MOMENTUM ? OPTIM_MOMENTUM : OPTIM_ADAM,
        .lr = o->lr,
        .weight_decay = o->weight_decay,
        .grad_scale = o->clip > 0 && norm > o->clip ? o->clip / norm : 1.0,
        .momentum = o->momentum,
        .beta1 = o->beta1,
        .beta2 = o->beta2,
        .eps = o->eps,
        .bias1 = 1 - pow(o->beta1, (double)o->step),
        .bias2 = 1 - pow(o->beta2, (double)o->step),
    };
    if (f64)
        optim_update_f64(&r, o->n, (double *const *)w, (const double *const *)g,
                         (double *const *)m, (double *const *)v, size);
    else
        optim_update_f32(&r, o->n, (float *const *)w, (const float *const *)g,
                         (float *const *)m, (float *const *)v, size);
    return norm;
}
