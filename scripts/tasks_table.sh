#!/usr/bin/env bash
# The README's task table: `qkv train --task T` with default options for every task, with
# --optim sgd on copy, reverse and shift, and `qkv train --data FILE` on the two data files of
# tests/data (swap neighbours; outputs half as long, by cross-attention). Prints a markdown table.
#   scripts/tasks_table.sh [extra qkv train options]
set -euo pipefail
cd "$(dirname "$0")/.."
qkv=${QKV:-build/qkv}
[ -x "$qkv" ] || { cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build build -j"$(nproc)" >/dev/null; }
runs=(copy:adam reverse:adam shift:adam lookup:adam max:adam induction:adam recall:adam sort:adam
      translate:adam copy:sgd reverse:sgd shift:sgd data/swap_pairs.tsv:adam data/odd_words.tsv:adam)
echo "| task | optimizer | steps | seconds | held-out accuracy | attention mass |"
echo "|---|---|---|---|---|---|"
for run in "${runs[@]}"; do
    task=${run%%:*} optim=${run##*:}
    case $task in
    data/*) args=(train --data "tests/$task" --json --quiet "$@") ;;
    *) args=(train --task "$task" --json --quiet "$@") ;;
    esac
    [ "$optim" = adam ] || args+=(--optim "$optim")
    "$qkv" "${args[@]}" | TASK=$task python3 -c '
import json, os, sys
d = json.load(sys.stdin)
task = d["task"] if d["task"] != "data" else "`--data tests/%s`" % os.environ["TASK"]
mass = "%.3f (layer %d)" % (d["attention_mass"], d["attention_layer"]) if d["task"] != "data" else "none defined"
print("| %s | %s | %d | %.1f | %.2f%% | %s |" % (task, d["optim"], d["steps"], d["seconds"],
      100 * d["accuracy"], mass))'
done
