# grok_neurons.gp - a modular model's MLP neurons grouped by frequency: each neuron's share of
# variance over the pairs in each frequency, the neurons grouped by their cluster (the
# frequency of their largest share; docs/grokking.md, "Neurons") (docs/grokking.md,
# "Pictures"): qkv plot's plots/grok_neurons.png.
#
#   gnuplot -c grok_neurons.gp OUT FORMAT DATA TITLE STEP CLUSTERS KEYS
#     DATA      plots/grok_neurons.dat: '#' comments (the second "# neuron\frequency 1 2 ..."),
#               then a row per neuron, "layer.neuron share share ..." (NaN: a constant neuron)
#     TITLE     the run and its task, "grok13: (a + b) mod 13"
#     STEP      the model's step
#     CLUSTERS  "k:n k:n ...": each group of rows, in order, its frequency (0: constant
#               neurons) and how many neurons it holds
#     KEYS      the model's key frequencies, space-separated ("" for none)
out = ARG1; fmt = ARG2; data = ARG3; ttl = ARG4; step = ARG5; clusters = ARG6; keys = ARG7

stats data matrix rowheaders nooutput
nc = STATS_size_x                                  # frequencies 1 .. nc
nr = int((STATS_records + STATS_invalid) / nc + 0.5) # neurons

if (fmt eq 'svg') {
    set terminal svg size 1000,640 dynamic noenhanced font 'Sans,12' background rgb 'white'
} else {
    set terminal pngcairo size 1000,640 noenhanced font 'Sans,11'
}
set output out
set title sprintf("%s, step %s: each MLP neuron's share of variance in each frequency\n(%d neurons at =, grouped by the frequency of their largest share)", ttl, step, nr) font ',12'
set xlabel 'frequency k'
set ylabel 'neurons, by cluster (how many neurons)' offset -9,0
set cblabel "share of the neuron's variance"
set xrange [0.5:nc + 0.5]
set yrange [nr - 0.5:-0.5]                         # the first row on top
set cbrange [0:1]
set palette defined (0 '#ffffff', 0.25 '#c6dbef', 0.5 '#6baed6', 0.75 '#2171b5', 1 '#08306b')
set tics nomirror out
every = nc <= 24 ? 1 : nc <= 60 ? 5 : 10
set xtics every
if (every > 1) { set xtics add (1) }
do for [i = 1:words(keys)] {
    k = int(word(keys, i))
    set xtics add (sprintf('%d*', k) k)
}
# each cluster named at its middle where there is room (13 pixels from the last name), a
# line between two; the y axis has no tics (gnuplot would label every row with its neuron)
unset ytics
set lmargin 17
row_px = 480.0 / nr                               # about: the plot is some 480 pixels high
start = 0; named = -100
# many clusters (an untrained model's neurons spread over every frequency): fainter lines
edge_width = words(clusters) > 12 ? 0.5 : 1
edge_colour = words(clusters) > 12 ? '#f4b183' : '#e6550d'
do for [i = 1:words(clusters)] {
    w = word(clusters, i)
    c = int(w[1:strstrt(w, ':') - 1]); count = int(w[strstrt(w, ':') + 1:])
    middle = start + count / 2.0 - 0.5
    if ((middle + 0.5) * row_px - named >= 13) {
        name = c ? sprintf('k = %d (%d)', c, count) : sprintf('constant (%d)', count)
        set label 10 + i name at graph -0.012, first middle right font ',10'
        named = (middle + 0.5) * row_px
    }
    if (start > 0) {
        set arrow i from graph 0, first start - 0.5 to graph 1, first start - 0.5 nohead lw edge_width lc rgb edge_colour front
    }
    start = start + count
}
if (words(keys) > 0) {
    set label 1 '* key frequency' at graph 1, graph -0.09 right font ',10' textcolor rgb '#445566'
}
unset key
# constant neurons hold no share: the grey behind shows through their rows
set object 1 rectangle from graph 0, graph 0 to graph 1, graph 1 behind fillcolor rgb '#d0d4d8' fillstyle solid noborder
plot data matrix rowheaders using ($1 + 1):2:3 with image
