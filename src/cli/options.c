/* options.c - the one option parser of the qkv commands: each command describes its options in
 * a table (cli_option, cli.h), and this file reads argv by it and writes its help from it. */
#include "cli.h"

#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* getopt_long's value for row i of a table: 256 and up, so that bad_option tells a long
 * option from a letter; -h is the one letter. */
#define ROW_VALUE(i) (256 + (i))
#define MAX_OPTIONS 64

static bool takes_value(const cli_option *o) {
    return o->kind != CLI_FLAG && o->kind != CLI_SET && o->kind != CLI_HELP;
}

/* getopt_long's table of cmd's options, ended by a zero row; returns the rows of cmd's table
 * (its lines of help included). */
static int getopt_table(const cli_command *cmd, struct option longs[MAX_OPTIONS + 1]) {
    int n = 0, row = 0;
    for (; cmd->options[row].kind != CLI_END; row++) {
        const cli_option *o = &cmd->options[row];
        if (!o->name) continue; /* a line of the help */
        if (n == MAX_OPTIONS) abort(); /* a table this long is a bug of qkv's, caught by every test */
        longs[n++] = (struct option){o->name, takes_value(o) ? required_argument : no_argument,
                                     NULL, ROW_VALUE(row)};
    }
    longs[n] = (struct option){0, 0, 0, 0};
    return row;
}

/* A fresh getopt_long scan of a new argv (optind = 0: glibc then also forgets where it was
 * inside an earlier argv, which may be gone), with getopt's own messages off. */
static void getopt_reset(void) {
    optind = 0;
    opterr = 0;
}

/* The options of `cmd` whose names begin with the len bytes of `prefix`, as "; did you mean
 * --steps?" or "; did you mean --seed, --seq-len or --steps?" into out; "" if none. */
static void candidates(const cli_command *cmd, const char *prefix, int len, char *out, size_t size) {
    const char *names[MAX_OPTIONS + 1];
    size_t n = 0, used = 0;
    for (int i = 0; cmd->options[i].kind != CLI_END; i++) {
        const char *name = cmd->options[i].name;
        if (name && len > 0 && !strncmp(name, prefix, (size_t)len) && n < MAX_OPTIONS) names[n++] = name;
    }
    out[0] = '\0';
    for (size_t i = 0; i < n && used < size; i++)
        used += (size_t)snprintf(out + used, size - used, "%s--%s%s",
                                 i == 0 ? "; did you mean " : i + 1 == n ? " or " : ", ", names[i],
                                 i + 1 == n ? "?" : "");
}

/* Options are named whole. getopt_long also takes a unique prefix (--step for --steps, --head
 * for --heads), which lets a typo run as another option, so a prefix is refused, naming the
 * options it begins: one line, EXIT_USAGE; else CLI_RUN. The text read is argv[optind - 1],
 * or argv[optind - 2] when the option's value was the next argument. */
static int named_whole(const cli_command *cmd, const cli_option *o, char **argv) {
    const char *text = takes_value(o) && optarg == argv[optind - 1] ? argv[optind - 2]
                                                                     : argv[optind - 1];
    if (strncmp(text, "--", 2)) return CLI_RUN; /* -h */
    int len = (int)strcspn(text + 2, "=");
    if ((size_t)len == strlen(o->name)) return CLI_RUN;
    char list[512];
    candidates(cmd, text + 2, len, list, sizeof list);
    cli_error("%s: unknown option '--%.*s': options are named whole%s (see qkv %s --help)",
              cmd->name, len, text + 2, list, cmd->name);
    return EXIT_USAGE;
}

/* The one line for getopt_long's ':' (a value is missing) or '?' (an unknown, ambiguous or
 * misused option) in command `cmd`; returns EXIT_USAGE. */
static int bad_option(const cli_command *table, char **argv, int c) {
    const char *cmd = table->name;
    /* glibc's optopt: 0 for an unknown or ambiguous long option, the option's value (>= 256,
     * see ROW_VALUE) for a long option given a value it does not take, else the letter of
     * an unknown short option. A long option is the argument just consumed. */
    const char *arg = argv[optind - 1];
    int len = (int)strcspn(arg, "=");
    if (c == ':')
        cli_error("%s: %s needs a value", cmd, arg);
    else if (optopt >= 256)
        cli_error("%s: %.*s takes no value", cmd, len, arg);
    else if (optopt != 0) /* a char: negative for bytes above 127 */
        cli_error(isgraph((unsigned char)optopt) ? "%s: unknown option '-%c' (see qkv %s --help)"
                                                 : "%s: unknown option '-\\x%02x' (see qkv %s --help)",
                  cmd, (unsigned char)optopt, cmd);
    else {
        char list[512] = "";
        if (!strncmp(arg, "--", 2)) candidates(table, arg + 2, len - 2, list, sizeof list);
        cli_error("%s: unknown option '%.*s'%s (see qkv %s --help)", cmd, len, arg, list, cmd);
    }
    return EXIT_USAGE;
}

/* "png, svg or html" into out */
static void list_choices(const char *const *choices, char *out, size_t len) {
    size_t n = 0, used = 0;
    while (choices[n]) n++;
    out[0] = '\0';
    for (size_t i = 0; i < n && used < len; i++)
        used += (size_t)snprintf(out + used, len - used, "%s%s",
                                 i == 0 ? "" : i + 1 == n ? " or " : ", ", choices[i]);
}

/* Converts and stores one value; false after one line. */
static bool store(const cli_option *o, const char *text) {
    switch (o->kind) {
    case CLI_INT: return cli_parse_int(o->name, text, (long)o->lo, (long)o->hi, o->dest);
    case CLI_U64: return cli_parse_u64(o->name, text, o->dest);
    case CLI_DOUBLE: return cli_parse_double(o->name, text, o->lo, o->hi, o->lo_open, o->dest);
    case CLI_STRING: *(const char **)o->dest = text; return true;
    case CLI_CHOICE:
        for (int i = 0; o->choices[i]; i++)
            if (!strcmp(text, o->choices[i])) {
                *(int *)o->dest = i;
                return true;
            }
        char list[512];
        list_choices(o->choices, list, sizeof list);
        cli_error("--%s: '%s' is not %s", o->name, text, list);
        return false;
    case CLI_CUSTOM: return o->parse(text, o->dest);
    case CLI_FLAG: *(bool *)o->dest = true; return true;
    case CLI_SET: *(int *)o->dest = o->value; return true;
    case CLI_END:
    case CLI_TEXT:
    case CLI_HELP: break;
    }
    return true;
}

int cli_parse_options(const cli_command *cmd, int argc, char **argv, int *first_operand) {
    struct option longs[MAX_OPTIONS + 1];
    int rows = getopt_table(cmd, longs);
    for (int i = 0; i < rows; i++) cmd->options[i].given = false;
    /* "+": stop at the first operand (sweep: what follows -- is train's); ":": a missing value
     * is reported as ':' */
    const char *shorts = cmd->stop_at_operand ? "+:h" : ":h";
    getopt_reset();
    for (int c; (c = getopt_long(argc, argv, shorts, longs, NULL)) != -1;) {
        if (c == 'h') c = ROW_VALUE(cli_option_row(cmd, "help"));
        if (c < ROW_VALUE(0) || c >= ROW_VALUE(rows)) return bad_option(cmd, argv, c);
        cli_option *o = &cmd->options[c - ROW_VALUE(0)];
        if (named_whole(cmd, o, argv) != CLI_RUN) return EXIT_USAGE;
        if (o->kind == CLI_HELP) {
            cli_print_usage(cmd, stdout);
            return EXIT_OK;
        }
        o->given = true;
        if (!store(o, optarg)) return EXIT_USAGE;
    }
    if (!cmd->operands && optind < argc) {
        cli_error("%s: unexpected argument '%s'", cmd->name, argv[optind]);
        return EXIT_USAGE;
    }
    if (first_operand) *first_operand = optind;
    int probe = cli_option_row(cmd, "no-selftest");
    if (probe >= 0 && !cmd->options[probe].given) cli_simd_probe();
    return CLI_RUN;
}

int cli_option_row(const cli_command *cmd, const char *name) {
    for (int i = 0; cmd->options[i].kind != CLI_END; i++)
        if (cmd->options[i].name && !strcmp(cmd->options[i].name, name)) return i;
    return -1;
}

bool cli_option_given(const cli_command *cmd, const char *name) {
    int i = cli_option_row(cmd, name);
    return i >= 0 && cmd->options[i].given;
}

const char *cli_option_last(const cli_command *cmd, int argc, char **argv, const char *name) {
    /* A scan of its own, quiet and storing nothing: options it cannot read are the real
     * parse's to report. */
    struct option longs[MAX_OPTIONS + 1];
    getopt_table(cmd, longs);
    int want = ROW_VALUE(cli_option_row(cmd, name));
    const char *last = NULL;
    getopt_reset();
    for (int c; (c = getopt_long(argc, argv, cmd->stop_at_operand ? "+:h" : ":h", longs, NULL)) != -1;)
        if (c == want) last = optarg;
    return last;
}

int cli_option_count(const cli_command *cmd, int argc, char **argv, const char *name) {
    struct option longs[MAX_OPTIONS + 1];
    getopt_table(cmd, longs);
    int want = ROW_VALUE(cli_option_row(cmd, name)), count = 0;
    const char *shorts = cmd->stop_at_operand ? "+:h" : ":h";
    getopt_reset();
    for (int c; (c = getopt_long(argc, argv, shorts, longs, NULL)) != -1;) count += c == want;
    return count;
}

void cli_print_usage(const cli_command *cmd, FILE *out) {
    fputs(cmd->usage, out);
    for (const cli_option *o = cmd->options; o->kind != CLI_END; o++) {
        if (!o->name) { /* a line of its own: a heading, a note */
            fprintf(out, "%s\n", o->help);
            continue;
        }
        if (!o->help) continue; /* told of in a line of its own */
        /* "  -h, --help", "  --seq-len N", then the help from the command's column, or from
         * the next line when the option reaches it */
        int width = fprintf(out, "  %s--%s%s%s", o->kind == CLI_HELP ? "-h, " : "", o->name,
                            o->arg ? " " : "", o->arg ? o->arg : "");
        if (width > cmd->column - 2) {
            fputc('\n', out);
            width = 0;
        }
        fprintf(out, "%*s", cmd->column - width, "");
        for (const char *line = o->help; *line;) {
            size_t len = strcspn(line, "\n");
            fprintf(out, "%.*s\n", (int)len, line);
            line += len;
            if (*line == '\n' && *++line) fprintf(out, "%*s", cmd->column, "");
        }
    }
    if (cmd->epilog) fputs(cmd->epilog, out);
}
