# matrix.gp - a labelled matrix as a heatmap: the analysis views of qkv plot (QK and OV circuits
# over the vocabulary, composition scores, the ablation grid, the patching map).
#
#   gnuplot -c matrix.gp OUT FORMAT DATA TITLE XLABEL YLABEL CBLABEL MODE [VALUES [LONGEST]]
#     OUT      the image to write
#     FORMAT   png (pngcairo) or svg
#     DATA     a matrix written by qkv plot: a '#' comment, a header line "row\column c c ...",
#              then one line per row: "label v v ..." (NaN: no value, drawn grey)
#     TITLE, XLABEL, YLABEL, CBLABEL   the texts
#     MODE     diverging (a scale symmetric about 0: blue below, red above) or sequential
#              (0 white to 1 dark, for scores in [0, 1])
#     VALUES   1: print each value in its cell while the matrix is small (12 x 12 at most)
#     LONGEST  (in the same argument, after a space) the length of the longest label: column
#              labels stand upright when side by side they would run together
out = ARG1; fmt = ARG2; data = ARG3; ttl = ARG4
xl = ARG5; yl = ARG6; cbl = ARG7; mode = ARG8
values = ARGC >= 9 ? int(word(ARG9, 1)) : 1
longest = ARGC >= 9 && words(ARG9) >= 2 ? int(word(ARG9, 2)) : 0

stats data matrix rowheaders columnheaders nooutput
nc = STATS_size_x
# rows from the count of cells: STATS_size_y leaves out rows that hold a NaN
nr = int((STATS_records + STATS_invalid) / nc + 0.5)
big = STATS_max > -STATS_min ? STATS_max : -STATS_min
if (big <= 0 || big != big) { big = 1 }

# the picture grows with the matrix (to a limit) so that 64 heads or 128 tokens stay readable
w = nc <= 16 ? 640 : nc <= 64 ? 900 : 1200
h = nr <= 16 ? 580 : nr <= 64 ? 860 : 1160
if (fmt eq 'svg') {
    set terminal svg size w,h dynamic noenhanced font 'Sans,13' background rgb 'white'
} else {
    set terminal pngcairo size w,h noenhanced font 'Sans,11'
}
set output out

set title ttl font ',13'
set xlabel xl
set ylabel yl
set cblabel cbl
set xrange [-0.5:nc-0.5]
set yrange [nr-0.5:-0.5]            # the first row on top, as in the matrix
if (mode eq 'sequential') {
    set cbrange [0:1]
    set palette defined (0 '#ffffff', 0.25 '#c6dbef', 0.5 '#6baed6', 0.75 '#2171b5', 1 '#08306b')
} else {
    set cbrange [-big:big]
    set palette defined (-1 '#2166ac', -0.5 '#92c5de', 0 '#f7f7f7', 0.5 '#f4a582', 1 '#b2182b')
}
set tics scale 0 nomirror
# about 7 pixels a character, over a plot some 160 pixels narrower than the picture
if (nc > 12 || nc * (longest * 7 + 8) > w - 160) { set xtics rotate by 90 right }
if (nc > 32 || nr > 32) { set tics font ',7' }
if (nc > 64) { set xtics 0, nc / 32 }   # every few columns past 64: labels would overlap
if (nr > 64) { set ytics 0, nr / 32 }
if (nc <= 40 && nr <= 40) { set size ratio -1 }
unset key
# cells without a value (NaN) are left out of the image and show this grey behind it
set object 1 rectangle from graph 0, graph 0 to graph 1, graph 1 behind \
    fillcolor rgb '#d0d4d8' fillstyle solid noborder

# one row or one column: gnuplot draws no image of it, so each cell is then a box
set style fill solid noborder
cells = (nr < 2 || nc < 2) ? 'using 1:2:(0.5):(0.5):3 with boxxyerror fillcolor palette' \
                           : 'using 1:2:3 with image pixels'
if (values && nc <= 12 && nr <= 12) {
    plot data matrix rowheaders columnheaders @cells, \
         data matrix rowheaders columnheaders \
              using 1:2:($3 == $3 ? sprintf('%.2f', $3) : ''):(abs($3) > 0.6 * (mode eq 'sequential' ? 1 : big) ? 0xffffff : 0x000000) \
              with labels textcolor rgb variable font ',9'
} else {
    plot data matrix rowheaders columnheaders @cells
}
