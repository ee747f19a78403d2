/* main.c - the qkv executable: the command line itself is cli.c. */
#include "cli.h"

int main(int argc, char **argv) {
    cli_guard_install();
    cli_wrap_terminal(); /* lines wrapped at spaces on a terminal (terminal.c) */
    return cli_main(argc, argv, false);
}
