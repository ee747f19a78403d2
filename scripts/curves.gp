# curves.gp - loss and accuracy over the steps, train and held-out, from qkv's metrics.csv.
#
#   gnuplot -c curves.gp OUT FORMAT METRICS TASK
#     METRICS  metrics.csv: step,loss,train_acc,heldout_acc,lr,heldout_loss (header line first;
#              heldout_loss may be empty in rows written by an older qkv)
out = ARG1; fmt = ARG2; csv = ARG3; task = ARG4

if (fmt eq 'svg') {
    set terminal svg size 1000,420 dynamic noenhanced font 'Sans,12' background rgb 'white'
} else {
    set terminal pngcairo size 1000,420 noenhanced font 'Sans,10'
}
set output out
set datafile separator comma
set datafile columnheaders
set datafile missing ''
set grid lc rgb '#dddddd'
# points on the lines only when there are few rows; with many they hide the curve
stats csv using 'step' nooutput
style = STATS_records > 60 ? 'lines' : 'linespoints pt 7 ps 0.5'
set key top right
set xlabel 'step'

set multiplot layout 1, 2 title sprintf('%s: training', task) font ',12'

set title 'loss (cross-entropy)'
set logscale y
set format y '%g'
plot csv using 'step':'loss' with @style lw 2 lc rgb '#2171b5' title 'train (last batch)', \
     csv using 'step':'heldout_loss' with @style lw 2 lc rgb '#e6550d' title 'held-out'

set title 'accuracy (tokens with a target)'
unset logscale y
set yrange [0:1.05]
set key bottom right
plot csv using 'step':'train_acc' with @style lw 2 lc rgb '#2171b5' title 'train (last batch)', \
     csv using 'step':'heldout_acc' with @style lw 2 lc rgb '#e6550d' title 'held-out'

unset multiplot
