#!/usr/bin/env python3
"""circuits_torch.py - recompute `qkv circuits` from model.safetensors alone, in PyTorch.

usage: circuits_torch.py MODEL_DIR CIRCUITS_JSON

CIRCUITS_JSON is what `qkv circuits --model MODEL_DIR --out FILE` (or --json) wrote. From the
weights alone, in float64, as docs/explain.md defines them, this recomputes for every head its
QK circuit (token and positional parts), its OV circuit over the whole vocabulary and the copying
score from the eigenvalues of that V x V matrix (torch.linalg.eigvals: the full matrix, where qkv
takes the small Dk x Dk product), and every composition score from the C x C products, and
compares:

  circuits (qk, qk_pos, ov)   max |qkv - torch| <= tol * max |torch|   (per matrix)
  scores (copying, composition) |qkv - torch| <= tol
  neuron_logits (each MLP's W_out·W_U) max |qkv - torch| <= tol * max |torch|

with tol = 1e-6 for an F32 model and 1e-9 for an F64 one. An undefined score is null in the JSON
and must be undefined here too.

Exit status: 0 everything matches (or torch is missing: "circuits_torch: skipping: ..."),
1 a mismatch, 2 a file could not be read or is not what it should be.
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import torch
    from model_torch import load_safetensors
except ImportError as e:  # pragma: no cover - depends on the machine
    print("circuits_torch: skipping: %s (PyTorch and numpy are needed)" % e)
    sys.exit(0)


def die(msg):
    print("circuits_torch: error: %s" % msg, file=sys.stderr)
    sys.exit(2)


def circuits(p, meta):
    """The circuits and scores of every head, as docs/explain.md defines them."""
    C, H, L = int(meta["d_model"]), int(meta["heads"]), int(meta["layers"])
    dk = C // H
    enc_dec = "dec_pos_emb" in p
    E, P, U = p["tok_emb"], p["pos_emb"], p["head.w"]
    Eq = p["dec_pos_emb"] if enc_dec else E  # the query side's embedding
    Pq = p["dec_pos_emb"] if enc_dec else P

    def head(l, h, w):  # (C, dk) columns of W_Q, W_K, W_V; (dk, C) rows of W_O
        m = p["attn.%d.%s" % (l, w)]
        return m[h * dk:(h + 1) * dk, :] if w == "w_o" else m[:, h * dk:(h + 1) * dk]

    heads, ov_mats, qk_mats = [], {}, {}
    for l in range(L):
        for h in range(H):
            wq, wk, wv, wo = (head(l, h, w) for w in ("w_q", "w_k", "w_v", "w_o"))
            qk_mats[l, h] = wq @ wk.T                       # (C, C)
            ov_mats[l, h] = wv @ wo                         # (C, C)
            ov = E @ ov_mats[l, h] @ U                      # (V, V)
            lam = torch.linalg.eigvals(ov)
            total = lam.abs().sum().item()
            heads.append({
                "layer": l + 1, "head": h + 1,
                "qk": Eq @ qk_mats[l, h] @ E.T / math.sqrt(dk),
                "qk_pos": Pq @ qk_mats[l, h] @ P.T / math.sqrt(dk),
                "ov": ov,
                "copying_score": lam.real.sum().item() / total if total > 0 else None,
            })

    def score(a, b):
        d = (torch.linalg.norm(a) * torch.linalg.norm(b)).item()
        return (torch.linalg.norm(a @ b) / d).item() if d > 0 else None

    comp = {}
    for l in range(L - 1):
        for h1 in range(H):
            for h2 in range(H):
                a, key = ov_mats[l, h1], ("%d.%d" % (l + 1, h1 + 1), "%d.%d" % (l + 2, h2 + 1))
                comp[key + ("q",)] = score(a, qk_mats[l + 1, h2])
                if not enc_dec:
                    comp[key + ("k",)] = score(a, qk_mats[l + 1, h2].T)
                    comp[key + ("v",)] = score(a, ov_mats[l + 1, h2])
    return heads, comp


def main():
    if len(sys.argv) != 3:
        die("usage: circuits_torch.py MODEL_DIR CIRCUITS_JSON")
    model, jpath = sys.argv[1], sys.argv[2]
    if os.path.isdir(model):
        model = os.path.join(model, "model.safetensors")
    tensors, meta = load_safetensors(model)
    f64 = tensors["tok_emb"].dtype == torch.float64
    tol = 1e-9 if f64 else 1e-6
    p = {k: v.to(torch.float64) for k, v in tensors.items()}
    try:
        with open(jpath) as f:
            got = json.load(f)
    except (OSError, ValueError) as e:
        die("cannot read %s: %s" % (jpath, e))
    heads, comp = circuits(p, meta)
    bad, worst = 0, 0.0

    def check_score(what, mine, want):
        nonlocal bad, worst
        if want is None or mine is None:
            if want is not None or mine is not None:
                print("MISMATCH %s: qkv %r, torch %r" % (what, mine, want))
                bad += 1
            return
        err = abs(mine - want)
        worst = max(worst, err)
        if err > tol:
            print("MISMATCH %s: qkv %.12g, torch %.12g (|diff| %.3g > %g)" % (what, mine, want, err, tol))
            bad += 1

    if len(got.get("heads", [])) != len(heads):
        die("%s has %d heads, the model %d" % (jpath, len(got.get("heads", [])), len(heads)))
    for mine, want in zip(got["heads"], heads):
        name = "head %d.%d" % (want["layer"], want["head"])
        if (mine["layer"], mine["head"]) != (want["layer"], want["head"]):
            die("%s: heads out of order at %s" % (jpath, name))
        for key in ("qk", "qk_pos", "ov"):
            m = torch.tensor(mine[key], dtype=torch.float64)
            if m.shape != want[key].shape:
                print("MISMATCH %s %s: shape %s, torch %s" % (name, key, tuple(m.shape), tuple(want[key].shape)))
                bad += 1
                continue
            scale = want[key].abs().max().item() or 1.0
            err = (m - want[key]).abs().max().item() / scale
            worst = max(worst, err)
            if err > tol:
                print("MISMATCH %s %s: max relative difference %.3g > %g" % (name, key, err, tol))
                bad += 1
        check_score(name + " copying_score", mine["copying_score"], want["copying_score"])
    seen = set()
    for c in got.get("composition", []):
        key = (c["from"], c["to"], c["kind"])
        if key not in comp:
            print("MISMATCH composition %s: not a pair of consecutive layers" % (key,))
            bad += 1
            continue
        seen.add(key)
        check_score("composition %s -> %s %s" % key, c["score"], comp[key])
    for key in set(comp) - seen:
        print("MISMATCH composition %s -> %s %s: missing from qkv's" % key)
        bad += 1
    # each MLP's neuron-logit map W_out·W_U, (neurons, vocab), relative to its largest entry
    mlp = int(meta.get("mlp", "0"))
    layers = int(meta["layers"])
    got_mlp = got.get("mlp", [])
    if len(got_mlp) != (layers if mlp else 0):
        print("MISMATCH mlp: %d neuron-logit maps, the model has %d MLPs" % (len(got_mlp), layers if mlp else 0))
        bad += 1
    for l, mine in enumerate(got_mlp if mlp else []):
        want = p["mlp.%d.w_out" % l] @ p["head.w"]
        m = torch.tensor(mine["neuron_logits"], dtype=torch.float64)
        if mine["layer"] != l + 1 or mine["neurons"] != mlp or m.shape != want.shape:
            print("MISMATCH mlp %d: layer %r, neurons %r, shape %s, torch %s"
                  % (l + 1, mine["layer"], mine["neurons"], tuple(m.shape), tuple(want.shape)))
            bad += 1
            continue
        err = (m - want).abs().max().item() / (want.abs().max().item() or 1.0)
        worst = max(worst, err)
        if err > tol:
            print("MISMATCH mlp %d neuron_logits: max relative difference %.3g > %g" % (l + 1, err, tol))
            bad += 1
    print("circuits_torch: %d heads, %d composition scores, %d neuron-logit maps, worst difference %.3g (tol %g): %s"
          % (len(heads), len(comp), len(got_mlp), worst, tol, "MISMATCH" if bad else "ok"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
