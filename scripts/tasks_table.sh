#!/usr/bin/env bash
# The task table of docs/training.md: `qkv train --task T` with default options for every task, with
# --optim sgd on copy, reverse and shift, and `qkv train --data FILE` on the two data files of
# tests/data (swap neighbours; outputs half as long, by cross-attention). Prints a markdown table,
# then a line on the induction run's head scores (from its metrics.csv): the best induction score
# in layer 2, and the first evaluated step at which a layer-2 head passed 0.5.
#   scripts/tasks_table.sh [extra qkv train options]
# QKV_KEEP_INDUCTION=DIR keeps the induction run there (scripts/docs_numbers.sh reads it).
set -euo pipefail
cd "$(dirname "$0")/.."
qkv=${QKV:-build/qkv}
[ -x "$qkv" ] || { cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build build -j"$(nproc)" >/dev/null; }
runs=(copy:adam reverse:adam shift:adam lookup:adam max:adam induction:adam recall:adam sort:adam
      translate:adam copy:sgd reverse:sgd shift:sgd data/swap_pairs.tsv:adam data/odd_words.tsv:adam)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| task | optimizer | steps | seconds | held-out accuracy | attention mass |"
echo "|---|---|---|---|---|---|"
for run in "${runs[@]}"; do
    task=${run%%:*} optim=${run##*:}
    case $task in
    data/*) args=(train --data "tests/$task" --json --quiet "$@") ;;
    *) args=(train --task "$task" --json --quiet "$@") ;;
    esac
    [ "$optim" = adam ] || args+=(--optim "$optim")
    [ "$task" = induction ] && args+=(--out "$tmp/induction")
    "$qkv" "${args[@]}" | TASK=$task python3 -c '
import json, os, sys
d = json.load(sys.stdin)
task = d["task"] if d["task"] != "data" else "`--data tests/%s`" % os.environ["TASK"]
mass = "%.3f (layer %d)" % (d["attention_mass"], d["attention_layer"]) if d["task"] != "data" else "none defined"
print("| %s | %s | %d | %.1f | %.2f%% | %s |" % (task, d["optim"], d["steps"], d["seconds"],
      100 * d["accuracy"], mass))'
done
python3 - "$tmp/induction/metrics.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
ind = [c for c in rows[0] if c.startswith("ind_l2h")]
best = max(ind, key=lambda c: float(rows[-1][c]))
formed = next((r["step"] for r in rows if any(float(r[c]) >= 0.5 for c in ind)), None)
print("\ninduction: layer 2's best induction score %.3f (%s); a layer-2 head passed 0.5 by step %s"
      % (float(rows[-1][best]), best, formed))
PY
[ -z "${QKV_KEEP_INDUCTION:-}" ] || cp -r "$tmp/induction" "$QKV_KEEP_INDUCTION"
