/* grid.c - a sweep's grid: its options and values, its cells' names and train arguments,
 * and sweep.json, which records the grid in the sweep directory (sweep.h). */
#include "sweep/sweep.h"
#include "engine/engine.h"
#include "io/io.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_JSON_BYTES (1 << 22)

void sweep_free(sweep *sw) {
    for (int i = 0; i < sw->nparams; i++) {
        for (int v = 0; v < sw->param[i].n; v++) free(sw->param[i].values[v]);
        free(sw->param[i].values);
    }
    sw->nparams = 0;
}

/* The value as a cell directory's name shows it: letters, digits and . _ + - stay, anything
 * else becomes '_'. */
static void safe_name(const char *value, char *out, size_t len) {
    size_t i = 0;
    for (; value[i] && i + 1 < len; i++) {
        unsigned char c = (unsigned char)value[i];
        out[i] = isalnum(c) || c == '.' || c == '_' || c == '+' || c == '-' ? (char)c : '_';
    }
    out[i] = '\0';
}

/* ---- the grid ---- */

/* Whether two values of a number option are one number, however written ("1" and "01", "0.1"
 * and "1e-1", "0" and "-0"): the same run twice, which an average would count twice. Whole
 * numbers are compared exactly (a seed has 64 bits), others as doubles. */
static bool same_number(const char *a, const char *b) {
    uint64_t ua, ub;
    int64_t ia, ib;
    double da, db;
    if (number_u64(a, &ua) == NUMBER_OK && number_u64(b, &ub) == NUMBER_OK) return ua == ub;
    if (number_int(a, INT64_MIN, INT64_MAX, &ia) == NUMBER_OK &&
        number_int(b, INT64_MIN, INT64_MAX, &ib) == NUMBER_OK)
        return ia == ib;
    return number_real(a, &da) == NUMBER_OK && number_real(b, &db) == NUMBER_OK && da == db;
}

/* Adds NAME=V1,V2,... (one token of a grid); QKV_ERR_VALUE names `where` (--grid, or the
 * file). */
static qkv_status add_param(sweep *sw, const char *token, const char *where) {
    const char *eq = strchr(token, '=');
    if (!eq || eq == token)
        return qkv_fail(QKV_ERR_VALUE, "sweep: %s: '%s' is not NAME=V1,V2,...", where, token);
    if (sw->nparams == SWEEP_MAX_PARAMS)
        return qkv_fail(QKV_ERR_VALUE, "sweep: %s: more than %d options in the grid", where,
                        SWEEP_MAX_PARAMS);
    sweep_param *p = &sw->param[sw->nparams];
    size_t len = (size_t)(eq - token);
    if (len >= sizeof p->name) len = sizeof p->name - 1;
    for (size_t i = 0; i < len; i++) p->name[i] = token[i] == '_' ? '-' : token[i];
    p->name[len] = '\0';
    memcpy(p->flag, "--", 2);
    memcpy(p->flag + 2, p->name, len + 1);
    p->kind = sw->option_kind(p->name);
    p->n = 0;
    p->values = NULL;
    if (p->kind == SWEEP_OPT_UNKNOWN)
        return qkv_fail(QKV_ERR_VALUE,
                        "sweep: %s: unknown train option '%.*s' (see qkv train --help)", where,
                        (int)(eq - token), token);
    static const char *const fixed_by_sweep[] = {"out", "resume", "config", "threads"};
    for (size_t i = 0; i < sizeof fixed_by_sweep / sizeof fixed_by_sweep[0]; i++)
        if (!strcmp(p->name, fixed_by_sweep[i]))
            return qkv_fail(QKV_ERR_VALUE, "sweep: %s: --%s cannot vary in a sweep", where,
                            p->name);
    for (int i = 0; i < sw->nparams; i++)
        if (!strcmp(sw->param[i].name, p->name))
            return qkv_fail(QKV_ERR_VALUE, "sweep: %s: %s is in the grid twice", where, p->name);
    const char *list = eq + 1;
    if (!*list) return qkv_fail(QKV_ERR_VALUE, "sweep: %s: %s= has no values", where, p->name);
    qkv_status code = QKV_OK;
    for (const char *v = list; code == QKV_OK;) {
        size_t n = strcspn(v, ",");
        char value[256], safe[256];
        if (n == 0 || n >= sizeof value) {
            code = qkv_fail(QKV_ERR_VALUE,
                            n ? "sweep: %s: a value of %s is too long"
                              : "sweep: %s: %s has an empty value",
                            where, p->name);
            break;
        }
        memcpy(value, v, n);
        value[n] = '\0';
        if (p->kind == SWEEP_OPT_FLAG && strcmp(value, "true") && strcmp(value, "false")) {
            code = qkv_fail(QKV_ERR_VALUE,
                            "sweep: %s: %s is a flag: its values are true and false, not '%s'",
                            where, p->name, value);
            break;
        }
        safe_name(value, safe, sizeof safe);
        for (int i = 0; i < p->n && code == QKV_OK; i++) {
            char other[256];
            safe_name(p->values[i], other, sizeof other);
            if (p->kind == SWEEP_OPT_NUMBER && strcmp(p->values[i], value) &&
                same_number(p->values[i], value)) {
                code = qkv_fail(QKV_ERR_VALUE,
                                "sweep: %s: %s values '%s' and '%s' are the same number: one "
                                "run, given twice",
                                where, p->name, p->values[i], value);
            } else if (!strcmp(other, safe)) {
                code = qkv_fail(
                    QKV_ERR_VALUE,
                    strcmp(p->values[i], value)
                        ? "sweep: %s: %s values '%s' and '%s' would share a directory name"
                        : "sweep: %s: %s lists '%s' twice%.0s",
                    where, p->name, p->values[i], value);
            }
        }
        if (code != QKV_OK) break;
        char **grown = realloc(p->values, ((size_t)p->n + 1) * sizeof *grown);
        if (!grown || !(grown[p->n] = strdup(value))) {
            if (grown) p->values = grown;
            code = qkv_fail(QKV_ERR_NOMEM, "out of memory");
            break;
        }
        p->values = grown;
        p->n++;
        if (v[n] == '\0') break;
        v += n + 1;
    }
    sw->nparams++; /* even on failure, so that sweep_free frees its values */
    return code;
}

qkv_status sweep_add_grid_text(sweep *sw, char *text, const char *where, bool comments) {
    if (comments)
        for (char *p = text; (p = strchr(p, '#'));) {
            size_t n = strcspn(p, "\n");
            memset(p, ' ', n);
            p += n;
        }
    for (char *tok = strtok(text, " \t\r\n\v\f"); tok; tok = strtok(NULL, " \t\r\n\v\f")) {
        qkv_status code = add_param(sw, tok, where);
        if (code != QKV_OK) return code;
    }
    return QKV_OK;
}

char *sweep_read_text(const char *path, const char *what, qkv_status *status) {
    struct stat sb;
    FILE *f = NULL; /* a regular file only, found without blocking on a FIFO */
    if (io_fopen_regular(path, &f) != QKV_OK || fstat(fileno(f), &sb) != 0) {
        *status = qkv_fail(QKV_ERR_IO, "sweep: %s", qkv_last_error());
        if (f) fclose(f);
        return NULL;
    }
    if (sb.st_size > MAX_JSON_BYTES) {
        *status = qkv_fail(QKV_ERR_FORMAT, "sweep: %s is larger than %d MiB, too large for %s",
                           path, MAX_JSON_BYTES >> 20, what);
        fclose(f);
        return NULL;
    }
    char *text = malloc((size_t)sb.st_size + 1);
    size_t n = text ? fread(text, 1, (size_t)sb.st_size, f) : 0;
    if (!text || ferror(f)) {
        *status = qkv_fail(QKV_ERR_IO, "sweep: cannot read %s", path);
        free(text);
        fclose(f);
        return NULL;
    }
    fclose(f);
    if (memchr(text, '\0', n)) { /* a file cut short by a crash can end in zeros */
        *status = qkv_fail(QKV_ERR_FORMAT, "sweep: %s holds a NUL byte: not %s", path, what);
        free(text);
        return NULL;
    }
    text[n] = '\0';
    return text;
}

qkv_status sweep_check_grid(sweep *sw) {
    if (sw->nparams == 0)
        return qkv_fail(QKV_ERR_VALUE,
                        "sweep: the grid is empty (--grid 'NAME=V1,V2 ...' or --grid-file FILE)");
    double cells = 1;
    size_t name_len = 0;
    for (int i = 0; i < sw->nparams; i++) {
        const sweep_param *p = &sw->param[i];
        cells *= p->n;
        size_t longest = 0;
        for (int v = 0; v < p->n; v++)
            if (strlen(p->values[v]) > longest) longest = strlen(p->values[v]);
        name_len += strlen(p->name) + 2 + longest;
    }
    if (cells > SWEEP_MAX_CELLS)
        return qkv_fail(QKV_ERR_VALUE, "sweep: the grid has %.0f cells, at most %d", cells,
                        SWEEP_MAX_CELLS);
    if (name_len > SWEEP_CELL_NAME_MAX)
        return qkv_fail(QKV_ERR_VALUE,
                        "sweep: the cells' directory names would be %zu bytes long, at most %d: "
                        "shorten the values",
                        name_len, SWEEP_CELL_NAME_MAX);
    sw->ncells = (long)cells;
    /* options the sweep sets for each cell, or that are already in the grid */
    for (int i = 0; i < sw->nfixed; i++) {
        const char *a = sw->fixed[i];
        if (strncmp(a, "--", 2)) continue;
        size_t n = strcspn(a + 2, "=");
        static const char *const set_here[] = {"out", "resume", "threads"};
        for (size_t k = 0; k < sizeof set_here / sizeof set_here[0]; k++)
            if (strlen(set_here[k]) == n && !strncmp(a + 2, set_here[k], n)) {
                if (!strcmp(set_here[k], "resume"))
                    return qkv_fail(QKV_ERR_VALUE, "sweep: --resume has no place in a sweep");
                return qkv_fail(QKV_ERR_VALUE,
                                "sweep: --%s is set by the sweep for each cell; "
                                "leave it out of the options after --",
                                set_here[k]);
            }
        for (int p = 0; p < sw->nparams; p++)
            if (strlen(sw->param[p].name) == n && !strncmp(a + 2, sw->param[p].name, n))
                return qkv_fail(QKV_ERR_VALUE, "sweep: --%s is both in the grid and after --",
                                sw->param[p].name);
    }
    return QKV_OK;
}

void sweep_cell_indices(const sweep *sw, long c, int *idx) {
    for (int i = sw->nparams - 1; i >= 0; i--) {
        idx[i] = (int)(c % sw->param[i].n);
        c /= sw->param[i].n;
    }
}

void sweep_cell_name(const sweep *sw, long c, char *out, size_t len) {
    int idx[SWEEP_MAX_PARAMS];
    sweep_cell_indices(sw, c, idx);
    size_t at = 0;
    out[0] = '\0';
    for (int i = 0; i < sw->nparams && at < len; i++) {
        char safe[256];
        safe_name(sw->param[i].values[idx[i]], safe, sizeof safe);
        at += (size_t)snprintf(out + at, len - at, "%s%s=%s", i ? "," : "", sw->param[i].name,
                               safe);
    }
}

bool sweep_cell_words(const sweep *sw, long c, const char ***words, int *count) {
    int n = 0;
    const char **v = malloc(((size_t)sw->nfixed + 2 * (size_t)sw->nparams + 10) * sizeof *v);
    *words = v;
    if (!v) return false;
    int idx[SWEEP_MAX_PARAMS];
    sweep_cell_indices(sw, c, idx);
    v[n++] = "train";
    for (int i = 0; i < sw->nfixed; i++) v[n++] = sw->fixed[i];
    for (int i = 0; i < sw->nparams; i++) {
        const sweep_param *p = &sw->param[i];
        const char *value = p->values[idx[i]];
        if (p->kind == SWEEP_OPT_FLAG) {
            if (!strcmp(value, "true")) v[n++] = p->flag;
        } else {
            v[n++] = p->flag;
            v[n++] = value;
        }
    }
    *count = n;
    return true;
}

char *sweep_path_join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* ---- sweep.json ---- */

static cJSON *grid_json(const sweep *sw) {
    cJSON *grid = cJSON_CreateArray();
    for (int i = 0; grid && i < sw->nparams; i++) {
        cJSON *p = cJSON_CreateObject(), *values = cJSON_CreateArray();
        cJSON_AddStringToObject(p, "option", sw->param[i].name);
        for (int v = 0; v < sw->param[i].n; v++)
            cJSON_AddItemToArray(values, cJSON_CreateString(sw->param[i].values[v]));
        cJSON_AddItemToObject(p, "values", values);
        cJSON_AddItemToArray(grid, p);
    }
    return grid;
}

static cJSON *fixed_json(const sweep *sw) {
    cJSON *fixed = cJSON_CreateArray();
    for (int i = 0; fixed && i < sw->nfixed; i++)
        cJSON_AddItemToArray(fixed, cJSON_CreateString(sw->fixed[i]));
    return fixed;
}

/* A JSON file, parsed; NULL with *status set otherwise, or with *status QKV_OK when
 * `missing_ok` and nothing is there (io_absent: a link to nowhere or a file that cannot be
 * read is there, and reading it says why). */
static cJSON *read_json(const char *path, bool missing_ok, qkv_status *status) {
    if (missing_ok && io_absent(path)) return NULL;
    char *text = sweep_read_text(path, "a JSON file", status);
    if (!text) return NULL;
    cJSON *j = cJSON_ParseWithOpts(text, NULL, true); /* nothing after the object */
    free(text);
    if (!cJSON_IsObject(j)) {
        *status = qkv_fail(QKV_ERR_FORMAT, "sweep: %s is not a JSON object (corrupt, or cut "
                           "short)", path);
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

qkv_status sweep_write_json(const sweep *sw) {
    char *path = sweep_path_join(sw->dir, "sweep.json");
    cJSON *j = cJSON_CreateObject();
    if (!path || !j) {
        free(path);
        cJSON_Delete(j);
        return qkv_fail(QKV_ERR_NOMEM, "out of memory");
    }
    cJSON_AddStringToObject(j, "format", "qkv-sweep");
    cJSON_AddStringToObject(j, "qkv_version", QKV_VERSION_STRING);
    cJSON_AddItemToObject(j, "grid", grid_json(sw));
    cJSON_AddItemToObject(j, "fixed", fixed_json(sw));
    cJSON *cells = cJSON_AddArrayToObject(j, "cells");
    for (long c = 0; cells && c < sw->ncells; c++) {
        char name[SWEEP_CELL_NAME_MAX + 64];
        sweep_cell_name(sw, c, name, sizeof name);
        cJSON_AddItemToArray(cells, cJSON_CreateString(name));
    }
    qkv_status code = QKV_OK;
    cJSON *old = read_json(path, true, &code);
    if (code == QKV_OK && old &&
        (!cJSON_Compare(cJSON_GetObjectItemCaseSensitive(old, "grid"),
                        cJSON_GetObjectItemCaseSensitive(j, "grid"), true) ||
         !cJSON_Compare(cJSON_GetObjectItemCaseSensitive(old, "fixed"),
                        cJSON_GetObjectItemCaseSensitive(j, "fixed"), true))) {
        code = qkv_fail(QKV_ERR_VALUE,
                        "sweep: %s holds another sweep (its sweep.json has another "
                        "grid or other options after --); choose another --out",
                        sw->dir);
    } else if (code == QKV_ERR_FORMAT) {
        qkv_fail(code, "sweep: %s is not a sweep.json; choose another --out", path);
    }
    char *text = code == QKV_OK ? cJSON_Print(j) : NULL;
    if (text) {
        atomic_file af;
        qkv_status s = atomic_open(&af, path);
        if (s == QKV_OK) {
            fprintf(af.f, "%s\n", text);
            s = atomic_commit(&af);
        }
        if (s != QKV_OK) code = qkv_fail(s, "sweep: %s", qkv_last_error());
    } else if (code == QKV_OK) {
        code = qkv_fail(QKV_ERR_NOMEM, "out of memory");
    }
    free(text);
    free(path);
    cJSON_Delete(old);
    cJSON_Delete(j);
    return code;
}

qkv_status sweep_cell_summary(const char *cell_dir, cJSON **summary) {
    *summary = NULL;
    /* a cell is missing when nothing is there, or its directory holds no summary.json; a
     * cell that is something else than a directory (a link to nowhere, a file) is no cell */
    struct stat sb;
    if (!io_absent(cell_dir) && (stat(cell_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)))
        return qkv_fail(QKV_ERR_IO, "sweep: %s is not a directory (a cell's is)", cell_dir);
    char *path = sweep_path_join(cell_dir, "summary.json");
    if (!path) return qkv_fail(QKV_ERR_NOMEM, "out of memory");
    qkv_status code = QKV_OK;
    cJSON *j = read_json(path, true, &code);
    if (j && !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "status"))) {
        code = qkv_fail(QKV_ERR_FORMAT, "sweep: %s is not a qkv summary: it has no \"status\"",
                        path);
        cJSON_Delete(j);
        j = NULL;
    }
    free(path);
    *summary = j;
    return code;
}

bool sweep_summary_done(const cJSON *summary) {
    const cJSON *status = cJSON_GetObjectItemCaseSensitive(summary, "status");
    const cJSON *exit_status = cJSON_GetObjectItemCaseSensitive(summary, "exit_status");
    return cJSON_IsString(status) && !strcmp(status->valuestring, "done") &&
           cJSON_IsNumber(exit_status) && exit_status->valuedouble == 0;
}

bool sweep_cell_done(const char *cell_dir, cJSON **summary) {
    cJSON *j = NULL;
    sweep_cell_summary(cell_dir, &j); /* a summary that cannot be read is no finished run */
    bool done = sweep_summary_done(j);
    if (summary) *summary = j;
    else cJSON_Delete(j);
    return done;
}

qkv_status sweep_load(sweep *sw, const char *dir, sweep_option_kind option_kind) {
    memset(sw, 0, sizeof *sw);
    sw->dir = dir;
    sw->option_kind = option_kind;
    char *path = sweep_path_join(dir, "sweep.json");
    qkv_status code = QKV_OK;
    if (!path) return qkv_fail(QKV_ERR_NOMEM, "out of memory");
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        free(path);
        return qkv_fail(QKV_ERR_IO, "sweep: %s is not a directory", dir);
    }
    if (io_absent(path)) { /* one that is there but cannot be read: read_json says why */
        free(path);
        return qkv_fail(QKV_ERR_IO,
                        "sweep: %s has no sweep.json (is it a directory written by "
                        "qkv sweep?)",
                        dir);
    }
    cJSON *j = read_json(path, false, &code);
    const cJSON *grid = cJSON_GetObjectItemCaseSensitive(j, "grid"), *p;
    if (j && !cJSON_IsArray(grid)) {
        code = qkv_fail(QKV_ERR_FORMAT, "sweep: %s has no grid", path);
    }
    cJSON_ArrayForEach(p, grid) {
        if (code != QKV_OK) break;
        const cJSON *option = cJSON_GetObjectItemCaseSensitive(p, "option");
        const cJSON *values = cJSON_GetObjectItemCaseSensitive(p, "values"), *v;
        if (!cJSON_IsString(option) || !cJSON_IsArray(values)) {
            code = qkv_fail(QKV_ERR_FORMAT, "sweep: %s: a grid entry lacks its option or values",
                            path);
            break;
        }
        /* rebuilt as the grid text it came from, and checked the same way */
        size_t len = strlen(option->valuestring) + 2;
        cJSON_ArrayForEach(v, values) len += cJSON_IsString(v) ? strlen(v->valuestring) + 1 : 1;
        char *token = malloc(len);
        if (!token) {
            code = qkv_fail(QKV_ERR_NOMEM, "out of memory");
            break;
        }
        size_t at = (size_t)snprintf(token, len, "%s=", option->valuestring);
        cJSON_ArrayForEach(v, values)
            at += (size_t)snprintf(token + at, len - at, "%s%s", v == values->child ? "" : ",",
                                   cJSON_IsString(v) ? v->valuestring : "");
        code = add_param(sw, token, path);
        free(token);
        if (code != QKV_OK) break;
    }
    if (code == QKV_OK) code = sweep_check_grid(sw);
    cJSON_Delete(j);
    free(path);
    return code;
}
