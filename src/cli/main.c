/* main.c - the qkv executable: the command line itself is cli.c. */
#include "cli.h"

int main(int argc, char **argv) {
    int code = cli_guard_install();
    if (code != EXIT_OK) return code;
    cli_wrap_terminal(); /* lines wrapped at spaces on a terminal (terminal.c) */
    return cli_main(argc, argv, false);
}
