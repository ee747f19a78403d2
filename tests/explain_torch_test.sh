#!/usr/bin/env bash
# explain_torch_test.sh - PyTorch recomputes qkv ablate, patch, attribute and lens from the
# model file alone (scripts/explain_torch.py): f32 to 1e-6, f64 to 1e-9; and the check can fail.
# Between the first two models and their dtypes, patch runs every --site (z, q, k, v, pattern,
# resid-pre, resid-post) and every --over (head, head-position, key-position,
# layer-position), --path, and a set of pairs with --per-pair; ablate runs --site q, pattern
# and resid-post, each zeroed and each replaced by its mean. Two models of transformer blocks
# (an induction model with MLPs, gelu, and LayerNorms, in f32 and f64; a shift model of f64
# with MLPs, gelu-tanh, and no LayerNorm) run ablate and patch (resid-post, now after the MLP,
# and the MLP's sites resid-mid, mlp-pre, mlp-post, mlp-out, by position and by neuron; and
# each LayerNorm's scale, ln-scale, by LayerNorm and by position, zeroed and set to its mean),
# attribute with and without --neurons, and lens (through the final LayerNorm); they and a
# third (reverse, relu, no LayerNorm, f32 and f64) run patch --path, whose senders and
# receivers include the MLPs (the induction model's f64 also over a set of pairs). Besides
# the logit difference, patch runs --metric loss, prob and kl (by site, by --path, over the set
# of pairs, with --heads and --together), and ablate --metric loss, prob, kl and --mode
# resample (2 draws, seed 5: the partners drawn again in Python).
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

# What each model and dtype patches and ablates besides the head outputs: "SITE OVER [METRIC
# [HEADS]]" for patch (path: "path [METRIC]", --path; HEADS: --heads HEADS --together),
# "SITE MODE OVER [HEADS|- [METRIC]]" for ablate (resample: --draws 2 --seed 5), a set of
# pairs ("SITE OVER [METRIC]" or "path [METRIC]") with --per-pair, and "neurons" for attribute
# --neurons; METRIC is --metric's (loss, prob, kl). The set of pairs by --path is
# checked in f64 only: in f32 its pass 3 reads pass 2's rounded record, and pair 3's patched
# metric lands 1.15e-6 from f64's (the f64 run agrees to 2e-15).
plan() { # MODEL DTYPE -> lines "patch|ablate|pairs|neurons ARGS"
    case "$1.$2" in
    m1.f32) printf '%s\n' "patch q head" "patch v head" "patch pattern head-position" \
        "patch resid-post layer-position" "patch path" "ablate q zero head-position 2.2" \
        "ablate resid-post mean layer-position" "pairs v key-position" \
        "patch z head prob 2.1,2.2" "patch path kl" "ablate z resample head - kl" ;;
    m1.f64) printf '%s\n' "patch k key-position" "patch pattern key-position" \
        "patch resid-pre layer-position" "patch path" "ablate resid-post zero layer-position" \
        "ablate pattern mean key-position 2.1" "pairs path" "patch q head-position loss" \
        "patch k key-position kl 1.1,2.2" "pairs z head kl" "pairs path loss" \
        "ablate pattern resample key-position 2.1 prob" ;;
    m2.f64) printf '%s\n' "patch k head" "patch v key-position" "patch q head-position" \
        "patch pattern head" "patch path" "ablate q mean head" "ablate pattern zero head" \
        "patch z head kl 1.1,1.2,2.1,2.2" "ablate z resample head - loss" ;;
    m3.f32) printf '%s\n' "patch resid-post layer-position" "patch q head" \
        "patch mlp-post neuron" "ablate resid-post zero layer-position" "neurons" \
        "patch path" "patch ln-scale ln-position" "ablate ln-scale mean ln" \
        "patch mlp-post neuron kl" ;;
    m3.f64) printf '%s\n' "patch resid-post layer-position" "patch k key-position" \
        "patch resid-mid layer-position" "ablate resid-post zero layer-position" \
        "ablate v mean head" "ablate mlp-pre mean neuron" "neurons" "patch path" \
        "pairs path" "patch ln-scale ln" "ablate ln-scale zero ln-position" \
        "patch path prob" "ablate ln-scale resample ln - kl" ;;
    m4.f64) printf '%s\n' "patch resid-post layer-position" "patch pattern key-position" \
        "patch mlp-out layer-position" "ablate resid-pre mean layer-position" \
        "ablate mlp-post zero layer-position" "neurons" "patch path" ;;
    m5.f32 | m5.f64) printf '%s\n' "patch path" ;;
    esac
}
# each qkv run of the plan, and the explain_torch options that check it, into $W/$o.args
run_plan() { # MODEL DTYPE OUT-PREFIX
    local m=$1 dt=$2 o=$3 kind a b c d e n=0 where metric heads answer
    plan "$m" "$dt" >"$W/$o.plan"
    while read -r kind a b c d e; do
        n=$((n + 1))
        where=(--site "$a" --over "$b") metric=$c heads=$d
        [ "$a" = path ] && where=(--path) metric=$b heads=
        answer=(--answer 9 --wrong 4) # kl reads no answer, loss and prob no wrong token
        case $metric in kl) answer=() ;; loss | prob) answer=(--answer 9) ;; esac
        case $kind in
        patch)
            "$QKV" patch "$W/$m" --clean "$clean" --corrupt "$corrupt" "${where[@]}" \
                "${answer[@]}" ${metric:+--metric "$metric"} \
                ${heads:+--heads "$heads" --together} --dtype "$dt" --out "$W/$o.$n.json" \
                >/dev/null || return 1
            echo "--patch $W/$o.$n.json" ;;
        ablate)
            [ "$d" = - ] && d=
            "$QKV" ablate "$W/$m" --data "$W/data.txt" --site "$a" --mode "$b" --over "$c" \
                ${d:+--heads "$d"} ${e:+--metric "$e"} --together --dtype "$dt" \
                $([ "$b" = resample ] && echo --draws 2 --seed 5) --out "$W/$o.$n.json" \
                >/dev/null || return 1
            echo "--ablate $W/$o.$n.json" ;;
        pairs)
            "$QKV" patch "$W/$m" --pairs "$W/pairs.tsv" "${where[@]}" --per-pair \
                "$W/$o.$n.jsonl" ${metric:+--metric "$metric"} --dtype "$dt" \
                --out "$W/$o.$n.json" >/dev/null || return 1
            echo "--pairs-patch $W/$o.$n.json $W/pairs.tsv $W/$o.$n.jsonl" ;;
        neurons)
            "$QKV" attribute "$W/$m" --input "$clean" --neurons --dtype "$dt" \
                --out "$W/$o.$n.json" >/dev/null || return 1
            echo "--attribute $W/$o.$n.json" ;;
        esac
    done <"$W/$o.plan" >"$W/$o.args"
}
# an induction model (residual, causal), a shift model in f64 without the residual stream,
# and three of transformer blocks: induction with MLPs (gelu) and LayerNorms, shift in f64
# with MLPs (gelu-tanh), reverse in f32 with MLPs (relu) and no LayerNorm. One run of
# explain_torch checks each model's JSONs of both dtypes. One held-out evaluation at the end
# (--eval-every: the weights do not depend on it) keeps the training short.
i=0
for opts in "--task induction --d-model 32 --steps 150" \
            "--task shift --seq-len 16 --vocab 16 --heads 2 --layers 2 --no-residual --d-model 16 --steps 20 --dtype f64" \
            "--task induction --d-model 16 --mlp 32 --act gelu --norm layernorm --steps 150" \
            "--task shift --seq-len 16 --vocab 16 --heads 2 --layers 2 --residual --d-model 16 \
             --mlp 16 --act gelu-tanh --steps 20 --dtype f64" \
            "--task reverse --seq-len 16 --vocab 16 --heads 2 --layers 2 --residual --d-model 16 \
             --mlp 16 --act relu --steps 20"; do
    i=$((i + 1))
    steps=${opts##*--steps } && steps=${steps%% *}
    # shellcheck disable=SC2086
    "$QKV" train $opts --eval-every "$steps" --out "$W/m$i" --quiet ||
        { fail "qkv train $opts"; continue; }
    dts="f32 f64"
    case $opts in *"--dtype f64"*) dts=f64 ;; esac # an f64 model is never rounded
    : >"$W/m$i.args"
    for dt in $dts; do
        o="m$i.$dt"
        if "$QKV" ablate "$W/m$i" --data "$W/data.txt" --mode mean --heads 1.1,2.2 --together \
               --dtype "$dt" --out "$W/$o.ablate.json" >/dev/null &&
           "$QKV" patch "$W/m$i" --clean "$clean" --corrupt "$corrupt" --over head-position \
               --answer 9 --wrong 4 --dtype "$dt" --out "$W/$o.patch.json" >/dev/null &&
           "$QKV" attribute "$W/m$i" --input "$clean" --dtype "$dt" \
               --out "$W/$o.attribute.json" >/dev/null &&
           "$QKV" lens "$W/m$i" --input "$clean" --top 4 --dtype "$dt" --out "$W/$o.lens.json" \
               >/dev/null && run_plan "m$i" "$dt" "$o"; then
            echo "--ablate $W/$o.ablate.json --patch $W/$o.patch.json" \
                 "--attribute $W/$o.attribute.json --lens $W/$o.lens.json" >>"$W/m$i.args"
            cat "$W/$o.args" >>"$W/m$i.args"
        else
            fail "qkv ablate, patch, attribute or lens on $opts in $dt"
        fi
    done
    # shellcheck disable=SC2046
    if "$PY" "$SCRIPT" "$W/m$i" --data "$W/data.txt" $(cat "$W/m$i.args") >"$W/m$i.txt" 2>&1; then
        echo "ok: $opts in $dts"; cat "$W/m$i.txt"
    else
        fail "PyTorch disagrees with qkv on $opts in $dts:"; cat "$W/m$i.txt"
    fi
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
# pairs by --path, .9 k by key position with --metric kl and --together, .10 pairs of z by kl,
# .12 the pattern resampled with --metric prob; m1.f32.3 the pattern by query position, .10
# --path by kl (a kl's scale is the logits' size: its pair nudged by 1e-7)
if ! { nudge "$W/m1.f64.patch.json" "$W/bad.1.json" results/3/exact 1e-8 &&
       nudge "$W/m1.f64.4.json" "$W/bad.2.json" paths/2/exact 1e-8 &&
       nudge "$W/m1.f64.4.json" "$W/bad.3.json" paths/5/attribution 1e-8 &&
       nudge "$W/m1.f64.3.json" "$W/bad.4.json" results/20/attribution 1e-8 &&
       nudge "$W/m1.f32.3.json" "$W/bad.5.json" results/62/exact 1e-5 &&
       nudge "$W/m1.f64.7.jsonl" "$W/bad.6.jsonl" 2/paths/3/patched 1e-8 &&
       nudge "$W/m1.f32.attribute.json" "$W/bad.7.json" parts/1/value 1e-5 &&
       nudge "$W/m1.f64.5.json" "$W/bad.8.json" heads/20/loss 1e-8 &&
       nudge "$W/m1.f32.lens.json" "$W/bad.9.json" decomposition/7/parts/2/value 1e-5 &&
       nudge "$W/m2.f64.lens.json" "$W/bad.10.json" layers/1/positions/5/top/1/prob 1e-8 &&
       nudge "$W/m1.f64.9.json" "$W/bad.27.json" together/exact 1e-8 &&
       nudge "$W/m1.f64.12.json" "$W/bad.28.json" heads/0/metric 1e-8 &&
       nudge "$W/m1.f32.10.json" "$W/bad.29.json" paths/0/attribution 1e-5 &&
       nudge "$W/m1.f64.10.jsonl" "$W/bad.30.jsonl" 1/results/2/patched 1e-7; }; then
    fail "nudging the JSON"
fi
"$PY" "$SCRIPT" "$W/m1" --patch "$W/bad.1.json" --patch "$W/bad.2.json" --patch "$W/bad.3.json" \
    --patch "$W/bad.4.json" --patch "$W/bad.5.json" --attribute "$W/bad.7.json" \
    --pairs-patch "$W/m1.f64.7.json" "$W/pairs.tsv" "$W/bad.6.jsonl" \
    --ablate "$W/bad.8.json" --data "$W/data.txt" --lens "$W/bad.9.json" \
    --patch "$W/bad.27.json" --ablate "$W/bad.28.json" --patch "$W/bad.29.json" \
    --pairs-patch "$W/m1.f64.10.json" "$W/pairs.tsv" "$W/bad.30.jsonl" >"$W/bad.txt" 2>&1
rc=$?
[ "$rc" = 1 ] || fail "the nudged numbers: explain_torch exits $rc, not 1"
"$PY" "$SCRIPT" "$W/m2" --lens "$W/bad.10.json" >>"$W/bad.txt" 2>&1
rc=$?
[ "$rc" = 1 ] || fail "the nudged numbers of the second model: explain_torch exits $rc, not 1"
for what in "patch z 1.1 @3 exact" "patch path 1.1 -> 2.1 by v exact" \
            "patch path 1.1 -> 2.2 by v attribution" "patch resid-pre 2 @4 attribution" \
            "patch pattern 2.2 @14 exact" "pair 3 path 1.1 -> 2.2 by q patched" \
            "attribute 1.1" "ablate zero resid-post 2 @4 loss" \
            "lens part 1.2 at 7" "lens prob of 0 after 1 at 5" "patch together exact" \
            "ablate resample pattern 2.1 key 0 metric" "patch path 1.1 -> 2.1 by q attribution" \
            "pair 2 z 2.1 patched"; do
    if grep -qF "mismatch: $what:" "$W/bad.txt"; then echo "ok: a nudged $what is caught"
    else fail "a nudged $what is not caught:"; cat "$W/bad.txt"; fi
done

# And the new parts of the transformer blocks (m3: MLPs and LayerNorms): an MLP's part, a
# neuron's, an MLP's bias, the final LayerNorm's scale, an MLP's part in the lens and the
# lens through the final LayerNorm, the stream after layer 1's MLP patched and ablated, a
# neuron patched, a LayerNorm's scale patched and ablated. The plans' numbering: m3.f64.1 the
# patched resid-post, .4 the ablated resid-post, .7 and m3.f32.5 --neurons (N = 32: part 43
# is "mlp 2.5", 70 "mlp 2 bias"), m3.f32.3 the patched neurons (row 37: layer 2's neuron 5),
# m3.f64.8 --path (path 0: 1.1 -> mlp 1, 19: mlp 1 -> 2.1 by k, 25: mlp 1 -> logits),
# m3.f64.10 the patched scales (rows 1.attn, 1.mlp, 2.attn, 2.mlp, 2.final), m3.f64.11 the
# zeroed scales by position (16 rows a LayerNorm: row 40 is 2.attn at 8).
# (the token listed first after layer 1 at position 5)
tok=$("$PY" -c 'import json, sys
print(json.load(open(sys.argv[1]))["layers"][1]["positions"][5]["top"][0]["token"])' \
    "$W/m3.f32.lens.json" 2>/dev/null)
if ! { nudge "$W/m3.f64.attribute.json" "$W/bad.11.json" parts/6/value 1e-8 &&
       nudge "$W/m3.f64.attribute.json" "$W/bad.12.json" final_scale 1e-8 &&
       nudge "$W/m3.f32.5.json" "$W/bad.13.json" parts/43/value 1e-5 &&
       nudge "$W/m3.f64.7.json" "$W/bad.14.json" parts/70/value 1e-8 &&
       nudge "$W/m3.f64.lens.json" "$W/bad.15.json" decomposition/7/parts/3/value 1e-8 &&
       nudge "$W/m3.f32.lens.json" "$W/bad.16.json" layers/1/positions/5/top/0/prob 1e-5 &&
       nudge "$W/m3.f64.1.json" "$W/bad.17.json" results/14/exact 1e-8 &&
       nudge "$W/m3.f64.1.json" "$W/bad.18.json" results/14/attribution 1e-8 &&
       nudge "$W/m3.f64.4.json" "$W/bad.19.json" heads/14/loss 1e-8 &&
       nudge "$W/m3.f32.3.json" "$W/bad.20.json" results/37/exact 1e-5 &&
       nudge "$W/m3.f64.8.json" "$W/bad.21.json" paths/0/exact 1e-8 &&
       nudge "$W/m3.f64.8.json" "$W/bad.22.json" paths/19/attribution 1e-8 &&
       nudge "$W/m3.f64.8.json" "$W/bad.23.json" paths/25/attribution 1e-8 &&
       nudge "$W/m3.f64.10.json" "$W/bad.24.json" results/4/exact 1e-8 &&
       nudge "$W/m3.f64.10.json" "$W/bad.25.json" results/1/attribution 1e-8 &&
       nudge "$W/m3.f64.11.json" "$W/bad.26.json" heads/40/loss 1e-8; }; then
    fail "nudging the JSON of the transformer blocks"
fi
"$PY" "$SCRIPT" "$W/m3" --attribute "$W/bad.11.json" --attribute "$W/bad.12.json" \
    --attribute "$W/bad.13.json" --attribute "$W/bad.14.json" --lens "$W/bad.15.json" \
    --lens "$W/bad.16.json" --patch "$W/bad.17.json" --patch "$W/bad.18.json" \
    --ablate "$W/bad.19.json" --data "$W/data.txt" --patch "$W/bad.20.json" \
    --patch "$W/bad.21.json" --patch "$W/bad.22.json" --patch "$W/bad.23.json" \
    --patch "$W/bad.24.json" --patch "$W/bad.25.json" --ablate "$W/bad.26.json" \
    >"$W/bad.blocks.txt" 2>&1
rc=$?
[ "$rc" = 1 ] || fail "the nudged numbers of the transformer blocks: explain_torch exits $rc, not 1"
for what in "attribute mlp 2" "attribute final_scale" "attribute mlp 2.5" "attribute mlp 2 bias" \
            "lens part mlp 1 at 7" "lens prob of $tok after 1 at 5" \
            "patch resid-post 1 @14 exact" "patch resid-post 1 @14 attribution" \
            "ablate zero resid-post 1 @14 loss" "patch mlp-post 2 neuron 5 exact" \
            "patch path 1.1 -> mlp 1 by mlp-pre exact" "patch path mlp 1 -> 2.1 by k attribution" \
            "patch path mlp 1 -> logits attribution" \
            "patch ln-scale.final 2 exact" "patch ln-scale.mlp 1 attribution" \
            "ablate zero ln-scale.attn 2 @8 loss"; do
    if grep -qF "mismatch: $what:" "$W/bad.blocks.txt"; then echo "ok: a nudged $what is caught"
    else fail "a nudged $what is not caught:"; cat "$W/bad.blocks.txt"; fi
done

[ "$failures" -eq 0 ] && echo "explain_torch_test: all passed" || echo "explain_torch_test: $failures failed"
[ "$failures" -eq 0 ]
