# overview.gp - every layer x head of a model in one grid of attention heatmaps, from 1 x 1 to
# 8 x 8: the panels share one colour bar, token labels appear only on the outer panels (and
# not at all when a panel is too small for them), and the title fits the width.
#
#   gnuplot -c overview.gp OUT FORMAT DIR TASK LAYERS HEADS [CAUSAL [SUBJECT [TOKENS]]]
#     DIR     the attention/ directory of a run: DIR/layer<L>_head<H>.dat (see attention.gp)
#     TASK    the task's name, for the title
#     LAYERS, HEADS   the grid: one row per layer, one column per head
#     CAUSAL  1 if a causal mask dropped every key after the query (drawn hatched grey)
#     SUBJECT what the maps are of (default: the held-out example)
#     TOKENS  the longest label and the padding (below)
out = ARG1; fmt = ARG2; dir = ARG3; task = ARG4; L = int(ARG5); H = int(ARG6)
causal = ARGC >= 7 ? int(ARG7) : 0
subject = ARGC >= 8 ? ARG8 : 'the held-out example'
# TOKENS (from qkv plot): "LONGEST KEYS QUERIES", the length of the longest token label, then
# one flag per key and per query, 1 for padding ('-': none). Padding holds no token: its cells
# are hatched as masked ones are, never drawn as weights.
tokens = ARGC >= 9 ? ARG9 : '0 - -'
longest = int(word(tokens, 1))
padk = word(tokens, 2); padq = word(tokens, 3)
padded(k, q) = padk[int(k)+1:int(k)+1] eq '1' || padq[int(q)+1:int(q)+1] eq '1'
anypad = strstrt(padk.padq, '1') > 0

pw = H > 5 ? 1500 / H : 300         # panel size in pixels
pw = pw < 150 ? 150 : pw
# room for labels (as long as the longest, about 6 pixels a character), the colour bar, the title
left = 70 > longest * 6 + 20 ? 70 : longest * 6 + 20
bottom = 50 > longest * 6 + 20 ? 50 : longest * 6 + 20
right = 90; top = 70
W = pw * H + left + right
Hh = pw * L + top + bottom
if (fmt eq 'svg') {
    set terminal svg size W, Hh dynamic noenhanced font 'Sans,11' background rgb 'white'
} else {
    set terminal pngcairo size W, Hh noenhanced font 'Sans,9'
}
set output out

stats sprintf('%s/layer1_head1.dat', dir) matrix rowheaders columnheaders nooutput
n = STATS_size_x
kshift = STATS_size_x - STATS_size_y  # keys past the queries: the causal mask is aligned at the end

set xrange [-0.5:n-0.5]
set yrange [STATS_size_y-0.5:-0.5]  # queries top to bottom (an encoder-decoder has fewer rows than keys)
set cbrange [0:1]
set palette defined (0 '#ffffff', 0.25 '#c6dbef', 0.5 '#6baed6', 0.75 '#2171b5', 1 '#08306b')
set tics scale 0 nomirror
cell = (pw - 20.0) / n              # pixels per cell
labels = cell >= 12                 # room for a token label per cell
# one size for every panel's labels: named at each `set xtics`/`set ytics`, since a tic set
# again after `unset` takes the terminal's font, not the one given before
tf = cell < 14 ? ',7' : fmt eq 'svg' ? ',11' : ',9'
unset key
masked(k, q, w) = (causal && k > q + kshift) || padded(k, q) ? NaN : w
if (causal || anypad) {
    set object 1 rectangle from graph 0, graph 0 to graph 1, graph 1 behind \
        fillcolor rgb '#8c96a0' fillstyle pattern 5 noborder
}

# The title: one line when the grid is wide enough, else two shorter ones.
hatched = causal && anypad ? '; hatched: masked or padding' : causal ? '; hatched: masked' : anypad ? '; hatched: padding' : ''
long = sprintf('%s: attention of %s (rows: queries, columns: keys%s)', task, subject, hatched)
short = sprintf("%s: attention of %s\n(rows: queries, columns: keys%s)", task, subject, hatched)
ttl = strlen(long) * 7 < W ? long : short
tfont = W < 420 ? ',10' : ',12'

# Panels placed by hand (screen fractions), so that tick labels never change their size.
fx(c) = (left + c * pw) / (1.0 * W)
fy(r) = 1 - (top + r * pw) / (1.0 * Hh)
set multiplot title ttl font tfont
set lmargin 0; set rmargin 0; set tmargin 0; set bmargin 0
unset colorbox
do for [l = 1:L] {
    do for [h = 1:H] {
        set lmargin at screen fx(h - 1) + 4.0 / W
        set rmargin at screen fx(h) - 4.0 / W
        set tmargin at screen fy(l - 1) - 16.0 / Hh
        set bmargin at screen fy(l) + 4.0 / Hh
        set title (pw >= 200 ? sprintf('layer %d, head %d', l, h) : sprintf('L%d H%d', l, h)) offset 0, -0.6
        if (labels && h == 1) { set ytics scale 0 nomirror font tf } else { unset ytics }
        if (labels && l == L) { set xtics scale 0 nomirror rotate by 90 right font tf } else { unset xtics }
        if (l == L && h == H) {       # the one colour bar, right of the grid
            set colorbox user origin screen fx(H) + 20.0 / W, screen fy(L) + 4.0 / Hh \
                size screen 14.0 / W, screen (pw * L - 20.0) / Hh
            set cbtics font ',8'
        }
        plot sprintf('%s/layer%d_head%d.dat', dir, l, h) matrix rowheaders columnheaders \
             using 1:2:(masked($1, $2, $3)) with image pixels
    }
}
unset multiplot
