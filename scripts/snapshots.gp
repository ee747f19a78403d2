# snapshots.gp - an animated GIF of the attention forming during training: one frame per
# snapshot step, each frame a grid of every layer x head (as overview.gp).
#
#   gnuplot -c snapshots.gp OUT FORMAT DIR TASK LAYERS HEADS STEPS [CAUSAL]
#     FORMAT  ignored: the animation is always a GIF
#     DIR     the snapshots/ directory of a run: DIR/step<N>_layer<L>_head<H>.dat
#     STEPS   the steps N to show, in order, separated by spaces, e.g. "0 100 200 200 200"
#     CAUSAL  1 if a causal mask dropped every key after the query (drawn hatched grey)
# The GIF stays small: panels of at most 240 pixels, one colour bar (a 1 x 1 grid only; more
# panels share the scale of the overview), and the frames plot.c picks (at most 40).
out = ARG1; dir = ARG3; task = ARG4; L = int(ARG5); H = int(ARG6); steps = ARG7
causal = ARGC >= 8 ? int(ARG8) : 0

pw = L * H == 1 ? 240 : H > 4 ? 720 / H : 180
ph = pw * 0.95
set terminal gif animate delay 25 loop 0 optimize size pw*H + (L * H == 1 ? 110 : 60), ph*L + 80 noenhanced font 'DejaVuSans,8'
set output out

first = word(steps, 1)
stats sprintf('%s/step%s_layer1_head1.dat', dir, first) matrix rowheaders columnheaders nooutput
n = STATS_size_x

set xrange [-0.5:n-0.5]
set yrange [n-0.5:-0.5]
set cbrange [0:1]
set palette defined (0 '#ffffff', 0.25 '#c6dbef', 0.5 '#6baed6', 0.75 '#2171b5', 1 '#08306b')
set tics scale 0 nomirror
if (n > 8 || pw / n < 30) { set xtics rotate by 90 right }
if (n > 16) { unset xtics; unset ytics }   # too many labels for a small panel
set size ratio -1
unset key
if (L * H > 1) { unset colorbox }
masked(k, q, w) = causal && k > q ? NaN : w
if (causal) {
    set object 1 rectangle from graph 0, graph 0 to graph 1, graph 1 behind \
        fillcolor rgb '#8c96a0' fillstyle pattern 5 noborder
}

do for [s in steps] {
    set multiplot layout L, H title sprintf('%s: attention at step %s', task, s)
    do for [l = 1:L] {
        do for [h = 1:H] {
            set title (L * H > 1 ? sprintf('layer %d, head %d', l, h) : '')
            set xlabel (l == L ? 'key' : '')
            set ylabel (h == 1 ? 'query' : '')
            plot sprintf('%s/step%s_layer%d_head%d.dat', dir, s, l, h) matrix rowheaders \
                 columnheaders using 1:2:(masked($1, $2, $3)) with image pixels
        }
    }
    unset multiplot
}
