#!/usr/bin/env python3
"""induction.py - docs/python.md's walk through the induction model, as one script: every
block of the page in order, printing what the page shows.

usage: build/qkv train --task induction --out runs/induction
       PYTHONPATH=python python3 python/examples/induction.py runs/induction
"""
import sys

import numpy as np

import qkv

run = sys.argv[1] if len(sys.argv) > 1 else "runs/induction"

# ---- 1. the model ----
m = qkv.load(run)
print(m)
print(m.cfg.n_layers, m.cfg.n_heads, m.cfg.d_head, m.cfg.n_ctx, m.cfg.d_vocab, m.cfg.act_fn,
      m.cfg.normalization_type, m.cfg.attention_dir)
tokens = m.to_tokens("3 9 14 5 7 11 2 8 3 9 14 5 7 11 2 8")
print(tokens.shape, tokens.dtype)

# ---- 2. the cache ----
logits, cache = m.run_with_cache(tokens)
print(logits.shape, len(cache), list(cache.keys())[:6])
print(cache["z", 1].shape, cache["pattern", 1].shape, cache["blocks.1.attn.hook_pattern"] is
      cache["pattern", 1])
print(" ".join(m.to_str_tokens(logits[0].argmax(-1))))

# ---- 3. the patterns: previous-token and induction heads ----
T = m.cfg.n_ctx
for l in range(m.cfg.n_layers):
    p = cache["pattern", l][0]                       # (head, query, key)
    prev = p[:, np.arange(1, T), np.arange(T - 1)].mean(-1)
    half = T // 2                                    # the repeat: query i, its copy's successor
    ind = p[:, np.arange(half, T), np.arange(half, T) - half + 1].mean(-1)
    for h in range(m.cfg.n_heads):
        print("head %d.%d  previous-token %.3f  induction %.3f" % (l + 1, h + 1, prev[h], ind[h]))

# ---- 4. patching by hooks ----
clean = m.to_tokens("3 9 14 5 7 11 2 8 3 9 14 5 7 11 2 8")
corrupt = m.to_tokens("6 12 1 10 4 13 0 15 3 9 14 5 7 11 2 8")
pos, answer, wrong = 14, 8, 12


def metric(logits):
    return float(logits[0, pos, answer]) - float(logits[0, pos, wrong])


clean_logits, clean_cache = m.run_with_cache(clean)
m_clean, m_corrupt = metric(clean_logits), metric(m(corrupt))
print("clean %.4f  corrupted %.4f" % (m_clean, m_corrupt))
for l in range(m.cfg.n_layers):
    for h in range(m.cfg.n_heads):
        def patch_head(z, hook, h=h):
            z[:, :, h] = clean_cache[hook.name][:, :, h]   # (batch, pos, head, d_head)
            return z
        patched = m.run_with_hooks(corrupt, fwd_hooks=[(qkv.get_act_name("z", l), patch_head)])
        print("head %d.%d  %.6f" % (l + 1, h + 1,
                                    (metric(patched) - m_corrupt) / (m_clean - m_corrupt)))

# ---- 5. over a dataset ----
x, y = m.sample_tokens(1000, seed=1)                 # held-out sequences and their targets
has = y >= 0
print("accuracy %.4f over %d targets" % ((m(x).argmax(-1) == y)[has].mean(), has.sum()))
for l in range(m.cfg.n_layers):
    for h in range(m.cfg.n_heads):
        def zero(z, hook, h=h):
            z[:, :, h] = 0
        acc = (m.run_with_hooks(x, [(qkv.get_act_name("z", l), zero)]).argmax(-1) == y)[has]
        print("head %d.%d zeroed: accuracy %.4f" % (l + 1, h + 1, acc.mean()))

# ---- 6. the weights ----
print(m.W_Q.shape, m.W_O.shape, m.W_E.shape, m.W_U.shape)
ov = m.W_E @ m.W_V[1, 0] @ m.W_O[1, 0] @ m.W_U    # head 2.1's OV circuit, (d_vocab, d_vocab)
print("OV circuit of head 2.1: the diagonal is its row's largest for %d of %d tokens" % (
    (ov.argmax(-1) == np.arange(m.cfg.d_vocab)).sum(), m.cfg.d_vocab))

# ---- 7. into TransformerLens ----
print(qkv.export_transformer_lens(run, run + "/transformer_lens"))
