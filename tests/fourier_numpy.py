#!/usr/bin/env python3
"""fourier_numpy.py - the Fourier measures of a modular model recomputed in numpy.

Given a model directory written by `qkv train --task modular --out DIR` and the JSON that
`qkv fourier DIR --json` printed, this script recomputes every number of that JSON from the
model file and docs/grokking.md alone, by another route than qkv's: the forward pass over
every pair in float64 numpy, and each transform with numpy's FFT (np.fft) instead of the real
basis of Z/P that qkv uses. With --metrics, the last row of DIR/metrics.jsonl (the progress
measures training tracked at the saved step) is checked against the same numbers.

  embedding and neuron-logit map: the FFT over the numbers' axis; a frequency's norm is
      sqrt(|X[k]|^2 + |X[P-k]|^2) (one term for k = 0 and the Nyquist k = P/2), orthonormal
  neurons: the 2-D FFT of each neuron's activation at = over (a, b); frequency k's terms are
      the coefficients at indices {0, k, P-k} x {0, k, P-k} but (0, 0)
  logit share: the 3-D FFT of the logits (a, b, c), each pair's mean over c removed; the
      direction of cos and sin of w(a + b - c) is the coefficient at (k, k, -k) (sub: (k, -k, -k))
  restricted and excluded losses: the 2-D FFT over (a, b) of each output's logits; the key
      part is the coefficients at (k, k) and (-k, -k) (sub: (k, -k), (-k, k))

Every number must agree to 1e-6 relative (1e-9 absolute near 0); each neuron's cluster must be
its frequency of the largest share (either, where two are within 1e-6).

usage: fourier_numpy.py DIR FOURIER_JSON [--metrics]
       fourier_numpy.py --plant DIR OUT_DIR K1,K2,...   (a copy of DIR's model whose embedding
                                                         carries those frequencies strongly)
Exit status: 0 all agree, 1 a number differs, 2 a file could not be read.
"""
import json
import math
import os
import shutil
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rederive_heldout import load_safetensors, modular_split  # noqa: E402  (docs/model.md's)

TOL = 1e-6
KEY_RATIO = 4.0
KEY_SHARE_OF_TOP = 0.1
CONSTANT_NEURON = 1e-12


def die(msg):
    print("fourier_numpy: error: %s" % msg, file=sys.stderr)
    sys.exit(2)


def freq_norms(X, P):
    """X (P, ...) transformed over axis 0 (orthonormal FFT): each frequency's norm."""
    Z = np.fft.fft(X.reshape(P, -1), axis=0, norm="ortho")
    e = (np.abs(Z) ** 2).sum(axis=1)
    out = [e[0]]
    for k in range(1, P // 2 + 1):
        out.append(e[k] if 2 * k == P else e[k] + e[P - k])
    return np.sqrt(np.array(out))


def gini(x):
    x = np.asarray(x, dtype=np.float64)
    return np.abs(x[:, None] - x[None, :]).sum() / (2 * len(x) * x.sum())


def key_frequencies(norms):
    e = norms[1:] ** 2
    med = np.median(e)
    return [k for k in range(1, len(norms))
            if e[k - 1] > 0 and e[k - 1] >= KEY_RATIO * med and e[k - 1] >= KEY_SHARE_OF_TOP * e.max()]


def forward(w, meta, tokens):
    """tokens (B, 3) -> the logits at = (B, V) and each layer's MLP activation there (L, B, N)."""
    C, H, L = int(meta["d_model"]), int(meta["heads"]), int(meta["layers"])
    dk = C // H
    B, T = tokens.shape
    x = w["tok_emb"][tokens] + w["pos_emb"]
    acts = []
    for l in range(L):
        def heads(name):
            return (x @ w["attn.%d.%s" % (l, name)]).reshape(B, T, H, dk).transpose(0, 2, 1, 3)
        q, k, v = heads("w_q"), heads("w_k"), heads("w_v")
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dk)
        if meta["causal"] == "true":
            s = s + np.triu(np.full((T, T), -np.inf), 1)
        s = s - s.max(axis=-1, keepdims=True)
        a = np.exp(s)
        a /= a.sum(axis=-1, keepdims=True)
        y = (a @ v).transpose(0, 2, 1, 3).reshape(B, T, C) @ w["attn.%d.w_o" % l]
        x = x + y if meta["residual"] == "true" else y
        if int(meta.get("mlp", "0")):
            h = x @ w["mlp.%d.w_in" % l] + w["mlp.%d.b_in" % l]
            if meta.get("act", "relu") != "relu":
                die("the recomputation runs relu MLPs only")
            h = np.maximum(h, 0)
            acts.append(h[:, -1, :])
            x = x + h @ w["mlp.%d.w_out" % l] + w["mlp.%d.b_out" % l]
    return (x @ w["head.w"] + w["head.b"])[:, -1, :], np.array(acts)


def nll(logits, targets):
    z = logits - logits.max(axis=1, keepdims=True)
    return np.log(np.exp(z).sum(axis=1)) - z[np.arange(len(targets)), targets]


def measures(d):
    p, meta = load_safetensors(os.path.join(d, "model.safetensors"))
    if meta["task"] != "modular":
        die("%s is not a modular model" % d)
    if meta.get("norm", "none") != "none":
        die("the recomputation has no LayerNorm")
    w = {k: v.astype(np.float64) for k, v in p.items()}
    V = int(meta["vocab"])
    P, op = V - 1, meta["op"]
    F = P // 2
    n_train = int(math.floor(float(meta["train_frac"]) * P * P))
    trains = np.zeros(P * P, dtype=bool)
    trains[modular_split(P, n_train, int(meta["data_seed"]))[:n_train]] = True
    a, b = np.divmod(np.arange(P * P), P)
    target = {"add": a + b, "sub": a - b, "mul": a * b}[op] % P
    out = {"modulus": P, "op": op, "top_frequency": F}

    # the weights: the numbers' embeddings, the neuron-logit map over the number outputs
    out["embed_norms"] = freq_norms(w["tok_emb"][:P], P)
    out["key_frequencies"] = keys = key_frequencies(out["embed_norms"])
    out["gini_embed"] = gini(out["embed_norms"][1:])
    L, N = int(meta["layers"]), int(meta.get("mlp", "0"))
    if N:
        maps = [(w["mlp.%d.w_out" % l] @ w["head.w"])[:, :P] for l in range(L)]  # (N, P) each
        out["neuron_logit_norms"] = freq_norms(np.concatenate(maps, axis=0).T, P)
        out["gini_neuron_logits"] = gini(out["neuron_logit_norms"][1:])
    else:
        out["neuron_logit_norms"] = out["gini_neuron_logits"] = None
    out["sum_squared_weights"] = sum(float((v ** 2).sum()) for k, v in w.items()
                                     if not k.startswith("adam.") and not k.startswith("optim."))

    # every pair's logits at = and its neurons, in the order a*P + b
    tokens = np.stack([a, b, np.full(P * P, P)], axis=1)
    logits, acts = forward(w, meta, tokens)
    loss = nll(logits, target)
    right = logits.argmax(axis=1) == target
    out["train_loss"], out["train_acc"] = loss[trains].mean(), right[trains].mean()
    out["test_loss"], out["test_acc"] = loss[~trains].mean(), right[~trains].mean()

    # neurons: the 2-D FFT of each one's activation over (a, b)
    clusters, shares, matrices = [], [], []
    for l in range(L if N else 0):
        f = acts[l].reshape(P, P, N)
        G = np.abs(np.fft.fft2(f, axes=(0, 1), norm="ortho")) ** 2  # (P, P, N)
        total = G.sum(axis=(0, 1)) - G[0, 0]
        share = np.zeros((F, N))
        for k in range(1, F + 1):
            idx = sorted({0, k, P - k})
            share[k - 1] = G[np.ix_(idx, idx)].sum(axis=(0, 1)) - G[0, 0]
        share /= np.where(total > 0, total, 1)
        alive = total > CONSTANT_NEURON * (f ** 2).sum(axis=(0, 1))
        clusters.append(np.where(alive, share.argmax(axis=0) + 1, 0))
        shares.append(np.where(alive, share.max(axis=0), np.nan))
        matrices.append(share)
    out["clusters"], out["shares"], out["share_matrix"] = clusters, shares, matrices

    if op == "mul":
        out["restricted_loss"] = out["restricted_acc"] = None
        out["excluded_loss"] = out["logit_share"] = None
        out["key_logit_shares"] = None
        return out
    sg = 1 if op == "add" else -1
    Lg = logits[:, :P].reshape(P, P, P)  # (a, b, c)
    # the share along cos and sin of w(a + sg b - c): the 3-D FFT at (k, sg k, -k)
    Lc = Lg - Lg.mean(axis=2, keepdims=True)
    Z = np.fft.fftn(Lc)
    shares_k = []
    for k in keys:
        z = Z[k, (sg * k) % P, (-k) % P]
        e = abs(z) ** 2 / P ** 3 if 2 * k == P else 2 * abs(z) ** 2 / P ** 3
        shares_k.append(e / (Lc ** 2).sum())
    out["key_logit_shares"], out["logit_share"] = shares_k, float(sum(shares_k))
    # the key part of each output's logits over (a, b): the 2-D FFT at (k, sg k) and (-k, -sg k)
    G = np.fft.fft2(Lg, axes=(0, 1))
    keep = np.zeros_like(G)
    for k in keys:
        for i, j in ((k, sg * k), (-k, -sg * k)):
            keep[i % P, j % P] = G[i % P, j % P]
    part = np.real(np.fft.ifft2(keep, axes=(0, 1))).reshape(P * P, P)
    restricted = Lg.mean(axis=(0, 1))[None, :] + part
    excluded = logits[:, :P] - part
    out["restricted_loss"] = nll(restricted[~trains], target[~trains]).mean()
    out["restricted_acc"] = (restricted[~trains].argmax(axis=1) == target[~trains]).mean()
    out["excluded_loss"] = nll(excluded[trains], target[trains]).mean()
    return out


failures = 0
largest = 0.0  # the largest relative difference seen


def check(name, got, want):
    global failures
    if want is None or (isinstance(want, float) and math.isnan(want)):
        if got is not None:
            print("FAIL: %s: qkv %r, numpy none" % (name, got))
            failures += 1
        return
    if got is None:
        print("FAIL: %s: qkv none, numpy %r" % (name, want))
        failures += 1
        return
    global largest
    if want != 0:
        largest = max(largest, abs(got - want) / abs(want))
    if abs(got - want) > TOL * abs(want) + 1e-9:
        print("FAIL: %s: qkv %.12g, numpy %.12g" % (name, got, want))
        failures += 1


def check_list(name, got, want):
    global failures
    if want is None:
        if got is not None:
            print("FAIL: %s: qkv %r, numpy none" % (name, got))
            failures += 1
        return
    if got is None or len(got) != len(want):
        print("FAIL: %s: qkv %r, numpy %r" % (name, got, list(want)))
        failures += 1
        return
    for i, (g, w_) in enumerate(zip(got, want)):
        check("%s[%d]" % (name, i), g, None if w_ is None else float(w_))


def plant(src, dst, freqs):
    """dst/model.safetensors: src's with frequencies `freqs` added to the numbers' embeddings
    (cos and sin along two random directions each, 3 times the embedding's norm): a model
    whose key frequencies are known."""
    path = os.path.join(src, "model.safetensors")
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header["__metadata__"]
    P, C = int(meta["vocab"]) - 1, int(meta["d_model"])
    d = header["tok_emb"]
    dt = {"F32": "<f4", "F64": "<f8"}[d["dtype"]]
    lo, hi = d["data_offsets"]
    body = bytearray(raw[8 + n:])
    E = np.frombuffer(bytes(body[lo:hi]), dtype=dt).reshape(d["shape"]).astype(np.float64).copy()
    rng = np.random.default_rng(12345)
    x = np.arange(P)
    scale = 3 * np.linalg.norm(E[:P])
    for k in freqs:
        u, v = rng.standard_normal(C), rng.standard_normal(C)
        E[:P] += scale / len(freqs) * (np.outer(np.cos(2 * np.pi * k * x / P), u / np.linalg.norm(u)) +
                                       np.outer(np.sin(2 * np.pi * k * x / P), v / np.linalg.norm(v)))
    body[lo:hi] = E.astype(dt).tobytes()
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(dst, "model.safetensors"), "wb") as f:
        f.write(raw[:8 + n] + bytes(body))


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--plant":
        plant(sys.argv[2], sys.argv[3], [int(k) for k in sys.argv[4].split(",")])
        return 0
    if len(sys.argv) not in (3, 4) or (len(sys.argv) == 4 and sys.argv[3] != "--metrics"):
        die("usage: fourier_numpy.py DIR FOURIER_JSON [--metrics]")
    d = sys.argv[1]
    try:
        got = json.load(open(sys.argv[2]))
        want = measures(d)
        rows = [json.loads(ln) for ln in open(os.path.join(d, "metrics.jsonl"))] \
            if len(sys.argv) == 4 else []
    except (OSError, ValueError, KeyError) as e:
        die(str(e))
    for key in ("modulus", "op", "top_frequency"):
        if got[key] != want[key]:
            print("FAIL: %s: qkv %r, numpy %r" % (key, got[key], want[key]))
            failures_add()
    if got["key_frequencies"] != want["key_frequencies"]:
        print("FAIL: key_frequencies: qkv %r, numpy %r" % (got["key_frequencies"], want["key_frequencies"]))
        failures_add()
    for key in ("embed_norms", "neuron_logit_norms", "key_logit_shares"):
        check_list(key, got[key], want[key])
    for key in ("gini_embed", "gini_neuron_logits", "sum_squared_weights", "train_loss", "train_acc",
                "test_loss", "test_acc", "restricted_loss", "restricted_acc", "excluded_loss",
                "logit_share"):
        check(key, got[key], None if want[key] is None else float(want[key]))
    if len(got["mlp"]) != len(want["clusters"]):
        print("FAIL: mlp: qkv %d layers, numpy %d" % (len(got["mlp"]), len(want["clusters"])))
        failures_add()
    for l, layer in enumerate(got["mlp"][:len(want["clusters"])]):
        # a neuron's cluster: its frequency of the largest share (a tie, within TOL: either)
        m, c = want["share_matrix"][l], want["clusters"][l]
        bad = [u for u, g in enumerate(layer["cluster"])
               if g != c[u] and not (c[u] > 0 and 0 < g <= m.shape[0] and
                                     m[g - 1, u] >= m[c[u] - 1, u] - TOL)]
        if len(layer["cluster"]) != len(c) or bad:
            print("FAIL: mlp %d: the clusters of neurons %s differ" % (l + 1, bad[:10]))
            failures_add()
        check_list("mlp %d share" % (l + 1), layer["share"],
                   [None if math.isnan(s) else s for s in want["shares"][l]])
    if rows:  # the progress measures training tracked at the saved step
        last = rows[-1]
        for key, mine in (("train_set_loss", "train_loss"), ("train_set_acc", "train_acc"),
                          ("heldout_loss", "test_loss"), ("heldout_acc", "test_acc"),
                          ("sum_squared_weights", None), ("restricted_loss", None), ("restricted_acc", None),
                          ("excluded_loss", None), ("gini_embed", None),
                          ("gini_neuron_logits", None), ("logit_share", None)):
            v = want[mine or key]
            check("metrics.jsonl " + key, last.get(key), None if v is None else float(v))
        check_list("metrics.jsonl embed_norms", last.get("embed_norms"), want["embed_norms"])
        if last.get("key_frequencies") != want["key_frequencies"] or \
                last.get("key_count") != len(want["key_frequencies"]):
            print("FAIL: metrics.jsonl key_frequencies: %r (%r), numpy %r" %
                  (last.get("key_frequencies"), last.get("key_count"), want["key_frequencies"]))
            failures_add()
    if failures:
        return 1
    print("P = %d %s: keys %s, logit share %s, restricted %s, excluded %s, %d neurons: all agree "
          "to %g (the largest relative difference %.1e)"
          % (want["modulus"], want["op"], want["key_frequencies"], want["logit_share"],
             want["restricted_loss"], want["excluded_loss"],
             sum(len(c) for c in want["clusters"]), TOL, largest))
    return 0


def failures_add():
    global failures
    failures += 1


if __name__ == "__main__":
    sys.exit(main())
