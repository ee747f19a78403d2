/* cmd_sweep.c - `qkv sweep`: one `qkv train` per cell of a grid of train options, run here N at a
 * time, or written out for GNU parallel or a Slurm job array; and `qkv sweep --collect`, which
 * gathers the cells' summary.json files into a CSV, a markdown table and a gnuplot figure.
 * The grid, the runs and the tables are src/sweep/ (sweep.h); docs/sweeps.md. */
#include "cli.h"
#include "io/io.h"
#include "sweep/sweep.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* What a train option takes, as `qkv train` reads it. */
static sweep_opt_kind train_option_kind(const char *name) {
    switch (cli_train_option(name)) {
    case TRAIN_OPT_UNKNOWN: return SWEEP_OPT_UNKNOWN;
    case TRAIN_OPT_FLAG: return SWEEP_OPT_FLAG;
    case TRAIN_OPT_NUMBER: return SWEEP_OPT_NUMBER;
    default: return SWEEP_OPT_VALUE;
    }
}

/* The exit code of a sweep call, after its one line. */
static int sweep_exit(sweep_status s) {
    if (s == QKV_OK) return EXIT_OK;
    if (s == SWEEP_NOT_STARTED) return EXIT_IO; /* its line was printed when it happened */
    cli_error("%s", qkv_last_error());
    return s == SWEEP_FAILED ? EXIT_FAILED : cli_exit_for(s);
}

/* Every cell's train command line, checked as `qkv train` checks it (values, --config), with
 * the cell named in the message. */
static int check_cells(const sweep *sw) {
    int code = EXIT_OK;
    for (long c = 0; c < sw->ncells && code == EXIT_OK; c++) {
        char name[SWEEP_CELL_NAME_MAX + 64], context[SWEEP_CELL_NAME_MAX + 80];
        sweep_cell_name(sw, c, name, sizeof name);
        const char **v;
        int n;
        if (!sweep_cell_words(sw, c, &v, &n)) {
            cli_error("out of memory");
            return EXIT_NOMEM;
        }
        char *out = sweep_path_join(sw->dir, name);
        v[n++] = "--out";
        v[n++] = out ? out : name;
        v[n] = NULL;
        snprintf(context, sizeof context, "sweep: cell %s", name);
        cli_error_context(context);
        int check = cli_train_check(n, (char **)v);
        cli_error_context(NULL);
        if (check == EXIT_OK) { /* train printed its help: -h or --help came after -- */
            cli_error("sweep: --help after -- is not an option to train with");
            code = EXIT_USAGE;
        } else if (check != CLI_RUN) {
            code = check;
        }
        free(out);
        free(v);
    }
    return code;
}

/* The lines of a local run: its plan, and one line about each cell that ended (with its
 * held-out accuracy and attention mass) or could not start. */
static void report(sweep_event event, const sweep *sw, const sweep_progress *p, long cell,
                   const char *cell_dir, int status, void *user) {
    bool quiet = *(const bool *)user;
    if (event == SWEEP_CELL_NOT_STARTED) {
        cli_error("%s", qkv_last_error());
        return;
    }
    if (quiet) return;
    if (event == SWEEP_PLANNED) {
        char resumed[64] = "";
        if (p->resumed)
            snprintf(resumed, sizeof resumed, " (%ld resumed from their checkpoints)", p->resumed);
        printf("sweep: %ld cells in %s: %ld done before, %ld to run%s, %ld at a time\n", p->cells,
               sw->dir, p->done_before, p->to_run, resumed, p->at_once);
        fflush(stdout);
        return;
    }
    int done = (int)p->finished, total = (int)p->to_run;
    char name[SWEEP_CELL_NAME_MAX + 64];
    sweep_cell_name(sw, cell, name, sizeof name);
    cJSON *summary = NULL;
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && sweep_cell_done(cell_dir, &summary);
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
               WEXITSTATUS(status), cell_dir);
    else
        printf("[%d/%d] %s: FAILED, killed by signal %d; see %s/train.log\n", done, total, name,
               WIFSIGNALED(status) ? WTERMSIG(status) : 0, cell_dir);
    fflush(stdout);
    cJSON_Delete(summary);
}

/* Runs the cells here, and says how it went. */
static int run_here(const sweep *sw, long jobs, bool quiet) {
    sweep_progress p;
    sweep_status s = sweep_run_here(sw, jobs, report, &quiet, &p);
    if (s != QKV_OK) return sweep_exit(s);
    if (!quiet)
        printf("sweep: %ld cells run, %ld failed; tabulate and plot with: qkv sweep --collect %s\n",
               p.finished, p.failed, sw->dir);
    if (p.failed && p.failed_nomem == p.failed) { /* the sweep's own lack of memory */
        cli_error("sweep: %ld of %ld cells ran out of memory (each one's train.log says how); "
                  "run the same command again, with more memory, to retry them", p.failed,
                  p.to_run);
        return EXIT_NOMEM;
    }
    if (p.failed) {
        cli_error("sweep: %ld of %ld cells failed (each one's train.log says why); run the same "
                  "command again to retry them", p.failed, p.to_run);
        return EXIT_FAILED;
    }
    return EXIT_OK;
}

/* Writes the job list or the Slurm script, and says where. */
static int emit(const sweep *sw, const char *kind, bool quiet) {
    char path[SWEEP_DIR_MAX + 64];
    qkv_status s = sweep_emit(sw, kind, path, sizeof path);
    if (s != QKV_OK) return sweep_exit(s);
    if (!quiet)
        printf(!strcmp(kind, "slurm")
                   ? "sweep: wrote %s (%ld cells); submit it with: sbatch %s\n"
                   : "sweep: wrote %s (%ld cells); run them with: parallel --jobs N < %s\n",
               path, sw->ncells, path);
    return EXIT_OK;
}

/* Gathers the results: prints the table, then draws the figure. */
static int collect(const char *dir, const char *x_name, const char *lines_name,
                   const char *average, const char *metric, const char *format, bool quiet) {
    /* the tables, the figure's data and the figure: each checked before any is written */
    char image[16];
    snprintf(image, sizeof image, "sweep.%s", format);
    char *files[4] = {sweep_path_join(dir, "sweep.csv"), sweep_path_join(dir, "sweep.md"),
                      sweep_path_join(dir, "sweep_plot.dat"), sweep_path_join(dir, image)};
    int code = files[0] && files[1] && files[2] && files[3] ? EXIT_OK : EXIT_NOMEM;
    if (code == EXIT_NOMEM) cli_error("out of memory");
    struct stat sb;
    if (code == EXIT_OK && stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode)) /* else: sweep_collect */
        code = cli_check_outputs("sweep", (cli_output[]){{"collect", files[0]},
                                                         {"collect", files[1]},
                                                         {"collect", files[2]},
                                                         {"collect", files[3]},
                                                         {0}},
                                 NULL);
    for (int i = 0; i < 4; i++) free(files[i]);
    if (code != EXIT_OK) return code;
    sweep_collected got;
    sweep_status s =
        sweep_collect(dir, x_name, lines_name, average, metric, train_option_kind, &got);
    if (got.tables && !quiet) {
        char *path = sweep_path_join(dir, "sweep.md");
        FILE *f = NULL;
        if (path && io_fopen_regular(path, &f) != QKV_OK) f = NULL;
        for (int ch; f && (ch = fgetc(f)) != EOF;) putchar(ch);
        if (f) fclose(f);
        printf("sweep: wrote %s/sweep.csv and %s/sweep.md\n", dir, dir);
        free(path);
    }
    if (s != QKV_OK) return sweep_exit(s);
    if (!got.figure) { /* on stderr, as every note: stdout is the table */
        fprintf(stderr, "sweep: no figure: no option of the grid is a number (--x d_k plots "
                "against d_k)\n");
        return EXIT_OK;
    }
    if (got.nleft)
        fprintf(stderr, "sweep: %ld cell%s left out of the figure: %s\n", got.nleft,
                got.nleft == 1 ? "" : "s", got.left_out);
    char out[32], nblocks[16], band[128] = "";
    snprintf(nblocks, sizeof nblocks, "%d", got.blocks);
    snprintf(out, sizeof out, "sweep.%s", format);
    if (got.averaged[0]) { /* the legend's name of the band */
        if (got.least_averaged == got.most_averaged)
            snprintf(band, sizeof band, "mean of %ld %ss, band: min to max", got.most_averaged,
                     got.averaged);
        else
            snprintf(band, sizeof band, "mean of %ld to %ld %ss, band: min to max",
                     got.least_averaged, got.most_averaged, got.averaged);
    }
    bool no_gnuplot;
    code = cli_gnuplot("sweep.gp", dir, out, format, 7,
                       (const char *[]){"sweep_plot.dat", got.xlabel, metric, got.lines,
                                        got.logx ? "log" : "linear", nblocks, band},
                       &no_gnuplot);
    if (code == EXIT_OK && !quiet) printf("sweep: wrote %s/%s%s%s\n", dir, out,
                                          band[0] ? ": " : "", band);
    return code;
}

/* ---- the command ---- */

typedef struct {
    char *grid_text[SWEEP_MAX_PARAMS]; /* the --grid values (argv's) */
    int ngrid;
    const char *grid_file, *out, *emit, *collect, *x, *lines, *average, *metric, *format;
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
                 "grid's first option whose values are numbers)"},
        {"lines", CLI_STRING, &a.lines, .arg = "PARAM",
         .help = "one line per value of this grid option (default: the next one)"},
        {"average", CLI_STRING, &a.average, .arg = "PARAM",
         .help = "one point per group of cells that differ only in this grid option\n"
                 "(--average seed): their mean, with a band from their minimum to\n"
                 "their maximum"},
        {"metric", CLI_CHOICE, &metric, .choices = sweep_metric_names, .arg = "M",
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
                 "       qkv sweep --collect DIR [--x PARAM] [--lines PARAM] [--average PARAM] [--metric M]\n"
                 "                       [--format F]\n"
                 "Trains one model per cell of a grid of train options (every combination of the values),\n"
                 "each into its own directory DIR/NAME1=V1,NAME2=V2; or gathers the results of a sweep.\n"
                 "\n",
        .options = options,
        .column = 22,
        .epilog = "\n"
                  "Exit codes: 0 done, 1 a cell failed or gnuplot is missing or failed, 2 bad grid or option,\n"
                  "3 a file or directory cannot be read or written, 4 a sweep.json or summary.json is corrupt,\n"
                  "6 out of memory (every cell that failed ran out of it).\n",
        .operands = true,
        .stop_at_operand = true}; /* everything after -- is train's */
    int rest; /* argv[rest]: the first argument that is not sweep's */
    int parsed = cli_parse_options(&cmd, argc, argv, &rest);
    if (parsed != CLI_RUN) return parsed;
    a.emit = emit_to >= 0 ? emits[emit_to] : NULL;
    a.format = formats[format];
    a.metric = sweep_metric_names[metric];
    bool jobs_set = cli_option_given(&cmd, "jobs");
    bool dashes = rest > 0 && rest <= argc && !strcmp(argv[rest - 1], "--");
    if (rest < argc && !dashes) {
        cli_error("sweep: unexpected argument '%s' (train options go after --)", argv[rest]);
        return EXIT_USAGE;
    }
    if (a.collect) {
        if (a.ngrid || a.grid_file || a.out || a.emit || jobs_set || rest < argc) {
            cli_error("sweep: --collect DIR goes alone (with --x, --lines, --average, --metric, "
                      "--format, --quiet)");
            return EXIT_USAGE;
        }
        return parse_only ? CLI_RUN
                          : collect(a.collect, a.x, a.lines, a.average, a.metric, a.format, a.quiet);
    }
    if (a.x || a.lines || a.average) {
        cli_error("sweep: --x, --lines and --average go with --collect");
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
    if (strlen(a.out) > SWEEP_DIR_MAX) {
        cli_error("sweep: %.60s...: path too long", a.out);
        return EXIT_IO;
    }
    sweep sw = {.nfixed = argc - rest, .fixed = argv + rest, .dir = a.out,
                .option_kind = train_option_kind};
    qkv_status s = QKV_OK;
    for (int i = 0; i < a.ngrid && s == QKV_OK; i++) {
        char *text = strdup(a.grid_text[i]);
        s = text ? sweep_add_grid_text(&sw, text, "--grid", false)
                 : qkv_fail(QKV_ERR_NOMEM, "out of memory");
        free(text);
    }
    if (s == QKV_OK && a.grid_file && !parse_only) {
        char *text = sweep_read_text(a.grid_file, "a grid file", &s);
        if (text) s = sweep_add_grid_text(&sw, text, a.grid_file, true);
        free(text);
    }
    if (s == QKV_OK && (a.ngrid || !parse_only)) s = sweep_check_grid(&sw);
    int code = sweep_exit(s);
    if (code == EXIT_OK && !parse_only) code = check_cells(&sw);
    if (code == EXIT_OK && a.emit) code = sweep_exit(sweep_check_printable(&sw));
    if (code != EXIT_OK || parse_only) {
        sweep_free(&sw);
        return code == EXIT_OK ? CLI_RUN : code;
    }
    char created[SWEEP_DIR_MAX + 1]; /* the first directory this sweep made, or "" */
    qkv_status made = io_make_dirs_noting(a.out, created, sizeof created);
    if (made != QKV_OK) {
        cli_error("sweep: %s", qkv_last_error());
        code = cli_exit_for(made);
    }
    if (code == EXIT_OK) code = sweep_exit(sweep_write_json(&sw));
    if (code == EXIT_OK) {
        long jobs = a.jobs;
        if (!jobs_set) {
            long cores = sysconf(_SC_NPROCESSORS_ONLN);
            jobs = cores >= 1 ? cores : 1;
        }
        code = a.emit ? emit(&sw, a.emit, a.quiet) : run_here(&sw, jobs, a.quiet);
    }
    /* A sweep that fails leaves no empty or half-made --out of its own making: sweep.json and
     * the script go, with the directories it made, unless a cell ran there (its directory
     * says how it ended, and the next run of the sweep goes on from it). */
    if (code != EXIT_OK && made == QKV_OK)
        io_unmake_dirs(a.out, created,
                       (const char *const[]){"sweep.json", "jobs.txt", "sweep.sbatch", NULL});
    sweep_free(&sw);
    return code;
}
