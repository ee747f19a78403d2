/* cmd_gradcheck.c - `qkv gradcheck`: every op's backward pass against finite differences. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    double tol;
    uint64_t seed;
    bool json;
} gradcheck_args;

static int gradcheck_parse(int argc, char **argv, gradcheck_args *a) {
    *a = (gradcheck_args){.tol = 1e-6, .seed = 1};
    cli_option options[] = {
        {"tol", CLI_DOUBLE, &a->tol, .lo = 0, .hi = 1, .lo_open = true, .arg = "X",
         .help = "largest relative error allowed (default 1e-6)"},
        {"seed", CLI_U64, &a->seed, .arg = "S", .help = "seed of the random inputs (default 1)"},
        {"json", CLI_FLAG, &a->json, .help = "print one JSON object instead of a table"},
        CLI_NO_SELFTEST_ROW,
        {"help", CLI_HELP, .help = "show this help"},
        {0}};
    const cli_command cmd = {
        .name = "gradcheck",
        .usage = "usage: qkv gradcheck [options]\n"
                 "Checks the backward pass of every op against central finite differences in f64.\n"
                 "\n",
        .options = options,
        .column = 15,
        .epilog = "\nexit: 0 every op within --tol, 1 one is not, 6 out of memory (nothing known of\n"
                  "the op, never reported as a failure)\n"};
    return cli_parse_options(&cmd, argc, argv, NULL);
}

static int gradcheck_run(const gradcheck_args *a) {
    double tol = a->tol;
    uint64_t seed = a->seed;
    bool json = a->json;
    int n = qkv_gradcheck_count();
    bool all = true;
    /* the JSON is printed once every op has answered: an op without memory leaves none */
    qkv_gradcheck_result *done = json ? calloc((size_t)n, sizeof *done) : NULL;
    if (json && !done) {
        cli_error("gradcheck: out of memory");
        return EXIT_NOMEM;
    }
    if (!json)
        printf("%-14s %-6s %-11s %-11s %-6s  %s\n", "op", "cases", "max_abs_err", "max_rel_err",
               "result", "shapes tried");
    for (int i = 0; i < n; i++) {
        qkv_gradcheck_result r = qkv_gradcheck_run(i, tol, seed);
        if (r.out_of_memory) {
            fflush(stdout);
            cli_error("gradcheck: out of memory checking %s", r.op);
            free(done);
            return EXIT_NOMEM;
        }
        all = all && r.passed;
        if (json) {
            done[i] = r;
            continue;
        }
        printf("%-14s %-6d %-11.3e %-11.3e %-6s  %s\n", r.op, r.cases, r.max_abs_err,
               r.max_rel_err, r.passed ? "pass" : "FAIL", r.shapes);
        fflush(stdout);
    }
    if (json) {
        printf("{\"ops\":[");
        for (int i = 0; i < n; i++)
            printf("%s{\"op\":\"%s\",\"cases\":%d,\"shapes\":\"%s\",\"max_abs_err\":%.3e,"
                   "\"max_rel_err\":%.3e,\"passed\":%s}",
                   i ? "," : "", done[i].op, done[i].cases, done[i].shapes, done[i].max_abs_err,
                   done[i].max_rel_err, done[i].passed ? "true" : "false");
        printf("],\"tol\":%g,\"passed\":%s}\n", tol, all ? "true" : "false");
        free(done);
    }
    else printf("%s: every op within a relative error of %g\n", all ? "PASS" : "FAIL", tol);
    return all ? EXIT_OK : EXIT_FAILED;
}

int cmd_gradcheck(int argc, char **argv, bool parse_only) {
    gradcheck_args a;
    int code = gradcheck_parse(argc, argv, &a);
    return code != CLI_RUN || parse_only ? code : gradcheck_run(&a);
}
