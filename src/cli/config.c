/* config.c - `qkv train --config FILE`: a JSON object of train options, read as the command-line
 * arguments it stands for, so that every value goes through the same checks as a flag's.
 *
 *   {"task": "lookup", "d_model": 32, "lr": 0.005, "residual": true}
 *     -> --task lookup --d-model 32 --lr 0.005 --residual
 *
 * Keys are train's long options, with '_' or '-'. Text options take strings, number options
 * numbers (the seed also a string of digits: JSON numbers are exact only up to 2^53), flags
 * true or false. A run's summary.json ("format": "qkv-summary") is read through its "config". */
#include "cli.h"
#include "io/io.h"
#include "train/options.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_CONFIG_BYTES (1 << 20) /* a config is a few hundred bytes; this bounds the read */

void cli_free_args(int argc, char **argv) {
    for (int i = 0; i < argc; i++) free(argv[i]);
    free(argv);
}

/* The whole file, NUL-terminated, or NULL after one line (*code set). */
static char *read_small_file(const char *path, size_t *size, int *code) {
    /* a regular file only, found without blocking: a FIFO named here would wait forever */
    FILE *f = NULL;
    size_t bytes = 0;
    int fd = -1;
    if (io_open_regular(path, &fd, &bytes) != QKV_OK) {
        struct stat st;
        if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
            cli_error("train: %s is not a regular file", path);
        else
            cli_error("train: %s", qkv_last_error());
        *code = EXIT_IO;
        return NULL;
    }
    if (bytes > MAX_CONFIG_BYTES || !(f = fdopen(fd, "rb"))) {
        if (f) fclose(f);
        else close(fd);
        cli_error(bytes > MAX_CONFIG_BYTES ? "train: %s is larger than 1 MiB; not a config file"
                                           : "train: cannot read %s: out of memory", path);
        *code = bytes > MAX_CONFIG_BYTES ? EXIT_FORMAT : EXIT_NOMEM;
        return NULL;
    }
    struct stat sb = {.st_size = (off_t)bytes};
    io_protect(path); /* the run's outputs never replace its config */
    char *text = malloc((size_t)sb.st_size + 1);
    size_t n = text ? fread(text, 1, (size_t)sb.st_size, f) : 0;
    bool failed = !text || ferror(f);
    fclose(f);
    if (failed) {
        cli_error("train: cannot read %s", path);
        free(text);
        *code = EXIT_IO;
        return NULL;
    }
    text[n] = '\0';
    *size = n;
    return text;
}

/* A number as the shortest text that reads back as the same double. */
static void format_number(double v, char *out, size_t len) {
    if (v == floor(v) && fabs(v) <= 9007199254740992.0) { /* 2^53: every integer exact */
        snprintf(out, len, "%.0f", v);
        return;
    }
    snprintf(out, len, "%.15g", v);
    if (strtod(out, NULL) != v) snprintf(out, len, "%.17g", v);
}

typedef struct {
    char **argv;
    int argc;
} arg_list;

static bool push(arg_list *l, const char *text) {
    char **p = realloc(l->argv, ((size_t)l->argc + 1) * sizeof *p);
    if (!p) return false;
    l->argv = p;
    if (!(l->argv[l->argc] = strdup(text))) return false;
    l->argc++;
    return true;
}

/* Whether two keys name the same option: d_model and d-model do. */
static bool same_key(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (*a != *b && !((*a == '_' || *a == '-') && (*b == '_' || *b == '-'))) return false;
    return *a == *b;
}

/* Turns one key and value into arguments; EXIT_OK or an exit code after one line. */
static int option_args(arg_list *l, const char *path, const cJSON *item,
                       train_opt_kind (*kind_of)(const char *name)) {
    const char *key = item->string;
    char name[64];
    if (strlen(key) >= sizeof name || !*key) {
        cli_error("train: %s: unknown option '%.60s' (see qkv train --help)", path, key);
        return EXIT_USAGE;
    }
    for (size_t i = 0; (name[i] = key[i] == '_' ? '-' : key[i]); i++) {}
    train_opt_kind kind = kind_of(name);
    if (kind == TRAIN_OPT_UNKNOWN) {
        cli_error("train: %s: unknown option '%s' (see qkv train --help)", path, key);
        return EXIT_USAGE;
    }
    const train_option *row = train_option_find(name); /* the schema: train/options.c */
    if (row && row->command_line_only) {
        cli_error("train: %s: '%s' cannot be set in a config file; give --%s on the command line",
                  path, key, name);
        return EXIT_USAGE;
    }
    char flag[80], value[64];
    snprintf(flag, sizeof flag, "--%s", name);
    bool ok = true;
    switch (kind) {
    case TRAIN_OPT_FLAG:
        if (!cJSON_IsBool(item)) {
            cli_error("train: %s: '%s' must be true or false", path, key);
            return EXIT_USAGE;
        }
        if (cJSON_IsTrue(item)) {
            ok = push(l, flag);
        } else if (row && row->type == OPTION_SET) { /* false over a task's default: the row
                                                       * of the same key that sets 0 */
            for (const train_option *r = train_option_table; r->flag || r->help; r++)
                if (r->flag && r->type == OPTION_SET && r != row && !strcmp(r->key, row->key)) {
                    snprintf(flag, sizeof flag, "--%s", r->flag);
                    ok = push(l, flag);
                }
        }
        break;
    case TRAIN_OPT_TEXT:
        if (!cJSON_IsString(item)) {
            cli_error("train: %s: '%s' must be a string", path, key);
            return EXIT_USAGE;
        }
        ok = push(l, flag) && push(l, item->valuestring);
        break;
    default:
        if (cJSON_IsNumber(item) && row && row->type == OPTION_U64 &&
            fabs(item->valuedouble) >= 9007199254740992.0) {
            /* a JSON number past 2^53 is rounded as it is read: not the seed written */
            cli_error("train: %s: '%s' is 2^53 or more, which a JSON number cannot hold "
                      "exactly; write it as a string (\"%s\": \"%.0f\")", path, key, key,
                      item->valuedouble);
            return EXIT_USAGE;
        } else if (cJSON_IsNumber(item)) {
            /* cJSON reads 1e999 as Inf, and any number as a double: a whole-number option
             * gets a whole number within what a double holds exactly, or the file is named */
            double v = item->valuedouble;
            bool whole = row && (row->type == OPTION_INT || row->type == OPTION_U64);
            if (!isfinite(v)) {
                cli_error("train: %s: '%s' is not a finite number", path, key);
                return EXIT_USAGE;
            }
            if (whole && v != floor(v)) {
                cli_error("train: %s: '%s' is %.17g, not a whole number", path, key, v);
                return EXIT_USAGE;
            }
            if (whole && fabs(v) >= 9007199254740992.0) {
                cli_error("train: %s: '%s' is %g, out of range (%.0f..%.0f)", path, key, v,
                          row->lo, row->hi);
                return EXIT_USAGE;
            }
            format_number(v, value, sizeof value);
            ok = push(l, flag) && push(l, value);
        } else if (cJSON_IsString(item) && row && row->word && !strcmp(item->valuestring, row->word)) {
            ok = push(l, flag) && push(l, item->valuestring); /* "batch": "full" */
        } else if (cJSON_IsString(item) && row && row->type == OPTION_U64) {
            ok = push(l, flag) && push(l, item->valuestring);
        } else {
            cli_error("train: %s: '%s' must be a number%s%s%s", path, key,
                      row && row->word ? " or \"" : "", row && row->word ? row->word : "",
                      row && row->word ? "\"" : "");
            return EXIT_USAGE;
        }
    }
    if (!ok) {
        cli_error("out of memory");
        return EXIT_NOMEM;
    }
    return EXIT_OK;
}

int cli_config_args(const char *path, train_opt_kind (*kind_of)(const char *name), int *argc,
                    char ***argv) {
    *argc = 0;
    *argv = NULL;
    size_t size;
    int code = EXIT_OK;
    char *text = read_small_file(path, &size, &code);
    if (!text) return code;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, size, &end, false);
    /* one JSON object and nothing after it but white space */
    bool trailing = false;
    for (const char *p = end; root && p && p < text + size; p++)
        if (!strchr(" \t\r\n", *p)) trailing = true;
    free(text);
    if (trailing) {
        cli_error("train: %s: there is more after its JSON object", path);
        cJSON_Delete(root);
        return EXIT_FORMAT;
    }
    const cJSON *options = root;
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (cJSON_IsString(format) && !strcmp(format->valuestring, "qkv-summary"))
        options = cJSON_GetObjectItemCaseSensitive(root, "config");
    if (!cJSON_IsObject(options)) {
        cli_error(options == root ? "train: %s is not a JSON object of options"
                                  : "train: %s: the summary has no \"config\" object",
                  path);
        cJSON_Delete(root);
        return EXIT_FORMAT;
    }
    arg_list l = {0};
    const cJSON *item;
    cJSON_ArrayForEach(item, options) {
        for (const cJSON *seen = options->child; seen != item && code == EXIT_OK; seen = seen->next)
            if (same_key(seen->string, item->string)) {
                cli_error(strcmp(seen->string, item->string)
                              ? "train: %s: '%s' appears twice (also as '%s')"
                              : "train: %s: '%s' appears twice", path, item->string, seen->string);
                code = EXIT_USAGE;
            }
        if (code == EXIT_OK) code = option_args(&l, path, item, kind_of);
        if (code != EXIT_OK) break;
    }
    cJSON_Delete(root);
    if (code != EXIT_OK) {
        cli_free_args(l.argc, l.argv);
        return code;
    }
    *argc = l.argc;
    *argv = l.argv;
    return EXIT_OK;
}
