/* cmd_gradcheck.c - `qkv gradcheck`: every op's backward pass against finite differences. */
#include "cli.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static const char usage[] =
    "usage: qkv gradcheck [options]\n"
    "Checks the backward pass of every op against central finite differences in f64.\n"
    "\n"
    "  --tol X      largest relative error allowed (default 1e-6)\n"
    "  --seed S     seed of the random inputs (default 1)\n"
    "  --json       print one JSON object instead of a table\n"
    "  -h, --help   show this help\n";

typedef struct {
    double tol;
    uint64_t seed;
    bool json;
} gradcheck_args;

enum { OPT_TOL = 256, OPT_SEED, OPT_JSON };

static int gradcheck_parse(int argc, char **argv, gradcheck_args *a) {
    static const struct option opts[] = {{"tol", required_argument, 0, OPT_TOL},
                                         {"seed", required_argument, 0, OPT_SEED},
                                         {"json", no_argument, 0, OPT_JSON},
                                         {"help", no_argument, 0, CLI_OPT_HELP},
                                         {0, 0, 0, 0}};
    *a = (gradcheck_args){.tol = 1e-6, .seed = 1};
    cli_getopt_reset();
    for (int c; (c = getopt_long(argc, argv, ":h", opts, NULL)) != -1;) {
        bool ok = true;
        switch (c) {
        case OPT_TOL: ok = cli_parse_double("tol", optarg, 0, 1, true, &a->tol); break;
        case OPT_SEED: ok = cli_parse_u64("seed", optarg, &a->seed); break;
        case OPT_JSON: a->json = true; break;
        case 'h':
        case CLI_OPT_HELP: fputs(usage, stdout); return EXIT_OK;
        default: return cli_bad_option("gradcheck", argv, c);
        }
        if (!ok) return EXIT_USAGE;
    }
    if (optind < argc) {
        cli_error("gradcheck: unexpected argument '%s'", argv[optind]);
        return EXIT_USAGE;
    }
    return CLI_RUN;
}

static int gradcheck_run(const gradcheck_args *a) {
    double tol = a->tol;
    uint64_t seed = a->seed;
    bool json = a->json;
    int n = qkv_gradcheck_count();
    bool all = true;
    if (json) printf("{\"ops\":[");
    else printf("%-14s %-6s %-11s %-11s %-6s  %s\n", "op", "cases", "max_abs_err", "max_rel_err",
                "result", "shapes tried");
    for (int i = 0; i < n; i++) {
        qkv_gradcheck_result r = qkv_gradcheck_run(i, tol, seed);
        all = all && r.passed;
        if (json)
            printf("%s{\"op\":\"%s\",\"cases\":%d,\"shapes\":\"%s\",\"max_abs_err\":%.3e,"
                   "\"max_rel_err\":%.3e,\"passed\":%s}",
                   i ? "," : "", r.op, r.cases, r.shapes, r.max_abs_err, r.max_rel_err,
                   r.passed ? "true" : "false");
        else
            printf("%-14s %-6d %-11.3e %-11.3e %-6s  %s\n", r.op, r.cases, r.max_abs_err,
                   r.max_rel_err, r.passed ? "pass" : "FAIL", r.shapes);
        fflush(stdout);
    }
    if (json) printf("],\"tol\":%g,\"passed\":%s}\n", tol, all ? "true" : "false");
    else printf("%s: every op within a relative error of %g\n", all ? "PASS" : "FAIL", tol);
    return all ? EXIT_OK : EXIT_FAILED;
}

int cmd_gradcheck(int argc, char **argv, bool parse_only) {
    gradcheck_args a;
    int code = gradcheck_parse(argc, argv, &a);
    return code != CLI_RUN || parse_only ? code : gradcheck_run(&a);
}
