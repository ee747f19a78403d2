#!/usr/bin/env bash
# kill_test.sh QKV - a run killed at every one of its file events resumes to the same bits.
#
# QKV_TEST_KILL_AT=N makes qkv send itself SIGKILL at its N-th file event (src/io/atomic.c): a
# temporary created, a temporary written in full and synced, a rename done. That is the
# exact instant, which a watcher from outside (inotify) cannot give: by the time it has seen
# an event and sent the signal, the run has moved on. For every N from 1 until the run is no
# longer killed, this test:
#   1. runs a small training run with --save-every and --snapshot-every, killed at event N;
#   2. checks the directory it leaves: no model yet, or a model that `qkv eval` loads;
#   3. resumes it (`train --resume`; a fresh start when no model was committed yet), and
#      for every third N kills the resumed run too, at its N-th event, and resumes again;
#   4. checks that the finished directory equals an uninterrupted run's byte for byte (the
#      model, metrics.csv, metrics.jsonl, every attention, gradient and snapshot file; all
#      but summary.json, which holds the wall time and must say "done") and holds no
#      temporary.
set -u
QKV=$1
[ "$QKV" = "${QKV#/}" ] && QKV=$PWD/$QKV
W=$(mktemp -d "${TMPDIR:-/tmp}/qkv_kill_test.XXXXXX")
trap 'rm -rf "$W"' EXIT
cd "$W" || exit 1

NEW=(train --task reverse --seq-len 6 --vocab 8 --d-model 16 --steps 24 --seed 5)
EVERY=(--eval-every 4 --save-every 8 --snapshot-every 6 --threads 1 --quiet)
if ! "$QKV" "${NEW[@]}" "${EVERY[@]}" --out ref >log.txt 2>&1; then
    echo "kill_test: the uninterrupted run failed:"; cat log.txt; exit 1
fi

failures=0 kills=0
fail() { echo "FAIL (kill at event $n): $*"; failures=$((failures + 1)); }

# Runs the run to its end in `run`: resumed if a model was committed, else started afresh.
finish() {
    if [ -e run/model.safetensors ]; then
        (QKV_TEST_KILL_AT=${1:-} "$QKV" train --resume run "${EVERY[@]}"; exit $?) >log.txt 2>&1
    else
        (QKV_TEST_KILL_AT=${1:-} "$QKV" "${NEW[@]}" "${EVERY[@]}" --out run; exit $?) >log.txt 2>&1
    fi
}

for ((n = 1; n < 1000; n++)); do
    rm -rf run
    (QKV_TEST_KILL_AT=$n "$QKV" "${NEW[@]}" "${EVERY[@]}" --out run; exit $?) >log.txt 2>&1
    rc=$? # (in a subshell: bash's "Killed" report goes to log.txt, not the test's output)
    if [ "$rc" = 0 ]; then break; fi # fewer than n events: every one has been tried
    kills=$((kills + 1))
    [ "$rc" = 137 ] || { fail "exit $rc, expected 137 (SIGKILL): $(head -c 300 log.txt)"; continue; }
    if [ -e run/model.safetensors ] && ! "$QKV" eval --model run >eval.txt 2>&1; then
        fail "the directory left by the kill does not evaluate: $(head -c 300 eval.txt)"
        continue
    fi
    # what a reader may rely on after a kill (docs/errors.md): a whole summary.json, whose
    # model_step is the model's on disk, or null while there is none
    if [ -e run/summary.json ] && ! python3 - run <<'EOF' >check.txt 2>&1; then
import json, os, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
model = os.path.exists(sys.argv[1] + "/model.safetensors")
assert s["status"] in ("running", "done"), s["status"]  # done: killed after its last rename
assert s["model_step"] is None or (model and s["model_step"] % 8 == 0), s["model_step"]
EOF
        fail "summary.json after the kill: $(head -c 300 check.txt)"
    fi
    if [ $((n % 3)) = 0 ]; then # a chain: the resumed run is killed too
        finish "$n"
        rc=$?
        [ "$rc" = 137 ] || [ "$rc" = 0 ] || { fail "the killed resume exited $rc: $(head -c 300 log.txt)"; continue; }
    fi
    if ! finish; then fail "could not resume: $(head -c 300 log.txt)"; continue; fi
    # summary.json holds the wall time, which no two runs share; the rest must be equal
    if ! diff -r -x summary.json ref run >diff.txt 2>&1; then fail "the resumed run differs: $(head -n 5 diff.txt | tr '\n' ' ')"; fi
    grep -q '"status":[[:space:]]*"done"' run/summary.json || fail "summary.json does not say done"
    grep -q '"model_step":[[:space:]]*24,' run/summary.json || fail "summary.json's model_step is not 24"
    left=$(find run -name '*.tmp.*')
    [ -z "$left" ] || fail "temporaries left: $left"
done
echo "kill_test: $kills kills, one at each file event of the run; $failures failed"
[ "$kills" -ge 30 ] || { echo "kill_test: only $kills file events: the run is not the one intended"; exit 1; }
[ "$failures" = 0 ]
