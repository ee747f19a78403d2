/* run_files.c - summary.json and metrics.jsonl: a run as data, for sweeps and for tools that
 * follow a run live (docs/sweeps.md describes both files). */
#include "io/run_files.h"

#include "io/io.h"
#include "kernels/kernels.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_JSONL_BYTES (64 << 20) /* an old metrics.jsonl larger than this is not read back */

double run_files_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Adds a number, or null when it is not finite (JSON has no NaN). */
static void add_number(cJSON *obj, const char *key, double v) {
    if (isfinite(v)) cJSON_AddNumberToObject(obj, key, v);
    else cJSON_AddNullToObject(obj, key);
}

/* One line of metrics.jsonl. The evaluation's attention mass and best head are known for rows
 * written as training goes (r), not for rows rebuilt from metrics.csv (r NULL). */
static cJSON *row_json(const metrics_row *row, const run_evaluation *r) {
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    cJSON_AddNumberToObject(j, "step", (double)row->step);
    add_number(j, "loss", row->loss);
    add_number(j, "train_acc", row->train_acc);
    add_number(j, "heldout_acc", row->heldout_acc);
    add_number(j, "heldout_loss", row->heldout_loss);
    add_number(j, "lr", row->lr);
    if (r) {
        add_number(j, "attention_mass", r->attention_mass);
        cJSON_AddNumberToObject(j, "best_head", r->best_head + 1);
    }
    /* each head's entropy and copying score, and the composition scores, named as in
     * metrics.csv's header */
    for (int k = r && r->columns && row->scores ? r->columns->first_head_column : 0;
         r && r->columns && row->scores && k < r->columns->n_scores; k++) {
        char name[64];
        metrics_column_name(r->columns, k, name, sizeof name);
        add_number(j, name, row->scores[k]);
    }
    if (r && r->embed_norms) {
        cJSON *norms = cJSON_AddArrayToObject(j, "embed_norms");
        for (int k = 0; norms && k < r->n_norms; k++)
            cJSON_AddItemToArray(norms, isfinite(r->embed_norms[k])
                                            ? cJSON_CreateNumber(r->embed_norms[k])
                                            : cJSON_CreateNull());
        cJSON_AddItemToObject(j, "key_frequencies",
                              cJSON_CreateIntArray(r->key_frequencies, r->n_keys));
    }
    return j;
}

/* Writes the object as one line; false if that failed. */
static bool write_line(FILE *f, const cJSON *j) {
    char *text = j ? cJSON_PrintUnformatted(j) : NULL;
    bool ok = text && fprintf(f, "%s\n", text) > 0;
    int err = errno; /* the write's reason, for the caller's message */
    free(text);
    errno = err;
    return ok;
}

/* Reads the old metrics.jsonl: every whole line that parses as an object with a "step" (a
 * line cut short by a crash does not), as a JSON array into *rows (NULL when there is no file:
 * every row then comes from metrics.csv). A read that fails (no memory for a line, an I/O
 * error) is QKV_ERR_NOMEM or QKV_ERR_IO, never the end of the file, and a file that is there
 * but cannot be opened (a link to nowhere, no permission) is QKV_ERR_IO, never no file: the
 * rows would be rebuilt from metrics.csv's 6 digits. */
static qkv_status read_jsonl(const char *path, cJSON **rows) {
    *rows = NULL;
    FILE *f = NULL;
    if (io_absent(path)) return QKV_OK;
    qkv_status opened = io_fopen_regular(path, &f);
    if (opened != QKV_OK) return opened;
    cJSON *all = cJSON_CreateArray();
    char *line = NULL;
    size_t cap = 0, total = 0;
    ssize_t n = 0;
    while (all && (errno = 0, n = getline(&line, &cap, f)) > 0 &&
           (total += (size_t)n) <= MAX_JSONL_BYTES) {
        if (line[n - 1] != '\n') break; /* the last line, unfinished */
        cJSON *j = cJSON_ParseWithLength(line, (size_t)n);
        if (j && cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(j, "step")))
            cJSON_AddItemToArray(all, j);
        else
            cJSON_Delete(j);
    }
    int err = errno;
    bool failed = !all || (n < 0 && (err == ENOMEM || ferror(f)));
    free(line);
    fclose(f);
    if (failed) {
        cJSON_Delete(all);
        return !all || err == ENOMEM ? qkv_fail(QKV_ERR_NOMEM, "out of memory reading %s", path)
                                     : qkv_fail(QKV_ERR_IO, "cannot read %s: %s", path,
                                                err ? strerror(err) : "a read failed");
    }
    *rows = all;
    return QKV_OK;
}

static const cJSON *find_step(const cJSON *rows, int64_t step) {
    const cJSON *j;
    cJSON_ArrayForEach(j, rows) {
        if (cJSON_GetObjectItemCaseSensitive(j, "step")->valuedouble == (double)step) return j;
    }
    return NULL;
}

static const char *threads_isa(int *threads) {
    *threads = kernel_threads();
    return kernel_isa_name();
}

/* summary.json's text: the run as it stands at `step`, `status` one of "running", "done",
 * "failed", "diverged", "interrupted". NULL when out of memory. */
static char *summary_text(const run_files *rf, int64_t step, double last_loss,
                          double last_train_acc, const char *status, int exit_code,
                          const char *error) {
    cJSON *j = cJSON_CreateObject(), *metrics = NULL;
    if (!j) return NULL;
    int threads;
    const char *isa = threads_isa(&threads);
    cJSON_AddStringToObject(j, "format", "qkv-summary");
    cJSON_AddStringToObject(j, "qkv_version", QKV_VERSION_STRING);
    cJSON_AddStringToObject(j, "status", status);
    if (strcmp(status, "running")) cJSON_AddNumberToObject(j, "exit_status", exit_code);
    else cJSON_AddNullToObject(j, "exit_status");
    if (error) cJSON_AddStringToObject(j, "error", error);
    cJSON *config = rf->config ? cJSON_Duplicate(rf->config, true) : NULL;
    if (config) cJSON_AddItemToObject(j, "config", config);
    else cJSON_AddNullToObject(j, "config");
    cJSON_AddStringToObject(j, "isa", isa);
    cJSON_AddNumberToObject(j, "threads", threads);
    cJSON_AddNumberToObject(j, "step", (double)step);
    if (rf->model_step >= 0) cJSON_AddNumberToObject(j, "model_step", (double)rf->model_step);
    else cJSON_AddNullToObject(j, "model_step");
    cJSON_AddNumberToObject(j, "wall_seconds", round(1e3 * (run_files_now() - rf->start)) / 1e3);
    if (rf->evaluated >= 0 && (metrics = cJSON_AddObjectToObject(j, "metrics"))) {
        /* the last evaluation, on the held-out set, and the last training batch's loss */
        cJSON_AddNumberToObject(metrics, "step", (double)rf->evaluated);
        add_number(metrics, "heldout_acc", rf->last.heldout_acc);
        add_number(metrics, "heldout_loss", rf->last.heldout_loss);
        add_number(metrics, "attention_mass", rf->last.attention_mass);
        cJSON_AddNumberToObject(metrics, "best_head", rf->last.best_head + 1);
        add_number(metrics, "loss", last_loss);
        add_number(metrics, "train_acc", last_train_acc);
    } else {
        cJSON_AddNullToObject(j, "metrics");
    }
    cJSON *report = rf->report ? cJSON_Duplicate(rf->report, true) : NULL;
    if (report) cJSON_AddItemToObject(j, "report", report);
    cJSON *grokking = rf->grokking ? cJSON_Duplicate(rf->grokking, true) : NULL;
    if (grokking) cJSON_AddItemToObject(j, "grokking", grokking);
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    return text;
}

static qkv_status write_summary(const run_files *rf, int64_t step, double last_loss,
                                double last_train_acc, const char *status, int exit_code,
                                const char *error) {
    char *text = summary_text(rf, step, last_loss, last_train_acc, status, exit_code, error);
    if (!text) return qkv_fail(QKV_ERR_NOMEM, "out of memory");
    char path[RUN_PATH_LEN];
    snprintf(path, sizeof path, "%s/summary.json", rf->dir);
    atomic_file af;
    qkv_status s = atomic_open(&af, path);
    if (s == QKV_OK) {
        fprintf(af.f, "%s\n", text);
        s = atomic_commit(&af);
    }
    free(text);
    return s;
}

/* What summary.json says if a signal ends the run now (io_set_signal_record). */
static void set_signal_record(const run_files *rf, int64_t step, double last_loss,
                              double last_train_acc) {
    if (step == rf->start_step && rf->nkept > 0) /* no step trained: the kept row's */
        last_loss = rf->kept_loss, last_train_acc = rf->kept_train_acc;
    char *text = summary_text(rf, step, last_loss, last_train_acc, "interrupted", 7,
                              "interrupted by a signal");
    char path[RUN_PATH_LEN];
    snprintf(path, sizeof path, "%s/summary.json", rf->dir);
    if (text) {
        size_t n = strlen(text); /* the file ends with a newline, as write_summary's */
        char *line = realloc(text, n + 2);
        if (line) memcpy(line + n, "\n", 2), text = line;
    }
    io_set_signal_record(path, text); /* NULL (out of memory): no record at all */
    free(text);
}

#define MAX_SUMMARY_BYTES (1 << 20) /* a summary.json larger than this is not read back */

bool run_files_done(const char *dir, int64_t step) {
    char path[RUN_PATH_LEN];
    if (snprintf(path, sizeof path, "%s/summary.json", dir) >= (int)sizeof path) return false;
    FILE *f = NULL;
    if (io_fopen_regular(path, &f) != QKV_OK) return false;
    char *text = malloc(MAX_SUMMARY_BYTES);
    size_t n = text ? fread(text, 1, MAX_SUMMARY_BYTES, f) : 0;
    fclose(f);
    cJSON *j = n > 0 && n < MAX_SUMMARY_BYTES ? cJSON_ParseWithLength(text, n) : NULL;
    free(text);
    const cJSON *status = cJSON_GetObjectItemCaseSensitive(j, "status");
    const cJSON *exit_status = cJSON_GetObjectItemCaseSensitive(j, "exit_status");
    const cJSON *at = cJSON_GetObjectItemCaseSensitive(j, "step");
    const cJSON *model_step = cJSON_GetObjectItemCaseSensitive(j, "model_step");
    bool done = cJSON_IsString(status) && !strcmp(status->valuestring, "done") &&
                cJSON_IsNumber(exit_status) && exit_status->valuedouble == 0 &&
                cJSON_IsNumber(at) && at->valuedouble == (double)step &&
                cJSON_IsNumber(model_step) && model_step->valuedouble == (double)step;
    cJSON_Delete(j);
    return done;
}

/* The number `key` of a metrics.jsonl row, or `otherwise` when it has none. */
static double row_number(const cJSON *row, const char *key, double otherwise) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(row, key);
    return cJSON_IsNumber(v) ? v->valuedouble : otherwise;
}

static qkv_status begin(run_files *rf, const char *dir, const char *from_dir, int64_t step,
                        const metrics_row *kept, int nkept) {
    rf->start = run_files_now();
    rf->evaluated = -1;
    rf->model_step = -1;
    rf->start_step = step;
    rf->nkept = nkept;
    if (nkept > 0) {
        rf->kept_loss = kept[nkept - 1].loss;
        rf->kept_train_acc = kept[nkept - 1].train_acc;
    }
    if (strlen(dir) > sizeof rf->dir - 32) return qkv_fail(QKV_ERR_IO, "%s: path too long", dir);
    snprintf(rf->dir, sizeof rf->dir, "%s", dir);
    /* metrics.jsonl as metrics.csv holds it: the rows up to the step this run starts from,
     * read before anything is written (one that cannot be read stops the run unchanged) */
    char path[RUN_PATH_LEN];
    snprintf(path, sizeof path, "%s/metrics.jsonl", from_dir);
    cJSON *old = NULL;
    qkv_status s = nkept > 0 ? read_jsonl(path, &old) : QKV_OK;
    if (s == QKV_OK) s = write_summary(rf, step, 0, 0, "running", 0, NULL);
    if (s != QKV_OK) {
        cJSON_Delete(old);
        return s;
    }
    /* A run that trains no step ends with the last kept row's loss and accuracy: from its
     * metrics.jsonl line, which holds them whole, rather than metrics.csv's 6 digits. */
    const cJSON *last = nkept > 0 && old ? find_step(old, kept[nkept - 1].step) : NULL;
    if (last) {
        rf->kept_loss = row_number(last, "loss", rf->kept_loss);
        rf->kept_train_acc = row_number(last, "train_acc", rf->kept_train_acc);
    }
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    atomic_file af;
    if ((s = atomic_open(&af, path)) != QKV_OK) {
        cJSON_Delete(old);
        return s;
    }
    bool ok = true;
    int err = 0;
    for (int i = 0; i < nkept && ok; i++) {
        const cJSON *same = old ? find_step(old, kept[i].step) : NULL;
        cJSON *mine = same ? NULL : row_json(&kept[i], NULL);
        errno = 0;
        if (!(ok = write_line(af.f, same ? same : mine))) err = errno;
        cJSON_Delete(mine);
    }
    cJSON_Delete(old);
    if (!ok) {
        atomic_abort(&af);
        return qkv_fail(QKV_ERR_IO, "cannot write %s: %s", path,
                        err ? strerror(err) : "a write failed");
    }
    if ((s = atomic_commit(&af)) != QKV_OK) return s;
    /* by its descriptor: a link swapped in after the rename is refused, never followed */
    if ((s = io_fopen_append(path, &rf->jsonl)) != QKV_OK) return s;
    set_signal_record(rf, step, 0, 0);
    return QKV_OK;
}

qkv_status run_files_begin(run_files *rf, const char *dir, const char *from_dir,
                           cJSON *config, int64_t step, const metrics_row *kept, int nkept) {
    memset(rf, 0, sizeof *rf);
    rf->config = config;
    qkv_status s = begin(rf, dir, from_dir, step, kept, nkept);
    if (s != QKV_OK) {
        cJSON_Delete(rf->config);
        rf->config = NULL;
    }
    return s;
}

void run_files_note(run_files *rf, const run_evaluation *e) {
    rf->evaluated = e->step;
    rf->last = *e;
    rf->last.embed_norms = NULL; /* the caller's arrays: written with their row only */
    rf->last.key_frequencies = NULL;
}

void run_files_row(run_files *rf, const metrics_row *row, const run_evaluation *r) {
    run_files_note(rf, r);
    if (!rf->jsonl) return;
    cJSON *j = row_json(row, r);
    /* A row that cannot be written is not worth stopping a run for (metrics.csv, saved with
     * the model, holds every row); the file is closed so that no later row follows a gap. */
    if (!write_line(rf->jsonl, j) || fflush(rf->jsonl) != 0) {
        fclose(rf->jsonl);
        rf->jsonl = NULL;
    }
    cJSON_Delete(j);
}

void run_files_report(run_files *rf, cJSON *report) {
    cJSON_Delete(rf->report);
    rf->report = report;
}

void run_files_grokking(run_files *rf, cJSON *grokking) {
    cJSON_Delete(rf->grokking);
    rf->grokking = grokking;
}

void run_files_committed(run_files *rf, int64_t step, double last_loss, double last_train_acc) {
    rf->model_step = step;
    struct stat sb; /* every row written so far is of a step up to the model's */
    if (rf->jsonl && fflush(rf->jsonl) == 0 && fstat(fileno(rf->jsonl), &sb) == 0)
        rf->committed_bytes = (long long)sb.st_size;
    set_signal_record(rf, step, last_loss, last_train_acc);
}

qkv_status run_files_end(run_files *rf, int64_t step, double last_loss, double last_train_acc,
                         int exit_code, const char *error) {
    io_set_signal_record(NULL, NULL);
    if (rf->jsonl) fclose(rf->jsonl);
    rf->jsonl = NULL;
    if (exit_code != 0) { /* the rows after the model's step go, as its metrics.csv's did */
        char path[RUN_FILE_PATH_LEN];
        FILE *f = NULL;
        struct stat sb;
        snprintf(path, sizeof path, "%s/metrics.jsonl", rf->dir);
        if (io_fopen_append(path, &f) == QKV_OK) { /* never through a link */
            if (fstat(fileno(f), &sb) == 0 && sb.st_size > rf->committed_bytes &&
                ftruncate(fileno(f), (off_t)rf->committed_bytes) == 0)
                fsync(fileno(f));
            fclose(f);
        }
    }
    if (step == rf->start_step && rf->nkept > 0) /* no step trained: the kept row's */
        last_loss = rf->kept_loss, last_train_acc = rf->kept_train_acc;
    const char *status = exit_code == 0 ? "done" : exit_code == 5 ? "diverged"
                         : exit_code == 7 ? "interrupted" : "failed";
    qkv_status s = write_summary(rf, step, last_loss, last_train_acc, status, exit_code,
                                 exit_code == 0 ? NULL : error);
    cJSON_Delete(rf->config);
    cJSON_Delete(rf->report);
    cJSON_Delete(rf->grokking);
    rf->config = rf->report = rf->grokking = NULL;
    return s;
}
