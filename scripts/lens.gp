# lens.gp - the logit lens of qkv plot (qkv lens --out RUN/lens.json): layer boundaries down,
# positions across, each cell shaded by the probability of its most probable token and, while
# the picture has room, labelled with that token.
#
#   gnuplot -c lens.gp OUT FORMAT DATA CELLS LONGEST [TITLE [XLABEL]]
#     OUT      the image to write
#     FORMAT   png (pngcairo) or svg
#     DATA     the probabilities, a matrix written by qkv plot: a '#' comment, a header line
#              "row\column c c ..." (the positions), then "after_B p p ..." per boundary
#     CELLS    the labels: a '#' comment, then "column row probability token" per cell
#     LONGEST  the length of the longest position label: they stand upright when side by side
#              they would run together
#     TITLE    the title (qkv plot's names the input), XLABEL the positions' label (qkv
#              plot's says which are marked '*': no target in training)
out = ARG1; fmt = ARG2; data = ARG3; cells = ARG4
longest = ARGC >= 5 ? int(ARG5) : 0
ttl = ARGC >= 6 ? ARG6 : 'logit lens: the most probable token after each layer, shaded by its probability'
xl = ARGC >= 7 ? ARG7 : 'position'

stats data matrix rowheaders columnheaders nooutput
nc = STATS_size_x
nr = int((STATS_records + STATS_invalid) / nc + 0.5)

w = nc <= 16 ? 760 : nc <= 64 ? 1000 : 1300
h = (nr <= 4 ? 360 : nr <= 8 ? 480 : 600) + 20 * (strstrt(ttl, "\n") > 0)  # a second title line
if (fmt eq 'svg') {
    set terminal svg size w,h dynamic noenhanced font 'Sans,13' background rgb 'white'
} else {
    set terminal pngcairo size w,h noenhanced font 'Sans,11'
}
set output out

set title ttl font ',13'
set xlabel xl
set ylabel 'after layer (0: the embeddings)'
set cblabel 'probability'
set xrange [-0.5:nc-0.5]
set yrange [nr-0.5:-0.5]            # after 0 on top, the last layer (the model's output) below
set cbrange [0:1]
set palette defined (0 '#ffffff', 0.25 '#c6dbef', 0.5 '#6baed6', 0.75 '#2171b5', 1 '#08306b')
set tics scale 0 nomirror
if (nc > 12 || nc * (longest * 7 + 8) > w - 160) { set xtics rotate by 90 right }
if (nc > 32) { set tics font ',7' }
if (nc > 64) { set xtics 0, nc / 32 }
unset key
set object 1 rectangle from graph 0, graph 0 to graph 1, graph 1 behind \
    fillcolor rgb '#d0d4d8' fillstyle solid noborder

# the tokens while each cell is wide enough for one (up to 40 positions), white on dark cells
if (nc <= 40) {
    plot data matrix rowheaders columnheaders using 1:2:3 with image pixels, \
         cells using 1:2:(stringcolumn(4)):($3 > 0.6 ? 0xffffff : 0x303030) with labels \
               textcolor rgb variable font (nc > 24 ? ',7' : ',9')
} else {
    plot data matrix rowheaders columnheaders using 1:2:3 with image pixels
}
