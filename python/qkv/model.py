"""model.py - a saved qkv model in Python: load it, run it with every activation kept
(run_with_cache) or with hooks that edit them (run_with_hooks), read its weights, all under
TransformerLens's names and shapes (docs/python.md).

Every run is one call of the C library's forward pass with the probe
(qkv_model_forward_probe); a hook's edit goes through the probe's hook, which edits a site as
every analysis of qkv does (y·keep + put, src/model/model.c). Nothing of the forward pass is
computed here; the arrays of a cache are views of what the C forward wrote.
"""
import ctypes
import os
import re
import time
import warnings

import numpy as np

from . import _lib
from ._lib import lib
from .cache import ActivationCache, get_act_name

_DTYPES = {_lib.F32: np.dtype(np.float32), _lib.F64: np.dtype(np.float64),
           _lib.I32: np.dtype(np.int32)}
# qkv's activations -> TransformerLens's act_fn of the same function
_ACT_FNS = {"relu": "relu", "gelu": "gelu", "gelu-tanh": "gelu_pytorch_tanh"}
_POOLED_ARENAS = 2           # arenas a model keeps for its next runs
_POOLED_ARENA_BYTES = 1 << 30  # larger ones are freed, not kept


def set_threads(n):
    """The OpenMP threads of the C library (results do not depend on them)."""
    if not isinstance(n, int) or n < 1:
        raise ValueError("set_threads: %r is not a number of threads (1 or more)" % (n,))
    lib.qkv_set_threads(n)


def threads():
    return lib.qkv_threads()


def simd_path():
    """The SIMD path the C library runs ("avx512", "avx2", "neon" or "scalar")."""
    return lib.qkv_simd_path().decode()


_probed = False


def _simd_probe():
    """The CLI's start-up check of the SIMD path (qkv_simd_probe), once a process."""
    global _probed
    if _probed:
        return
    _probed = True
    msg = ctypes.create_string_buffer(512)
    if not lib.qkv_simd_check_env(msg, len(msg)):
        warnings.warn("qkv: " + msg.value.decode())
    if not lib.qkv_simd_probe(msg, len(msg)):
        warnings.warn("qkv: " + msg.value.decode())


_limit = None


def _memory_limit():
    """Bytes this process may use: the least of the physical memory, the cgroup's limit and
    ulimit -v (as the CLI's memory check, src/engine/memory.c); read once a process."""
    global _limit
    if _limit is None:
        _limit = _read_memory_limit()
    return _limit


def _read_memory_limit():
    limits = []
    try:
        limits.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError):
        pass
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
            if text.isdigit():
                limits.append(int(text))
        except OSError:
            pass
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            limits.append(soft)
    except (ImportError, ValueError, OSError):
        pass
    return min(limits) if limits else float("inf")


class _Pool(list):
    """A model's free arenas (qkv contexts, reset), for its next runs; closed with it."""
    closed = False


class _Arena:
    """A qkv context (arena) that holds one run's tensors; the arrays of its cache keep it
    alive. When the last goes, the arena goes back to its model's pool (reset: its memory is
    kept for the next run) or is freed."""
    __slots__ = ("ctx", "pool", "__weakref__")

    def __init__(self, pool, capacity):
        self.pool = pool
        # reserved, not touched: pages are mapped as the run writes them
        self.ctx = pool.pop() if pool else lib.qkv_ctx_new(int(capacity))
        if not self.ctx:
            raise MemoryError("qkv: out of memory for a run's arena")
        lib.qkv_ctx_set_no_grad(self.ctx, True)

    def __del__(self):
        ctx, self.ctx = self.ctx, None
        if not ctx or lib is None:
            return
        if (not self.pool.closed and len(self.pool) < _POOLED_ARENAS and
                lib.qkv_ctx_capacity(ctx) <= _POOLED_ARENA_BYTES):
            lib.qkv_ctx_reset(ctx)
            self.pool.append(ctx)
        else:
            lib.qkv_ctx_free(ctx)


class _Memory:
    """One tensor's memory as numpy sees it (the array interface), holding its arena."""
    __slots__ = ("__array_interface__", "arena")

    def __init__(self, t, arena):
        dtype = _DTYPES[t.dtype]
        self.__array_interface__ = {"shape": tuple(t.shape[:t.ndim]), "typestr": dtype.str,
                                    "data": (t.data, False), "version": 3}
        self.arena = arena


def _array(tp, arena):
    """The array of a qkv_tensor * (a view of its data, alive as long as `arena`)."""
    return np.asarray(_Memory(tp.contents, arena))


def _copy(tp):
    """A copy of a qkv_tensor *'s data."""
    t = tp.contents
    count = t.size * _DTYPES[t.dtype].itemsize
    raw = ctypes.string_at(t.data, count)
    return np.frombuffer(raw, dtype=_DTYPES[t.dtype]).reshape(tuple(t.shape[:t.ndim])).copy()


class HookPoint:
    """What a hook receives besides the activation, as TransformerLens's HookPoint: its name
    and layer."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def layer(self):
        m = re.match(r"blocks\.(\d+)\.", self.name)
        if not m:
            raise ValueError("%s is not a hook of a layer" % self.name)
        return int(m.group(1))

    def __repr__(self):
        return "HookPoint(%r)" % self.name


class Config:
    """A model's config: HookedTransformerConfig's fields (n_layers, d_model, n_ctx, d_head,
    n_heads, d_mlp, d_vocab, d_vocab_out, act_fn, normalization_type, attn_only,
    attention_dir, positional_embedding_type, eps), then qkv's own (task, dtype, residual,
    causal, seq_len, vocab, heads, layers, mlp, act, norm)."""

    def __init__(self, c, task_name):
        self.n_layers, self.d_model, self.n_heads = c.layers, c.d_model, c.heads
        self.d_head = c.d_model // c.heads
        self.n_ctx = c.seq_len
        self.d_vocab = self.d_vocab_out = c.vocab
        self.d_mlp = c.mlp if c.mlp > 0 else None
        self.act = lib.qkv_act_name(c.act).decode()
        self.act_fn = _ACT_FNS.get(self.act, self.act)
        self.norm = lib.qkv_norm_name(c.norm).decode()
        self.normalization_type = "LN" if c.norm == _lib.NORM_LAYERNORM else None
        self.attn_only = c.mlp == 0
        self.attention_dir = "causal" if c.causal else "bidirectional"
        self.positional_embedding_type = "standard"
        self.eps = 1e-5
        self.task = task_name
        self.dtype = _DTYPES[c.dtype]
        self.residual, self.causal = bool(c.residual), bool(c.causal)
        self.seq_len, self.vocab, self.heads, self.layers, self.mlp = (
            c.seq_len, c.vocab, c.heads, c.layers, c.mlp)

    def transformer_lens(self):
        """The HookedTransformerConfig keyword arguments of this model (dtype as a name:
        "float32" or "float64")."""
        return {"model_name": "qkv-" + self.task, "n_layers": self.n_layers,
                "d_model": self.d_model, "n_ctx": self.n_ctx, "d_head": self.d_head,
                "n_heads": self.n_heads, "d_mlp": self.d_mlp, "d_vocab": self.d_vocab,
                "d_vocab_out": self.d_vocab_out, "act_fn": self.act_fn, "eps": self.eps,
                "normalization_type": self.normalization_type, "attn_only": self.attn_only,
                "attention_dir": self.attention_dir,
                "positional_embedding_type": self.positional_embedding_type,
                "default_prepend_bos": False, "dtype": self.dtype.name}

    def __repr__(self):
        return "Config(%s)" % ", ".join("%s=%r" % kv for kv in vars(self).items())


# The layouts of a site, C's and TransformerLens's:
#   HEADS  C (B, H, T, D), TL (B, T, H, D): q, k, v, z
#   SQUARE (B, H, T, T) both: attn_scores, pattern
#   ROWS   (B, T, W) both: the stream, the MLP's, a LayerNorm's scale (W = 1)
HEADS, SQUARE, ROWS = range(3)


class Site:
    """One hook name of a model: where its value comes from, and whether a hook may edit it."""
    __slots__ = ("name", "layout", "site", "layer", "ln", "note")

    def __init__(self, name, layout, site=None, layer=0, ln=0, note=None):
        self.name, self.layout, self.site, self.layer, self.ln = name, layout, site, layer, ln
        self.note = note  # a read-only site: what to edit instead


class HookedModel:
    """A model that qkv train saved, loaded through the C library (qkv.load)."""

    def __init__(self, path):
        _simd_probe()
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError("qkv.load: %r is not a path" % (path,))
        path = os.fspath(path)
        file = os.path.join(path, "model.safetensors") if os.path.isdir(path) else path
        if not os.path.exists(file):
            raise FileNotFoundError("qkv.load: %s: no such file (a run directory, or its "
                                    "model.safetensors)" % file)
        self.path = file
        self._m = _lib.Model()
        self._task = _lib.Task()
        status = lib.qkv_model_load(ctypes.byref(self._m), ctypes.byref(self._task),
                                    file.encode())
        if status != 0:
            msg = "qkv.load: " + _lib.last_error()
            raise MemoryError(msg) if status == 5 else OSError(msg) if status == 1 \
                else ValueError(msg)
        self._loaded = True
        self._pool = _Pool()
        # the seconds the C forward pass of the last run took (its hooks' Python included)
        self.last_forward_seconds = None
        c = self._m.cfg
        if c.target_len:
            self.close()
            raise ValueError("qkv.load: %s is an encoder-decoder model (%d decoder positions): "
                             "the Python package reads self-attention models, as "
                             "TransformerLens does" % (file, c.target_len))
        self.is_data = self._task.kind == _lib.TASK_DATA
        self.cfg = Config(c, "data" if self.is_data else
                          lib.qkv_task_name(self._task.kind).decode())
        self.tokenizer = None
        self._names = self._token_names()
        self._ids = {name: i for i, name in enumerate(self._names)}
        self._sites = self._make_sites()
        self._by_site = {(s.site, s.layer, s.ln if s.site == _lib.SITE_LN_SCALE else 0): s
                         for s in self._sites.values() if s.site is not None}

    # ---- the model's own -------------------------------------------------------------
    def close(self):
        """Frees the C model now (else when the object goes)."""
        if getattr(self, "_loaded", False):
            self._loaded = False
            lib.qkv_model_free(ctypes.byref(self._m))
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.closed = True  # the arenas still in use are freed when their caches go
            for ctx in pool:
                lib.qkv_ctx_free(ctx)
            pool.clear()

    def __del__(self):
        if lib is not None:
            self.close()

    def __repr__(self):
        c = self.cfg
        return "qkv.HookedModel(%r: %s, %d layers of %d heads, d_model %d%s%s, %s)" % (
            self.path, c.task, c.n_layers, c.n_heads, c.d_model,
            ", MLP %d %s" % (c.d_mlp, c.act) if c.d_mlp else "",
            ", LayerNorm" if c.normalization_type else "", c.dtype.name)

    def _token_names(self):
        if self.is_data:  # id 0 is the padding; the file's tokens are 1.. (metadata "tokens")
            st = ctypes.c_void_p()
            if lib.qkv_st_load(self.path.encode(), ctypes.byref(st)) != 0:
                raise ValueError("qkv.load: " + _lib.last_error())
            try:
                text = lib.qkv_st_meta(st, b"tokens")
            finally:
                lib.qkv_st_free(st)
            names = ["<pad>"] + (text.decode("utf-8").split(" ") if text else [])
            if len(names) != self.cfg.d_vocab:
                raise ValueError("qkv.load: %s: its metadata names %d tokens for a vocabulary "
                                 "of %d" % (self.path, len(names), self.cfg.d_vocab))
            return names
        buf = ctypes.create_string_buffer(64)
        names = []
        for t in range(self.cfg.d_vocab):
            lib.qkv_task_token_label(ctypes.byref(self._task), t, buf, len(buf))
            names.append(buf.value.decode())
        return names

    @property
    def token_names(self):
        """Token id -> its name, as qkv's commands print it (a list)."""
        return list(self._names)

    def to_tokens(self, text):
        """Token ids (1, T) of one input typed as the commands read it ("3 9 14 ...": ids or
        labels, spaces between), or (B, T) of a list of them (all of one length)."""
        if isinstance(text, (list, tuple)):
            rows = [self.to_tokens(t)[0] for t in text]
            if not rows:
                raise ValueError("to_tokens: an empty list")
            if len({len(r) for r in rows}) > 1:
                raise ValueError("to_tokens: the inputs have different lengths (%s): a batch "
                                 "holds sequences of one length" %
                                 ", ".join(str(len(r)) for r in rows))
            return np.stack(rows)
        if not isinstance(text, str):
            raise TypeError("to_tokens: %r is not a string" % (text,))
        ids = []
        for i, word in enumerate(text.split()):
            t = self._word_id(word)
            if t < 0:
                what = ("a token of the model's vocabulary" if self.is_data else
                        "a token of %s (an id 0..%d or a label such as %s)" % (
                            self.cfg.task, self.cfg.d_vocab - 1, self._names[-1]))
                raise ValueError("to_tokens: word %d, %r, is not %s" % (i + 1, word, what))
            ids.append(t)
        if not ids:
            raise ValueError("to_tokens: no tokens in %r" % text)
        return np.array([ids], dtype=np.int32)

    def _word_id(self, word):
        if self.is_data:
            t = self._ids.get(word, -1)
            return t if t > 0 else -1  # the padding is no word of the file
        if re.fullmatch(r"[0-9]+", word):
            t = int(word)
            return t if t < self.cfg.d_vocab else -1
        return self._ids.get(word, -1)

    def sample_tokens(self, n, seed=1, heldout=True):
        """(tokens (n, n_ctx), targets (n, n_ctx)) of n sequences the model's task draws
        (qkv_task_sample, from `seed`): held-out ones, as qkv eval scores, or training ones;
        targets -1 where a position has none. A data file's model has no generator
        (ValueError)."""
        if self.is_data:
            raise ValueError("sample_tokens: a data file's model has no task to draw from")
        if not isinstance(n, int) or n < 1:
            raise ValueError("sample_tokens: %r is not a number of sequences (1 or more)" % (n,))
        T = self.cfg.n_ctx
        x = np.zeros((n, T), dtype=np.int32)
        y = np.zeros((n, T), dtype=np.int32)
        rng = lib.qkv_rng_seed(seed)
        i32p = ctypes.POINTER(ctypes.c_int32)
        for b in range(n):
            lib.qkv_task_sample(ctypes.byref(self._task), ctypes.byref(rng), bool(heldout),
                                x[b].ctypes.data_as(i32p), y[b].ctypes.data_as(i32p))
        return x, y

    def to_str_tokens(self, tokens):
        """The names of token ids: a list for one sequence (1-D, or (1, T)), a list of lists for
        a batch."""
        a = np.asarray(tokens)
        if a.ndim == 2 and a.shape[0] == 1:
            a = a[0]
        if a.ndim == 0:
            a = a[None]
        if not np.issubdtype(a.dtype, np.integer) or a.ndim > 2:
            raise ValueError("to_str_tokens: token ids are ints of 1 or 2 dims, not %s %s" % (
                a.dtype, a.shape))
        if a.size and (a.min() < 0 or a.max() >= self.cfg.d_vocab):
            raise ValueError("to_str_tokens: an id outside the vocabulary (0..%d)" %
                             (self.cfg.d_vocab - 1))
        if a.ndim == 2:
            return [[self._names[t] for t in row] for row in a.tolist()]
        return [self._names[t] for t in a.tolist()]

    # ---- the weights, in TransformerLens's shapes ------------------------------------------
    def _param(self, tp):
        if not self._loaded:
            raise ValueError("the model was closed")
        return _copy(tp)

    def _per_layer(self, field, f=lambda w: w):
        return np.stack([f(self._param(getattr(self._m, field)[l]))
                         for l in range(self.cfg.n_layers)])

    def _split_in(self, w):  # (C, C) in, out -> (H, C, Dk): head h's columns
        c = self.cfg
        return np.ascontiguousarray(w.reshape(c.d_model, c.n_heads, c.d_head).transpose(1, 0, 2))

    def _split_out(self, w):  # (C, C) -> (H, Dk, C): head h's rows
        c = self.cfg
        return w.reshape(c.n_heads, c.d_head, c.d_model).copy()

    @property
    def W_E(self):
        """(d_vocab, d_model): the token embedding."""
        return self._param(self._m.tok_emb)

    @property
    def W_pos(self):
        """(n_ctx, d_model): the positional embedding."""
        return self._param(self._m.pos_emb)

    @property
    def W_Q(self):
        """(n_layers, n_heads, d_model, d_head)."""
        return self._per_layer("w_q", self._split_in)

    @property
    def W_K(self):
        return self._per_layer("w_k", self._split_in)

    @property
    def W_V(self):
        return self._per_layer("w_v", self._split_in)

    @property
    def W_O(self):
        """(n_layers, n_heads, d_head, d_model)."""
        return self._per_layer("w_o", self._split_out)

    def _zeros(self, *shape):
        return np.zeros(shape, dtype=self.cfg.dtype)

    @property
    def b_Q(self):
        """(n_layers, n_heads, d_head): zeros (qkv's projections have no bias)."""
        c = self.cfg
        return self._zeros(c.n_layers, c.n_heads, c.d_head)

    b_K = b_Q
    b_V = b_Q

    @property
    def b_O(self):
        """(n_layers, d_model): zeros."""
        return self._zeros(self.cfg.n_layers, self.cfg.d_model)

    @property
    def W_U(self):
        """(d_model, d_vocab): the vocabulary head."""
        return self._param(self._m.head_w)

    @property
    def b_U(self):
        return self._param(self._m.head_b)

    def _need_mlp(self, what):
        if not self.cfg.d_mlp:
            raise AttributeError("%s: the model has no MLP (it was trained without --mlp)" % what)

    @property
    def W_in(self):
        """(n_layers, d_model, d_mlp)."""
        self._need_mlp("W_in")
        return self._per_layer("mlp_w_in")

    @property
    def b_in(self):
        self._need_mlp("b_in")
        return self._per_layer("mlp_b_in")

    @property
    def W_out(self):
        """(n_layers, d_mlp, d_model)."""
        self._need_mlp("W_out")
        return self._per_layer("mlp_w_out")

    @property
    def b_out(self):
        self._need_mlp("b_out")
        return self._per_layer("mlp_b_out")

    def state_dict(self):
        """Every weight under HookedTransformer's state-dict names and shapes (numpy copies):
        embed.W_E, pos_embed.W_pos, blocks.L.ln1.w/.b, blocks.L.attn.W_Q/W_K/W_V (n_heads,
        d_model, d_head), W_O (n_heads, d_head, d_model), b_Q/b_K/b_V (n_heads, d_head) and
        b_O (d_model) as zeros, blocks.L.ln2.w/.b, blocks.L.mlp.W_in/b_in/W_out/b_out,
        ln_final.w/.b, unembed.W_U, unembed.b_U (the LayerNorms' and the MLP's where the model
        has them). Not the attention's buffers (mask, IGNORE), which HookedTransformer makes
        itself."""
        c, m = self.cfg, self._m
        sd = {"embed.W_E": self.W_E, "pos_embed.W_pos": self.W_pos}
        ln = c.normalization_type == "LN"
        for l in range(c.n_layers):
            p = "blocks.%d." % l
            if ln:
                sd[p + "ln1.w"] = self._param(m.ln_attn_gain[l])
                sd[p + "ln1.b"] = self._param(m.ln_attn_bias[l])
            sd[p + "attn.W_Q"] = self._split_in(self._param(m.w_q[l]))
            sd[p + "attn.W_K"] = self._split_in(self._param(m.w_k[l]))
            sd[p + "attn.W_V"] = self._split_in(self._param(m.w_v[l]))
            sd[p + "attn.W_O"] = self._split_out(self._param(m.w_o[l]))
            for b in ("b_Q", "b_K", "b_V"):
                sd[p + "attn." + b] = self._zeros(c.n_heads, c.d_head)
            sd[p + "attn.b_O"] = self._zeros(c.d_model)
            if c.d_mlp:
                if ln:
                    sd[p + "ln2.w"] = self._param(m.ln_mlp_gain[l])
                    sd[p + "ln2.b"] = self._param(m.ln_mlp_bias[l])
                sd[p + "mlp.W_in"] = self._param(m.mlp_w_in[l])
                sd[p + "mlp.b_in"] = self._param(m.mlp_b_in[l])
                sd[p + "mlp.W_out"] = self._param(m.mlp_w_out[l])
                sd[p + "mlp.b_out"] = self._param(m.mlp_b_out[l])
        if ln:
            sd["ln_final.w"] = self._param(m.ln_final_gain)
            sd["ln_final.b"] = self._param(m.ln_final_bias)
        sd["unembed.W_U"] = self.W_U
        sd["unembed.b_U"] = self.b_U
        return sd

    # ---- hook names --------------------------------------------------------------------------
    def _make_sites(self):
        """Every hook name of the model, in the order of its forward pass."""
        c = self.cfg
        ln = c.normalization_type == "LN"
        s = [Site("hook_embed", ROWS, note="edit blocks.0.hook_resid_pre, embed + pos_embed"),
             Site("hook_pos_embed", ROWS, note="edit blocks.0.hook_resid_pre, embed + pos_embed")]
        for l in range(c.n_layers):
            p = "blocks.%d." % l
            s.append(Site(p + "hook_resid_pre", ROWS, _lib.SITE_RESID_PRE, l))
            if ln:
                s.append(Site(p + "ln1.hook_scale", ROWS, _lib.SITE_LN_SCALE, l, _lib.LN_ATTN))
                s.append(Site(p + "ln1.hook_normalized", ROWS, layer=l,
                              note="edit %sln1.hook_scale, or the stream before it" % p))
            s += [Site(p + "attn.hook_q", HEADS, _lib.SITE_Q, l),
                  Site(p + "attn.hook_k", HEADS, _lib.SITE_K, l),
                  Site(p + "attn.hook_v", HEADS, _lib.SITE_V, l),
                  Site(p + "attn.hook_attn_scores", SQUARE, layer=l,
                       note="edit %sattn.hook_pattern (after the softmax), or q and k" % p),
                  Site(p + "attn.hook_pattern", SQUARE, _lib.SITE_PATTERN, l),
                  Site(p + "attn.hook_z", HEADS, _lib.SITE_Z, l),
                  Site(p + "hook_attn_out", ROWS, layer=l,
                       note="edit %sattn.hook_z, or the stream after it (%s)" % (
                           p, p + ("hook_resid_mid" if c.d_mlp else "hook_resid_post")))]
            if c.d_mlp:
                s.append(Site(p + "hook_resid_mid", ROWS, _lib.SITE_RESID_MID, l))
                if ln:
                    s.append(Site(p + "ln2.hook_scale", ROWS, _lib.SITE_LN_SCALE, l, _lib.LN_MLP))
                    s.append(Site(p + "ln2.hook_normalized", ROWS, layer=l,
                                  note="edit %sln2.hook_scale, or mlp.hook_pre" % p))
                s += [Site(p + "mlp.hook_pre", ROWS, _lib.SITE_MLP_PRE, l),
                      Site(p + "mlp.hook_post", ROWS, _lib.SITE_MLP_POST, l),
                      Site(p + "hook_mlp_out", ROWS, _lib.SITE_MLP_OUT, l)]
            s.append(Site(p + "hook_resid_post", ROWS, _lib.SITE_RESID_POST, l))
        if ln:
            last = c.n_layers - 1
            s.append(Site("ln_final.hook_scale", ROWS, _lib.SITE_LN_SCALE, last, _lib.LN_FINAL))
            s.append(Site("ln_final.hook_normalized", ROWS, layer=last,
                          note="edit ln_final.hook_scale, or the stream before it"))
        return {site.name: site for site in s}

    @property
    def hook_names(self):
        """Every hook name of the model, in forward order."""
        return list(self._sites)

    @property
    def editable_hook_names(self):
        """The hook names a hook may edit: the sites of qkv's one intervention point."""
        return [n for n, s in self._sites.items() if s.site is not None]

    # ---- running it ----------------------------------------------------------------------------
    def _tokens(self, tokens, what):
        """tokens as int32 (B, T) C-contiguous, checked: every id in the vocabulary, every row
        of one length, T the model's seq_len (a data file's model: 1..seq_len)."""
        if isinstance(tokens, str):
            tokens = self.to_tokens(tokens)
        if isinstance(tokens, (list, tuple)) and tokens and all(
                isinstance(r, (list, tuple, np.ndarray)) for r in tokens):
            lengths = [len(r) for r in tokens]
            if len(set(lengths)) > 1:
                raise ValueError("%s: the batch's sequences have different lengths (%s): pass "
                                 "sequences of one length" % (what, ", ".join(map(str, lengths))))
        try:
            a = np.asarray(tokens)
        except (ValueError, TypeError) as e:
            raise ValueError("%s: the tokens are not a (batch, pos) array of ids: %s" % (what, e))
        if a.ndim == 1:
            a = a[None]
        c = self.cfg
        if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
            raise ValueError("%s: the tokens are %s, not (batch, pos) with a sequence or more" % (
                what, a.shape))
        if a.dtype == np.bool_ or not np.issubdtype(a.dtype, np.integer):
            raise ValueError("%s: the tokens are %s: token ids are integers" % (what, a.dtype))
        B, T = a.shape
        if self.is_data and T > c.n_ctx:
            raise ValueError("%s: %d tokens a sequence, more than the model's %d (its data "
                             "file's longest input)" % (what, T, c.n_ctx))
        if not self.is_data and T != c.n_ctx:
            raise ValueError("%s: %d tokens a sequence: a %s model reads exactly %d (its "
                             "--seq-len)" % (what, T, c.task, c.n_ctx))
        lo = 1 if self.is_data else 0
        if a.min() < lo or a.max() >= c.d_vocab:
            b, i = np.argwhere((a < lo) | (a >= c.d_vocab))[0]
            raise ValueError("%s: token %d at [%d, %d] is outside the vocabulary (%d..%d%s)" % (
                what, a[b, i], b, i, lo, c.d_vocab - 1,
                ", id 0 is the padding" if self.is_data else ""))
        if B > 2**31 - 1:
            raise ValueError("%s: %d sequences is too many for one run" % (what, B))
        return np.ascontiguousarray(a, dtype=np.int32)

    def _run(self, tokens, hooks, what):
        """One forward pass of the C library through the probe, with `hooks` (name -> list of
        functions) called at their sites. Returns (arena, probe, logits tensor, the tokens
        (B, T) as typed, the errors hooks raised)."""
        if not self._loaded:
            raise ValueError("%s: the model was closed" % what)
        x = self._tokens(tokens, what)
        c = self.cfg
        B, T = x.shape
        need = lib.qkv_model_step_bytes(ctypes.byref(self._m.cfg), B)
        have = _memory_limit()
        if need > have / 2:
            raise MemoryError("%s: %d sequences need about %.0f MiB, more than half of the "
                              "%.0f MiB this process may use: run fewer at a time" % (
                                  what, B, need / 2**20, have / 2**20))
        lengths, typed = None, x
        if self.is_data:  # padded as the commands pad a data file's input
            if T < c.n_ctx:
                x = np.concatenate([x, np.zeros((B, c.n_ctx - T), dtype=np.int32)], axis=1)
            lengths = np.full(B, T, dtype=np.int32)
        arena = _Arena(self._pool, need)
        probe = _lib.Probe()
        errors = []
        if hooks:
            callback = _lib.HOOK(lambda user, site, layer, ln, y, step: self._on_site(
                hooks, errors, site, layer, ln, y, step, T))
            probe.hook = callback
        i32p = ctypes.POINTER(ctypes.c_int32)
        start = time.perf_counter()
        logits = lib.qkv_model_forward_probe(
            ctypes.byref(self._m), arena.ctx, x.ctypes.data_as(i32p),
            lengths.ctypes.data_as(i32p) if lengths is not None else None, B,
            ctypes.byref(probe))
        self.last_forward_seconds = time.perf_counter() - start
        return arena, probe, logits, typed, errors

    def _site_of(self, site, layer, ln):
        """The Site of a C site (qkv_site, layer, and for ln_scale its LayerNorm)."""
        return self._by_site.get((site, layer, ln if site == _lib.SITE_LN_SCALE else 0))

    def _on_site(self, hooks, errors, site, layer, ln, y, step, T):
        """The probe's hook (qkv_probe_hook): the Python hooks of this site, if any, on a copy
        of its value in TransformerLens's layout; their result back in C's layout, as a tensor
        of the step, or None (NULL) to leave the site as it is."""
        if errors:
            return None  # a hook failed: the run finishes unedited, then raises
        try:
            s = self._site_of(site, layer, ln)
            fns = hooks.get(s.name) if s else None
            if not fns:
                return None
            raw = np.asarray(_Memory(y.contents, None))  # C layout, full length: y itself
            given = self._to_tl(s, raw, T)
            act = given.copy()
            for fn in fns:
                out = fn(act, hook=HookPoint(s.name))
                act = self._check_hook_value(s, act if out is None else out, given.shape)
            new = self._from_tl(s, act, given, raw, T)
            if new is None:
                return None
            shape = (ctypes.c_int64 * 4)(*raw.shape)
            t = lib.qkv_from_array(step, y.contents.dtype, raw.ndim, shape, new.ctypes.data)
            return ctypes.cast(t, ctypes.c_void_p).value
        except BaseException as e:  # raised after the C call returns, never across it
            errors.append(e)
            return None

    def _to_tl(self, s, raw, T):
        """A site's array in C's layout -> TransformerLens's (a view; cropped to the T typed
        positions of a data file's padded input). A LayerNorm's scale becomes sigma = 1/s."""
        if s.layout == HEADS:
            v = raw[:, :, :T].transpose(0, 2, 1, 3)
        elif s.layout == SQUARE:
            v = raw[:, :, :T, :T]
        else:
            v = raw[:, :T]
        if s.site == _lib.SITE_LN_SCALE:
            with np.errstate(divide="ignore"):
                v = np.reciprocal(v)
        return v

    def _check_hook_value(self, s, a, shape):
        dtype = self.cfg.dtype
        if not isinstance(a, np.ndarray):
            if hasattr(a, "detach") and hasattr(a, "numpy"):  # a torch tensor
                a = a.detach().cpu().numpy()
            else:
                raise ValueError("run_with_hooks: the hook on %s returned %s, not a numpy array "
                                 "(or None after editing its argument in place)" % (
                                     s.name, type(a).__name__))
        if a.shape != shape:
            raise ValueError("run_with_hooks: the hook on %s returned shape %s, not %s" % (
                s.name, a.shape, shape))
        if a.dtype != dtype:
            raise ValueError("run_with_hooks: the hook on %s returned %s, not the model's %s "
                             "(convert it: .astype(np.%s))" % (s.name, a.dtype, dtype, dtype))
        if s.site == _lib.SITE_LN_SCALE:
            if not np.all(a > 0):  # NaN fails too; +inf (s = 0) is qkv's zero ablation
                raise ValueError("run_with_hooks: the hook on %s returned a scale sigma that is "
                                 "not > 0 (or NaN): sigma is sqrt(var + eps)" % s.name)
        elif not np.all(np.isfinite(a)):
            raise ValueError("run_with_hooks: the hook on %s returned a value that is not "
                             "finite (NaN or inf) at %s" % (
                                 s.name, tuple(int(i) for i in np.argwhere(~np.isfinite(a))[0])))
        return a

    def _from_tl(self, s, act, given, raw, T):
        """The hooks' result in C's layout, over the full (padded) length, or None when it is
        the value they were given, bit for bit. A scale: s = 1/sigma where sigma changed."""
        bits = np.uint64 if act.dtype == np.float64 else np.uint32  # any strides: same width
        changed = act.view(bits) != given.view(bits)
        if not changed.any():
            return None
        new = raw.copy()
        if s.site == _lib.SITE_LN_SCALE:
            act = np.where(changed, np.reciprocal(act), raw[:, :T])
        if s.layout == HEADS:
            new[:, :, :T] = act.transpose(0, 2, 1, 3)
        elif s.layout == SQUARE:
            new[:, :, :T, :T] = act
        else:
            new[:, :T] = act
        return new

    def _logits(self, arena, logits, T):
        return _array(logits, arena)[:, :T]

    def _cache(self, arena, probe, x, names):
        """The ActivationCache of a run of tokens x (B, T): views of the probe's tensors
        (made when first read where computed)."""
        T = x.shape[1]
        c = self.cfg
        dtype = c.dtype

        def view(tp):
            return _array(tp, arena)

        entries = {}
        want = (lambda n: True) if names is None else names
        for name, s in self._sites.items():
            if not want(name):
                continue
            l = s.layer
            if name == "hook_embed":
                entries[name] = lambda x=x: self._param(self._m.tok_emb)[x[:, :T]]
            elif name == "hook_pos_embed":
                B = x.shape[0]
                entries[name] = lambda B=B: np.broadcast_to(
                    self._param(self._m.pos_emb)[:T], (B, T, c.d_model))
            elif s.layout == HEADS:
                tr = probe.layer[l]
                tp = {_lib.SITE_Q: tr.q, _lib.SITE_K: tr.k, _lib.SITE_V: tr.v,
                      _lib.SITE_Z: tr.head_out}[s.site]
                entries[name] = view(tp)[:, :, :T].transpose(0, 2, 1, 3)
            elif name.endswith("attn.hook_attn_scores"):
                entries[name] = view(probe.layer[l].masked)[:, :, :T, :T]
            elif s.site == _lib.SITE_PATTERN:
                entries[name] = view(probe.layer[l].weights)[:, :, :T, :T]
            elif name.endswith("hook_attn_out"):
                entries[name] = view(probe.attn_out[l])[:, :T]
            elif s.site == _lib.SITE_LN_SCALE:
                entries[name] = lambda tp=probe.ln_scale[l][s.ln]: np.reciprocal(view(tp)[:, :T])
            elif name.endswith("hook_normalized"):
                ln = {"ln1": _lib.LN_ATTN, "ln2": _lib.LN_MLP}.get(name.split(".")[-2],
                                                                  _lib.LN_FINAL)
                stream = (probe.stream[l] if ln == _lib.LN_ATTN else probe.resid_mid[l]
                          if ln == _lib.LN_MLP else probe.stream[c.n_layers])
                entries[name] = lambda st=stream, sc=probe.ln_scale[l][ln]: _normalized(
                    view(st)[:, :T], view(sc)[:, :T], dtype)
            else:
                tp = {_lib.SITE_RESID_PRE: probe.stream[l], _lib.SITE_RESID_POST:
                      probe.resid_post[l], _lib.SITE_RESID_MID: probe.resid_mid[l],
                      _lib.SITE_MLP_PRE: probe.mlp_pre[l], _lib.SITE_MLP_POST: probe.mlp_post[l],
                      _lib.SITE_MLP_OUT: probe.mlp_out[l]}[s.site]
                entries[name] = view(tp)[:, :T]
        return ActivationCache(entries, c.n_layers)

    def _hook_table(self, fwd_hooks, what):
        """fwd_hooks [(name or filter, fn)] -> (editable: name -> [fn], read-only: [(name,
        fn)]), names checked."""
        if fwd_hooks is None:
            return {}, []
        if isinstance(fwd_hooks, tuple) and len(fwd_hooks) == 2 and callable(fwd_hooks[1]):
            fwd_hooks = [fwd_hooks]
        edit, look = {}, []
        for item in fwd_hooks:
            if not (isinstance(item, (tuple, list)) and len(item) == 2 and callable(item[1])):
                raise ValueError("%s: fwd_hooks holds (name, function) pairs, not %r" % (
                    what, item))
            key, fn = item
            if callable(key):
                names = [n for n in self._sites if key(n)]
            elif isinstance(key, str):
                name = get_act_name(key)
                if name not in self._sites:
                    raise KeyError("%s: %r is not a hook of this model; its hooks are: %s" % (
                        what, key, ", ".join(self._sites)))
                names = [name]
            else:
                raise ValueError("%s: a hook's name is a str or a filter function, not %r" % (
                    what, key))
            for name in names:
                if self._sites[name].site is None:
                    look.append((name, fn))
                else:
                    edit.setdefault(name, []).append(fn)
        return edit, look

    def _names_filter(self, names_filter):
        if names_filter is None:
            return None
        if callable(names_filter):
            return names_filter
        wanted = [names_filter] if isinstance(names_filter, str) else list(names_filter)
        full = set()
        for n in wanted:
            name = get_act_name(n)
            if name not in self._sites:
                raise KeyError("names_filter: %r is not a hook of this model; its hooks are: %s" %
                               (n, ", ".join(self._sites)))
            full.add(name)
        return full.__contains__

    def run_with_cache(self, tokens, names_filter=None, fwd_hooks=None):
        """(logits, cache) of tokens (batch, pos): logits (batch, pos, d_vocab) and an
        ActivationCache of every hook (or those names_filter keeps: a name, a list of names or
        a function of a name), in TransformerLens's names and shapes, in the model's dtype.
        With fwd_hooks (qkv's own, as run_with_hooks), the cache is of the edited run."""
        edit, look = self._hook_table(fwd_hooks, "run_with_cache")
        keep = self._names_filter(names_filter)
        arena, probe, logits, x, errors = self._run(tokens, edit, "run_with_cache")
        if errors:
            raise errors[0]
        cache = self._cache(arena, probe, x, keep)
        if look:
            full = cache if keep is None else self._cache(arena, probe, x, None)
            self._look(look, full, "run_with_cache")
        return self._logits(arena, logits, x.shape[1]), cache

    def run_with_hooks(self, tokens, fwd_hooks=(), return_type="logits"):
        """The logits (batch, pos, d_vocab) of tokens with each hook of fwd_hooks [(name, fn)]
        applied: fn(activation, hook) gets a copy of the activation in TransformerLens's shape
        and returns its replacement (or None, having edited it in place). The edit goes
        through the C library's one intervention point. Hooks on the names qkv computes but
        does not edit (hook_embed, hook_pos_embed, attn.hook_attn_scores, hook_attn_out,
        hook_normalized) may look, not edit: they run after the forward pass."""
        if return_type not in ("logits", None):
            raise ValueError("run_with_hooks: return_type %r: qkv returns 'logits' or None" %
                             (return_type,))
        edit, look = self._hook_table(fwd_hooks, "run_with_hooks")
        arena, probe, logits, x, errors = self._run(tokens, edit, "run_with_hooks")
        if errors:
            raise errors[0]
        if look:
            self._look(look, self._cache(arena, probe, x, None), "run_with_hooks")
        return self._logits(arena, logits, x.shape[1]) if return_type == "logits" else None

    def _look(self, look, cache, what):
        for name, fn in look:
            given = np.array(cache[name])
            act = given.copy()
            out = fn(act, hook=HookPoint(name))
            out = act if out is None else out
            if not (isinstance(out, np.ndarray) and out.shape == given.shape and
                    out.dtype == given.dtype and out.tobytes() == given.tobytes()):
                raise ValueError("%s: the hook on %s changed it, but qkv computes %s without "
                                 "an edit point: a hook there may only look (%s)" % (
                                     what, name, name, self._sites[name].note))

    def __call__(self, tokens):
        """The logits (batch, pos, d_vocab), as a HookedTransformer called on tokens."""
        arena, probe, logits, x, errors = self._run(tokens, {}, "forward")
        return self._logits(arena, logits, x.shape[1])

    forward = __call__


def _normalized(x, s, dtype):
    """TransformerLens's hook_normalized: (x - mean) / sigma = (x - mean)·s, the LayerNorm
    before its gain and bias; qkv never forms it (its apply multiplies by s, the gain and adds
    the bias in one op), so it is computed here, in double, rounded to the model's dtype."""
    x64 = x.astype(np.float64)
    return ((x64 - x64.mean(axis=-1, keepdims=True)) * s.astype(np.float64)).astype(dtype)


def load(path):
    """A model qkv train saved: its run directory, or its model.safetensors."""
    return HookedModel(path)
