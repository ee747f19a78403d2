/* safetensors.c - read and write the safetensors layout; the header is JSON, via cJSON. */
#include "engine/engine.h"
#include "io.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Headers larger than this are refused before they are read (qkv's own are a few KB). */
#define ST_MAX_HEADER (100u << 20)

typedef struct {
    char *name;
    qkv_dtype dtype;
    int ndim;
    int64_t shape[QKV_MAX_DIMS];
    uint64_t begin, end; /* byte range within the data section */
} st_entry;

struct qkv_st {
    char *path;
    unsigned char *bytes; /* the whole file */
    size_t data_offset;   /* 8 + header length */
    cJSON *meta;          /* __metadata__ object, or NULL */
    cJSON *header;
    st_entry *entries;
    int n;
};

static const char *st_dtype_name(qkv_dtype dt) {
    return dt == QKV_F32 ? "F32" : dt == QKV_F64 ? "F64" : "I32";
}

static bool st_dtype_parse(const char *s, qkv_dtype *dt) {
    if (!strcmp(s, "F32")) *dt = QKV_F32;
    else if (!strcmp(s, "F64")) *dt = QKV_F64;
    else if (!strcmp(s, "I32")) *dt = QKV_I32;
    else return false;
    return true;
}

/* ---- writing ---- */
qkv_status qkv_st_save(const char *path, int n, const char *const *names,
                       const qkv_tensor *const *tensors, int nmeta, const char *const *meta) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return qkv_fail(QKV_ERR_NOMEM, "out of memory writing %s", path);
    if (nmeta > 0) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        for (int i = 0; m && i < nmeta; i++) cJSON_AddStringToObject(m, meta[2 * i], meta[2 * i + 1]);
    }
    uint64_t offset = 0;
    for (int i = 0; i < n; i++) {
        const qkv_tensor *t = tensors[i];
        cJSON *e = cJSON_AddObjectToObject(root, names[i]);
        if (!e) break;
        cJSON_AddStringToObject(e, "dtype", st_dtype_name(t->dtype));
        cJSON *shape = cJSON_AddArrayToObject(e, "shape");
        for (int d = 0; shape && d < t->ndim; d++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
        uint64_t bytes = (uint64_t)t->size * qkv_dtype_size(t->dtype);
        cJSON *range = cJSON_AddArrayToObject(e, "data_offsets");
        if (range) {
            cJSON_AddItemToArray(range, cJSON_CreateNumber((double)offset));
            cJSON_AddItemToArray(range, cJSON_CreateNumber((double)(offset + bytes)));
        }
        offset += bytes;
    }
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!json) return qkv_fail(QKV_ERR_NOMEM, "out of memory writing %s", path);
    /* Pad the header with spaces so that the data starts 8-byte aligned. */
    size_t len = strlen(json), padded = (len + 7) / 8 * 8;
    atomic_file af;
    qkv_status st = atomic_open(&af, path);
    if (st != QKV_OK) {
        free(json);
        return st;
    }
    unsigned char hdr[8];
    for (int i = 0; i < 8; i++) hdr[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    fwrite(hdr, 1, 8, af.f);
    fwrite(json, 1, len, af.f);
    for (size_t i = len; i < padded; i++) fputc(' ', af.f);
    free(json);
    for (int i = 0; i < n; i++) /* data is little-endian, as on every machine qkv targets */
        fwrite(tensors[i]->data, qkv_dtype_size(tensors[i]->dtype), (size_t)tensors[i]->size, af.f);
    return atomic_commit(&af);
}

/* ---- reading ---- */
void qkv_st_free(qkv_st *st) {
    if (!st) return;
    for (int i = 0; i < st->n; i++) free(st->entries[i].name);
    free(st->entries);
    cJSON_Delete(st->header);
    free(st->bytes);
    free(st->path);
    free(st);
}

/* Reads n bytes at the current position; false on a short read. */
static bool read_exact(int fd, unsigned char *buf, size_t n) {
    while (n > 0) {
        ssize_t got = read(fd, buf, n);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return false;
        buf += got;
        n -= (size_t)got;
    }
    return true;
}

/* The end of the furthest data_offsets in a header (unchecked: st_parse checks each entry). */
static uint64_t header_data_size(const cJSON *header) {
    uint64_t end = 0;
    for (const cJSON *item = header->child; item; item = item->next) {
        const cJSON *range = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
        const cJSON *hi = cJSON_IsArray(range) ? cJSON_GetArrayItem(range, 1) : NULL;
        if (cJSON_IsNumber(hi) && hi->valuedouble > (double)end)
            end = hi->valuedouble < 1.8e19 ? (uint64_t)hi->valuedouble : UINT64_MAX;
    }
    return end;
}

/* The whole file into *bytes, but only after its header has been read and its size checked:
 * the header must describe exactly the bytes that follow it, and the file must fit in half
 * the memory qkv may use. A sparse file of 66 GB, or a header that lies about it, is refused
 * before its body is read. */
static qkv_status read_checked(const char *path, unsigned char **bytes, size_t *size) {
    int fd = -1;
    qkv_status s = io_open_regular(path, &fd, size);
    if (s != QKV_OK) return s;
    unsigned char *buf = NULL;
    if (*size >= 8) {
        unsigned char len8[8];
        uint64_t hlen = 0;
        if (!read_exact(fd, len8, 8)) goto short_read;
        for (int i = 7; i >= 0; i--) hlen = hlen << 8 | len8[i];
        if (hlen <= *size - 8 && hlen <= ST_MAX_HEADER) {
            char *json = malloc((size_t)hlen);
            if (!json) goto nomem;
            bool ok = read_exact(fd, (unsigned char *)json, (size_t)hlen);
            cJSON *header = ok ? cJSON_ParseWithLength(json, (size_t)hlen) : NULL;
            free(json);
            if (!ok) goto short_read;
            uint64_t data = header ? header_data_size(header) : 0;
            bool described = cJSON_IsObject(header);
            cJSON_Delete(header);
            if (described && data != *size - 8 - hlen) {
                close(fd);
                return qkv_fail(QKV_ERR_FORMAT, "%s: the header describes %llu bytes of data, "
                                "the file holds %llu", path, (unsigned long long)data,
                                (unsigned long long)(*size - 8 - hlen));
            }
        }
        const char *what;
        double have = memory_limit(&what);
        if ((double)*size > have / 2) {
            close(fd);
            return qkv_fail(QKV_ERR_NOMEM, "%s: the file's %.1f GiB is more than half of %s "
                            "(%.1f GiB)", path, (double)*size / 1073741824.0, what,
                            have / 1073741824.0);
        }
    }
    if (lseek(fd, 0, SEEK_SET) != 0 || !(buf = malloc(*size ? *size : 1))) goto nomem;
    if (!read_exact(fd, buf, *size)) goto short_read;
    close(fd);
    *bytes = buf;
    return QKV_OK;
short_read:
    free(buf);
    close(fd);
    return qkv_fail(QKV_ERR_IO, "cannot read %s: it changed or ended while being read", path);
nomem:
    free(buf);
    close(fd);
    return qkv_fail(QKV_ERR_NOMEM, "%s: out of memory reading it", path);
}

static int cmp_begin(const void *a, const void *b) {
    const st_entry *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* Reads a whole number in [0, max] from a JSON item. */
static bool json_u64(const cJSON *item, double max, uint64_t *out) {
    if (!cJSON_IsNumber(item)) return false;
    double v = item->valuedouble;
    if (!(v >= 0 && v <= max) || v != (double)(uint64_t)v) return false;
    *out = (uint64_t)v;
    return true;
}

static qkv_status parse_entry(qkv_st *st, const cJSON *item, size_t data_size, st_entry *e) {
    const char *path = st->path, *name = item->string;
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *range = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsObject(item) || !cJSON_IsString(dtype) || !cJSON_IsArray(shape) ||
        !cJSON_IsArray(range) || cJSON_GetArraySize(range) != 2)
        return qkv_fail(QKV_ERR_FORMAT, "%s: tensor '%s' needs dtype, shape and data_offsets",
                        path, name);
    if (!st_dtype_parse(dtype->valuestring, &e->dtype))
        return qkv_fail(QKV_ERR_MISMATCH, "%s: tensor '%s' has dtype %s; qkv reads F32, F64, I32",
                        path, name, dtype->valuestring);
    e->ndim = cJSON_GetArraySize(shape);
    if (e->ndim > QKV_MAX_DIMS)
        return qkv_fail(QKV_ERR_MISMATCH, "%s: tensor '%s' has %d dims, at most %d", path, name,
                        e->ndim, QKV_MAX_DIMS);
    uint64_t numel = 1, v;
    for (int d = 0; d < e->ndim; d++) {
        if (!json_u64(cJSON_GetArrayItem(shape, d), 1e15, &v))
            return qkv_fail(QKV_ERR_FORMAT, "%s: tensor '%s' has a bad shape", path, name);
        e->shape[d] = (int64_t)v;
        numel = v == 0 || numel <= UINT64_MAX / v ? numel * v : UINT64_MAX;
    }
    if (!json_u64(cJSON_GetArrayItem(range, 0), 1e18, &e->begin) ||
        !json_u64(cJSON_GetArrayItem(range, 1), 1e18, &e->end) || e->begin > e->end ||
        e->end > data_size)
        return qkv_fail(QKV_ERR_FORMAT, "%s: tensor '%s' has data_offsets outside the file",
                        path, name);
    if (numel > (e->end - e->begin) / 4 + 1 || e->end - e->begin != numel * qkv_dtype_size(e->dtype))
        return qkv_fail(QKV_ERR_FORMAT, "%s: tensor '%s' has %llu bytes for %llu elements", path,
                        name, (unsigned long long)(e->end - e->begin), (unsigned long long)numel);
    const unsigned char *data = st->bytes + st->data_offset + e->begin;
    if (e->dtype != QKV_I32)
        for (uint64_t i = 0; i < numel; i++) {
            double x;
            if (e->dtype == QKV_F32) {
                float f;
                memcpy(&f, data + 4 * i, 4);
                x = f;
            } else {
                memcpy(&x, data + 8 * i, 8);
            }
            if (!isfinite(x))
                return qkv_fail(QKV_ERR_FORMAT, "%s: tensor '%s' holds %s at element %llu", path,
                                name, isnan(x) ? "NaN" : "Inf", (unsigned long long)i);
        }
    e->name = strdup(name);
    if (!e->name) return qkv_fail(QKV_ERR_NOMEM, "%s: out of memory", path);
    return QKV_OK;
}

/* st_parse, naming what the file should be (`what`, NULL: a safetensors file) when its bytes
 * do not begin as a safetensors file's: a length the file cannot hold that is not followed by
 * a JSON header's '{' is no damaged safetensors file but some other file (a CSV, a text). */
static qkv_status st_parse_as(const char *path, const char *what, unsigned char *bytes,
                              size_t size, qkv_st **out) {
    *out = NULL;
    qkv_st *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(path))) {
        free(st);
        free(bytes);
        return qkv_fail(QKV_ERR_NOMEM, "%s: out of memory", path);
    }
    st->bytes = bytes;
    qkv_status status = QKV_OK;
    if (size < 8) {
        status = qkv_fail(QKV_ERR_FORMAT, "%s: %zu bytes is too short for a safetensors file",
                          path, size);
        goto fail;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | st->bytes[i];
    if (hlen > size - 8 && size > 8 && st->bytes[8] != '{') {
        status = qkv_fail(QKV_ERR_FORMAT, "%s is not %s: it does not begin with a safetensors "
                          "header (8 bytes of length, then a JSON object)", path,
                          what ? what : "a safetensors file");
        goto fail;
    }
    if (hlen > size - 8) {
        status = qkv_fail(QKV_ERR_FORMAT, "%s: header length %llu is beyond the end of the file "
                          "(%zu bytes)", path, (unsigned long long)hlen, size);
        goto fail;
    }
    st->data_offset = 8 + (size_t)hlen;
    st->header = cJSON_ParseWithLength((const char *)st->bytes + 8, (size_t)hlen);
    if (!cJSON_IsObject(st->header)) {
        status = qkv_fail(QKV_ERR_FORMAT, "%s: the header is not a JSON object", path);
        goto fail;
    }
    int count = cJSON_GetArraySize(st->header);
    st->entries = calloc((size_t)count + 1, sizeof *st->entries);
    if (!st->entries) {
        status = qkv_fail(QKV_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    size_t data_size = size - st->data_offset;
    for (const cJSON *item = st->header->child; item; item = item->next) {
        if (!strcmp(item->string, "__metadata__")) {
            if (!cJSON_IsObject(item) || st->meta) {
                status = qkv_fail(QKV_ERR_FORMAT, "%s: %s __metadata__", path,
                                  st->meta ? "more than one" : "a non-object");
                goto fail;
            }
            for (const cJSON *m = item->child; m; m = m->next)
                if (!cJSON_IsString(m)) {
                    status = qkv_fail(QKV_ERR_FORMAT, "%s: metadata '%s' is not a string", path,
                                      m->string);
                    goto fail;
                }
            st->meta = (cJSON *)item;
            continue;
        }
        for (int i = 0; i < st->n; i++)
            if (!strcmp(st->entries[i].name, item->string)) {
                status = qkv_fail(QKV_ERR_FORMAT, "%s: tensor '%s' appears twice", path,
                                  item->string);
                goto fail;
            }
        status = parse_entry(st, item, data_size, &st->entries[st->n]);
        if (status != QKV_OK) goto fail;
        st->n++;
    }
    /* The byte ranges must tile the data section exactly: no gaps, no overlaps. */
    st_entry *sorted = malloc(((size_t)st->n + 1) * sizeof *sorted);
    if (!sorted) {
        status = qkv_fail(QKV_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    memcpy(sorted, st->entries, (size_t)st->n * sizeof *sorted);
    qsort(sorted, (size_t)st->n, sizeof *sorted, cmp_begin);
    uint64_t expect = 0;
    for (int i = 0; i < st->n && status == QKV_OK; i++) {
        if (sorted[i].begin != expect)
            status = qkv_fail(QKV_ERR_FORMAT, "%s: tensor '%s' %s", path, sorted[i].name,
                              sorted[i].begin < expect ? "overlaps another tensor's data"
                                                       : "starts after a gap in the data");
        expect = sorted[i].end;
    }
    free(sorted);
    if (status == QKV_OK && expect != data_size)
        status = qkv_fail(QKV_ERR_FORMAT, "%s: %llu bytes of data, but the header describes %llu",
                          path, (unsigned long long)data_size, (unsigned long long)expect);
    if (status != QKV_OK) goto fail;
    *out = st;
    return QKV_OK;
fail:
    qkv_st_free(st);
    return status;
}

qkv_status st_parse(const char *path, unsigned char *bytes, size_t size, qkv_st **out) {
    return st_parse_as(path, NULL, bytes, size, out);
}

qkv_status st_load_as(const char *path, const char *what, qkv_st **out) {
    *out = NULL;
    unsigned char *bytes = NULL;
    size_t size = 0;
    qkv_status status = read_checked(path, &bytes, &size);
    return status == QKV_OK ? st_parse_as(path, what, bytes, size, out) : status;
}

qkv_status qkv_st_load(const char *path, qkv_st **out) { return st_load_as(path, NULL, out); }

int qkv_st_count(const qkv_st *st) { return st->n; }
const char *qkv_st_name(const qkv_st *st, int i) { return i >= 0 && i < st->n ? st->entries[i].name : NULL; }

const char *qkv_st_meta(const qkv_st *st, const char *key) {
    const cJSON *v = st->meta ? cJSON_GetObjectItemCaseSensitive(st->meta, key) : NULL;
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const st_entry *st_find(const qkv_st *st, const char *name) {
    for (int i = 0; i < st->n; i++)
        if (!strcmp(st->entries[i].name, name)) return &st->entries[i];
    return NULL;
}

bool qkv_st_info(const qkv_st *st, const char *name, qkv_dtype *dtype, int *ndim,
                 int64_t shape[QKV_MAX_DIMS]) {
    const st_entry *e = st_find(st, name);
    if (!e) return false;
    if (dtype) *dtype = e->dtype;
    if (ndim) *ndim = e->ndim;
    if (shape) memcpy(shape, e->shape, sizeof e->shape);
    return true;
}

qkv_status qkv_st_read(const qkv_st *st, const char *name, qkv_tensor *dst) {
    const st_entry *e = st_find(st, name);
    if (!e) return qkv_fail(QKV_ERR_MISMATCH, "%s: tensor '%s' is missing", st->path, name);
    if (e->dtype != dst->dtype)
        return qkv_fail(QKV_ERR_MISMATCH, "%s: tensor '%s' is %s, expected %s", st->path, name,
                        st_dtype_name(e->dtype), st_dtype_name(dst->dtype));
    bool same = e->ndim == dst->ndim;
    for (int d = 0; same && d < e->ndim; d++) same = e->shape[d] == dst->shape[d];
    if (!same) {
        char want[64], got[64] = "(";
        size_t n = 1;
        for (int d = 0; d < e->ndim; d++)
            n += (size_t)snprintf(got + n, sizeof got - n, d ? ",%lld" : "%lld", (long long)e->shape[d]);
        snprintf(got + n, sizeof got - n, ")");
        return qkv_fail(QKV_ERR_MISMATCH, "%s: tensor '%s' has shape %s, expected %s", st->path,
                        name, got, qkv_shape_str(dst, want, sizeof want));
    }
    memcpy(dst->data, st->bytes + st->data_offset + e->begin, e->end - e->begin);
    return QKV_OK;
}
