"""qkv - a saved qkv model from Python, as TransformerLens's HookedTransformer reads one.

    import qkv
    m = qkv.load("runs/induction")                  # the run directory, or its model.safetensors
    tokens = m.to_tokens("3 9 14 5 7 11 2 8 3 9 14 5 7 11 2 8")
    logits, cache = m.run_with_cache(tokens)        # numpy arrays under TransformerLens's names
    cache["pattern", 1]                             # blocks.1.attn.hook_pattern (batch, head, q, k)
    m.run_with_hooks(tokens, fwd_hooks=[("blocks.1.attn.hook_z", fn)])
    qkv.export_transformer_lens("runs/induction", "runs/induction/tl")

Everything runs in the C library (libqkv) through ctypes; docs/python.md walks through it.
"""
from .cache import ActivationCache, get_act_name
from .export import export_transformer_lens
from .model import Config, HookedModel, HookPoint, load, set_threads, simd_path, threads
from . import _lib

library_path = _lib.path  # the libqkv this package runs

__all__ = ["load", "HookedModel", "ActivationCache", "HookPoint", "Config", "get_act_name",
           "export_transformer_lens", "set_threads", "threads", "simd_path", "library_path"]
