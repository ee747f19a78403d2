#!/usr/bin/env bash
# grok_seeds.sh - docs/grokking.md's three runs of the default modular task: (a + b) mod 113,
# 30% of the pairs, the paper's model and optimizer, 25000 full-batch steps, seeds 1 2 3
# (data seed 0: one split), the progress measures every 100 steps.
#
# usage: scripts/grok_seeds.sh [SEED...]     (default 1 2 3; QKV: the binary, default build/qkv;
#                                            QKV_TRAIN_OPTS: more options, e.g. --threads 1)
#
# Each run goes to runs/grok113_sSEED and its record to docs/data/grok113/seedSEED.csv and
# .json (scripts/grok_seeds.py record): the measures at each evaluation and the summary's
# phases, from which scripts/docs_numbers.sh makes the page's tables. docs_test reruns the
# first 200 steps of seed 1 and compares them with its record, character for character.
set -euo pipefail
cd "$(dirname "$0")/.."
qkv=${QKV:-build/qkv}
PY=${QKV_PYTHON:-python3}
[ -x "$qkv" ] || { echo "grok_seeds: no qkv at $qkv (build it, or set QKV)" >&2; exit 2; }
mkdir -p runs docs/data/grok113
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(1 2 3)
for s in "${seeds[@]}"; do
    start=$SECONDS
    # shellcheck disable=SC2086 # QKV_TRAIN_OPTS is a list of options
    "$qkv" train --task modular --seed "$s" --eval-every 100 --quiet ${QKV_TRAIN_OPTS:-} \
        --out "runs/grok113_s$s"
    "$PY" scripts/grok_seeds.py record "runs/grok113_s$s" "docs/data/grok113/seed$s.csv"
    echo "grok_seeds: seed $s in $((SECONDS - start)) s"
done
