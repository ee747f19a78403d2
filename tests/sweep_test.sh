#!/usr/bin/env bash
# sweep_test.sh - qkv sweep end to end (docs/sweeps.md): one grid of 6 cells run here with
# --jobs 2, through GNU parallel from --emit parallel, and cell by cell through the script of
# --emit slurm under bash, must give byte-identical models, metrics.csv and metrics.jsonl;
# a sweep killed midway resumes (finished cells are skipped, the rest run) to the same
# results; failed cells run again; --collect writes the table and the figure; directory
# names with spaces, quotes and $(...) are never executed.
#
# usage: tests/sweep_test.sh path/to/qkv        (needs GNU parallel: Debian's `parallel`)
set -u
QKV=${1:?usage: sweep_test.sh path/to/qkv}
[ "$QKV" = "${QKV#/}" ] && QKV=$PWD/$QKV
PY=${QKV_PYTHON:-}
if [ -z "$PY" ]; then
    if [ -x /usr/bin/python3 ]; then PY=/usr/bin/python3; else PY=$(command -v python3 || true); fi
fi
[ -n "$PY" ] || { echo "sweep_test: no python3"; exit 1; }
command -v parallel >/dev/null || { echo "sweep_test: GNU parallel is not installed (apt-get install parallel)"; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/qkv_sweep_test.XXXXXX")
pgid=
trap '[ -n "$pgid" ] && kill -KILL -- "-$pgid" 2>/dev/null; rm -rf "$W"' EXIT
cd "$W" || exit 1
unset OMP_NUM_THREADS SLURM_CPUS_PER_TASK SLURM_ARRAY_TASK_ID
export HOME=$W # GNU parallel keeps its state in ~/.parallel

failures=0 checks=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { checks=$((checks + 1)); }
check() { local desc=$1; shift; if "$@"; then ok; else fail "$desc"; fi; }

GRID='d-model=8,16,32 lr=0.002,0.01'
FIXED=(--task lookup --seq-len 8 --steps 150 --eval-every 25 --batch 16)
CELLS=(d-model=8,lr=0.002 d-model=8,lr=0.01 d-model=16,lr=0.002 d-model=16,lr=0.01
       d-model=32,lr=0.002 d-model=32,lr=0.01)

same_results() { # same_results DIR_A DIR_B: every cell's files byte for byte
    local a=$1 b=$2 cell f bad=0
    for cell in "${CELLS[@]}"; do
        for f in model.safetensors metrics.csv metrics.jsonl; do
            cmp -s "$a/$cell/$f" "$b/$cell/$f" || { echo "  $b/$cell/$f differs from $a's"; bad=1; }
        done
    done
    return $bad
}

# ---- here, 2 at a time ------------------------------------------------------------------------
"$QKV" sweep --grid "$GRID" --out local --jobs 2 -- "${FIXED[@]}" >out.txt 2>err.txt
rc=$?
[ "$rc" = 0 ] && ok || fail "local sweep: exit $rc: $(cat err.txt)"
[ "$(grep -c ': done in ' out.txt)" = 6 ] && ok || fail "local sweep did not report 6 cells: $(cat out.txt)"
for cell in "${CELLS[@]}"; do
    [ -s "local/$cell/model.safetensors" ] && grep -q '"status":[[:space:]]*"done"' "local/$cell/summary.json" &&
        grep -q '"threads":[[:space:]]*1,' "local/$cell/summary.json" && ok || fail "local/$cell is not a finished one-thread run"
done
check "sweep.json written" test -s local/sweep.json

# each cell is the run one would make alone (here with 2 threads)
"$QKV" train "${FIXED[@]}" --d-model 16 --lr 0.01 --threads 2 --quiet --out alone || fail "train alone"
check "a cell == the same run made alone on 2 threads" cmp -s alone/model.safetensors local/d-model=16,lr=0.01/model.safetensors

# running it again skips every cell
"$QKV" sweep --grid "$GRID" --out local --jobs 2 -- "${FIXED[@]}" >out.txt 2>err.txt || fail "second local run: $(cat err.txt)"
grep -q '6 cells in local: 6 done before, 0 to run' out.txt && ok || fail "a finished sweep ran again: $(head -n 2 out.txt)"
# so does the same grid from a file, which is the same sweep
printf '# the grid of this test\nd_model=8,16,32   # widths\n\nlr=0.002,0.01\n' >grid.txt
"$QKV" sweep --grid-file grid.txt --out local -- "${FIXED[@]}" >out.txt 2>err.txt || fail "--grid-file: $(cat err.txt)"
grep -q '6 done before, 0 to run' out.txt && ok || fail "--grid-file gave another sweep: $(head -n 2 out.txt)"
# another grid in the same directory is refused
"$QKV" sweep --grid 'd-model=8,16' --out local -- "${FIXED[@]}" >out.txt 2>err.txt
rc=$?
{ [ "$rc" = 2 ] && grep -q 'holds another sweep' err.txt; } && ok || fail "another grid into local: exit $rc: $(cat err.txt)"

# ---- GNU parallel, from --emit parallel -----------------------------------------------------
"$QKV" sweep --grid "$GRID" --out gnu --emit parallel -- "${FIXED[@]}" >out.txt 2>err.txt || fail "--emit parallel: $(cat err.txt)"
[ "$(wc -l <gnu/jobs.txt)" = 6 ] && ok || fail "jobs.txt has $(wc -l <gnu/jobs.txt) lines"
check "--emit parallel runs nothing" test ! -e "gnu/${CELLS[0]}"
parallel --will-cite --jobs 2 --halt now,fail=1 <gnu/jobs.txt >out.txt 2>err.txt || fail "GNU parallel: $(cat err.txt)"
check "GNU parallel == local" same_results local gnu

# ---- Slurm, from --emit slurm, one array index at a time under bash -------------------------
"$QKV" sweep --grid "$GRID" --out slurm --emit slurm -- "${FIXED[@]}" >out.txt 2>err.txt || fail "--emit slurm: $(cat err.txt)"
grep -q '^#SBATCH --array=0-5$' slurm/sweep.sbatch && ok || fail "sweep.sbatch has no --array=0-5"
for i in 0 1 2 3 4 5; do
    SLURM_ARRAY_TASK_ID=$i SLURM_CPUS_PER_TASK=2 bash slurm/sweep.sbatch >out.txt 2>err.txt ||
        fail "sweep.sbatch with SLURM_ARRAY_TASK_ID=$i: $(cat err.txt)"
done
check "Slurm == local" same_results local slurm
grep -q '"threads":[[:space:]]*2,' "slurm/${CELLS[5]}/summary.json" && ok || fail "the Slurm cell did not take SLURM_CPUS_PER_TASK=2"
SLURM_ARRAY_TASK_ID=6 bash slurm/sweep.sbatch >out.txt 2>err.txt
[ $? = 2 ] && ok || fail "SLURM_ARRAY_TASK_ID=6 is not refused"

# ---- killed midway, then resumed ------------------------------------------------------------
setsid "$QKV" sweep --grid "$GRID" --out killed --jobs 1 -- "${FIXED[@]}" >killed.txt 2>&1 &
pgid=$!
for _ in $(seq 3000); do # until 2 cells are done (at most 30 s)
    [ "$(grep -c ': done in ' killed.txt)" -ge 2 ] && break
    sleep 0.01
done
kill -KILL -- "-$pgid" 2>/dev/null
{ wait "$pgid"; } 2>/dev/null # no "Killed" line from bash
pgid=
finished=$(grep -c ': done in ' killed.txt)
if [ "$finished" -ge 2 ] && [ "$finished" -lt 6 ]; then ok; else fail "the sweep was killed after $finished cells, not midway"; fi
first=killed/${CELLS[0]}/model.safetensors
before=$(stat -c '%i %Y' "$first")
"$QKV" sweep --grid "$GRID" --out killed --jobs 2 -- "${FIXED[@]}" >out.txt 2>err.txt || fail "resumed sweep: $(cat err.txt)"
grep -Eq "6 cells in killed: ([0-9]) done before" out.txt && ok || fail "resumed sweep: $(head -n 1 out.txt)"
again=$(sed -n 's/.*: \([0-9]\) done before.*/\1/p' out.txt)
[ "$again" -ge "$finished" ] && ok || fail "$finished cells were done but the resumed sweep skipped $again"
check "a finished cell is not run again" test "$before" = "$(stat -c '%i %Y' "$first")"
check "killed and resumed == local" same_results local killed

# ---- a failed cell runs again ---------------------------------------------------------------
"$QKV" sweep --grid 'heads=1,3' --out failing --jobs 1 -- --d-model 8 --steps 20 --seq-len 4 >out.txt 2>err.txt
rc=$?
{ [ "$rc" = 1 ] && grep -q 'heads=3: FAILED with exit 2' out.txt && grep -q 'does not divide' failing/heads=3/train.log; } &&
    ok || fail "a failing cell: exit $rc: $(cat out.txt err.txt)"
"$QKV" sweep --grid 'heads=1,3' --out failing --jobs 1 -- --d-model 8 --steps 20 --seq-len 4 >out.txt 2>err.txt
grep -q '1 done before, 1 to run' out.txt && ok || fail "the failed cell is not the only one run again: $(head -n 1 out.txt)"

# ---- collect: CSV, markdown, figure -------------------------------------------------------------
"$QKV" sweep --collect local --x d-model --lines lr --metric attention_mass >out.txt 2>err.txt
rc=$?
if command -v gnuplot >/dev/null; then
    [ "$rc" = 0 ] && ok || fail "collect: exit $rc: $(cat err.txt)"
    [ "$(head -c 4 local/sweep.png | od -An -c | tr -d ' ')" = '211PNG' ] && ok || fail "local/sweep.png is not a PNG"
else
    [ "$rc" = 1 ] && grep -q 'gnuplot not found' err.txt && ok || fail "collect without gnuplot: exit $rc"
fi
[ "$(wc -l <local/sweep.csv)" = 7 ] && ok || fail "sweep.csv has $(wc -l <local/sweep.csv) lines, not 7"
head -n 1 local/sweep.csv | grep -q '^cell,status,d_model,lr,d_k,step,heldout_acc,heldout_loss,attention_mass,' &&
    ok || fail "sweep.csv header: $(head -n 1 local/sweep.csv)"
grep -q '^| d-model=32,lr=0.01 | done | 32 | 0.01 | 32 | 150 |' local/sweep.md && ok || fail "sweep.md: $(cat local/sweep.md)"
check "collect prints the table" grep -q '^| cell | status' out.txt
# --average: one point per group of cells that differ only in that option (here lr, as a
# sweep would over seed): x, the mean, the minimum, the maximum, the cells, as sweep.csv's
# (to its 6 digits)
"$QKV" sweep --collect local --x d-model --average lr --metric attention_mass >out.txt 2>err.txt
rc=$?
if command -v gnuplot >/dev/null; then
    [ "$rc" = 0 ] && grep -q 'sweep.png: mean of 2 lrs, band: min to max$' out.txt && ok ||
        fail "collect --average: exit $rc: $(tail -n 1 out.txt) $(cat err.txt)"
fi
"$PY" - local/sweep.csv local/sweep_plot.dat <<'EOF' && ok || fail "collect --average: sweep_plot.dat is not the means of sweep.csv"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
want = {}
for r in rows:
    want.setdefault(float(r["d_model"]), []).append(float(r["attention_mass"]))
got = [l.split() for l in open(sys.argv[2]) if l[0].isdigit()]
assert len(got) == 3, got
for x, mean, lo, hi, n in got:
    v = want[float(x)]
    close = lambda a, b: abs(a - b) <= 1e-5 * max(abs(b), 1e-3)  # sweep.csv has 6 digits
    assert int(n) == len(v) == 2 and close(float(mean), sum(v) / 2), (x, mean, v)
    assert close(float(lo), min(v)) and close(float(hi), max(v)), (x, lo, hi, v)
EOF
for bad in "--average nope" "--x d-model --average d-model" "--lines lr --average lr"; do
    # shellcheck disable=SC2086 # the options are words
    "$QKV" sweep --collect local $bad >out.txt 2>err.txt
    rc=$?
    [ "$rc" = 2 ] && [ "$(wc -l <err.txt)" = 1 ] && grep -q '^qkv: sweep: --' err.txt && ok ||
        fail "collect $bad: exit $rc: $(cat err.txt)"
done
"$QKV" sweep --collect local --x d-model --lines lr --metric attention_mass --quiet >/dev/null 2>&1
# the same numbers from every way of running (wall time aside)
for d in gnu slurm killed; do
    "$QKV" sweep --collect "$d" --quiet >/dev/null 2>&1
    check "$d/sweep.csv == local's but for the wall time (the last column)" \
        cmp -s <(sed 's/,[^,]*$//' local/sweep.csv) <(sed 's/,[^,]*$//' "$d/sweep.csv")
done

# ---- cells that are not finished: running (listed, exit 0), never run (missing, exit 0), and a
# summary.json cut short (exit 4 naming it, the tables left as they were) ------------------------
cp -r local states
sed -e 's/"status":[[:space:]]*"done"/"status": "running"/' \
    -e 's/"exit_status":[[:space:]]*0/"exit_status": null/' local/d-model=8,lr=0.002/summary.json \
    >states/d-model=8,lr=0.002/summary.json
rm states/d-model=8,lr=0.01/summary.json
"$QKV" sweep --collect states --quiet >out.txt 2>&1
rc=$?
[ "$rc" = 0 ] || [ "$rc" = 1 ] && grep -q '^"d-model=8,lr=0.002",running,' states/sweep.csv &&
    grep -q '^"d-model=8,lr=0.01",missing,' states/sweep.csv && ok ||
    fail "collect with a running and a missing cell: exit $rc: $(cat out.txt)"
head -c 100 local/d-model=16,lr=0.01/summary.json >states/d-model=16,lr=0.01/summary.json
before=$(cd states && md5sum sweep.csv sweep.md)
"$QKV" sweep --collect states >out.txt 2>err.txt
rc=$?
[ "$rc" = 4 ] && [ ! -s out.txt ] && [ "$(cat err.txt)" = "qkv: sweep: states/d-model=16,lr=0.01/summary.json is not a JSON object (corrupt, or cut short)" ] &&
    [ "$(cd states && md5sum sweep.csv sweep.md)" = "$before" ] && ok ||
    fail "collect with a summary cut short: exit $rc: $(cat out.txt err.txt)"

# ---- hostile directory names: nothing in a path is ever executed ----------------------------
mkdir hostile && cd hostile || exit 1
D='we ird $(touch PWNED1) `touch PWNED2` it'"'"'s "q" ;touch PWNED3'
"$QKV" sweep --grid 'd-model=4,8' --out "$D" --emit parallel -- --steps 5 --seq-len 4 >out.txt 2>&1 || fail "--emit parallel into a hostile name: $(cat out.txt)"
parallel --will-cite --jobs 2 <"$D/jobs.txt" >out.txt 2>&1 || fail "parallel in a hostile name: $(cat out.txt)"
"$QKV" sweep --grid 'd-model=4,8' --out "$D" --emit slurm -- --steps 5 --seq-len 4 >out.txt 2>&1 || fail "--emit slurm into a hostile name"
SLURM_ARRAY_TASK_ID=1 bash "$D/sweep.sbatch" >out.txt 2>&1 || fail "sweep.sbatch in a hostile name: $(cat out.txt)"
"$QKV" sweep --collect "$D" --quiet >out.txt 2>&1
P='|touch PWNED4'
"$QKV" sweep --grid 'd-model=4' --out "$P" --quiet -- --steps 5 --seq-len 4 >out.txt 2>&1 || fail "a sweep into '$P'"
"$QKV" sweep --collect "$P" --quiet >out.txt 2>&1
cd .. || exit 1
check "the hostile-named cells trained" test -s "hostile/$D/d-model=8/model.safetensors"
check "nothing in a path was executed" test -z "$(find . -name 'PWNED*')"

echo "sweep_test: $checks checks passed, $failures failed"
[ "$failures" -eq 0 ]
