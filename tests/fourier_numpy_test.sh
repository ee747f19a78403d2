#!/usr/bin/env bash
# fourier_numpy_test.sh - docs/grokking.md is enough to recompute `qkv fourier` and the
# progress measures training tracks: tests/fourier_numpy.py recomputes every number of
# `qkv fourier --json` (and of the last row of metrics.jsonl) from the saved model with
# numpy's FFT, to 1e-6; on models of small moduli, odd and even (the Nyquist term), add, sub
# and mul, one and two layers, as trained and with key frequencies planted in the embedding;
# and the check does fail when a number differs.
#
# usage: tests/fourier_numpy_test.sh path/to/qkv path/to/python-with-numpy tests/fourier_numpy.py
set -u
QKV=${1:?usage: fourier_numpy_test.sh QKV PYTHON SCRIPT}
PY=${2:?usage: fourier_numpy_test.sh QKV PYTHON SCRIPT}
SCRIPT=${3:?usage: fourier_numpy_test.sh QKV PYTHON SCRIPT}
if ! "$PY" -c "import numpy" 2>/dev/null; then
    echo "fourier_numpy_test: skipping: $PY cannot import numpy"; exit 77 # ctest: skipped
fi
W=$(mktemp -d "${TMPDIR:-/tmp}/qkv_fourier.XXXXXX")
trap 'rm -rf "$W"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# compare DIR [--metrics]: qkv fourier DIR --json against the recomputation
compare() {
    local d=$1; shift
    if ! "$QKV" fourier "$d" --json >"$d.json"; then fail "qkv fourier $d"; return; fi
    if "$PY" "$SCRIPT" "$d" "$d.json" "$@" >"$d.txt" 2>&1; then
        echo "ok: $(basename "$d"): $(cut -c1-200 "$d.txt")"
    else
        fail "$(basename "$d"): the recomputed measures differ:"; cat "$d.txt"
    fi
}

i=0
for opts in "--modulus 13 --steps 60" \
            "--modulus 12 --op sub --train-frac 0.5 --data-seed 3 --steps 40" \
            "--modulus 10 --op mul --layers 2 --mlp 16 --steps 20"; do
    i=$((i + 1))
    # shellcheck disable=SC2086
    if ! "$QKV" train --task modular --d-model 32 --mlp 24 --eval-every 20 --dtype f64 $opts \
            --out "$W/m$i" --quiet >/dev/null 2>"$W/train$i.txt"; then
        fail "qkv train $opts"; cat "$W/train$i.txt"; continue
    fi
    compare "$W/m$i" --metrics
    # two frequencies planted, strong enough to be key (for the even modulus, the Nyquist one)
    "$PY" "$SCRIPT" --plant "$W/m$i" "$W/p$i" "2,$(( i == 2 ? 6 : 5 ))" && compare "$W/p$i"
done

# the measures are the same bits on one thread and two, and on the plain C path
bits() { # NAME THREADS [PATH]
    local path=${3:-}
    env ${path:+QKV_SIMD=$path} "$QKV" train --task modular --modulus 11 --d-model 16 --mlp 16 \
        --steps 6 --eval-every 2 --threads "$2" --quiet --out "$W/$1" >/dev/null 2>&1 ||
        fail "qkv train --threads $2 ${path:+(QKV_SIMD=$path)}"
}
bits t1 1 && bits t2 2 && bits c1 1 scalar
if cmp -s "$W/t1/metrics.jsonl" "$W/t2/metrics.jsonl" && cmp -s "$W/t1/metrics.jsonl" "$W/c1/metrics.jsonl"; then
    echo "ok: the measures are the same bits on 1 and 2 threads and on the plain C path"
else
    fail "the measures of metrics.jsonl differ between thread counts or SIMD paths"
fi

# the check can fail: the restricted loss off by 1e-5 of itself is caught
"$PY" - "$W/p1.json" "$W/bad.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
d["restricted_loss"] *= 1 + 1e-5
json.dump(d, open(sys.argv[2], "w"))
PYEOF
"$PY" "$SCRIPT" "$W/p1" "$W/bad.json" >"$W/bad.txt" 2>&1
rc=$?
[ "$rc" = 1 ] && echo "ok: a restricted loss off by 1e-5 is caught" || { fail "a restricted loss off by 1e-5 gives exit $rc"; cat "$W/bad.txt"; }

[ "$failures" -eq 0 ] && echo "fourier_numpy_test: all passed" || echo "fourier_numpy_test: $failures failed"
[ "$failures" -eq 0 ]
