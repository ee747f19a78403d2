#!/usr/bin/env python3
"""torch_check.py - qkv's ops and their backward passes against PyTorch autograd, in float64.

Runs tests/oracle_dump (built as build/tests/oracle_dump), which writes, for every case, the
inputs drawn from qkv's seeded RNG, the non-differentiable extras (0/-inf masks, int32 indices
and targets), the loss weights w, qkv's output and qkv's gradient of loss = sum(w * out) for
every differentiable input. Each case is rebuilt here in PyTorch (float64, requires_grad on the
differentiable inputs), the same loss is backpropagated, and outputs and gradients are compared.
Any absolute difference above 1e-9 fails. Masks given by a recipe (causal, padding lengths,
boolean keep) are also rebuilt independently and must match qkv's mask bit for bit.

Without torch the check is skipped (exit 0). Exit status: 0 all passed, 1 a case failed,
2 the oracle could not be run or its output could not be read.
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

TOLERANCE = 1e-9
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--qkv-oracle", default=os.path.join("build", "tests", "oracle_dump"),
                   help="path of the oracle_dump executable (default: build/tests/oracle_dump, "
                        "relative to the current directory or else to the repository)")
    p.add_argument("--seed", type=int, default=None, help="seed passed to oracle_dump")
    p.add_argument("--dump-dir", default=None,
                   help="write the dump here and keep it (default: a temporary directory)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    return p.parse_args()


def fail(msg):
    print("torch_check: error: %s" % msg, file=sys.stderr)
    sys.exit(2)


def find_oracle(path):
    if os.path.exists(path) or os.path.isabs(path):
        return path
    alt = os.path.join(REPO, path)
    return alt if os.path.exists(alt) else path


def run_oracle(oracle, outdir, seed):
    cmd = [oracle, outdir] + ([str(seed)] if seed is not None else [])
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True)
    except OSError as e:
        fail("cannot run %s: %s" % (oracle, e))
    if proc.returncode != 0:
        fail("%s exited with %d: %s" % (" ".join(cmd), proc.returncode, proc.stderr.strip()))


def load_tensor(torch, outdir, desc):
    """A tensor from a raw little-endian .bin file described in the manifest."""
    shape = [int(s) for s in desc["shape"]]
    n = 1
    for s in shape:
        n *= s
    fmt, width, dtype = {"f64": ("d", 8, torch.float64), "i32": ("i", 4, torch.int32)}[desc["dtype"]]
    with open(os.path.join(outdir, desc["file"]), "rb") as f:
        raw = f.read()
    if len(raw) != n * width:
        fail("%s holds %d bytes, expected %d" % (desc["file"], len(raw), n * width))
    values = struct.unpack("<%d%s" % (n, fmt), raw)
    return torch.tensor(values, dtype=dtype).reshape(shape)


# ---- the reference ops --------------------------------------------------------------------

def safe_softmax(torch, s):
    """softmax over the last dim, with qkv's convention for rows that are entirely -inf.

    PyTorch gives NaN for such a row (0/0) and NaN gradients behind it; qkv defines its weights,
    output and gradient as zero. The reference therefore replaces fully masked rows by zeros
    before the softmax (so no NaN is ever formed, forward or backward) and zeroes their weights
    after it. torch.where routes no gradient to the branch it did not select, so those rows get
    exactly zero gradient, as in qkv."""
    full = torch.isneginf(s).all(dim=-1, keepdim=True)
    s_safe = torch.where(full, torch.zeros_like(s), s)
    p = torch.softmax(s_safe, dim=-1)
    return torch.where(full, torch.zeros_like(p), p)


def rebuild_mask(torch, params):
    """The 0/-inf mask described by the recipe in params, built without qkv; None if none."""
    kind = params.get("mask_kind")
    if kind is None:
        return None
    if kind == "causal":  # query i sees keys j <= i + (Nk - Nq)
        nq, nk = int(params["mask_nq"]), int(params["mask_nk"])
        keep = torch.ones(nq, nk, dtype=torch.bool).tril(diagonal=nk - nq)
    elif kind == "padding":  # (B, 1, 1, Nk): batch b sees keys j < lengths[b]
        lengths = torch.tensor([int(x) for x in params["mask_lengths"]])
        nk = int(params["mask_nk"])
        keep = (torch.arange(nk)[None, :] < lengths[:, None]).reshape(len(lengths), 1, 1, nk)
    elif kind == "bool":
        nq, nk = int(params["mask_nq"]), int(params["mask_nk"])
        keep = torch.tensor([int(x) for x in params["mask_keep"]]).reshape(nq, nk) != 0
    else:
        fail("unknown mask kind %r" % kind)
    zero = torch.zeros(keep.shape, dtype=torch.float64)
    return torch.where(keep, zero, torch.full_like(zero, -math.inf))


def attention(torch, q, k, v, mask, scale):
    if scale <= 0:
        scale = 1.0 / math.sqrt(q.shape[-1])
    scores = (q @ k.transpose(-2, -1)) * scale
    if mask is not None:
        scores = scores + mask  # additive 0/-inf, as qkv's mask op
    return safe_softmax(torch, scores) @ v


def reference(torch, op, x, extra, params):
    """The output of `op` in torch; x maps input names to leaves that require grad."""
    F = torch.nn.functional
    mask = extra.get("mask")
    if op == "matmul":
        a = x["a"].transpose(-2, -1) if params["trans_a"] else x["a"]
        b = x["b"].transpose(-2, -1) if params["trans_b"] else x["b"]
        return a @ b
    if op == "scale":
        return x["x"] * params["s"]
    if op == "mask":
        return x["x"] + mask
    if op == "softmax":
        return torch.softmax(x["x"], dim=-1)
    if op == "masked_softmax":
        return safe_softmax(torch, x["x"] + mask)
    if op == "add":
        return x["a"] + x["b"]
    if op == "mul":
        return x["a"] * x["b"]
    if op == "embedding":
        return F.embedding(extra["idx"].long(), x["table"])
    if op == "reshape":
        return x["x"].reshape([int(s) for s in params["shape"]])
    if op == "transpose":
        return x["x"].transpose(int(params["dim0"]), int(params["dim1"]))
    if op == "cross_entropy":
        logits = x["logits"]
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                               extra["targets"].reshape(-1).long(),
                               ignore_index=int(params["ignore_index"]), reduction="mean")
    if op == "mse":
        return F.mse_loss(x["a"], x["b"], reduction="mean")
    if op == "sum":
        return x["x"].sum()
    if op == "mean":
        return x["x"].mean()
    if op == "attention":
        return attention(torch, x["q"], x["k"], x["v"], mask, float(params["scale"]))
    if op == "attention_heads":  # heads side by side in each row: split, attend, merge
        h = int(params["heads"])

        def split(t):
            return t.reshape(t.shape[0], t.shape[1], h, t.shape[2] // h).transpose(1, 2)
        y = attention(torch, split(x["q"]), split(x["k"]), split(x["v"]), mask,
                      float(params["scale"]))
        return y.transpose(1, 2).reshape(y.shape[0], y.shape[2], h * y.shape[3])
    if op == "select_rows":  # rows of each (T, C) matrix, a row picked twice summing its grads
        return x["x"][..., [int(i) for i in params["rows"]], :]
    if op == "relu":
        return torch.relu(x["x"])
    if op == "gelu":
        return F.gelu(x["x"], approximate=params["approximate"])
    if op == "layernorm":
        return F.layer_norm(x["x"], (x["x"].shape[-1],), weight=x["gain"], bias=x["bias"],
                            eps=float(params["eps"]))
    if op == "layernorm_scale":  # 1/sqrt(var + eps) of each row, var biased: (..., 1)
        var = x["x"].var(dim=-1, unbiased=False, keepdim=True)
        return torch.rsqrt(var + float(params["eps"]))
    if op == "layernorm_apply":  # (x - mean)·s·gain + bias, s given (..., 1)
        centred = x["x"] - x["x"].mean(dim=-1, keepdim=True)
        return centred * x["s"] * x["gain"] + x["bias"]
    if op == "self_attention":
        xx = x["x"]
        return attention(torch, xx @ x["wq"], xx @ x["wk"], xx @ x["wv"], mask,
                         float(params["scale"]))
    fail("unknown op %r" % op)


# ---- comparison ---------------------------------------------------------------------------

def max_diff(torch, got, want):
    """max |got - want|; equal infinities count as equal, NaN or a shape mismatch as inf."""
    if tuple(got.shape) != tuple(want.shape):
        return math.inf
    if got.numel() == 0:
        return 0.0
    got, want = got.detach(), want.detach()
    d = (got - want).abs()
    d = torch.where(got == want, torch.zeros_like(d), d)
    d = torch.where(torch.isnan(d), torch.full_like(d, math.inf), d)
    return float(d.max())


def check_case(torch, outdir, case):
    tensors = case["tensors"]
    by_role = lambda role: [t for t in tensors if t["role"] == role]
    params = case.get("params", {})
    x = {}
    for t in by_role("input"):
        x[t["name"]] = load_tensor(torch, outdir, t).requires_grad_(True)
    extra = {t["name"]: load_tensor(torch, outdir, t) for t in by_role("extra")}
    w = load_tensor(torch, outdir, by_role("weights")[0])
    qkv_out = load_tensor(torch, outdir, by_role("output")[0])
    qkv_grad = {t["of"]: load_tensor(torch, outdir, t) for t in by_role("grad")}

    mask_diff = None
    rebuilt = rebuild_mask(torch, params)
    if rebuilt is not None:
        mask_diff = max_diff(torch, extra["mask"], rebuilt)

    out = reference(torch, case["op"], x, extra, params)
    # loss = sum(w * out) over the finite entries of out: masked (-inf) entries are constants.
    finite = torch.isfinite(out)
    loss = torch.where(finite, w * out, torch.zeros_like(out)).sum()
    loss.backward()

    out_diff = max_diff(torch, qkv_out, out)
    loss_diff = abs(float(case["loss"]) - float(loss))
    if math.isnan(loss_diff):
        loss_diff = math.inf
    grad_diffs = {}
    for name, leaf in x.items():
        g = leaf.grad if leaf.grad is not None else torch.zeros_like(leaf)
        grad_diffs[name] = max_diff(torch, qkv_grad[name], g)
    worst_out = max(out_diff, loss_diff)
    worst_grad = max(grad_diffs.values()) if grad_diffs else 0.0
    passed = worst_out <= TOLERANCE and worst_grad <= TOLERANCE and (
        mask_diff is None or mask_diff == 0.0)
    return {
        "name": case["name"],
        "op": case["op"],
        "shapes": {t["name"]: t["shape"] for t in by_role("input")},
        "max_out_diff": out_diff,
        "loss_diff": loss_diff,
        "max_grad_diff": worst_grad,
        "grad_diffs": grad_diffs,
        "mask_diff": mask_diff,
        "passed": passed,
    }


def json_safe(v):
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, dict):
        return {k: json_safe(x) for k, x in v.items()}
    if isinstance(v, list):
        return [json_safe(x) for x in v]
    return v


def main():
    args = parse_args()
    try:
        import torch
    except Exception as e:  # ImportError, or a torch that fails to load its libraries
        print("torch_check: skipping: cannot import torch (%s: %s)" % (type(e).__name__, e))
        return 0

    oracle = find_oracle(args.qkv_oracle)
    if not os.path.exists(oracle):
        fail("%s not found: build it first (cmake --build build --target oracle_dump)" % oracle)

    with tempfile.TemporaryDirectory(prefix="qkv-oracle-") as tmp:
        outdir = args.dump_dir or tmp
        run_oracle(oracle, outdir, args.seed)
        try:
            with open(os.path.join(outdir, "manifest.json")) as f:
                manifest = json.load(f)
        except (OSError, ValueError) as e:
            fail("cannot read the manifest: %s" % e)
        if manifest.get("format") != "qkv-oracle" or manifest.get("version") != 1:
            fail("unexpected manifest format %r version %r"
                 % (manifest.get("format"), manifest.get("version")))
        results = [check_case(torch, outdir, c) for c in manifest["cases"]]

    passed = bool(results) and all(r["passed"] for r in results)
    worst_out = max((r["max_out_diff"] for r in results), default=0.0)
    worst_loss = max((r["loss_diff"] for r in results), default=0.0)
    worst_grad = max((r["max_grad_diff"] for r in results), default=0.0)
    if args.json:
        print(json.dumps(json_safe({
            "tolerance": TOLERANCE,
            "torch_version": torch.__version__,
            "seed": manifest.get("seed"),
            "cases": results,
            "worst_out_diff": worst_out,
            "worst_loss_diff": worst_loss,
            "worst_grad_diff": worst_grad,
            "passed": passed,
        }), indent=2))
    else:
        print("qkv vs torch %s, float64, seed %s, tolerance %.0e (max absolute difference)"
              % (torch.__version__, manifest.get("seed"), TOLERANCE))
        width = max(len(r["name"]) for r in results)
        print("%-*s  %-14s  %14s  %14s  %14s  %-5s  %s"
              % (width, "case", "op", "max|out diff|", "|loss diff|", "max|grad diff|", "mask",
                 "result"))
        for r in results:
            mask = "-" if r["mask_diff"] is None else ("ok" if r["mask_diff"] == 0 else "DIFF")
            print("%-*s  %-14s  %14.3e  %14.3e  %14.3e  %-5s  %s"
                  % (width, r["name"], r["op"], r["max_out_diff"], r["loss_diff"],
                     r["max_grad_diff"], mask, "pass" if r["passed"] else "FAIL"))
        nfail = sum(not r["passed"] for r in results)
        print("%d cases, %d failed; worst |out diff| %.3e, |loss diff| %.3e, |grad diff| %.3e"
              % (len(results), nfail, worst_out, worst_loss, worst_grad))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
