#!/usr/bin/env python3
"""circuits_torch.py - recompute `qkv circuits` from model.safetensors alone, in PyTorch.

usage: circuits_torch.py MODEL_DIR CIRCUITS_JSON [MODEL_DIR CIRCUITS_JSON ...]

CIRCUITS_JSON is what `qkv circuits --model MODEL_DIR --out FILE` (or --json) wrote; several
pairs are checked in one run (PyTorch is imported once), each ending with its line. From the
weights alone, in float64, as docs/explain.md defines them, this recomputes for every head its
QK circuit (token and positional parts), its OV circuit over the whole vocabulary and the copying
score from the eigenvalues of that V x V matrix (torch.linalg.eigvals: the full matrix, where qkv
takes the small Dk x Dk product), and every composition score from the C x C products (the JSON's
"composition" between consecutive layers, "composition_all" between every earlier and later
layer, in its order), and compares:

  circuits (qk, qk_pos, ov)   max |qkv - torch| <= tol * max |torch|   (per matrix)
  scores (copying, composition) |qkv - torch| <= tol
  neuron_logits (each MLP's W_out·W_U) max |qkv - torch| <= tol * max |torch|

with tol = 1e-6 for an F32 model and 1e-9 for an F64 one. A LayerNorm model's circuits are
those of its weights with the LayerNorms folded (fold_layernorm, done here on its own), and
the folded model's logits must be the model's to 1e-12. An undefined score is null in the JSON
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
    from model_torch import Model, load_safetensors
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

    comp = {}  # every earlier layer l into every later one l2
    for l in range(L - 1):
        for l2 in range(l + 1, L):
            for h1 in range(H):
                for h2 in range(H):
                    a = ov_mats[l, h1]
                    key = ("%d.%d" % (l + 1, h1 + 1), "%d.%d" % (l2 + 1, h2 + 1))
                    comp[key + ("q",)] = score(a, qk_mats[l2, h2])
                    if not enc_dec:
                        comp[key + ("k",)] = score(a, qk_mats[l2, h2].T)
                        comp[key + ("v",)] = score(a, ov_mats[l2, h2])
    return heads, comp


def fold_layernorm(p, meta):
    """The weights of a LayerNorm model with each LayerNorm folded (docs/explain.md,
    "Circuits"): every gain into the rows of the weights that read the normalized stream
    (W_Q, W_K, W_V, W_in, W_U), every bias into a bias of what they compute (b_q, b_k, b_v,
    b_in, head.b), and the centring into the weights that write to the stream (the
    embeddings, W_O's and W_out's rows, b_out); an encoder-decoder's keys and values read the
    embedded inputs as they are. The folded model, whose LayerNorms only divide by sigma,
    computes the same logits (folded_forward)."""
    L, N = int(meta["layers"]), int(meta.get("mlp", "0"))
    enc_dec = "dec_pos_emb" in p
    f = dict(p)
    center = lambda w: w - w.mean(dim=-1, keepdim=True)  # noqa: E731 - rows of a writer
    for name in ("dec_pos_emb",) if enc_dec else ("tok_emb", "pos_emb"):
        f[name] = center(p[name])
    for l in range(L):
        g, b = p["attn.%d.ln.gain" % l], p["attn.%d.ln.bias" % l]
        for w in ("w_q", "w_k", "w_v"):
            W = p["attn.%d.%s" % (l, w)]
            read_normalized = w == "w_q" or not enc_dec
            f["attn.%d.%s" % (l, w)] = g[:, None] * W if read_normalized else W
            f["attn.%d.b_%s" % (l, w[2])] = b @ W if read_normalized else torch.zeros_like(W[0])
        f["attn.%d.w_o" % l] = center(p["attn.%d.w_o" % l])
        if N:
            g, b = p["mlp.%d.ln.gain" % l], p["mlp.%d.ln.bias" % l]
            f["mlp.%d.w_in" % l] = g[:, None] * p["mlp.%d.w_in" % l]
            f["mlp.%d.b_in" % l] = p["mlp.%d.b_in" % l] + b @ p["mlp.%d.w_in" % l]
            f["mlp.%d.w_out" % l] = center(p["mlp.%d.w_out" % l])
            f["mlp.%d.b_out" % l] = p["mlp.%d.b_out" % l] - p["mlp.%d.b_out" % l].mean()
    g, b = p["ln_final.gain"], p["ln_final.bias"]
    f["head.w"], f["head.b"] = g[:, None] * p["head.w"], p["head.b"] + b @ p["head.w"]
    return f


def folded_forward(model, f, tokens):
    """The folded model's forward: LayerNorms that only divide by sigma (the stream is centred
    already), the biases the folding made."""
    B, T, C, H = tokens.shape[0], model.T, model.C, model.H
    dk = C // H
    x = f["tok_emb"][tokens] + f["pos_emb"]
    mask = model.mask(x.dtype)
    d = f["dec_pos_emb"].expand(B, model.To, C) if model.To else x
    Tq = d.shape[1]
    scale = lambda t: t / torch.sqrt(t.pow(2).mean(dim=-1, keepdim=True) + 1e-5)  # noqa: E731
    for l in range(model.L):
        def heads(src, n, w):
            return (src @ f["attn.%d.w_%s" % (l, w)] + f["attn.%d.b_%s" % (l, w)]).view(B, n, H, dk).transpose(1, 2)
        a_in = scale(d)
        kv = x if model.To else a_in
        q, k, v = heads(a_in, Tq, "q"), heads(kv, T, "k"), heads(kv, T, "v")
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dk) + mask, dim=-1)
        d = d + (a @ v).transpose(1, 2).reshape(B, Tq, C) @ f["attn.%d.w_o" % l]
        if model.mlp:
            h = scale(d) @ f["mlp.%d.w_in" % l] + f["mlp.%d.b_in" % l]
            d = d + model.activation(h) @ f["mlp.%d.w_out" % l] + f["mlp.%d.b_out" % l]
    return scale(d) @ f["head.w"] + f["head.b"]


def main():
    args = sys.argv[1:]
    if not args or len(args) % 2:
        die("usage: circuits_torch.py MODEL_DIR CIRCUITS_JSON [MODEL_DIR CIRCUITS_JSON ...]")
    # several pairs in one run: PyTorch is imported once; the exit status is the worst
    return max(check(args[i], args[i + 1]) for i in range(0, len(args), 2))


def check(model, jpath):
    """Compares one model's circuits JSON with PyTorch's: 0 all match, 1 a mismatch."""
    if os.path.isdir(model):
        model = os.path.join(model, "model.safetensors")
    tensors, meta = load_safetensors(model)
    f64 = tensors["tok_emb"].dtype == torch.float64
    tol = 1e-9 if f64 else 1e-6
    p = {k: v.to(torch.float64) for k, v in tensors.items()}
    fold_err = None
    if meta.get("norm", "none") == "layernorm":
        # the folding keeps the model's outputs: the folded model's logits are the model's
        model = Model(tensors, meta, model)
        f = fold_layernorm(p, meta)
        tokens = torch.randint(0, model.V, (4, model.T), generator=torch.Generator().manual_seed(3))
        want = model.forward({k: v.to(torch.float64) for k, v in model.params.items()}, tokens)
        fold_err = ((folded_forward(model, f, tokens) - want).abs().max() / want.abs().max()).item()
        p = f
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
    # "composition": the consecutive layers' pairs; "composition_all": every earlier layer's
    # into every later one's, in the order by earlier layer, later layer, kind, from, to
    def layer(name):
        return int(name.split(".")[0])
    for field, want in (("composition", {k: v for k, v in comp.items()
                                         if layer(k[1]) == layer(k[0]) + 1}),
                        ("composition_all", comp)):
        seen, order = set(), []
        for c in got.get(field, []):
            key = (c["from"], c["to"], c["kind"])
            if key not in want or key in seen:
                print("MISMATCH %s %s: not a pair of its heads, or twice" % (field, key))
                bad += 1
                continue
            seen.add(key)
            order.append((layer(key[0]), layer(key[1]), "qkv".index(key[2]),
                          tuple(int(x) for x in key[0].split(".")),
                          tuple(int(x) for x in key[1].split("."))))
            check_score("%s %s -> %s %s" % ((field,) + key), c["score"], want[key])
        for key in set(want) - seen:
            print("MISMATCH %s %s -> %s %s: missing from qkv's" % ((field,) + key))
            bad += 1
        if field == "composition_all" and order != sorted(order):
            print("MISMATCH composition_all: not by earlier layer, later layer, kind, from, to")
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
    if fold_err is not None:
        if fold_err > 1e-12:
            print("MISMATCH the folded LayerNorms change the logits by %.3g" % fold_err)
            bad += 1
        print("circuits_torch: LayerNorm folded; the folded model's logits within %.3g of the model's" % fold_err)
    print("circuits_torch: %d heads, %d composition scores, %d neuron-logit maps, worst difference %.3g (tol %g): %s"
          % (len(heads), len(comp), len(got_mlp), worst, tol, "MISMATCH" if bad else "ok"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
