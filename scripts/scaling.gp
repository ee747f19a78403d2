# scaling.gp - why attention divides its scores by sqrt(d_k), from `qkv study softmax --scaling`.
# Left: var(q.k) grows like d_k; scaled, it stays 1. Middle: without the scale the softmax
# saturates (its largest weight goes to 1). Right: so the gradient through it, |J|, vanishes.
#
#   gnuplot -c scaling.gp OUT FORMAT DATA KEYS
#     DATA  scaling.dat: d_k var_raw var_scaled maxw_raw maxw_scaled jnorm_raw jnorm_scaled
#     KEYS  the number of keys per softmax, for the titles
out = ARG1; fmt = ARG2; data = ARG3; keys = ARG4

if (fmt eq 'svg') {
    set terminal svg size 1350,440 dynamic noenhanced font 'Sans,12' background rgb 'white'
} else {
    set terminal pngcairo size 1350,440 noenhanced font 'Sans,10'
}
set output out
set logscale x 2
set xlabel 'd_k'
set grid lc rgb '#dddddd'
set key top left
raw = "lw 2 pt 7 ps 0.7 lc rgb '#e6550d'"
scaled = "lw 2 pt 5 ps 0.7 lc rgb '#2171b5'"

set multiplot layout 1, 3 title sprintf('Softmax over %s keys, q and k with unit-variance entries', keys) font ',12'

set title 'variance of the scores'
set logscale y 2
set ylabel 'var'
plot data using 1:1 with lines lw 7 lc rgb '#cccccc' title 'd_k (expected)', \
     data using 1:2 with linespoints @raw title 'q.k', \
     data using 1:3 with linespoints @scaled title 'q.k / sqrt(d_k)'

set title 'saturation: mean largest weight'
unset logscale y
set yrange [0:1.05]
set ylabel 'max_j softmax_j'
plot data using 1:4 with linespoints @raw title 'unscaled', \
     data using 1:5 with linespoints @scaled title 'scaled by 1/sqrt(d_k)'

set title 'gradient through softmax: median |J| (Frobenius)'
set logscale y 10
set autoscale y
set format y '%.0e'
set ylabel '|diag(s) - s s^T|'
set key bottom left
plot data using 1:6 with linespoints @raw title 'unscaled', \
     data using 1:7 with linespoints @scaled title 'scaled by 1/sqrt(d_k)'
unset multiplot
