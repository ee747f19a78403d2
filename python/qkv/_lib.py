"""_lib.py - libqkv through ctypes: where the shared library is, the structs of include/qkv.h
that Python reads or fills, and the prototypes of the functions it calls.

The library is looked for, in this order:
  1. $QKV_LIBRARY, the path of libqkv.so (or libqkv.so.0) itself;
  2. the path `cmake --install` wrote into _install.py beside this file (relative to it);
  3. the source tree's build directory, ../../build/libqkv.so.0 from here (the README's
     `cmake -S . -B build`);
  4. libqkv.so.0 on the dynamic loader's path (ldconfig, LD_LIBRARY_PATH).

Each struct below copies its C layout, field for field; at import every copy's size is checked
against the library's own (qkv_struct_size), so that a layout changed in C is an ImportError
naming the struct, never wrong memory.
"""
import ctypes
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_bool, c_char, c_char_p, c_double, c_int,
                    c_int32, c_int64, c_size_t, c_uint32, c_uint64, c_void_p)

MAX_DIMS = 4
MAX_LAYERS = 8
MAX_PARAMS = 7 + 12 * MAX_LAYERS
LNS = 3

F32, F64, I32 = 0, 1, 2
(SITE_Z, SITE_Q, SITE_K, SITE_V, SITE_PATTERN, SITE_RESID_PRE, SITE_RESID_POST, SITE_RESID_MID,
 SITE_MLP_PRE, SITE_MLP_POST, SITE_MLP_OUT, SITE_LN_SCALE) = range(12)
LN_ATTN, LN_MLP, LN_FINAL = range(3)
HEAD_KEEP, HEAD_ZERO, HEAD_MEAN, HEAD_REPLACE = range(4)
TASK_TRANSLATE, TASK_DATA = 8, 10
NORM_LAYERNORM = 1


class Tensor(Structure):
    pass


TensorP = POINTER(Tensor)
Tensor._fields_ = [
    ("dtype", c_int), ("ndim", c_int), ("shape", c_int64 * MAX_DIMS), ("size", c_int64),
    ("data", c_void_p), ("grad", c_void_p), ("requires_grad", c_bool), ("op", c_int),
    ("src", TensorP * 4), ("fparam", c_double * 2), ("iparam", c_int64 * 4), ("saved", c_void_p),
    ("ctx", c_void_p), ("tape_prev", TensorP), ("name", c_char_p), ("mark", c_uint32),
    ("grad_written", c_uint32)]


class Rng(Structure):
    _fields_ = [("s", c_uint64 * 4)]


class ModelConfig(Structure):
    _fields_ = [("vocab", c_int), ("seq_len", c_int), ("d_model", c_int), ("heads", c_int),
                ("layers", c_int), ("residual", c_bool), ("causal", c_bool),
                ("init_scale", c_double), ("dtype", c_int), ("target_len", c_int), ("mlp", c_int),
                ("act", c_int), ("norm", c_int), ("init", c_int)]


_PER_LAYER = TensorP * MAX_LAYERS


class Model(Structure):
    _fields_ = [("cfg", ModelConfig), ("params", c_void_p), ("tok_emb", TensorP),
                ("pos_emb", TensorP), ("w_q", _PER_LAYER), ("w_k", _PER_LAYER),
                ("w_v", _PER_LAYER), ("w_o", _PER_LAYER), ("head_w", TensorP),
                ("head_b", TensorP), ("dec_pos_emb", TensorP), ("mlp_w_in", _PER_LAYER),
                ("mlp_b_in", _PER_LAYER), ("mlp_w_out", _PER_LAYER), ("mlp_b_out", _PER_LAYER),
                ("ln_attn_gain", _PER_LAYER), ("ln_attn_bias", _PER_LAYER),
                ("ln_mlp_gain", _PER_LAYER), ("ln_mlp_bias", _PER_LAYER),
                ("ln_final_gain", TensorP), ("ln_final_bias", TensorP), ("nparams", c_int),
                ("param", TensorP * MAX_PARAMS), ("param_name", (c_char * 32) * MAX_PARAMS)]


class Task(Structure):
    _fields_ = [("kind", c_int), ("seq_len", c_int), ("vocab", c_int), ("causal", c_bool),
                ("n_keys", c_int), ("n_values", c_int), ("n_pairs", c_int), ("n_outputs", c_int),
                ("target_len", c_int), ("modulus", c_int), ("n_train", c_int), ("op", c_int),
                ("train_frac", c_double), ("data_seed", c_uint64)]


class LayerTrace(Structure):
    _fields_ = [(name, TensorP) for name in
                ("q", "k", "v", "scores", "scaled", "masked", "weights", "head_out")]


class HeadEdit(Structure):
    _fields_ = [("kind", c_int), ("layer", c_int), ("head", c_int), ("position", c_int),
                ("value", TensorP), ("site", c_int), ("key_position", c_int), ("ln", c_int)]


# qkv_probe_hook: (user, site, layer, ln, y, step) -> the replacement (a qkv_tensor *) or NULL
HOOK = CFUNCTYPE(c_void_p, c_void_p, c_int, c_int, c_int, TensorP, c_void_p)


class Probe(Structure):
    _fields_ = [("edits", POINTER(HeadEdit)), ("n_edits", c_int),
                ("layer", LayerTrace * MAX_LAYERS), ("z", _PER_LAYER),
                ("stream", TensorP * (MAX_LAYERS + 1)), ("resid_post", _PER_LAYER),
                ("attn", _PER_LAYER), ("resid_mid", _PER_LAYER), ("mlp_pre", _PER_LAYER),
                ("mlp_post", _PER_LAYER), ("mlp_out", _PER_LAYER),
                ("ln_scale", (TensorP * LNS) * MAX_LAYERS), ("hook", HOOK),
                ("hook_user", c_void_p), ("attn_out", _PER_LAYER)]


STRUCTS = {"qkv_tensor": Tensor, "qkv_rng": Rng, "qkv_model_config": ModelConfig,
           "qkv_model": Model, "qkv_task": Task, "qkv_layer_trace": LayerTrace,
           "qkv_head_edit": HeadEdit, "qkv_probe": Probe}

_here = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    """The paths tried, in order, each with where it came from."""
    found = []
    env = os.environ.get("QKV_LIBRARY")
    if env:
        found.append((env, "$QKV_LIBRARY"))
        return found  # named: nothing else is tried
    try:
        from . import _install  # written by cmake --install
        found.append((os.path.normpath(os.path.join(_here, _install.LIBRARY)),
                      "the installed package's _install.py"))
    except ImportError:
        pass
    found.append((os.path.normpath(os.path.join(_here, "..", "..", "build", "libqkv.so.0")),
                  "the source tree's build/"))
    found.append(("libqkv.so.0", "the dynamic loader's path"))
    return found


def _open():
    tried = []
    for path, where in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append("%s (%s: no such file)" % (path, where))
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s: %s)" % (path, where, e))
    raise ImportError("qkv: cannot load libqkv; tried " + "; ".join(tried) +
                      ". Build it (cmake -S . -B build && cmake --build build) or set "
                      "QKV_LIBRARY to the path of libqkv.so")


lib, path = _open()


def _proto(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)


_proto("qkv_struct_size", c_size_t, c_char_p)
for _name, _struct in STRUCTS.items():
    _c = lib.qkv_struct_size(_name.encode())
    if _c != ctypes.sizeof(_struct):
        raise ImportError("qkv: %s is %d bytes in %s but %d in python/qkv/_lib.py: the package "
                          "and the library are of different versions (rebuild both from one "
                          "tree)" % (_name, _c, path, ctypes.sizeof(_struct)))

_proto("qkv_last_error", c_char_p)
_proto("qkv_ctx_new", c_void_p, c_size_t)
_proto("qkv_ctx_free", None, c_void_p)
_proto("qkv_ctx_reset", None, c_void_p)
_proto("qkv_ctx_set_no_grad", None, c_void_p, c_bool)
_proto("qkv_ctx_capacity", c_size_t, c_void_p)
_proto("qkv_from_array", TensorP, c_void_p, c_int, c_int, POINTER(c_int64), c_void_p)
_proto("qkv_get", c_double, TensorP, c_int64)
_proto("qkv_cross_entropy", TensorP, c_void_p, TensorP, TensorP, c_int32)
_proto("qkv_model_load", c_int, POINTER(Model), POINTER(Task), c_char_p)
_proto("qkv_model_free", None, POINTER(Model))
_proto("qkv_model_step_bytes", c_double, POINTER(ModelConfig), c_int)
_proto("qkv_model_forward_probe", TensorP, POINTER(Model), c_void_p, POINTER(c_int32),
       POINTER(c_int32), c_int, POINTER(Probe))
_proto("qkv_task_name", c_char_p, c_int)
_proto("qkv_task_token_label", None, POINTER(Task), c_int32, c_char_p, c_size_t)
_proto("qkv_task_targets", c_int, POINTER(Task), POINTER(c_int32), POINTER(c_int32))
_proto("qkv_task_sample", None, POINTER(Task), POINTER(Rng), c_bool, POINTER(c_int32),
       POINTER(c_int32))
_proto("qkv_rng_seed", Rng, c_uint64)
_proto("qkv_act_name", c_char_p, c_int)
_proto("qkv_norm_name", c_char_p, c_int)
_proto("qkv_st_load", c_int, c_char_p, POINTER(c_void_p))
_proto("qkv_st_free", None, c_void_p)
_proto("qkv_st_meta", c_char_p, c_void_p, c_char_p)
_proto("qkv_st_save", c_int, c_char_p, c_int, POINTER(c_char_p), POINTER(TensorP), c_int,
       POINTER(c_char_p))
_proto("qkv_threads", c_int)
_proto("qkv_set_threads", None, c_int)
_proto("qkv_simd_path", c_char_p)
_proto("qkv_simd_probe", c_bool, c_char_p, c_size_t)
_proto("qkv_simd_check_env", c_bool, c_char_p, c_size_t)


def last_error():
    return (lib.qkv_last_error() or b"").decode("utf-8", "replace")
