#!/usr/bin/env python3
"""model_torch.py - rebuild a qkv model in PyTorch from its model.safetensors alone.

Reads the file written by `qkv train --out DIR` (a small safetensors reader: struct + json +
numpy; Python's `safetensors` package is not needed), rebuilds the forward pass exactly as
docs/model.md writes it, and, given a file written by `qkv grads --model DIR --out G`, runs
PyTorch on the same batch and compares logits, loss and every parameter gradient with qkv's.
Every model qkv trains: attention layers, the residual stream, the causal and padding masks,
encoder-decoders (translate, data files: dec_pos_emb, keys and values from the embedded
inputs), and transformer blocks: an MLP after each attention layer (`--mlp N`, biases,
relu / gelu (erf) / gelu-tanh) and pre-LayerNorms (`--norm layernorm`: before each attention
and each MLP, and a final one before the head; F.layer_norm, eps 1e-5). An encoder-decoder's
keys and values read the embedded inputs, never normalized.

With --train, a run directory written by `qkv train --dtype f64 --eval-every 1 --out DIR`
(a built-in task) is trained again in PyTorch float64 from nothing but its seed and the
documented rules: the initial weights (the weights generator, model_params' order), every
training batch (the data generator, held-out sequences skipped), the loss, the gradient-norm
clip, the learning-rate schedule and the optimizer (sgd, momentum, adam, weight decay). Every
step's training-batch loss must match metrics.jsonl's `loss` (written exactly), the final
weights the model file's, both to 1e-9 relative, and the data generator's state `data_rng`
exactly. (Measured: 1e-15 to 2e-14 over 100 steps, every optimizer.)

Several models can be given, each with its own --grads (or all with --train): they are
checked in turn in one Python process, and the exit status is the worst.

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

A model with an MLP or LayerNorm is held to tighter logits: f32 to 1e-6 of the largest logit
(PyTorch in float64; measured up to 3.3e-7), f64 logits and loss to 1e-12 (measured about
1e-15); its gradients, the new parameters' included, keep the rules above.

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
# Models with an MLP or LayerNorm (transformer blocks) are held to tighter logits: f32 to 1e-6
# of the largest logit, f64 logits and loss to 1e-12 (measured: f32 at most 3.3e-7, f64 below
# 1e-15 on the models of tests/model_torch_test.sh). Their gradients keep the rules above: the
# saturated-attention caveat below applies to them as to any attention model.
BLOCKS_LOGITS_RTOL = 1e-6
BLOCKS_F64_RTOL = 1e-12

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
ACTS = ("relu", "gelu", "gelu-tanh")
NORMS = ("none", "layernorm")
LN_EPS = 1e-5  # F.layer_norm's default: biased variance, eps inside the square root


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
            # absent at their defaults: no MLP, relu, no LayerNorm
            self.mlp = int(meta.get("mlp", "0"))
            self.act = meta.get("act", "relu")
            self.norm = meta.get("norm", "none")
            # encoder-decoder: a data file's model writes target_len; translate's is T/2
            self.To = int(meta.get("target_len", self.T // 2 if self.task == "translate" else 0))
        except (KeyError, ValueError) as e:
            die("%s: metadata: %s" % (path, e))
        if self.act not in ACTS or self.norm not in NORMS or self.mlp < 0:
            die("%s: metadata: mlp %r, act %r, norm %r" % (path, self.mlp, self.act, self.norm))
        if (self.mlp or self.norm != "none") and not self.residual:
            die("%s: an MLP or a LayerNorm without the residual stream" % path)
        C, V, T, N = self.C, self.V, self.T, self.mlp
        shapes = {"tok_emb": (V, C), "pos_emb": (T, C), "head.w": (C, V), "head.b": (V,)}
        for l in range(self.L):
            for w in ("w_q", "w_k", "w_v", "w_o"):
                shapes["attn.%d.%s" % (l, w)] = (C, C)
        if self.To:
            shapes["dec_pos_emb"] = (self.To, C)
        for l in range(self.L if N else 0):
            shapes.update({"mlp.%d.w_in" % l: (C, N), "mlp.%d.b_in" % l: (N,),
                           "mlp.%d.w_out" % l: (N, C), "mlp.%d.b_out" % l: (C,)})
        if self.norm == "layernorm":
            for l in range(self.L):
                shapes["attn.%d.ln.gain" % l] = shapes["attn.%d.ln.bias" % l] = (C,)
                if N:
                    shapes["mlp.%d.ln.gain" % l] = shapes["mlp.%d.ln.bias" % l] = (C,)
            shapes["ln_final.gain"] = shapes["ln_final.bias"] = (C,)
        self.params = {}
        for name, shape in shapes.items():
            t = tensors.get(name)
            if t is None or tuple(t.shape) != shape or t.dtype not in (torch.float32, torch.float64):
                die("%s: tensor %s should be F32 or F64 %s, is %s" % (
                    path, name, shape, None if t is None else (t.dtype, tuple(t.shape))))
            self.params[name] = t
        self.names = list(shapes)
        extra = sorted(k for k in tensors if not k.startswith("optim.") and k not in shapes)
        if extra:
            die("%s: tensors the metadata does not account for: %s" % (path, ", ".join(extra)))

    def describe(self):
        s = "task %s, T %d, V %d, d_model %d, heads %d, layers %d, residual %s, causal %s" % (
            self.task, self.T, self.V, self.C, self.H, self.L, self.residual, self.causal)
        if self.mlp:
            s += ", mlp %d %s" % (self.mlp, self.act)
        if self.norm != "none":
            s += ", norm %s" % self.norm
        if self.To:
            s += ", encoder-decoder To %d" % self.To
        return s

    def mask(self, dtype, lengths=None):
        """M: (Tq, T), or (B, 1, Tq, T) with a padding mask; -inf where a key is hidden."""
        T = self.T
        Tq = self.To or T
        m = torch.zeros(Tq, T, dtype=dtype)
        if self.causal:  # query i sees keys j <= i + T - Tq (aligned at the end)
            m = m.masked_fill(torch.ones(Tq, T, dtype=torch.bool).triu(1 + T - Tq), float("-inf"))
        if lengths is not None:  # keys at and after an example's length are padding
            pad = torch.arange(T).unsqueeze(0) >= lengths.long().unsqueeze(1)  # (B, T)
            m = m.unsqueeze(0).unsqueeze(0).expand(len(lengths), 1, Tq, T)
            m = m.masked_fill(pad[:, None, None, :], float("-inf"))
        return m

    def activation(self, x):
        if self.act == "relu":
            return F.relu(x)
        return F.gelu(x, approximate="tanh" if self.act == "gelu-tanh" else "none")

    def forward(self, p, tokens, lengths=None):
        """tokens (B, T) int64 -> logits (B, Tq, V); p maps names to tensors (y = x @ W)."""
        B, T, C, H = tokens.shape[0], self.T, self.C, self.H
        dk = C // H
        x = p["tok_emb"][tokens] + p["pos_emb"]                          # (B, T, C)
        mask = self.mask(x.dtype, lengths)
        # the stream: x itself, or an encoder-decoder's decoder positions (B, To, C)
        d = p["dec_pos_emb"].expand(B, self.To, C) if self.To else x
        Tq = d.shape[1]

        def norm(t, name):  # pre-LayerNorm over the model's width, or nothing
            if self.norm == "none":
                return t
            return F.layer_norm(t, (C,), p[name + ".gain"], p[name + ".bias"], eps=LN_EPS)

        for l in range(self.L):
            def heads(src, n, w):  # (B, n, C) -> (B, H, n, dk): head h owns columns h*dk ..
                return (src @ p["attn.%d.%s" % (l, w)]).view(B, n, H, dk).transpose(1, 2)
            a_in = norm(d, "attn.%d.ln" % l)
            kv = x if self.To else a_in  # an encoder-decoder's keys and values: x, not normalized
            q, k, v = heads(a_in, Tq, "w_q"), heads(kv, T, "w_k"), heads(kv, T, "w_v")
            a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dk) + mask, dim=-1)
            y = (a @ v).transpose(1, 2).reshape(B, Tq, C) @ p["attn.%d.w_o" % l]
            d = d + y if self.residual else y
            if self.mlp:
                h = norm(d, "mlp.%d.ln" % l) @ p["mlp.%d.w_in" % l] + p["mlp.%d.b_in" % l]
                d = d + self.activation(h) @ p["mlp.%d.w_out" % l] + p["mlp.%d.b_out" % l]
        d = norm(d, "ln_final")
        return d @ p["head.w"] + p["head.b"]                             # (B, Tq, V)


def cross_entropy(logits, targets):
    """Mean over positions whose target is not -1; 0 if there are none."""
    V = logits.shape[-1]
    y = targets.reshape(-1).long()
    if not bool((y != -1).any()):
        return logits.sum() * 0
    return F.cross_entropy(logits.reshape(-1, V), y, ignore_index=-1)


# ---- the tasks, as docs/model.md writes them ---------------------------------------------------
M64 = (1 << 64) - 1


class Rng:
    """docs/model.md, "Random numbers": splitmix64 seeding, xoshiro256**, below(n), normal()."""

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
        result = ((((s[1] * 5) & M64) << 7 | ((s[1] * 5) & M64) >> 57) & M64) * 9 & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = ((s[3] << 45) | (s[3] >> 19)) & M64
        return result

    def below(self, n):
        limit = M64 - M64 % n
        while True:
            x = self.u64()
            if x < limit:
                return x % n

    def uniform(self):
        return (self.u64() >> 11) * 2.0 ** -53

    def normal(self):  # Marsaglia's polar method; the second value of the pair is dropped
        while True:
            u = 2.0 * self.uniform() - 1.0
            v = 2.0 * self.uniform() - 1.0
            s = u * u + v * v
            if 0.0 < s < 1.0:
                return u * math.sqrt(-2.0 * math.log(s) / s)


def draw_distinct(rng, n, k):
    """k distinct tokens below(n), each drawn again while it equals an earlier one."""
    x = []
    while len(x) < k:
        t = rng.below(n)
        if t not in x:
            x.append(t)
    return x


def draw_tokens(task, T, V, rng):
    """One sequence of a built-in task, its draws in the documented order."""
    if task == "induction":
        lo = max(2, T // 4)
        n = lo + rng.below(T // 2 - lo + 1)
        seg = draw_distinct(rng, V, n)
        return [seg[i % n] for i in range(T)]
    if task == "recall":
        P, n_keys = T // 3, V // 2
        keys = draw_distinct(rng, n_keys, P)
        x = []
        for k in keys:
            x += [k, n_keys + rng.below(V - n_keys)]
        return x + [keys[rng.below(P)] for _ in range(T - 2 * P)]
    if task == "sort":
        x = draw_distinct(rng, V - 1, (T - 1) // 2)
        return x + [V - 1] + sorted(x)
    if task == "translate":
        return [rng.below(V // 2) for _ in range(T)]
    if task == "lookup":
        n_keys = T - 1
        n_values = (V - n_keys) // n_keys
        keys = list(range(n_keys))
        for i in range(n_keys - 1, 0, -1):  # Fisher-Yates, from the last position down
            j = rng.below(i + 1)
            keys[i], keys[j] = keys[j], keys[i]
        x = [keys[i] * n_values + rng.below(n_values) for i in range(T - 1)]
        return x + [n_keys * n_values + rng.below(n_keys)]
    if task in ("copy", "reverse", "shift", "max"):
        return [rng.below(V) for _ in range(T)]
    if task == "modular":
        die("modular's pairs are not drawn: they come from its split (modular_sets)")
    die("task %r: the tokens of a data file's model cannot be drawn from the seed" % task)


def translate_dict(n):
    rng, d = Rng(0x7472616E736C6174), list(range(n))
    for i in range(n - 1, 0, -1):
        j = rng.below(i + 1)
        d[i], d[j] = d[j], d[i]
    return d


# ---- modular arithmetic (docs/training.md, "Modular arithmetic") ----
MODULAR_SPLIT_XOR = 0x6D6F64756C617200  # "modular\0"


class Modular:
    """The task's pairs from the metadata: P = vocab - 1, op, train_frac, data_seed; the split
    (a partial Fisher-Yates shuffle of the indices a*P + b) and both sets in index order."""

    def __init__(self, meta):
        self.P = int(meta["vocab"]) - 1
        self.op = meta["op"]
        N = self.P * self.P
        self.n_train = int(math.floor(float(meta["train_frac"]) * N))
        order = list(range(N))
        rng = Rng(int(meta["data_seed"]) ^ MODULAR_SPLIT_XOR)
        for i in range(self.n_train):
            j = i + rng.below(N - i)
            order[i], order[j] = order[j], order[i]
        trains = set(order[:self.n_train])
        self.train = [[k // self.P, k % self.P, self.P] for k in range(N) if k in trains]
        self.held = set(k for k in range(N) if k not in trains)

    def target(self, a, b):
        return {"add": a + b, "sub": a - b, "mul": a * b}[self.op] % self.P

    def is_heldout(self, s):
        return s[2] == self.P and s[0] < self.P and s[1] < self.P and s[0] * self.P + s[1] in self.held


MODULAR = {}  # the task of the model being checked: its Modular, by the metadata's values


def task_targets(task, V, s):
    """The targets of one sequence s by the task's rule; -2 where the rule has no answer (a
    sequence the task cannot produce), so that it never matches."""
    T = len(s)
    if task == "copy":
        return list(s)
    if task == "reverse":
        return s[::-1]
    if task == "shift":
        return [-1] + s[:-1]
    if task == "max":
        return [max(s)] * T
    if task == "lookup":
        n_keys = T - 1
        n_values = (V - n_keys) // n_keys
        key = s[T - 1] - n_keys * n_values
        pairs = [t for t in s[:-1] if t // n_values == key]
        return [-1] * (T - 1) + [pairs[0] % n_values if len(pairs) == 1 else -2]
    if task == "induction":
        n = s[1:].index(s[0]) + 1 if s[0] in s[1:] else T
        return [s[i + 1] if n <= i < T - 1 else -1 for i in range(T)]
    if task == "recall":
        P = T // 3
        y = [-1] * T
        for i in range(2 * P, T):
            at = [2 * p + 1 for p in range(P) if s[2 * p] == s[i]]
            y[i] = s[at[0]] if len(at) == 1 else -2
        return y
    if task == "sort":
        n = (T - 1) // 2
        return [s[i + 1] if n <= i < T - 1 else -1 for i in range(T)]
    if task == "translate":
        d = translate_dict(V // 2)
        return [V // 2 + d[s[2 * i + 1]] if s[2 * i + 1] < V // 2 else -2 for i in range(T // 2)]
    if task == "modular":
        m = MODULAR["task"]
        ok = s[2] == m.P and s[0] < m.P and s[1] < m.P
        return [-1, -1, m.target(s[0], s[1]) if ok else -2]
    die("unknown task %r" % task)


def expected_targets(task, V, tokens):
    return [task_targets(task, V, s) for s in tokens.tolist()]


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


def training_batch(task, T, V, rng, batch, full=False):
    """One training batch: each sequence drawn again while it is held out (docs/model.md);
    modular: every training pair in order (full), or training pair below(n_train) each."""
    if task == "modular":
        m = MODULAR["task"]
        xs = list(m.train) if full else [m.train[rng.below(m.n_train)] for _ in range(batch)]
        return xs, [task_targets(task, V, x) for x in xs]
    xs = []
    for _ in range(batch):
        while True:
            x = draw_tokens(task, T, V, rng)
            if not is_heldout(x):
                break
        xs.append(x)
    return xs, [task_targets(task, V, x) for x in xs]


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
    lengths = g.get("lengths")  # a data file's model: each example's input length
    B, To = tokens.shape[0], model.To or model.T
    if tuple(tokens.shape) != (B, model.T) or tuple(targets.shape) != (B, To):
        die("%s: tokens/targets are not (B, %d)/(B, %d)" % (grads_path, model.T, To))
    if lengths is not None and tuple(lengths.shape) != (B,):
        die("%s: lengths is not (B)" % grads_path)
    if gmeta.get("task") != model.task:
        die("%s: task %r, but the model's is %r" % (grads_path, gmeta.get("task"), model.task))
    failures = []
    if int(tokens.min()) < 0 or int(tokens.max()) >= model.V:
        failures.append("tokens outside 0..%d" % (model.V - 1))
    elif model.task != "data" and expected_targets(model.task, model.V, tokens) != targets.tolist():
        failures.append("the targets do not follow from the tokens by the %s rule" % model.task)
    # a data file's examples are held out by their line's bytes, which the batch does not hold
    heldout = MODULAR["task"].is_heldout if model.task == "modular" else is_heldout
    held = sum(heldout(s) for s in tokens.tolist()) if model.task != "data" else 0
    if held:
        failures.append("%d training sequence(s) fall in the held-out split" % held)

    if f64_model_rounded(model, g):
        failures.append("the grads file is F32 but the model is F64")
    p = {n: model.params[n].to(dtype).clone().requires_grad_(True) for n in model.names}
    logits = model.forward(p, tokens, lengths)
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
    if model.mlp or model.norm != "none":
        logits_tol, loss_tol = (BLOCKS_F64_RTOL, BLOCKS_F64_RTOL) if f64 else (BLOCKS_LOGITS_RTOL, LOSS_RTOL)
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


# ---- replaying the training run (--train) --------------------------------------------------------
DATA_SEED_XOR = 0x5EED0DA7A0000001
TRAIN_RTOL = 1e-9


def initial_params(model, meta, dtype):
    """The weights before step 1, drawn from the seed as docs/model.md ("Random numbers") and
    model_params (src/model/model.c) order them: the attention model's rows, then dec_pos_emb,
    then each layer's MLP, then the LayerNorms (gains 1, biases 0, drawing nothing). The
    scheme (metadata `init`, absent: qkv) sets only the standard deviations: qkv's s for the
    embeddings and s/sqrt(fan_in) for the weights, or the paper's s/sqrt(C) for every tensor
    but the head's s/sqrt(V)."""
    rng = Rng(int(meta["seed"]))
    s = float(meta["init_scale"])
    scheme = meta.get("init", "qkv")
    if scheme not in ("qkv", "paper"):
        die("unknown init scheme %r" % scheme)
    C, N, V = model.C, model.mlp, model.V
    sw = s / math.sqrt(C)
    if scheme == "paper":
        se, sh, sn = sw, s / math.sqrt(V), sw
    else:
        se, sh, sn = s, sw, (s / math.sqrt(N) if N else 0.0)

    def std_of(name):
        if name in ("tok_emb", "pos_emb", "dec_pos_emb"):
            return se
        if name == "head.w":
            return sh
        if name.endswith((".w_q", ".w_k", ".w_v", ".w_o", ".w_in")):
            return sw
        if name.endswith(".w_out"):
            return sn
        return None  # zeros, or ones for a LayerNorm's gain

    order = ["tok_emb", "pos_emb"]
    order += ["attn.%d.%s" % (l, w) for l in range(model.L) for w in ("w_q", "w_k", "w_v", "w_o")]
    order += ["head.w", "head.b"] + (["dec_pos_emb"] if model.To else [])
    order += ["mlp.%d.%s" % (l, w) for l in range(model.L if N else 0)
              for w in ("w_in", "b_in", "w_out", "b_out")]
    order += [n for n in model.names if ".ln." in n or n.startswith("ln_final")]
    if sorted(order) != sorted(model.names):
        die("the order of the initial draws does not cover the model's parameters")
    f32 = model.params["tok_emb"].dtype == torch.float32
    p = {}
    for name in order:
        shape, std = tuple(model.params[name].shape), std_of(name)
        if std is None:
            t = torch.full(shape, 1.0 if name.endswith(".gain") else 0.0, dtype=torch.float64)
        else:
            count = int(np.prod(shape))
            t = torch.tensor([std * rng.normal() for _ in range(count)],
                             dtype=torch.float64).reshape(shape)
        if f32:  # an f32 model rounds each drawn value to f32
            t = t.float()
        p[name] = t.to(dtype)
    return p


def schedule_lr(meta, step):
    """trainer_lr: linear warm-up, then cosine decay to 0 over the planned steps, or constant."""
    lr, warmup, steps = float(meta["lr"]), int(meta["warmup"]), int(meta["steps"])
    if warmup > 0 and step <= warmup:
        lr *= step / warmup
    if meta["schedule"] == "cosine" and steps > warmup:
        progress = (step - warmup) / (steps - warmup)
        if progress > 0:
            lr *= 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    return lr


def replay(model, meta, run_dir, dtype):
    """Trains the model again from its seed in PyTorch: the same initial weights, the same
    batches (the data generator), the same loss, clipping, schedule and optimizer
    (docs/model.md), for the run's `step` updates. Returns (results, failures) comparing every
    step's training-batch loss with metrics.jsonl, the final weights with the model file's, and
    the data generator's state with the file's `data_rng`."""
    if model.task == "data":
        die("--train replays the built-in tasks only (a data file's batches need its examples)")
    rows = {}
    jsonl = os.path.join(run_dir, "metrics.jsonl")
    try:
        with open(jsonl) as f:
            for line in f:
                line = line.strip()
                if line:
                    r = json.loads(line)
                    if r.get("step", 0) >= 1 and r.get("loss") is not None:
                        rows[int(r["step"])] = float(r["loss"])
    except (OSError, ValueError) as e:
        die("cannot read %s: %s" % (jsonl, e))
    try:
        steps, batch, clip = int(meta["step"]), int(meta["batch"]), float(meta["clip"])
        wd, optim = float(meta["weight_decay"]), meta["optim"]
        data_rng = meta["data_rng"]
        # absent at their defaults: Adam's betas, the drawn batch
        b1, b2 = float(meta.get("beta1", "0.9")), float(meta.get("beta2", "0.999"))
        full = meta.get("full_batch", "false") == "true"
    except (KeyError, ValueError) as e:
        die("%s: metadata: %s" % (run_dir, e))
    if not rows:
        die("%s has no training loss of a step (train with --eval-every 1 for every step)" % jsonl)
    p = initial_params(model, meta, dtype)
    for t in p.values():
        t.requires_grad_(True)
    state = {n: {} for n in p}
    rng = Rng(int(meta["seed"]) ^ DATA_SEED_XOR)
    T = model.T
    losses = {}
    for step in range(1, steps + 1):
        xs, ys = training_batch(model.task, T, model.V, rng, batch, full)
        tokens, targets = torch.tensor(xs), torch.tensor(ys)
        for t in p.values():
            t.grad = None
        loss = cross_entropy(model.forward(p, tokens), targets)
        loss.backward()
        losses[step] = float(loss)
        with torch.no_grad():  # qkv_optim_step, optim_part.inc
            norm = math.sqrt(sum(float((t.grad.double() ** 2).sum()) for t in p.values()))
            gs = clip / norm if clip > 0 and norm > clip else 1.0
            lr = schedule_lr(meta, step)
            eps = 1e-8
            bias1, bias2 = 1 - b1 ** step, 1 - b2 ** step
            for n, w in p.items():
                g = w.grad * gs
                if optim == "sgd":
                    w -= lr * (g + wd * w)
                elif optim == "momentum":
                    m = state[n]["m"] = 0.9 * state[n].get("m", torch.zeros_like(w)) + g + wd * w
                    w -= lr * m
                elif optim == "adam":
                    m = state[n]["m"] = b1 * state[n].get("m", torch.zeros_like(w)) + (1 - b1) * g
                    v = state[n]["v"] = b2 * state[n].get("v", torch.zeros_like(w)) + (1 - b2) * g * g
                    w -= lr * ((m / bias1) / ((v / bias2).sqrt() + eps) + wd * w)
                else:
                    die("unknown optimizer %r" % optim)
    results, failures = [], []
    worst, worst_step = 0.0, 0
    for step, ql in sorted(rows.items()):
        if step not in losses:
            failures.append("metrics.jsonl has step %d, the run made %d" % (step, steps))
            continue
        tl = losses[step]
        e = abs(ql - tl) / abs(tl) if tl != 0 else abs(ql)
        if e > worst or worst_step == 0:
            worst, worst_step = e, step
        if not e <= TRAIN_RTOL:
            failures.append("step %d loss: qkv %.17g torch %.17g rel %.2e (tol %.0e)" % (
                step, ql, tl, e, TRAIN_RTOL))
    results.append(("losses", worst, worst <= TRAIN_RTOL,
                    "%d of %d steps, max rel %.2e at step %d (tol %.0e); step %d: qkv %.17g" % (
                        len(rows), steps, worst, worst_step, TRAIN_RTOL, steps,
                        rows.get(steps, float("nan")))))
    wworst, wname = 0.0, ""
    for n in model.names:
        a, b = model.params[n].double(), p[n].detach().double()
        scale = float(b.abs().max())
        e = float((a - b).abs().max()) / (scale if scale > 0 else 1.0)
        if e > wworst or not wname:
            wworst, wname = e, n
    results.append(("weights", wworst, wworst <= TRAIN_RTOL,
                    "after step %d: max rel %.2e (%s; tol %.0e)" % (steps, wworst, wname, TRAIN_RTOL)))
    if wworst > TRAIN_RTOL:
        failures.append("the final weights differ: %s rel %.2e" % (wname, wworst))
    ours = "".join("%016x" % w for w in rng.s)
    results.append(("data_rng", 0.0 if ours == data_rng else 1.0, ours == data_rng,
                    "the data generator's state after step %d %s the file's" % (
                        steps, "equals" if ours == data_rng else "differs from")))
    if ours != data_rng:
        failures.append("data_rng: the file's %s, the replay's %s" % (data_rng, ours))
    return results, failures


def check_one(path, grads, args, dtype):
    """One model: its replay (--train), its comparison with a grads file, or (neither) a
    forward pass. Prints its report; returns 0 or 1 (a file that cannot be used exits 2)."""
    if os.path.isdir(path):
        path = os.path.join(path, "model.safetensors")
    tensors, meta = load_safetensors(path)
    model = Model(tensors, meta, path)
    if model.task == "modular":
        try:
            MODULAR["task"] = Modular(meta)
        except (KeyError, ValueError) as e:
            die("%s: metadata: %s" % (path, e))
    summary = "%s: %s" % (path, model.describe())
    if args.train:
        if dtype != torch.float64 or model.params["tok_emb"].dtype != torch.float64:
            die("--train replays f64 runs (qkv train --dtype f64) in float64")
        results, failures = replay(model, meta, os.path.dirname(path) or ".", dtype)
        if args.json:
            print(json.dumps({"model": path, "ok": not failures,
                              "results": {n: {"error": e, "ok": ok, "detail": t}
                                          for n, e, ok, t in results},
                              "failures": failures}))
        else:
            print("model_torch: %s; %s, lr %s, batch %s, seed %s" % (
                summary, meta.get("optim"), meta.get("lr"), meta.get("batch"), meta.get("seed")))
            for name, _, ok, text in results:
                print("  %-18s %s  %s" % (name, "ok  " if ok else "FAIL", text))
        for f in failures:
            print("model_torch: mismatch: %s" % f, file=sys.stderr)
        if not failures and not args.json:
            print("model_torch: PyTorch's replay of the run matches qkv's")
        return 1 if failures else 0
    if not grads:
        tokens = torch.arange(model.T).remainder(model.V).unsqueeze(0)
        with torch.no_grad():
            logits = model.forward({n: t.to(dtype) for n, t in model.params.items()}, tokens)
        print("model_torch: %s; logits %s, finite: %s" % (
            summary, tuple(logits.shape), bool(torch.isfinite(logits).all())))
        return 0
    results, failures, B = compare(model, grads, dtype, sys.stdout)
    if args.json:
        print(json.dumps({"model": path, "grads": grads, "batch": B, "ok": not failures,
                          "results": {n: {"error": e, "ok": ok, "detail": t}
                                      for n, e, ok, t in results},
                          "failures": failures}))
    else:
        print("model_torch: %s" % summary)
        print("model_torch: batch %d from %s, PyTorch in %s" % (B, grads, args.dtype))
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="+",
                    help="model.safetensors, or the directory holding it; several are checked "
                         "in turn (one Python start), each with its own --grads")
    ap.add_argument("--grads", action="append", default=[],
                    help="a file written by `qkv grads` for the model; once per model")
    ap.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                    help="precision of the PyTorch side (default float64)")
    ap.add_argument("--train", action="store_true",
                    help="replay each run in PyTorch from its seed (an f64 run, written with "
                         "--eval-every 1 for every step): every step's training-batch loss "
                         "(metrics.jsonl), the final weights and data_rng, to 1e-9")
    ap.add_argument("--json", action="store_true",
                    help="print each model's results as one JSON object (one line each)")
    args = ap.parse_args()
    if args.train and args.grads:
        die("--train and --grads are separate checks")
    if args.grads and len(args.grads) != len(args.model):
        die("%d models and %d --grads files: give one for each" % (len(args.model), len(args.grads)))
    dtype = torch.float64 if args.dtype == "float64" else torch.float32
    rc = 0
    for i, path in enumerate(args.model):
        rc = max(rc, check_one(path, args.grads[i] if args.grads else None, args, dtype))
    return rc


if __name__ == "__main__":
    sys.exit(main())
