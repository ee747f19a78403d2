/* cmd_selftest.c - `qkv selftest`: every SIMD path this CPU runs against the plain C path, bit
 * for bit (train/selftest.h), in a few seconds. Exit 0 when every path agrees, 1 when one does
 * not (its check failed, as for gradcheck). */
#include "cli.h"
#include "train/selftest.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    bool json;
} selftest_args;

static int selftest_parse(int argc, char **argv, selftest_args *a) {
    *a = (selftest_args){0};
    cli_option options[] = {
        {"json", CLI_FLAG, &a->json,
         .help = "print one JSON object: {\"paths\": [{\"name\", \"native\", \"same_bits\",\n"
                 "\"first_difference\"}], \"seconds\"}"},
        {"help", CLI_HELP, .help = "show this help"},
        {0}};
    const cli_command cmd = {
        .name = "selftest",
        .usage = "usage: qkv selftest [--json]\n"
                 "Runs every SIMD path this CPU runs (and this build's emulated ones) against the\n"
                 "plain C path, bit for bit: the matrix products in every branch and transpose,\n"
                 "softmax, cross-entropy, the fused attention forward and backward, the\n"
                 "optimizers, the exp, and 20 training steps of a 2-layer, 2-head model. One\n"
                 "line per path: \"same bits\", or the first kernel and shape that differs.\n"
                 "\n",
        .options = options,
        .column = 12,
        .epilog = "\nexit: 0 every path gives the plain C path's bits, 1 one does not (qkv then\n"
                  "falls back from it at start-up: docs/errors.md), 6 out of memory\n"};
    return cli_parse_options(&cmd, argc, argv, NULL);
}

static void print_path(const selftest_path *p, void *arg) {
    if (*(const bool *)arg) return; /* JSON: printed at the end */
    const char *how = p->native ? "native" : "emulated over SIMDe";
    if (!strcmp(p->name, "scalar")) /* the reference */
        printf("selftest: %-7s the reference (plain C)\n", p->name);
    else if (p->same_bits)
        printf("selftest: %-7s same bits (%s; %d kernel cases, %d training steps)\n", p->name,
               how, p->cases, SELFTEST_STEPS);
    else
        printf("selftest: %-7s DIFFERS (%s): %s\n", p->name, how, p->first_difference);
    fflush(stdout);
}

static int print_json(const selftest_result *r) {
    cJSON *o = cJSON_CreateObject(), *paths = cJSON_AddArrayToObject(o, "paths");
    for (int i = 0; i < r->npaths; i++) {
        const selftest_path *p = &r->path[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", p->name);
        cJSON_AddBoolToObject(e, "native", p->native);
        cJSON_AddBoolToObject(e, "same_bits", p->same_bits);
        if (p->same_bits) cJSON_AddNullToObject(e, "first_difference");
        else cJSON_AddStringToObject(e, "first_difference", p->first_difference);
        cJSON_AddNumberToObject(e, "kernel_cases", p->cases);
        cJSON_AddItemToArray(paths, e);
    }
    cJSON_AddNumberToObject(o, "training_steps", SELFTEST_STEPS);
    cJSON_AddBoolToObject(o, "same_bits", selftest_passed(r));
    cJSON_AddNumberToObject(o, "seconds", r->seconds);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!text) {
        cli_error("selftest: out of memory for the JSON");
        return EXIT_NOMEM;
    }
    printf("%s\n", text);
    cJSON_free(text);
    return EXIT_OK;
}

static int selftest_exec(const selftest_args *a) {
    cli_set_threads(0); /* as many threads as can start: OpenMP's own failure would exit 1 */
    selftest_result r;
    bool json = a->json;
    qkv_status s = selftest_run(&r, print_path, &json);
    if (s != QKV_OK) {
        cli_error("selftest: %s", qkv_last_error());
        return cli_exit_for(s);
    }
    if (json) {
        int code = print_json(&r);
        if (code != EXIT_OK) return code;
    } else {
        printf("selftest: %s, %.2f s\n",
               selftest_passed(&r) ? "every path gives the plain C path's bits"
                                   : "a path differs from the plain C path",
               r.seconds);
    }
    return selftest_passed(&r) ? EXIT_OK : EXIT_FAILED;
}

int cmd_selftest(int argc, char **argv, bool parse_only) {
    selftest_args a;
    int code = selftest_parse(argc, argv, &a);
    return code != CLI_RUN || parse_only ? code : selftest_exec(&a);
}
