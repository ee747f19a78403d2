/* explain_cli.c - the model, the loading and the JSON of the explaining commands. */
#include "explain_cli.h"
#include "explore/explain.h"
#include "io/io.h"
#include "io/paths.h"

#include <stdio.h>
#include <stdlib.h>

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
