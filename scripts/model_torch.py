#!/usr/bin/env python3
"""model_torch.py - rebuild a qkv model in PyTorch from its model.safetensors alone.

Reads the file written by `qkv train --out DIR` (a small safetensors reader: struct + json +
numpy; Python's `safetensors` package is not needed), rebuilds the forward pass exactly as
docs/model.md writes it, and, given a file written by `qkv grads --model DIR --out G`, runs
PyTorch on the same batch and compares logits, loss and every parameter gradient with qkv's.

PyTorch computes in float64 from the model's weights (--dtype float32 computes in float32
instead). The model and the grads file are F32 or F64 (`qkv train --dtype f64`, `qkv grads
--dtype f64`); what is measured is qkv's error in the grads file's precision. For an F32 grads
file the tolerances are float32's:

  logits     max |qkv - torch| <= 1e-4 * max |torch|      (relative to the largest logit)
  loss       |qkv - torch|     <= 1e-4 * |torch|
  gradients  |qkv - torch|     <= 1e-5 + 1e-3 * |torch|   (every element, as torch.allclose)

For an F64 grads file every quantity must match to 1e-9 relative:

  logits     max |qkv - torch| <= 1e-9 * max |torch|
  loss       |qkv - torch|     <= 1e-9 * |torch|
  gradients  max |qkv - torch| <= 1e-9 * max |torch|      (per parameter, over its elements)

That holds for models whose attention is not saturated. Where a row of attention puts 1 - e on
one key, the gradients of W_Q and W_K are differences of terms 1/e times larger than they are,
and any f64 computation of them, PyTorch's included, carries an error of about 1e-16/e
relative: see `qkv study precision`.

The batch itself is checked against docs/model.md too: the targets follow from the tokens by the
task's rule, and no sequence of the training batch falls in the held-out split.

Exit status: 0 everything matches (or torch is missing: "model_torch: skipping: ..."),
1 a mismatch, 2 a file could not be read or is not what it should be.
"""
import argparse
import json
import math
import os
import struct
import sys

LOGITS_RTOL = 1e-4
LOSS_RTOL = 1e-4
GRAD_ATOL = 1e-5
GRAD_RTOL = 1e-3
F64_RTOL = 1e-9

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover - depends on the machine
    print("model_torch: skipping: %s (PyTorch and numpy are needed)" % e)
    sys.exit(0)


def die(msg):
    print("model_torch: error: %s" % msg, file=sys.stderr)
    sys.exit(2)


# ---- safetensors: 8-byte little-endian header length, JSON header, raw little-endian data ----
DTYPES = {"F32": "<f4", "F64": "<f8", "I32": "<i4"}


def load_safetensors(path):
    """Returns (tensors: name -> torch.Tensor, metadata: dict of str)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        die("cannot read %s: %s" % (path, e))
    if len(raw) < 8:
        die("%s: too short for a safetensors file" % path)
    (hlen,) = struct.unpack("<Q", raw[:8])
    if hlen > len(raw) - 8:
        die("%s: header length %d is beyond the end of the file" % (path, hlen))
    try:
        header = json.loads(raw[8:8 + hlen].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        die("%s: the header is not JSON: %s" % (path, e))
    meta = header.pop("__metadata__", {}) or {}
    data = memoryview(raw)[8 + hlen:]
    tensors = {}
    for name, d in header.items():
        if d["dtype"] not in DTYPES:
            die("%s: tensor %s has dtype %s" % (path, name, d["dtype"]))
        begin, end = d["data_offsets"]
        shape = tuple(int(s) for s in d["shape"])
        dt = np.dtype(DTYPES[d["dtype"]])
        count = int(np.prod(shape)) if shape else 1
        if end - begin != count * dt.itemsize or end > len(data):
            die("%s: tensor %s has a bad byte range" % (path, name))
        arr = np.frombuffer(data, dtype=dt, count=count, offset=begin).reshape(shape)
        tensors[name] = torch.from_numpy(arr.astype(dt.newbyteorder("="), copy=True))
    return tensors, meta


# ---- the model, as docs/model.md writes it ----------------------------------------------------
class Model:
    def __init__(self, tensors, meta, path):
        if meta.get("format") != "qkv-model":
            die("%s: not a qkv model (metadata format is %r)" % (path, meta.get("format")))
        try:
            self.task = meta["task"]
            self.T, self.V = int(meta["seq_len"]), int(meta["vocab"])
            self.C, self.H, self.L = int(meta["d_model"]), int(meta["heads"]), int(meta["layers"])
            self.residual = meta["residual"] == "true"
            self.causal = meta["causal"] == "true"
        except (KeyError, ValueError) as e:
            die("%s: metadata: %s" % (path, e))
        C, V, T = self.C, self.V, self.T
        shapes = {"tok_emb": (V, C), "pos_emb": (T, C), "head.w": (C, V), "head.b": (V,)}
        for l in range(self.L):
            for w in ("w_q", "w_k", "w_v", "w_o"):
                shapes["attn.%d.%s" % (l, w)] = (C, C)
        self.params = {}
        for name, shape in shapes.items():
            t = tensors.get(name)
            if t is None or tuple(t.shape) != shape or t.dtype not in (torch.float32, torch.float64):
                die("%s: tensor %s should be F32 or F64 %s, is %s" % (
                    path, name, shape, None if t is None else (t.dtype, tuple(t.shape))))
            self.params[name] = t
        self.names = list(shapes)

    def forward(self, p, tokens):
        """tokens (B, T) int64 -> logits (B, T, V); p maps names to tensors (y = x @ W)."""
        B, T, C, H = tokens.shape[0], self.T, self.C, self.H
        dk = C // H
        x = p["tok_emb"][tokens] + p["pos_emb"]                          # (B, T, C)
        mask = torch.zeros(T, T, dtype=x.dtype)
        if self.causal:  # query i sees keys j <= i
            mask = mask.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        for l in range(self.L):
            def heads(w):  # (B, T, C) -> (B, H, T, dk): head h owns columns h*dk .. (h+1)*dk-1
                return (x @ p["attn.%d.%s" % (l, w)]).view(B, T, H, dk).transpose(1, 2)
            q, k, v = heads("w_q"), heads("w_k"), heads("w_v")
            a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dk) + mask, dim=-1)
            y = (a @ v).transpose(1, 2).reshape(B, T, C) @ p["attn.%d.w_o" % l]
            x = x + y if self.residual else y
        return x @ p["head.w"] + p["head.b"]                             # (B, T, V)


def cross_entropy(logits, targets):
    """Mean over positions whose target is not -1; 0 if there are none."""
    V = logits.shape[-1]
    y = targets.reshape(-1).long()
    if not bool((y != -1).any()):
        return logits.sum() * 0
    return F.cross_entropy(logits.reshape(-1, V), y, ignore_index=-1)


# ---- the tasks, as docs/model.md writes them ---------------------------------------------------
def expected_targets(task, V, tokens):
    x = tokens.tolist()
    out = []
    for s in x:
        T = len(s)
        if task == "copy":
            y = list(s)
        elif task == "reverse":
            y = s[::-1]
        elif task == "shift":
            y = [-1] + s[:-1]
        elif task == "max":
            y = [max(s)] * T
        elif task == "lookup":
            n_keys = T - 1
            n_values = (V - n_keys) // n_keys
            key = s[T - 1] - n_keys * n_values
            pairs = [t for t in s[:-1] if t // n_values == key]
            y = [-1] * (T - 1) + [pairs[0] % n_values if len(pairs) == 1 else -2]
        else:
            die("unknown task %r" % task)
        out.append(y)
    return out


M64 = (1 << 64) - 1


def is_heldout(seq):
    h = 0xCBF29CE484222325
    for t in seq:
        for byte in struct.pack("<i", t):
            h = ((h ^ byte) * 0x100000001B3) & M64
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & M64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & M64
    h ^= h >> 33
    return h % 8 == 0


def f64_model_rounded(model, g):
    """qkv never rounds an F64 model to f32: its grads must be F64 too."""
    return model.params["tok_emb"].dtype == torch.float64 and g["logits"].dtype != torch.float64


# ---- the comparison ----------------------------------------------------------------------------
def compare(model, grads_path, dtype, out):
    g, gmeta = load_safetensors(grads_path)
    if gmeta.get("format") != "qkv-grads":
        die("%s: not a qkv grads file (metadata format is %r)" % (grads_path, gmeta.get("format")))
    for name in ("tokens", "targets", "loss", "logits"):
        if name not in g:
            die("%s: tensor %s is missing" % (grads_path, name))
    tokens, targets = g["tokens"].long(), g["targets"].long()
    B = tokens.shape[0]
    if tuple(tokens.shape) != (B, model.T) or tuple(targets.shape) != (B, model.T):
        die("%s: tokens/targets are not (B, %d)" % (grads_path, model.T))
    if gmeta.get("task") != model.task:
        die("%s: task %r, but the model's is %r" % (grads_path, gmeta.get("task"), model.task))
    failures = []
    if int(tokens.min()) < 0 or int(tokens.max()) >= model.V:
        failures.append("tokens outside 0..%d" % (model.V - 1))
    elif expected_targets(model.task, model.V, tokens) != targets.tolist():
        failures.append("the targets do not follow from the tokens by the %s rule" % model.task)
    held = sum(is_heldout(s) for s in tokens.tolist())
    if held:
        failures.append("%d training sequence(s) fall in the held-out split" % held)

    if f64_model_rounded(model, g):
        failures.append("the grads file is F32 but the model is F64")
    p = {n: model.params[n].to(dtype).clone().requires_grad_(True) for n in model.names}
    logits = model.forward(p, tokens)
    loss = cross_entropy(logits, targets)
    loss.backward()

    def err_rel_max(a, b):  # max |a-b| / max |b|
        a, b = a.double(), b.detach().double()
        scale = float(b.abs().max())
        return float((a - b).abs().max()) / scale if scale > 0 else float((a - b).abs().max())

    # qkv's precision is the grads file's: its logits are F64 when the pass ran in f64
    f64 = g["logits"].dtype == torch.float64
    if f64 and dtype != torch.float64:
        die("an F64 grads file is compared with PyTorch in float64 only")
    logits_tol, loss_tol = (F64_RTOL, F64_RTOL) if f64 else (LOGITS_RTOL, LOSS_RTOL)
    results = []
    e = err_rel_max(g["logits"], logits)
    results.append(("logits", e, e <= logits_tol, "rel %.2e (tol %.0e)" % (e, logits_tol)))
    ql, tl = float(g["loss"]), float(loss)
    e = abs(ql - tl) / abs(tl) if tl != 0 else abs(ql)
    results.append(("loss", e, e <= loss_tol,
                    "qkv %.17g torch %.17g rel %.2e (tol %.0e)" % (ql, tl, e, loss_tol)))
    for n in model.names:
        gq = g.get("grad." + n)
        if gq is None or tuple(gq.shape) != tuple(p[n].shape):
            results.append(("grad." + n, float("inf"), False, "missing or misshapen"))
            continue
        if f64 != (gq.dtype == torch.float64):
            results.append(("grad." + n, float("inf"), False, "dtype differs from the logits'"))
            continue
        a, b = gq.double(), p[n].grad.double()
        if f64:
            e = err_rel_max(a, b)
            results.append(("grad." + n, e, e <= F64_RTOL,
                            "rel %.2e of |grad| up to %.2e (tol %.0e)" % (
                                e, float(b.abs().max()), F64_RTOL)))
            continue
        excess = float(((a - b).abs() - (GRAD_ATOL + GRAD_RTOL * b.abs())).max())
        abs_err = float((a - b).abs().max())
        results.append(("grad." + n, abs_err, excess <= 0,
                        "max abs err %.2e, |grad| up to %.2e (tol %.0e + %.0e*|g|)" % (
                            abs_err, float(b.abs().max()), GRAD_ATOL, GRAD_RTOL)))
    extra = sorted(k for k in g if k.startswith("grad.") and k[5:] not in model.params)
    if extra:
        failures.append("gradients of unknown parameters: %s" % ", ".join(extra))
    for name, _, ok, text in results:
        if not ok:
            failures.append("%s: %s" % (name, text))
    return results, failures, B


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="model.safetensors, or the directory holding it")
    ap.add_argument("--grads", help="a file written by `qkv grads` for this model")
    ap.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                    help="precision of the PyTorch side (default float64)")
    ap.add_argument("--json", action="store_true", help="print the results as one JSON object")
    args = ap.parse_args()
    path = args.model
    if os.path.isdir(path):
        path = os.path.join(path, "model.safetensors")
    tensors, meta = load_safetensors(path)
    model = Model(tensors, meta, path)
    dtype = torch.float64 if args.dtype == "float64" else torch.float32
    summary = "%s: task %s, T %d, V %d, d_model %d, heads %d, layers %d, residual %s, causal %s" % (
        path, model.task, model.T, model.V, model.C, model.H, model.L, model.residual, model.causal)
    if not args.grads:
        tokens = torch.arange(model.T).remainder(model.V).unsqueeze(0)
        with torch.no_grad():
            logits = model.forward({n: t.to(dtype) for n, t in model.params.items()}, tokens)
        print("model_torch: %s; logits %s, finite: %s" % (
            summary, tuple(logits.shape), bool(torch.isfinite(logits).all())))
        return 0
    results, failures, B = compare(model, args.grads, dtype, sys.stdout)
    if args.json:
        print(json.dumps({"model": path, "grads": args.grads, "batch": B, "ok": not failures,
                          "results": {n: {"error": e, "ok": ok, "detail": t}
                                      for n, e, ok, t in results},
                          "failures": failures}))
    else:
        print("model_torch: %s" % summary)
        print("model_torch: batch %d from %s, PyTorch in %s" % (B, args.grads, args.dtype))
        for name, _, ok, text in results:
            print("  %-18s %s  %s" % (name, "ok  " if ok else "FAIL", text))
    if failures:
        for f in failures:
            print("model_torch: mismatch: %s" % f, file=sys.stderr)
        return 1
    if not args.json:
        print("model_torch: PyTorch matches qkv: logits, loss and %d parameter gradients"
              % len(model.names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
