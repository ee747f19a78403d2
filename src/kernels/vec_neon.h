/* vec_neon.h - the NEON backend of vec.h (AArch64, where NEON is always there): 16 lanes as
 * four q registers; fused multiply-add by vfmaq/vfmsq; tails through a 16-float buffer. */
#include <arm_neon.h>

typedef struct {
    float32x4_t q[4];
} vf;

#define VF_EACH(expr)                                                                       \
    vf out;                                                                                 \
    for (int i = 0; i < 4; i++) out.q[i] = (expr);                                          \
    return out

static inline vf vf_zero(void) { VF_EACH(vdupq_n_f32(0.0f)); }
static inline vf vf_set1(float s) { VF_EACH(vdupq_n_f32(s)); }
static inline vf vf_load(const float *p) { VF_EACH(vld1q_f32(p + 4 * i)); }
static inline void vf_store(float *p, vf a) {
    for (int i = 0; i < 4; i++) vst1q_f32(p + 4 * i, a.q[i]);
}
static inline vf vf_load_n(const float *p, int n, float fill) {
    float buf[16];
    for (int i = 0; i < 16; i++) buf[i] = i < n ? p[i] : fill;
    return vf_load(buf);
}
static inline void vf_store_n(float *p, vf a, int n) {
    float buf[16];
    vf_store(buf, a);
    memcpy(p, buf, (size_t)n * sizeof *p);
}
static inline vf vf_add(vf a, vf b) { VF_EACH(vaddq_f32(a.q[i], b.q[i])); }
static inline vf vf_sub(vf a, vf b) { VF_EACH(vsubq_f32(a.q[i], b.q[i])); }
static inline vf vf_mul(vf a, vf b) { VF_EACH(vmulq_f32(a.q[i], b.q[i])); }
static inline vf vf_div(vf a, vf b) { VF_EACH(vdivq_f32(a.q[i], b.q[i])); }
static inline vf vf_sqrt(vf a) { VF_EACH(vsqrtq_f32(a.q[i])); }
/* a > b ? a : b, as x86's max (vmaxq would give NaN for a NaN b) */
static inline vf vf_max(vf a, vf b) { VF_EACH(vbslq_f32(vcgtq_f32(a.q[i], b.q[i]), a.q[i], b.q[i])); }
static inline vf vf_min(vf a, vf b) { VF_EACH(vbslq_f32(vcltq_f32(a.q[i], b.q[i]), a.q[i], b.q[i])); }
static inline vf vf_fma(vf a, vf b, vf c) { VF_EACH(vfmaq_f32(c.q[i], a.q[i], b.q[i])); }
static inline vf vf_fnma(vf a, vf b, vf c) { VF_EACH(vfmsq_f32(c.q[i], a.q[i], b.q[i])); }
static inline vf vf_round(vf a) { VF_EACH(vrndnq_f32(a.q[i])); }
static inline vf vf_ldexp(vf a, vf n) {
    VF_EACH(vmulq_f32(a.q[i], vreinterpretq_f32_s32(vshlq_n_s32(
                                  vaddq_s32(vcvtnq_s32_f32(n.q[i]), vdupq_n_s32(127)), 23))));
}
static inline vf vf_zero_below(vf a, vf x, vf s) {
    VF_EACH(vbslq_f32(vcltq_f32(x.q[i], s.q[i]), vdupq_n_f32(0.0f), a.q[i]));
}

/* The tree of vec.h: halves of 8 (q0 + q2, q1 + q3), 4, 2, 1 lanes. */
static inline float vf_reduce_add(vf a) {
    float32x4_t s4 = vaddq_f32(vaddq_f32(a.q[0], a.q[2]), vaddq_f32(a.q[1], a.q[3]));
    float32x2_t s2 = vadd_f32(vget_low_f32(s4), vget_high_f32(s4));
    return vget_lane_f32(s2, 0) + vget_lane_f32(s2, 1);
}

static inline float vf_reduce_max(vf a) {
    vf s8 = vf_max((vf){{a.q[0], a.q[1], a.q[0], a.q[1]}}, (vf){{a.q[2], a.q[3], a.q[2], a.q[3]}});
    float32x4_t lo = s8.q[0], hi = s8.q[1];
    float32x4_t s4 = vbslq_f32(vcgtq_f32(lo, hi), lo, hi);
    float32x2_t l2 = vget_low_f32(s4), h2 = vget_high_f32(s4);
    float32x2_t s2 = vbsl_f32(vcgt_f32(l2, h2), l2, h2);
    float x = vget_lane_f32(s2, 0), y = vget_lane_f32(s2, 1);
    return x > y ? x : y;
}

/* 8 double lanes in four q registers: the widened halves of a vf, for sums in double. */
typedef struct {
    float64x2_t d[4];
} vd;
#define VD_EACH(expr)                                                                       \
    vd out;                                                                                 \
    for (int i = 0; i < 4; i++) out.d[i] = (expr);                                          \
    return out
static inline vd vd_zero(void) { VD_EACH(vdupq_n_f64(0.0)); }
static inline vd vd_widen_(float32x4_t a, float32x4_t b) {
    return (vd){{vcvt_f64_f32(vget_low_f32(a)), vcvt_high_f64_f32(a), vcvt_f64_f32(vget_low_f32(b)),
                 vcvt_high_f64_f32(b)}};
}
static inline vd vd_lo(vf a) { return vd_widen_(a.q[0], a.q[1]); }
static inline vd vd_hi(vf a) { return vd_widen_(a.q[2], a.q[3]); }
static inline vd vd_add(vd a, vd b) { VD_EACH(vaddq_f64(a.d[i], b.d[i])); }
static inline vd vd_mul(vd a, vd b) { VD_EACH(vmulq_f64(a.d[i], b.d[i])); }
static inline void vd_store(double *p, vd a) {
    for (int i = 0; i < 4; i++) vst1q_f64(p + 2 * i, a.d[i]);
}

#undef VF_EACH
#undef VD_EACH
