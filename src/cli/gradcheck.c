/* gradcheck.c - `qkv gradcheck`: every op's backward pass against finite differences. */
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

int cmd_gradcheck(int argc, char **argv) {
    double tol = 1e-6;
    uint64_t seed = 1;
    bool json = false;
    static const struct option opts[] = {{"tol", required_argument, 0, 't'},
                                         {"seed", required_argument, 0, 's'},
                                         {"json", no_argument, 0, 'j'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, ":h", opts, NULL)) != -1;) {
        switch (c) {
        case 't':
            if (!cli_parse_double("tol", optarg, 0, 1, true, &tol)) return EXIT_USAGE;
            break;
        case 's':
            if (!cli_parse_u64("seed", optarg, &seed)) return EXIT_USAGE;
            break;
        case 'j': json = true; break;
        case 'h': fputs(usage, stdout); return EXIT_OK;
        case ':': cli_error("gradcheck: %s needs a value", argv[optind - 1]); return EXIT_USAGE;
        default: cli_error("gradcheck: unknown option '%s' (see qkv gradcheck --help)", argv[optind - 1]); return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        cli_error("gradcheck: unexpected argument '%s'", argv[optind]);
        return EXIT_USAGE;
    }
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
