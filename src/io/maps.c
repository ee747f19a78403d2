/* maps.c - attention maps as text matrices. */
#include "io/maps.h"

#include "io/io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One map (queries, keys) of layer l and head h. */
static qkv_status write_map(const char *path, const char *what, const map_labels *m, int l, int h,
                            const float *map) {
    atomic_file af;
    qkv_status s = atomic_open(&af, path);
    if (s != QKV_OK) return s;
    fprintf(af.f, "# qkv %s: task %s, layer %d, head %d; rows are queries, columns keys "
            "(position:token)%s\n"
            "query\\key", what, m->task, l + 1, h + 1,
            m->decoder ? "; rows are the decoder positions, by their target" : "");
    /* position:token, so that repeated tokens stay apart */
    for (int j = 0; j < m->keys; j++) fprintf(af.f, " %d:%s", j, m->key_label[j]);
    fputc('\n', af.f);
    for (int i = 0; i < m->queries; i++) {
        fprintf(af.f, "%d:%s", i, m->query_label[i]);
        for (int j = 0; j < m->keys; j++) fprintf(af.f, " %.6g", map[i * m->keys + j]);
        fputc('\n', af.f);
    }
    return atomic_commit(&af);
}

qkv_status maps_write(const char *dir, const char *sub, const char *prefix, const char *suffix,
                      const char *what, const map_labels *labels, const float *maps) {
    char path[RUN_FILE_PATH_LEN];
    qkv_status s = io_make_subdir(dir, sub, path, sizeof path);
    if (s != QKV_OK) return s;
    size_t per_head = (size_t)labels->queries * labels->keys;
    for (int l = 0; l < labels->layers && s == QKV_OK; l++)
        for (int h = 0; h < labels->heads && s == QKV_OK; h++) {
            snprintf(path, sizeof path, "%s/%s/%slayer%d_head%d%s.dat", dir, sub, prefix, l + 1,
                     h + 1, suffix);
            s = write_map(path, what, labels, l, h,
                          maps + ((size_t)l * labels->heads + h) * per_head);
        }
    return s;
}

/* One map (queries, keys) of write_map's layout: comment lines, the keys' line, then a row per
 * query, its label and its numbers. */
static qkv_status read_map(const char *path, int queries, int keys, float *map) {
    FILE *f = fopen(path, "r");
    if (!f) return qkv_fail(QKV_ERR_IO, "cannot read %s", path);
    size_t cap = 0;
    char *line = NULL;
    int row = -1; /* -1: the keys' line is next */
    qkv_status s = QKV_OK;
    while (s == QKV_OK && row < queries && getline(&line, &cap, f) > 0) {
        if (line[0] == '#') continue;
        if (row++ < 0) continue;
        char *at = strchr(line, ' '), *end = NULL; /* labels hold no space */
        for (int j = 0; j < keys && at; j++, at = end) {
            map[(size_t)(row - 1) * keys + j] = strtof(at, &end);
            if (end == at) at = NULL;
        }
        if (!at) s = qkv_fail(QKV_ERR_FORMAT, "%s: row %d is not %d numbers", path, row - 1, keys);
    }
    if (s == QKV_OK && row < queries)
        s = qkv_fail(QKV_ERR_FORMAT, "%s: fewer than %d rows", path, queries);
    free(line);
    fclose(f);
    return s;
}

qkv_status maps_read(const char *dir, const char *sub, const char *prefix, const char *suffix,
                     int layers, int heads, int queries, int keys, float *maps) {
    char path[RUN_FILE_PATH_LEN];
    qkv_status s = QKV_OK;
    size_t per_head = (size_t)queries * keys;
    for (int l = 0; l < layers && s == QKV_OK; l++)
        for (int h = 0; h < heads && s == QKV_OK; h++) {
            snprintf(path, sizeof path, "%s/%s/%slayer%d_head%d%s.dat", dir, sub, prefix, l + 1,
                     h + 1, suffix);
            s = read_map(path, queries, keys, maps + ((size_t)l * heads + h) * per_head);
        }
    return s;
}
