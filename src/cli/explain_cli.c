/* explain_cli.c - the model, the loading and the JSON of the explaining commands. */
#include "explain_cli.h"
#include "engine/engine.h"
#include "explore/eval_data.h"
#include "explore/explain.h"
#include "io/io.h"
#include "io/paths.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int explain_cli_model(const char *who, const char *option, int argc, char **argv, int first,
                      const char **model) {
    *model = option;
    if (first < argc) {
        if (option) {
            cli_error("%s: the model is given twice: --model %s and '%s'", who, option,
                      argv[first]);
            return EXIT_USAGE;
        }
        if (first < argc - 1) {
            cli_error("%s: one model only, got '%s' too", who, argv[first + 1]);
            return EXIT_USAGE;
        }
        *model = argv[first];
    }
    if (!*model) {
        cli_error("%s: which model? (qkv %s DIR, or --model FILE)", who, who);
        return EXIT_USAGE;
    }
    return CLI_RUN;
}

int explain_cli_load(const char *model, int dtype, long threads, loaded_model *lm, char *path,
                     size_t len) {
    int code = threads < 0 ? EXIT_OK : cli_set_threads(threads);
    if (code != EXIT_OK) return code;
    if (!cli_model_path(model, path, len)) return EXIT_IO;
    qkv_status s = loaded_model_load(lm, path, dtype);
    if (s != QKV_OK) {
        cli_error("%s", qkv_last_error());
        return cli_exit_for(s);
    }
    return EXIT_OK;
}

/* The one line of a hook's failure, "WHO: message" or the message alone; its exit code. */
static int job_failed(const explain_cli_job *job, qkv_status s) {
    if (job->plain_errors) cli_error("%s", qkv_last_error());
    else cli_error("%s: %s", job->who, qkv_last_error());
    return cli_exit_for(s);
}

int explain_cli_run(const explain_cli_job *job) {
    loaded_model lm;
    char path[RUN_PATH_LEN];
    int code = explain_cli_load(job->model, job->dtype, job->threads, &lm, path, sizeof path);
    if (code != EXIT_OK) return code;
    const char *inputs[] = {path, lm.data ? lm.data->path : job->input, lm.data ? job->input : NULL,
                            NULL};
    const cli_output only_out[] = {{"out", job->out}, {0}};
    code = cli_check_outputs(job->who, job->outputs ? job->outputs : only_out, inputs);
    qkv_status s = code == EXIT_OK ? job->run(&lm, job->state) : QKV_OK;
    bool wanted = !job->json_when_asked || job->print_json || job->out;
    cJSON *j = NULL;
    if (code == EXIT_OK && s == QKV_OK && wanted && !(j = job->json(&lm, job->state)))
        s = job->plain_errors ? QKV_ERR_NOMEM : qkv_fail(QKV_ERR_NOMEM, "out of memory");
    if (s != QKV_OK) {
        if (job->second && job->second->f) atomic_abort(job->second);
        code = job_failed(job, s);
    } else if (code == EXIT_OK) {
        code = job->second ? explain_cli_save_both(j, job->out, job->second)
                           : explain_cli_save(j, job->out);
        if (code == EXIT_OK) {
            qkv_status t = job->print_json ? QKV_OK : job->table(&lm, job->state);
            code = explain_cli_print(j, job->print_json, job->out);
            if (t != QKV_OK) code = job_failed(job, t);
        }
    }
    cJSON_Delete(j);
    loaded_model_free(&lm);
    return code;
}

static bool json_out_of_memory; /* a cJSON allocation failed (explain_cli_json_hooks) */
static long json_fail_at;       /* test hook: the allocation that fails (1: the first); 0 none */

static void *json_malloc(size_t bytes) {
    static long count;
    void *p = json_fail_at > 0 && ++count == json_fail_at ? NULL : malloc(bytes);
    if (!p) json_out_of_memory = true;
    return p;
}

void explain_cli_json_hooks(void) {
    /* QKV_TEST_FAIL_JSON_ALLOC=N fails the Nth allocation of cJSON, as a lack of memory
     * would (tests/ulimit_test.sh), as QKV_TEST_FAIL_WRITE fails a rename */
    const char *at = getenv("QKV_TEST_FAIL_JSON_ALLOC");
    json_fail_at = at ? strtol(at, NULL, 10) : 0;
    cJSON_InitHooks(&(cJSON_Hooks){.malloc_fn = json_malloc, .free_fn = free});
}

int explain_cli_save(const cJSON *o, const char *out) {
    if (json_out_of_memory) { /* an object, an item or a number of the JSON is missing */
        cli_error("out of memory building the JSON output");
        return EXIT_NOMEM;
    }
    qkv_status s = out ? explain_write_json(o, out) : QKV_OK;
    if (s == QKV_OK) return EXIT_OK;
    cli_error("%s", qkv_last_error());
    return cli_exit_for(s);
}

int explain_cli_print(const cJSON *o, bool json, const char *out) {
    if (json) {
        char *text = cJSON_PrintUnformatted(o);
        if (!text) {
            cli_error("out of memory printing the JSON output");
            return EXIT_NOMEM;
        }
        printf("%s\n", text);
        free(text);
    } else if (out) {
        printf("wrote %s\n", out);
    }
    return EXIT_OK;
}

/* Writes --out (the JSON object j; may be NULL) and commits a second output (af, when open,
 * e.g. eval's --per-example):
 * both or neither. A failure of either puts back what the other replaced (io_keep_begin), and
 * a signal waits until the two are settled. EXIT_OK, or the exit code after one line. */
int explain_cli_save_both(const cJSON *j, const char *out, atomic_file *af) {
    cli_guard_hold();
    io_keep_begin();
    int code = explain_cli_save(j, out);
    if (af->f && code == EXIT_OK) {
        qkv_status s = atomic_commit(af);
        if (s != QKV_OK) {
            cli_error("%s", qkv_last_error());
            code = cli_exit_for(s);
        }
    } else if (af->f) {
        atomic_abort(af);
    }
    io_keep_end(code != EXIT_OK);
    cli_guard_release();
    return code;
}

/* "L.H": two whole numbers, each digits only (engine/numbers.c: " 1.+1" and "1.1x" are not). */
static bool read_head(char *item, uint64_t *layer, uint64_t *head) {
    char *dot = strchr(item, '.');
    if (!dot) return false;
    *dot = '\0';
    bool ok = number_u64(item, layer) == NUMBER_OK && number_u64(dot + 1, head) == NUMBER_OK;
    *dot = '.';
    return ok;
}

/* One head of --heads, checked against the model and the heads before it: QKV_ERR_VALUE
 * naming it. `seen` marks the heads listed so far, by layer then head. */
static qkv_status add_head(const char *item, const qkv_model_config *c, unsigned char *seen,
                           explain_head *heads, int *n) {
    char text[48];
    uint64_t lv, hv;
    snprintf(text, sizeof text, "%s", item);
    if (strlen(item) >= sizeof text || !read_head(text, &lv, &hv))
        return qkv_fail(QKV_ERR_VALUE, "--heads: '%.40s' is not LAYER.HEAD (e.g. 2.1)", item);
    int l = lv > INT_MAX ? 0 : (int)lv, h = hv > INT_MAX ? 0 : (int)hv; /* 0: none such */
    if (l < 1 || l > c->layers || h < 1 || h > c->heads)
        return qkv_fail(QKV_ERR_VALUE, "--heads: head %s does not exist: the model has %d layer%s "
                        "of %d head%s", item, c->layers, c->layers == 1 ? "" : "s", c->heads,
                        c->heads == 1 ? "" : "s");
    if (seen[(size_t)(l - 1) * c->heads + (h - 1)]++)
        return qkv_fail(QKV_ERR_VALUE, "--heads: head %d.%d is listed twice (once as '%s')", l, h,
                        item);
    heads[(*n)++] = (explain_head){l - 1, h - 1};
    return QKV_OK;
}

qkv_status explain_cli_parse_heads(const char *text, const loaded_model *lm, explain_head **heads,
                                   int *n) {
    const qkv_model_config *c = &lm->model.cfg;
    if (!*text) return qkv_fail(QKV_ERR_VALUE, "--heads: no head given");
    /* each head at most once (a second listing is refused): at most every head */
    unsigned char *seen = calloc((size_t)c->layers * c->heads, 1);
    *n = 0;
    *heads = malloc((size_t)c->layers * c->heads * sizeof **heads);
    char *copy = strdup(text);
    qkv_status s = seen && copy && *heads ? QKV_OK
                                          : qkv_fail(QKV_ERR_NOMEM, "--heads: out of memory");
    /* every item between commas, the empty ones too ("1.1," and "1.1,,2.1" are refused) */
    for (char *item = copy, *next = NULL; s == QKV_OK && item; item = next) {
        next = strchr(item, ',');
        if (next) *next++ = '\0';
        s = add_head(item, c, seen, *heads, n);
    }
    free(copy);
    free(seen);
    return s;
}

qkv_status explain_cli_data_set(loaded_model *lm, const char *data, eval_file *file,
                                example_set *set, const int64_t **lines) {
    *set = loaded_model_heldout(lm), *lines = NULL;
    if (!strcmp(data, "heldout")) return QKV_OK;
    qkv_status s = eval_file_read(file, lm, data);
    *set = (example_set){file->n, file->x, file->y, lm->data ? file->len : NULL};
    *lines = file->line;
    return s;
}
