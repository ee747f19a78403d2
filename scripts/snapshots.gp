# snapshots.gp - an animated GIF of the attention forming during training: one frame per
# snapshot step, each frame a grid of every layer x head (placed as in overview.gp).
#
#   gnuplot -c snapshots.gp OUT FORMAT DIR TASK LAYERS HEADS STEPS [CAUSAL [TOKENS]]
#     FORMAT  ignored: the animation is always a GIF
#     DIR     the snapshots/ directory of a run: DIR/step<N>_layer<L>_head<H>.dat
#     STEPS   the steps N to show, in order, separated by spaces, e.g. "0 100 200 200 200"
#     CAUSAL  1 if a causal mask dropped every key after the query (drawn hatched grey)
# The GIF stays small: panels of at most 240 pixels (90 in an 8 x 8 grid), one colour bar,
# token labels only on the outer panels and only when a panel has room for them, and the
# frames src/plot/plots.c picks (at most 40, fewer for bigger grids).
#     TOKENS  the longest label and the padding (below)
out = ARG1; dir = ARG3; task = ARG4; L = int(ARG5); H = int(ARG6); steps = ARG7
causal = ARGC >= 8 ? int(ARG8) : 0
# TOKENS (from qkv plot): "LONGEST KEYS QUERIES", the length of the longest token label, then
# one flag per key and per query, 1 for padding ('-': none). Padding holds no token: its cells
# are hatched as masked ones are, never drawn as weights.
tokens = ARGC >= 9 ? ARG9 : '0 - -'
longest = int(word(tokens, 1))
padk = word(tokens, 2); padq = word(tokens, 3)
padded(k, q) = padk[int(k)+1:int(k)+1] eq '1' || padq[int(q)+1:int(q)+1] eq '1'
anypad = strstrt(padk.padq, '1') > 0

pw = L * H == 1 ? 240 : H > 4 ? 720 / H : 180
left = 60 > longest * 5 + 24 ? 60 : longest * 5 + 24      # the longest label fits
bottom = 50 > longest * 5 + 24 ? 50 : longest * 5 + 24
right = 60; top = 44
W = pw * H + left + right
Hh = pw * L + top + bottom
set terminal gif animate delay 25 loop 0 optimize size W, Hh noenhanced font 'DejaVuSans,8'
set output out

first = word(steps, 1)
stats sprintf('%s/step%s_layer1_head1.dat', dir, first) matrix rowheaders columnheaders nooutput
n = STATS_size_x
kshift = STATS_size_x - STATS_size_y  # keys past the queries: the causal mask is aligned at the end

set xrange [-0.5:n-0.5]
set yrange [STATS_size_y-0.5:-0.5]  # queries top to bottom (an encoder-decoder has fewer rows than keys)
set cbrange [0:1]
set palette defined (0 '#ffffff', 0.25 '#c6dbef', 0.5 '#6baed6', 0.75 '#2171b5', 1 '#08306b')
cell = (pw - 16.0) / n              # pixels per cell
labels = cell >= 14
unset key
masked(k, q, w) = (causal && k > q + kshift) || padded(k, q) ? NaN : w
if (causal || anypad) {
    set object 1 rectangle from graph 0, graph 0 to graph 1, graph 1 behind \
        fillcolor rgb '#8c96a0' fillstyle pattern 5 noborder
}
fx(c) = (left + c * pw) / (1.0 * W)
fy(r) = 1 - (top + r * pw) / (1.0 * Hh)

do for [s in steps] {
    set multiplot title sprintf('%s: attention at step %s', task, s) font ',10'
    unset colorbox
    do for [l = 1:L] {
        do for [h = 1:H] {
            set lmargin at screen fx(h - 1) + 3.0 / W
            set rmargin at screen fx(h) - 3.0 / W
            set tmargin at screen fy(l - 1) - (L * H > 1 ? 13.0 : 3.0) / Hh
            set bmargin at screen fy(l) + 3.0 / Hh
            set title (L * H == 1 ? '' : pw >= 150 ? sprintf('layer %d, head %d', l, h) : sprintf('L%d H%d', l, h)) offset 0, -0.8
            if (labels && h == 1) { set ytics scale 0 nomirror } else { unset ytics }
            if (labels && l == L) { set xtics scale 0 nomirror rotate by 90 right } else { unset xtics }
            set xlabel (l == L ? 'key' : '')
            set ylabel (h == 1 ? 'query' : '') offset (labels ? 0 : 1), 0
            if (l == L && h == H) {
                set colorbox user origin screen fx(H) + 12.0 / W, screen fy(L) + 3.0 / Hh \
                    size screen 10.0 / W, screen (pw * L - 16.0) / Hh
            }
            plot sprintf('%s/step%s_layer%d_head%d.dat', dir, s, l, h) matrix rowheaders \
                 columnheaders using 1:2:(masked($1, $2, $3)) with image pixels
        }
    }
    unset multiplot
}
