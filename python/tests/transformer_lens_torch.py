"""transformer_lens_torch.py - HookedTransformer's forward pass rebuilt in PyTorch from what
qkv.export_transformer_lens writes (a state dict under TransformerLens's names, the fields of
a HookedTransformerConfig), every hook kept under its name.

TransformerLens itself cannot be installed here (no package registry): this is what its
HookedTransformer computes, as its components (Embed, PosEmbed, LayerNorm, Attention, MLP,
TransformerBlock, Unembed) define it, for the configs qkv exports: standard positional
embeddings, LayerNorm ("LN") or none, an MLP or attention only, causal or bidirectional
attention. If the export's names, shapes or conventions were not TransformerLens's, the
logits and the hooks here would not be qkv's. It reads the files with its own small
safetensors reader (json + numpy).
"""
import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F

_DTYPES = {"F32": "<f4", "F64": "<f8", "I32": "<i4"}


def read_safetensors(path):
    """name -> numpy array, and the metadata."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out = {}
    for name, d in header.items():
        begin, end = d["data_offsets"]
        a = np.frombuffer(data[begin:end], dtype=_DTYPES[d["dtype"]])
        out[name] = a.reshape(d["shape"]).copy()
    return out, meta


def load(out_dir):
    """(state dict of torch tensors, config dict) of an export directory."""
    sd, _ = read_safetensors(os.path.join(out_dir, "state_dict.safetensors"))
    with open(os.path.join(out_dir, "config.json")) as f:
        cfg = json.load(f)
    return {k: torch.from_numpy(v) for k, v in sd.items()}, cfg


_ACTS = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_new": lambda x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) *
                                                        (x + 0.044715 * torch.pow(x, 3.0)))),
}


def run(sd, cfg, tokens, dtype=torch.float64):
    """(logits, hooks: name -> tensor) of tokens (batch, pos), computed in `dtype` from the
    weights, as HookedTransformer's forward pass with every hook point recorded."""
    hooks = {}

    def hook(name, x):
        hooks[name] = x
        return x

    w = {k: v.to(dtype) for k, v in sd.items()}
    tokens = torch.as_tensor(np.asarray(tokens), dtype=torch.long)
    B, T = tokens.shape
    ln = cfg["normalization_type"] == "LN"
    eps = cfg["eps"]

    def layer_norm(x, prefix):
        x = x - x.mean(-1, keepdim=True)
        scale = hook(prefix + ".hook_scale", (x.pow(2).mean(-1, keepdim=True) + eps).sqrt())
        x = hook(prefix + ".hook_normalized", x / scale)
        return x * w[prefix + ".w"] + w[prefix + ".b"]

    embed = hook("hook_embed", w["embed.W_E"][tokens])
    pos = hook("hook_pos_embed", w["pos_embed.W_pos"][:T].unsqueeze(0).expand(B, T, -1))
    resid = embed + pos
    for l in range(cfg["n_layers"]):
        p = "blocks.%d." % l
        resid = hook(p + "hook_resid_pre", resid)
        x = layer_norm(resid, p + "ln1") if ln else resid
        q = hook(p + "attn.hook_q", torch.einsum("bpm,hmd->bphd", x, w[p + "attn.W_Q"]) +
                 w[p + "attn.b_Q"])
        k = hook(p + "attn.hook_k", torch.einsum("bpm,hmd->bphd", x, w[p + "attn.W_K"]) +
                 w[p + "attn.b_K"])
        v = hook(p + "attn.hook_v", torch.einsum("bpm,hmd->bphd", x, w[p + "attn.W_V"]) +
                 w[p + "attn.b_V"])
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(cfg["d_head"])
        if cfg["attention_dir"] == "causal":
            later = torch.ones(T, T, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(later, float("-inf"))
        scores = hook(p + "attn.hook_attn_scores", scores)
        pattern = F.softmax(scores, dim=-1)
        pattern = hook(p + "attn.hook_pattern", torch.where(torch.isnan(pattern),
                                                             torch.zeros_like(pattern), pattern))
        z = hook(p + "attn.hook_z", torch.einsum("bkhd,bhqk->bqhd", v, pattern))
        attn_out = hook(p + "hook_attn_out", torch.einsum("bqhd,hdm->bqm", z, w[p + "attn.W_O"])
                        + w[p + "attn.b_O"])
        if cfg["attn_only"]:
            resid = hook(p + "hook_resid_post", resid + attn_out)
            continue
        resid = hook(p + "hook_resid_mid", resid + attn_out)
        x = layer_norm(resid, p + "ln2") if ln else resid
        pre = hook(p + "mlp.hook_pre", x @ w[p + "mlp.W_in"] + w[p + "mlp.b_in"])
        post = hook(p + "mlp.hook_post", _ACTS[cfg["act_fn"]](pre))
        mlp_out = hook(p + "hook_mlp_out", post @ w[p + "mlp.W_out"] + w[p + "mlp.b_out"])
        resid = hook(p + "hook_resid_post", resid + mlp_out)
    x = layer_norm(resid, "ln_final") if ln else resid
    return x @ w["unembed.W_U"] + w["unembed.b_U"], hooks
