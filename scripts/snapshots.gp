# snapshots.gp - an animated GIF of the attention forming during training: one frame per
# snapshot step, each frame a grid of every layer x head (as overview.gp).
#
#   gnuplot -c snapshots.gp OUT FORMAT DIR TASK LAYERS HEADS STEPS
#     FORMAT  ignored: the animation is always a GIF
#     DIR     the snapshots/ directory of a run: DIR/step<N>_layer<L>_head<H>.dat
#     STEPS   the steps N to show, in order, separated by spaces, e.g. "0 100 200 200 200"
out = ARG1; dir = ARG3; task = ARG4; L = int(ARG5); H = int(ARG6); steps = ARG7

pw = H > 4 ? 1200 / H : 300
ph = pw * 0.95
set terminal gif animate delay 25 loop 0 optimize size pw*H + 40, ph*L + 60 noenhanced font 'DejaVuSans,9'
set output out

first = word(steps, 1)
stats sprintf('%s/step%s_layer1_head1.dat', dir, first) matrix rowheaders columnheaders nooutput
n = STATS_size_x

set xrange [-0.5:n-0.5]
set yrange [n-0.5:-0.5]
set cbrange [0:1]
set palette defined (0 '#ffffff', 0.25 '#c6dbef', 0.5 '#6baed6', 0.75 '#2171b5', 1 '#08306b')
set tics scale 0 nomirror
if (n > 8) { set xtics rotate by 90 right }
if (n > 16) { unset xtics; unset ytics }   # too many labels for a small panel
set size ratio -1
unset key

do for [s in steps] {
    set multiplot layout L, H title sprintf('%s: attention at step %s', task, s)
    do for [l = 1:L] {
        do for [h = 1:H] {
            set title (L * H > 1 ? sprintf('layer %d, head %d', l, h) : '')
            plot sprintf('%s/step%s_layer%d_head%d.dat', dir, s, l, h) matrix rowheaders \
                 columnheaders using 1:2:3 with image pixels
        }
    }
    unset multiplot
}
