#!/usr/bin/env bash
# circuits_torch_test.sh - PyTorch recomputes `qkv circuits` (QK and OV circuits, copying scores,
# composition scores) from model.safetensors alone (docs/explain.md), f32 models to 1e-6 and f64
# ones to 1e-9; the default copy model's head copies (score >= 0.9); and the check does fail when
# a number is off.
#
# usage: tests/circuits_torch_test.sh path/to/qkv path/to/python-with-torch scripts/circuits_torch.py
set -u
QKV=${1:?usage: circuits_torch_test.sh QKV PYTHON SCRIPT}
PY=${2:?usage: circuits_torch_test.sh QKV PYTHON SCRIPT}
SCRIPT=${3:?usage: circuits_torch_test.sh QKV PYTHON SCRIPT}

W=$(mktemp -d "${TMPDIR:-/tmp}/qkv_circuits_torch.XXXXXX")
trap 'rm -rf "$W"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# Several heads and layers (every composition kind), the residual, f64, an encoder-decoder
# (translate: its queries are decoder positions, only Q composition), and transformer blocks
# (MLPs and LayerNorms, folded; one an encoder-decoder). Briefly trained.
i=0
pairs=()
for opts in "--task shift --heads 2 --layers 2 --residual --d-model 16" \
            "--task lookup --heads 4 --d-model 32" \
            "--task reverse --heads 2 --layers 3 --d-model 24 --dtype f64" \
            "--task translate --heads 2 --layers 2 --d-model 16" \
            "--task reverse --heads 2 --layers 2 --d-model 16 --residual --mlp 24 --norm layernorm --dtype f64" \
            "--task translate --heads 2 --layers 2 --d-model 16 --residual --mlp 12 --norm layernorm"; do
    i=$((i + 1))
    # shellcheck disable=SC2086
    if ! "$QKV" train $opts --steps 30 --out "$W/m$i" --quiet; then
        fail "qkv train $opts"; continue
    fi
    if ! "$QKV" circuits --model "$W/m$i" --out "$W/c$i.json" >/dev/null; then
        fail "qkv circuits for $opts"; continue
    fi
    pairs+=("$W/m$i" "$W/c$i.json")
    models[$i]=$opts
done
# one run of PyTorch for every model (imported once), a summary line for each, in order
"$PY" "$SCRIPT" "${pairs[@]}" >"$W/out.txt" 2>&1
status=$?
grep "heads, .* composition scores" "$W/out.txt" >"$W/summaries.txt"
for i in "${!models[@]}"; do
    opts=${models[$i]}
    want="tol 1e-06"
    case "$opts" in *f64*) want="tol 1e-09" ;; esac
    line=$(sed -n "${i}p" "$W/summaries.txt")
    if [ "$status" -eq 0 ] && [[ "$line" == *"$want"*": ok" ]]; then
        echo "ok: $opts: $line"
    else
        fail "PyTorch disagrees with qkv circuits on $opts: $line"
        cat "$W/out.txt"
    fi
done

# Tracking during training: the last row of metrics.csv (4 decimals) and of metrics.jsonl (to
# rounding) holds the saved model's copying and composition scores, as qkv circuits gives them.
if "$PY" - "$W/m1" "$W/c1.json" <<'EOF'
import json, sys
d, cj = sys.argv[1:3]
c = json.load(open(cj))
want = {}
for h in c["heads"]:
    want["copy_l%dh%d" % (h["layer"], h["head"])] = h["copying_score"]
for e in c["composition"]:
    (la, ha), (lb, hb) = e["from"].split("."), e["to"].split(".")
    want["comp%s_l%sh%s_l%sh%s" % (e["kind"], la, ha, lb, hb)] = e["score"]
lines = open(d + "/metrics.csv").read().split("\n")
head, last = lines[0].split(","), lines[-2].split(",")
row = json.loads(open(d + "/metrics.jsonl").read().splitlines()[-1])
bad = [k for k in want if k not in head or abs(float(last[head.index(k)]) - want[k]) > 5e-5
       or abs(row[k] - want[k]) > 1e-12]
print("%d columns checked, %d differ: %s" % (len(want), len(bad), bad))
sys.exit(1 if bad or len(want) != 4 + 12 else 0)
EOF
then
    echo "ok: metrics.csv and metrics.jsonl track the copying and composition scores"
else
    fail "metrics.csv or metrics.jsonl disagrees with qkv circuits"
fi

# The default copy model: its one head copies, and --json prints what --out wrote.
if "$QKV" train --task copy --out "$W/copy" --quiet &&
   "$QKV" circuits --model "$W/copy" --out "$W/copy.json" >/dev/null &&
   "$QKV" circuits --model "$W/copy" --json >"$W/copy_stdout.json" &&
   cmp -s "$W/copy.json" "$W/copy_stdout.json" &&
   "$PY" -c 'import json, sys; s = json.load(open(sys.argv[1]))["heads"][0]["copying_score"]
print("copy model: copying score %.4f" % s); sys.exit(0 if s >= 0.9 else 1)' "$W/copy.json"; then
    echo "ok: the default copy model's head copies"
else
    fail "the default copy model: copying score below 0.9, or --json differs from --out"
fi

# The check can fail: a score nudged beyond 1e-9 in an f64 model's file, a circuit entry nudged,
# a composition score left out, a score of layer 1 into layer 3 (composition_all) nudged.
nudge() { # nudge SRC DST KIND
    "$PY" - "$1" "$2" "$3" <<'EOF'
import json, sys
src, dst, kind = sys.argv[1:4]
j = json.load(open(src))
if kind == "score":
    j["heads"][1]["copying_score"] += 3e-9
elif kind == "circuit":
    m = j["heads"][0]["ov"]
    m[1][0] += 3e-9 * max(abs(x) for row in m for x in row)
elif kind == "composition":
    j["composition"].pop()
elif kind == "composition_all":
    [e for e in j["composition_all"] if e["from"][0] == "1" and e["to"][0] == "3"][5]["score"] += 3e-9
json.dump(j, open(dst, "w"))
EOF
}
for kind in score circuit composition composition_all; do
    nudge "$W/c3.json" "$W/bad_$kind.json" "$kind" || fail "could not nudge $kind"
    "$PY" "$SCRIPT" "$W/m3" "$W/bad_$kind.json" >"$W/bad_$kind.txt" 2>&1
    rc=$?
    [ "$rc" = 1 ] && echo "ok: a nudged $kind is caught" || { fail "a nudged $kind gives exit $rc"; cat "$W/bad_$kind.txt"; }
done

[ "$failures" -eq 0 ] && echo "circuits_torch_test: all passed" || echo "circuits_torch_test: $failures failed"
[ "$failures" -eq 0 ]
