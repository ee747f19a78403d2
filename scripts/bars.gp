# bars.gp - labelled values as bars: the direct logit attribution of qkv plot (the logit split
# into the embedding path, each head and the bias).
#
#   gnuplot -c bars.gp OUT FORMAT DATA TITLE YLABEL
#     OUT     the image to write
#     FORMAT  png (pngcairo) or svg
#     DATA    lines "label value" after a '#' comment, written by qkv plot
#     TITLE, YLABEL   the texts
out = ARG1; fmt = ARG2; data = ARG3; ttl = ARG4; yl = ARG5

stats data using 2 nooutput
n = STATS_records
w = n <= 24 ? 720 : n <= 80 ? 1000 : 1300
if (fmt eq 'svg') {
    set terminal svg size w,520 dynamic noenhanced font 'Sans,13' background rgb 'white'
} else {
    set terminal pngcairo size w,520 noenhanced font 'Sans,11'
}
set output out

set title ttl font ',13'
set ylabel yl
set xlabel 'part (layer.head for a head)'
set xrange [-0.7:n-0.3]
set style fill solid 0.85 noborder
set boxwidth 0.75
set offsets 0, 0, graph 0.08, graph 0.08   # room above the tallest bar and below the lowest
set grid ytics lc rgb '#e0e0e0'
set xzeroaxis lt 1 lc rgb '#606060'
set tics nomirror
unset key
if (n > 12) { set xtics rotate by 90 right }
if (n > 48) { set xtics font ',7' }
# every label up to 96 parts; past that every few (they would overlap)
every = n > 96 ? int(n / 48) : 1
plot data using 0:2:($2 >= 0 ? 0xb2182b : 0x2166ac):xtic(int($0) % every == 0 ? strcol(1) : '') \
     with boxes lc rgb variable
