/* selftest.c - qkv selftest: each path this CPU runs against the plain C path. The kernels
 * come first (kernel_isa_check's full list: a difference there names the kernel and its
 * shape), then SELFTEST_STEPS training steps of a model whose every part runs: two layers, two
 * heads 32 wide side by side in each row (AVX-512's whole sliver), residuals, a causal mask,
 * Adam with weight decay and clipping; the weights, the optimizer's state and every step's
 * loss are compared bit for bit. */
#include "selftest.h"

#include "io/run_files.h"
#include "kernels/kernels.h"
#include "trainer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a training leaves: every step's loss, then each parameter's data and optimizer state,
 * as bytes. */
typedef struct {
    unsigned char *at;
    size_t n;
} trained;

static void append(trained *t, const void *x, size_t bytes, bool *ok) {
    unsigned char *at = realloc(t->at, t->n + bytes);
    if (!at) {
        *ok = false;
        return;
    }
    memcpy(at + t->n, x, bytes);
    t->at = at, t->n += bytes;
}

/* SELFTEST_STEPS steps on the path in use, into out. */
static qkv_status train_steps(trained *out) {
    train_config cfg = {.optim = QKV_ADAM, .lr = 3e-3, .weight_decay = 0.01, .clip = 1.0,
                        .batch = 8, .steps = SELFTEST_STEPS, .seed = 5};
    qkv_status s = qkv_task_init(&cfg.task, "reverse", 8, 16);
    if (s != QKV_OK) return s;
    cfg.model = (qkv_model_config){.vocab = cfg.task.vocab, .seq_len = 8, .d_model = 64,
                                   .heads = 2, .layers = 2, .residual = true, .causal = true,
                                   .init_scale = 1.0, .dtype = QKV_F32,
                                   .target_len = cfg.task.target_len};
    trainer t;
    if ((s = trainer_init_for(&t, &cfg, "training the self-test's model")) != QKV_OK) return s;
    bool ok = true;
    for (int step = 0; step < SELFTEST_STEPS && s == QKV_OK; step++) {
        s = trainer_step(&t);
        append(out, &t.last_loss, sizeof t.last_loss, &ok);
    }
    for (int p = 0; p < t.model.nparams; p++) {
        const qkv_tensor *w = t.model.param[p];
        append(out, w->data, (size_t)w->size * qkv_dtype_size(w->dtype), &ok);
    }
    const qkv_optim *o = &t.optim;
    for (int p = 0; p < o->n; p++) {
        const qkv_tensor *state[2] = {o->m[p], o->v[p]};
        for (int k = 0; k < 2; k++)
            if (state[k])
                append(out, state[k]->data,
                       (size_t)state[k]->size * qkv_dtype_size(state[k]->dtype), &ok);
    }
    trainer_free(&t);
    if (s == QKV_OK && !ok) s = qkv_fail(QKV_ERR_NOMEM, "out of memory for a training's bytes");
    return s;
}

bool selftest_passed(const selftest_result *r) {
    for (int i = 0; i < r->npaths; i++)
        if (!r->path[i].same_bits) return false;
    return r->npaths > 0;
}

qkv_status selftest_run(selftest_result *r, void (*progress)(const selftest_path *, void *),
                        void *arg) {
    double start = run_files_now();
    *r = (selftest_result){0};
    const char *was = kernel_isa_name();
    trained reference = {0};
    kernel_isa_select("scalar");
    qkv_status s = train_steps(&reference);
    for (const char *const *name = qkv_simd_paths(); s == QKV_OK && *name; name++) {
        if (!kernel_isa_runs(*name) || r->npaths == SELFTEST_MAX_PATHS) continue;
        selftest_path *p = &r->path[r->npaths++];
        snprintf(p->name, sizeof p->name, "%s", *name);
        p->native = !kernel_isa_emulated(*name);
        if (!strcmp(*name, "scalar")) { /* the reference itself */
            p->same_bits = true;
        } else {
            kernel_isa_verdict v = kernel_isa_check(*name, true, &p->cases, p->first_difference,
                                                    sizeof p->first_difference);
            if (v == KERNEL_ISA_NO_MEMORY) { /* no answer: never reported as a difference */
                s = qkv_fail(QKV_ERR_NOMEM, "out of memory checking the %s path (%s)", *name,
                             p->first_difference);
                r->npaths--;
                break;
            }
            p->same_bits = v == KERNEL_ISA_AGREES;
            if (p->same_bits) {
                trained got = {0};
                kernel_isa_select(*name);
                qkv_status ts = train_steps(&got);
                size_t n = got.n < reference.n ? got.n : reference.n, i = 0;
                while (i < n && got.at[i] == reference.at[i]) i++;
                if (ts == QKV_ERR_NOMEM) {
                    free(got.at);
                    s = qkv_fail(ts, "%s path: %s", *name, qkv_last_error());
                    r->npaths--;
                    break;
                }
                if (ts != QKV_OK || got.n != reference.n || i < n) {
                    p->same_bits = false;
                    if (ts != QKV_OK)
                        snprintf(p->first_difference, sizeof p->first_difference,
                                 "training %d steps: %s", SELFTEST_STEPS, qkv_last_error());
                    else
                        snprintf(p->first_difference, sizeof p->first_difference,
                                 "training a 2-layer, 2-head model %d steps: byte %zu of its "
                                 "losses, weights and optimizer state", SELFTEST_STEPS, i);
                }
                free(got.at);
            }
        }
        if (progress) progress(p, arg);
    }
    kernel_isa_select(was);
    free(reference.at);
    r->seconds = run_files_now() - start;
    return s;
}
