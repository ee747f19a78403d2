# attention.gp - one attention map as a heatmap: queries down, keys across, tokens on both axes.
#
#   gnuplot -c attention.gp OUT FORMAT DATA TITLE [CAUSAL [TOKENS]]
#     OUT     the image to write
#     FORMAT  png (pngcairo) or svg
#     DATA    a matrix written by qkv train: a '#' comment, a header line "query\key tok tok ...",
#             then one line per query: "tok w w w ..." (row i = query i, column j = key j)
#     TITLE   the title, e.g. "copy: attention of layer 1, head 1"
#     CAUSAL  1 if a causal mask dropped every key after the query (drawn hatched grey, not as
#             a weight of 0), else 0 (the default)
#     TOKENS  the longest label and the padding (below)
out = ARG1; fmt = ARG2; data = ARG3; ttl = ARG4
causal = ARGC >= 5 ? int(ARG5) : 0
# TOKENS (from qkv plot): "LONGEST KEYS QUERIES", the length of the longest token label, then
# one flag per key and per query, 1 for padding ('-': none). Padding holds no token: its cells
# are hatched as masked ones are, never drawn as weights.
tokens = ARGC >= 6 ? ARG6 : '0 - -'
longest = int(word(tokens, 1))
padk = word(tokens, 2); padq = word(tokens, 3)
padded(k, q) = padk[int(k)+1:int(k)+1] eq '1' || padq[int(q)+1:int(q)+1] eq '1'
anypad = strstrt(padk.padq, '1') > 0

if (fmt eq 'svg') {
    set terminal svg size 620,560 dynamic noenhanced font 'Sans,13' background rgb 'white'
} else {
    set terminal pngcairo size 620,560 noenhanced font 'Sans,11'
}
set output out

stats data matrix rowheaders columnheaders nooutput
nk = STATS_size_x   # keys (columns)
nq = STATS_size_y   # queries (rows)

set title ttl font ',13'
set xlabel 'key (position:token)'
set ylabel 'query (position:token)'
set cblabel 'attention weight'
set xrange [-0.5:nk-0.5]
set yrange [nq-0.5:-0.5]            # query 1 on top, as in the matrix A
set cbrange [0:1]                   # weights of a row are in [0, 1] and sum to 1
set palette defined (0 '#ffffff', 0.25 '#c6dbef', 0.5 '#6baed6', 0.75 '#2171b5', 1 '#08306b')
set tics scale 0 nomirror
# upright key labels when side by side they would run together (about 7 pixels a character
# over the 380 of the map)
if (nk > 12 || nk * (longest * 7 + 8) > 380) { set xtics rotate by 90 right }
# long sequences: smaller token labels, and none at all past 64 tokens (they would overlap)
if (nk > 32) { set tics font ',6' }
if (nk > 64) { unset xtics; unset ytics }
set size ratio -1
unset key
# masked cells are left out of the image (NaN) and show this hatched grey behind it
# (aligned at the end when there are fewer queries than keys, as in cross-attention)
masked(k, q, w) = (causal && k > q + nk - nq) || padded(k, q) ? NaN : w
if (causal || anypad) {
    set object 1 rectangle from graph 0, graph 0 to graph 1, graph 1 behind \
        fillcolor rgb '#8c96a0' fillstyle pattern 5 noborder
    # said under the keys, where it meets no label however long
    set xlabel 'key (position:token); '.(causal && anypad ? 'hatched: masked (causal) or padding' : \
        causal ? 'hatched: masked (causal)' : 'hatched: padding')
}

# With few tokens, print each weight in its cell (white on dark cells); hide the ~0 ones.
if (nk <= 12) {
    plot data matrix rowheaders columnheaders using 1:2:(masked($1, $2, $3)) with image pixels, \
         data matrix rowheaders columnheaders \
              using 1:2:($3 >= 0.005 && !(causal && $1 > $2 + nk - nq) && !padded($1, $2) ? sprintf('%.2f', $3) : ''):($3 > 0.55 ? 0xffffff : 0x000000) \
              with labels textcolor rgb variable
} else {
    plot data matrix rowheaders columnheaders using 1:2:(masked($1, $2, $3)) with image pixels
}
