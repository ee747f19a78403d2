/* vec_scalar.h - the plain C backend of vec.h: 16 floats in an array, fmaf for the fused
 * multiply-add (a call on CPUs without FMA, but the same bits as the vector backends). */
typedef struct {
    float v[16];
} vf;

#define VF_LANEWISE(expr)                                                                   \
    vf out;                                                                                 \
    for (int i = 0; i < 16; i++) out.v[i] = (expr);                                         \
    return out

static inline vf vf_zero(void) { VF_LANEWISE(0.0f); }
static inline vf vf_set1(float s) { VF_LANEWISE(s); }
static inline vf vf_load(const float *p) { VF_LANEWISE(p[i]); }
static inline void vf_store(float *p, vf a) { memcpy(p, a.v, sizeof a.v); }
static inline vf vf_load_n(const float *p, int n, float fill) { VF_LANEWISE(i < n ? p[i] : fill); }
static inline void vf_store_n(float *p, vf a, int n) { memcpy(p, a.v, (size_t)n * sizeof *p); }
static inline vf vf_add(vf a, vf b) { VF_LANEWISE(a.v[i] + b.v[i]); }
static inline vf vf_sub(vf a, vf b) { VF_LANEWISE(a.v[i] - b.v[i]); }
static inline vf vf_mul(vf a, vf b) { VF_LANEWISE(a.v[i] * b.v[i]); }
static inline vf vf_div(vf a, vf b) { VF_LANEWISE(a.v[i] / b.v[i]); }
static inline vf vf_sqrt(vf a) { VF_LANEWISE(sqrtf(a.v[i])); }
static inline vf vf_max(vf a, vf b) { VF_LANEWISE(a.v[i] > b.v[i] ? a.v[i] : b.v[i]); }
static inline vf vf_min(vf a, vf b) { VF_LANEWISE(a.v[i] < b.v[i] ? a.v[i] : b.v[i]); }
static inline vf vf_fma(vf a, vf b, vf c) { VF_LANEWISE(fmaf(a.v[i], b.v[i], c.v[i])); }
static inline vf vf_fnma(vf a, vf b, vf c) { VF_LANEWISE(fmaf(-a.v[i], b.v[i], c.v[i])); }
static inline vf vf_round(vf a) { VF_LANEWISE(round_even_f32(a.v[i])); }
static inline vf vf_ldexp(vf a, vf n) { VF_LANEWISE(a.v[i] * pow2_f32(n.v[i])); }
static inline vf vf_zero_below(vf a, vf x, vf s) { VF_LANEWISE(x.v[i] < s.v[i] ? 0.0f : a.v[i]); }

static inline float vf_reduce_add(vf a) {
    for (int w = 8; w >= 1; w /= 2)
        for (int i = 0; i < w; i++) a.v[i] = a.v[i] + a.v[i + w];
    return a.v[0];
}

static inline float vf_reduce_max(vf a) {
    for (int w = 8; w >= 1; w /= 2)
        for (int i = 0; i < w; i++) a.v[i] = a.v[i] > a.v[i + w] ? a.v[i] : a.v[i + w];
    return a.v[0];
}

/* 8 double lanes: the widened halves of a vf, for sums in double. */
typedef struct {
    double v[8];
} vd;
#define VD_LANEWISE(expr)                                                                   \
    vd out;                                                                                 \
    for (int i = 0; i < 8; i++) out.v[i] = (expr);                                          \
    return out
static inline vd vd_zero(void) { VD_LANEWISE(0.0); }
static inline vd vd_lo(vf a) { VD_LANEWISE((double)a.v[i]); }
static inline vd vd_hi(vf a) { VD_LANEWISE((double)a.v[i + 8]); }
static inline vd vd_add(vd a, vd b) { VD_LANEWISE(a.v[i] + b.v[i]); }
static inline vd vd_mul(vd a, vd b) { VD_LANEWISE(a.v[i] * b.v[i]); }
static inline void vd_store(double *p, vd a) { memcpy(p, a.v, sizeof a.v); }

#undef VF_LANEWISE
#undef VD_LANEWISE
