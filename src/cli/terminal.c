/* terminal.c - text that fits the terminal: when stdout or stderr is a terminal, its lines are
 * wrapped at spaces to the terminal's width, never inside a word.
 *
 * qkv prints its summaries, hints, tables and errors with plain printf, and many of those
 * lines run to 100 or 150 characters; a terminal would cut them at its last column, in the
 * middle of a number or a word. Rather than have every printer measure the terminal, the
 * executable (main.c) puts a filter between stdout (and stderr) and a terminal: a stdio stream
 * of its own (fopencookie) that passes everything through to the descriptor and breaks a line
 * that would not fit at its last space that does, indenting the continuation two columns past
 * the line's own indentation. A word longer than the width is left whole. Redirected to a file
 * or a pipe, nothing changes: scripts read one line per line, errors stay one "qkv:" line.
 *
 * The filter holds no text back: what one write brings is written before it returns. A line
 * that arrives in pieces (the progress bar: "\r", its text, fflush) is written as it comes; the
 * filter keeps the column it reached, so that the rest of the line is wrapped from there. */
#define _GNU_SOURCE
#include "cli.h"
#include "engine/engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

typedef struct {
    int fd;
    int col;    /* characters already on the terminal's current line */
    int indent; /* the current line's indentation, for its continuations */
    char *line; /* the pending piece of the current line */
    size_t len, cap;
} wrap_stream;

static wrap_stream wrapped[2]; /* stdout's and stderr's */

/* The terminal's width in columns, or 0 if `fd` is not a terminal. */
static int columns_of(int fd) {
    struct winsize ws;
    if (!isatty(fd)) return 0;
    if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    const char *env = getenv("COLUMNS");
    int64_t n;
    return env && number_int(env, 1, 9999, &n) == NUMBER_OK ? (int)n : 80;
}

int cli_terminal_columns(FILE *f) {
    for (int i = 0; i < 2; i++)
        if (wrapped[i].line && f == (i ? stderr : stdout)) return columns_of(wrapped[i].fd);
    int fd = fileno(f);
    return fd < 0 ? 0 : columns_of(fd);
}

static void write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return; /* a closed terminal: the text is lost, as it would be anyway */
        p += w;
        n -= (size_t)w;
    }
}

/* The end of the escape sequence at p[i] (ESC [ ... final byte), which takes no column: the
 * progress bar clears the rest of its line with one. */
static size_t escape_end(const char *p, size_t n, size_t i) {
    if (i + 1 >= n || p[i + 1] != '[') return i + 1;
    for (i += 2; i < n && !(p[i] >= 0x40 && p[i] <= 0x7E); i++) {}
    return i < n ? i + 1 : n;
}

/* The byte offset after `chars` columns of p[0..n) (UTF-8: continuation bytes take none, nor
 * do escape sequences), or n; *taken: the columns up to there. */
static size_t bytes_for(const char *p, size_t n, int chars, int *taken) {
    size_t i = 0;
    int c = 0;
    while (i < n) {
        if (p[i] == '\033') {
            i = escape_end(p, n, i);
            continue;
        }
        if (((unsigned char)p[i] & 0xC0) != 0x80) {
            if (c == chars) break;
            c++;
        }
        i++;
    }
    if (taken) *taken = c;
    return i;
}

/* Columns that n bytes take. */
static int chars_in(const char *p, size_t n) {
    int c;
    bytes_for(p, n, -1, &c);
    return c;
}

static void new_line(wrap_stream *w) {
    static const char spaces[] = "                                        ";
    write_all(w->fd, "\n", 1);
    int pad = w->indent < (int)sizeof spaces - 1 ? w->indent : (int)sizeof spaces - 1;
    write_all(w->fd, spaces, (size_t)pad);
    w->col = pad;
}

/* Writes the pending piece of the line, broken at spaces where it would pass the last column
 * but one (a line that reaches the last column makes some terminals wrap). */
static void flush_piece(wrap_stream *w) {
    const char *p = w->line;
    size_t n = w->len;
    w->len = 0;
    if (w->col == 0) { /* a new line: its indentation, for the continuations */
        size_t lead = 0;
        while (lead < n && p[lead] == ' ') lead++;
        int width = columns_of(w->fd);
        w->indent = (int)lead + 2 < width / 3 ? (int)lead + 2 : 2;
    }
    int width = columns_of(w->fd) - 1;
    while (n > 0) {
        int room = width - w->col;
        if (chars_in(p, n) <= room) break;
        /* the last space within the room, past the line's own indentation */
        size_t fit = room > 0 ? bytes_for(p, n, room, NULL) : 0, cut = fit;
        while (cut > 0 && p[cut] != ' ') cut--;
        size_t start = 0; /* a new line's own indentation is never a place to break */
        while (w->col == 0 && start < n && p[start] == ' ') start++;
        if (cut <= start || p[cut] != ' ') {
            if (w->col > w->indent) { /* nothing fits after what the line holds: a new line */
                new_line(w);
                while (n > 0 && *p == ' ') p++, n--;
                continue;
            }
            /* one word wider than the terminal: whole, up to the next space */
            for (cut = fit; cut < n && p[cut] != ' '; cut++) {}
            if (cut == n) break;
        }
        size_t end = cut;
        while (end > 0 && p[end - 1] == ' ') end--;
        write_all(w->fd, p, end);
        p += cut;
        n -= cut;
        while (n > 0 && *p == ' ') p++, n--;
        if (n > 0) new_line(w);
    }
    write_all(w->fd, p, n);
    w->col += chars_in(p, n);
}

static ssize_t wrap_write(void *cookie, const char *buf, size_t n) {
    wrap_stream *w = cookie;
    for (size_t i = 0; i < n; i++) {
        char c = buf[i];
        if (c == '\n' || c == '\r') {
            flush_piece(w);
            write_all(w->fd, &c, 1);
            w->col = 0;
            continue;
        }
        if (w->len == w->cap) {
            size_t cap = w->cap * 2;
            char *line = realloc(w->line, cap);
            if (!line) { /* out of memory: the rest goes through as it is */
                flush_piece(w);
                write_all(w->fd, buf + i, n - i);
                return (ssize_t)n;
            }
            w->line = line;
            w->cap = cap;
        }
        w->line[w->len++] = c;
    }
    flush_piece(w);
    return (ssize_t)n;
}

void cli_wrap_terminal(void) {
    for (int i = 0; i < 2; i++) {
        FILE **f = i ? &stderr : &stdout;
        int fd = i ? STDERR_FILENO : STDOUT_FILENO;
        if (!columns_of(fd)) continue;
        wrap_stream *w = &wrapped[i];
        *w = (wrap_stream){.fd = fd, .cap = 256};
        if (!(w->line = malloc(w->cap))) continue;
        cookie_io_functions_t io = {.write = wrap_write};
        FILE *stream = fopencookie(w, "w", io);
        if (!stream) {
            free(w->line);
            w->line = NULL;
            continue;
        }
        setvbuf(stream, NULL, _IOLBF, 0); /* whole lines reach the filter */
        fflush(*f);
        *f = stream;
    }
}
