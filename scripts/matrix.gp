# matrix.gp - a labelled matrix as a heatmap: the analysis views of qkv plot (QK and OV circuits
# over the vocabulary, composition scores, the ablation grid, the patching map).
#
#   gnuplot -c matrix.gp OUT FORMAT DATA TITLE XLABEL YLABEL CBLABEL MODE [VALUES [LONGEST]]
#     OUT      the image to write
#     FORMAT   png (pngcairo) or svg
#     DATA     a matrix written by qkv plot: a '#' comment, a header line "row\column c c ...",
#              then one line per row: "label v v ..." (NaN: no value, drawn grey)
#     TITLE, XLABEL, YLABEL, CBLABEL   the texts (the title may hold line breaks: qkv plot's
#              second line names what the picture was made of)
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

# The title's lines, and its longest line in characters.
tn = 1; tl = 0; rest = ttl
while (strstrt(rest, "\n") > 0) {
    i = strstrt(rest, "\n")
    tl = i - 1 > tl ? i - 1 : tl
    rest = rest[i + 1:]
    tn = tn + 1
}
tl = strlen(rest) > tl ? strlen(rest) : tl

# The picture: a plot area (the cells) inside fixed margins, in pixels. The area may grow with
# the matrix (to a limit) so that 64 heads or 128 tokens stay readable; a matrix of square
# cells (up to 40 x 40) gets exactly the area its cells take, so a wide and shallow one (heads
# by key positions) leaves no empty half. About 7 pixels a character of a label.
rotated = nc > 12 || nc * (longest * 7 + 8) > (nc <= 16 ? 640 : nc <= 64 ? 900 : 1200) - 160
ml = 60 + longest * 7                     # the y label and the row labels
mr = 120                                  # the colour bar, its ticks and its label
mt = 20 + 22 * tn                         # the title's lines
mb = rotated ? 50 + longest * 7 : 64      # the column labels and the x label
aw = (nc <= 16 ? 640 : nc <= 64 ? 900 : 1200) - ml - mr
ah = (nr <= 16 ? 580 : nr <= 64 ? 860 : 1160) - mt - mb
aw = aw < 160 ? 160 : aw
ah = ah < 160 ? 160 : ah
if (nc <= 40 && nr <= 40) {
    cell = aw / (1.0 * nc) < ah / (1.0 * nr) ? aw / (1.0 * nc) : ah / (1.0 * nr)
    aw = int(cell * nc); ah = int(cell * nr)
}
# wide enough for the longest title line (about 9 pixels a character at its size); the colour
# bar beside the area at least 120 pixels high (a shallow area is centred beside it), so that
# its ticks have room
w = ml + aw + mr
tw = tl * 9 + 40
pad = tw > w ? (tw - w) / 2 : 0
w = w + 2 * pad
band = ah < 120 ? 120 : ah
h = mt + band + mb
if (fmt eq 'svg') {
    set terminal svg size w,h dynamic noenhanced font 'Sans,13' background rgb 'white'
} else {
    set terminal pngcairo size w,h noenhanced font 'Sans,11'
}
set output out
top = mt + (band - ah) / 2
set lmargin at screen (ml + pad) / (1.0 * w)
set rmargin at screen (ml + pad + aw) / (1.0 * w)
set tmargin at screen 1 - top / (1.0 * h)
set bmargin at screen 1 - (top + ah) / (1.0 * h)
set colorbox user origin screen (ml + pad + aw + 12) / (1.0 * w), screen mb / (1.0 * h) \
    size screen 18.0 / w, screen band / (1.0 * h)

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
# the colour bar's ticks: a round step (1, 2 or 5 times a power of ten) that leaves each tick
# label some 22 pixels of the bar's height, so that they never overlap
span = mode eq 'sequential' ? 1.0 : 2.0 * big
most = int(band / 22) > 6 ? 6 : int(band / 22)   # and no more than 6 steps, as gnuplot would
raw = span / most
p10 = 10 ** floor(log10(raw))
step = raw <= p10 ? p10 : raw <= 2 * p10 ? 2 * p10 : raw <= 5 * p10 ? 5 * p10 : 10 * p10
set cbtics step
set tics scale 0 nomirror
if (rotated) { set xtics rotate by 90 right }
if (nc > 32 || nr > 32) { set tics font ',7' }
if (nc > 64) { set xtics 0, nc / 32 }   # every few columns past 64: labels would overlap
if (nr > 64) { set ytics 0, nr / 32 }
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
