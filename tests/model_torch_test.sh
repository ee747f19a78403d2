#!/usr/bin/env bash
# model_torch_test.sh - PyTorch rebuilds qkv models from model.safetensors alone (docs/model.md)
# and matches qkv's logits, loss and gradients; and the check does fail when something is off.
#
# usage: tests/model_torch_test.sh path/to/qkv path/to/python-with-torch scripts/model_torch.py
set -u
QKV=${1:?usage: model_torch_test.sh QKV PYTHON SCRIPT}
PY=${2:?usage: model_torch_test.sh QKV PYTHON SCRIPT}
SCRIPT=${3:?usage: model_torch_test.sh QKV PYTHON SCRIPT}

W=$(mktemp -d "${TMPDIR:-/tmp}/qkv_model_torch.XXXXXX")
trap 'rm -rf "$W"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# Models that use every part of the forward pass: several heads and layers, the residual, the
# causal mask (shift), lookup's layout, and an optimizer with state. Briefly trained, so that the
# loss and the gradients are far from zero.
i=0
for opts in "--task shift --heads 2 --layers 2 --residual --d-model 16" \
            "--task lookup --heads 4 --d-model 32 --optim momentum" \
            "--task max --d-model 16 --causal --optim sgd" \
            "--task reverse --heads 2 --layers 3 --d-model 24"; do
    i=$((i + 1))
    # shellcheck disable=SC2086
    if ! "$QKV" train $opts --steps 30 --out "$W/m$i" --quiet; then
        fail "qkv train $opts"; continue
    fi
    if ! "$QKV" grads --model "$W/m$i" --out "$W/g$i.safetensors" --batch 6 --seed $((i + 4)) >/dev/null; then
        fail "qkv grads for $opts"; continue
    fi
    if "$PY" "$SCRIPT" "$W/m$i" --grads "$W/g$i.safetensors" >"$W/out$i.txt" 2>&1; then
        echo "ok: $opts"
    else
        fail "PyTorch disagrees with qkv on $opts:"
        cat "$W/out$i.txt"
    fi
done

# f64 models (train --dtype f64) and an f32 model's gradients taken in f64 (grads --dtype f64):
# every logit, the loss and every parameter gradient match PyTorch's float64 autograd to 1e-9
# relative (scripts/model_torch.py picks that rule from the grads file's F64 tensors).
for opts in "--task shift --heads 2 --layers 2 --residual --d-model 16" \
            "--task lookup --heads 4 --d-model 32 --optim momentum" \
            "--task reverse --heads 2 --layers 3 --d-model 24 --causal"; do
    i=$((i + 1))
    # shellcheck disable=SC2086
    if ! "$QKV" train --steps 30 $opts --dtype f64 --out "$W/m$i" --quiet; then
        fail "qkv train $opts --dtype f64"; continue
    fi
    if ! "$QKV" grads --model "$W/m$i" --out "$W/g$i.safetensors" --batch 6 --seed $((i + 4)) >/dev/null; then
        fail "qkv grads for $opts --dtype f64"; continue
    fi
    if "$PY" "$SCRIPT" "$W/m$i" --grads "$W/g$i.safetensors" >"$W/out$i.txt" 2>&1 &&
       grep -q "tol 1e-09" "$W/out$i.txt"; then
        echo "ok: f64: $opts"
    else
        fail "PyTorch f64 disagrees with qkv on $opts --dtype f64:"
        cat "$W/out$i.txt"
    fi
done
if "$QKV" grads --model "$W/m2" --dtype f64 --out "$W/g2w.safetensors" --batch 6 >/dev/null &&
   "$PY" "$SCRIPT" "$W/m2" --grads "$W/g2w.safetensors" >"$W/out2w.txt" 2>&1 &&
   grep -q "tol 1e-09" "$W/out2w.txt"; then
    echo "ok: an f32 model's gradients in f64 (grads --dtype f64)"
else
    fail "grads --dtype f64 of an f32 model:"; cat "$W/out2w.txt"
fi
# an f64 gradient nudged by 3e-9 of its tensor's largest entry is caught
"$PY" - "$W/g$i.safetensors" "$W/bad_f64.safetensors" <<'EOF'
import json, struct, sys
src, dst = sys.argv[1:3]
raw = bytearray(open(src, "rb").read())
(n,) = struct.unpack("<Q", raw[:8])
h = json.loads(raw[8:8 + n])
s, e = h["grad.attn.0.w_v"]["data_offsets"]
w = list(struct.unpack("<%dd" % ((e - s) // 8), raw[8 + n + s:8 + n + e]))
big = max(abs(x) for x in w)
w[0] += 3e-9 * big
raw[8 + n + s:8 + n + e] = struct.pack("<%dd" % len(w), *w)
open(dst, "wb").write(bytes(raw))
EOF
"$PY" "$SCRIPT" "$W/m$i" --grads "$W/bad_f64.safetensors" >"$W/bad_f64.txt" 2>&1
rc=$?
[ "$rc" = 1 ] && echo "ok: an f64 gradient nudged by 3e-9 is caught" || { fail "a nudged f64 gradient gives exit $rc"; cat "$W/bad_f64.txt"; }

# The check can fail: a gradient, a logit or the loss nudged beyond the tolerances, a weight
# transposed, or the file's causal flag flipped must each be caught (exit 1).
perturb() { # perturb SRC DST KIND
    "$PY" - "$1" "$2" "$3" <<'EOF'
import json, struct, sys
src, dst, kind = sys.argv[1:4]
raw = bytearray(open(src, "rb").read())
(n,) = struct.unpack("<Q", raw[:8])
h = json.loads(raw[8:8 + n])
base = 8 + n
def f32(name, i, fn):
    off = base + h[name]["data_offsets"][0] + 4 * i
    (v,) = struct.unpack("<f", raw[off:off + 4])
    raw[off:off + 4] = struct.pack("<f", fn(v))
if kind == "grad":    # 2e-5 + 2e-3 |g|: twice the tolerance
    f32("grad.attn.0.w_q", 5, lambda v: v + 2e-5 + 2e-3 * abs(v))
elif kind == "logit":
    f32("logits", 3, lambda v: v + 1e-3 * (1 + abs(v)))
elif kind == "loss":
    f32("loss", 0, lambda v: v * (1 + 3e-4))
elif kind == "transpose":  # attn.0.w_v stored transposed: the (in, out) convention matters
    s, e = h["attn.0.w_v"]["data_offsets"]
    C = h["attn.0.w_v"]["shape"][0]
    w = struct.unpack("<%df" % (C * C), raw[base + s:base + e])
    wt = [w[c * C + r] for r in range(C) for c in range(C)]
    raw[base + s:base + e] = struct.pack("<%df" % (C * C), *wt)
elif kind == "causal":
    meta = h["__metadata__"]
    meta["causal"] = "false" if meta["causal"] == "true" else "true"
    hb = json.dumps(h).encode()
    hb += b" " * (-len(hb) % 8)
    raw = bytearray(struct.pack("<Q", len(hb)) + hb + raw[base:])
open(dst, "wb").write(bytes(raw))
EOF
}
mkdir -p "$W/bad"
for kind in grad logit loss; do
    perturb "$W/g1.safetensors" "$W/bad/g_$kind.safetensors" "$kind" || fail "could not perturb $kind"
    "$PY" "$SCRIPT" "$W/m1" --grads "$W/bad/g_$kind.safetensors" >"$W/bad/$kind.txt" 2>&1
    rc=$?
    [ "$rc" = 1 ] && echo "ok: a nudged $kind is caught" || { fail "a nudged $kind gives exit $rc"; cat "$W/bad/$kind.txt"; }
done
for kind in transpose causal; do
    mkdir -p "$W/bad/m_$kind"
    perturb "$W/m1/model.safetensors" "$W/bad/m_$kind/model.safetensors" "$kind" || fail "could not perturb $kind"
    "$PY" "$SCRIPT" "$W/bad/m_$kind" --grads "$W/g1.safetensors" >"$W/bad/$kind.txt" 2>&1
    rc=$?
    [ "$rc" = 1 ] && echo "ok: a model with its $kind changed is caught" || { fail "a model with its $kind changed gives exit $rc"; cat "$W/bad/$kind.txt"; }
done
# a grads file of another model's task is refused as not matching (exit 2)
"$PY" "$SCRIPT" "$W/m1" --grads "$W/g2.safetensors" >/dev/null 2>&1
rc=$?
[ "$rc" = 2 ] && echo "ok: a grads file of another task is refused" || fail "grads of another task: exit $rc"

[ "$failures" -eq 0 ] && echo "model_torch_test: all passed" || echo "model_torch_test: $failures failed"
[ "$failures" -eq 0 ]
