#!/usr/bin/env bash
# The README's task table: `qkv train --task T` with default options for every task, and with
# --optim sgd on copy, reverse and shift. Prints a markdown table.
#   scripts/tasks_table.sh [extra qkv train options]
set -euo pipefail
cd "$(dirname "$0")/.."
qkv=${QKV:-build/qkv}
[ -x "$qkv" ] || { cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build build -j"$(nproc)" >/dev/null; }
runs=(copy:adam reverse:adam shift:adam lookup:adam max:adam copy:sgd reverse:sgd shift:sgd)
echo "| task | optimizer | steps | seconds | held-out accuracy | attention mass |"
echo "|---|---|---|---|---|---|"
for run in "${runs[@]}"; do
    task=${run%%:*} optim=${run##*:}
    args=(train --task "$task" --json --quiet "$@")
    [ "$optim" = adam ] || args+=(--optim "$optim")
    "$qkv" "${args[@]}" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print("| %s | %s | %d | %.1f | %.2f%% | %.3f |" % (d["task"], d["optim"], d["steps"], d["seconds"],
      100 * d["accuracy"], d["attention_mass"]))'
done
