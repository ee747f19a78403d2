/* fuzz_cli.c - libFuzzer target: the command line of every qkv command.
 *
 * The input is a command line, one argument per line: the first line is the command (train,
 * eval, grads, bench, gradcheck, plot, study, or anything else), the rest its arguments, any
 * bytes but a newline. cli_main runs with parse_only: each command reads and checks its
 * options (printing its help or one error line) and stops where it would start to work, so
 * nothing is trained, read or written. Whatever the arguments, the parse must not crash, leak
 * or read out of bounds, and must return CLI_RUN or an exit code below 128.
 *
 * Built with -fsanitize=fuzzer,address,undefined under QKV_FUZZ=ON; replay.c runs the seed
 * corpus (tests/fuzz/corpus/cli) through it in the normal build. */
#include "cli/cli.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    char *argv[MAX_ARGS + 2];
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    int argc = 0;
    argv[argc++] = "qkv";
    /* an argument may hold a NUL byte: it then ends there, as it would in a real argv */
    for (char *p = text, *end = text + size; argc <= MAX_ARGS && p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (nl) *nl = '\0';
        argv[argc++] = p;
        if (!nl) break;
        p = nl + 1;
    }
    argv[argc] = NULL;
    int code = cli_main(argc, argv, true);
    if (code != CLI_RUN && (code < 0 || code >= 128)) __builtin_trap();
    free(text);
    return 0;
}
