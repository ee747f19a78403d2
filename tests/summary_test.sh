#!/usr/bin/env bash
# summary_test.sh - a run as data: summary.json, metrics.jsonl, train --config, the
# --threads defaults from OMP_NUM_THREADS and SLURM_CPUS_PER_TASK (docs/sweeps.md), and how
# OpenMP's threads wait (asleep unless the user chose: docs/performance.md).
#
# usage: tests/summary_test.sh path/to/qkv
#
# Needs a python3 (json only) to read the JSON files; QKV_PYTHON chooses it.
set -u
QKV=${1:?usage: summary_test.sh path/to/qkv}
[ "$QKV" = "${QKV#/}" ] && QKV=$PWD/$QKV
PY=${QKV_PYTHON:-}
if [ -z "$PY" ]; then
    if [ -x /usr/bin/python3 ]; then PY=/usr/bin/python3; else PY=$(command -v python3 || true); fi
fi
[ -n "$PY" ] || { echo "summary_test: no python3 to read JSON" >&2; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/qkv_summary_test.XXXXXX")
trap 'rm -rf "$W"' EXIT
cd "$W" || exit 1
unset OMP_NUM_THREADS SLURM_CPUS_PER_TASK

failures=0 checks=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { checks=$((checks + 1)); }
check() { local desc=$1; shift; if "$@"; then ok; else fail "$desc"; fi; }
train() { # train ARGS...: must exit 0
    "$QKV" train "$@" >out.txt 2>err.txt || fail "qkv train $*: exit $?: $(head -c 300 err.txt)"
}
json() { # json FILE EXPR: prints EXPR of the JSON object j in FILE
    "$PY" -c 'import json, sys; j = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

# ---- summary.json and metrics.jsonl ---------------------------------------------------------
# tiny runs: this test also runs under valgrind (.ci/run)
small=(--task copy --seq-len 4 --vocab 8 --d-model 8 --batch 8 --steps 20 --eval-every 5
       --schedule constant --warmup 0 --quiet)
train "${small[@]}" --out a --threads 1
"$PY" - a <<'EOF' && ok || fail "summary.json of a finished run"
import json, sys
d = sys.argv[1]
s = json.load(open(d + "/summary.json"))
assert s["format"] == "qkv-summary" and s["status"] == "done" and s["exit_status"] == 0, s
assert s["qkv_version"].count(".") == 2 and s["isa"] in ("avx512", "avx2", "neon", "scalar"), s
assert s["threads"] == 1 and s["step"] == 20 and s["wall_seconds"] >= 0, s
c = s["config"]
assert c["task"] == "copy" and c["d_model"] == 8 and c["steps"] == 20 and c["eval_every"] == 5, c
assert c["residual"] is False and c["schedule"] == "constant" and c["warmup"] == 0, c
m = s["metrics"]
assert m["step"] == 20 and 0 <= m["heldout_acc"] <= 1 and 0 <= m["attention_mass"] <= 1, m
assert m["best_head"] == 1 and m["heldout_loss"] > 0, m
EOF
"$PY" - a <<'EOF' && ok || fail "metrics.jsonl holds metrics.csv's rows"
import csv, json, sys
d = sys.argv[1]
rows = list(csv.DictReader(open(d + "/metrics.csv")))
lines = open(d + "/metrics.jsonl").read().splitlines()
assert len(lines) == len(rows) == 5, (len(lines), len(rows))  # steps 0, 5, 10, 15, 20
for line, row in zip(lines, rows):
    j = json.loads(line)
    assert j["step"] == int(row["step"]), (j, row)
    for k in ("loss", "train_acc", "heldout_acc", "lr", "heldout_loss"):
        assert abs(j[k] - float(row[k])) <= 1e-5 * max(1, abs(j[k])), (k, j, row)
    assert 0 <= j["attention_mass"] <= 1 and j["best_head"] == 1, j
EOF
check "no temporary files left" test -z "$(find a -name '*.tmp.*')"

# A failed run says so: divergence (exit 5) after the directory exists.
"$QKV" train --optim sgd --lr 1000000 --clip 0 --schedule constant --warmup 0 --steps 50 \
    --d-model 8 --seq-len 4 --vocab 8 --quiet --out diverged >out.txt 2>err.txt
rc=$?
[ "$rc" = 5 ] && ok || fail "a diverging run exits $rc, not 5"
"$PY" - diverged <<'EOF' && ok || fail "summary.json of a failed run"
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
assert s["status"] == "diverged" and s["exit_status"] == 5 and "diverged" in s["error"], s
assert "model_step" in s and s["model_step"] is None, s  # nothing finite was saved
EOF

# ---- --config: a summary repeats its run, byte for byte; flags override it ------------------
train --config a/summary.json --out again --threads 2
check "a run repeated from its summary.json gives the same model" cmp -s a/model.safetensors again/model.safetensors
check "... and the same metrics.csv" cmp -s a/metrics.csv again/metrics.csv
check "... and the same metrics.jsonl" cmp -s a/metrics.jsonl again/metrics.jsonl
[ "$(json again/summary.json 'j["threads"]')" = 2 ] && ok || fail "--threads 2 with --config"
train --config a/summary.json --steps 10 --out shorter
[ "$(json shorter/summary.json 'j["step"]')" = 10 ] && ok || fail "--steps given after --config does not override it"
cat >cfg.json <<'EOF'
{"task": "copy", "seq-len": 4, "vocab": 8, "d_model": 8, "batch": 8, "steps": 20,
 "eval_every": 5, "schedule": "constant", "warmup": 0, "seed": 1, "residual": false}
EOF
train --config cfg.json --out fromfile
check "a hand-written config gives the same model" cmp -s a/model.safetensors fromfile/model.safetensors
# bad configs: one line, exit 2 (options) or 4 (not a JSON object), nothing written
bad_config() { # bad_config CODE FRAGMENT JSON
    printf '%s' "$3" >bad.json
    "$QKV" train --config bad.json --out badrun >out.txt 2>err.txt
    local rc=$?
    if [ "$rc" != "$1" ] || [ "$(wc -l <err.txt)" != 1 ] || ! grep -Fq -- "$2" err.txt || [ -e badrun ]; then
        fail "config $3: exit $rc, expected $1 with '$2': $(cat err.txt)"
    else ok; fi
}
bad_config 2 "unknown option 'd_modle'" '{"d_modle": 16}'
bad_config 2 "'d_model' must be a number" '{"d_model": "16"}'
bad_config 2 "'task' must be a string" '{"task": 3}'
bad_config 2 "'causal' must be true or false" '{"causal": 1}'
bad_config 2 "--d-model: 0 is out of range" '{"d_model": 0}'
bad_config 2 "'out' cannot be set in a config file" '{"out": "x"}'
bad_config 2 "'lr' appears twice" '{"lr": 0.1, "lr": 0.2}'
bad_config 4 "is not a JSON object" '[1, 2]'
bad_config 4 "is not a JSON object" '{"lr": 0.1'
bad_config 4 "the summary has no \"config\" object" '{"format": "qkv-summary"}'

# ---- resume: metrics.jsonl stays metrics.csv's rows, none twice, none lost -------------------
train "${small[@]}" --steps 40 --out straight
train "${small[@]}" --out cut
# what a crash after the checkpoint leaves: a row past it, and a row cut short
tail -n 1 straight/metrics.jsonl >>cut/metrics.jsonl
printf '{"step":30,"loss":1.2' >>cut/metrics.jsonl
train --resume cut --steps 40 --eval-every 5 --quiet
check "resumed metrics.csv == straight" cmp -s straight/metrics.csv cut/metrics.csv
check "resumed metrics.jsonl == straight (no row twice, none lost)" cmp -s straight/metrics.jsonl cut/metrics.jsonl
[ "$(json cut/summary.json 'j["step"]')" = 40 ] && ok || fail "resumed summary.json step"

# ---- --threads defaults ----------------------------------------------------------------------
threads_of() { json "$1/summary.json" 'j["threads"]'; }
SLURM_CPUS_PER_TASK=2 "$QKV" train "${small[@]}" --steps 5 --out slurm2 || fail "train under SLURM_CPUS_PER_TASK=2"
[ "$(threads_of slurm2)" = 2 ] && ok || fail "SLURM_CPUS_PER_TASK=2 gives $(threads_of slurm2) threads"
OMP_NUM_THREADS=1 SLURM_CPUS_PER_TASK=2 "$QKV" train "${small[@]}" --steps 5 --out omp1 || fail "train under OMP_NUM_THREADS=1"
[ "$(threads_of omp1)" = 1 ] && ok || fail "OMP_NUM_THREADS=1 gives $(threads_of omp1) threads"
SLURM_CPUS_PER_TASK=2 "$QKV" train "${small[@]}" --steps 5 --threads 1 --out flag1 || fail "train --threads 1"
[ "$(threads_of flag1)" = 1 ] && ok || fail "--threads 1 under SLURM_CPUS_PER_TASK=2 gives $(threads_of flag1)"
SLURM_CPUS_PER_TASK=lots "$QKV" train --steps 1 --out never >out.txt 2>err.txt
rc=$?
{ [ "$rc" = 2 ] && grep -q "^qkv: SLURM_CPUS_PER_TASK is 'lots'" err.txt && [ ! -e never ]; } && ok ||
    fail "a bad SLURM_CPUS_PER_TASK: exit $rc, $(cat err.txt)"

# ---- the default thread count beside busy programs (cli_set_threads, guard.c) -----------
# With as many busy processes as cores, the default is one thread; OMP_NUM_THREADS and
# --threads are the user's and are kept; the run is the same bits either way.
cores=$(nproc)
hogs=()
for ((i = 0; i < cores; i++)); do sh -c 'while :; do :; done' & hogs+=($!); done
sleep 0.5
env -u OMP_NUM_THREADS -u SLURM_CPUS_PER_TASK "$QKV" train "${small[@]}" --out busy1 >/dev/null 2>&1
env -u SLURM_CPUS_PER_TASK OMP_NUM_THREADS=2 "$QKV" train "${small[@]}" --out busy2 >/dev/null 2>&1
env -u OMP_NUM_THREADS -u SLURM_CPUS_PER_TASK "$QKV" train "${small[@]}" --threads 2 --out busy3 >/dev/null 2>&1
kill "${hogs[@]}"; wait "${hogs[@]}" 2>/dev/null
[ "$(threads_of busy1)" = 1 ] && ok || fail "beside $cores busy processes the default is $(threads_of busy1) threads"
[ "$(threads_of busy2)" = 2 ] && ok || fail "OMP_NUM_THREADS=2 beside busy processes gives $(threads_of busy2)"
[ "$(threads_of busy3)" = 2 ] && ok || fail "--threads 2 beside busy processes gives $(threads_of busy3)"
check "a run beside busy processes == one on two threads" cmp -s busy1/model.safetensors busy2/model.safetensors

echo "summary_test: $checks checks passed, $failures failed"
[ "$failures" -eq 0 ]
