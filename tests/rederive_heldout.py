#!/usr/bin/env python3
"""rederive_heldout.py - re-derives what `qkv eval` reports from docs/model.md alone.

Given a directory written by `qkv train --out DIR` and the JSON that `qkv eval --model DIR
--json` printed, this script rebuilds everything from the model file and the documentation,
reading no qkv source: the generator (splitmix64 seeding, xoshiro256**, the unbiased draw
below n), the held-out set (the seed XOR its constant, each sequence drawn and redrawn until
it falls in the held-out split, lookup's order of draws), the forward pass in float64 numpy
from the file's weights, and the held-out loss, accuracy and attention mass. It also checks
that the attention maps show held-out sequence 0.

It must match exactly: the count of correct positions and of positions with a target (hence
the accuracy), and the best head; the loss and the attention mass to the 6 decimals printed.

usage: rederive_heldout.py DIR EVAL_JSON
Exit status: 0 all match, 1 a mismatch, 2 a file could not be read.
"""
import json
import math
import os
import struct
import sys

import numpy as np

M64 = (1 << 64) - 1
HELDOUT_SEED_XOR = 0x4E1D000700000007
HELDOUT_SEQUENCES = 512


def die(msg):
    print("rederive_heldout: error: %s" % msg, file=sys.stderr)
    sys.exit(2)


# ---- the generator (docs/model.md, "Random numbers") ----
class Rng:
    def __init__(self, seed):
        x = seed & M64
        self.s = []
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & M64
            z = x
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
            self.s.append(z ^ (z >> 31))

    def u64(self):
        s = self.s
        rotl = lambda x, k: ((x << k) | (x >> (64 - k))) & M64
        result = (rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return result

    def below(self, n):
        limit = M64 - M64 % n
        while True:
            x = self.u64()
            if x < limit:
                return x % n


# ---- the tasks and the held-out split (docs/model.md, "The tasks") ----
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


def draw_tokens(task, T, V, rng):
    if task != "lookup":
        return [rng.below(V) for _ in range(T)]
    n_keys = T - 1
    n_values = (V - n_keys) // n_keys
    keys = list(range(n_keys))
    for i in range(n_keys - 1, 0, -1):  # Fisher-Yates, from the last position down
        j = rng.below(i + 1)
        keys[i], keys[j] = keys[j], keys[i]
    x = [keys[i] * n_values + rng.below(n_values) for i in range(T - 1)]
    x.append(n_keys * n_values + rng.below(n_keys))
    return x


def targets_and_ideal(task, T, V, x):
    ideal = np.zeros((T, T))
    if task == "copy":
        y = list(x)
        ideal[np.arange(T), np.arange(T)] = 1
    elif task == "reverse":
        y = x[::-1]
        ideal[np.arange(T), T - 1 - np.arange(T)] = 1
    elif task == "shift":
        y = [-1] + x[:-1]
        ideal[np.arange(1, T), np.arange(T - 1)] = 1
    elif task == "max":
        m = max(x)
        y = [m] * T
        ideal[:, [j for j in range(T) if x[j] == m]] = 1
    elif task == "lookup":
        n_keys = T - 1
        n_values = (V - n_keys) // n_keys
        key = x[T - 1] - n_keys * n_values
        y = [-1] * T
        for j in range(T - 1):
            if x[j] // n_values == key:
                y[T - 1] = x[j] % n_values
                ideal[T - 1, j] = 1
    else:
        die("unknown task %r" % task)
    return y, ideal


def heldout_set(task, T, V, seed):
    rng = Rng(seed ^ HELDOUT_SEED_XOR)
    seqs = []
    for _ in range(HELDOUT_SEQUENCES):
        while True:
            x = draw_tokens(task, T, V, rng)
            if is_heldout(x):
                break
        seqs.append(x)
    return seqs


# ---- the model file and the forward pass (docs/model.md) ----
def load_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    types = {"F32": "<f4", "F64": "<f8", "I32": "<i4"}
    out = {}
    for name, d in header.items():
        b, e = d["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtype=types[d["dtype"]]).reshape(d["shape"])
    return out, meta


def forward(p, meta, tokens):
    """tokens (B, T) -> logits (B, T, V) and layer 0's weights A (B, H, T, T), in float64."""
    T, C, H, L = int(meta["seq_len"]), int(meta["d_model"]), int(meta["heads"]), int(meta["layers"])
    dk = C // H
    B = tokens.shape[0]
    w = {k: v.astype(np.float64) for k, v in p.items()}
    x = w["tok_emb"][tokens] + w["pos_emb"]
    mask = np.zeros((T, T))
    if meta["causal"] == "true":
        mask[np.triu_indices(T, 1)] = -np.inf
    first = None
    for l in range(L):
        def heads(name):
            return (x @ w["attn.%d.%s" % (l, name)]).reshape(B, T, H, dk).transpose(0, 2, 1, 3)
        q, k, v = heads("w_q"), heads("w_k"), heads("w_v")
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dk) + mask
        s = s - s.max(axis=-1, keepdims=True)
        a = np.exp(s)
        a /= a.sum(axis=-1, keepdims=True)
        if first is None:
            first = a
        y = (a @ v).transpose(0, 2, 1, 3).reshape(B, T, C) @ w["attn.%d.w_o" % l]
        x = x + y if meta["residual"] == "true" else y
    return x @ w["head.w"] + w["head.b"], first


def read_map(path):
    """An attention map file: its column tokens (header) and its (T, T) values."""
    with open(path) as f:
        lines = [ln for ln in f if not ln.startswith("#")]
    cols = lines[0].split()[1:]
    rows = [[float(v) for v in ln.split()[1:]] for ln in lines[1:]]
    return cols, np.array(rows)


def label(task, T, V, t):
    if task != "lookup":
        return str(t)
    n_keys = T - 1
    n_values = (V - n_keys) // n_keys
    if t >= n_keys * n_values:
        return "?k%d" % (t - n_keys * n_values)
    return "k%d:v%d" % (t // n_values, t % n_values)


def main():
    if len(sys.argv) != 3:
        die("usage: rederive_heldout.py DIR EVAL_JSON")
    d, js = sys.argv[1], sys.argv[2]
    try:
        p, meta = load_safetensors(os.path.join(d, "model.safetensors"))
        with open(js) as f:
            got = json.load(f)
    except (OSError, ValueError, KeyError) as e:
        die(str(e))
    task, T, V, seed = meta["task"], int(meta["seq_len"]), int(meta["vocab"]), int(meta["seed"])
    seqs = heldout_set(task, T, V, seed)
    tokens = np.array(seqs, dtype=np.int64)
    logits, attn = forward(p, meta, tokens)
    correct = counted = 0
    loss = 0.0
    H = int(meta["heads"])
    mass = np.zeros(H)
    rows = 0
    for b, x in enumerate(seqs):
        y, ideal = targets_and_ideal(task, T, V, x)
        for i in range(T):
            if y[i] < 0:
                continue
            z = logits[b, i]
            lse = z.max() + math.log(np.exp(z - z.max()).sum())
            loss += lse - z[y[i]]
            correct += int(np.argmax(z)) == y[i]  # a tie goes to the lowest index
            counted += 1
            rows += 1
            mass += (attn[b, :, i, :] * ideal[i]).sum(axis=-1)
    mass /= max(rows, 1)
    best = int(np.argmax(mass))
    mine = {"heldout_correct": correct, "heldout_targets": counted,
            "heldout_accuracy": correct / counted if counted else 0.0,
            "heldout_loss": loss / counted if counted else 0.0,
            "attention_mass": float(mass[best]), "best_head": best + 1}
    failures = []
    for k in ("heldout_correct", "heldout_targets", "best_head"):
        if mine[k] != got[k]:
            failures.append("%s: qkv %r, re-derived %r" % (k, got[k], mine[k]))
    for k in ("heldout_accuracy", "heldout_loss", "attention_mass"):
        if round(mine[k], 6) != round(got[k], 6) and abs(mine[k] - got[k]) > 1.5e-6:
            failures.append("%s: qkv %.6f, re-derived %.9f" % (k, got[k], mine[k]))
    # the maps show held-out sequence 0: its tokens head the columns, its weights fill them
    mp = os.path.join(d, "attention", "layer1_head1.dat")
    if os.path.exists(mp):
        cols, a = read_map(mp)
        if cols != ["%d:%s" % (i, label(task, T, V, t)) for i, t in enumerate(seqs[0])]:
            failures.append("attention/layer1_head1.dat does not show held-out sequence 0")
        elif np.abs(a - attn[0, 0]).max() > 1e-5:
            failures.append("attention/layer1_head1.dat: weights differ by %.2e"
                            % np.abs(a - attn[0, 0]).max())
    else:
        failures.append("%s is missing" % mp)
    print("rederive_heldout: %s (%s, %s): re-derived %d/%d correct, loss %.6f, mass %.6f "
          "(head %d); qkv eval: %d/%d, loss %.6f, mass %.6f (head %d)" % (
              d, task, meta.get("dtype", "f32"), correct, counted, mine["heldout_loss"],
              mine["attention_mass"], best + 1, got["heldout_correct"], got["heldout_targets"],
              got["heldout_loss"], got["attention_mass"], got["best_head"]))
    for f in failures:
        print("rederive_heldout: mismatch: %s" % f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
