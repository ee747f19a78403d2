/* dat.c - the attention maps of a run read back (attention/, gradients/, snapshots/: the
 * format of attention.gp), and which of their tokens are padding. */
#include "engine/engine.h"
#include "io/io.h"
#include "plot/plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dat_free(dat_map *m) {
    free(m->qlabel);
    free(m->klabel);
    free(m->w);
    memset(m, 0, sizeof *m);
}

/* A value of a map: a number (number_real's syntax), or what printf's "%g" writes for one
 * that is not finite. */
static bool map_value(const char *t, double *v) {
    if (number_real(t, v) == NUMBER_OK) return true;
    if (!strcmp(t, "nan") || !strcmp(t, "-nan") || !strcmp(t, "NaN")) return *v = NAN, true;
    if (!strcmp(t, "inf") || !strcmp(t, "-inf"))
        return *v = t[0] == '-' ? -INFINITY : INFINITY, true;
    return false;
}

/* Reads a .dat map: '#' comments, a header "query\key k1 k2 ...", then rows "q w w ...".
 * False (nothing kept) if the file is missing or not of that form. */
bool dat_read(const char *path, dat_map *m) {
    memset(m, 0, sizeof *m);
    FILE *f;
    if (io_fopen_regular(path, &f) != QKV_OK) return false;
    char *line = NULL;
    size_t cap = 0;
    bool ok = true, header = false;
    int rows_cap = 0;
    while (ok && getline(&line, &cap, f) > 0) {
        if (line[0] == '#' || line[strspn(line, " \t\r\n")] == '\0') continue;
        char *save, *tok = strtok_r(line, " \t\r\n", &save);
        if (!header) {
            header = true;
            for (char *t; (t = strtok_r(NULL, " \t\r\n", &save));) {
                if (m->nk >= DAT_MAX_TOKENS) { ok = false; break; }
                char (*k)[40] = realloc(m->klabel, (size_t)(m->nk + 1) * sizeof *k);
                if (!k) { ok = false; break; }
                m->klabel = k;
                snprintf(m->klabel[m->nk++], 40, "%s", t);
            }
            ok = ok && m->nk > 0;
            continue;
        }
        if (m->nq >= DAT_MAX_TOKENS) { ok = false; break; }
        if (m->nq == rows_cap) {
            rows_cap = rows_cap ? 2 * rows_cap : 16;
            char (*q)[40] = realloc(m->qlabel, (size_t)rows_cap * sizeof *q);
            float *w = q ? realloc(m->w, (size_t)rows_cap * m->nk * sizeof *w) : NULL;
            if (q) m->qlabel = q;
            if (!w) { ok = false; break; }
            m->w = w;
        }
        snprintf(m->qlabel[m->nq], 40, "%s", tok ? tok : "");
        for (int j = 0; j < m->nk && ok; j++) {
            char *t = strtok_r(NULL, " \t\r\n", &save);
            double v;
            ok = t && map_value(t, &v);
            if (ok) m->w[(size_t)m->nq * m->nk + j] = (float)v;
        }
        m->nq++;
    }
    free(line);
    fclose(f);
    if (!ok || !header || m->nq == 0) {
        dat_free(m);
        return false;
    }
    return true;
}

/* Whether label "position:token" names the padding token. */
static bool pad_label(const char *label) {
    const char *colon = strchr(label, ':');
    return colon && !strcmp(colon + 1, DAT_PAD_TOKEN);
}

bool dat_padding(const char *dir, const plot_source *src, dat_pad *pad) {
    memset(pad, 0, sizeof *pad);
    for (int l = 1; l <= src->layers; l++)
        for (int h = 1; h <= src->heads; h++) {
            char path[PLOT_PATH_LEN + 64];
            snprintf(path, sizeof path, "%s/attention/layer%d_head%d.dat", dir, l, h);
            dat_map m;
            if (!dat_read(path, &m)) {
                dat_pad_free(pad);
                return false;
            }
            if (!pad->key) { /* the first map: candidates by label */
                pad->nq = m.nq, pad->nk = m.nk;
                pad->key = calloc((size_t)m.nk, 1);
                pad->query = calloc((size_t)m.nq, 1);
                if (!pad->key || !pad->query) {
                    dat_free(&m);
                    dat_pad_free(pad);
                    return false;
                }
                for (int j = 0; j < m.nk; j++) pad->key[j] = pad_label(m.klabel[j]);
            }
            if (m.nq != pad->nq || m.nk != pad->nk) {
                dat_free(&m);
                dat_pad_free(pad);
                return false;
            }
            /* a padded key gets no weight from any query of any head; a real token that
             * happens to be spelt <pad> always gets some */
            for (int j = 0; j < m.nk; j++)
                for (int i = 0; i < m.nq && pad->key[j]; i++)
                    if (m.w[(size_t)i * m.nk + j] != 0) pad->key[j] = false;
            dat_free(&m);
        }
    /* in self-attention query i is the token of key i; an encoder-decoder's queries are
     * decoder positions, never padding */
    for (int i = 0; i < pad->nq; i++) pad->query[i] = pad->nq == pad->nk && pad->key[i];
    for (int j = 0; j < pad->nk; j++) pad->any |= pad->key[j];
    return true;
}

void dat_pad_free(dat_pad *pad) {
    free(pad->key);
    free(pad->query);
    memset(pad, 0, sizeof *pad);
}
