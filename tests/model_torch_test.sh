#!/usr/bin/env bash
# model_torch_test.sh - PyTorch rebuilds qkv models from model.safetensors alone (docs/model.md)
# and matches qkv's logits, loss and gradients, and replays a whole f64 training run step for
# step; and the checks do fail when something is off.
#
# usage: tests/model_torch_test.sh path/to/qkv path/to/python-with-torch scripts/model_torch.py
#
# Importing torch takes about a second of CPU: the script checks every model of a kind in one
# Python process (several models, each with its --grads), one JSON line each.
set -u
QKV=${1:?usage: model_torch_test.sh QKV PYTHON SCRIPT}
PY=${2:?usage: model_torch_test.sh QKV PYTHON SCRIPT}
SCRIPT=${3:?usage: model_torch_test.sh QKV PYTHON SCRIPT}

W=$(mktemp -d "${TMPDIR:-/tmp}/qkv_model_torch.XXXXXX")
trap 'rm -rf "$W"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# The cases: "dtype|the logits' tolerance|options". Models that use every part of the forward
# pass: several heads and layers, the residual, the causal mask (shift), lookup's layout, an
# optimizer with state; transformer blocks: an MLP of each activation, pre-LayerNorm, and an
# encoder-decoder (translate) with both. Briefly trained, so that the loss and the gradients are
# far from zero. f32 attention-only logits to 1e-4 of the largest, with an MLP or LayerNorm to
# 1e-6; f64: every logit, the loss and every gradient to 1e-9 relative, the logits and loss of
# a model with an MLP or LayerNorm to 1e-12 (scripts/model_torch.py picks the rule from the
# grads file's F64 tensors and the model's metadata).
cases=("f32|1e-04|--task shift --heads 2 --layers 2 --residual --d-model 16"
       "f32|1e-04|--task lookup --heads 4 --d-model 32 --optim momentum"
       "f32|1e-04|--task max --d-model 16 --causal --optim sgd"
       "f32|1e-04|--task reverse --heads 2 --layers 3 --d-model 24"
       "f64|1e-09|--task shift --heads 2 --layers 2 --residual --d-model 16"
       "f64|1e-09|--task lookup --heads 4 --d-model 32 --optim momentum"
       "f64|1e-09|--task reverse --heads 2 --layers 3 --d-model 24 --causal"
       "f32|1e-06|--task reverse --d-model 32 --heads 2 --mlp 64 --residual --norm layernorm --act gelu"
       "f32|1e-06|--task shift --d-model 16 --heads 2 --layers 2 --mlp 32 --residual --act relu"
       "f64|1e-12|--task reverse --d-model 32 --heads 2 --mlp 64 --residual --norm layernorm --act gelu-tanh"
       "f64|1e-12|--task translate --d-model 32 --heads 2 --mlp 64 --residual --norm layernorm --act gelu"
       "f64|1e-12|--task modular --modulus 13 --op mul --d-model 32 --mlp 32")
models=() grads=() names=() tols=()
i=0
for c in "${cases[@]}"; do
    i=$((i + 1))
    dtype=${c%%|*} rest=${c#*|}
    tol=${rest%%|*} opts=${rest#*|}
    # shellcheck disable=SC2086
    if ! "$QKV" train $opts --steps 30 --dtype "$dtype" --out "$W/m$i" --quiet >"$W/train$i.txt" 2>&1; then
        fail "qkv train $opts --dtype $dtype"; cat "$W/train$i.txt"; continue
    fi
    if ! "$QKV" grads --model "$W/m$i" --out "$W/g$i.safetensors" --batch 6 --seed $((i + 4)) >/dev/null; then
        fail "qkv grads for $opts --dtype $dtype"; continue
    fi
    models+=("$W/m$i") grads+=("$W/g$i.safetensors") names+=("$dtype: $opts") tols+=("$tol")
done
# an f32 model's gradients taken in f64 (grads --dtype f64): the f64 rule
if "$QKV" grads --model "$W/m2" --dtype f64 --out "$W/g2w.safetensors" --batch 6 >/dev/null; then
    models+=("$W/m2") grads+=("$W/g2w.safetensors") tols+=("1e-09")
    names+=("an f32 model's gradients in f64 (grads --dtype f64)")
else
    fail "qkv grads --dtype f64 of an f32 model"
fi
gargs=()
for g in "${grads[@]}"; do gargs+=(--grads "$g"); done
"$PY" "$SCRIPT" "${models[@]}" "${gargs[@]}" --json >"$W/all.json" 2>"$W/all.err"
rc=$?
for k in "${!grads[@]}"; do
    line=$(grep -F "\"grads\": \"${grads[$k]}\"" "$W/all.json")
    if [[ $line == *'"ok": true'* && $line == *"\"logits\": {"*"(tol ${tols[$k]})"* ]]; then
        echo "ok: ${names[$k]}"
    else
        fail "PyTorch disagrees with qkv on ${names[$k]} (logits to ${tols[$k]}):"
        echo "${line:-no result}"
    fi
done
[ "$rc" = 0 ] || { fail "model_torch.py exit $rc"; cat "$W/all.err"; }

# The check can fail: a gradient, a logit or the loss nudged beyond the tolerances, a weight
# transposed, the file's causal flag flipped, an f64 gradient nudged by 3e-9 of its tensor's
# largest entry; for the blocks, an f32 logit nudged by 3e-6 and an f64 one by 1e-11 of the
# largest (within the attention-only tolerances), an f64 MLP gradient nudged by 3e-9, and a
# model's activation read as another (the metadata's act changed) must each be caught (exit 1).
perturb() { # perturb SRC DST KIND
    "$PY" - "$1" "$2" "$3" <<'EOF'
import json, struct, sys
src, dst, kind = sys.argv[1:4]
raw = bytearray(open(src, "rb").read())
(n,) = struct.unpack("<Q", raw[:8])
h = json.loads(raw[8:8 + n])
base = 8 + n
def values(name):
    fmt = {"F32": "f", "F64": "d"}[h[name]["dtype"]]
    s, e = h[name]["data_offsets"]
    return fmt, list(struct.unpack("<%d%s" % ((e - s) // struct.calcsize(fmt), fmt), raw[base + s:base + e]))
def put(name, fmt, w):
    s, e = h[name]["data_offsets"]
    raw[base + s:base + e] = struct.pack("<%d%s" % (len(w), fmt), *w)
def nudge(name, i, fn):
    fmt, w = values(name)
    w[i] = fn(w[i], max(abs(x) for x in w))
    put(name, fmt, w)
def set_meta(key, value):
    global raw
    h["__metadata__"][key] = value
    hb = json.dumps(h).encode()
    hb += b" " * (-len(hb) % 8)
    raw = bytearray(struct.pack("<Q", len(hb)) + hb + raw[base:])
if kind == "grad":    # 2e-5 + 2e-3 |g|: twice the tolerance
    nudge("grad.attn.0.w_q", 5, lambda v, big: v + 2e-5 + 2e-3 * abs(v))
elif kind == "logit":
    nudge("logits", 3, lambda v, big: v + 1e-3 * (1 + abs(v)))
elif kind == "loss":
    nudge("loss", 0, lambda v, big: v * (1 + 3e-4))
elif kind == "grad_f64":
    nudge("grad.attn.0.w_v", 0, lambda v, big: v + 3e-9 * big)
elif kind == "grad_mlp_f64":
    nudge("grad.mlp.0.w_out", 7, lambda v, big: v + 3e-9 * big)
elif kind == "logit_3e-6":
    nudge("logits", 3, lambda v, big: v + 3e-6 * big)
elif kind == "logit_1e-11":
    nudge("logits", 3, lambda v, big: v + 1e-11 * big)
elif kind == "transpose":  # attn.0.w_v stored transposed: the (in, out) convention matters
    fmt, w = values("attn.0.w_v")
    C = h["attn.0.w_v"]["shape"][0]
    put("attn.0.w_v", fmt, [w[c * C + r] for r in range(C) for c in range(C)])
elif kind == "causal":
    set_meta("causal", "false" if h["__metadata__"]["causal"] == "true" else "true")
elif kind == "act":   # gelu-tanh read as gelu (erf): the two forms differ by about 1e-3
    set_meta("act", "gelu")
open(dst, "wb").write(bytes(raw))
EOF
}
# the bad pairs: "model|grads|what"; m1 f32 attention, m7 f64 attention, m8 f32 blocks,
# m10 f64 blocks (gelu-tanh)
bad=()
mkdir -p "$W/bad"
for kind in grad logit loss; do
    perturb "$W/g1.safetensors" "$W/bad/g_$kind.safetensors" "$kind" &&
        bad+=("$W/m1|$W/bad/g_$kind.safetensors|a nudged $kind")
done
perturb "$W/g7.safetensors" "$W/bad/g_f64.safetensors" grad_f64 &&
    bad+=("$W/m7|$W/bad/g_f64.safetensors|an f64 gradient nudged by 3e-9")
perturb "$W/g8.safetensors" "$W/bad/g_l6.safetensors" logit_3e-6 &&
    bad+=("$W/m8|$W/bad/g_l6.safetensors|an f32 MLP+LN model's logit nudged by 3e-6")
perturb "$W/g10.safetensors" "$W/bad/g_l11.safetensors" logit_1e-11 &&
    bad+=("$W/m10|$W/bad/g_l11.safetensors|an f64 MLP+LN model's logit nudged by 1e-11")
perturb "$W/g10.safetensors" "$W/bad/g_mlp.safetensors" grad_mlp_f64 &&
    bad+=("$W/m10|$W/bad/g_mlp.safetensors|an f64 MLP gradient nudged by 3e-9")
for kind in transpose causal; do
    mkdir -p "$W/bad/m_$kind"
    perturb "$W/m1/model.safetensors" "$W/bad/m_$kind/model.safetensors" "$kind" &&
        bad+=("$W/bad/m_$kind|$W/g1.safetensors|a model with its $kind changed")
done
mkdir -p "$W/bad/m_act"
perturb "$W/m10/model.safetensors" "$W/bad/m_act/model.safetensors" act &&
    bad+=("$W/bad/m_act|$W/g10.safetensors|a gelu-tanh model read as gelu")
[ "${#bad[@]}" = 10 ] || fail "could not perturb every file (${#bad[@]} of 10)"
bmodels=() bgrads=()
for b in "${bad[@]}"; do
    IFS='|' read -r m g _ <<<"$b"
    bmodels+=("$m") bgrads+=(--grads "$g")
done
"$PY" "$SCRIPT" "${bmodels[@]}" "${bgrads[@]}" --json >"$W/bad.json" 2>"$W/bad.err"
rc=$?
for b in "${bad[@]}"; do
    IFS='|' read -r m g what <<<"$b"
    line=$(grep -F "\"grads\": \"$g\"" "$W/bad.json" | grep -F "\"model\": \"$m/model.safetensors\"")
    [[ $line == *'"ok": false'* ]] && echo "ok: $what is caught" || { fail "$what is not caught:"; echo "${line:-no result}"; }
done
[ "$rc" = 1 ] || { fail "model_torch.py on the bad files: exit $rc (1 expected)"; cat "$W/bad.err"; }
# a grads file of another model's task is refused as not matching (exit 2)
"$PY" "$SCRIPT" "$W/m1" --grads "$W/g2.safetensors" >/dev/null 2>&1
rc=$?
[ "$rc" = 2 ] && echo "ok: a grads file of another task is refused" || fail "grads of another task: exit $rc"

# 100 steps of f64 training with Adam, replayed in PyTorch float64 from the seed alone
# (model_torch.py --train): every step's training-batch loss (metrics.jsonl) and the final
# weights to 1e-9 relative, the data generator's final state exactly; and a loss of
# metrics.jsonl nudged by 1e-8 relative is caught.
R="$W/run"
if "$QKV" train --task reverse --d-model 16 --heads 2 --mlp 32 --residual --norm layernorm \
       --act gelu --dtype f64 --steps 100 --eval-every 1 --threads 1 --out "$R" --quiet \
       >"$W/train_run.txt" 2>&1; then
    mkdir -p "$W/run_bad"
    cp "$R/model.safetensors" "$W/run_bad/"
    "$PY" - "$R/metrics.jsonl" "$W/run_bad/metrics.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for r in rows:
    if r["step"] == 57:
        r["loss"] *= 1 + 1e-8
open(sys.argv[2], "w").write("".join(json.dumps(r) + "\n" for r in rows))
EOF
    # modular, 500 f64 steps at P = 23 (d_model 32: the default 128 takes about 7 times as long):
    # the full batch of its split's training pairs in order, Adam's beta2 0.98, weight decay 1,
    # 10 warm-up steps then a constant rate, no clipping, the paper's initial weights (--init
    # paper, the default); and a drawn batch of its pairs from qkv's (--init qkv)
    M1="$W/mod_full" M2="$W/mod_drawn"
    "$QKV" train --task modular --modulus 23 --d-model 32 --mlp 64 --dtype f64 --steps 500 \
        --eval-every 1 --threads 1 --out "$M1" --quiet >"$W/train_mod1.txt" 2>&1 ||
        { fail "qkv train modular (full batch)"; cat "$W/train_mod1.txt"; }
    "$QKV" train --task modular --modulus 11 --op sub --data-seed 9 --train-frac 0.5 \
        --d-model 16 --heads 2 --mlp 16 --batch 8 --beta1 0.8 --init qkv --dtype f64 --steps 40 \
        --eval-every 1 --threads 2 --out "$M2" --quiet >"$W/train_mod2.txt" 2>&1 ||
        { fail "qkv train modular (drawn batch)"; cat "$W/train_mod2.txt"; }
    "$PY" "$SCRIPT" "$R" "$W/run_bad" "$M1" "$M2" --train --json >"$W/train.json" 2>"$W/train.err"
    rc=$?
    line=$(grep -F "\"model\": \"$R/model.safetensors\"" "$W/train.json")
    if [[ $line == *'"ok": true'* && $line == *"100 of 100 steps"* && $line == *'"data_rng": {"error": 0.0, "ok": true'* ]]; then
        echo "ok: 100 steps of f64 training (MLP, LayerNorm, gelu, adam) replayed to 1e-9"
    else
        fail "PyTorch's replay of the f64 run disagrees:"; echo "${line:-no result}"; cat "$W/train.err"
    fi
    line=$(grep -F "\"model\": \"$W/run_bad/model.safetensors\"" "$W/train.json")
    [[ $rc == 1 && $line == *'"ok": false'* && $line == *"step 57 loss"* ]] &&
        echo "ok: a training loss nudged by 1e-8 is caught" ||
        { fail "a nudged training loss: exit $rc"; echo "${line:-no result}"; }
    for m in "$M1|500" "$M2|40"; do
        line=$(grep -F "\"model\": \"${m%|*}/model.safetensors\"" "$W/train.json")
        if [[ $line == *'"ok": true'* && $line == *"${m#*|} of ${m#*|} steps"* && $line == *'"data_rng": {"error": 0.0, "ok": true'* ]]; then
            echo "ok: ${m#*|} steps of f64 modular training ($(basename "${m%|*}")) replayed to 1e-9: $(echo "$line" | grep -o 'max rel [0-9.e-]* at step [0-9]*' | head -1)"
        else
            fail "PyTorch's replay of the modular run ${m%|*} disagrees:"; echo "${line:-no result}"
        fi
    done
else
    fail "qkv train for the replay"; cat "$W/train_run.txt"
fi

[ "$failures" -eq 0 ] && echo "model_torch_test: all passed" || echo "model_torch_test: $failures failed"
[ "$failures" -eq 0 ]
