/* precision_study.h - `qkv study precision`: one gradient of a trained model in f32 and in
 * f64, where the two part, and why.
 *
 * The softmax backward is dS = P ⊙ (dP − D) with D = Σ_j P_j·dP_j. When a row of attention is
 * saturated (P_top = 1 − e), dP_top and D agree in all but a fraction e of their size, so dS
 * is a difference of two numbers 1/e times larger than itself: whatever rounding the two
 * carry separately comes back multiplied by 1/e. The gradients that flow through dS (W_Q, W_K
 * and what lies before them) show it; those that do not (W_V, W_O, the head) stay at f32's
 * rounding. The study takes the same batch through the model in f64 (the truth), through the
 * composed attention in f32 (the way PyTorch's eager autograd computes it), and through the
 * fused attention in f32 with each form of its backward, from the first one to the default. */
#ifndef QKV_PRECISION_STUDY_H
#define QKV_PRECISION_STUDY_H

#include "train/trainer.h"

/* The columns: the composed attention, then each form of the fused backward in the order of
 * qkv_attention_forms() (the last is the default; precision_study_run checks the count). */
#define PRECISION_FORMS 4
#define PRECISION_COLS (1 + PRECISION_FORMS)

typedef struct {
    trainer t;    /* the f32 model */
    trainer wide; /* the same weights widened exactly to f64 */
    int batch;
    bool shown[PRECISION_COLS]; /* the columns measured */
    double *norm; /* (nparams): |g64| of each parameter */
    double *err;  /* (nparams, PRECISION_COLS): |g32 − g64| / |g64| */
    /* layer 1's saturation over the (row, head) pairs with a target, in f64: the top weight
     * is 1 − e */
    int rows, above; /* pairs, and those with a top weight above 0.999 */
    double min_e, max_e, mean_e;
} precision_study;

/* Runs the study on the f32 model at `model_path`, or when NULL on a lookup model trained
 * here for `steps` steps, with a batch of `batch` sequences drawn from `seed` (the batch of
 * `qkv grads --seed`); `form` is an attention_form_kind to show alone, or -1 for all.
 * QKV_ERR_FORMAT for an f64 model, QKV_ERR_NOMEM when the batch needs more than half the
 * memory qkv may use. `ps` is zeroed first; free it with precision_study_free, also after a
 * failure. */
qkv_status precision_study_run(precision_study *ps, const char *model_path, long steps,
                               int batch, uint64_t seed, int form);
void precision_study_free(precision_study *ps);

#endif
