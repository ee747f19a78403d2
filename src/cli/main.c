/* main.c - the qkv executable: the command line itself is cli.c. */
#include "cli.h"

int main(int argc, char **argv) { return cli_main(argc, argv, false); }
