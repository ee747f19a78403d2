/* plot.h - the pictures of a run: gnuplot's images and the interactive page, drawn from the
 * files a run (or qkv inspect) wrote, never from a model (docs/plots.md). */
#ifndef QKV_PLOT_H
#define QKV_PLOT_H

#include "qkv.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#define PLOT_PATH_LEN 1200 /* a directory or file the plots read or write */

/* How a plot call ended: a qkv_status (QKV_OK, or a file or memory error), or one of the two
 * outcomes below. The message of anything but QKV_OK is qkv_last_error(). */
typedef int plot_status;
enum {
    PLOT_NO_GNUPLOT = -1,     /* gnuplot is not on PATH: nothing was drawn, the data stands */
    PLOT_GNUPLOT_FAILED = -2, /* gnuplot ran and failed on a script: no image of it is left */
};

/* What a plot draws: the task, the grid, and whether the causal mask drops keys (j > i). */
typedef struct {
    char task[64];
    int layers, heads;
    bool causal;
    double chance_acc, chance_loss; /* a uniform guess's accuracy and loss; 0 if unknown */
    bool inspect;                   /* the maps are of one input of qkv inspect, not of a run */
    bool cross;                     /* an encoder-decoder's cross-attention: no head scores */
    /* a run's model's sizes (from its tensors' shapes), which every analysis file beside it
     * is checked against: the vocabulary, the inputs' positions (keys) and the query
     * positions (an encoder-decoder's decoder positions; else the inputs') */
    int vocab, seq_len, queries;
} plot_source;

/* What a plot call made: the page (`page`, its file in `path`), or `images` images in the
 * directory `path`. */
typedef struct {
    bool page;
    int images;
    char path[PLOT_PATH_LEN + 100];
} plot_made;

/* ---- plots.c ---- */
/* Draws the plots of `dir` into its plots/: a training directory (its model's metadata says
 * what to draw), or a file of qkv inspect --out, whose maps are first written as a run's into
 * the directory FILE without .safetensors (or FILE.d). `format` is "png", "svg" (gnuplot's
 * images; the snapshots are a GIF) or "html" (the page, page.c). */
plot_status plot_dir(const char *dir, const char *format, plot_made *made);

/* ---- gnuplot.c ---- */
/* Runs scripts/SCRIPT as `gnuplot -c SCRIPT OUT FORMAT ARGS...` inside directory `dir`,
 * writing image `out` atomically. `out` and any file names among `args` are relative to
 * `dir`: no path reaches gnuplot, which would run a name that begins with '<' or '|'. */
plot_status plot_script(const char *script, const char *dir, const char *out, const char *format,
                        int nargs, const char *const *args);

/* gnuplot and the scripts, found once for the several scripts of one plot_dir. */
typedef struct {
    char gnuplot[PLOT_PATH_LEN]; /* the executable */
    char scripts[PLOT_PATH_LEN]; /* the directory of the .gp files */
    int written;        /* images made so far */
} plotter;
/* Finds gnuplot on PATH (PLOT_NO_GNUPLOT, naming `data_dir`, where the data files are) and
 * the scripts (plot_find_scripts). */
plot_status plotter_init(plotter *p, const char *data_dir);
/* plot_script with p's gnuplot and scripts. */
plot_status plotter_run(plotter *p, const char *dir, const char *script, const char *out,
                        const char *format, int nargs, const char *const *args);

/* ---- dat.c ---- */
#define DAT_MAX_TOKENS 512     /* a longer map is not read back (the page would not draw it) */
#define DAT_PAD_TOKEN "<pad>"  /* a data file's padding token, as the maps label it */

/* One map read back from a .dat file (the format of attention.gp). */
typedef struct {
    int nq, nk;
    char (*qlabel)[40], (*klabel)[40];
    float *w; /* (nq, nk) */
} dat_map;

/* Reads a .dat map: '#' comments, a header "query\key k1 k2 ...", then rows "q w w ...".
 * False (nothing kept) if the file is missing or not of that form. */
bool dat_read(const char *path, dat_map *m);
void dat_free(dat_map *m);

/* Which queries and keys of a run's maps are padding: a key labelled "j:<pad>" that no query
 * of any head's final map (attention/) gives any weight, and in self-attention the query of
 * the same position. */
typedef struct {
    int nq, nk;
    bool *query, *key; /* (nq), (nk) */
    bool any;
} dat_pad;
/* False (pad empty) when a map cannot be read or the maps differ in size. */
bool dat_padding(const char *dir, const plot_source *src, dat_pad *pad);
void dat_pad_free(dat_pad *pad);

/* The files a plot may go without (metrics.csv, the gradient maps): QKV_OK when each is
 * absent (io_absent) or a regular file that opens; else QKV_ERR_IO naming the one that is
 * there but cannot be read, never taken for a missing one. Checked before anything is drawn. */
qkv_status plot_check_optional(const char *dir, const plot_source *src);

/* ---- analysis.c ---- */
/* The analysis files a run directory may hold: circuits.json (qkv circuits --out: QK and OV
 * circuits per head, composition scores), ablate.json, patch.json, attribute.json and
 * lens.json (qkv ablate, patch, attribute, lens --out). They are untrusted input: every count in one is checked
 * against the arrays it holds and the model of the run (src: layers, heads per layer) before
 * anything is drawn, and reading is linear in the file's size. */
#define PLOT_ANALYSIS_FILES 5
struct cJSON;
/* DIR/NAME (one of the five) parsed and checked into *j: NULL with QKV_OK when there is none;
 * QKV_ERR_FORMAT, naming it and what is wrong, when it is not what its command writes. */
qkv_status plot_read_analysis(const char *dir, const char *name, const plot_source *src,
                              struct cJSON **j);
/* All five read and checked (plot_read_analysis), NULL where there is none; on an error none
 * is kept. */
qkv_status plot_read_analyses(const char *dir, const plot_source *src,
                              struct cJSON *j[PLOT_ANALYSIS_FILES]);
void plot_free_analyses(struct cJSON *j[PLOT_ANALYSIS_FILES]);
/* The pictures of the files read by plot_read_analyses: each is first written as text
 * matrices under DIR/plots/, then drawn by matrix.gp or bars.gp. */
plot_status plot_analysis(plotter *p, const char *dir, const char *format,
                          const plot_source *src, struct cJSON *const j[PLOT_ANALYSIS_FILES]);
/* DIR/NAME parsed (a cJSON object, nothing after it), NULL when there is none (*s QKV_OK) or
 * it cannot be read or parsed (*s set, the error naming it). */
struct cJSON *plot_read_json(const char *dir, const char *name, qkv_status *s);

/* ---- page.c ---- */
/* DIR/plots/attention.html, one self-contained page of the maps in DIR (attention/,
 * gradients/, snapshots/, metrics.csv); its path into made->path. */
plot_status plot_page(const char *dir, const plot_source *src, plot_made *made);

/* ---- scripts.c ---- */
/* The directory of qkv's scripts (gnuplot's .gp files, the page template): $QKV_SCRIPTS,
 * else next to the executable, else the source tree. False if none holds attention.gp. */
bool plot_find_scripts(char *out, size_t len);
/* Whether `path` is a regular file (after links). */
bool plot_is_file(const char *path);
/* The steps N of DIR/step<N>_layer1_head1.dat (a run's snapshots/), sorted; how many (0 if
 * none), or -1 when out of memory. *steps is malloc'd. */
int plot_snapshot_steps(const char *dir, int64_t **steps);

/* ---- grokking.c: the pictures of a modular run (docs/grokking.md, "Pictures") ---- */
#define GROK_LOSSES 4   /* train (every training pair), test (held out), restricted, excluded */
#define GROK_PHASES 4   /* memorization_end, circuit_formation_end, cleanup_end,
                           generalization_step */
#define GROK_MAX_KEYS 64
typedef struct {
    char run[256];              /* the run's name: its directory's last component */
    int P, F, op;               /* the modulus, its top frequency P/2, the qkv_modular_op */
    int layers, heads;
    int64_t step;               /* the model's */
    /* summary.json's grokking: each phase's step, -1 for none */
    bool has_phases, generalized;
    int64_t phase[GROK_PHASES];
    /* metrics.jsonl: each evaluation's step, losses (n_evals, GROK_LOSSES; NaN: none) and
     * the embedding's norms of frequencies 1 .. F (n_evals, F) */
    int n_evals;
    int64_t *steps;
    double *loss, *embed;
    /* the model: its key frequencies, its MLP neurons sorted by cluster (ascending, the
     * constant ones, cluster 0, last) and share (largest first), each with its share of
     * variance in frequencies 1 .. F (neurons, F), and each head's attention from = to a and
     * to b over every pair: attention[((l·heads + h)·2 + to)·P² + a·P + b] */
    int n_keys, keys[GROK_MAX_KEYS];
    int neurons;
    int *neuron_layer, *neuron_index, *neuron_cluster; /* layer from 1, neuron from 0 */
    double *neuron_share, *neuron_by_frequency;
    float *attention;
} grok_data;
/* Everything the pictures of modular run `dir` show: its model (a forward over every pair
 * for the neurons, one for the attention), summary.json's phases and metrics.jsonl's rows
 * (either file may be missing: no phases, no evaluations). Nothing is written. */
qkv_status grok_load(const char *dir, grok_data *g);
void grok_free(grok_data *g);
/* Writes dir/plots/grok_losses, grok_fourier (when there are evaluations), grok_neurons (with
 * an MLP) and grok_attention_layer<L> (.dat, then the image in `format`). */
plot_status grok_draw(plotter *p, const char *dir, const char *format, const grok_data *g);
/* The page's object of g (scripts/grokking.js draws it). */
void grok_json(FILE *f, const grok_data *g);

#endif
