/* saturated_dump.c - writes the saturated attention cases of saturated_cases.h for
 * scripts/attention_precision.py: each case's inputs, and the gradients of Σ dout ⊙ attention
 * from qkv's fused op in f64 (the truth), in f32 (the default backward) and in f32 with the
 * first form of the backward (legacy), as raw little-endian doubles, with manifest.json.
 *
 * usage: saturated_dump DIR */
#include "kernels/kernels.h"
#include "saturated_cases.h"

#include <stdio.h>

#define SEED 1414 /* the cases of test_attention_precision */

static int write_doubles(const char *dir, const char *name, const double *v, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(v, sizeof *v, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "saturated_dump: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: saturated_dump DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    char path[1024];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    FILE *m = fopen(path, "w");
    if (!m) {
        fprintf(stderr, "saturated_dump: cannot write %s\n", path);
        return 1;
    }
    fprintf(m, "{\"cases\": [");
    int bad = 0;
    for (int i = 0; i < SAT_NCASES && !bad; i++) {
        const sat_case *c = &SAT_CASES[i];
        sat_inputs in;
        sat_build(c, SEED, &in);
        size_t nq = (size_t)c->B * c->H * c->Nq * c->D, nk = (size_t)c->B * c->H * c->Nk * c->D;
        size_t ng = nq + 2 * nk;
        double *g = malloc(3 * ng * sizeof *g), *keep = NULL;
        if (!g) return 1;
        sat_grads(c, &in, QKV_F64, true, g, g + nq, g + nq + nk);
        sat_grads(c, &in, QKV_F32, true, g + ng, g + ng + nq, g + ng + nq + nk);
        attention_form_kind saved = attention_form;
        attention_form = ATTENTION_FORM_LEGACY;
        sat_grads(c, &in, QKV_F32, true, g + 2 * ng, g + 2 * ng + nq, g + 2 * ng + nq + nk);
        attention_form = saved;
        size_t nm = (size_t)c->B * c->Nq * c->Nk;
        if (in.keep) {
            keep = malloc(nm * sizeof *keep);
            if (!keep) return 1;
            for (size_t j = 0; j < nm; j++) keep[j] = in.keep[j];
        }
        char name[64];
        const char *part[] = {"q", "k", "v", "dout"};
        const double *arr[] = {in.q, in.k, in.v, in.dout};
        size_t len[] = {nq, nk, nk, nq};
        for (int p = 0; p < 4 && !bad; p++) {
            snprintf(name, sizeof name, "%d_%s.bin", i, part[p]);
            bad = write_doubles(dir, name, arr[p], len[p]);
        }
        const char *run[] = {"f64", "f32", "f32_legacy"};
        for (int r = 0; r < 3 && !bad; r++) {
            snprintf(name, sizeof name, "%d_grads_%s.bin", i, run[r]);
            bad = write_doubles(dir, name, g + r * ng, ng);
        }
        if (keep && !bad) {
            snprintf(name, sizeof name, "%d_keep.bin", i);
            bad = write_doubles(dir, name, keep, nm);
        }
        fprintf(m, "%s{\"index\": %d, \"name\": \"%s\", \"B\": %d, \"H\": %d, \"Nq\": %d, "
                   "\"Nk\": %d, \"D\": %d, \"mask\": %s}", i ? ", " : "", i, c->name, c->B, c->H,
                c->Nq, c->Nk, c->D, keep ? "true" : "false");
        free(g);
        free(keep);
        sat_free(&in);
    }
    fprintf(m, "]}\n");
    if (fclose(m) != 0) bad = 1;
    return bad;
}
