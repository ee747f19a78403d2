#!/usr/bin/env python3
"""attention_precision.py - qkv's fused attention against PyTorch's eager f32 autograd, on
saturated attention.

Runs tests/saturated_dump (built as build/tests/saturated_dump), which writes the saturated
cases of tests/saturated_cases.h (rows near one-hot, a causal mask with padding and a fully
masked row, rows of 1000 keys): their inputs, and the gradients of sum(dout * attention) from
qkv's fused op in f64 (the truth), in f32, and in f32 with the first form of its backward.
Here PyTorch computes the same gradients in float32, eagerly: softmax(q·kᵀ/sqrt(d) + mask)·v
with autograd, from the same (f32-exact) inputs.

The rule, for each case and each of dQ, dK, dV, with err = |g32 - g64| / |g64| (Frobenius):
qkv's f32 error must not exceed PyTorch's by more than f32's unit roundoff (2^-24, relative),
the noise of one rounding where nothing cancels. The first form of the backward must break the
rule somewhere, or the cases would not be hard enough to tell.

Without torch the check is skipped (exit 0). Exit status: 0 all passed, 1 a case failed, 2 the
dump could not be run or read.
"""
import json
import os
import subprocess
import sys
import tempfile

F32_UNIT_ROUNDOFF = 2.0 ** -24
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

try:
    import numpy as np
    import torch
except ImportError as e:  # pragma: no cover - depends on the machine
    print("attention_precision: skipping: %s (PyTorch and numpy are needed)" % e)
    sys.exit(0)


def fail(msg):
    print("attention_precision: error: %s" % msg, file=sys.stderr)
    sys.exit(2)


def rel_err(a, ref):
    den = np.linalg.norm(ref)
    return np.linalg.norm(a - ref) / den if den > 0 else np.linalg.norm(a)


def main():
    dump = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "build", "tests", "saturated_dump")
    with tempfile.TemporaryDirectory() as d:
        try:
            rc = subprocess.run([dump, d]).returncode
        except OSError as e:
            fail("cannot run %s: %s" % (dump, e))
        if rc != 0:
            fail("%s exited with %d" % (dump, rc))
        with open(os.path.join(d, "manifest.json")) as f:
            cases = json.load(f)["cases"]
        load = lambda name: np.fromfile(os.path.join(d, name), dtype="<f8")
        failures, legacy_breaks = [], 0
        for c in cases:
            i, B, H, Nq, Nk, D = c["index"], c["B"], c["H"], c["Nq"], c["Nk"], c["D"]
            q = load("%d_q.bin" % i).reshape(B, H, Nq, D)
            k = load("%d_k.bin" % i).reshape(B, H, Nk, D)
            v = load("%d_v.bin" % i).reshape(B, H, Nk, D)
            dout = load("%d_dout.bin" % i).reshape(B, H, Nq, D)
            nq, nk = q.size, k.size
            split = lambda g: (g[:nq], g[nq:nq + nk], g[nq + nk:])
            truth = split(load("%d_grads_f64.bin" % i))
            fused = split(load("%d_grads_f32.bin" % i))
            legacy = split(load("%d_grads_f32_legacy.bin" % i))
            tq, tk, tv = (torch.tensor(x, dtype=torch.float32, requires_grad=True) for x in (q, k, v))
            s = tq @ tk.transpose(-1, -2) / float(np.sqrt(D))
            if c["mask"]:
                keep = load("%d_keep.bin" % i).reshape(B, 1, Nq, Nk) != 0
                s = s.masked_fill(~torch.tensor(keep), float("-inf"))
                full = ~torch.tensor(keep).any(dim=-1, keepdim=True)  # no key at all
                s = s.masked_fill(full, 0.0)  # qkv's convention: zero weights, zero gradient
                p = torch.softmax(s, dim=-1).masked_fill(full, 0.0)
            else:
                p = torch.softmax(s, dim=-1)
            out = p @ tv
            out.backward(torch.tensor(dout, dtype=torch.float32))
            eager = [t.grad.double().numpy().ravel() for t in (tq, tk, tv)]
            for x, name in enumerate(("dQ", "dK", "dV")):
                e_torch = rel_err(eager[x], truth[x])
                e_fused = rel_err(fused[x], truth[x])
                e_legacy = rel_err(legacy[x], truth[x])
                ok = e_fused <= e_torch + F32_UNIT_ROUNDOFF
                legacy_breaks += e_legacy > e_torch + F32_UNIT_ROUNDOFF
                print("  %-8s %s: qkv fused %.3g, PyTorch eager %.3g, qkv legacy %.3g  %s" % (
                    c["name"], name, e_fused, e_torch, e_legacy, "ok" if ok else "FAIL"))
                if not ok:
                    failures.append("%s %s: qkv %.3g > PyTorch %.3g" % (c["name"], name, e_fused, e_torch))
        if not legacy_breaks:
            failures.append("the first form of the backward passes every case: the cases are too easy")
    for f in failures:
        print("attention_precision: mismatch: %s" % f, file=sys.stderr)
    if not failures:
        print("attention_precision: on saturated attention qkv's fused f32 gradients are no further "
              "from f64 than PyTorch's eager f32 (%d cases; the first form fails %d)" % (len(cases), legacy_breaks))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
