#!/usr/bin/env python3
"""The PyTorch side of qkv's benchmark: the same model and training step as `qkv bench`.

One step is forward, cross-entropy, backward and a plain SGD update of the one-layer attention
model of docs/model.md (token + position embeddings, W_Q, W_K, W_V, W_O, no residual, the
vocabulary head), on a batch of the reverse task. The mlp workload is a transformer block, as
`qkv bench --config mlp`: the attention in the residual stream, then an MLP of 512 ReLU units
with biases (d = d + relu(d·W_in + b_in)·W_out + b_out), no LayerNorm. The grok workload is one
epoch of `qkv bench --config grok`: the same block (vocabulary 114, sequence a b =) on every
training pair of (a + b) mod 113 (30%, 3830 pairs, as one batch), the loss at the last position
only, AdamW (lr 1e-3, weight decay 1, betas 0.9 and 0.98): the keys and values at every
position, and the queries, W_O, the MLP and the head at the last one only, as qkv computes them
(--all-positions: at every position, then the last one's logits taken, as a model written for
every position does it). Prints one JSON line per workload, like `qkv bench --json`: config,
threads, form, ms_per_step (median after a warm-up), gflops, step_mem_mb (peak resident memory
minus the resident memory just before the first step).

--form picks how the attention is written: "eager" (softmax(Q·Kᵀ/√d_k)·V, three ops and
autograd) or "sdpa" (torch.nn.functional.scaled_dot_product_attention, PyTorch 2.0 and later,
which may take a fused kernel). Where the installed PyTorch has no sdpa, --form sdpa prints a
note on stderr and no line.
"""
import argparse
import json
import math
import statistics
import sys
import time

try:
    import torch
except ImportError as e:  # pragma: no cover
    print(f"bench_torch: skipping: cannot import torch ({e})", file=sys.stderr)
    sys.exit(0)

WORKLOADS = {  # batch, seq_len, d_model, heads, vocab, MLP hidden units (0: none, no residual)
    "tiny": (32, 16, 64, 4, 16, 0),
    "medium": (8, 256, 128, 4, 64, 0),
    "long": (1, 2048, 64, 1, 64, 0),
    "mlp": (64, 64, 128, 4, 64, 512),
    "grok": (3830, 3, 128, 4, 114, 512),  # every training pair of (a + b) mod 113, 30%
}
MODULUS, TRAIN_FRAC = 113, 0.3


def status_bytes(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return 1024.0 * float(line.split()[1])
    return -1.0


def reset_peak_rss():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def forward_flops(B, T, C, H, V, N, P=None):  # the matrix products, as src/train/bench.c counts
    P = T if P is None else P  # the positions computed past the keys and values
    return (2 * 2 * B * T * C * C + 2 * 2 * B * P * C * C + 2 * 2 * B * P * T * C
            + 2 * 2 * B * P * C * N + 2 * B * P * C * V)


HAS_SDPA = hasattr(torch.nn.functional, "scaled_dot_product_attention")


def run(name, threads, seconds, form, all_positions=False):
    B, T, C, H, V, N = WORKLOADS[name]
    grok = name == "grok"
    torch.manual_seed(1)
    dk = C // H
    s = 0.5
    p = {
        "tok_emb": torch.randn(V, C) * s,
        "pos_emb": torch.randn(T, C) * s,
        "w_q": torch.randn(C, C) * s / math.sqrt(C),
        "w_k": torch.randn(C, C) * s / math.sqrt(C),
        "w_v": torch.randn(C, C) * s / math.sqrt(C),
        "w_o": torch.randn(C, C) * s / math.sqrt(C),
        "head_w": torch.randn(C, V) * s / math.sqrt(C),
        "head_b": torch.zeros(V),
    }
    if N:  # the block's MLP: weights (in, out) ~ N(0, s²/fan_in), biases 0
        p.update({"w_in": torch.randn(C, N) * s / math.sqrt(C), "b_in": torch.zeros(N),
                  "w_out": torch.randn(N, C) * s / math.sqrt(N), "b_out": torch.zeros(C)})
    for t in p.values():
        t.requires_grad_(True)
    if grok:  # the training pairs a b = and their sums, the loss at = only
        pairs = torch.randperm(MODULUS * MODULUS)[:B]
        x = torch.stack([pairs // MODULUS, pairs % MODULUS, torch.full((B,), MODULUS)], dim=1)
        y = (x[:, 0] + x[:, 1]) % MODULUS
        opt = torch.optim.AdamW(p.values(), lr=1e-3, weight_decay=1.0, betas=(0.9, 0.98))
    else:
        x = torch.randint(0, V, (B, T))
        y = torch.flip(x, dims=[1])  # reverse task
    P = 1 if grok and not all_positions else T  # positions computed past the keys and values

    def step():
        h = p["tok_emb"][x] + p["pos_emb"]                       # (B,T,C)
        hq = h[:, T - P:].contiguous()                           # (B,P,C): the queries. rows
        def split(t, n):
            return t.view(B, n, H, dk).transpose(1, 2)           # (B,H,n,dk)
        q, k, v = split(hq @ p["w_q"], P), split(h @ p["w_k"], T), split(h @ p["w_v"], T)
        if form == "sdpa":  # the same softmax(q·kᵀ/√dk)·v, no mask, no dropout
            av = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        else:
            av = torch.softmax((q @ k.transpose(-2, -1)) / math.sqrt(dk), dim=-1) @ v
        o = av.transpose(1, 2).reshape(B, P, C) @ p["w_o"]
        if N:  # the residual stream, then the MLP
            o = hq + o
            o = o + torch.relu(o @ p["w_in"] + p["b_in"]) @ p["w_out"] + p["b_out"]
        logits = o @ p["head_w"] + p["head_b"]
        if grok:
            loss = torch.nn.functional.cross_entropy(logits[:, -1], y)
        else:
            loss = torch.nn.functional.cross_entropy(logits.view(B * T, V), y.view(B * T))
        for t in p.values():
            t.grad = None
        loss.backward()
        if grok:
            opt.step()
        else:
            with torch.no_grad():
                for t in p.values():
                    t.sub_(0.01 * t.grad)
        return loss

    reset_peak_rss()
    rss_before = status_bytes("VmRSS")
    for _ in range(3):
        step()
    times = []
    start = time.perf_counter()
    while len(times) < 5 or time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    peak = status_bytes("VmHWM")
    ms = statistics.median(times) * 1e3
    return {
        "config": name,
        "threads": threads,
        "form": form,
        "ms_per_step": round(ms, 4),
        "gflops": round(3 * forward_flops(B, T, C, H, V, N, P) / (ms * 1e-3) * 1e-9, 2),
        "step_mem_mb": round((peak - rss_before) / 2**20, 2),
        "steps_timed": len(times),
        "torch": torch.__version__,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="all", choices=["all", *WORKLOADS])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--form", default="eager", choices=["eager", "sdpa"])
    ap.add_argument("--all-positions", action="store_true",
                    help="grok: every position through the model, the last one's logits taken")
    args = ap.parse_args()
    if args.form == "sdpa" and not HAS_SDPA:
        print(f"bench_torch: PyTorch {torch.__version__} has no scaled_dot_product_attention: "
              "--form sdpa skipped", file=sys.stderr)
        return
    torch.set_num_threads(args.threads)
    names = list(WORKLOADS) if args.config == "all" else [args.config]
    for name in names:
        print(json.dumps(run(name, args.threads, args.seconds, args.form, args.all_positions)),
              flush=True)


if __name__ == "__main__":
    main()
