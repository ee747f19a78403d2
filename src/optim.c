/* optim.c - SGD, SGD with momentum, and Adam over a model's parameters. */
#include "internal.h"
#include "kernels/kernels.h"

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
    _Static_assert(sizeof o->param / sizeof o->param[0] <= OPTIM_MAX_PARAMS, "too many params");
    float *w[OPTIM_MAX_PARAMS], *m[OPTIM_MAX_PARAMS], *v[OPTIM_MAX_PARAMS];
    const float *g[OPTIM_MAX_PARAMS];
    int64_t size[OPTIM_MAX_PARAMS];
    for (int i = 0; i < o->n; i++) {
        w[i] = o->param[i]->data;
        g[i] = o->param[i]->grad;
        m[i] = o->m[i] ? o->m[i]->data : NULL;
        v[i] = o->v[i] ? o->v[i]->data : NULL;
        size[i] = o->param[i]->size;
    }
    double norm = sqrt(optim_grad_sq_f32(o->n, g, size));
    o->step++;
    optim_rule r = {
        .kind = o->kind == QKV_SGD ? OPTIM_SGD : o->kind == QKV_MOMENTUM ? OPTIM_MOMENTUM : OPTIM_ADAM,
        .lr = (float)o->lr,
        .weight_decay = (float)o->weight_decay,
        .grad_scale = o->clip > 0 && norm > o->clip ? (float)(o->clip / norm) : 1.0f,
        .momentum = (float)o->momentum,
        .beta1 = (float)o->beta1,
        .beta2 = (float)o->beta2,
        .eps = (float)o->eps,
        .bias1 = (float)(1 - pow(o->beta1, (double)o->step)),
        .bias2 = (float)(1 - pow(o->beta2, (double)o->step)),
    };
    optim_update_f32(&r, o->n, w, g, m, v, size);
    return norm;
}
