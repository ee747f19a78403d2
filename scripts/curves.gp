# curves.gp - loss and accuracy over the steps, train and held-out, from qkv's metrics.csv.
#
#   gnuplot -c curves.gp OUT FORMAT METRICS TASK [CHANCE_ACC CHANCE_LOSS]
#     METRICS      metrics.csv: step,loss,train_acc,heldout_acc,lr,heldout_loss (header line
#                  first; heldout_loss may be empty in rows written by an older qkv)
#     CHANCE_ACC   the accuracy of a uniform guess (1/classes), drawn as a dashed line
#     CHANCE_LOSS  the loss of a uniform guess (ln V), drawn as a dashed line
# Runs longer than 100 steps get a logarithmic step axis: a model learns most in its first
# steps, which a linear axis over thousands of steps squeezes into its first pixels. Step 0
# (evaluated before any update) then sits at the left edge, labelled 0.
out = ARG1; fmt = ARG2; csv = ARG3; task = ARG4
chance_acc = ARGC >= 5 ? real(ARG5) : -1
chance_loss = ARGC >= 6 ? real(ARG6) : -1

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
last = STATS_max
logx = last >= 100
zero = 0.5                          # where step 0 is drawn on a log axis
x(s) = logx && s < zero ? zero : s
if (logx) {
    set logscale x 10
    set xrange [zero:last * 1.05]
    set xtics add ('0' zero)
    set xlabel 'step (log scale)'
} else {
    set xrange [0:last > 0 ? last : 1]
    set xlabel 'step'
}
set key top right
chance = "dt 2 lw 1.5 lc rgb '#888888'"

set multiplot layout 1, 2 title sprintf('%s: training', task) font ',12'

set title 'loss (cross-entropy)'
set key bottom left                 # the loss falls from the top left: that corner stays free
set logscale y
set format y '%g'
if (chance_loss > 0) {
    plot csv using (x(column('step'))):'loss' with @style lw 2 lc rgb '#2171b5' title 'train (last batch)', \
         csv using (x(column('step'))):'heldout_loss' with @style lw 2 lc rgb '#e6550d' title 'held-out', \
         chance_loss with lines @chance title sprintf('chance (uniform guess, %.3g)', chance_loss)
} else {
    plot csv using (x(column('step'))):'loss' with @style lw 2 lc rgb '#2171b5' title 'train (last batch)', \
         csv using (x(column('step'))):'heldout_loss' with @style lw 2 lc rgb '#e6550d' title 'held-out'
}

set title 'accuracy (tokens with a target)'
unset logscale y
set yrange [0:1.05]
set key center right                # the accuracy rises to 1 on the right: its middle is free
if (chance_acc > 0) {
    plot csv using (x(column('step'))):'train_acc' with @style lw 2 lc rgb '#2171b5' title 'train (last batch)', \
         csv using (x(column('step'))):'heldout_acc' with @style lw 2 lc rgb '#e6550d' title 'held-out', \
         chance_acc with lines @chance title sprintf('chance (%.3g)', chance_acc)
} else {
    plot csv using (x(column('step'))):'train_acc' with @style lw 2 lc rgb '#2171b5' title 'train (last batch)', \
         csv using (x(column('step'))):'heldout_acc' with @style lw 2 lc rgb '#e6550d' title 'held-out'
}

unset multiplot
