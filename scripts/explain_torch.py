#!/usr/bin/env python3
"""explain_torch.py - recompute qkv's ablation, patching, attribution and lens in PyTorch.

Reads a model.safetensors (through scripts/model_torch.py's reader) and the JSON objects that
`qkv ablate --json`, `qkv patch --json`, `qkv attribute --json` and `qkv lens --json` print
(docs/explain.md),
recomputes every number of them in float64 from the model file alone, and compares:

  ablate     baseline and each head's loss and accuracy (zero or mean), and `together`
  patch      the clean and corrupted metric, each head's exact and attribution share
             (attribution from torch autograd on the corrupted run), the agreement
  attribute  the logit and every part (embed, each head, bias), and their sum
  lens       at every layer boundary and position, the probability of each listed token
             (softmax of the stream after that layer times head.w, plus head.b), that no token
             left out is more probable, the final prediction's rank; at every position the
             final prediction (the model's argmax), its logit and every part of it (a part's
             scale: the sum of the absolute values of the products it adds up)

Each number x of qkv against torch's y must satisfy |x - y| <= tol * max(1, scale), with tol
1e-9 where qkv ran in f64 (the JSON's "dtype": an f64 model, or an f32 model with --dtype f64,
which widens it exactly) and 1e-6 where it ran in f32. The scale is |y|, except for what is a
difference: a metric logit[answer] - logit[wrong] scales with |logit[answer]| + |logit[wrong]|
(its rounding is the logits'), and a share with the sizes of the terms it is made of over
|clean - corrupt|. Self-attention models of a
built-in task whose tokens read as their ids (copy, reverse, shift, max, induction).

usage: explain_torch.py MODEL [--ablate A.json --data FILE] [--patch P.json]
                              [--attribute D.json] [--lens L.json]
Exit status: 0 all match (or torch is missing: "explain_torch: skipping: ..."), 1 a mismatch,
2 a file could not be read or is not what it should be.
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import torch
    import torch.nn.functional as F
    import model_torch as mt
except ImportError as e:  # pragma: no cover - depends on the machine
    print("explain_torch: skipping: %s (PyTorch and numpy are needed)" % e)
    sys.exit(0)
except SystemExit:  # model_torch exits 0 when torch is missing
    print("explain_torch: skipping: PyTorch is missing")
    sys.exit(0)


def die(msg):
    print("explain_torch: error: %s" % msg, file=sys.stderr)
    sys.exit(2)


def forward(model, p, tokens, edits=(), keep_grad=False, streams=None):
    """tokens (B, T) -> logits (B, T, V), z[l] (B, H, T, dk), stream[0] (B, T, C).
    edits: (layer, head, position or None, value (B or 1, H, T, dk) or None for zero).
    streams: a list that receives the stream after 0 (the embeddings), 1, .., L layers."""
    B, T, C, H = tokens.shape[0], model.T, model.C, model.H
    dk = C // H
    x = p["tok_emb"][tokens] + p["pos_emb"]
    stream0 = x
    if streams is not None:
        streams.append(x)
    mask = torch.zeros(T, T, dtype=x.dtype)
    if model.causal:
        mask = mask.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    zs = []
    for l in range(model.L):
        def heads(w):
            return (x @ p["attn.%d.%s" % (l, w)]).view(B, T, H, dk).transpose(1, 2)
        q, k, v = heads("w_q"), heads("w_k"), heads("w_v")
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dk) + mask, dim=-1)
        z = a @ v
        for (el, eh, ep, val) in edits:
            if el != l:
                continue
            z = z.clone()
            pos = slice(None) if ep is None else slice(ep, ep + 1)
            z[:, eh, pos, :] = 0 if val is None else val.expand(B, -1, -1, -1)[:, eh, pos, :]
        if keep_grad:
            z.retain_grad()
        zs.append(z)
        y = z.transpose(1, 2).reshape(B, T, C) @ p["attn.%d.w_o" % l]
        x = x + y if model.residual else y
        if streams is not None:
            streams.append(x)
    return x @ p["head.w"] + p["head.b"], zs, stream0


def induction_targets(s):
    n = 1
    while n < len(s) and s[n] != s[0]:
        n += 1
    return [-1] * n + [s[i + 1] for i in range(n, len(s) - 1)] + ([-1] if n < len(s) else [])


def targets_of(model, rows):
    if model.task == "induction":
        return [induction_targets(s) for s in rows]
    return mt.expected_targets(model.task, model.V, torch.tensor(rows))


class Checker:
    def __init__(self, tol):
        self.tol, self.failures, self.count, self.worst = tol, [], 0, 0.0

    def check(self, what, got, want, scale=None):
        """|got - want| <= tol * scale; scale: max(1, |want|), or the size of the terms that
        want is a difference of (a metric's logits, over the clean - corrupt difference)."""
        self.count += 1
        if got is None or want is None or not math.isfinite(want):
            if not (got is None and (want is None or not math.isfinite(want))):
                self.failures.append("%s: qkv %r, torch %r" % (what, got, want))
            return
        err = abs(got - want) / max(1.0, abs(want) if scale is None else scale)
        self.worst = max(self.worst, err)
        if err > self.tol:
            self.failures.append("%s: qkv %.12g, torch %.12g (error %.3g > %g)" % (
                what, got, want, err, self.tol))


def score(model, p, tokens, targets, edits=()):
    with torch.no_grad():
        logits, _, _ = forward(model, p, tokens, edits)
    y = targets.reshape(-1)
    flat = logits.reshape(-1, model.V)
    keep = y != -1
    loss = F.cross_entropy(flat[keep], y[keep]).item()
    acc = (flat[keep].argmax(-1) == y[keep]).double().mean().item()
    return loss, acc


def check_ablate(model, p, js, data_path, ck):
    rows = []
    with open(data_path) as f:
        for line in f:
            if line.strip():
                rows.append([int(w) for w in line.split()])
    tokens = torch.tensor(rows)
    targets = torch.tensor(targets_of(model, rows))
    means = None
    if js["mode"] == "mean":
        with torch.no_grad():
            _, zs, _ = forward(model, p, tokens)
        means = [z.mean(0, keepdim=True) for z in zs]
    def edit(h):
        l = h["layer"] - 1
        return (l, h["head"] - 1, None, None if means is None else means[l])
    loss, acc = score(model, p, tokens, targets)
    ck.check("ablate baseline loss", js["baseline"]["loss"], loss)
    ck.check("ablate baseline accuracy", js["baseline"]["accuracy"], acc)
    for h in js["heads"]:
        loss, acc = score(model, p, tokens, targets, [edit(h)])
        ck.check("ablate %d.%d loss" % (h["layer"], h["head"]), h["loss"], loss)
        ck.check("ablate %d.%d accuracy" % (h["layer"], h["head"]), h["accuracy"], acc)
    if "together" in js:
        edits = [edit({"layer": int(n.split(".")[0]), "head": int(n.split(".")[1])})
                 for n in js["together"]["heads"]]
        loss, acc = score(model, p, tokens, targets, edits)
        ck.check("ablate together loss", js["together"]["loss"], loss)
        ck.check("ablate together accuracy", js["together"]["accuracy"], acc)


def check_patch(model, p, js, ck):
    clean = torch.tensor([[int(w) for w in js["tokens"]]])
    corrupt = torch.tensor([[int(w) for w in js["corrupt_tokens"]]])
    pos, ans, wr = js["position"], int(js["answer"]), int(js["wrong"])
    def metric(logits):
        return logits[0, pos, ans] - logits[0, pos, wr]
    def size(logits):  # what a metric's rounding scales with: the two logits it subtracts
        return abs(logits[0, pos, ans].item()) + abs(logits[0, pos, wr].item())
    with torch.no_grad():
        cl, zc, _ = forward(model, p, clean)
    xl, zx, _ = forward(model, {n: t.clone().requires_grad_(True) for n, t in p.items()},
                        corrupt, keep_grad=True)
    m_clean, m_corrupt = metric(cl).item(), metric(xl).item()
    metric(xl).backward()
    ck.check("patch clean", js["clean"], m_clean, size(cl))
    ck.check("patch corrupt", js["corrupt"], m_corrupt, size(xl))
    diff = m_clean - m_corrupt
    for r in js["results"]:
        l, h, at = r["layer"] - 1, r["head"] - 1, r["position"]
        name = "patch %d.%d%s" % (r["layer"], r["head"], "" if at is None else " @%d" % at)
        if r["exact"] is not None:
            with torch.no_grad():
                pl, _, _ = forward(model, p, corrupt, [(l, h, at, zc[l])])
            ck.check(name + " exact", r["exact"], (metric(pl).item() - m_corrupt) / diff,
                     (size(pl) + size(xl)) / abs(diff))
        if r["attribution"] is not None:
            sl = slice(None) if at is None else slice(at, at + 1)
            delta = (zc[l] - zx[l].detach())[0, h, sl, :]
            terms = delta * zx[l].grad[0, h, sl, :]
            ck.check(name + " attribution", r["attribution"], terms.sum().item() / diff,
                     terms.abs().sum().item() / abs(diff))


def parts_of(model, p, zs, s0, pos, tok, sizes=None):
    """The logit of tok at pos split as qkv attribute splits it: {name: value}. sizes, a dict,
    receives each part's scale: the sum of the absolute values of the products it adds up
    (what its rounding scales with, where the products cancel)."""
    C, H = model.C, model.H
    dk = C // H
    want = {"bias": p["head.b"][tok].item()}
    sizes = {} if sizes is None else sizes
    sizes["bias"] = abs(want["bias"])
    if model.residual:
        want["embed"] = (s0[0, pos] @ p["head.w"][:, tok]).item()
        sizes["embed"] = (s0[0, pos].abs() @ p["head.w"][:, tok].abs()).item()
    for l in range(0 if model.residual else model.L - 1, model.L):
        u = p["attn.%d.w_o" % l] @ p["head.w"][:, tok]
        for h in range(H):
            z, uh = zs[l][0, h, pos], u[h * dk:(h + 1) * dk]
            want["%d.%d" % (l + 1, h + 1)] = (z @ uh).item()
            sizes["%d.%d" % (l + 1, h + 1)] = (z.abs() @ uh.abs()).item()
    return want


def check_attribute(model, p, js, ck):
    tokens = torch.tensor([[int(w) for w in js["tokens"]]])
    pos, tok = js["position"], int(js["token"])
    with torch.no_grad():
        logits, zs, s0 = forward(model, p, tokens)
    ck.check("attribute logit", js["logit"], logits[0, pos, tok].item())
    want = parts_of(model, p, zs, s0, pos, tok)
    names = [q["name"] for q in js["parts"]]
    if sorted(names) != sorted(want):
        ck.failures.append("attribute parts %s, torch's %s" % (names, sorted(want)))
    for q in js["parts"]:
        if q["name"] in want:
            ck.check("attribute " + q["name"], q["value"], want[q["name"]])
    ck.check("attribute sum", js["sum"], sum(want.values()))


def check_lens(model, p, js, ck):
    tokens = torch.tensor([[int(w) for w in js["tokens"]]])
    streams = []
    with torch.no_grad():
        logits, zs, s0 = forward(model, p, tokens, streams=streams)
    if [b["after"] for b in js["layers"]] != list(range(model.L + 1)):
        ck.failures.append("lens layers %s, not after 0 .. %d" % ([b["after"] for b in js["layers"]], model.L))
        return
    final = {}
    for d in js["decomposition"]:
        pos, tok = d["position"], int(d["token"])
        final[pos] = tok
        row = logits[0, pos]
        # the final prediction is the model's argmax (a token within rounding of it may stand)
        ck.check("lens final prediction at %d" % pos, row[tok].item(), row.max().item())
        ck.check("lens logit at %d" % pos, d["logit"], row[tok].item())
        sizes = {}
        want = parts_of(model, p, zs, s0, pos, tok, sizes)
        names = [q["name"] for q in d["parts"]]
        if sorted(names) != sorted(want):
            ck.failures.append("lens parts at %d: %s, torch's %s" % (pos, names, sorted(want)))
        for q in d["parts"]:
            if q["name"] in want:  # a part scales with the products it adds up
                ck.check("lens part %s at %d" % (q["name"], pos), q["value"], want[q["name"]],
                         max(abs(want[q["name"]]), sizes[q["name"]]))
    for b in js["layers"]:
        lens_logits = streams[b["after"]][0] @ p["head.w"] + p["head.b"]  # (T, V)
        probs = torch.softmax(lens_logits, dim=-1)
        for c in b["positions"]:
            pos, at = c["position"], "after %d at %d" % (b["after"], c["position"])
            listed = [int(t["token"]) for t in c["top"]]
            for t, tok in zip(c["top"], listed):
                ck.check("lens prob of %d %s" % (tok, at), t["prob"], probs[pos, tok].item())
            # no token left out is more probable than the last listed (beyond the tolerance)
            rest = [j for j in range(model.V) if j not in listed]
            if rest and probs[pos, rest].max().item() > c["top"][-1]["prob"] + ck.tol:
                ck.failures.append("lens %s: token %d (%.9g) is more probable than the listed %s" % (
                    at, rest[int(probs[pos, rest].argmax())], probs[pos, rest].max().item(), listed))
            # the final prediction's rank, unless another logit is within rounding of its own
            row, f = lens_logits[pos], final.get(pos)
            if f is None:
                ck.failures.append("lens: no decomposition at position %d" % pos)
                continue
            near = ((row - row[f]).abs() <= ck.tol * max(1.0, row[f].abs().item())).sum().item()
            rank = 1 + int((row > row[f]).sum().item()) + int((row[:f] == row[f]).sum().item())
            ck.count += 1
            if near == 1 and c["rank_of_final"] != rank:
                ck.failures.append("lens rank of the final prediction %s: qkv %d, torch %d" % (
                    at, c["rank_of_final"], rank))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--ablate")
    ap.add_argument("--data")
    ap.add_argument("--patch")
    ap.add_argument("--attribute")
    ap.add_argument("--lens")
    args = ap.parse_args()
    path = args.model
    if os.path.isdir(path):
        path = os.path.join(path, "model.safetensors")
    tensors, meta = mt.load_safetensors(path)
    model = mt.Model(tensors, meta, path)
    p = {n: t.to(torch.float64) for n, t in model.params.items()}
    checks = []
    for kind, file in (("ablate", args.ablate), ("patch", args.patch),
                       ("attribute", args.attribute), ("lens", args.lens)):
        if not file:
            continue
        try:
            with open(file) as f:
                js = json.load(f)
        except (OSError, ValueError) as e:
            die("%s: %s" % (file, e))
        if js.get("command") != kind:
            die("%s: not the JSON of qkv %s" % (file, kind))
        ck = Checker(1e-9 if js["dtype"] == "f64" else 1e-6)
        if kind == "ablate":
            if not args.data:
                die("--ablate needs --data FILE (the examples qkv ablate --data scored)")
            check_ablate(model, p, js, args.data, ck)
        elif kind == "patch":
            check_patch(model, p, js, ck)
        elif kind == "lens":
            check_lens(model, p, js, ck)
        else:
            check_attribute(model, p, js, ck)
        checks.append((kind, js["dtype"], ck))
    failed = 0
    for kind, dtype, ck in checks:
        print("explain_torch: %-9s %s: %d numbers, worst error %.3g (tol %g): %s" % (
            kind, dtype, ck.count, ck.worst, ck.tol, "FAIL" if ck.failures else "ok"))
        for f in ck.failures:
            print("explain_torch: mismatch: %s" % f, file=sys.stderr)
        failed += len(ck.failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
