#!/usr/bin/env bash
# rederive_test.sh - docs/model.md is enough to reproduce `qkv eval`: tests/rederive_heldout.py
# rebuilds the held-out set, the forward pass and the metrics from the documentation and the
# model file alone, and must match the counts of `qkv eval --json` exactly; and it does fail
# when they differ.
#
# usage: tests/rederive_test.sh path/to/qkv path/to/python-with-numpy tests/rederive_heldout.py
set -u
QKV=${1:?usage: rederive_test.sh QKV PYTHON SCRIPT}
PY=${2:?usage: rederive_test.sh QKV PYTHON SCRIPT}
SCRIPT=${3:?usage: rederive_test.sh QKV PYTHON SCRIPT}
if ! "$PY" -c "import numpy" 2>/dev/null; then
    echo "rederive_test: skipping: $PY cannot import numpy"; exit 77 # ctest: skipped
fi
W=$(mktemp -d "${TMPDIR:-/tmp}/qkv_rederive.XXXXXX")
trap 'rm -rf "$W"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# every task's draw (lookup's shuffle, values and query; induction's segment, recall's pairs,
# sort's distinct tokens, translate's dictionary), several heads and layers, the causal mask,
# an encoder-decoder, a seed other than 1, and an f64 model; modular's split of its pairs (its
# ops, a data seed, a train share; the full batch and a drawn one) with an MLP
i=0
for opts in "--task lookup --steps 150 --seed 7" \
            "--task copy --heads 2 --causal --steps 100 --dtype f64" \
            "--task shift --layers 2 --residual --d-model 32 --steps 150 --seed 12345678901" \
            "--task reverse --seq-len 6 --vocab 9 --steps 100" \
            "--task max --heads 4 --d-model 32 --steps 100" \
            "--task induction --d-model 32 --steps 80" \
            "--task recall --d-model 32 --steps 60" \
            "--task sort --seq-len 9 --d-model 32 --steps 60" \
            "--task translate --d-model 32 --heads 2 --steps 60" \
            "--task modular --modulus 17 --op sub --train-frac 0.4 --data-seed 5 --mlp 32 --steps 60" \
            "--task modular --modulus 11 --op mul --d-model 32 --mlp 16 --act gelu --batch 16 --steps 40"; do
    i=$((i + 1))
    # shellcheck disable=SC2086
    if ! "$QKV" train $opts --out "$W/m$i" --quiet; then fail "qkv train $opts"; continue; fi
    if ! "$QKV" eval --model "$W/m$i" --json >"$W/e$i.json"; then fail "qkv eval $opts"; continue; fi
    if "$PY" "$SCRIPT" "$W/m$i" "$W/e$i.json" >"$W/o$i.txt" 2>&1; then
        echo "ok: $opts: $(cut -c1-200 "$W/o$i.txt")"
    else
        fail "re-derived metrics differ for $opts:"; cat "$W/o$i.txt"
    fi
done
# data files: the vocabulary, the split by line hash (or --heldout), padding, and an
# encoder-decoder, re-derived from the docs
DATA=$(dirname "$SCRIPT")/data
head -n 300 "$DATA/swap_pairs.tsv" >"$W/train.tsv"
sed -n 301,400p "$DATA/swap_pairs.tsv" >"$W/held.tsv"
for opts in "--data $DATA/swap_pairs.tsv --steps 60 --d-model 16" \
            "--data $DATA/odd_words.tsv --heads 2 --d-model 16 --steps 60" \
            "--data $W/train.tsv --heldout $W/held.tsv --layers 2 --residual --d-model 16 --steps 40"; do
    i=$((i + 1))
    # shellcheck disable=SC2086
    if ! "$QKV" train $opts --out "$W/m$i" --quiet; then fail "qkv train $opts"; continue; fi
    if ! "$QKV" eval --model "$W/m$i" --json >"$W/e$i.json"; then fail "qkv eval $opts"; continue; fi
    if "$PY" "$SCRIPT" "$W/m$i" "$W/e$i.json" >"$W/o$i.txt" 2>&1; then
        echo "ok: $opts: $(cut -c1-200 "$W/o$i.txt")"
    else
        fail "re-derived metrics differ for $opts:"; cat "$W/o$i.txt"
    fi
done
# the check can fail: one correct position more than qkv reported is caught
"$PY" - "$W/e1.json" "$W/bad.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
d["heldout_correct"] += 1
json.dump(d, open(sys.argv[2], "w"))
EOF
"$PY" "$SCRIPT" "$W/m1" "$W/bad.json" >"$W/bad.txt" 2>&1
rc=$?
[ "$rc" = 1 ] && echo "ok: a count off by one is caught" || { fail "a count off by one gives exit $rc"; cat "$W/bad.txt"; }

[ "$failures" -eq 0 ] && echo "rederive_test: all passed" || echo "rederive_test: $failures failed"
[ "$failures" -eq 0 ]
