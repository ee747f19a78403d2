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
    case CLI_INT:
        if (o->word && !strcmp(text, o->word)) { /* --batch full */
            *(long *)o->dest = o->word_value;
            return true;
        }
        return cli_parse_int(o->name, text, (long)o->lo, (long)o->hi, o->dest);
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

/* ---- the same help as troff, for the man page (scripts/man_page.sh) ---- */

/* Text for a troff text line: backslashes and hyphens escaped ("\e", "\-"); n bytes of s. */
static void troff_text(const char *s, size_t n, FILE *out) {
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\') fputs("\\e", out);
        else if (s[i] == '-') fputs("\\-", out);
        else fputc(s[i], out);
    }
}

/* One line of text: "\&" first, so that a leading '.' or '\'' is never a request. */
static void troff_line(const char *s, size_t n, FILE *out) {
    fputs("\\&", out);
    troff_text(s, n, out);
    fputc('\n', out);
}

/* A word of a synopsis or a tag: an option or a command word bold, a value's name (FILE,
 * "t1 t2 ...", options) italic, the brackets around it roman. */
static void troff_word(const char *w, size_t n, FILE *out) {
    size_t a = 0, b = n;
    while (a < b && w[a] == '[') a++;
    while (b > a && w[b - 1] == ']') b--;
    troff_text(w, a, out);
    if (a < b) {
        bool bold = w[a] == '-' || (w[a] >= 'a' && w[a] <= 'z');
        if (b - a == 7 && !strncmp(w + a, "options", 7)) bold = false;
        fputs(bold ? "\\fB" : "\\fI", out);
        troff_text(w + a, b - a, out);
        fputs("\\fR", out);
    }
    troff_text(w + b, n - b, out);
}

/* Words separated by spaces, a quoted one ("t1 t2 ...", 'NAME=V1,V2 ...') whole. */
static void troff_words(const char *s, size_t n, FILE *out) {
    for (size_t i = 0; i < n;) {
        if (s[i] == ' ') {
            fputc(' ', out);
            while (i < n && s[i] == ' ') i++;
            continue;
        }
        size_t j = i;
        if (s[i] == '"' || s[i] == '\'') {
            const char *close = memchr(s + i + 1, s[i], n - i - 1);
            j = close ? (size_t)(close - s) + 1 : n;
        }
        while (j < n && s[j] != ' ') j++;
        troff_word(s + i, j - i, out);
        i = j;
    }
}

/* Where a line's remark begins: after three spaces, "(or qkv eval DIR)"; n when it has none. */
static size_t remark_at(const char *s, size_t n) {
    for (size_t i = 0; i + 3 < n; i++)
        if (!strncmp(s + i, "   (", 4)) return i + 3;
    return n;
}

/* The synopsis: the usage's "usage: qkv ..." line and the lines of more forms under it, a
 * line indented further joined to the one above; a form that sends to another command's help
 * ("(see qkv study precision --help)") is that command's to give. Returns where the usage's
 * description begins. */
static const char *troff_synopsis(const char *usage, FILE *out) {
    const char *line = usage;
    bool first = true;
    while (*line && (first || *line == ' ')) {
        const char *end = line + strcspn(line, "\n");
        const char *form = line + (first && !strncmp(line, "usage:", 6) ? 6 : 0);
        while (form < end && *form == ' ') form++;
        /* the lines indented further that continue this form */
        const char *next = *end ? end + 1 : end;
        char joined[1024];
        size_t n = (size_t)snprintf(joined, sizeof joined, "%.*s", (int)(end - form), form);
        while (*next == ' ' && strncmp(next + strspn(next, " "), "qkv ", 4)) {
            const char *e = next + strcspn(next, "\n");
            const char *w = next + strspn(next, " ");
            if (n < sizeof joined) n += (size_t)snprintf(joined + n, sizeof joined - n, " %.*s", (int)(e - w), w);
            next = *e ? e + 1 : e;
        }
        if (n >= sizeof joined) n = sizeof joined - 1;
        size_t remark = remark_at(joined, n);
        if (strncmp(joined + remark, "(see ", 5)) {
            size_t words = remark;
            while (words > 0 && joined[words - 1] == ' ') words--;
            troff_words(joined, words, out);
            if (remark < n) {
                fputs("   ", out);
                troff_text(joined + remark, n - remark, out);
            }
            fputs("\n.br\n", out);
        }
        first = false;
        line = next;
    }
    return line;
}

/* A CLI_TEXT row's lines: "  --emit slurm   text" an entry of the list (.TP), a line indented
 * four spaces or more the text of the entry or note above, any other a heading (.PP). */
static void troff_text_row(const char *text, bool *in_entry, FILE *out) {
    for (const char *line = text; *line;) {
        size_t n = strcspn(line, "\n"), indent = strspn(line, " ");
        if (indent == 2 && line[2] == '-') {
            const char *gap = strstr(line + 2, "  ");
            size_t tag = gap && gap < line + n ? (size_t)(gap - line) : n;
            fputs(".TP\n", out);
            troff_words(line + 2, tag - 2, out);
            fputc('\n', out);
            size_t body = tag + strspn(line + tag, " ");
            if (body < n) troff_line(line + body, n - body, out);
            *in_entry = true;
        } else if (indent >= 4) {
            if (!*in_entry) fputs(".IP\n", out);
            troff_line(line + indent, n - indent, out);
            *in_entry = true;
        } else {
            fputs(".PP\n", out);
            troff_line(line, n, out);
            *in_entry = false;
        }
        line += n + (line[n] == '\n');
    }
}

/* QKV_HELP_FORMAT=troff: the help as three parts of the man page, each after a comment line:
 * the synopsis, the description (the rest of the usage) and the options, one .TP each, the
 * table's lines of their own as headings and notes. The epilog is the page's to say. */
static void print_troff(const cli_command *cmd, FILE *out) {
    fputs(".\\\" synopsis\n", out);
    const char *desc = troff_synopsis(cmd->usage, out);
    fputs(".\\\" description\n", out);
    for (const char *line = desc; *line;) {
        size_t n = strcspn(line, "\n");
        if (n) troff_line(line, n, out);
        line += n + (line[n] == '\n');
    }
    fputs(".\\\" options\n", out);
    bool in_entry = false;
    for (const cli_option *o = cmd->options; o->kind != CLI_END; o++) {
        if (!o->name) {
            troff_text_row(o->help, &in_entry, out);
            continue;
        }
        if (!o->help) continue; /* told of in a line of its own */
        fputs(".TP\n", out);
        if (o->kind == CLI_HELP) fputs("\\fB\\-h\\fR, ", out);
        fputs("\\fB\\-\\-", out);
        troff_text(o->name, strlen(o->name), out);
        fputs("\\fR", out);
        if (o->arg) {
            fputc(' ', out);
            troff_words(o->arg, strlen(o->arg), out);
        }
        fputc('\n', out);
        for (const char *line = o->help; *line;) {
            size_t n = strcspn(line, "\n");
            troff_line(line, n, out);
            line += n + (line[n] == '\n');
        }
        in_entry = true;
    }
}

void cli_print_usage(const cli_command *cmd, FILE *out) {
    const char *format = getenv("QKV_HELP_FORMAT");
    if (format && !strcmp(format, "troff")) {
        print_troff(cmd, out);
        return;
    }
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
