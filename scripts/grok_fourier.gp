# grok_fourier.gp - a modular run's embedding in the Fourier basis over training: the norm of
# each frequency (rows) at each evaluation (columns), as a heatmap (docs/grokking.md,
# "Pictures"): qkv plot's plots/grok_fourier.png.
#
#   gnuplot -c grok_fourier.gp OUT FORMAT DATA TITLE STEPS KEYS PHASES
#     DATA    plots/grok_fourier.dat: '#' comments (the second "# frequency\step s s ...": the
#             columns' steps), then a row per frequency 1 .. P/2, "k norm norm ..."
#             (metrics.jsonl's embed_norms)
#     TITLE   the run and its task, "grok13: (a + b) mod 13"
#     STEPS   the evaluations' steps, space-separated, as DATA's columns: each cell spans from
#             half-way to the evaluation before to half-way to the one after
#     KEYS    the model's key frequencies, space-separated ("" for none): named on the axis
#     PHASES  "MEM CIRCUIT CLEANUP GEN": the phases' ends and the generalization step
#             (summary.json; "-" for none), drawn as dashed lines
out = ARG1; fmt = ARG2; data = ARG3; ttl = ARG4; steps = ARG5; keys = ARG6
n = words(steps)
s(i) = real(word(steps, int(i) + 1))  # the step of column i (from 0)
lo(i) = i == 0 ? s(0) - (n > 1 ? (s(1) - s(0)) / 2 : 0.5) : (s(i - 1) + s(i)) / 2
hi(i) = i == n - 1 ? s(i) + (n > 1 ? (s(i) - s(i - 1)) / 2 : 0.5) : (s(i) + s(i + 1)) / 2

stats data matrix rowheaders nooutput
top = int((STATS_records + STATS_invalid) / n + 0.5)   # frequencies 1 .. top
big = STATS_max > 0 ? STATS_max : 1

if (fmt eq 'svg') {
    set terminal svg size 1000,560 dynamic noenhanced font 'Sans,12' background rgb 'white'
} else {
    set terminal pngcairo size 1000,560 noenhanced font 'Sans,11'
}
set output out
set title sprintf("%s: the embedding's norm in each frequency over training\n(metrics.jsonl's embed_norms; dashed: the phases' ends, summary.json)", ttl) font ',12'
set xlabel 'step'
set xtics out
set ylabel 'frequency k (w = 2 pi k / P)' offset -4,0
set xrange [lo(0):hi(n - 1)]
set yrange [0.5:top + 0.5]
set cbrange [0:big]
set cblabel 'norm'
set palette defined (0 '#ffffff', 0.25 '#c6dbef', 0.5 '#6baed6', 0.75 '#2171b5', 1 '#08306b')
set tics nomirror
set tics out
# a label per frequency while they fit, else every few, and the key frequencies named; as
# labels, not tics (gnuplot would label every row with its row header)
unset ytics
set lmargin 13
every = top <= 24 ? 1 : top <= 60 ? 5 : 10
iskey(k) = strstrt(' ' . keys . ' ', sprintf(' %d ', k)) > 0
do for [k = 1:top] {
    if (iskey(k)) {
        set label 100 + k sprintf('key %d', k) at graph -0.012, first k right font ',10' textcolor rgb '#08306b'
    } else {
        if (k == 1 || k % every == 0) {
            set label 100 + k sprintf('%d', k) at graph -0.012, first k right font ',10'
        }
    }
}
unset key
set style fill solid 1 noborder
do for [i = 1:(words(ARG7) < 4 ? words(ARG7) : 4)] {
    if (word(ARG7, i) ne '-') {
        set arrow i from real(word(ARG7, i)), graph 0 to real(word(ARG7, i)), graph 1 nohead dt 2 lw 1.2 lc rgb '#d94801' front
    }
}
plot data matrix rowheaders \
     using ((lo($1) + hi($1)) / 2):($2 + 1):((hi($1) - lo($1)) / 2):(0.5):3 with boxxyerror fc palette
