/* main.c - the qkv executable: the command line itself is cli.c. */
#include "cli.h"
#include "explain_cli.h"

int main(int argc, char **argv) {
    int code = cli_guard_install();
    if (code != EXIT_OK) return code;
    cli_wrap_terminal(); /* lines wrapped at spaces on a terminal (terminal.c) */
    explain_cli_json_hooks(); /* no JSON with an item missing for lack of memory */
    return cli_main(argc, argv, false);
}
