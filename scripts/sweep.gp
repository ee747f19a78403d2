# sweep.gp - one metric of a sweep against one of its options, a line per value of another,
# from the data that `qkv sweep --collect DIR` writes (qkv runs gnuplot inside DIR: every file
# is a plain name there).
#
#   gnuplot -c sweep.gp OUT FORMAT DATA XLABEL METRIC LINES LOGX BLOCKS [BAND]
#     DATA    blocks separated by two blank lines, one per value of LINES; each block's first
#             line is its title in double quotes, then "x y" rows sorted by x (with BAND:
#             "x mean min max n" rows, the mean over the cells of a group and its range)
#     LINES   the option whose values the lines are ('' for a single line)
#     LOGX    log or linear: the x axis (log when x spans a factor of 8 or more)
#     BLOCKS  how many blocks DATA holds
#     BAND    '' or the legend's words for the mean and its band (qkv sweep --average)
out = ARG1; fmt = ARG2; data = ARG3; xlabel = ARG4; metric = ARG5; lines = ARG6; logx = ARG7
blocks = int(ARG8)
band = ARGC >= 9 ? ARG9 : ''

if (fmt eq 'svg') {
    set terminal svg size 720,460 dynamic noenhanced font 'Sans,12' background rgb 'white'
} else {
    set terminal pngcairo size 720,460 noenhanced font 'Sans,10'
}
set output out
set grid lc rgb '#dddddd'
set key outside right top title (lines eq '' ? '' : lines)
set xlabel xlabel
set ylabel metric
set title sprintf('%s against %s', metric, xlabel) font ',12'
if (logx eq 'log') { set logscale x 2 }
set offsets graph 0.03, graph 0.03, graph 0.05, graph 0.05
if (metric eq 'heldout_acc' || metric eq 'train_acc' || metric eq 'attention_mass') {
    set yrange [0:1.02]
}
if (band eq '') {
    plot for [i = 0:blocks - 1] data index i using 1:2 with linespoints lw 2 pt 7 ps 1 \
         title columnheader(1)
} else {
    # the band of each line in the line's colour, translucent, under its mean
    set key title (lines eq '' ? band : lines . "\n" . band)
    set style fill transparent solid 0.2 noborder
    plot for [i = 0:blocks - 1] data index i using 1:3:4 with filledcurves lc i + 1 notitle, \
         for [i = 0:blocks - 1] data index i using 1:2 with linespoints lc i + 1 lw 2 pt 7 ps 1 \
         title columnheader(1)
}
