/* bench_tiles.c - the fused attention's tile kernels alone, on one thread, on the ISA path in
 * use (QKV_SIMD picks another): the exp, the online softmax and the recomputed P over a 64×64
 * tile (ns an element), the backward's row sums Σ P·dP and Σ P (µs a tile), and the tile
 * products at Dk = Dv = 32 and 64 (GFLOP/s), each the median of 9 timings of a loop. The
 * operands stay in cache: this is each kernel's own rate, which the step, whose tiles come
 * and go through the caches, approaches from below. Not a test: timings vary with the
 * machine's load.
 *
 *   bench_tiles */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_time.h"
#include "kernels/isa.h"
#include "qkv.h"

#define TILE 64
#define ROUNDS 9

static float *floats(size_t n) {
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "bench_tiles: out of memory\n");
        exit(1);
    }
    return p;
}

/* What one timed call does, and on what. */
typedef struct {
    const kernel_isa *isa;
    const attention_dims *d;
    float *raw, *s, *dp, *acc, *m, *l, *lse, *lo, *a, *bp, *c;
    double dot[TILE], sum[TILE];
    bool ta;
    int64_t M, N, K;
} work;

/* The raw scores again (each loop below overwrites its tile), then the kernel. */
static void run_exp(work *w) { w->isa->exp(w->s, w->raw, TILE * TILE); }
static void run_softmax(work *w) {
    memcpy(w->s, w->raw, TILE * TILE * sizeof *w->s);
    for (int r = 0; r < TILE; r++) w->m[r] = -INFINITY, w->l[r] = 0;
    w->isa->online_softmax(w->d, w->s, TILE, TILE, NULL, 0, 0, 0, w->m, w->l, w->acc, NULL);
}
static void run_recompute(work *w) {
    memcpy(w->s, w->raw, TILE * TILE * sizeof *w->s);
    w->isa->recompute_probs(w->d, w->s, TILE, TILE, NULL, 0, 0, 0, w->lse, w->lo);
}
static void run_copy(work *w) { memcpy(w->s, w->raw, TILE * TILE * sizeof *w->s); }
static void run_row_sums(work *w) {
    w->isa->row_dot_sums(w->raw, w->dp, TILE, TILE, w->dot, w->sum);
}
static void run_product(work *w) {
    gemm1_packed_f32(w->ta, w->M, w->N, w->K, w->a, w->ta ? w->M : w->K, w->bp, w->N, w->c, w->N,
                     true);
}

/* Median seconds of one call of `run`, from ROUNDS timings of `reps` calls. */
static double median_call(void (*run)(work *), work *w, int reps) {
    double t[ROUNDS];
    run(w);
    for (int i = 0; i < ROUNDS; i++) {
        double t0 = bench_now();
        for (int k = 0; k < reps; k++) run(w);
        t[i] = (bench_now() - t0) / reps;
    }
    return bench_median(t, ROUNDS);
}

int main(int argc, char **argv) {
    (void)argv;
    if (argc > 1) {
        fprintf(stderr, "usage: bench_tiles\n");
        return 2;
    }
    qkv_set_threads(1);
    const kernel_isa *isa = kernel_isa_active();
    int64_t ms[4] = {0, 0, 0, 0};
    attention_dims d = {.G = 1, .H = 1, .Nq = TILE, .Nk = TILE, .Dk = 32, .Dv = 32,
                        .scale = 0.17677669529663687, .ms = ms};
    work w = {.isa = isa, .d = &d};
    size_t n = TILE * TILE;
    w.raw = floats(n), w.s = floats(n), w.dp = floats(n), w.acc = floats(n);
    w.m = floats(TILE), w.l = floats(TILE), w.lse = floats(TILE), w.lo = floats(TILE);
    w.a = floats(n), w.bp = floats(n), w.c = floats(n);
    for (size_t i = 0; i < n; i++) {
        w.raw[i] = -(float)(i % 97) * 0.05f; /* scores below their row's max */
        w.dp[i] = (float)(i % 13) * 0.01f - 0.06f;
        w.a[i] = (float)(i % 7) * 0.1f, w.c[i] = 0;
    }
    for (int r = 0; r < TILE; r++) w.lse[r] = 1, w.lo[r] = 0;

    printf("bench_tiles: the %s path, 1 thread, a %dx%d tile, median of %d\n", isa->name, TILE,
           TILE, ROUNDS);
    double copy = median_call(run_copy, &w, 20000);
    printf("  exp                         %6.3f ns an element\n",
           1e9 * median_call(run_exp, &w, 20000) / (double)n);
    printf("  online softmax (Dv 32)      %6.3f ns an element (its tile's copy taken out)\n",
           1e9 * (median_call(run_softmax, &w, 20000) - copy) / (double)n);
    printf("  recomputed P                %6.3f ns an element (its tile's copy taken out)\n",
           1e9 * (median_call(run_recompute, &w, 20000) - copy) / (double)n);
    printf("  row sums Σ P·dP, Σ P        %6.3f µs a tile\n",
           1e6 * median_call(run_row_sums, &w, 20000));
    static const int64_t depths[] = {32, 64};
    for (int i = 0; i < 2; i++) {
        int64_t D = depths[i];
        struct {
            const char *what;
            bool ta;
            int64_t M, N, K;
        } shapes[] = {{"S = Q·Kᵀ", false, TILE, TILE, D},
                      {"acc += P·V", false, TILE, D, TILE},
                      {"dV += Pᵀ·dO", true, TILE, D, TILE},
                      {"dQ += dS·K", false, TILE, D, TILE}};
        for (int s = 0; s < 4; s++) {
            w.ta = shapes[s].ta, w.M = shapes[s].M, w.N = shapes[s].N, w.K = shapes[s].K;
            for (size_t e = 0; e < n; e++) w.bp[e] = (float)(e % 5) * 0.1f;
            gemm_pack_f32(w.bp, false, w.N, w.K, w.a, w.N); /* op(B) as the tiles read it */
            double t = median_call(run_product, &w, 5000);
            printf("  product %2lldx%2lldx%2lld         %6.1f GFLOP/s (%s)\n", (long long)w.M,
                   (long long)w.N, (long long)w.K, 2.0 * (double)(w.M * w.N * w.K) / t * 1e-9,
                   shapes[s].what);
        }
    }
    return 0;
}
