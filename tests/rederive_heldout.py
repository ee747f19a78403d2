#!/usr/bin/env python3
"""rederive_heldout.py - re-derives what `qkv eval` reports from docs/model.md alone.

Given a directory written by `qkv train --out DIR` and the JSON that `qkv eval --model DIR
--json` printed, this script rebuilds everything from the model file and the documentation,
reading no qkv source: the generator (splitmix64 seeding, xoshiro256**, the unbiased draw
below n), the held-out set (the seed XOR its constant, each sequence drawn and redrawn until
it falls in the held-out split, lookup's order of draws; modular's split of its pairs by a
partial Fisher-Yates shuffle from the data seed), the forward pass in float64 numpy
from the file's weights, and the held-out loss, accuracy and attention mass. It also checks
that the attention maps show held-out sequence 0, and each head's attention entropy (and the
induction task's in-context score) in the last row of metrics.csv.

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


def draw_distinct(rng, first, n, k):
    """k distinct tokens first + below(n), each drawn again while it equals an earlier one."""
    x = []
    while len(x) < k:
        t = first + rng.below(n)
        if t not in x:
            x.append(t)
    return x


def draw_tokens(task, T, V, rng):
    if task == "induction":
        lo = max(2, T // 4)
        n = lo + rng.below(T // 2 - lo + 1)
        seg = draw_distinct(rng, 0, V, n)
        return [seg[i % n] for i in range(T)]
    if task == "recall":
        P, n_keys = T // 3, V // 2
        keys = draw_distinct(rng, 0, n_keys, P)
        x = []
        for k in keys:
            x += [k, n_keys + rng.below(V - n_keys)]
        return x + [keys[rng.below(P)] for _ in range(T - 2 * P)]
    if task == "sort":
        n = (T - 1) // 2
        x = draw_distinct(rng, 0, V - 1, n)
        return x + [V - 1] + sorted(x)
    if task == "translate":
        return [rng.below(V // 2) for _ in range(T)]
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


def translate_dict(n):
    """translate's fixed dictionary: a Fisher-Yates shuffle from seed 0x7472616e736c6174."""
    rng, d = Rng(0x7472616E736C6174), list(range(n))
    for i in range(n - 1, 0, -1):
        j = rng.below(i + 1)
        d[i], d[j] = d[j], d[i]
    return d


def targets_and_ideal(task, T, V, x, layer=0, layers=1):
    """The targets and layer `layer`'s ideal pattern (rows: T, or T/2 for translate)."""
    ideal = np.zeros((T, T))
    if task in ("induction", "recall") and layer < layers - 1:
        ideal[np.arange(1, T), np.arange(T - 1)] = 1  # the previous token
        y, _ = targets_and_ideal(task, T, V, x)
        return y, ideal
    if task == "induction":
        n = x[1:].index(x[0]) + 1
        y = [x[i + 1] if n <= i < T - 1 else -1 for i in range(T)]
        for i in range(n, T - 1):
            for j in range(1, i + 1):
                ideal[i, j] = x[j - 1] == x[i]
    elif task == "recall":
        P = T // 3
        y = [-1] * T
        for i in range(2 * P, T):
            at = [2 * p + 1 for p in range(P) if x[2 * p] == x[i]][0]
            y[i] = x[at]
            ideal[i, at] = 1
    elif task == "sort":
        n = (T - 1) // 2
        y = [x[i + 1] if n <= i < T - 1 else -1 for i in range(T)]
        for i in range(n, T - 1):
            for j in range(n):
                ideal[i, j] = x[j] == y[i]
    elif task == "translate":
        d = translate_dict(V // 2)
        y = [V // 2 + d[x[2 * i + 1]] for i in range(T // 2)]
        for i in range(T // 2):
            ideal[i, 2 * i + 1] = 1
    elif task == "copy":
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
    elif task == "modular":  # one target, at =, which reads both numbers
        y = [-1, -1, modular_target(MODULAR_OP, V - 1, x[0], x[1])]
        ideal[2, 0] = ideal[2, 1] = 1
    else:
        die("unknown task %r" % task)
    return y, ideal


MODULAR_OP = "add"  # modular's op: the model's (main sets it from the metadata)


# ---- modular arithmetic (docs/training.md, "Modular arithmetic") ----
MODULAR_SPLIT_XOR = 0x6D6F64756C617200  # "modular\0"


def modular_split(P, n_train, data_seed):
    """The pair indices a*P + b shuffled: for i in 0 .. n_train-1, j = i + below(P*P - i) and
    order[i], order[j] swapped; the first n_train train."""
    N = P * P
    order = list(range(N))
    rng = Rng(data_seed ^ MODULAR_SPLIT_XOR)
    for i in range(n_train):
        j = i + rng.below(N - i)
        order[i], order[j] = order[j], order[i]
    return order


def modular_target(op, P, a, b):
    return {"add": a + b, "sub": a - b, "mul": a * b}[op] % P


def modular_heldout(meta):
    """Every held-out pair a b = in the order of a*P + b (tokens 0..P-1, = is P)."""
    P = int(meta["vocab"]) - 1
    n_train = int(math.floor(float(meta["train_frac"]) * P * P))
    train = set(modular_split(P, n_train, int(meta["data_seed"]))[:n_train])
    return [[k // P, k % P, P] for k in range(P * P) if k not in train]


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


# ---- data files (docs/model.md, "Data files") ----
def fnv1a(b, h=0xCBF29CE484222325):
    for c in b:
        h = ((h ^ c) * 0x100000001B3) & M64
    return h


def fmix64(h):
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & M64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & M64
    return h ^ (h >> 33)


def data_heldout(meta):
    """The held-out examples of a data run: (inputs, targets, input lengths), padded, and
    the vocabulary (id 0 the padding)."""
    vocab = {}

    def examples(path, split):
        out = []
        for raw in open(path, "rb").read().split(b"\n"):
            line = raw[:-1] if raw.endswith(b"\r") else raw
            if not line.strip(b" "):
                continue
            src, dst = line.split(b"\t")
            ids = []
            for side, text in ((0, src), (1, dst)):
                toks = [t for t in text.replace(b"\v", b" ").replace(b"\f", b" ").split(b" ") if t]
                row = []
                for t in toks:
                    if side == 1 and t == b"_":
                        row.append(-1)
                        continue
                    if t not in vocab:
                        vocab[t] = len(vocab) + 1
                    row.append(vocab[t])
                ids.append(row)
            held = split and fmix64(fnv1a(line)) % 8 == 0
            out.append((ids[0], ids[1], held))
        return out

    train = examples(meta["data"], not meta["heldout"])
    held = examples(meta["heldout"], False) if meta["heldout"] else [e for e in train if e[2]]
    T = int(meta["seq_len"])
    To = int(meta["target_len"]) or T
    x = np.array([e[0] + [0] * (T - len(e[0])) for e in held], dtype=np.int64)
    y = [e[1] + [-1] * (To - len(e[1])) for e in held]
    if meta.get("tokens") != " ".join(t.decode() for t in vocab):
        die("the metadata's tokens are not the vocabulary re-derived from %s" % meta["data"])
    return x, y, [len(e[0]) for e in held]


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


def forward(p, meta, tokens, lengths=None):
    """tokens (B, T) -> logits (B, Tq, V) and every layer's weights A (L, B, H, Tq, T), in
    float64. Tq = T, or the decoder positions To of an encoder-decoder (dec_pos_emb)."""
    T, C, H, L = int(meta["seq_len"]), int(meta["d_model"]), int(meta["heads"]), int(meta["layers"])
    dk = C // H
    B = tokens.shape[0]
    w = {k: v.astype(np.float64) for k, v in p.items()}
    x = w["tok_emb"][tokens] + w["pos_emb"]
    d = np.broadcast_to(w["dec_pos_emb"], (B,) + w["dec_pos_emb"].shape) if "dec_pos_emb" in w else x
    Tq = d.shape[1]
    mask = np.zeros((Tq, T))
    if meta["causal"] == "true":
        mask[np.triu_indices(Tq, 1, T)] = -np.inf
    if lengths is not None:  # the padding mask: (B, 1, Tq, T)
        mask = np.broadcast_to(mask, (B, 1, Tq, T)).copy()
        for b, n in enumerate(lengths):
            mask[b, :, :, n:] = -np.inf
    attn = []
    for l in range(L):
        def heads(src, n, name):
            return (src @ w["attn.%d.%s" % (l, name)]).reshape(B, n, H, dk).transpose(0, 2, 1, 3)
        kv = x if "dec_pos_emb" in w else d
        q, k, v = heads(d, Tq, "w_q"), heads(kv, T, "w_k"), heads(kv, T, "w_v")
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dk) + mask
        s = s - s.max(axis=-1, keepdims=True)
        a = np.exp(s)
        a /= a.sum(axis=-1, keepdims=True)
        attn.append(a)
        y = (a @ v).transpose(0, 2, 1, 3).reshape(B, Tq, C) @ w["attn.%d.w_o" % l]
        d = d + y if meta["residual"] == "true" else y
        if int(meta.get("mlp", "0")):  # the block's MLP: d + act(d W_in + b_in) W_out + b_out
            h = d @ w["mlp.%d.w_in" % l] + w["mlp.%d.b_in" % l]
            act = meta.get("act", "relu")
            if act == "relu":
                h = np.maximum(h, 0)
            elif act == "gelu":
                h = h * 0.5 * (1 + np.vectorize(math.erf)(h / math.sqrt(2)))
            else:
                h = 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))
            d = d + h @ w["mlp.%d.w_out" % l] + w["mlp.%d.b_out" % l]
    return d @ w["head.w"] + w["head.b"], attn


def read_map(path):
    """An attention map file: its column tokens (header) and its (T, T) values."""
    with open(path) as f:
        lines = [ln for ln in f if not ln.startswith("#")]
    cols = lines[0].split()[1:]
    rows = [[float(v) for v in ln.split()[1:]] for ln in lines[1:]]
    return cols, np.array(rows)


def label(task, T, V, t):
    if task == "recall":
        return "k%d" % t if t < V // 2 else "v%d" % (t - V // 2)
    if task == "sort" and t == V - 1:
        return "|"
    if task == "modular" and t == V - 1:
        return "="
    if task == "translate":
        return "s%d" % t if t < V // 2 else "w%d" % (t - V // 2)
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
    if task == "data":
        return main_data(d, p, meta, got)
    if meta.get("norm", "none") != "none":
        die("the re-derivation has no LayerNorm")
    if task == "modular":
        global MODULAR_OP
        MODULAR_OP = meta["op"]
        seqs = modular_heldout(meta)
    else:
        seqs = heldout_set(task, T, V, seed)
    tokens = np.array(seqs, dtype=np.int64)
    logits, attn = forward(p, meta, tokens)
    correct = counted = 0
    loss = 0.0
    H, L, Tq = int(meta["heads"]), int(meta["layers"]), logits.shape[1]
    mass = np.zeros((L, H))
    rows = np.zeros(L)
    icl = [0.0, 0, 0.0, 0]  # induction's in-context score: late loss, count, early loss, count
    for b, x in enumerate(seqs):
        y, _ = targets_and_ideal(task, T, V, x)
        n = next((i for i in range(Tq) if y[i] >= 0), Tq)  # induction: where the repeat begins
        for i in range(Tq):
            z = logits[b, i]
            lse = z.max() + math.log(np.exp(z - z.max()).sum())
            if task == "induction" and i + 1 < n:  # early: the first copy but its last token
                icl[2] += lse - z[x[i + 1]]
                icl[3] += 1
            if y[i] < 0:
                continue
            loss += lse - z[y[i]]
            icl[0] += lse - z[y[i]]
            icl[1] += 1
            correct += int(np.argmax(z)) == y[i]  # a tie goes to the lowest index
            counted += 1
        for l in range(L):  # the mass: over the rows whose ideal row is not empty
            _, ideal = targets_and_ideal(task, T, V, x, l, L)
            for i in range(Tq):
                if ideal[i].any():
                    rows[l] += 1
                    mass[l] += (attn[l][b, :, i, :] * ideal[i]).sum(axis=-1)
    mass /= np.maximum(rows, 1)[:, None]
    best_of = [int(np.argmax(mass[l])) for l in range(L)]  # the first on a tie, like qkv
    layer = 0
    for l in range(L):
        if mass[l, best_of[l]] > mass[layer, best_of[layer]]:
            layer = l
    if task in ("induction", "recall"):
        layer = L - 1
    best = best_of[layer]
    mine = {"heldout_correct": correct, "heldout_targets": counted,
            "heldout_accuracy": correct / counted if counted else 0.0,
            "heldout_loss": loss / counted if counted else 0.0,
            "attention_mass": float(mass[layer, best]), "best_head": best + 1,
            "attention_layer": layer + 1}
    failures = []
    for k in ("heldout_correct", "heldout_targets", "best_head", "attention_layer"):
        if mine[k] != got[k]:
            failures.append("%s: qkv %r, re-derived %r" % (k, got[k], mine[k]))
    for k in ("heldout_accuracy", "heldout_loss", "attention_mass"):
        if round(mine[k], 6) != round(got[k], 6) and abs(mine[k] - got[k]) > 1.5e-6:
            failures.append("%s: qkv %.6f, re-derived %.9f" % (k, got[k], mine[k]))
    # metrics.csv's last row (the saved model's evaluation): each head's attention entropy,
    # -sum a log a averaged over every held-out query row, to the 4 decimals printed
    ent = [[float(-(attn[l][:, h] * np.log(np.where(attn[l][:, h] > 0, attn[l][:, h], 1.0))).sum()
                  / (len(seqs) * Tq)) for h in range(H)] for l in range(L)]
    mc = os.path.join(d, "metrics.csv")
    if os.path.exists(mc):
        with open(mc) as f:
            rows_csv = [line.rstrip("\n").split(",") for line in f]
        head, last = rows_csv[0], rows_csv[-1]
        for l in range(L):
            for h in range(min(H, 64)):
                col = "entropy_l%dh%d" % (l + 1, h + 1)
                if col not in head:
                    failures.append("metrics.csv has no column %s" % col)
                    continue
                v = float(last[head.index(col)])
                if abs(v - ent[l][h]) > 1.5e-4:
                    failures.append("metrics.csv %s: qkv %.4f, re-derived %.6f" % (col, v, ent[l][h]))
        # induction's in-context score (docs/explain.md): the late positions' mean loss (the
        # repeat, against its targets) minus the early ones' (the first copy but its last
        # token, against the next token), to the 4 decimals printed
        if task == "induction":
            want = icl[0] / icl[1] - icl[2] / icl[3]
            if "icl_score" not in head:
                failures.append("metrics.csv has no column icl_score")
            elif abs(float(last[head.index("icl_score")]) - want) > 1.5e-4:
                failures.append("metrics.csv icl_score: qkv %s, re-derived %.6f"
                                % (last[head.index("icl_score")], want))
    # the maps show held-out sequence 0: its tokens head the columns, its weights fill them
    mp = os.path.join(d, "attention", "layer1_head1.dat")
    if os.path.exists(mp):
        cols, a = read_map(mp)
        if cols != ["%d:%s" % (i, label(task, T, V, t)) for i, t in enumerate(seqs[0])]:
            failures.append("attention/layer1_head1.dat does not show held-out sequence 0")
        elif np.abs(a - attn[0][0, 0]).max() > 1e-5:
            failures.append("attention/layer1_head1.dat: weights differ by %.2e"
                            % np.abs(a - attn[0][0, 0]).max())
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


def main_data(d, p, meta, got):
    """A data run: the held-out counts and loss (a data file defines no ideal pattern)."""
    x, y, lengths = data_heldout(meta)
    logits, _ = forward(p, meta, x, lengths)
    correct = counted = 0
    loss = 0.0
    for b in range(len(y)):
        for i, t in enumerate(y[b]):
            if t < 0:
                continue
            z = logits[b, i]
            loss += z.max() + math.log(np.exp(z - z.max()).sum()) - z[t]
            correct += int(np.argmax(z)) == t
            counted += 1
    failures = []
    if (correct, counted) != (got["heldout_correct"], got["heldout_targets"]):
        failures.append("counts: qkv %d/%d, re-derived %d/%d" % (
            got["heldout_correct"], got["heldout_targets"], correct, counted))
    if counted and abs(loss / counted - got["heldout_loss"]) > 1.5e-6:
        failures.append("heldout_loss: qkv %.6f, re-derived %.9f" % (got["heldout_loss"], loss / counted))
    print("rederive_heldout: %s (data %s): re-derived %d/%d correct, loss %.6f; qkv eval: %d/%d, "
          "loss %.6f" % (d, os.path.basename(meta["data"]), correct, counted,
                         loss / max(counted, 1), got["heldout_correct"], got["heldout_targets"],
                         got["heldout_loss"]))
    for f in failures:
        print("rederive_heldout: mismatch: %s" % f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
