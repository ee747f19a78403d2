# grok_attention.gp - a modular model's attention from = to a and to b over every pair, one
# panel each per head (docs/grokking.md, "Pictures"): qkv plot's
# plots/grok_attention_layer<L>.png.
#
#   gnuplot -c grok_attention.gp OUT FORMAT DATA TITLE STEP LAYER HEADS P
#     DATA    plots/grok_attention_layer<L>.dat: '#' comments, then for each head two P x P
#             blocks (rows a, columns b; two blank lines apart), the weight on a, then on b
#     TITLE   the run and its task, "grok13: (a + b) mod 13"
#     STEP, LAYER, HEADS, P   the model's step, the layer, its heads, the modulus
# Each head's two panels are one column: on a above, on b below. The rest of each row's
# weight (1 - a - b) is on = itself.
out = ARG1; fmt = ARG2; data = ARG3; ttl = ARG4; step = ARG5
layer = int(ARG6); heads = int(ARG7); P = int(ARG8)
cols = heads < 8 ? heads : 8                      # heads per row of panels
bands = int((heads + cols - 1) / cols)             # rows of (a, b) panel pairs
panel = cols <= 4 ? 230 : 160
width = 90 + cols * panel + 90; height = 120 + bands * 2 * (panel + 10)
if (width < 760) { width = 760 }   # room for the title's lines

if (fmt eq 'svg') {
    set terminal svg size width,height dynamic noenhanced font 'Sans,11' background rgb 'white'
} else {
    set terminal pngcairo size width,height noenhanced font 'Sans,10'
}
set output out
set palette defined (0 '#ffffff', 0.25 '#c6dbef', 0.5 '#6baed6', 0.75 '#2171b5', 1 '#08306b')
set cbrange [0:1]
set xrange [-0.5:P - 0.5]
set yrange [-0.5:P - 0.5]                         # a = 0 at the bottom
set size ratio -1
set tics out nomirror scale 0.5 font ',8'
tic = P <= 16 ? (P <= 8 ? 1 : 2) : P <= 40 ? 5 : P <= 120 ? 20 : 100
set xtics 0, tic
set ytics 0, tic
unset key
set multiplot title sprintf("%s, step %d: layer %d's attention from = to a and to b, for every pair\n(a up the side, b across; the rest of each row's weight is on = itself)", ttl, int(step), layer) font ',12'
# margins in screen units around a grid of panels, the colour bar at the right
# (centred when the title's lines make the picture wider than the panels)
left_px = (width - cols * panel - 90 + 60) / 2.0
left = left_px / width; right = (left_px + cols * panel) / width; top = 1 - 78.0 / height; bottom = 48.0 / height
pw = (right - left) / cols; ph = (top - bottom) / (2 * bands)
do for [h = 1:heads] {
    c = (h - 1) % cols; b = int((h - 1) / cols)
    do for [to = 0:1] {
        r = 2 * b + to
        set lmargin at screen left + c * pw + 0.1 * pw
        set rmargin at screen left + (c + 1) * pw - 0.02 * pw
        set tmargin at screen top - r * ph - 0.14 * ph
        set bmargin at screen top - (r + 1) * ph + 0.08 * ph
        set title sprintf('head %d: on %s', h, to ? 'b' : 'a') offset 0,-0.6 font ',10'
        if (h == heads && to == 1) {
            set colorbox user origin screen right + 0.015, screen bottom + 0.1 size screen 0.015, screen 0.6
            set cblabel 'attention weight' font ',10'
        } else {
            unset colorbox
        }
        xl = to == 1 && (b == bands - 1 || h + cols > heads) ? 'b' : ''
        yl = c == 0 ? 'a' : ''
        set xlabel xl offset 0,0.4
        set ylabel yl offset 1.5,0
        plot data index (2 * (h - 1) + to) matrix with image
    }
}
unset multiplot
