#!/usr/bin/env bash
# hostile_test.sh QKV - what bad_inputs.tsv cannot hold: commands that succeed on hostile
# names, and runs that meet links, signals and limits (docs/errors.md, "Hostile paths ...").
#   1. Directory names that a shell or gnuplot would run ('<touch ...', '|touch ...', $(...),
#      backquotes, a newline, a leading '-'): train --plot --snapshot-every, plot, eval,
#      grads, inspect, plot --format html, resume and study all work on them, and nothing is
#      ever run.
#   2. A symbolic link planted at the name of a temporary is never written through.
#   3. Two runs on one directory: the second is refused; SIGTERM stops the first with one
#      line, no temporary left, and a checkpoint that evaluates and resumes.
#   4. ulimit -f: a file too large gives one line and exit 3, and leaves the old model whole.
#   5. ulimit -v: threads that cannot start give one line and exit 6 when asked for, and are
#      quietly fewer by default.
#   6. A run that diverges (weights or a loss not finite) keeps its last good checkpoint, says
#      which step it is, and summary.json says "diverged" with that model_step.
#   7. An output never replaces a file the run reads (data, held-out), however spelled.
#   8. A directory holding another run is refused; --force clears that run's files only.
#   9. No reader blocks on a FIFO (--config, --grid-file, sweep.json, a cell's summary.json).
#  10. A sweep cell's log and directory are never used through a planted link.
#  11. summary.json says "interrupted" after SIGINT; resuming a finished run changes no file,
#      and a resume that trains no step keeps the run's loss whole.
#  12. A sweep killed with SIGKILL takes its cells with it, and run again at once it ends with
#      the bits of a sweep never killed.
#  13. A resume whose model (or a map) cannot be written leaves metrics.csv, metrics.jsonl, the
#      maps and the snapshots as they were: no record moves ahead of the model on disk.
#  14. A data file's byte-order mark is dropped; a million distinct tokens is the file's error.
#  15. The page reads metrics.csv lines of any length.
#  16. sweep --collect writes its tables over a text x axis or an odd value, names the cells
#      the figure leaves out, and removes the temporaries a killed --collect left.
#  17. study --out on a full disk: one line, no table on stdout; a sweep on a full disk leaves
#      no --out of its making.
# A model trained before all of this still evaluates to the same line at the end.
# Exits 77 (skipped) without gnuplot.
set -u
QKV=$1
[ "$QKV" = "${QKV#/}" ] && QKV=$PWD/$QKV
PYTHON=$(command -v python3)
command -v gnuplot >/dev/null || { echo "hostile_test: gnuplot not found, skipped"; exit 77; }
W=$(mktemp -d "${TMPDIR:-/tmp}/qkv_hostile.XXXXXX")
bg=
trap '[ -n "$bg" ] && kill -KILL "$bg" 2>/dev/null; rm -rf "$W"' EXIT
cd "$W" || exit 1

failures=0 checks=0
ok() { checks=$((checks + 1)); }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# run WANT NAME CMD...: runs qkv CMD, expects exit WANT, keeps stderr in err.txt
run() {
    local want=$1 what=$2
    shift 2
    "$QKV" "$@" >out.txt 2>err.txt </dev/null
    local rc=$?
    [ "$rc" = "$want" ] && ok || fail "$what: exit $rc, expected $want: $(head -c 300 err.txt)"
}
one_line() { # the message of a failure is one "qkv: " line holding $2
    [ "$(wc -l <err.txt)" = 1 ] && grep -q "^qkv: .*$2" err.txt && ok ||
        fail "$1: stderr is not one 'qkv: ... $2' line: $(head -c 400 err.txt)"
}
no_temporaries() {
    local left
    left=$(find . -name '*.tmp.*')
    [ -z "$left" ] && ok || fail "$1: temporaries left: $left"
}

SMALL=(--task copy --seq-len 4 --vocab 8 --d-model 8 --steps 20 --quiet)
run 0 "the good model" train "${SMALL[@]}" --out good
"$QKV" eval --model good >good_before.txt

# ---- 1. hostile names ----
names=('<touch PWNED1 #' '|touch PWNED2 #' '$(touch PWNED3)' '`touch PWNED4`' ';touch PWNED5'
       $'new\nline' '-rf' "quote's\"" ' space ' 'set output "|touch PWNED6"')
for name in "${names[@]}"; do
    d="runs/$name"
    run 0 "train --out --plot ($name)" train "${SMALL[@]}" --snapshot-every 10 --plot --out "$d"
    [ -s "$d/plots/attention_layer1_head1.png" ] && [ -s "$d/plots/snapshots.gif" ] && ok ||
        fail "train --plot ($name) drew no images"
    run 0 "plot ($name)" plot "$d"
    run 0 "eval ($name)" eval --model "$d"
    run 0 "grads ($name)" grads --model "$d" --out "$d/grads.safetensors"
    run 0 "plot --format html ($name)" plot "$d" --format html
    run 0 "inspect --out ($name)" inspect --model "$d" --input "1 2 3 4" --target "1 2 3 4" \
        --out "$d/inspect.safetensors"
    run 0 "plot an inspect file ($name)" plot "$d/inspect.safetensors"
    [ -s "$d/plots/attention.html" ] && [ -s "$d/inspect/plots/grads_layer1_head1.png" ] && ok ||
        fail "plot --format html or plot of an inspect file ($name) wrote nothing"
    run 0 "resume ($name)" train --resume "$d" --steps 30 --quiet
    run 0 "study --out ($name)" study softmax --scaling --samples 10 --keys 2 --max-dk 4 --out "$d/study"
    [ -s "$d/study/scaling.png" ] && ok || fail "study ($name) drew no image"
done
pwned=$(find "$W" /tmp -maxdepth 4 -name 'PWNED*' 2>/dev/null)
[ -z "$pwned" ] && ok || fail "a name was run as a command: $pwned"
no_temporaries "hostile names"

# ---- 2. a symbolic link at a temporary's name ----
echo "not to be written" >victim
cp victim victim.orig
bash -c 'ln -s ../victim "good/grads.safetensors.tmp.$$.0" && exec "$0" grads --model good --out good/grads.safetensors' \
    "$QKV" >out.txt 2>err.txt
[ $? = 0 ] && ok || fail "grads beside a planted link: $(cat err.txt)"
cmp -s victim victim.orig && ok || fail "the planted link was written through"
[ -f good/grads.safetensors ] && [ ! -L good/grads.safetensors ] && ok ||
    fail "the output became the planted link"
rm -f good/grads.safetensors.tmp.*

# ---- 3. two runs on one directory; SIGTERM ----
"$QKV" train "${SMALL[@]}" --steps 100000000 --save-every 50 --out busy >busy_out.txt 2>busy_err.txt &
bg=$!
for _ in $(seq 200); do [ -e busy/model.safetensors ] && break; sleep 0.05; done
run 3 "a second run on busy" train "${SMALL[@]}" --out busy
one_line "a second run on busy" "busy is being written by another qkv run"
kill -TERM "$bg"
wait "$bg"
rc=$?
bg=
[ "$rc" = 7 ] && ok || fail "SIGTERM: exit $rc, expected 7: $(cat busy_err.txt)"
[ "$(wc -l <busy_err.txt)" = 1 ] &&
    grep -q '^qkv: interrupted by SIGTERM; the run in busy keeps its checkpoint of step [0-9]*$' busy_err.txt &&
    ok || fail "SIGTERM's line: $(cat busy_err.txt)"
no_temporaries "SIGTERM"
run 0 "eval after SIGTERM" eval --model busy
step=$(sed -n 's/.*checkpoint of step \([0-9]*\)$/\1/p' busy_err.txt)
run 0 "resume after SIGTERM" train --resume busy --steps $((step + 5)) --quiet

# ---- 4. ulimit -f ----
(ulimit -f 64 && exec "$QKV" train --task copy --vocab 2000 --d-model 128 --steps 2 --quiet --out big) \
    >out.txt 2>err.txt
rc=$?
[ "$rc" = 3 ] && ok || fail "ulimit -f: exit $rc, expected 3: $(cat err.txt)"
one_line "ulimit -f" "File too large"
[ "$(ls big)" = summary.json ] && grep -q '"status":[[:space:]]*"failed"' big/summary.json && ok ||
    fail "ulimit -f: the failed first save left more than a failed summary.json: $(ls big)"
cp good/model.safetensors good.orig
(ulimit -f 2 && exec "$QKV" train --resume good --steps 25 --quiet) >out.txt 2>err.txt
rc=$?
[ "$rc" = 3 ] && ok || fail "ulimit -f on resume: exit $rc, expected 3: $(cat err.txt)"
one_line "ulimit -f on resume" "File too large"
cmp -s good/model.safetensors good.orig && ok || fail "ulimit -f changed the saved model"
no_temporaries "ulimit -f"

# ---- 5. ulimit -v (not under AddressSanitizer, whose shadow memory alone is far larger) ----
if ! (ulimit -v 400000 && exec "$QKV" --version) >/dev/null 2>&1; then
    echo "hostile_test: qkv cannot start under ulimit -v 400000 (a sanitizer build): part 5 skipped"
else
(ulimit -v 400000 && exec "$QKV" train --task copy --seq-len 16 --d-model 64 --steps 5 --quiet --threads 256) \
    >out.txt 2>err.txt
rc=$?
[ "$rc" = 6 ] && ok || fail "ulimit -v with --threads 256: exit $rc, expected 6: $(cat err.txt)"
one_line "ulimit -v with --threads 256" "cannot start 256 threads"
(ulimit -v 400000 && OMP_NUM_THREADS=256 exec "$QKV" train --task copy --seq-len 16 --d-model 64 \
    --steps 5 --quiet) >out.txt 2>err.txt
[ $? = 0 ] && ok || fail "ulimit -v with 256 threads by default: $(cat err.txt)"
fi

# ---- 6. a diverging run keeps its last good checkpoint ----
run 5 "divergence" train --optim sgd --lr 1000000 --clip 0 --schedule constant --warmup 0 \
    --steps 50 --d-model 32 --quiet --save-every 1 --out diverged
# step 2's weights are finite, but its held-out loss is not: step 1 is the last good state
one_line "divergence" "loss is NaN after step 2: training diverged (lower the learning rate, or clip the gradients); diverged keeps the checkpoint of step 1"
grep -q '"status":[[:space:]]*"diverged"' diverged/summary.json &&
    grep -q '"model_step":[[:space:]]*1,' diverged/summary.json && ok ||
    fail "divergence: summary.json does not say diverged at model step 1"
run 0 "eval of the kept checkpoint" eval --model diverged --json
grep -q '"steps":1,' out.txt && ok || fail "the kept checkpoint is not step 2: $(cat out.txt)"

# ---- 7. an output never replaces a file the run reads, however it is spelled ----
printf 'a b\tb a\nb a\ta b\na c\tc a\nc a\ta c\nb c\tc b\n' >train.tsv
printf 'a b\tb a\nc b\tb c\n' >held.tsv
cp train.tsv train.orig && cp held.tsv held.orig
run 0 "a data run" train --data train.tsv --heldout held.tsv --d-model 8 --steps 5 --quiet --out drun
mkdir -p sub && ln -s .. sub/up
for out in train.tsv ./train.tsv sub/../train.tsv sub/up/train.tsv "$W/train.tsv" held.tsv; do
    run 2 "inspect --out $out" inspect --model drun --input "a b" --out "$out"
    one_line "inspect --out $out" "is the input"
    run 2 "grads --out $out" grads --model drun --out "$out"
done
cmp -s train.tsv train.orig && cmp -s held.tsv held.orig && ok || fail "a data file was replaced"
run 0 "eval after the refusals" eval --model drun

# ---- 8. a directory that holds another run: refused, or cleared with --force ----
run 0 "a run with snapshots" train "${SMALL[@]}" --snapshot-every 5 --out reused
echo mine >reused/notes.txt
run 2 "a new run into reused" train "${SMALL[@]}" --out reused
one_line "a new run into reused" "reused holds another run: give --force"
[ -e reused/snapshots/step20_layer1_head1.dat ] && ok || fail "the refused run removed files"
run 0 "--force" train "${SMALL[@]}" --steps 10 --force --out reused
[ -z "$(ls reused/snapshots)" ] && [ "$(cat reused/notes.txt)" = mine ] && ok ||
    fail "--force left the old snapshots or removed a file not of the run: $(ls reused reused/snapshots)"
run 0 "resume into its own directory needs no --force" train --resume reused --steps 12 --quiet

# ---- 9. nothing blocks on a FIFO: every file qkv reads is checked first ----
mkfifo fifo.json
for args in "train --config fifo.json" "sweep --grid-file fifo.json --out fsweep" \
            "plot fifodir"; do
    mkdir -p fifodir && [ -e fifodir/metrics.csv ] || mkfifo fifodir/metrics.csv
    # shellcheck disable=SC2086
    timeout 5 "$QKV" $args >out.txt 2>err.txt </dev/null
    rc=$?
    [ "$rc" != 124 ] && [ "$rc" != 0 ] && ok || fail "$args: exit $rc (124: it blocked)"
done
run 0 "a small sweep" sweep --grid 'd-model=4,8' --out sw --jobs 2 --quiet -- --steps 3 --seq-len 4
rm sw/d-model=4/summary.json && mkfifo sw/d-model=4/summary.json
timeout 5 "$QKV" sweep --collect sw --quiet >out.txt 2>err.txt
[ $? != 124 ] && ok || fail "sweep --collect blocked on a cell's summary.json FIFO"
rm sw/sweep.json && mkfifo sw/sweep.json
timeout 5 "$QKV" sweep --collect sw --quiet >out.txt 2>err.txt
[ $? != 124 ] && ok || fail "sweep --collect blocked on sweep.json FIFO"

# ---- 10. a sweep's cells: never through a planted link ----
echo "not to be emptied" >victim2 && cp victim2 victim2.orig
mkdir -p sl/d-model=4 && ln -s ../../victim2 sl/d-model=4/train.log
mkdir -p elsewhere && ln -s ../elsewhere sl/d-model=8
"$QKV" sweep --grid 'd-model=4,8' --out sl --jobs 1 --quiet -- --steps 3 --seq-len 4 \
    >out.txt 2>err.txt
cmp -s victim2 victim2.orig && ok || fail "a cell's train.log was opened through a link"
[ -z "$(ls elsewhere)" ] && ok || fail "a cell directory that is a link received a run"

# ---- 11. records: SIGINT leaves summary.json "interrupted" at the step on disk ----
"$QKV" train "${SMALL[@]}" --steps 100000000 --save-every 20 --out intr >out.txt 2>err.txt &
bg=$!
for _ in $(seq 200); do [ -e intr/model.safetensors ] && break; sleep 0.05; done
kill -INT "$bg"; wait "$bg"; rc=$?; bg=
[ "$rc" = 7 ] && ok || fail "SIGINT: exit $rc"
# to a file (no terminal's "^C" to end), one line, no empty one before it
grep -q '^qkv: interrupted by SIGINT' err.txt && [ "$(wc -l <err.txt)" = 1 ] && ok ||
    fail "SIGINT's message: $(od -c err.txt | head -3)"
"$PYTHON" - intr <<'PYEOF' && ok || fail "summary.json after SIGINT: $(cat intr/summary.json)"
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
assert s["status"] == "interrupted" and s["exit_status"] == 7, s
assert s["model_step"] is not None and s["model_step"] % 20 == 0, s
PYEOF
# A finished run resumed changes no file, however it is resumed (--threads, --json, --quiet);
# one that trains no step elsewhere (into another directory, or after a kill left summary.json
# "running" at the last step) keeps the run's loss whole, not metrics.csv's 6 digits.
run 0 "a finished run" train "${SMALL[@]}" --snapshot-every 5 --out fin
cp fin/summary.json fin.summary.json
sums() { (cd "$1" && find . -type f | LC_ALL=C sort | xargs cksum); }
sums fin >fin.sums
for opts in "--quiet" "--threads 2 --json" "--steps 20"; do
    # shellcheck disable=SC2086
    run 0 "resuming the finished run ($opts)" train --resume fin $opts
    sums fin | diff fin.sums - >diff.txt && ok ||
        fail "resuming the finished run ($opts) changed: $(tr '\n' ' ' <diff.txt | head -c 300)"
done
run 0 "the finished run resumed into another directory" train --resume fin --out fin2 --quiet
cp -r fin fin3 && sed -i 's/"status":[[:space:]]*"done"/"status": "running"/' fin3/summary.json
run 0 "a run killed after its last checkpoint" train --resume fin3 --quiet
"$PYTHON" - fin.summary.json fin2 fin3 <<'PYEOF' && ok || fail "a run that trains no step changed its loss: $(grep -h '"loss"' fin*/summary.json)"
import json, sys
want = json.load(open(sys.argv[1]))["metrics"]
assert want["loss"] != 0 and want["train_acc"] != 0, want
for d in sys.argv[2:]:
    s = json.load(open(d + "/summary.json"))
    assert s["status"] == "done", (d, s["status"])
    for k in ("loss", "train_acc"):
        assert s["metrics"][k] == want[k], (d, k, s["metrics"][k], want[k])
PYEOF

# ---- 12. a sweep killed with SIGKILL takes its cells with it; run again at once, it resumes
# them and ends with the bits of a sweep never killed ----
LOUD=(--grid 'seed=1,2' --jobs 2 -- "${SMALL[@]}" --steps 6000 --save-every 500)
SWEEP=(--quiet "${LOUD[@]}")
run 0 "a sweep never killed" sweep --out whole "${SWEEP[@]}"
"$QKV" sweep --out killed "${SWEEP[@]}" >out.txt 2>err.txt &
bg=$!
for _ in $(seq 400); do [ -e killed/seed=1/model.safetensors ] && [ -e killed/seed=2/model.safetensors ] && break; sleep 0.01; done
cells=$(pgrep -P "$bg" | tr '\n' ' ')
[ -n "$cells" ] && ok || fail "the sweep to kill had no cell running (it ended too soon?)"
# The cells are held (SIGSTOP) while their sweep dies and for half a second into the run
# again: their SIGTERM waits, as it waits for a checkpoint being written, and the new run
# finds them still writing.
# shellcheck disable=SC2086
kill -STOP $cells
kill -KILL "$bg"; wait "$bg" 2>/dev/null; bg=
# shellcheck disable=SC2086
(sleep 0.5; kill -CONT $cells) &
run 0 "the killed sweep run again at once" sweep --out killed "${LOUD[@]}"
grep -q "2 to run (2 resumed from their checkpoints)" out.txt && ok ||
    fail "the killed sweep's cells were not resumed: $(head -c 300 out.txt)"
wait
for pid in $cells; do # gone, or another process by now: never a qkv train of the killed sweep
    grep -qs 'killed/seed=' "/proc/$pid/cmdline" && fail "cell $pid outlived its sweep" || ok
done
for seed in 1 2; do
    for f in model.safetensors metrics.csv metrics.jsonl; do
        cmp -s "whole/seed=$seed/$f" "killed/seed=$seed/$f" && ok ||
            fail "killed and run again: seed=$seed/$f differs from the sweep never killed"
    done
done

# ---- 13. a model that cannot be written: no record moves ahead of it ----
# QKV_TEST_FAIL_WRITE=NAME makes the rename of NAME fail as over an immutable file (EPERM).
run 0 "a run to resume" train "${SMALL[@]}" --snapshot-every 5 --out stuck
for name in model.safetensors layer1_head1_dS.dat; do
    rm -rf stuck.before && cp -a stuck stuck.before
    QKV_TEST_FAIL_WRITE=$name "$QKV" train --resume stuck --steps 40 --save-every 10 \
        --snapshot-every 5 --quiet >out.txt 2>err.txt </dev/null
    rc=$?
    [ "$rc" = 3 ] && ok || fail "unwritable $name: exit $rc, expected 3: $(cat err.txt)"
    one_line "unwritable $name" "cannot write stuck/.*$name: Operation not permitted; stuck keeps the checkpoint of step 20"
    diff -r -x summary.json stuck.before stuck >diff.txt && ok ||
        fail "unwritable $name: the records moved without the model: $(head -n 5 diff.txt | tr '\n' ' ')"
    "$PYTHON" - stuck <<'PYEOF' && ok || fail "unwritable $name: summary.json: $(cat stuck/summary.json)"
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
assert s["status"] == "failed" and s["exit_status"] == 3 and s["model_step"] == 20, s
PYEOF
    no_temporaries "unwritable $name"
done
run 0 "the stuck run resumes" train --resume stuck --steps 30 --quiet

# ---- 14. data files: a byte-order mark is no token's; too many tokens is the file's fault ----
printf '\357\273\277a b\tb a\nb a\ta b\na c\tc a\nc a\ta c\nb c\tc b\n' >bom.tsv
run 0 "a data file with a byte-order mark" train --data bom.tsv --heldout held.tsv --d-model 8 \
    --steps 2 --quiet --out bomrun
run 0 "inspect its first token" inspect --model bomrun --input "a b"
grep -q $'\357\273\277' bomrun/model.safetensors && fail "the byte-order mark became a token" || ok
awk 'BEGIN { k = 0; for (l = 0; l < 245; l++) { for (s = 0; s < 2; s++) {
    for (i = 0; i < 2048; i++) printf "%st%d", i ? " " : "", k++; printf s ? "\n" : "\t" } } }' >many.tsv
run 4 "a million distinct tokens" train --data many.tsv --d-model 8 --steps 1
one_line "a million distinct tokens" "many.tsv line 245: more than 999999 distinct tokens"

# ---- 15. the page reads metrics.csv lines of any length (8 layers x 64 heads: ~18 KB) ----
rm -rf wide && cp -a good wide && rm -rf wide/plots
"$PYTHON" - wide/metrics.csv <<'PYEOF'
import sys
cols = ["step", "loss", "train_acc", "heldout_acc", "lr", "heldout_loss"] + [f"entropy_l{l}h{h}" for l in range(1, 9) for h in range(1, 65)] * 5
with open(sys.argv[1], "w") as f:
    f.write(",".join(cols) + "\n")
    for step in range(3):
        f.write(",".join([str(step)] + ["0.5"] * (len(cols) - 1)) + "\n")
PYEOF
run 0 "plot --format html of wide metrics" plot wide --format html
"$PYTHON" - wide/plots/attention.html <<'PYEOF' && ok || fail "the page split metrics.csv's long lines"
import json, sys
text = open(sys.argv[1]).read()
at = text.index('"metrics":') + len('"metrics":')
m, _ = json.JSONDecoder().raw_decode(text[at:])
n = len(m["columns"])
assert n == 6 + 8 * 64 * 5, n
assert [r[0] for r in m["rows"]] == [0, 1, 2], [r[0] for r in m["rows"]]
assert all(len(r) == n and r[-1] == 0.5 for r in m["rows"])
PYEOF

# ---- 16. sweep --collect: a text x axis or an odd value never costs the table ----
run 0 "a sweep over task" sweep --grid 'task=copy,reverse' --out tsw --jobs 2 --quiet -- --steps 2 \
    --seq-len 4 --d-model 4
run 0 "collect a sweep over task" sweep --collect tsw --quiet
[ -s tsw/sweep.csv ] && [ -s tsw/sweep.md ] && grep -q "no figure" err.txt && ok ||
    fail "collect over task: no table, or no word of the figure: $(cat err.txt)"
run 1 "collect --x task" sweep --collect tsw --x task --quiet
one_line "collect --x task" "no cell's value is a number"
run 0 "a numeric sweep" sweep --grid 'd-model=4,8' --out osw --jobs 2 --quiet -- --steps 2 --seq-len 4
sed -i 's/"d_model":[[:space:]]*8,/"d_model": "eight",/' osw/d-model=8/summary.json
# what a killed --collect leaves (its process gone), and one a running --collect writes
touch osw/sweep.csv.tmp.99999999.0 osw/sweep.png.tmp.99999999.0 "osw/sweep.md.tmp.$$.0"
run 0 "collect with an odd value" sweep --collect osw --quiet
grep -q "d-model=8" osw/sweep.csv && grep -q "1 cell left out of the figure: d-model=8 (d-model 'eight' is not a number)" err.txt &&
    ok || fail "collect with an odd value: $(cat err.txt)"
[ ! -e osw/sweep.csv.tmp.99999999.0 ] && [ ! -e osw/sweep.png.tmp.99999999.0 ] && [ -e "osw/sweep.md.tmp.$$.0" ] &&
    ok || fail "collect: stale temporaries kept, or a live one removed: $(ls osw)"
rm -f "osw/sweep.md.tmp.$$.0"

# ---- 17. study --out on a full disk: one line, no table ----
mkdir -p full
(ulimit -f 0 && exec "$QKV" study softmax --scaling --samples 10 --keys 2 --max-dk 2 --out full) 2>&1 |
    cat >out.txt
[ "$(wc -l <out.txt)" = 1 ] && grep -q '^qkv: study: cannot write full/scaling.dat: File too large$' out.txt &&
    ok || fail "study on a full disk: $(head -c 300 out.txt)"
no_temporaries "study on a full disk"
# a sweep on a full disk leaves no --out it made, empty or half-made; one that was there stays
for how in "--emit parallel" "--emit slurm" "--jobs 1"; do
    # shellcheck disable=SC2086
    (ulimit -f 0 && exec "$QKV" sweep --grid 'seed=1,2' --out newsweep/grid $how -- --steps 2) 2>&1 |
        cat >out.txt
    [ "$(wc -l <out.txt)" = 1 ] && grep -q '^qkv: sweep: cannot write newsweep/grid/sweep.json: File too large$' out.txt &&
        ok || fail "sweep $how on a full disk: $(head -c 300 out.txt)"
    [ ! -e newsweep ] && ok || fail "sweep $how on a full disk left $(find newsweep | tr '\n' ' ')"
done
grid=$(seq -s, 1 40) # sweep.json fits in a block (ulimit -f 1), the script does not
(ulimit -f 1 && exec "$QKV" sweep --grid "seed=$grid" --out newsweep --emit parallel) 2>&1 | cat >out.txt
grep -q '^qkv: sweep: cannot write newsweep/jobs.txt: File too large$' out.txt && ok ||
    fail "sweep --emit on a disk that fills up: $(head -c 300 out.txt)"
[ ! -e newsweep ] && ok || fail "sweep --emit on a disk that fills up left $(find newsweep | tr '\n' ' ')"
(ulimit -f 0 && exec "$QKV" sweep --grid 'seed=1,2' --out full --emit parallel) >/dev/null 2>&1
[ -d full ] && ok || fail "a sweep that failed removed the --out that was there before it"
no_temporaries "sweep on a full disk"

"$QKV" eval --model good >good_after.txt
cmp -s good_before.txt good_after.txt && ok || fail "the good model evaluates differently now"
echo "hostile_test: $checks checks passed, $failures failed"
[ "$failures" = 0 ]
