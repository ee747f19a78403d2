#!/usr/bin/env bash
# explain_torch_test.sh - PyTorch recomputes qkv ablate, patch, attribute and lens from the
# model file alone (scripts/explain_torch.py): f32 to 1e-6, f64 to 1e-9; and the check can fail.
# Between the two models and their dtypes, patch runs every --site (z, q, k, v, pattern,
# resid-pre, resid-post) and every --over (head, head-position, key-position,
# layer-position), --path, and a set of pairs with --per-pair; ablate runs --site q, pattern
# and resid-post, each zeroed and each replaced by its mean.
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
# four pairs: with the answer and the wrong token, with the answer only (the wrong token is
# the corrupted input's prediction), with neither (the answer is the clean input's too)
{
    printf '%s\t%s\t9\t4\n' "$clean" "$corrupt"
    printf '%s\t%s\t3\n' "3 7 1 14 2 3 7 1 14 2 3 7 1 14 2 3" "8 0 13 5 10 4 6 9 11 12 15 0 1 14 2 5"
    printf '%s\t%s\n' "5 10 15 0 4 8 5 10 15 0 4 8 5 10 15 0" "1 2 3 6 7 9 5 10 15 0 4 8 5 10 13 0"
    printf '%s\t%s\t2\t7\n' "13 2 8 4 11 1 7 13 2 8 4 11 1 7 13 2" \
        "3 5 6 9 10 12 14 13 2 8 4 11 1 7 13 2"
} >"$W/pairs.tsv"

# What each model and dtype patches and ablates besides the head outputs: "SITE OVER" for
# patch (path: --path), "SITE MODE OVER [HEADS]" for ablate, and a set of pairs ("SITE
# OVER" or path) with --per-pair. The set of pairs by --path is checked in f64 only: in f32
# its pass 3 reads pass 2's rounded record, and pair 3's patched metric lands 1.15e-6 from
# f64's (the f64 run agrees to 2e-15).
plan() { # MODEL DTYPE -> lines "patch|ablate|pairs ARGS"
    case "$1.$2" in
    m1.f32) printf '%s\n' "patch q head" "patch v head" "patch pattern head-position" \
        "patch resid-post layer-position" "patch path" "ablate q zero head-position 2.2" \
        "ablate resid-post mean layer-position" "pairs v key-position" ;;
    m1.f64) printf '%s\n' "patch k key-position" "patch pattern key-position" \
        "patch resid-pre layer-position" "patch path" "ablate resid-post zero layer-position" \
        "ablate pattern mean key-position 2.1" "pairs path" ;;
    m2.f64) printf '%s\n' "patch k head" "patch v key-position" "patch q head-position" \
        "patch pattern head" "patch path" "ablate q mean head" "ablate pattern zero head" ;;
    esac
}
# each qkv run of the plan, and the explain_torch options that check it, into $W/$o.args
run_plan() { # MODEL DTYPE OUT-PREFIX
    local m=$1 dt=$2 o=$3 kind a b c d n=0 where
    plan "$m" "$dt" >"$W/$o.plan"
    while read -r kind a b c d; do
        n=$((n + 1))
        where=(--site "$a" --over "$b")
        [ "$a" = path ] && where=(--path)
        case $kind in
        patch)
            "$QKV" patch "$W/$m" --clean "$clean" --corrupt "$corrupt" "${where[@]}" \
                --answer 9 --wrong 4 --dtype "$dt" --out "$W/$o.$n.json" >/dev/null || return 1
            echo "--patch $W/$o.$n.json" ;;
        ablate)
            "$QKV" ablate "$W/$m" --data "$W/data.txt" --site "$a" --mode "$b" --over "$c" \
                ${d:+--heads "$d"} --together --dtype "$dt" --out "$W/$o.$n.json" \
                >/dev/null || return 1
            echo "--ablate $W/$o.$n.json" ;;
        pairs)
            "$QKV" patch "$W/$m" --pairs "$W/pairs.tsv" "${where[@]}" --per-pair \
                "$W/$o.$n.jsonl" --dtype "$dt" --out "$W/$o.$n.json" >/dev/null || return 1
            echo "--pairs-patch $W/$o.$n.json $W/pairs.tsv $W/$o.$n.jsonl" ;;
        esac
    done <"$W/$o.plan" >"$W/$o.args"
}
# an induction model (residual, causal), and a shift model in f64 without the residual stream
i=0
for opts in "--task induction --d-model 32 --steps 150" \
            "--task shift --seq-len 16 --vocab 16 --heads 2 --layers 2 --no-residual --d-model 16 --steps 20 --dtype f64"; do
    i=$((i + 1))
    # shellcheck disable=SC2086
    "$QKV" train $opts --out "$W/m$i" --quiet || { fail "qkv train $opts"; continue; }
    for dt in f32 f64; do
        [ $i = 2 ] && [ $dt = f32 ] && continue # an f64 model is never rounded
        o="m$i.$dt"
        if "$QKV" ablate "$W/m$i" --data "$W/data.txt" --mode mean --heads 1.1,2.2 --together \
               --dtype $dt --out "$W/$o.ablate.json" >/dev/null &&
           "$QKV" patch "$W/m$i" --clean "$clean" --corrupt "$corrupt" --over head-position \
               --answer 9 --wrong 4 --dtype $dt --out "$W/$o.patch.json" >/dev/null &&
           "$QKV" attribute "$W/m$i" --input "$clean" --dtype $dt --out "$W/$o.attribute.json" \
               >/dev/null &&
           "$QKV" lens "$W/m$i" --input "$clean" --top 4 --dtype $dt --out "$W/$o.lens.json" \
               >/dev/null && run_plan "m$i" $dt "$o"; then
            # shellcheck disable=SC2046
            if "$PY" "$SCRIPT" "$W/m$i" --ablate "$W/$o.ablate.json" --data "$W/data.txt" \
                   --patch "$W/$o.patch.json" --attribute "$W/$o.attribute.json" \
                   --lens "$W/$o.lens.json" $(cat "$W/$o.args") >"$W/$o.txt" 2>&1; then
                echo "ok: $opts in $dt"; cat "$W/$o.txt"
            else
                fail "PyTorch disagrees with qkv on $opts in $dt:"; cat "$W/$o.txt"
            fi
        else
            fail "qkv ablate, patch, attribute or lens on $opts in $dt"
        fi
    done
done

# The check can fail: each number below nudged (f64 by 1e-8, f32 by 1e-5) must be named as a
# mismatch. One run of explain_torch checks those of the first model, another the second's.
nudge() { # SRC DST FIELD-PATH DELTA: FIELD-PATH keys and list indexes (a .jsonl: its line first)
    "$PY" - "$@" <<'PYEOF'
import json, sys
src, dst, field, delta = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
lines = src.endswith(".jsonl")
js = [json.loads(l) for l in open(src)] if lines else json.load(open(src))
*path, leaf = [int(k) if k.isdigit() else k for k in field.split("/")]
o = js
for k in path:
    o = o[k]
o[leaf] += delta
with open(dst, "w") as f:
    if lines:
        f.write("".join(json.dumps(o) + "\n" for o in js))
    else:
        json.dump(js, f)
PYEOF
}
# the plans' numbering: m1.f64.3 resid-pre, .4 --path, .5 the ablated resid-post, .7 the
# pairs by --path; m1.f32.3 the pattern by query position
if ! { nudge "$W/m1.f64.patch.json" "$W/bad.1.json" results/3/exact 1e-8 &&
       nudge "$W/m1.f64.4.json" "$W/bad.2.json" paths/2/exact 1e-8 &&
       nudge "$W/m1.f64.4.json" "$W/bad.3.json" paths/5/attribution 1e-8 &&
       nudge "$W/m1.f64.3.json" "$W/bad.4.json" results/20/attribution 1e-8 &&
       nudge "$W/m1.f32.3.json" "$W/bad.5.json" results/62/exact 1e-5 &&
       nudge "$W/m1.f64.7.jsonl" "$W/bad.6.jsonl" 2/paths/3/patched 1e-8 &&
       nudge "$W/m1.f32.attribute.json" "$W/bad.7.json" parts/1/value 1e-5 &&
       nudge "$W/m1.f64.5.json" "$W/bad.8.json" heads/20/loss 1e-8 &&
       nudge "$W/m1.f32.lens.json" "$W/bad.9.json" decomposition/7/parts/2/value 1e-5 &&
       nudge "$W/m2.f64.lens.json" "$W/bad.10.json" layers/1/positions/5/top/1/prob 1e-8; }; then
    fail "nudging the JSON"
fi
"$PY" "$SCRIPT" "$W/m1" --patch "$W/bad.1.json" --patch "$W/bad.2.json" --patch "$W/bad.3.json" \
    --patch "$W/bad.4.json" --patch "$W/bad.5.json" --attribute "$W/bad.7.json" \
    --pairs-patch "$W/m1.f64.7.json" "$W/pairs.tsv" "$W/bad.6.jsonl" \
    --ablate "$W/bad.8.json" --data "$W/data.txt" --lens "$W/bad.9.json" >"$W/bad.txt" 2>&1
rc=$?
[ "$rc" = 1 ] || fail "the nudged numbers: explain_torch exits $rc, not 1"
"$PY" "$SCRIPT" "$W/m2" --lens "$W/bad.10.json" >>"$W/bad.txt" 2>&1
rc=$?
[ "$rc" = 1 ] || fail "the nudged numbers of the second model: explain_torch exits $rc, not 1"
for what in "patch z 1.1 @3 exact" "patch path 1.1 -> 2.1 by v exact" \
            "patch path 1.1 -> 2.2 by v attribution" "patch resid-pre 2 @4 attribution" \
            "patch pattern 2.2 @14 exact" "pair 3 path 1.1 -> 2.2 by q patched" \
            "attribute 1.1" "ablate zero resid-post 2 @4 loss" \
            "lens part 1.2 at 7" "lens prob of 0 after 1 at 5"; do
    if grep -qF "mismatch: $what:" "$W/bad.txt"; then echo "ok: a nudged $what is caught"
    else fail "a nudged $what is not caught:"; cat "$W/bad.txt"; fi
done

[ "$failures" -eq 0 ] && echo "explain_torch_test: all passed" || echo "explain_torch_test: $failures failed"
[ "$failures" -eq 0 ]
