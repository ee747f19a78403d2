# grads.gp - what backpropagation sees inside one attention head, for one example:
# the weights A = softmax(S), their gradient dA = dLoss/dA, and the scores' gradient
# dS = A * (dA - rowsum(dA * A)) (the softmax backward pass; zero where the mask dropped a key).
#
#   gnuplot -c grads.gp OUT FORMAT A_DATA DA_DATA DS_DATA TITLE [CAUSAL [SUBJECT [TOKENS]]]
#     *_DATA  matrices in the format of attention.gp
#     CAUSAL  1 if a causal mask dropped every key after the query: those cells are drawn
#             hatched grey in all three, as the page draws them (A and dS are 0 there by
#             construction; dA's numbers there reach no score), and dA's colour range is that
#             of its other cells
#     SUBJECT what the maps are of (default: the fixed held-out example)
#     TOKENS  the longest label and the padding (below): padding is hatched in all three
out = ARG1; fmt = ARG2; fa = ARG3; fda = ARG4; fds = ARG5; ttl = ARG6
causal = ARGC >= 7 ? int(ARG7) : 0
subject = ARGC >= 8 ? ARG8 : 'the fixed held-out example'
# TOKENS (from qkv plot): "LONGEST KEYS QUERIES", the length of the longest token label, then
# one flag per key and per query, 1 for padding ('-': none). Padding holds no token: its cells
# are hatched as masked ones are, never drawn as weights.
tokens = ARGC >= 9 ? ARG9 : '0 - -'
longest = int(word(tokens, 1))
padk = word(tokens, 2); padq = word(tokens, 3)
padded(k, q) = padk[int(k)+1:int(k)+1] eq '1' || padq[int(q)+1:int(q)+1] eq '1'
anypad = strstrt(padk.padq, '1') > 0
masked(k, q, w) = (causal && k > q + kshift) || padded(k, q) ? NaN : w

if (fmt eq 'svg') {
    set terminal svg size 1500,500 dynamic noenhanced font 'Sans,12' background rgb 'white'
} else {
    set terminal pngcairo size 1500,500 noenhanced font 'Sans,10'
}
set output out

# stats runs before any range is set (it skips points outside them) and before multiplot
stats fa matrix rowheaders columnheaders nooutput
n = STATS_size_x
kshift = STATS_size_x - STATS_size_y  # keys past the queries: the causal mask is aligned at the end
# symmetric colour ranges [-r, r] for dA and dS, so that white is exactly zero
# (a masked cell counts as 0: it moves neither end of a range symmetric about 0)
stats fda matrix rowheaders columnheaders using (v = masked($1, $2, $3), v == v ? v : 0) nooutput
rda = abs(STATS_min) > abs(STATS_max) ? abs(STATS_min) : abs(STATS_max)
stats fds matrix rowheaders columnheaders nooutput
rds = abs(STATS_min) > abs(STATS_max) ? abs(STATS_min) : abs(STATS_max)
set xrange [-0.5:n-0.5]
set yrange [STATS_size_y-0.5:-0.5]  # queries top to bottom (an encoder-decoder has fewer rows than keys)
set tics scale 0 nomirror
if (n > 10 || n * (longest * 6 + 8) > 300) { set xtics rotate by 90 right }  # never run together
if (n > 24) { set tics font ',6' }
if (n > 48) { unset xtics; unset ytics }
set size ratio -1
set xlabel 'key (position:token)'
set ylabel 'query (position:token)'
unset key
blues = "defined (0 '#ffffff', 0.25 '#c6dbef', 0.5 '#6baed6', 0.75 '#2171b5', 1 '#08306b')"
# blue below zero, white at zero, red above: the range is made symmetric around 0 below
diverging = "defined (-1 '#2166ac', -0.5 '#92c5de', 0 '#f7f7f7', 0.5 '#f4a582', 1 '#b2182b')"

set multiplot layout 1, 3 title ttl.' ('.subject.', one backward pass of its loss)' font ',12'

if (causal || anypad) {
    set object 1 rectangle from graph 0, graph 0 to graph 1, graph 1 behind \
        fillcolor rgb '#8c96a0' fillstyle pattern 5 noborder
}
set title 'A = softmax(S), the weights'.(causal && anypad ? ' (hatched: masked or padding)' : \
    causal ? ' (hatched: masked)' : anypad ? ' (hatched: padding)' : '')
eval 'set palette '.blues
set cbrange [0:1]
set format cb '%g'
plot fa matrix rowheaders columnheaders using 1:2:(masked($1, $2, $3)) with image pixels

hatched = causal && anypad ? ' (hatched: masked or padding)' : causal ? ' (hatched: masked)' : \
    anypad ? ' (hatched: padding)' : ''
do for [k = 1:2] {
    f = k == 1 ? fda : fds
    set title (k == 1 ? 'dA = dLoss/dA'.hatched : 'dS = dLoss/dS (scores, after scale and mask)')
    r = k == 1 ? rda : rds
    if (r == 0) { r = 1 }
    eval 'set palette '.diverging
    set cbrange [-r:r]
    set format cb '%.1e'
    plot f matrix rowheaders columnheaders using 1:2:(masked($1, $2, $3)) with image pixels
}
unset multiplot
