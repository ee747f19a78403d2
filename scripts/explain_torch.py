#!/usr/bin/env python3
"""explain_torch.py - recompute qkv's ablation, patching, attribution and lens in PyTorch.

Reads a model.safetensors (through scripts/model_torch.py's reader) and the JSON objects that
`qkv ablate --json`, `qkv patch --json`, `qkv attribute --json` and `qkv lens --json` print
(docs/explain.md),
recomputes every number of them in float64 from the model file alone, and compares. The
forward is docs/model.md's, transformer blocks included (`--mlp N`: each layer's MLP after
its attention, F.relu, F.gelu or F.gelu(approximate="tanh"); `--norm layernorm`: F.layer_norm
with eps 1e-5 before each attention and MLP and before the head, written out as
(x - mean) * s * gain + bias with s = 1/sqrt(var + 1e-5), var biased, so that s can be
edited; checked against F.layer_norm on every unedited run), the sites hooked where qkv edits
them (resid-post: the stream after the layer's MLP; ln-scale: s before it is applied):

  ablate     baseline and each row's loss and accuracy, and `together`: the row's site (z, q,
             k, v, pattern, resid-pre, resid-post; with an MLP resid-mid, mlp-pre, mlp-post,
             mlp-out; with LayerNorm ln-scale, the scale s of the row's LayerNorm, `ln`) of
             its head, at its position, key position and neuron (all where null), set to 0,
             to its mean over the examples, or (resample) to its value in the run of each
             example's partner, drawn as qkv draws them (partners: model_torch's Rng), the
             scores the means over the draws; with "metric", each score's metric too (loss;
             prob, the target's probability; kl, KL from the unablated run, nats), the mean
             over the positions with a target
  patch      the clean and corrupted metric (the JSON's "metric": logit-diff where absent,
             loss -log p(answer), prob p(answer), kl KL(clean || run) at the position, nats);
             each row's exact share (the corrupted run with the row's entries of its site
             taken from the clean run) and attribution share (torch autograd on the corrupted
             run: the sum over those entries of (clean - corrupt) * d metric/d site); the
             agreement; with "selected_heads" (--heads) only their rows, and "together" one
             run with every row's entries at once, its attribution the rows' summed
  patch      --path: each path S -> R's exact share, by the three passes (pass 2: the
             corrupted run with every head's z and every MLP's mlp-out frozen at its
             corrupted value but S's, which is clean, recording R's q/k/v or mlp-pre; pass 3:
             the corrupted run with only head R's slice of that input, or MLP R's mlp-pre,
             replaced; for the logits, pass 2's metric), and its attribution (the stream R
             reads, recorded minus corrupted, pushed through R's LayerNorm and weights by
             autograd's jvp at the corrupted stream, dotted with d metric/d R's input; for
             the logits, the final stream's change dotted with d metric/d final stream); the
             agreement; the list of paths (senders "L.H" and "mlp L", receivers "L.H",
             "mlp L" by "mlp-pre", and "logits")
  pairs      a patch over a pairs file (--pairs-patch): each pair's position (the clean input's
             last with a target), answer and wrong token (the file's, else the clean and the
             corrupted prediction); the shares of the means over the pairs; and each pair's
             own clean, corrupt, patched metric and shares in the --per-pair file
  attribute  the logit and every part (embed, each head, each MLP's output with b_out, or
             with --neurons each neuron's post-activation times its row of w_out and each
             MLP's b_out, bias), each part's layer, head and neuron, and their sum; with
             LayerNorm a part x gives (x - mean(x)) . (s * ln_final.gain * head.w[:, token]),
             s = 1/sqrt(var + 1e-5) of the final stream (final_scale, checked), and the bias
             part is head.b + ln_final.bias . head.w[:, token]; torch's parts add up to its
             logit
  lens       at every layer boundary and position, the probability of each listed token
             (softmax of the stream after that layer, through the final LayerNorm with its
             own mean and scale, times head.w, plus head.b), that no token left out is more
             probable, the final prediction's rank; at every position the final prediction
             (the model's argmax), its logit and every part of it as attribute splits it
             without --neurons (a part's scale: the sum of the absolute values of the
             products it adds up)

Each number x of qkv against torch's y must satisfy |x - y| <= tol * max(1, scale), with tol
1e-9 where qkv ran in f64 (the JSON's "dtype": an f64 model, or an f32 model with --dtype f64,
which widens it exactly) and 1e-6 where it ran in f32. The scale is |y|, except for what is a
difference: a metric logit[answer] - logit[wrong] scales with |logit[answer]| + |logit[wrong]|
(its rounding is the logits'; the other metrics with the logits they read: see metric()),
and a share with the sizes of the terms it is made of over |clean - corrupt|. An agreement (a correlation) is recomputed from qkv's own columns, which
are each checked. Rows and paths are checked to be the ones --site, --over and --path list.
Self-attention models of a built-in task whose tokens read as their ids (copy, reverse,
shift, max, induction), with or without MLPs and LayerNorms.

usage: explain_torch.py MODEL [--ablate A.json ... --data FILE] [--patch P.json ...]
                              [--pairs-patch P.json PAIRS PER_PAIR.jsonl ...]
                              [--attribute D.json ...] [--lens L.json ...]
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

SITES = ("z", "q", "k", "v", "pattern", "resid-pre", "resid-post",
         "resid-mid", "mlp-pre", "mlp-post", "mlp-out", "ln-scale")
LNS = ("attn", "mlp", "final")  # a layer's LayerNorms: before its attention, its MLP; final
ACTS = ("relu", "gelu", "gelu-tanh")  # F.relu, F.gelu, F.gelu(approximate="tanh")
LN_EPS = 1e-5  # F.layer_norm's: biased variance, eps inside the square root
# the sites without heads: the stream's and the MLP's, (B, T, C); each neuron's, (B, T, N)
NEURONS = ("mlp-pre", "mlp-post")
# each LayerNorm's scale s, (B, T, 1), hooked as "ln-scale.attn", "ln-scale.mlp", "ln-scale.final"
SCALES = tuple("ln-scale." + n for n in LNS)
STREAM = ("resid-pre", "resid-post", "resid-mid", "mlp-out") + NEURONS + SCALES


def die(msg):
    print("explain_torch: error: %s" % msg, file=sys.stderr)
    sys.exit(2)


def entries(site, head, row, col):
    """The index of an edit's entries in a site's tensor: a head's site is (B, H, rows, W), the
    stream's (B, T, C), the neurons' (B, T, N) (col: a neuron); row and col None for every
    one."""
    r = slice(None) if row is None else slice(row, row + 1)
    c = slice(None) if col is None else slice(col, col + 1)
    if site in STREAM:
        return (slice(None), r, c)
    return (slice(None), slice(head, head + 1), r, c)


def forward(model, p, tokens, edits=(), keep_grad=False):
    """tokens (B, T) -> logits (B, T, V) and sites {(site, layer): tensor}: each layer's stream
    entering it (resid-pre, (B, T, C)), each head's q, k, v, z (B, H, T, dk) and attention
    weights (pattern, (B, H, T, T)), the stream leaving it (resid-post), as the run computed
    them after the edits; with an MLP also the stream between the attention and the MLP
    (resid-mid), each neuron before and after the activation (mlp-pre, mlp-post, (B, T, N))
    and the MLP's output (mlp-out, (B, T, C), b_out included); with LayerNorm each one's
    scale s (ln-scale.attn and ln-scale.mlp of layer l, ln-scale.final of the last layer,
    (B, T, 1)); and the stream the head reads (final, layer L). edits: (site, layer, head or None, row or None,
    col or None, value); value None sets the entries to 0, else a (B or 1, ...) tensor of the
    site's shape gives them. keep_grad: every site keeps its gradient."""
    B, T, C, H = tokens.shape[0], model.T, model.C, model.H
    dk = C // H
    sites = {}

    def hook(site, l, t):
        for (es, el, eh, er, ec, val) in edits:
            if es == site and el == l:
                at = entries(site, eh, er, ec)
                t = t.clone()
                t[at] = 0 if val is None else val.expand_as(t)[at]
        if keep_grad and t.requires_grad:
            t.retain_grad()
        sites[(site, l)] = t
        return t

    def norm(t, name, l, which):  # a pre-LayerNorm over the width, its scale hooked; or nothing
        if model.norm == "none":
            return t
        centred = t - t.mean(-1, keepdim=True)
        s = hook("ln-scale." + which, l,
                 torch.rsqrt(centred.pow(2).mean(-1, keepdim=True) + LN_EPS))
        y = centred * s * p[name + ".gain"] + p[name + ".bias"]
        if not edits:  # the written-out LayerNorm is F.layer_norm's
            want = F.layer_norm(t, (C,), p[name + ".gain"], p[name + ".bias"], eps=LN_EPS)
            err = float((y - want).abs().max())
            if err > 1e-12 * max(1.0, float(want.abs().max())):
                die("the LayerNorm written out is %.3g from F.layer_norm" % err)
        return y

    x = p["tok_emb"][tokens] + p["pos_emb"]
    mask = torch.zeros(T, T, dtype=x.dtype)
    if model.causal:
        mask = mask.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    for l in range(model.L):
        x = hook("resid-pre", l, x)
        a_in = norm(x, "attn.%d.ln" % l, l, "attn")

        def heads(w):
            return (a_in @ p["attn.%d.%s" % (l, w)]).view(B, T, H, dk).transpose(1, 2)
        q = hook("q", l, heads("w_q"))
        k = hook("k", l, heads("w_k"))
        v = hook("v", l, heads("w_v"))
        a = hook("pattern", l, torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dk) + mask, -1))
        z = hook("z", l, a @ v)
        y = z.transpose(1, 2).reshape(B, T, C) @ p["attn.%d.w_o" % l]
        x = x + y if model.residual else y
        if model.mlp:  # the MLP reads resid-mid through its LayerNorm and adds to it
            x = hook("resid-mid", l, x)
            pre = hook("mlp-pre", l, norm(x, "mlp.%d.ln" % l, l, "mlp") @ p["mlp.%d.w_in" % l] +
                       p["mlp.%d.b_in" % l])
            if model.act == "relu":
                post = F.relu(pre)
            else:
                post = F.gelu(pre, approximate="tanh" if model.act == "gelu-tanh" else "none")
            post = hook("mlp-post", l, post)
            x = x + hook("mlp-out", l, post @ p["mlp.%d.w_out" % l] + p["mlp.%d.b_out" % l])
        x = hook("resid-post", l, x)
    sites[("final", model.L)] = x  # the stream the final LayerNorm and the head read
    return norm(x, "ln_final", model.L - 1, "final") @ p["head.w"] + p["head.b"], sites


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

    def same(self, what, got, want):
        """Something that is not a number: equal, or a failure."""
        self.count += 1
        if got != want:
            self.failures.append("%s: qkv %r, torch %r" % (what, got, want))


def spot_of(model, r, ck):
    """A JSON row's (site, layer, head, row, col), 0-based: the rows of k and v are key
    positions, of the others query positions; the pattern's columns are key positions, the
    neurons' (mlp-pre, mlp-post) their neuron; ln-scale's site names its LayerNorm
    ("ln-scale.attn", as forward hooks it)."""
    site, ln = r["site"], r.get("ln")
    if site not in SITES:
        ck.same("row %r: site" % r, site, "one of %s" % (SITES,))
        return None
    # ln-scale names its LayerNorm (the final one on the last layer), no other site does
    ck.same("row %r: ln" % r, ln is not None, site == "ln-scale")
    if site == "ln-scale":
        if ln not in LNS or (ln == "mlp" and not model.mlp) or (
                ln == "final" and r["layer"] != model.L):
            ck.same("row %r: ln" % r, ln, "a LayerNorm of its layer")
            return None
        site = "ln-scale." + ln
    stream, keys, neuron = site in STREAM, site in ("k", "v"), r.get("neuron")
    name = "%s %d%s%s%s%s" % (site, r["layer"], "" if stream else ".%d" % r["head"],
                              "" if neuron is None else " neuron %d" % neuron,
                              "" if r["position"] is None else " @%d" % r["position"],
                              "" if r["key_position"] is None else " key %d" % r["key_position"])
    # the fields a site has: no head on the stream, no query position for k and v, a key
    # position only for k, v and the pattern, a neuron only for mlp-pre and mlp-post
    ck.same(name + ": head given", r["head"] is not None, not stream)
    if keys:
        ck.same(name + ": position", r["position"], None)
    if site not in ("k", "v", "pattern"):
        ck.same(name + ": key_position", r["key_position"], None)
    if site not in NEURONS:
        ck.same(name + ": neuron", neuron, None)
    row = r["key_position"] if keys else r["position"]
    col = r["key_position"] if site == "pattern" else neuron
    return name, (site, r["layer"] - 1, None if stream else r["head"] - 1, row, col)


def score(model, p, tokens, targets, edits=(), kind=None, base=None):
    """The loss and accuracy over the positions with a target, and with kind the mean of the
    metric there: loss (the loss itself), prob (the target's probability), kl (KL from base,
    the unedited run's logits (B, T, V)); and the metric's scale (the largest |logit|)."""
    with torch.no_grad():
        logits, _ = forward(model, p, tokens, edits)
    y = targets.reshape(-1)
    flat = logits.reshape(-1, model.V)
    keep = y != -1
    loss = F.cross_entropy(flat[keep], y[keep]).item()
    acc = (flat[keep].argmax(-1) == y[keep]).double().mean().item()
    lp = torch.log_softmax(flat[keep], -1)
    big = flat[keep].abs().max().item()
    if kind == "prob":
        return loss, acc, lp[torch.arange(len(lp)), y[keep]].exp().mean().item(), big
    if kind == "kl":
        ref = torch.log_softmax(base.reshape(-1, model.V)[keep], -1)
        return loss, acc, (ref.exp() * (ref - lp)).sum(-1).mean().item(), 2 * big
    return loss, acc, loss, big


def partners(n, draws, seed):
    """ablate --mode resample's partners: draws lists of n, example e's another one,
    (e + 1 + below(n - 1)) mod n from qkv's generator seeded with seed, draws then examples."""
    rng = mt.Rng(seed)
    return [[(e + 1 + rng.below(n - 1)) % n for e in range(n)] for _ in range(draws)]


def read_rows(path):
    rows = []
    with open(path) as f:
        for line in f:
            if line.strip():
                rows.append([int(w) for w in line.split()])
    return rows


def check_ablate(model, p, js, data_path, ck):
    rows = read_rows(data_path)
    tokens = torch.tensor(rows)
    targets = torch.tensor(targets_of(model, rows))
    kind = js.get("metric")  # absent: loss and accuracy alone
    with torch.no_grad():
        base, sites = forward(model, p, tokens)
    means, draws = None, [None]
    if js["mode"] == "mean":
        means = {key: t.mean(0, keepdim=True) for key, t in sites.items()}
    elif js["mode"] == "resample":  # each draw's values: the sites of the partners' run
        draws = []
        for order in partners(len(rows), js["draws"], js["seed"]):
            with torch.no_grad():
                draws.append(forward(model, p, tokens[torch.tensor(order)])[1])
    pre = "ablate %s" % js["mode"]

    def scores(edits_of):  # the means over the draws of each draw's scores
        got = [score(model, p, tokens, targets, edits_of(d), kind, base) for d in draws]
        return [sum(g[k] for g in got) / len(got) for k in range(4)]

    def check(what, x, want):
        ck.check(what + " loss", x["loss"], want[0])
        ck.check(what + " accuracy", x["accuracy"], want[1])
        if kind:
            ck.check(what + " metric", x["metric"], want[2], want[3])
        else:
            ck.same(what + ": no metric", "metric" in x, False)
    check(pre + " baseline", js["baseline"], score(model, p, tokens, targets, (), kind, base))
    edits = []
    for h in js["heads"]:
        got = spot_of(model, h, ck)
        if got is None:
            continue
        name, (site, l, hd, row, col) = got
        if "site" in js:
            ck.same("%s %s: the JSON's site" % (pre, name), site.split(".")[0], js["site"])
        value = (lambda d, site=site, l=l: None if means is None and d is None
                 else means[(site, l)] if d is None else d[(site, l)])
        edits.append((site, l, hd, row, col, value))
        check("%s %s" % (pre, name), h, scores(lambda d, e=edits[-1]: [e[:5] + (e[5](d),)]))
    if "together" in js:
        ck.same(pre + " together: its list", len(js["together"]["heads"]), len(js["heads"]))
        check(pre + " together", js["together"],
              scores(lambda d: [e[:5] + (e[5](d),) for e in edits]))


def metric(logits, pos, ans, wr, kind="logit-diff", ref=None):
    """Each pair's metric at its position, (n,), and what its rounding scales with (the logits'
    sizes it is made of). logit-diff: logit[answer] - logit[wrong] (|logit[answer]| +
    |logit[wrong]|); loss: -log softmax[answer] (|logit[answer]| + the largest |logit|); prob:
    softmax[answer] (that, times it); kl: KL(ref || softmax) in nats, ref (n, V) the clean run's
    log softmax at the position (the largest |logit| of both runs, and the sum of the terms'
    sizes)."""
    i = torch.arange(logits.shape[0])
    row = logits[i, pos]  # (n, V)
    big = row.detach().abs().max(-1).values
    if kind == "logit-diff":
        a, w = logits[i, pos, ans], logits[i, pos, wr]
        return a - w, a.detach().abs() + w.detach().abs()
    lp = torch.log_softmax(row, -1)
    if kind == "loss":
        return -lp[i, ans], row[i, ans].detach().abs() + big
    if kind == "prob":
        p_a = lp[i, ans].exp()
        return p_a, p_a.detach() * (row[i, ans].detach().abs() + big)
    if kind == "kl":
        p = ref.exp()
        terms = p * (ref - lp)
        return terms.sum(-1), big + ref.abs().max(-1).values + terms.detach().abs().sum(-1)
    die("unknown metric %r" % kind)


def expected_spots(model, site, over):
    """The rows qkv patch lists for --site and --over: (site, layer, head, position,
    key_position, neuron, ln), 1-based layer and head, None where it does not apply."""
    if over in ("neuron", "neuron-position"):
        per = [None] if over == "neuron" else range(model.T)
        return [(site, l, None, i, None, n, None) for l in range(1, model.L + 1)
                for n in range(model.mlp) for i in per]
    if over in ("ln", "ln-position"):  # each LayerNorm: attn, mlp (with an MLP), final
        per = [None] if over == "ln" else range(model.T)
        lns = [(l, "attn") for l in range(1, model.L + 1)]
        lns += [(l, "mlp") for l in range(1, model.L + 1) if model.mlp]
        lns.append((model.L, "final"))
        return [(site, l, None, i, None, None, ln) for l, ln in lns for i in per]
    heads = [None] if site in STREAM else range(1, model.H + 1)
    per = [None] if over == "head" else range(model.T)
    return [(site, l, h, None if over == "key-position" else i,
             i if over == "key-position" else None, None, None)
            for l in range(1, model.L + 1) for h in heads for i in per]


def expected_paths(model):
    """(sender, receiver, via) of every path. Senders: each head "L.H" and each MLP "mlp L".
    Receivers: each head of a later layer (with the residual stream; else of the next layer)
    by q, k and v; each MLP that reads the stream after the sender (its own layer's after a
    head, a later layer's after an MLP) by "mlp-pre"; the logits (every S with the residual
    stream; else the last layer's)."""
    out = []
    for ls in range(model.L):
        senders = ["%d.%d" % (ls + 1, hs + 1) for hs in range(model.H)]
        senders += ["mlp %d" % (ls + 1)] if model.mlp else []
        for sender in senders:
            for lr in range(ls, model.L if model.residual else min(ls + 2, model.L)):
                for hr in range(model.H if lr > ls else 0):
                    for via in ("q", "k", "v"):
                        out.append((sender, "%d.%d" % (lr + 1, hr + 1), via))
                if model.mlp and (lr > ls or not sender.startswith("mlp")):
                    out.append((sender, "mlp %d" % (lr + 1), "mlp-pre"))
            if model.residual or ls == model.L - 1:
                out.append((sender, "logits", None))
    return out


def path_end(name):
    """A path's sender or receiver: "L.H" -> (layer, head), "mlp L" -> (layer, None), 0-based."""
    if name.startswith("mlp "):
        return int(name[4:]) - 1, None
    layer, head = name.split(".")
    return int(layer) - 1, int(head) - 1


def layer_norm(model, p, t, name):
    """A pre-LayerNorm over the width, or nothing (the forward's norm)."""
    if model.norm == "none":
        return t
    return F.layer_norm(t, (model.C,), p[name + ".gain"], p[name + ".bias"], eps=LN_EPS)


def receiver_input(model, p, lr, hr, via):
    """The function from the stream a receiver reads to its input: head hr's q, k or v of
    layer lr, (B, 1, T, dk), from the stream entering the layer; or layer lr's mlp-pre,
    (B, T, N), from the stream after the layer's attention (hr None)."""
    dk = model.C // model.H
    if hr is None:
        return lambda x: layer_norm(model, p, x, "mlp.%d.ln" % lr) @ p["mlp.%d.w_in" % lr] + \
            p["mlp.%d.b_in" % lr]
    w = p["attn.%d.w_%s" % (lr, via)][:, hr * dk:(hr + 1) * dk]
    return lambda x: (layer_norm(model, p, x, "attn.%d.ln" % lr) @ w).unsqueeze(1)


def read_pairs(model, p, path):
    """A pairs file: clean, corrupt, and (n,) position, answer and wrong of each pair."""
    clean, corrupt, given = [], [], []
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            fields = line.rstrip("\r\n").split("\t")
            clean.append([int(w) for w in fields[0].split()])
            corrupt.append([int(w) for w in fields[1].split()])
            given.append([int(w) for w in fields[2:]])
    targets = targets_of(model, clean)
    pos = [max(i for i, y in enumerate(ys) if y >= 0) for ys in targets]
    with torch.no_grad():
        cl, _ = forward(model, p, torch.tensor(clean))
        xl, _ = forward(model, p, torch.tensor(corrupt))
    ans = [g[0] if len(g) > 0 else int(cl[i, pos[i]].argmax()) for i, g in enumerate(given)]
    wr = [g[1] if len(g) > 1 else int(xl[i, pos[i]].argmax()) for i, g in enumerate(given)]
    return clean, corrupt, pos, ans, wr


def pearson(xs, ys):
    pts = [(x, y) for x, y in zip(xs, ys) if x is not None and y is not None]
    n = len(pts)
    if n < 2:
        return None
    sx, sy = sum(x for x, _ in pts), sum(y for _, y in pts)
    vx = sum(x * x for x, _ in pts) - sx * sx / n
    vy = sum(y * y for _, y in pts) - sy * sy / n
    cov = sum(x * y for x, y in pts) - sx * sy / n
    return cov / math.sqrt(vx * vy) if vx > 0 and vy > 0 else None


def check_patch(model, p, js, ck, pairs_file=None, per_pair_file=None):
    if pairs_file is None:
        clean = [[int(w) for w in js["tokens"]]]
        corrupt = [[int(w) for w in js["corrupt_tokens"]]]
        pos, ans, wr = [js["position"]], [int(js["answer"])], [int(js["wrong"])]
    else:
        clean, corrupt, pos, ans, wr = read_pairs(model, p, pairs_file)
        ck.same("patch pairs", js["pairs"], len(clean))
        ck.same("patch the first pair's position, answer, wrong",
                (js["position"], int(js["answer"]), int(js["wrong"])), (pos[0], ans[0], wr[0]))
    n = len(clean)
    clean, corrupt = torch.tensor(clean), torch.tensor(corrupt)
    pos, ans, wr = torch.tensor(pos), torch.tensor(ans), torch.tensor(wr)
    kind = js.get("metric", "logit-diff")  # absent: the logit difference
    with torch.no_grad():
        cl, sc = forward(model, p, clean)
    ref = torch.log_softmax(cl[torch.arange(n), pos], -1)  # kl's: the clean distribution
    xl, sx = forward(model, {k: t.clone().requires_grad_(True) for k, t in p.items()},
                     corrupt, keep_grad=True)
    m_x, size_x = metric(xl, pos, ans, wr, kind, ref)
    m_x.sum().backward()  # each pair's gradient: the pairs do not mix
    m_x = m_x.detach()
    sxd = {key: t.detach() for key, t in sx.items()}
    m_c, size_c = metric(cl, pos, ans, wr, kind, ref)

    def patched(edits):
        with torch.no_grad():
            pl, ps = forward(model, p, corrupt, edits)
        return metric(pl, pos, ans, wr, kind, ref), ps

    def change(delta, grad):  # per pair: sum of delta * grad, and of its terms' sizes
        terms = (delta * grad).reshape(n, -1)
        return terms.sum(1), terms.abs().sum(1)

    items = []  # (name, JSON row, patched (n,), its size (n,), change (n,), its size (n,))
    together = None  # --together's, as an item
    if js.get("path"):
        got = [(q["sender"], q["receiver"], q["via"]) for q in js["paths"]]
        ck.same("patch --path: the paths", sorted(got, key=str), sorted(expected_paths(model), key=str))
        frozen = {}
        for q in js["paths"]:
            ls, hs = path_end(q["sender"])
            if (ls, hs) not in frozen:
                # pass 2: every head's z and every MLP's output corrupted but S's, clean
                edits = [("z", l, h, None, None, (sc if (l, h) == (ls, hs) else sxd)[("z", l)])
                         for l in range(model.L) for h in range(model.H)]
                edits += [("mlp-out", l, None, None, None,
                           (sc if (l, None) == (ls, hs) else sxd)[("mlp-out", l)])
                          for l in range(model.L if model.mlp else 0)]
                frozen[(ls, hs)] = patched(edits)
            (m2, size2), rec = frozen[(ls, hs)]
            name = "path %s -> %s%s" % (q["sender"], q["receiver"],
                                        "" if q["via"] is None else " by " + q["via"])
            if q["receiver"] == "logits":
                # the final stream's change (S's alone) times d metric / d final stream: the
                # logits' first-order change through the final LayerNorm
                final = ("resid-post", model.L - 1)
                ch, chs = change(rec[final] - sxd[final], sx[final].grad)
                items.append((name, q, m2, size2, ch, chs))
                continue
            lr, hr = path_end(q["receiver"])
            site = "mlp-pre" if hr is None else q["via"]
            ck.same(name + ": via", q["via"], site)
            key, at = (site, lr), entries(site, hr, None, None)
            (m3, size3), _ = patched([(site, lr, hr, None, None, rec[key])])  # pass 3
            # attribution: the stream's change in pass 2 (S's alone) through the receiver's
            # LayerNorm and weights to first order (a jvp at the corrupted run's stream),
            # times d metric / d input
            stream = ("resid-pre" if hr is not None else "resid-mid", lr)
            _, d_in = torch.autograd.functional.jvp(receiver_input(model, p, lr, hr, site),
                                                    sxd[stream], rec[stream] - sxd[stream])
            ch, chs = change(d_in, sx[key].grad[at])
            items.append((name, q, m3, size3, ch, chs))
        rows = js["paths"]
    else:
        got = [(r["site"], r["layer"], r["head"], r["position"], r["key_position"],
                r.get("neuron"), r.get("ln")) for r in js["results"]]
        want = expected_spots(model, js["site"], js["over"])
        if "selected_heads" in js:  # --heads: those heads' rows alone
            sel = [tuple(int(x) for x in h.split(".")) for h in js["selected_heads"]]
            want = [w for w in want if (w[1], w[2]) in sel]
        ck.same("patch --site %s --over %s: the rows" % (js["site"], js["over"]),
                sorted(got, key=str), sorted(want, key=str))
        every = []  # --together: every row's edit at once
        for r in js["results"]:
            spot = spot_of(model, r, ck)
            if spot is None:
                continue
            name, (site, l, h, row, col) = spot
            key, at = (site, l), entries(site, h, row, col)
            every.append((site, l, h, row, col, sc[key]))
            mp, sp = patched([every[-1]])[0]
            ch, chs = change((sc[key] - sxd[key])[at], sx[key].grad[at])
            items.append((name, r, mp, sp, ch, chs))
        rows = js["results"]
        if "together" in js:  # one run under every row's edit; the rows' attributions summed
            (mp, sp), _ = patched(every)
            ch = sum(x[4] for x in items)
            chs = sum(x[5] for x in items)
            together = ("together", js["together"], mp, sp, ch, chs)
    ck.same("patch: a together only with selected heads", "together" in js,
            "selected_heads" in js and "together" in js)
    # the means over the pairs: shares of the mean difference
    mc, mx = m_c.mean().item(), m_x.mean().item()
    diff = mc - mx
    ck.check("patch clean", js["clean"], mc, size_c.mean().item())
    ck.check("patch corrupt", js["corrupt"], mx, size_x.mean().item())
    exact, attribution = [], []
    for (name, r, mp, sp, ch, chs) in items + ([together] if together else []):
        exact.append((mp.mean().item() - mx) / diff)
        attribution.append(ch.mean().item() / diff)
        if r["exact"] is not None:
            ck.check("patch %s exact" % name, r["exact"], exact[-1],
                     (sp.mean().item() + size_x.mean().item()) / abs(diff))
        if r["attribution"] is not None:
            ck.check("patch %s attribution" % name, r["attribution"], attribution[-1],
                     chs.mean().item() / abs(diff))
    if together:
        exact.pop(), attribution.pop()
    if js.get("method") == "both":
        # the agreement is the correlation of qkv's own columns (a correlation of numbers
        # rounded in f32 can move by more than they do)
        want = pearson([r["exact"] for r in rows], [r["attribution"] for r in rows])
        ck.check("patch agreement", js["agreement"], want)
    if per_pair_file is None:
        return
    try:
        with open(per_pair_file) as f:
            lines = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        die("%s: %s" % (per_pair_file, e))
    ck.same("per-pair lines", len(lines), n)
    field = "paths" if js.get("path") else "results"
    ident = ("sender", "receiver", "via") if js.get("path") else (
        "site", "layer", "head", "position", "key_position", "neuron", "ln")
    for i, o in enumerate(lines[:n]):
        pre = "pair %d" % (i + 1)
        ck.same(pre + ": its number", o.get("pair"), i + 1)
        ck.check(pre + " clean", o["clean"], m_c[i].item(), size_c[i].item())
        ck.check(pre + " corrupt", o["corrupt"], m_x[i].item(), size_x[i].item())
        d = m_c[i].item() - m_x[i].item()
        ck.same(pre + ": rows", len(o[field]), len(items))
        ck.same(pre + ": together", "together" in o, together is not None)
        columns = list(zip(o[field], items))
        if together and "together" in o:
            columns.append((o["together"], together))
        for x, (name, r, mp, sp, ch, chs) in columns:
            if name != "together":
                ck.same("%s %s: its row" % (pre, name), [x.get(k) for k in ident],
                        [r.get(k) for k in ident])
            ck.check("%s %s patched" % (pre, name), x["patched"], mp[i].item(), sp[i].item())
            if d == 0:  # a pair whose metrics are equal has no share of its own
                ck.same("%s %s shares" % (pre, name), (x["exact"], x["attribution"]), (None, None))
                continue
            ck.check("%s %s exact" % (pre, name), x["exact"], (mp[i].item() - m_x[i].item()) / d,
                     (sp[i].item() + size_x[i].item()) / abs(d))
            ck.check("%s %s attribution" % (pre, name), x["attribution"], ch[i].item() / d,
                     chs[i].item() / abs(d))


def final_scale(model, sites, pos):
    """The final LayerNorm's 1/sqrt(var + eps) of the stream the head reads at pos (biased
    variance), or 1 without LayerNorm."""
    if model.norm == "none":
        return 1.0
    h = sites[("final", model.L)][0, pos]
    return 1.0 / math.sqrt(h.var(unbiased=False).item() + LN_EPS)


def parts_of(model, p, sites, pos, tok, sizes=None, neurons=False):
    """The logit of tok at pos split as qkv attribute splits it: {name: value}, from the
    sites of forward's run on one example. Each part is a vector x (C) that the stream adds
    up: the embeddings (layer 1's resid-pre), a head's z times its slice of w_o, an MLP's
    output (b_out included), or with neurons each neuron's post-activation times its row of
    w_out and each MLP's b_out; its logit is x . head.w[:, tok], and with LayerNorm
    (x - mean(x)) . (s * ln_final.gain * head.w[:, tok]), s the final stream's scale. The bias
    is head.b[tok] (+ ln_final.bias . head.w[:, tok]). sizes, a dict, receives each part's
    scale: the sum of the absolute values of the products it adds up (what its rounding
    scales with, where the products cancel)."""
    C, H = model.C, model.H
    dk = C // H
    w = p["head.w"][:, tok]
    want, sizes = {}, {} if sizes is None else sizes
    if model.norm == "none":
        u = w
    else:  # centring x is the same as centring the vector it is dotted with
        g = final_scale(model, sites, pos) * p["ln_final.gain"] * w
        u = g - g.mean()

    def part(name, x):  # x (C) -> its logit; its size the sum of |x_k * u_k|
        want[name] = (x @ u).item()
        sizes[name] = (x.abs() @ u.abs()).item()
    if model.residual:
        part("embed", sites[("resid-pre", 0)][0, pos])
    for l in range(0 if model.residual else model.L - 1, model.L):
        uo = p["attn.%d.w_o" % l] @ u
        for h in range(H):
            z, uh = sites[("z", l)][0, h, pos], uo[h * dk:(h + 1) * dk]
            name = "%d.%d" % (l + 1, h + 1)
            want[name], sizes[name] = (z @ uh).item(), (z.abs() @ uh.abs()).item()
        if not model.mlp:
            continue
        if not neurons:
            part("mlp %d" % (l + 1), sites[("mlp-out", l)][0, pos])
            continue
        un = p["mlp.%d.w_out" % l] @ u  # (N): neuron n's row of w_out through the head
        post = sites[("mlp-post", l)][0, pos]
        for n in range(model.mlp):
            name = "mlp %d.%d" % (l + 1, n)
            want[name], sizes[name] = (post[n] * un[n]).item(), abs((post[n] * un[n]).item())
        part("mlp %d bias" % (l + 1), p["mlp.%d.b_out" % l])
    want["bias"] = p["head.b"][tok].item()
    sizes["bias"] = abs(want["bias"])
    if model.norm != "none":
        want["bias"] += (p["ln_final.bias"] @ w).item()
        sizes["bias"] += (p["ln_final.bias"].abs() @ w.abs()).item()
    return want


def part_fields(name):
    """The layer, head and neuron a part's JSON gives with its name (None where none)."""
    if name in ("embed", "bias"):
        return None, None, None
    if name.startswith("mlp "):
        rest = name[4:].split(" ")[0]
        layer, _, n = rest.partition(".")
        return int(layer), None, (int(n) if n else None)
    layer, head = name.split(".")
    return int(layer), int(head), None


def check_parts(model, p, sites, pos, tok, parts, ck, label, sized):
    """qkv's parts (the JSON's list) against torch's: names, the fields given and values,
    each named label % its name; returns the sum of torch's parts. The split is by neuron
    when qkv's names say so (--neurons). sized: a part's scale is the sum of the absolute
    values of the products it adds up (else itself)."""
    names = [q["name"] for q in parts]
    neurons = any(n.startswith("mlp ") and not n[4:].isdigit() for n in names)
    sizes = {}
    want = parts_of(model, p, sites, pos, tok, sizes, neurons)
    if sorted(names) != sorted(want):
        ck.failures.append("%s: qkv %s, torch %s" % (label % "names", names, sorted(want)))
    for q in parts:
        if q["name"] not in want:
            continue
        for key, val in zip(("layer", "head", "neuron"), part_fields(q["name"])):
            if key in q:  # (an attention-only model's has no neuron, the lens's none)
                ck.same("%s: %s" % (label % q["name"], key), q[key], val)
        ck.check(label % q["name"], q["value"], want[q["name"]],
                 max(abs(want[q["name"]]), sizes[q["name"]]) if sized else None)
    return sum(want.values())


def check_attribute(model, p, js, ck):
    tokens = torch.tensor([[int(w) for w in js["tokens"]]])
    pos, tok = js["position"], int(js["token"])
    with torch.no_grad():
        logits, sites = forward(model, p, tokens)
    logit = logits[0, pos, tok].item()
    ck.check("attribute logit", js["logit"], logit)
    if "final_scale" in js:
        ck.check("attribute final_scale", js["final_scale"], final_scale(model, sites, pos))
    total = check_parts(model, p, sites, pos, tok, js["parts"], ck, "attribute %s", False)
    ck.check("attribute sum", js["sum"], total)
    # torch's own parts add up to torch's logit (the split is the forward's)
    ck.check("attribute torch's parts against torch's logit", total, logit)


def load_json(file, kind):
    try:
        with open(file) as f:
            js = json.load(f)
    except (OSError, ValueError) as e:
        die("%s: %s" % (file, e))
    if js.get("command") != kind:
        die("%s: not the JSON of qkv %s" % (file, kind))
    return js
def check_lens(model, p, js, ck):
    tokens = torch.tensor([[int(w) for w in js["tokens"]]])
    with torch.no_grad():
        logits, sites = forward(model, p, tokens)
    # the stream after 0 (the embeddings), 1, .., L layers
    streams = [sites[("resid-pre", 0)]] + [sites[("resid-post", l)] for l in range(model.L)]
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
        check_parts(model, p, sites, pos, tok, d["parts"], ck, "lens part %%s at %d" % pos,
                    True)
    for b in js["layers"]:
        s = streams[b["after"]][0]  # (T, C), through the final LayerNorm (its own mean, scale)
        if model.norm != "none":
            s = F.layer_norm(s, (model.C,), p["ln_final.gain"], p["ln_final.bias"], eps=LN_EPS)
        lens_logits = s @ p["head.w"] + p["head.b"]  # (T, V)
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
    ap.add_argument("--ablate", action="append", default=[])
    ap.add_argument("--data")
    ap.add_argument("--patch", action="append", default=[])
    ap.add_argument("--pairs-patch", nargs=3, action="append", default=[],
                    metavar=("P.json", "PAIRS", "PER_PAIR.jsonl"))
    ap.add_argument("--attribute", action="append", default=[])
    ap.add_argument("--lens", action="append", default=[])
    args = ap.parse_args()
    path = args.model
    if os.path.isdir(path):
        path = os.path.join(path, "model.safetensors")
    tensors, meta = mt.load_safetensors(path)
    model = mt.Model(tensors, meta, path)
    # transformer blocks, from the metadata (absent: no MLP, relu, no LayerNorm)
    try:
        model.mlp = int(meta.get("mlp", "0"))
    except ValueError:
        die("%s: metadata mlp %r" % (path, meta.get("mlp")))
    model.act, model.norm = meta.get("act", "relu"), meta.get("norm", "none")
    if model.act not in ACTS or model.norm not in ("none", "layernorm") or model.mlp < 0:
        die("%s: metadata: mlp %r, act %r, norm %r" % (path, model.mlp, model.act, model.norm))
    names = list(model.params)
    for l in range(model.L if model.mlp else 0):
        names += ["mlp.%d.%s" % (l, w) for w in ("w_in", "b_in", "w_out", "b_out")]
    if model.norm == "layernorm":
        names += ["%s.%d.ln.%s" % (b, l, w) for l in range(model.L)
                  for b in ("attn", "mlp")[:2 if model.mlp else 1] for w in ("gain", "bias")]
        names += ["ln_final.gain", "ln_final.bias"]
    missing = [n for n in names if n not in tensors]
    if missing:
        die("%s: no tensor %s" % (path, ", ".join(missing)))
    p = {n: tensors[n].to(torch.float64) for n in dict.fromkeys(names)}
    if args.ablate and not args.data:
        die("--ablate needs --data FILE (the examples qkv ablate --data scored)")
    jobs = [("ablate", f, ()) for f in args.ablate] + [("patch", f, ()) for f in args.patch]
    jobs += [("patch", f, (pairs, per)) for f, pairs, per in args.pairs_patch]
    jobs += [("attribute", f, ()) for f in args.attribute]
    jobs += [("lens", f, ()) for f in args.lens]
    checks = []
    for kind, file, extra in jobs:
        js = load_json(file, kind)
        ck = Checker(1e-9 if js["dtype"] == "f64" else 1e-6)
        if kind == "ablate":
            check_ablate(model, p, js, args.data, ck)
            what = "ablate %s %s %s" % (js["mode"], js.get("site", "z"), js.get("over", "head"))
            what += " " + js["metric"] if "metric" in js else ""
        elif kind == "patch":
            check_patch(model, p, js, ck, *extra)
            what = "patch %s" % ("--path" if js.get("path") else
                                 "%s %s" % (js.get("site", "z"), js.get("over", "head")))
            what += " " + js["metric"] if "metric" in js else ""
            what += " together" if "together" in js else ""
            if extra:
                what += " (%d pairs)" % js["pairs"]
        elif kind == "lens":
            check_lens(model, p, js, ck)
            what = "lens"
        else:
            check_attribute(model, p, js, ck)
            what = "attribute" + (" --neurons" if any(
                q.get("neuron") is not None for q in js["parts"]) else "")
        checks.append((what, js["dtype"], ck))
    failed = 0
    for what, dtype, ck in checks:
        print("explain_torch: %-32s %s: %4d numbers, worst error %.3g (tol %g): %s" % (
            what, dtype, ck.count, ck.worst, ck.tol, "FAIL" if ck.failures else "ok"))
        for f in ck.failures:
            print("explain_torch: mismatch: %s" % f, file=sys.stderr)
        failed += len(ck.failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
