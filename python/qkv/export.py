"""export.py - a qkv model as TransformerLens loads one: its state dict under
HookedTransformer's names and shapes (safetensors) and its HookedTransformerConfig's fields
(JSON). docs/python.md, "Into TransformerLens", says how to load them."""
import ctypes
import json
import os
import tempfile

import numpy as np

from . import _lib
from ._lib import lib
from .model import HookedModel

STATE_DICT = "state_dict.safetensors"
CONFIG = "config.json"


def export_transformer_lens(model, out):
    """Writes out/state_dict.safetensors (HookedModel.state_dict(): every weight under
    HookedTransformer's names and shapes, in the model's dtype) and out/config.json (the
    HookedTransformerConfig keyword arguments, dtype as "float32" or "float64"); `model` is a
    run directory, a model.safetensors or a loaded HookedModel. out is made if missing. Each
    file is written whole or not at all. Returns the two paths.

    TransformerLens's blocks always add to the residual stream: a model trained without
    --residual has no such form, and is refused (ValueError)."""
    m = model if isinstance(model, HookedModel) else HookedModel(model)
    if not m.cfg.residual:
        raise ValueError("export_transformer_lens: %s was trained without --residual, but every "
                         "block of a HookedTransformer adds to the residual stream" % m.path)
    out = os.fspath(out)
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError("export_transformer_lens: %s is a file, not a directory" % out)
    os.makedirs(out, exist_ok=True)
    sd = m.state_dict()
    dtype = _lib.F64 if m.cfg.dtype == np.float64 else _lib.F32
    ctx = lib.qkv_ctx_new(0)
    if not ctx:
        raise MemoryError("export_transformer_lens: out of memory")
    try:
        names = (ctypes.c_char_p * len(sd))()
        tensors = (_lib.TensorP * len(sd))()
        keep = []
        for i, (name, a) in enumerate(sd.items()):
            a = np.ascontiguousarray(a, dtype=m.cfg.dtype)
            keep.append(a)
            shape = (ctypes.c_int64 * 4)(*a.shape)
            names[i] = name.encode()
            tensors[i] = lib.qkv_from_array(ctx, dtype, a.ndim, shape, a.ctypes.data)
        meta = (ctypes.c_char_p * 4)(b"format", b"transformer-lens-state-dict", b"source",
                                     m.path.encode())
        path = os.path.join(out, STATE_DICT)
        if lib.qkv_st_save(path.encode(), len(sd), names, tensors, 2, meta) != 0:
            raise OSError("export_transformer_lens: " + _lib.last_error())
    finally:
        lib.qkv_ctx_free(ctx)
    config = os.path.join(out, CONFIG)
    fd, tmp = tempfile.mkstemp(dir=out, prefix=".config.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(m.cfg.transformer_lens(), f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, config)
    except BaseException:
        os.unlink(tmp)
        raise
    return path, config
