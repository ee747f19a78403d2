/* replay.c - runs files through a fuzz target's LLVMFuzzerTestOneInput without libFuzzer:
 * the seed corpora and the inputs of every crash found so far, as a ctest of the normal
 * (and the sanitizer, and the valgrind) build.
 *
 * usage: fuzz_replay_<target> FILE|DIR...   (a directory: every file in it, sorted by name)
 * Exits 0 once every input ran; a crash is the test's failure. Stdout (help texts) is
 * discarded; stderr keeps the error lines and any sanitizer report. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fuzz_replay: cannot open %s\n", path);
        return 1;
    }
    size_t cap = 4096, n = 0;
    unsigned char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            unsigned char *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "fuzz_replay: out of memory reading %s\n", path);
        return 1;
    }
    /* an exact-size copy, so that ASan sees a read past the input's end */
    unsigned char *input = malloc(n ? n : 1);
    if (input) memcpy(input, buf, n);
    free(buf);
    if (!input) return 1;
    LLVMFuzzerTestOneInput(input, n);
    free(input);
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    if (!freopen("/dev/null", "w", stdout)) return 1;
    int inputs = 0, failed = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) {
            fprintf(stderr, "fuzz_replay: %s does not exist\n", argv[i]);
            return 1;
        }
        if (!S_ISDIR(sb.st_mode)) {
            failed += replay_file(argv[i]);
            inputs++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) return 1;
        char **names = NULL;
        size_t n = 0;
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.') continue;
            char **p = realloc(names, (n + 1) * sizeof *names);
            if (!p) return 1;
            names = p;
            size_t len = strlen(argv[i]) + strlen(e->d_name) + 2;
            if (!(names[n] = malloc(len))) return 1;
            snprintf(names[n++], len, "%s/%s", argv[i], e->d_name);
        }
        closedir(d);
        qsort(names, n, sizeof *names, cmp_str);
        for (size_t j = 0; j < n; j++) {
            failed += replay_file(names[j]);
            inputs++;
            free(names[j]);
        }
        free(names);
    }
    fprintf(stderr, "fuzz_replay: %d inputs replayed\n", inputs);
    return failed ? 1 : 0;
}
