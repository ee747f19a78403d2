/* cmd_sweep.c - `qkv sweep`: one `qkv train` per cell of a grid of train options, run here N at a
 * time, or written out for GNU parallel or a Slurm job array; and `qkv sweep --collect`, which
 * gathers the cells' summary.json files into a CSV, a markdown table and a gnuplot figure.
 *
 * A grid is a list of NAME=V1,V2,... (NAME a train option); its cells are every combination of
 * the values, the last NAME varying fastest. Cell k trains with
 *     qkv train FIXED... --NAME1 V1k --NAME2 V2k ... --out DIR/NAME1=V1k,NAME2=V2k --threads T --quiet
 * where FIXED are the options after `--`. The sweep directory holds sweep.json (the grid, the
 * fixed options and the cells), which --collect reads and which a re-run must match. Local
 * runs and emitted scripts run the very same train command lines, with one thread per cell
 * here and under GNU parallel (Slurm: SLURM_CPUS_PER_TASK); since qkv gives the same bits for
 * any thread count, every way of running a grid gives the same numbers. docs/sweeps.md. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "cli.h"

#include "io/io.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#define SWEEP_MAX_PARAMS 16
#define SWEEP_MAX_CELLS 10000
#define CELL_NAME_MAX 200     /* a cell directory's name, bytes (a file name may have 255) */
#define DIR_MAX 800           /* the sweep directory's path */
#define MAX_JSON_BYTES (1 << 22)

/* The metrics of summary.json that --collect can plot (--metric) */
static const char *const metric_names[] = {"heldout_acc", "heldout_loss", "attention_mass",
                                           "best_head",   "loss",         "train_acc",
                                           "wall_seconds", NULL};

typedef struct {
    char name[48];        /* the train option, with '-': "d-model" */
    char flag[52];        /* "--d-model" */
    train_opt_kind kind;
    int n;                /* values */
    char **values;        /* malloc'd */
} sweep_param;

typedef struct {
    sweep_param param[SWEEP_MAX_PARAMS];
    int nparams;
    long ncells;
    int nfixed;
    char **fixed;         /* the options after "--" (argv's) */
    const char *dir;
} sweep;

typedef struct {
    const char **v;
    int n;
} words;

static void sweep_free(sweep *sw) {
    for (int i = 0; i < sw->nparams; i++) cli_free_args(sw->param[i].n, sw->param[i].values);
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

/* Adds NAME=V1,V2,... (one token of a grid); EXIT_OK or EXIT_USAGE after one line naming
 * `where` (--grid, or the file). */
static int add_param(sweep *sw, const char *token, const char *where) {
    const char *eq = strchr(token, '=');
    if (!eq || eq == token) {
        cli_error("sweep: %s: '%s' is not NAME=V1,V2,...", where, token);
        return EXIT_USAGE;
    }
    if (sw->nparams == SWEEP_MAX_PARAMS) {
        cli_error("sweep: %s: more than %d options in the grid", where, SWEEP_MAX_PARAMS);
        return EXIT_USAGE;
    }
    sweep_param *p = &sw->param[sw->nparams];
    size_t len = (size_t)(eq - token);
    if (len >= sizeof p->name) len = sizeof p->name - 1;
    for (size_t i = 0; i < len; i++) p->name[i] = token[i] == '_' ? '-' : token[i];
    p->name[len] = '\0';
    memcpy(p->flag, "--", 2);
    memcpy(p->flag + 2, p->name, len + 1);
    p->kind = cli_train_option(p->name);
    p->n = 0;
    p->values = NULL;
    if (p->kind == TRAIN_OPT_UNKNOWN) {
        cli_error("sweep: %s: unknown train option '%.*s' (see qkv train --help)", where,
                  (int)(eq - token), token);
        return EXIT_USAGE;
    }
    static const char *const fixed_by_sweep[] = {"out", "resume", "config", "threads"};
    for (size_t i = 0; i < sizeof fixed_by_sweep / sizeof fixed_by_sweep[0]; i++)
        if (!strcmp(p->name, fixed_by_sweep[i])) {
            cli_error("sweep: %s: --%s cannot vary in a sweep", where, p->name);
            return EXIT_USAGE;
        }
    for (int i = 0; i < sw->nparams; i++)
        if (!strcmp(sw->param[i].name, p->name)) {
            cli_error("sweep: %s: %s is in the grid twice", where, p->name);
            return EXIT_USAGE;
        }
    const char *list = eq + 1;
    if (!*list) {
        cli_error("sweep: %s: %s= has no values", where, p->name);
        return EXIT_USAGE;
    }
    int code = EXIT_OK;
    for (const char *v = list; code == EXIT_OK;) {
        size_t n = strcspn(v, ",");
        char value[256], safe[256];
        if (n == 0 || n >= sizeof value) {
            cli_error(n ? "sweep: %s: a value of %s is too long" : "sweep: %s: %s has an empty value",
                      where, p->name);
            code = EXIT_USAGE;
            break;
        }
        memcpy(value, v, n);
        value[n] = '\0';
        if (p->kind == TRAIN_OPT_FLAG && strcmp(value, "true") && strcmp(value, "false")) {
            cli_error("sweep: %s: %s is a flag: its values are true and false, not '%s'", where,
                      p->name, value);
            code = EXIT_USAGE;
            break;
        }
        safe_name(value, safe, sizeof safe);
        for (int i = 0; i < p->n && code == EXIT_OK; i++) {
            char other[256];
            safe_name(p->values[i], other, sizeof other);
            if (!strcmp(other, safe)) {
                cli_error(strcmp(p->values[i], value)
                              ? "sweep: %s: %s values '%s' and '%s' would share a directory name"
                              : "sweep: %s: %s lists '%s' twice%.0s",
                          where, p->name, p->values[i], value);
                code = EXIT_USAGE;
            }
        }
        if (code != EXIT_OK) break;
        char **grown = realloc(p->values, ((size_t)p->n + 1) * sizeof *grown);
        if (!grown || !(grown[p->n] = strdup(value))) {
            if (grown) p->values = grown;
            cli_error("out of memory");
            code = EXIT_NOMEM;
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

/* Adds every NAME=V1,... of `text` (separated by white space; '#' to the end of a line is a
 * comment in a grid file). */
static int add_grid_text(sweep *sw, char *text, const char *where, bool comments) {
    if (comments)
        for (char *p = text; (p = strchr(p, '#'));) {
            size_t n = strcspn(p, "\n");
            memset(p, ' ', n);
            p += n;
        }
    for (char *tok = strtok(text, " \t\r\n\v\f"); tok; tok = strtok(NULL, " \t\r\n\v\f")) {
        int code = add_param(sw, tok, where);
        if (code != EXIT_OK) return code;
    }
    return EXIT_OK;
}

/* The whole of a small file, NUL-terminated; NULL after one line (*code set). */
static char *read_text(const char *path, const char *what, int *code) {
    struct stat sb;
    FILE *f = fopen(path, "rb");
    if (!f || fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        cli_error("sweep: cannot read %s%s%s", path, f ? ": not a regular file" : ": ",
                  f ? "" : strerror(errno));
        if (f) fclose(f);
        *code = EXIT_IO;
        return NULL;
    }
    if (sb.st_size > MAX_JSON_BYTES) {
        cli_error("sweep: %s is too large for %s", path, what);
        fclose(f);
        *code = EXIT_FORMAT;
        return NULL;
    }
    char *text = malloc((size_t)sb.st_size + 1);
    size_t n = text ? fread(text, 1, (size_t)sb.st_size, f) : 0;
    if (!text || ferror(f)) {
        cli_error("sweep: cannot read %s", path);
        free(text);
        fclose(f);
        *code = EXIT_IO;
        return NULL;
    }
    fclose(f);
    text[n] = '\0';
    return text;
}

/* Checks the grid as a whole: its size, its cells' names. */
static int check_grid(sweep *sw) {
    if (sw->nparams == 0) {
        cli_error("sweep: the grid is empty (--grid 'NAME=V1,V2 ...' or --grid-file FILE)");
        return EXIT_USAGE;
    }
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
    if (cells > SWEEP_MAX_CELLS) {
        cli_error("sweep: the grid has %.0f cells, at most %d", cells, SWEEP_MAX_CELLS);
        return EXIT_USAGE;
    }
    if (name_len > CELL_NAME_MAX) {
        cli_error("sweep: the cells' directory names would be %zu bytes long, at most %d: "
                  "shorten the values", name_len, CELL_NAME_MAX);
        return EXIT_USAGE;
    }
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
                    cli_error("sweep: --resume has no place in a sweep");
                else
                    cli_error("sweep: --%s is set by the sweep for each cell; leave it out of "
                              "the options after --", set_here[k]);
                return EXIT_USAGE;
            }
        for (int p = 0; p < sw->nparams; p++)
            if (strlen(sw->param[p].name) == n && !strncmp(a + 2, sw->param[p].name, n)) {
                cli_error("sweep: --%s is both in the grid and after --", sw->param[p].name);
                return EXIT_USAGE;
            }
    }
    return EXIT_OK;
}

/* The value index of every option in cell `c` (the last option varies fastest). */
static void cell_indices(const sweep *sw, long c, int *idx) {
    for (int i = sw->nparams - 1; i >= 0; i--) {
        idx[i] = (int)(c % sw->param[i].n);
        c /= sw->param[i].n;
    }
}

static void cell_name(const sweep *sw, long c, char *out, size_t len) {
    int idx[SWEEP_MAX_PARAMS];
    cell_indices(sw, c, idx);
    size_t at = 0;
    out[0] = '\0';
    for (int i = 0; i < sw->nparams && at < len; i++) {
        char safe[256];
        safe_name(sw->param[i].values[idx[i]], safe, sizeof safe);
        at += (size_t)snprintf(out + at, len - at, "%s%s=%s", i ? "," : "", sw->param[i].name, safe);
    }
}

/* The train arguments of cell `c`, from "train": the fixed options, then the cell's. Strings
 * are borrowed from sw; w->v has room for the caller to add 8 more and a NULL. */
static bool cell_words(const sweep *sw, long c, words *w) {
    w->n = 0;
    w->v = malloc(((size_t)sw->nfixed + 2 * (size_t)sw->nparams + 10) * sizeof *w->v);
    if (!w->v) return false;
    int idx[SWEEP_MAX_PARAMS];
    cell_indices(sw, c, idx);
    w->v[w->n++] = "train";
    for (int i = 0; i < sw->nfixed; i++) w->v[w->n++] = sw->fixed[i];
    for (int i = 0; i < sw->nparams; i++) {
        const sweep_param *p = &sw->param[i];
        const char *value = p->values[idx[i]];
        if (p->kind == TRAIN_OPT_FLAG) {
            if (!strcmp(value, "true")) w->v[w->n++] = p->flag;
        } else {
            w->v[w->n++] = p->flag;
            w->v[w->n++] = value;
        }
    }
    return true;
}

static char *path_join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* Every cell's train command line, checked as `qkv train` checks it (values, --config), with
 * the cell named in the message. */
static int check_cells(const sweep *sw) {
    int code = EXIT_OK;
    for (long c = 0; c < sw->ncells && code == EXIT_OK; c++) {
        char name[CELL_NAME_MAX + 64], context[CELL_NAME_MAX + 80];
        cell_name(sw, c, name, sizeof name);
        words w;
        if (!cell_words(sw, c, &w)) {
            cli_error("out of memory");
            return EXIT_NOMEM;
        }
        char *out = path_join(sw->dir, name);
        w.v[w.n++] = "--out";
        w.v[w.n++] = out ? out : name;
        w.v[w.n] = NULL;
        snprintf(context, sizeof context, "sweep: cell %s", name);
        cli_error_context(context);
        int check = cli_train_check(w.n, (char **)w.v);
        cli_error_context(NULL);
        if (check == EXIT_OK) { /* train printed its help: -h or --help came after -- */
            cli_error("sweep: --help after -- is not an option to train with");
            code = EXIT_USAGE;
        } else if (check != CLI_RUN) {
            code = check;
        }
        free(out);
        free(w.v);
    }
    return code;
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

/* A JSON file, parsed; NULL after one line (*code set), or quietly when `quiet_missing` and
 * the file does not exist. */
static cJSON *read_json(const char *path, bool quiet_missing, int *code) {
    if (quiet_missing && access(path, F_OK) != 0) return NULL;
    char *text = read_text(path, "a JSON file", code);
    if (!text) return NULL;
    cJSON *j = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(j)) {
        if (!quiet_missing) cli_error("sweep: %s is not a JSON object", path);
        cJSON_Delete(j);
        *code = EXIT_FORMAT;
        return NULL;
    }
    return j;
}

/* Writes DIR/sweep.json, or checks that the one there describes this sweep. */
static int write_sweep_json(const sweep *sw) {
    char *path = path_join(sw->dir, "sweep.json");
    cJSON *j = cJSON_CreateObject();
    if (!path || !j) {
        free(path);
        cJSON_Delete(j);
        cli_error("out of memory");
        return EXIT_NOMEM;
    }
    cJSON_AddStringToObject(j, "format", "qkv-sweep");
    cJSON_AddStringToObject(j, "qkv_version", QKV_VERSION_STRING);
    cJSON_AddItemToObject(j, "grid", grid_json(sw));
    cJSON_AddItemToObject(j, "fixed", fixed_json(sw));
    cJSON *cells = cJSON_AddArrayToObject(j, "cells");
    for (long c = 0; cells && c < sw->ncells; c++) {
        char name[CELL_NAME_MAX + 64];
        cell_name(sw, c, name, sizeof name);
        cJSON_AddItemToArray(cells, cJSON_CreateString(name));
    }
    int code = EXIT_OK;
    cJSON *old = read_json(path, true, &code);
    if (code == EXIT_OK && old &&
        (!cJSON_Compare(cJSON_GetObjectItemCaseSensitive(old, "grid"),
                        cJSON_GetObjectItemCaseSensitive(j, "grid"), true) ||
         !cJSON_Compare(cJSON_GetObjectItemCaseSensitive(old, "fixed"),
                        cJSON_GetObjectItemCaseSensitive(j, "fixed"), true))) {
        cli_error("sweep: %s holds another sweep (its sweep.json has another grid or other "
                  "options after --); choose another --out", sw->dir);
        code = EXIT_USAGE;
    } else if (code != EXIT_OK) {
        cli_error("sweep: %s is not a sweep.json; choose another --out", path);
    }
    char *text = code == EXIT_OK ? cJSON_Print(j) : NULL;
    if (text) {
        atomic_file af;
        qkv_status s = atomic_open(&af, path);
        if (s == QKV_OK) {
            fprintf(af.f, "%s\n", text);
            s = atomic_commit(&af);
        }
        if (s != QKV_OK) {
            cli_error("sweep: %s", qkv_last_error());
            code = cli_exit_for(s);
        }
    } else if (code == EXIT_OK) {
        cli_error("out of memory");
        code = EXIT_NOMEM;
    }
    free(text);
    free(path);
    cJSON_Delete(old);
    cJSON_Delete(j);
    return code;
}

/* ---- running here ---- */

/* True when DIR/summary.json says the run finished with exit status 0. */
static bool cell_done(const char *cell_dir, cJSON **summary) {
    char *path = path_join(cell_dir, "summary.json");
    int code = EXIT_OK;
    cJSON *j = path ? read_json(path, true, &code) : NULL;
    free(path);
    const cJSON *status = cJSON_GetObjectItemCaseSensitive(j, "status");
    const cJSON *exit_status = cJSON_GetObjectItemCaseSensitive(j, "exit_status");
    bool done = cJSON_IsString(status) && !strcmp(status->valuestring, "done") &&
                cJSON_IsNumber(exit_status) && exit_status->valuedouble == 0;
    if (summary) *summary = j;
    else cJSON_Delete(j);
    return done;
}

static volatile sig_atomic_t interrupted;
static void on_signal(int sig) { interrupted = sig; }

typedef struct {
    pid_t pid;
    long cell;
    char *dir;
} running_cell;

/* One line about a cell that ended. */
static void report(const sweep *sw, const running_cell *r, int status, int done, int total,
                   bool quiet) {
    if (quiet) return;
    char name[CELL_NAME_MAX + 64];
    cell_name(sw, r->cell, name, sizeof name);
    cJSON *summary = NULL;
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && cell_done(r->dir, &summary);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(summary, "metrics");
    const cJSON *acc = cJSON_GetObjectItemCaseSensitive(m, "heldout_acc");
    const cJSON *mass = cJSON_GetObjectItemCaseSensitive(m, "attention_mass");
    const cJSON *wall = cJSON_GetObjectItemCaseSensitive(summary, "wall_seconds");
    if (ok)
        printf("[%d/%d] %s: done in %.1f s, heldout_acc %.4f, attention_mass %.4f\n", done, total,
               name, cJSON_IsNumber(wall) ? wall->valuedouble : 0,
               cJSON_IsNumber(acc) ? acc->valuedouble : NAN,
               cJSON_IsNumber(mass) ? mass->valuedouble : NAN);
    else if (WIFEXITED(status))
        printf("[%d/%d] %s: FAILED with exit %d; see %s/train.log\n", done, total, name,
               WEXITSTATUS(status), r->dir);
    else
        printf("[%d/%d] %s: FAILED, killed by signal %d; see %s/train.log\n", done, total, name,
               WIFSIGNALED(status) ? WTERMSIG(status) : 0, r->dir);
    fflush(stdout);
    cJSON_Delete(summary);
}

/* Starts `qkv train` for cell c into `dir`, its output in dir/train.log. */
static pid_t start_cell(const sweep *sw, const char *exe, long c, const char *dir) {
    words w;
    if (!cli_make_dirs("sweep: ", dir) || !cell_words(sw, c, &w)) return -1;
    w.v[w.n++] = "--out";
    w.v[w.n++] = dir;
    w.v[w.n++] = "--threads";
    w.v[w.n++] = "1";
    w.v[w.n++] = "--quiet";
    w.v[w.n] = NULL;
    char *log = path_join(dir, "train.log");
    int fd = log ? open(log, O_WRONLY | O_CREAT | O_TRUNC, 0666) : -1;
    if (fd < 0) {
        cli_error("sweep: cannot write %s: %s", log ? log : dir, strerror(errno));
        free(log);
        free(w.v);
        return -1;
    }
    free(log);
    /* argv: "qkv" (the name train's messages start with), then w; the program is this very
     * executable */
    const char **args = malloc(((size_t)w.n + 2) * sizeof *args);
    if (!args) {
        close(fd);
        free(w.v);
        cli_error("out of memory");
        return -1;
    }
    args[0] = "qkv";
    memcpy(args + 1, w.v, ((size_t)w.n + 1) * sizeof *args); /* with the NULL */
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        close(fd);
        execv(exe, (char *const *)args);
        _exit(127);
    }
    close(fd);
    free(args);
    free(w.v);
    if (pid < 0) cli_error("sweep: cannot start qkv train: %s", strerror(errno));
    return pid;
}

static int run_local(const sweep *sw, long jobs, bool quiet) {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        cli_error("sweep: cannot find the qkv executable (/proc/self/exe): %s", strerror(errno));
        return EXIT_IO;
    }
    exe[n] = '\0';
    /* the cells to run: those not done yet */
    long *todo = malloc((size_t)sw->ncells * sizeof *todo);
    running_cell *run = calloc((size_t)jobs, sizeof *run);
    if (!todo || !run) {
        free(todo);
        free(run);
        cli_error("out of memory");
        return EXIT_NOMEM;
    }
    long ntodo = 0;
    for (long c = 0; c < sw->ncells; c++) {
        char name[CELL_NAME_MAX + 64];
        cell_name(sw, c, name, sizeof name);
        char *dir = path_join(sw->dir, name);
        if (!dir || !cell_done(dir, NULL)) todo[ntodo++] = c;
        free(dir);
    }
    if (!quiet) {
        printf("sweep: %ld cells in %s: %ld done before, %ld to run, %ld at a time\n", sw->ncells,
               sw->dir, sw->ncells - ntodo, ntodo, jobs < ntodo ? jobs : ntodo);
        fflush(stdout);
    }
    struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term, old_hup;
    sigemptyset(&sa.sa_mask);
    interrupted = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGHUP, &sa, &old_hup);
    long next = 0, finished = 0, failed = 0;
    int active = 0, code = EXIT_OK;
    while ((next < ntodo || active > 0)) {
        while (next < ntodo && active < jobs && !interrupted && code == EXIT_OK) {
            char name[CELL_NAME_MAX + 64];
            cell_name(sw, todo[next], name, sizeof name);
            running_cell *slot = NULL;
            for (long j = 0; j < jobs && !slot; j++)
                if (run[j].pid == 0) slot = &run[j];
            slot->cell = todo[next++];
            slot->dir = path_join(sw->dir, name);
            slot->pid = slot->dir ? start_cell(sw, exe, slot->cell, slot->dir) : -1;
            if (slot->pid < 0) { /* the line is printed; the cells running are waited for */
                free(slot->dir);
                *slot = (running_cell){0};
                code = EXIT_IO;
            } else {
                active++;
            }
        }
        if (active == 0) break;
        int status;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0) {
            if (errno != EINTR) break;
            if (interrupted) /* pass it on; their ends are still waited for and reported */
                for (long j = 0; j < jobs; j++)
                    if (run[j].pid > 0) kill(run[j].pid, SIGTERM);
            continue;
        }
        for (long j = 0; j < jobs; j++) {
            if (run[j].pid != pid) continue;
            finished++;
            bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
            if (!ok) failed++;
            report(sw, &run[j], status, (int)finished, (int)ntodo, quiet);
            free(run[j].dir);
            run[j] = (running_cell){0};
            active--;
        }
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGHUP, &old_hup, NULL);
    free(todo);
    free(run);
    if (interrupted) {
        cli_error("sweep: interrupted; run the same command again to finish the %ld cells left",
                  ntodo - finished + failed);
        return EXIT_FAILED;
    }
    if (code != EXIT_OK) return code;
    if (!quiet)
        printf("sweep: %ld cells run, %ld failed; tabulate and plot with: qkv sweep --collect %s\n",
               finished, failed, sw->dir);
    if (failed) {
        cli_error("sweep: %ld of %ld cells failed (each one's train.log says why); run the same "
                  "command again to retry them", failed, ntodo);
        return EXIT_FAILED;
    }
    return EXIT_OK;
}

/* ---- scripts for GNU parallel and Slurm ---- */

/* Writes `word` for a POSIX shell: inside single quotes, where nothing is expanded ($(...),
 * backquotes, spaces and globs stay text); a ' itself is written '\''. */
static void shell_word(FILE *f, const char *word) {
    fputc('\'', f);
    for (const char *p = word; *p; p++)
        if (*p == '\'') fputs("'\\''", f);
        else fputc(*p, f);
    fputc('\'', f);
}

/* One cell's command: qkv train ... --out CELL_DIR then `threads` written as is (a number,
 * or the quoted expansion of SLURM_CPUS_PER_TASK). */
static bool write_command(FILE *f, const sweep *sw, const char *exe, const char *dir, long c,
                          const char *threads) {
    words w;
    if (!cell_words(sw, c, &w)) return false;
    char name[CELL_NAME_MAX + 64];
    cell_name(sw, c, name, sizeof name);
    char *cell_dir = path_join(dir, name);
    if (!cell_dir) {
        free(w.v);
        return false;
    }
    shell_word(f, exe);
    for (int i = 0; i < w.n; i++) {
        fputc(' ', f);
        shell_word(f, w.v[i]);
    }
    fputs(" --out ", f);
    shell_word(f, cell_dir);
    fprintf(f, " --threads %s --quiet", threads);
    free(cell_dir);
    free(w.v);
    return true;
}

/* Refuses a control character (a newline would end a command line) in anything that goes
 * into a script. */
static bool printable(const char *what, const char *s) {
    for (const char *p = s; *p; p++)
        if (iscntrl((unsigned char)*p)) {
            cli_error("sweep: --emit: %s holds a control character: '%s'", what, s);
            return false;
        }
    return true;
}

/* What emit writes that comes from the command line has no control character. */
static bool emit_printable(const sweep *sw) {
    bool ok = printable("--out", sw->dir);
    for (int i = 0; ok && i < sw->nfixed; i++) ok = printable("an option after --", sw->fixed[i]);
    for (int p = 0; ok && p < sw->nparams; p++)
        for (int v = 0; ok && v < sw->param[p].n; v++)
            ok = printable("a value of the grid", sw->param[p].values[v]);
    return ok;
}

static int emit(const sweep *sw, const char *kind, bool quiet) {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char *dir = realpath(sw->dir, NULL);
    if (n <= 0 || !dir) {
        cli_error("sweep: cannot find %s: %s", n <= 0 ? "the qkv executable" : sw->dir,
                  strerror(errno));
        free(dir);
        return EXIT_IO;
    }
    exe[n] = '\0';
    bool ok = printable("the qkv executable's path", exe) && printable("--out", dir);
    if (!ok) {
        free(dir);
        return EXIT_USAGE;
    }
    bool slurm = !strcmp(kind, "slurm");
    char *path = path_join(sw->dir, slurm ? "sweep.sbatch" : "jobs.txt");
    atomic_file af;
    qkv_status s = path ? atomic_open(&af, path) : qkv_fail(QKV_ERR_NOMEM, "out of memory");
    if (s != QKV_OK) {
        cli_error("sweep: %s", qkv_last_error());
        free(path);
        free(dir);
        return cli_exit_for(s);
    }
    if (slurm) {
        fprintf(af.f,
                "#!/bin/bash\n"
                "#SBATCH --job-name=qkv-sweep\n"
                "#SBATCH --array=0-%ld\n"
                "#SBATCH --cpus-per-task=1\n"
                "# A qkv sweep of %ld cells (written by qkv sweep --emit slurm; the grid is in\n"
                "# sweep.json beside this file). Array index k trains cell k with\n"
                "# SLURM_CPUS_PER_TASK threads. Submit: sbatch sweep.sbatch; then gather the\n"
                "# results: qkv sweep --collect DIR.\n"
                "set -eu\n"
                "case \"${SLURM_ARRAY_TASK_ID:-}\" in\n",
                sw->ncells - 1, sw->ncells);
        for (long c = 0; c < sw->ncells && ok; c++) {
            fprintf(af.f, "%ld) exec ", c);
            ok = write_command(af.f, sw, exe, dir, c, "\"${SLURM_CPUS_PER_TASK:-1}\"");
            fputs(" ;;\n", af.f);
        }
        fprintf(af.f, "*) echo \"sweep.sbatch: SLURM_ARRAY_TASK_ID must be 0..%ld\" >&2; exit 2 ;;\n"
                      "esac\n", sw->ncells - 1);
    } else {
        for (long c = 0; c < sw->ncells && ok; c++) {
            ok = write_command(af.f, sw, exe, dir, c, "1");
            fputc('\n', af.f);
        }
    }
    if (!ok) {
        atomic_abort(&af);
        cli_error("out of memory");
        free(path);
        free(dir);
        return EXIT_NOMEM;
    }
    if ((s = atomic_commit(&af)) != QKV_OK) {
        cli_error("sweep: %s", qkv_last_error());
        free(path);
        free(dir);
        return cli_exit_for(s);
    }
    if (slurm) chmod(path, 0755);
    if (!quiet)
        printf(slurm ? "sweep: wrote %s (%ld cells); submit it with: sbatch %s\n"
                     : "sweep: wrote %s (%ld cells); run them with: parallel --jobs N < %s\n",
               path, sw->ncells, path);
    free(path);
    free(dir);
    return EXIT_OK;
}

/* ---- collect ---- */

typedef struct {
    char *name;          /* the cell's directory name */
    const char *status;  /* done, failed, running or missing */
    cJSON *summary;      /* NULL if missing */
    char **values;       /* per grid option, as text (from the summary's config if there) */
    double x, y;         /* for the plot (NaN when unknown) */
    int line;            /* index of its --lines value */
} collected_cell;

/* Writes a config value as text: numbers in their shortest exact form. */
static char *value_text(const cJSON *v) {
    char buf[64];
    if (cJSON_IsString(v)) return strdup(v->valuestring);
    if (cJSON_IsBool(v)) return strdup(cJSON_IsTrue(v) ? "true" : "false");
    if (!cJSON_IsNumber(v)) return strdup("");
    snprintf(buf, sizeof buf, "%.15g", v->valuedouble);
    if (strtod(buf, NULL) != v->valuedouble) snprintf(buf, sizeof buf, "%.17g", v->valuedouble);
    return strdup(buf);
}

static void config_key(const char *option, char *key, size_t len) {
    size_t i = 0;
    for (; option[i] && i + 1 < len; i++) key[i] = option[i] == '-' ? '_' : option[i];
    key[i] = '\0';
}

/* A metric of a summary ("step" and "wall_seconds" are the summary's own), NaN if absent. */
static double summary_number(const cJSON *summary, const char *metric) {
    bool top = !strcmp(metric, "wall_seconds") || !strcmp(metric, "step");
    const cJSON *from = top ? summary : cJSON_GetObjectItemCaseSensitive(summary, "metrics");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(from, metric);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static double d_k_of(const cJSON *summary) {
    const cJSON *config = cJSON_GetObjectItemCaseSensitive(summary, "config");
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(config, "d_model");
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(config, "heads");
    return cJSON_IsNumber(d) && cJSON_IsNumber(h) && h->valuedouble > 0
               ? d->valuedouble / h->valuedouble : NAN;
}

/* A number for a table: empty when unknown. */
static void number_text(double v, char *out, size_t len) {
    if (isfinite(v)) snprintf(out, len, "%.6g", v);
    else out[0] = '\0';
}

/* Writes a CSV field: quoted when it holds a comma, a quote or a line break. */
static void csv_field(FILE *f, const char *s) {
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (const char *p = s; *p; p++) {
        if (*p == '"') fputc('"', f);
        fputc(*p, f);
    }
    fputc('"', f);
}

static void md_field(FILE *f, const char *s) {
    for (const char *p = s; *p; p++) {
        if (*p == '|') fputc('\\', f);
        fputc(iscntrl((unsigned char)*p) ? ' ' : *p, f);
    }
}

static int cmp_x(const void *a, const void *b) {
    const collected_cell *x = *(collected_cell *const *)a, *y = *(collected_cell *const *)b;
    return (x->x > y->x) - (x->x < y->x);
}

/* The grid option named `name` (either spelling), or -1. */
static int find_param(const sweep *sw, const char *name) {
    char dashed[64];
    size_t i = 0;
    for (; name[i] && i + 1 < sizeof dashed; i++) dashed[i] = name[i] == '_' ? '-' : name[i];
    dashed[i] = '\0';
    for (int p = 0; p < sw->nparams; p++)
        if (!strcmp(sw->param[p].name, dashed)) return p;
    return -1;
}

/* Reads DIR/sweep.json back into a sweep (its grid; cells are rebuilt from it). */
static int load_sweep(sweep *sw, const char *dir) {
    memset(sw, 0, sizeof *sw);
    sw->dir = dir;
    char *path = path_join(dir, "sweep.json");
    int code = EXIT_OK;
    if (!path) {
        cli_error("out of memory");
        return EXIT_NOMEM;
    }
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        cli_error("sweep: %s is not a directory", dir);
        free(path);
        return EXIT_IO;
    }
    if (access(path, F_OK) != 0) {
        cli_error("sweep: %s has no sweep.json (is it a directory written by qkv sweep?)", dir);
        free(path);
        return EXIT_IO;
    }
    cJSON *j = read_json(path, false, &code);
    const cJSON *grid = cJSON_GetObjectItemCaseSensitive(j, "grid"), *p;
    if (j && !cJSON_IsArray(grid)) {
        cli_error("sweep: %s has no grid", path);
        code = EXIT_FORMAT;
    }
    cJSON_ArrayForEach(p, grid) {
        if (code != EXIT_OK) break;
        const cJSON *option = cJSON_GetObjectItemCaseSensitive(p, "option");
        const cJSON *values = cJSON_GetObjectItemCaseSensitive(p, "values"), *v;
        if (!cJSON_IsString(option) || !cJSON_IsArray(values)) {
            cli_error("sweep: %s: a grid entry lacks its option or values", path);
            code = EXIT_FORMAT;
            break;
        }
        /* rebuilt as the grid text it came from, and checked the same way */
        size_t len = strlen(option->valuestring) + 2;
        cJSON_ArrayForEach(v, values) len += cJSON_IsString(v) ? strlen(v->valuestring) + 1 : 1;
        char *token = malloc(len);
        if (!token) {
            code = EXIT_NOMEM;
            break;
        }
        size_t at = (size_t)snprintf(token, len, "%s=", option->valuestring);
        cJSON_ArrayForEach(v, values)
            at += (size_t)snprintf(token + at, len - at, "%s%s", v == values->child ? "" : ",",
                                   cJSON_IsString(v) ? v->valuestring : "");
        code = add_param(sw, token, path);
        free(token);
        if (code != EXIT_OK) break;
    }
    if (code == EXIT_OK) code = check_grid(sw);
    cJSON_Delete(j);
    free(path);
    return code;
}

/* DIR/sweep.csv and DIR/sweep.md: one row per cell. */
static int write_table_files(const sweep *sw, collected_cell *cells, bool quiet) {
    static const char *const tail[] = {"step", "heldout_acc", "heldout_loss", "attention_mass",
                                       "best_head", "loss", "train_acc", "wall_seconds"};
    const size_t ntail = sizeof tail / sizeof tail[0];
    for (int md = 0; md < 2; md++) {
        char *path = path_join(sw->dir, md ? "sweep.md" : "sweep.csv");
        atomic_file af;
        qkv_status s = path ? atomic_open(&af, path) : qkv_fail(QKV_ERR_NOMEM, "out of memory");
        free(path);
        if (s != QKV_OK) {
            cli_error("sweep: %s", qkv_last_error());
            return cli_exit_for(s);
        }
        /* the header */
        fputs(md ? "| cell | status" : "cell,status", af.f);
        for (int p = 0; p < sw->nparams; p++) {
            char key[64];
            config_key(sw->param[p].name, key, sizeof key);
            fprintf(af.f, md ? " | %s" : ",%s", key);
        }
        fputs(md ? " | d_k" : ",d_k", af.f);
        for (size_t t = 0; t < ntail; t++) fprintf(af.f, md ? " | %s" : ",%s", tail[t]);
        fputs(md ? " |\n|---|---" : "\n", af.f);
        if (md) {
            for (size_t k = 0; k < (size_t)sw->nparams + 1 + ntail; k++) fputs("|---", af.f);
            fputs("|\n", af.f);
        }
        for (long c = 0; c < sw->ncells; c++) {
            const collected_cell *cell = &cells[c];
            char num[64];
            if (md) {
                fputs("| ", af.f);
                md_field(af.f, cell->name);
                fprintf(af.f, " | %s", cell->status);
            } else {
                csv_field(af.f, cell->name);
                fprintf(af.f, ",%s", cell->status);
            }
            for (int p = 0; p < sw->nparams; p++) {
                fputs(md ? " | " : ",", af.f);
                if (md) md_field(af.f, cell->values[p]);
                else csv_field(af.f, cell->values[p]);
            }
            number_text(d_k_of(cell->summary), num, sizeof num);
            fprintf(af.f, md ? " | %s" : ",%s", num);
            for (size_t t = 0; t < ntail; t++) {
                number_text(summary_number(cell->summary, tail[t]), num, sizeof num);
                fprintf(af.f, md ? " | %s" : ",%s", num);
            }
            fputs(md ? " |\n" : "\n", af.f);
        }
        if ((s = atomic_commit(&af)) != QKV_OK) {
            cli_error("sweep: %s", qkv_last_error());
            return cli_exit_for(s);
        }
    }
    if (!quiet) {
        char *path = path_join(sw->dir, "sweep.md");
        FILE *f = path ? fopen(path, "r") : NULL;
        for (int ch; f && (ch = fgetc(f)) != EOF;) putchar(ch);
        if (f) fclose(f);
        printf("sweep: wrote %s/sweep.csv and %s/sweep.md\n", sw->dir, sw->dir);
        free(path);
    }
    return EXIT_OK;
}

static int collect(const char *dir, const char *x_name, const char *lines_name,
                   const char *metric, const char *format, bool quiet) {
    sweep sw;
    int code = load_sweep(&sw, dir);
    if (code != EXIT_OK) {
        sweep_free(&sw);
        return code;
    }
    /* the axes */
    bool x_is_dk = x_name && !strcmp(x_name, "d_k");
    int xp = x_name && !x_is_dk ? find_param(&sw, x_name) : x_name ? -1 : 0, lp = -1;
    if (x_name && !x_is_dk && xp < 0) {
        cli_error("sweep: --x %s is not an option of the grid (nor d_k)", x_name);
        sweep_free(&sw);
        return EXIT_USAGE;
    }
    if (lines_name) {
        if ((lp = find_param(&sw, lines_name)) < 0 || lp == xp) {
            cli_error(lp < 0 ? "sweep: --lines %s is not an option of the grid"
                             : "sweep: --lines %s is the x axis too", lines_name);
            sweep_free(&sw);
            return EXIT_USAGE;
        }
    } else {
        for (int p = 0; p < sw.nparams && lp < 0; p++)
            if (p != xp && !(x_is_dk && !strcmp(sw.param[p].name, "d-model"))) lp = p;
    }
    collected_cell *cells = calloc((size_t)sw.ncells, sizeof *cells);
    if (!cells) {
        sweep_free(&sw);
        cli_error("out of memory");
        return EXIT_NOMEM;
    }
    long plotted = 0;
    for (long c = 0; c < sw.ncells && code == EXIT_OK; c++) {
        collected_cell *cell = &cells[c];
        char name[CELL_NAME_MAX + 64];
        cell_name(&sw, c, name, sizeof name);
        cell->name = strdup(name);
        char *cell_dir = path_join(dir, name);
        bool done = cell_dir && cell_done(cell_dir, &cell->summary);
        free(cell_dir);
        const cJSON *status = cJSON_GetObjectItemCaseSensitive(cell->summary, "status");
        cell->status = done ? "done" : !cell->summary ? "missing"
                       : cJSON_IsString(status) && !strcmp(status->valuestring, "running")
                           ? "running" : "failed";
        const cJSON *config = cJSON_GetObjectItemCaseSensitive(cell->summary, "config");
        int idx[SWEEP_MAX_PARAMS];
        cell_indices(&sw, c, idx);
        cell->values = calloc((size_t)sw.nparams, sizeof *cell->values);
        if (!cell->name || !cell->values) {
            code = EXIT_NOMEM;
            break;
        }
        for (int p = 0; p < sw.nparams; p++) {
            char key[64];
            config_key(sw.param[p].name, key, sizeof key);
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(config, key);
            cell->values[p] = v ? value_text(v) : strdup(sw.param[p].values[idx[p]]);
            if (!cell->values[p]) code = EXIT_NOMEM;
        }
        if (code != EXIT_OK) break;
        char *end = NULL;
        cell->x = x_is_dk ? d_k_of(cell->summary) : strtod(cell->values[xp], &end);
        if (!x_is_dk && (end == cell->values[xp] || *end)) {
            cli_error("sweep: --x %s: '%s' is not a number", sw.param[xp].name, cell->values[xp]);
            code = EXIT_USAGE;
            break;
        }
        cell->y = done ? summary_number(cell->summary, metric) : NAN;
        cell->line = lp >= 0 ? idx[lp] : 0;
        plotted += isfinite(cell->x) && isfinite(cell->y);
    }
    if (code == EXIT_NOMEM) cli_error("out of memory");
    if (code == EXIT_OK) code = write_table_files(&sw, cells, quiet);

    /* the figure's data: one block per --lines value, sorted by x, then gnuplot in DIR */
    if (code == EXIT_OK && plotted == 0) {
        cli_error("sweep: no finished cell has %s to plot", metric);
        code = EXIT_FAILED;
    }
    char *data = code == EXIT_OK ? path_join(dir, "sweep_plot.dat") : NULL;
    collected_cell **order = code == EXIT_OK ? malloc((size_t)sw.ncells * sizeof *order) : NULL;
    atomic_file af;
    qkv_status s = QKV_OK;
    if (code == EXIT_OK && (!data || !order)) {
        cli_error("out of memory");
        code = EXIT_NOMEM;
    }
    if (code == EXIT_OK && (s = atomic_open(&af, data)) != QKV_OK) {
        cli_error("sweep: %s", qkv_last_error());
        code = cli_exit_for(s);
    }
    double xmin = INFINITY, xmax = -INFINITY;
    int blocks = 0;
    if (code == EXIT_OK) {
        char xlabel[64];
        config_key(x_is_dk ? "d_k" : sw.param[xp].name, xlabel, sizeof xlabel);
        fprintf(af.f, "# qkv sweep --collect: %s against %s, one block per value of %s\n", metric,
                xlabel, lp >= 0 ? sw.param[lp].name : "(none)");
        int nlines = lp >= 0 ? sw.param[lp].n : 1;
        for (int l = 0; l < nlines; l++) {
            long n = 0;
            for (long c = 0; c < sw.ncells; c++)
                if (cells[c].line == l && isfinite(cells[c].x) && isfinite(cells[c].y))
                    order[n++] = &cells[c];
            if (n == 0) continue;
            qsort(order, (size_t)n, sizeof *order, cmp_x);
            fprintf(af.f, "%s\"", blocks++ ? "\n\n" : "");
            if (lp >= 0) fputs(sw.param[lp].values[l], af.f);
            else fputs(metric, af.f);
            fputs("\"\n", af.f);
            for (long i = 0; i < n; i++) {
                fprintf(af.f, "%.17g %.17g\n", order[i]->x, order[i]->y);
                if (order[i]->x < xmin) xmin = order[i]->x;
                if (order[i]->x > xmax) xmax = order[i]->x;
            }
        }
        if ((s = atomic_commit(&af)) != QKV_OK) {
            cli_error("sweep: %s", qkv_last_error());
            code = cli_exit_for(s);
        }
    }
    if (code == EXIT_OK) {
        char xlabel[64], out[32], nblocks[16];
        snprintf(nblocks, sizeof nblocks, "%d", blocks);
        config_key(x_is_dk ? "d_k" : sw.param[xp].name, xlabel, sizeof xlabel);
        snprintf(out, sizeof out, "sweep.%s", format);
        const char *logx = xmin > 0 && xmax >= 8 * xmin ? "log" : "linear";
        const char *lines_label = lp >= 0 ? sw.param[lp].name : "";
        bool no_gnuplot;
        code = cli_gnuplot("sweep.gp", dir, out, format, 6,
                              (const char *[]){"sweep_plot.dat", xlabel, metric, lines_label, logx,
                                               nblocks},
                              &no_gnuplot);
        if (code == EXIT_OK && !quiet) printf("sweep: wrote %s/%s\n", dir, out);
    }
    free(order);
    free(data);
    for (long c = 0; c < sw.ncells; c++) {
        free(cells[c].name);
        cJSON_Delete(cells[c].summary);
        if (cells[c].values) cli_free_args(sw.nparams, cells[c].values);
    }
    free(cells);
    sweep_free(&sw);
    return code;
}

/* ---- the command ---- */

typedef struct {
    char *grid_text[SWEEP_MAX_PARAMS]; /* the --grid values (argv's) */
    int ngrid;
    const char *grid_file, *out, *emit, *collect, *x, *lines, *metric, *format;
    long jobs;
    bool quiet;
} sweep_args;

/* --grid, which may be given up to SWEEP_MAX_PARAMS times */
static bool add_grid_option(const char *text, void *dest) {
    sweep_args *a = dest;
    if (a->ngrid == SWEEP_MAX_PARAMS) {
        cli_error("sweep: more than %d --grid options", SWEEP_MAX_PARAMS);
        return false;
    }
    a->grid_text[a->ngrid++] = (char *)text;
    return true;
}

int cmd_sweep(int argc, char **argv, bool parse_only) {
    static const char *const emits[] = {"parallel", "slurm", NULL};
    static const char *const formats[] = {"png", "svg", NULL};
    sweep_args a = {0};
    int emit_to = -1, format = 0, metric = 0;
    cli_option options[] = {
        {.kind = CLI_TEXT, .help = "the grid:"},
        {"grid", CLI_CUSTOM, &a, .parse = add_grid_option, .arg = "SPEC",
         .help = "NAME=V1,V2,... separated by spaces; NAME is any train option\n"
                 "(d-model or d_model); flags (residual, causal) take true,false.\n"
                 "May be given more than once"},
        {"grid-file", CLI_STRING, &a.grid_file, .arg = "FILE",
         .help = "the same from a file; '#' starts a comment"},
        {"out", CLI_STRING, &a.out, .arg = "DIR",
         .help = "the sweep directory: sweep.json and one directory per cell"},
        {.kind = CLI_TEXT,
         .help = "  -- OPTIONS          train options every cell shares, e.g. -- --task lookup --steps 300\n"
                 "running (one of):"},
        {"jobs", CLI_INT, &a.jobs, 1, 1024, .arg = "N",
         .help = "run the cells here, N at a time, one thread each (default: one per\n"
                 "core); cells already done are skipped, failed ones run again"},
        {"emit", CLI_CHOICE, &emit_to, .choices = emits, .arg = "parallel",
         .help = "write DIR/jobs.txt, one train command per line, for GNU parallel:\n"
                 "parallel --jobs N < DIR/jobs.txt (runs nothing)"},
        {.kind = CLI_TEXT,
         .help = "  --emit slurm        write DIR/sweep.sbatch, a Slurm job array with one index per cell and\n"
                 "                      --threads from SLURM_CPUS_PER_TASK: sbatch DIR/sweep.sbatch (runs\n"
                 "                      nothing)\n"
                 "collecting:"},
        {"collect", CLI_STRING, &a.collect, .arg = "DIR",
         .help = "gather every cell's summary.json into DIR/sweep.csv and DIR/sweep.md\n"
                 "(printed too), and draw DIR/sweep.png: a metric against a parameter,\n"
                 "one line per value of another"},
        {"x", CLI_STRING, &a.x, .arg = "PARAM",
         .help = "the x axis: a grid option, or d_k (d_model/heads) (default: the\n"
                 "grid's first option)"},
        {"lines", CLI_STRING, &a.lines, .arg = "PARAM",
         .help = "one line per value of this grid option (default: the next one)"},
        {"metric", CLI_CHOICE, &metric, .choices = metric_names, .arg = "M",
         .help = "heldout_acc, heldout_loss, attention_mass, loss, train_acc or\n"
                 "wall_seconds (default heldout_acc)"},
        {"format", CLI_CHOICE, &format, .choices = formats, .arg = "F",
         .help = "png or svg (default png)"},
        {"quiet", CLI_FLAG, &a.quiet, .help = "print nothing but errors"},
        {"help", CLI_HELP, .help = "show this help"},
        {0}};
    const cli_command cmd = {
        .name = "sweep",
        .usage = "usage: qkv sweep --grid 'NAME=V1,V2 ...' --out DIR [options] [-- TRAIN OPTIONS]\n"
                 "       qkv sweep --collect DIR [--x PARAM] [--lines PARAM] [--metric M] [--format F]\n"
                 "Trains one model per cell of a grid of train options (every combination of the values),\n"
                 "each into its own directory DIR/NAME1=V1,NAME2=V2; or gathers the results of a sweep.\n"
                 "\n",
        .options = options,
        .column = 22,
        .epilog = "\n"
                  "Exit codes: 0 done, 1 a cell failed or gnuplot is missing or failed, 2 bad grid or option,\n"
                  "3 a file or directory cannot be read or written, 4 a sweep.json or summary.json is corrupt.\n",
        .operands = true,
        .stop_at_operand = true}; /* everything after -- is train's */
    int rest; /* argv[rest]: the first argument that is not sweep's */
    int parsed = cli_parse_options(&cmd, argc, argv, &rest);
    if (parsed != CLI_RUN) return parsed;
    a.emit = emit_to >= 0 ? emits[emit_to] : NULL;
    a.format = formats[format];
    a.metric = metric_names[metric];
    bool jobs_set = cli_option_given(&cmd, "jobs");
    bool dashes = rest > 0 && rest <= argc && !strcmp(argv[rest - 1], "--");
    if (rest < argc && !dashes) {
        cli_error("sweep: unexpected argument '%s' (train options go after --)", argv[rest]);
        return EXIT_USAGE;
    }
    if (a.collect) {
        if (a.ngrid || a.grid_file || a.out || a.emit || jobs_set || rest < argc) {
            cli_error("sweep: --collect DIR goes alone (with --x, --lines, --metric, --format, "
                      "--quiet)");
            return EXIT_USAGE;
        }
        return parse_only ? CLI_RUN : collect(a.collect, a.x, a.lines, a.metric, a.format, a.quiet);
    }
    if (a.x || a.lines) {
        cli_error("sweep: --x and --lines go with --collect");
        return EXIT_USAGE;
    }
    if (!a.ngrid && !a.grid_file) {
        cli_error("sweep: give the grid: --grid 'NAME=V1,V2 ...' or --grid-file FILE");
        return EXIT_USAGE;
    }
    if (!a.out) {
        cli_error("sweep: --out DIR is required (the sweep directory)");
        return EXIT_USAGE;
    }
    if (a.emit && jobs_set) {
        cli_error("sweep: --jobs runs the cells here; --emit only writes a script");
        return EXIT_USAGE;
    }
    if (strlen(a.out) > DIR_MAX) {
        cli_error("sweep: %.60s...: path too long", a.out);
        return EXIT_IO;
    }
    sweep sw = {.nfixed = argc - rest, .fixed = argv + rest, .dir = a.out};
    int code = EXIT_OK;
    for (int i = 0; i < a.ngrid && code == EXIT_OK; i++) {
        char *text = strdup(a.grid_text[i]);
        code = text ? add_grid_text(&sw, text, "--grid", false) : EXIT_NOMEM;
        free(text);
    }
    if (code == EXIT_OK && a.grid_file && !parse_only) {
        char *text = read_text(a.grid_file, "a grid file", &code);
        if (text) code = add_grid_text(&sw, text, a.grid_file, true);
        free(text);
    }
    if (code == EXIT_OK && (a.ngrid || !parse_only)) code = check_grid(&sw);
    if (code == EXIT_OK && !parse_only) code = check_cells(&sw);
    if (code == EXIT_OK && a.emit && !emit_printable(&sw)) code = EXIT_USAGE;
    if (code != EXIT_OK || parse_only) {
        sweep_free(&sw);
        return code == EXIT_OK ? CLI_RUN : code;
    }
    if (!cli_make_dirs("sweep: ", a.out)) code = EXIT_IO;
    if (code == EXIT_OK) code = write_sweep_json(&sw);
    if (code == EXIT_OK) {
        long jobs = a.jobs;
        if (!jobs_set) {
            long cores = sysconf(_SC_NPROCESSORS_ONLN);
            jobs = cores >= 1 ? cores : 1;
        }
        code = a.emit ? emit(&sw, a.emit, a.quiet) : run_local(&sw, jobs, a.quiet);
    }
    sweep_free(&sw);
    return code;
}
