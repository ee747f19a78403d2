# curves.gp - loss and accuracy over the steps, train and held-out, from qkv's metrics.csv;
# with LAYERS and HEADS, a second row of the head scores of every layer and head.
#
#   gnuplot -c curves.gp OUT FORMAT METRICS TASK [CHANCE_ACC CHANCE_LOSS [LAYERS HEADS MASS]]
#     METRICS      metrics.csv: step,loss,train_acc,heldout_acc,lr,heldout_loss (header line
#                  first; heldout_loss may be empty in rows written by an older qkv), then
#                  mass_l<L> per layer and prev_l<L>h<H>, dup_l<L>h<H>, ind_l<L>h<H> per head
#     CHANCE_ACC   the accuracy of a uniform guess (1/classes), drawn as a dashed line
#     CHANCE_LOSS  the loss of a uniform guess (ln V), drawn as a dashed line
#     LAYERS HEADS the model's grid, when METRICS holds the head scores (0 0: it does not): a
#                  second row shows the previous-token, duplicate-token and induction scores
#                  (induction only with two layers or more: with one it is not defined)
#                  of every head over the steps, coloured by layer, where the step at which
#                  an induction head forms can be read off
#     MASS         1 when the mass_l<L> columns hold the ideal-pattern mass per layer (the
#                  task defines an ideal pattern): a third panel in the first row
# Runs longer than 100 steps get a logarithmic step axis: a model learns most in its first
# steps, which a linear axis over thousands of steps squeezes into its first pixels. Step 0
# (evaluated before any update) then sits at the left edge, labelled 0.
out = ARG1; fmt = ARG2; csv = ARG3; task = ARG4
chance_acc = ARGC >= 5 ? real(ARG5) : -1
chance_loss = ARGC >= 6 ? real(ARG6) : -1
layers = ARGC >= 8 ? int(ARG7) : 0
heads = ARGC >= 8 ? int(ARG8) : 0
scores = layers > 0 && heads > 0
mass = scores && ARGC >= 9 ? int(ARG9) : 0
height = scores ? 820 : 420

if (fmt eq 'svg') {
    set terminal svg size 1000,height dynamic noenhanced font 'Sans,12' background rgb 'white'
} else {
    set terminal pngcairo size 1000,height noenhanced font 'Sans,10'
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

# Panels: loss and accuracy side by side (and the mass per layer); the head scores below.
top = 2 + mass
if (scores) { # narrower panels: smaller keys
    set multiplot title sprintf('%s: training', task) font ',12'
    set size 1.0 / top, 0.47
    set origin 0, 0.48
    set key font ',8' samplen 2 spacing 0.9
} else {
    set multiplot layout 1, 2 title sprintf('%s: training', task) font ',12'
}

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

if (scores) { set origin 1.0 / top, 0.48 }
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

if (scores) {
    # One colour per layer; the heads of a layer differ by dash. Named one by one while that
    # stays readable (8 lines), else by layer only.
    colours = '#2171b5 #e6550d #31a354 #756bb1 #636363 #d6616b #8c6d31 #17becf'
    layer_colour(l) = word(colours, (l - 1) % 8 + 1)
    named = layers * heads <= 8
    name(l, h) = named ? sprintf('layer %d head %d', l, h) : (h == 1 ? sprintf('layer %d', l) : '')
    set key top left font ',8' samplen 2 spacing 0.9
    if (mass) {
        set origin 2.0 / top, 0.48
        set title 'ideal-pattern mass by layer'
        plot for [l = 1:layers] csv using (x(column('step'))):(column(sprintf('mass_l%d', l))) \
             with @style lw 2 lc rgb layer_colour(l) title sprintf('layer %d', l)
    }
    set size 1.0 / 3, 0.47
    set origin 0, 0
    set title 'previous-token score'
    plot for [l = 1:layers] for [h = 1:heads] \
         csv using (x(column('step'))):(column(sprintf('prev_l%dh%d', l, h))) \
         with lines lw 1.5 lc rgb layer_colour(l) dt 1 + (h - 1) % 5 title name(l, h)
    set origin 1.0 / 3, 0
    set title 'duplicate-token score'
    plot for [l = 1:layers] for [h = 1:heads] \
         csv using (x(column('step'))):(column(sprintf('dup_l%dh%d', l, h))) \
         with lines lw 1.5 lc rgb layer_colour(l) dt 1 + (h - 1) % 5 title name(l, h)
    # An induction head forms where its score climbs past 0.5 (the summary names that step).
    set origin 2.0 / 3, 0
    set title 'induction score (prefix matching)'
    if (layers >= 2) {
        plot for [l = 1:layers] for [h = 1:heads] \
             csv using (x(column('step'))):(column(sprintf('ind_l%dh%d', l, h))) \
             with lines lw 1.5 lc rgb layer_colour(l) dt 1 + (h - 1) % 5 title name(l, h), \
             0.5 with lines @chance title 'formed (0.5)'
    } else {
        # An induction head matches on what a previous-token head of an earlier layer wrote:
        # with one layer the score is not defined, and its numbers are not drawn.
        set label 9 "not defined for one layer:\nan induction head reads what a\nprevious-token head of an\nearlier layer wrote" \
            at graph 0.5, graph 0.5 center font ',10' textcolor rgb '#66717d'
        plot 2 with lines notitle   # the empty panel (2 is above the range)
        unset label 9
    }
}

unset multiplot
