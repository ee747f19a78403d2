/* cmd_plot.c - `qkv plot DIR`: draws what `qkv train --out DIR` saved (src/plot/), and says
 * what it wrote. */
#include "cli.h"
#include "plot/plot.h"

#include <stdio.h>
#include <string.h>

/* The exit code of a plot call, after its one line when it failed; *no_gnuplot says whether
 * gnuplot was missing. */
static int plot_exit(plot_status s, bool *no_gnuplot) {
    *no_gnuplot = s == PLOT_NO_GNUPLOT;
    if (s == QKV_OK) return EXIT_OK;
    cli_error("%s", qkv_last_error());
    return s == PLOT_NO_GNUPLOT || s == PLOT_GNUPLOT_FAILED ? EXIT_FAILED : cli_exit_for(s);
}

int cli_plot(const char *dir, const char *format, bool verbose, bool *no_gnuplot) {
    plot_made made;
    plot_status s = plot_dir(dir, format, &made);
    if (s == QKV_OK && verbose) {
        if (made.page)
            printf("plots: %s\n", made.path);
        else
            printf("plots: %d images in %s\n", made.images, made.path);
    }
    return plot_exit(s, no_gnuplot);
}

int cli_gnuplot(const char *script, const char *dir, const char *out, const char *format,
                int nargs, const char *const *args, bool *no_gnuplot) {
    return plot_exit(plot_script(script, dir, out, format, nargs, args), no_gnuplot);
}

typedef struct {
    const char *dir, *format;
} plot_args;

static int plot_parse(int argc, char **argv, plot_args *a) {
    static const char *const formats[] = {"png", "svg", "html", NULL};
    int format = 0;
    cli_option options[] = {
        {"format", CLI_CHOICE, &format, .choices = formats, .arg = "F",
         .help = "png (pngcairo) or svg; the animation is always a GIF; html writes\n"
                 "one interactive page, plots/attention.html (default png)"},
        {"help", CLI_HELP, .help = "show this help"},
        {0}};
    const cli_command cmd = {
        .name = "plot",
        .usage = "usage: qkv plot DIR [options]\n"
                 "       qkv plot FILE.safetensors [options]   (a file of qkv inspect --out: into FILE/)\n"
                 "Draws the plots of a directory written by `qkv train --out DIR` into DIR/plots/, with the\n"
                 "gnuplot scripts in scripts/ (found next to the executable, in the source tree, or in\n"
                 "$QKV_SCRIPTS):\n"
                 "  attention_layer<L>_head<H>   heatmap of the fixed held-out example's attention weights\n"
                 "  overview                     every layer x head in one grid\n"
                 "  curves                       loss and accuracy over the steps, train and held-out\n"
                 "  grads_layer<L>_head<H>       the weights A, their gradient dA and the scores' gradient dS\n"
                 "  snapshots.gif                the attention forming (train --snapshot-every K)\n"
                 "and, when their JSON files are in DIR (docs/explain.md):\n"
                 "  circuit_qk|ov_layer<L>_head<H>  circuits: each head's QK and OV circuit, and\n"
                 "  composition_q|k|v            the composition scores (circuits.json, qkv circuits --out)\n"
                 "  ablate                       ablation: the loss increase of each head removed\n"
                 "                               (ablate.json, qkv ablate --out)\n"
                 "  patch                        patching: the share each head recovers\n"
                 "                               (patch.json, qkv patch --out)\n"
                 "  attribute                    attribution: the logit's parts as bars\n"
                 "                               (attribute.json, qkv attribute --out)\n"
                 "  lens, lens_parts             the logit lens: the top token after each layer,\n"
                 "                               and the final logit's parts (lens.json, qkv lens --out)\n"
                 "and for a run of --task modular (docs/grokking.md, \"Pictures\"):\n"
                 "  grok_losses                  the train, test, restricted and excluded losses, the\n"
                 "                               phases of summary.json shaded\n"
                 "  grok_fourier                 the embedding's norm in each frequency over training\n"
                 "  grok_neurons                 each MLP neuron's share of variance by frequency, grouped\n"
                 "                               by cluster\n"
                 "  grok_attention_layer<L>      each head's attention from = to a and to b, every pair\n"
                 "\n",
        .options = options,
        .column = 22,
        .epilog = "\n"
                  "Exit codes: 0 plotted, 1 gnuplot is not on PATH (the data files are untouched) or it\n"
                  "failed, 2 bad option, 3 DIR or one of its data files cannot be read, 4 the model file\n"
                  "is corrupt, or an analysis file is not what its command writes for that model\n"
                  "(nothing drawn), 6 out of memory (gnuplot's too, under ulimit -v).\n",
        .operands = true};
    int dir;
    int code = cli_parse_options(&cmd, argc, argv, &dir);
    if (code != CLI_RUN) return code;
    a->format = formats[format];
    if (dir == argc) {
        cli_error("plot: which directory? (qkv plot DIR)");
        return EXIT_USAGE;
    }
    if (dir < argc - 1) {
        cli_error("plot: one directory only, got '%s' too", argv[dir + 1]);
        return EXIT_USAGE;
    }
    a->dir = argv[dir];
    return CLI_RUN;
}

int cmd_plot(int argc, char **argv, bool parse_only) {
    plot_args a;
    int code = plot_parse(argc, argv, &a);
    bool no_gnuplot;
    return code != CLI_RUN || parse_only ? code : cli_plot(a.dir, a.format, true, &no_gnuplot);
}
