# grok_losses.gp - a modular run's four losses over training on a log scale, its phases shaded
# (docs/grokking.md, "Pictures"): qkv plot's plots/grok_losses.png.
#
#   gnuplot -c grok_losses.gp OUT FORMAT DATA TITLE PHASES OP
#     DATA    plots/grok_losses.dat: '#' comments, then "step train test restricted excluded"
#             per evaluation (NaN: none)
#     TITLE   the run and its task, "grok13: (a + b) mod 13"
#     PHASES  "MEM CIRCUIT CLEANUP GEN GENERALIZED": summary.json's memorization_end,
#             circuit_formation_end, cleanup_end, generalization_step ("-": none) and
#             generalized (1 or 0); "-" alone when summary.json has no phases
#     OP      add, sub or mul (mul names only memorization and generalization)
# Memorization is shaded from step 0 to MEM, circuit formation from MEM to CIRCUIT, cleanup
# from CIRCUIT to CLEANUP: only the phases that ended; the key says where the run stopped.
out = ARG1; fmt = ARG2; data = ARG3; ttl = ARG4; op = ARG6
phases = words(ARG5) == 5
phase(i) = phases && word(ARG5, i) ne '-' ? real(word(ARG5, i)) : -1
mem = phase(1); circuit = phase(2); cleanup = phase(3); gen = phase(4)

if (fmt eq 'svg') {
    set terminal svg size 1000,620 dynamic noenhanced font 'Sans,12' background rgb 'white'
} else {
    set terminal pngcairo size 1000,620 noenhanced font 'Sans,11'
}
set output out

stats data using 1 nooutput
last = STATS_max > 0 ? STATS_max : 1
set xrange [0:last]
set xlabel 'step'
set logscale y
set format y '%g'
set ylabel 'loss (cross-entropy, log scale)'
set grid lc rgb '#e4e4e4'
set title sprintf("%s: the four losses over training, the phases shaded (summary.json's grokking)", ttl) font ',12'
set key below vertical maxrows 4 Left reverse samplen 2 spacing 1.1 width 2

# the phases that ended, behind the curves
mem_colour = '#fdd9b5'; circuit_colour = '#cde8c4'; cleanup_colour = '#cfe0f3'
if (mem >= 0) {
    set object 1 rectangle from 0, graph 0 to mem, graph 1 behind fc rgb mem_colour fs solid 1 noborder
}
if (mem >= 0 && circuit >= mem) {
    set object 2 rectangle from mem, graph 0 to circuit, graph 1 behind fc rgb circuit_colour fs solid 1 noborder
}
if (circuit >= 0 && cleanup >= circuit) {
    set object 3 rectangle from circuit, graph 0 to cleanup, graph 1 behind fc rgb cleanup_colour fs solid 1 noborder
}
if (gen >= 0) {
    set arrow 1 from gen, graph 0 to gen, graph 1 nohead dt 2 lw 1.5 lc rgb '#555555' front
}

# the key's lines for the phases: what each shading is, or where the run stopped
t_mem = mem >= 0 ? sprintf('memorization: 0 to %d', mem) : sprintf('memorization: not ended by step %d', last)
t_circuit = op eq 'mul' ? 'circuit formation: not named for mul' : \
            circuit >= 0 ? sprintf('circuit formation: %d to %d', mem, circuit) : \
            mem >= 0 ? sprintf('circuit formation: not ended by step %d', last) : 'circuit formation: not reached'
t_cleanup = op eq 'mul' ? 'cleanup: not named for mul' : \
            cleanup >= 0 ? sprintf('cleanup: %d to %d', circuit, cleanup) : \
            circuit >= 0 ? sprintf('cleanup: not ended by step %d', last) : 'cleanup: not reached'
t_gen = gen >= 0 ? sprintf('generalized (test accuracy >= 99%%) from step %d', gen) : 'not generalized (test accuracy < 99%)'

train = "lw 2 lc rgb '#2171b5'"; test = "lw 2 lc rgb '#e6550d'"
restricted = "lw 2 lc rgb '#31a354'"; excluded = "lw 5 lc rgb '#bcbddc'"
# points on the lines while there are few evaluations
stats data using 1 nooutput
style = STATS_records > 60 ? 'lines' : 'linespoints pt 7 ps 0.6'
pos(v) = v > 0 ? v : NaN
gen_dash = gen >= 0 ? 2 : 1
t_restricted = op eq 'mul' ? 'restricted: not defined for mul' : 'restricted (held-out pairs, the key frequencies only)'
t_excluded = op eq 'mul' ? 'excluded: not defined for mul' : 'excluded (training pairs, the key directions removed)'
# the excluded loss is a wide light band, and the train loss is drawn again last: while there
# is no key frequency the excluded loss is the train loss (over P outputs), and one line would
# hide the other
curves = "data using 1:(pos($2)) with @style @train title 'train (every training pair)', " . \
         "data using 1:(pos($3)) with @style @test title 'test (every held-out pair)', " . \
         "data using 1:(pos($4)) with @style @restricted title t_restricted, " . \
         "data using 1:(pos($5)) with @style @excluded title t_excluded"
if (phases) {
    plot @curves, \
         keyentry with boxes fs solid 1 noborder fc rgb (mem >= 0 ? mem_colour : 'white') title t_mem, \
         keyentry with boxes fs solid 1 noborder fc rgb (circuit >= 0 ? circuit_colour : 'white') title t_circuit, \
         keyentry with boxes fs solid 1 noborder fc rgb (cleanup >= 0 ? cleanup_colour : 'white') title t_cleanup, \
         keyentry with lines dt gen_dash lw 1.5 lc rgb (gen >= 0 ? '#555555' : 'white') title t_gen, \
         data using 1:(pos($2)) with @style @train notitle
} else {
    plot @curves, \
         keyentry with lines lc rgb 'white' title 'no phases: summary.json has no grokking', \
         data using 1:(pos($2)) with @style @train notitle
}
