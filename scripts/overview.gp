# overview.gp - every layer x head of a model in one grid of attention heatmaps.
#
#   gnuplot -c overview.gp OUT FORMAT DIR TASK LAYERS HEADS
#     DIR     the attention/ directory of a run: DIR/layer<L>_head<H>.dat (see attention.gp)
#     TASK    the task's name, for the title
#     LAYERS, HEADS   the grid: one row per layer, one column per head
out = ARG1; fmt = ARG2; dir = ARG3; task = ARG4; L = int(ARG5); H = int(ARG6)

pw = H > 5 ? 1500 / H : 300         # panel size in pixels
ph = pw * 0.95
if (fmt eq 'svg') {
    set terminal svg size pw*H + 60, ph*L + 70 dynamic noenhanced font 'Sans,11' background rgb 'white'
} else {
    set terminal pngcairo size pw*H + 60, ph*L + 70 noenhanced font 'Sans,9'
}
set output out

stats sprintf('%s/layer1_head1.dat', dir) matrix rowheaders columnheaders nooutput
n = STATS_size_x

set xrange [-0.5:n-0.5]
set yrange [n-0.5:-0.5]             # queries top to bottom
set cbrange [0:1]
set palette defined (0 '#ffffff', 0.25 '#c6dbef', 0.5 '#6baed6', 0.75 '#2171b5', 1 '#08306b')
set tics scale 0 nomirror
if (n > 8) { set xtics rotate by 90 right }
if (n > 16) { unset xtics; unset ytics }   # too many labels for a small panel
set size ratio -1
unset key

set multiplot layout L, H title sprintf('%s: attention of the held-out example (rows: queries, columns: keys)', task) font ',12'
do for [l = 1:L] {
    do for [h = 1:H] {
        set title sprintf('layer %d, head %d', l, h)
        plot sprintf('%s/layer%d_head%d.dat', dir, l, h) matrix rowheaders columnheaders \
             using 1:2:3 with image pixels
    }
}
unset multiplot
