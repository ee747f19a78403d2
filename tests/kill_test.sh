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
# After every kill (of the first run, and of a killed resume) it checks what docs/errors.md
# promises a reader of the directory at that instant ("What a reader ... may rely on"):
#   - model.safetensors, if there is one, is whole and finite (`qkv eval` loads it);
#   - metrics.csv holds exactly the model's `metrics_rows` rows up to the model's step, and
#     rows after it only of later steps (ahead of the model, never behind it);
#   - every whole line of metrics.jsonl is a JSON object, and its steps up to the model's are
#     metrics.csv's;
#   - every attention map is the model's step's or, a checkpoint being written, the next
#     checkpoint's (the maps of each checkpoint are those of a run that snapshots at 8, 16, 24);
#   - summary.json is whole, says "running" (or "done": killed after its last rename), and its
#     model_step is null or a checkpoint no later than the model's.
set -u
QKV=$1
[ "$QKV" = "${QKV#/}" ] && QKV=$PWD/$QKV
# The check after each of the ~90 kills is a Python process: QKV_PYTHON, else the system's
# python3, else the first on PATH. A version manager's shim on PATH (pyenv: a shell script
# that finds the interpreter) cost 0.3 to 0.5 s of CPU a start, 40 of the test's 54 s, and on
# a machine busy with other work took the test past its time limit.
PY=${QKV_PYTHON:-}
if [ -z "$PY" ]; then
    if [ -x /usr/bin/python3 ]; then PY=/usr/bin/python3; else PY=$(command -v python3 || true); fi
fi
[ -n "$PY" ] || { echo "kill_test: no python3 to check the directories" >&2; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/qkv_kill_test.XXXXXX")
trap 'rm -rf "$W"' EXIT
cd "$W" || exit 1

NEW=(train --task reverse --seq-len 6 --vocab 8 --d-model 16 --steps 24 --seed 5)
EVERY=(--eval-every 4 --save-every 8 --snapshot-every 6 --threads 1 --quiet)
if ! "$QKV" "${NEW[@]}" "${EVERY[@]}" --out ref >log.txt 2>&1; then
    echo "kill_test: the uninterrupted run failed:"; cat log.txt; exit 1
fi

# The attention maps of each checkpoint (8, 16, 24): a run that snapshots at those steps, and
# otherwise the same run (snapshots take no random numbers; its model must be ref's).
if ! "$QKV" "${NEW[@]}" "${EVERY[@]}" --snapshot-every 8 --out ref8 >log.txt 2>&1 ||
    ! cmp -s ref/model.safetensors ref8/model.safetensors; then
    echo "kill_test: the run that snapshots its checkpoints failed or differs:"; cat log.txt; exit 1
fi

failures=0 kills=0

# What a reader may rely on in `run` right after a kill (docs/errors.md).
check_protocol() {
    if [ -e run/model.safetensors ] && ! "$QKV" eval --model run >eval.txt 2>&1; then
        fail "$1: the directory does not evaluate: $(head -c 300 eval.txt)"
        return
    fi
    "$PY" - run ref8 <<'EOF' >check.txt 2>&1 || fail "$1: $(head -c 400 check.txt)"
import glob, json, os, struct, sys
run, ref = sys.argv[1], sys.argv[2]
step, rows = None, None
if os.path.exists(run + "/model.safetensors"):
    with open(run + "/model.safetensors", "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        meta = json.loads(f.read(n))["__metadata__"]
    step, rows = int(meta["step"]), int(meta["metrics_rows"])
csv = []
if os.path.exists(run + "/metrics.csv"):
    with open(run + "/metrics.csv") as f:
        csv = [int(line.split(",")[0]) for line in f.read().splitlines()[1:]]
if step is not None:
    upto = [s for s in csv if s <= step]
    assert len(upto) == rows, f"metrics.csv holds {len(upto)} rows up to step {step}, the model says {rows}"
    assert csv[:rows] == upto and all(s > step for s in csv[rows:]), f"metrics.csv's steps {csv}"
if os.path.exists(run + "/metrics.jsonl"):
    with open(run + "/metrics.jsonl") as f:
        lines = f.read().split("\n")[:-1]  # a last line without its newline is skipped
    steps = [json.loads(line)["step"] for line in lines]
    if step is not None:
        assert [s for s in steps if s <= step] == [s for s in csv if s <= step], \
            f"metrics.jsonl's steps {steps}, metrics.csv's {csv}, model step {step}"
maps = sorted(glob.glob(run + "/attention/*.dat"))
if step is not None:
    assert maps, "a model without its attention maps"
    for m in maps:
        mine = open(m).read()
        name = os.path.basename(m)
        ok = [c for c in (step, step + 8)
              if os.path.exists(f"{ref}/snapshots/step{c}_{name}")
              and open(f"{ref}/snapshots/step{c}_{name}").read() == mine]
        assert ok, f"{name} is neither step {step}'s nor the next checkpoint's"
if os.path.exists(run + "/summary.json"):
    s = json.load(open(run + "/summary.json"))
    assert s["status"] in ("running", "done"), s["status"]  # done: killed after its last rename
    ms = s["model_step"]
    assert ms is None or (step is not None and ms % 8 == 0 and ms <= step), f"model_step {ms}, model {step}"
EOF
}
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
    check_protocol "after the kill"
    if [ $((n % 3)) = 0 ]; then # a chain: the resumed run is killed too
        finish "$n"
        rc=$?
        [ "$rc" = 137 ] || [ "$rc" = 0 ] || { fail "the killed resume exited $rc: $(head -c 300 log.txt)"; continue; }
        [ "$rc" = 137 ] && check_protocol "after the resume's kill"
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
