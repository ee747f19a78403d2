#!/usr/bin/env bash
# explain_torch_test.sh - PyTorch recomputes qkv ablate, patch, attribute and lens from the
# model file alone (scripts/explain_torch.py): f32 to 1e-6, f64 to 1e-9; and the check can fail.
#
# usage: tests/explain_torch_test.sh path/to/qkv path/to/python-with-torch scripts/explain_torch.py
set -u
QKV=${1:?usage: explain_torch_test.sh QKV PYTHON SCRIPT}
PY=${2:?usage: explain_torch_test.sh QKV PYTHON SCRIPT}
SCRIPT=${3:?usage: explain_torch_test.sh QKV PYTHON SCRIPT}

W=$(mktemp -d "${TMPDIR:-/tmp}/qkv_explain_torch.XXXXXX")
trap 'rm -rf "$W"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# 40 repeated sequences of 16 tokens: segments of 4..8 distinct tokens
"$PY" - >"$W/data.txt" <<'PYEOF'
import random
random.seed(3)
for _ in range(40):
    n = random.randint(4, 8)
    seg = random.sample(range(16), n)
    print(" ".join(str(seg[i % n]) for i in range(16)))
PYEOF
clean="6 12 11 9 6 12 11 9 6 12 11 9 6 12 11 9"
corrupt="1 2 3 4 5 7 8 10 6 12 11 9 6 12 11 9"
# an induction model (residual, causal), and a shift model in f64 without the residual stream
i=0
for opts in "--task induction --d-model 32 --steps 150" \
            "--task shift --seq-len 16 --vocab 16 --heads 2 --layers 2 --no-residual --d-model 16 --steps 20 --dtype f64"; do
    i=$((i + 1))
    # shellcheck disable=SC2086
    "$QKV" train $opts --out "$W/m$i" --quiet || { fail "qkv train $opts"; continue; }
    for dt in f32 f64; do
        [ $i = 2 ] && [ $dt = f32 ] && continue # an f64 model is never rounded
        o="$W/m$i.$dt"
        if "$QKV" ablate "$W/m$i" --data "$W/data.txt" --mode mean --heads 1.1,2.2 --together \
               --dtype $dt --out "$o.ablate.json" >/dev/null &&
           "$QKV" patch "$W/m$i" --clean "$clean" --corrupt "$corrupt" --over head-position \
               --answer 9 --wrong 4 --dtype $dt --out "$o.patch.json" >/dev/null &&
           "$QKV" attribute "$W/m$i" --input "$clean" --dtype $dt --out "$o.attribute.json" \
               >/dev/null &&
           "$QKV" lens "$W/m$i" --input "$clean" --top 4 --dtype $dt --out "$o.lens.json" \
               >/dev/null; then
            if "$PY" "$SCRIPT" "$W/m$i" --ablate "$o.ablate.json" --data "$W/data.txt" \
                   --patch "$o.patch.json" --attribute "$o.attribute.json" \
                   --lens "$o.lens.json" >"$o.txt" 2>&1; then
                echo "ok: $opts in $dt"; cat "$o.txt"
            else
                fail "PyTorch disagrees with qkv on $opts in $dt:"; cat "$o.txt"
            fi
        else
            fail "qkv ablate, patch, attribute or lens on $opts in $dt"
        fi
    done
done
# the check can fail: an f64 head share nudged by 1e-8, an f32 part by 1e-5
nudge() { # SRC DST FIELD-PATH DELTA
    "$PY" - "$@" <<'PYEOF'
import json, sys
src, dst, field, delta = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
js = json.load(open(src))
*path, leaf = field.split("/")
at = js
for key in path:  # a list's index, or an object's key
    at = at[int(key)] if isinstance(at, list) else at[key]
at[leaf] += delta
json.dump(js, open(dst, "w"))
PYEOF
}
nudge "$W/m1.f64.patch.json" "$W/bad_patch.json" results/3/exact 1e-8
"$PY" "$SCRIPT" "$W/m1" --patch "$W/bad_patch.json" >/dev/null 2>&1
rc=$?
[ "$rc" = 1 ] && echo "ok: a share nudged by 1e-8 in f64 is caught" || fail "a nudged share: exit $rc"
nudge "$W/m1.f32.attribute.json" "$W/bad_attribute.json" parts/1/value 1e-5
"$PY" "$SCRIPT" "$W/m1" --attribute "$W/bad_attribute.json" >/dev/null 2>&1
rc=$?
[ "$rc" = 1 ] && echo "ok: a DLA part nudged by 1e-5 in f32 is caught" || fail "a nudged part: exit $rc"
nudge "$W/m2.f64.lens.json" "$W/bad_lens.json" layers/1/positions/5/top/1/prob 1e-8
"$PY" "$SCRIPT" "$W/m2" --lens "$W/bad_lens.json" >/dev/null 2>&1
rc=$?
[ "$rc" = 1 ] && echo "ok: a lens probability nudged by 1e-8 in f64 is caught" || fail "a nudged lens probability: exit $rc"
nudge "$W/m1.f32.lens.json" "$W/bad_lens_part.json" decomposition/7/parts/2/value 1e-5
"$PY" "$SCRIPT" "$W/m1" --lens "$W/bad_lens_part.json" >/dev/null 2>&1
rc=$?
[ "$rc" = 1 ] && echo "ok: a lens part nudged by 1e-5 in f32 is caught" || fail "a nudged lens part: exit $rc"

[ "$failures" -eq 0 ] && echo "explain_torch_test: all passed" || echo "explain_torch_test: $failures failed"
[ "$failures" -eq 0 ]
