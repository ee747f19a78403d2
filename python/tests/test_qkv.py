#!/usr/bin/env python3
"""test_qkv.py - the Python package against the qkv commands, to the bit.

  run_with_cache's arrays      = qkv inspect --json's q, k, v, S/sqrt(d_k), A, A·V
  a hook zeroing a head's z    = the probe's zero edit (what qkv ablate runs): logits; and
                                 qkv ablate --site z --data's loss and accuracy
  a hook patching z from a     = qkv patch --method exact's share of every head
  clean cache
  a batch                      = its rows run one at a time (every activation, the logits)
  the TransformerLens export   = loaded into HookedTransformer's forward pass rebuilt in
                                 PyTorch (transformer_lens_torch.py): logits and every hook
  bad input                    = a ValueError / KeyError with one message, never a crash

on small models trained here (a few steps: the numbers need a model, not a good one): the
induction model in f32 and f64, transformer blocks (MLP, LayerNorm; f32 non-causal, f64
causal), a data file's model (its padded inputs). Needs QKV_BIN (the qkv command) and the
package on PYTHONPATH (QKV_LIBRARY: the libqkv it runs); the export's part needs torch (else
skipped).

usage: QKV_BIN=build/qkv PYTHONPATH=python python3 python/tests/test_qkv.py
"""
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
except ImportError as e:
    print("test_qkv: skipping: %s (the package needs numpy: Debian's python3-numpy)" % e)
    sys.exit(77)

import qkv
from qkv import _lib

QKV = os.environ.get("QKV_BIN", "build/qkv")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # transformer_lens_torch
DATA = os.path.join(HERE, "..", "..", "tests", "data", "swap_pairs.tsv")
CLEAN = "3 9 14 5 7 11 2 8 3 9 14 5 7 11 2 8"
CORRUPT = "6 12 1 10 4 13 0 15 3 9 14 5 7 11 2 8"

# name -> qkv train's options (each trains in well under a second on one thread)
MODELS = {
    "ind32": "--task induction --steps 10",
    "ind64": "--task induction --steps 10 --dtype f64",
    "blk32": "--task reverse --d-model 32 --heads 2 --layers 2 --mlp 64 --norm layernorm "
             "--act gelu --residual --steps 10",
    "blk64": "--task shift --d-model 32 --heads 2 --layers 2 --mlp 48 --norm layernorm "
             "--act gelu-tanh --residual --steps 10 --dtype f64",
    "data": "--data %s --steps 10" % DATA,
}


def qkv_cmd(*args):
    r = subprocess.run([QKV] + list(args), capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError("qkv %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr))
    return r.stdout


def cjson_number(d):
    """The text cJSON prints for the double d (its print_number: an integral value as an int,
    else 15 significant digits when they read back within DBL_EPSILON, else 17)."""
    d = float(d)
    vi = 2147483647 if d >= 2147483647 else -2147483648 if d <= -2147483648 else int(d)
    if d == float(vi):
        return "%d" % vi
    text = "%1.15g" % d
    back = float(text)
    if abs(back - d) <= max(abs(back), abs(d)) * sys.float_info.epsilon:
        return text
    return "%1.17g" % d


def json_text(text):
    """A JSON object whose numbers are kept as the text qkv printed."""
    return json.loads(text, parse_float=str, parse_int=str)


def printed(a):
    """An array as cJSON prints it: nested lists of number texts."""
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 0:
        return cjson_number(a)
    return [printed(x) for x in a]


def same_bits(a, b):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


class PackageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="qkv_python.")
        cls.path, cls.m = {}, {}
        for name, opts in MODELS.items():
            out = os.path.join(cls.dir, name)
            qkv_cmd("train", *opts.split(), "--eval-every", "10", "--threads", "1", "--quiet",
                    "--out", out)
            cls.path[name] = out
            cls.m[name] = qkv.load(out)

    @classmethod
    def tearDownClass(cls):
        cls.m.clear()
        shutil.rmtree(cls.dir)

    def inputs(self, name, n, seed):
        """n random rows of token ids of model `name` (a data model's: ids 1..)."""
        m = self.m[name]
        lo = 1 if m.is_data else 0
        T = 4 if m.is_data else m.cfg.n_ctx
        return np.random.default_rng(seed).integers(lo, m.cfg.d_vocab, size=(n, T))

    # ---- run_with_cache = inspect -------------------------------------------------------
    def test_cache_is_inspect(self):
        for name, m in self.m.items():
            with self.subTest(model=name):
                text = CLEAN if name.startswith("ind") else \
                    " ".join(m.to_str_tokens(self.inputs(name, 1, 7)[0]))
                out = json_text(qkv_cmd("inspect", self.path[name], "--input", text, "--json"))
                logits, cache = m.run_with_cache(m.to_tokens(text))
                self.assertEqual(logits.dtype, m.cfg.dtype)
                self.assertEqual(cache["z", 0].dtype, m.cfg.dtype)
                T = len(text.split())
                self.assertEqual(logits.shape, (1, T, m.cfg.d_vocab))
                for head in out["attention"]:
                    l, h = int(head["layer"]) - 1, int(head["head"]) - 1
                    for part, key in (("q", "q"), ("k", "k"), ("v", "v"), ("out", "z")):
                        self.assertEqual(head[part], printed(cache[key, l][0, :, h]),
                                         (name, part, l, h))
                    # TransformerLens's attn_scores are S/sqrt(d_k) + M: -inf where masked
                    scores = cache["attn_scores", l][0, h]
                    masked = np.isinf(scores)
                    pattern = cache["pattern", l][0, h]
                    self.assertTrue(np.all(pattern[masked] == 0))  # inspect's nulls
                    self.assertEqual(head["weights"], [[None if masked[i, j] else v for j, v
                                                        in enumerate(row)] for i, row in
                                                       enumerate(printed(pattern))])
                    self.assertTrue(np.all(scores[masked] < 0))
                    self.assertEqual(masked.any(), m.cfg.attention_dir == "causal")
                    scaled = np.array(head["scaled"], dtype=object)
                    self.assertEqual(scaled[~masked].tolist(), [cjson_number(v) for v in
                                                                scores[~masked]])
                    if m.cfg.dtype == np.float32:  # 15 digits name every float: the same bits
                        self.assertTrue(same_bits(np.array(head["q"], dtype=np.float64).astype(
                            np.float32), cache["q", l][0, :, h]))
                # the predictions inspect prints are the logits' argmax
                self.assertEqual([int(p["class"]) for p in out["predictions"]],
                                 logits[0].argmax(-1).tolist())

    # ---- hooks = the intervention point ----------------------------------------------------
    def probe_logits(self, m, x, edits):
        """Logits of the C probe with qkv_head_edit's (what qkv ablate and patch run)."""
        arr = (_lib.HeadEdit * len(edits))(*edits)
        probe = _lib.Probe(edits=arr, n_edits=len(edits))
        ctx = _lib.lib.qkv_ctx_new(0)
        x = np.ascontiguousarray(x, dtype=np.int32)
        try:
            t = _lib.lib.qkv_model_forward_probe(ctypes.byref(m._m), ctx, x.ctypes.data_as(
                ctypes.POINTER(ctypes.c_int32)), None, x.shape[0], ctypes.byref(probe))
            return qkv.model._copy(t)
        finally:
            _lib.lib.qkv_ctx_free(ctx)

    def c_loss(self, m, logits, targets):
        """qkv ablate's loss of a batch: the library's cross entropy, weighted as
        explain_score_set weights it (loss · counted / counted)."""
        ctx = _lib.lib.qkv_ctx_new(0)
        try:
            dtype = _lib.F64 if logits.dtype == np.float64 else _lib.F32
            lt = _lib.lib.qkv_from_array(ctx, dtype, 3, (ctypes.c_int64 * 4)(*logits.shape),
                                         np.ascontiguousarray(logits).ctypes.data)
            y = np.ascontiguousarray(targets, dtype=np.int32)
            yt = _lib.lib.qkv_from_array(ctx, _lib.I32, 2, (ctypes.c_int64 * 4)(*y.shape),
                                         y.ctypes.data)
            loss = _lib.lib.qkv_get(_lib.lib.qkv_cross_entropy(ctx, lt, yt, -1), 0)
        finally:
            _lib.lib.qkv_ctx_free(ctx)
        counted = int((targets >= 0).sum())
        hits = int(((logits.argmax(-1) == targets) & (targets >= 0)).sum())
        return loss * counted / counted, hits / counted

    def targets(self, m, x):
        y = np.zeros_like(x, dtype=np.int32)
        for b in range(x.shape[0]):
            row = np.ascontiguousarray(x[b], dtype=np.int32)
            out = np.zeros(len(row), dtype=np.int32)
            i32p = ctypes.POINTER(ctypes.c_int32)
            self.assertEqual(_lib.lib.qkv_task_targets(ctypes.byref(m._task),
                                                       row.ctypes.data_as(i32p),
                                                       out.ctypes.data_as(i32p)), 0)
            y[b] = out
        return y

    def test_zero_hook_is_ablate(self):
        for name in ("ind32", "ind64", "blk32"):
            m = self.m[name]
            x = self.inputs(name, 8, 3)
            data = os.path.join(self.dir, name + ".txt")
            with open(data, "w") as f:
                f.writelines(" ".join(map(str, row)) + "\n" for row in x)
            for l, h in ((0, 1), (1, 0)):
                with self.subTest(model=name, head="%d.%d" % (l + 1, h + 1)):
                    def zero(z, hook, h=h):
                        z[:, :, h, :] = 0
                    logits = m.run_with_hooks(x, fwd_hooks=[("blocks.%d.attn.hook_z" % l,
                                                             zero)])
                    edit = _lib.HeadEdit(kind=_lib.HEAD_ZERO, layer=l, head=h, position=-1,
                                         site=_lib.SITE_Z, key_position=-1)
                    self.assertTrue(same_bits(logits, self.probe_logits(m, x, [edit])))
                    self.assertFalse(same_bits(logits, m(x)))  # the edit did something
                    out = json_text(qkv_cmd("ablate", self.path[name], "--data", data,
                                            "--heads", "%d.%d" % (l + 1, h + 1), "--json"))
                    loss, accuracy = self.c_loss(m, logits, self.targets(m, x))
                    self.assertEqual(out["heads"][0]["loss"], cjson_number(loss))
                    self.assertEqual(out["heads"][0]["accuracy"], cjson_number(accuracy))

    def test_patch_hook_is_patch_exact(self):
        cases = {"ind32": (CLEAN, CORRUPT), "ind64": (CLEAN, CORRUPT)}
        x = self.inputs("blk32", 2, 11)
        cases["blk32"] = tuple(" ".join(map(str, r)) for r in x)
        for name, (clean, corrupt) in cases.items():
            m = self.m[name]
            out = json_text(qkv_cmd("patch", self.path[name], "--clean", clean, "--corrupt",
                                    corrupt, "--method", "exact", "--json"))
            pos, ans, wrong = int(out["position"]), m._ids[out["answer"]], m._ids[out["wrong"]]

            def metric(logits):
                return float(logits[0, pos, ans]) - float(logits[0, pos, wrong])

            clean_logits, clean_cache = m.run_with_cache(m.to_tokens(clean))
            m_clean = (0.0 + metric(clean_logits)) / 1  # mean_of over one pair
            m_corrupt = (0.0 + metric(m(m.to_tokens(corrupt)))) / 1
            self.assertEqual(out["clean"], cjson_number(m_clean))
            self.assertEqual(out["corrupt"], cjson_number(m_corrupt))
            for row in out["results"]:
                l, h = int(row["layer"]) - 1, int(row["head"]) - 1
                with self.subTest(model=name, head="%d.%d" % (l + 1, h + 1)):
                    def patch(z, hook, l=l, h=h):
                        z[:, :, h] = clean_cache["z", l][:, :, h]
                        return z
                    logits = m.run_with_hooks(m.to_tokens(corrupt), fwd_hooks=[
                        (qkv.get_act_name("z", l), patch)])
                    share = ((0.0 + metric(logits)) / 1 - m_corrupt) / (m_clean - m_corrupt)
                    self.assertEqual(row["exact"], cjson_number(share))

    def test_hook_that_changes_nothing(self):
        """A hook returning its argument, on every editable site, leaves every bit alone;
        so does one that reads a LayerNorm's sigma and gives it back; on a data file's model
        too (its padded positions out of the hook's sight)."""
        for name in ("ind32", "blk32", "blk64", "data"):
            m = self.m[name]
            x = self.inputs(name, 3, 5)
            seen = []
            hooks = [(n, lambda a, hook: seen.append(hook.name) or a)
                     for n in m.editable_hook_names]
            self.assertTrue(same_bits(m.run_with_hooks(x, fwd_hooks=hooks), m(x)))
            self.assertEqual(seen, m.editable_hook_names)  # in the forward's order
            # any strides: the same values in Fortran order change nothing either
            hooks = [(n, lambda a, hook: np.asfortranarray(a)) for n in m.editable_hook_names]
            self.assertTrue(same_bits(m.run_with_hooks(x, fwd_hooks=hooks), m(x)))

    def test_cache_outlives_close(self):
        """A cache's arrays are its own arena's: they outlive the model's close; the model's
        weights do not."""
        m = qkv.load(self.path["ind32"])
        x = self.inputs("ind32", 2, 4)
        logits, cache = m.run_with_cache(x)
        want = np.array(cache["pattern", 1])
        m.close()
        self.assertTrue(same_bits(cache["pattern", 1], want))
        with self.assertRaisesRegex(ValueError, "closed"):
            m.W_E
        with self.assertRaisesRegex(ValueError, "closed"):
            m(x)

    def test_ln_scale_hook(self):
        """sigma doubled at the final LayerNorm halves what it adds (up to the bias): the
        hook's sigma is TransformerLens's, qkv's s = 1/sigma."""
        m = self.m["blk64"]
        x = self.inputs("blk64", 2, 9)
        logits, cache = m.run_with_cache(x)
        sigma = cache["ln_final.hook_scale"]
        self.assertEqual(sigma.shape, (2, m.cfg.n_ctx, 1))
        got = m.run_with_hooks(x, fwd_hooks=[("scale", lambda s, hook: s * 2)])
        b_U = m.b_U
        head_of_bias = m.state_dict()["ln_final.b"] @ m.W_U + b_U
        np.testing.assert_allclose(got - head_of_bias, (logits - head_of_bias) / 2,
                                   rtol=1e-10, atol=1e-10)
        # hook_normalized is (x - mean) / sigma, before the gain and the bias
        x = cache["blocks.1.hook_resid_post"]
        np.testing.assert_allclose(cache["ln_final.hook_normalized"] * sigma,
                                   x - x.mean(-1, keepdims=True), rtol=1e-12, atol=1e-12)

    # ---- a batch = its rows ----------------------------------------------------------------
    def test_batch_is_rows(self):
        for name in ("ind32", "blk64", "data"):
            with self.subTest(model=name):
                m = self.m[name]
                x = self.inputs(name, 5, 13)
                logits, cache = m.run_with_cache(x)
                for b in range(len(x)):
                    lb, cb = m.run_with_cache(x[b:b + 1])
                    self.assertTrue(same_bits(logits[b:b + 1], lb), (name, b))
                    for key in cache.keys():
                        self.assertTrue(same_bits(cache[key][b:b + 1], cb[key]), (name, key, b))

    # ---- names and shapes ------------------------------------------------------------------
    def test_names_and_shapes(self):
        m = self.m["blk32"]
        c = m.cfg
        x = self.inputs("blk32", 2, 1)
        _, cache = m.run_with_cache(x)
        B, T, C, H, D, N = 2, c.n_ctx, c.d_model, c.n_heads, c.d_head, c.d_mlp
        want = {"hook_embed": (B, T, C), "hook_pos_embed": (B, T, C),
                "blocks.1.hook_resid_pre": (B, T, C), "blocks.1.ln1.hook_scale": (B, T, 1),
                "blocks.1.ln1.hook_normalized": (B, T, C), "blocks.1.attn.hook_q": (B, T, H, D),
                "blocks.1.attn.hook_attn_scores": (B, H, T, T),
                "blocks.1.attn.hook_pattern": (B, H, T, T), "blocks.1.attn.hook_z": (B, T, H, D),
                "blocks.1.hook_attn_out": (B, T, C), "blocks.1.hook_resid_mid": (B, T, C),
                "blocks.1.ln2.hook_scale": (B, T, 1), "blocks.1.mlp.hook_pre": (B, T, N),
                "blocks.1.mlp.hook_post": (B, T, N), "blocks.1.hook_mlp_out": (B, T, C),
                "blocks.1.hook_resid_post": (B, T, C), "ln_final.hook_scale": (B, T, 1),
                "ln_final.hook_normalized": (B, T, C)}
        for key, shape in want.items():
            self.assertEqual(cache[key].shape, shape, key)
        self.assertEqual(list(cache.keys()), m.hook_names)
        self.assertTrue(cache["pattern", 1] is cache["blocks.1.attn.hook_pattern"])
        self.assertTrue(same_bits(cache["pattern", -1], cache["pattern", 1]))
        self.assertTrue(same_bits(cache["scale", 0, "ln1"], cache["blocks.0.ln1.hook_scale"]))
        self.assertTrue(same_bits(cache["resid_pre", 0], cache["hook_embed"] +
                                  cache["hook_pos_embed"]))
        self.assertEqual(qkv.get_act_name("k6"), "blocks.6.attn.hook_k")
        self.assertEqual(qkv.get_act_name("scale4ln1"), "blocks.4.ln1.hook_scale")
        self.assertEqual(qkv.get_act_name("normalized"), "ln_final.hook_normalized")
        self.assertEqual(m.W_Q.shape, (c.n_layers, H, C, D))
        self.assertEqual(m.W_O.shape, (c.n_layers, H, D, C))
        self.assertEqual(m.W_in.shape, (c.n_layers, C, N))
        self.assertEqual(m.W_out.shape, (c.n_layers, N, C))
        self.assertEqual((m.W_E.shape, m.W_pos.shape, m.W_U.shape, m.b_U.shape),
                         ((c.d_vocab, C), (T, C), (C, c.d_vocab), (c.d_vocab,)))
        # W_Q[l, h] is what makes head h's queries from the stream's LayerNorm
        q = cache["normalized", 1, "ln1"] * m.state_dict()["blocks.1.ln1.w"] + \
            m.state_dict()["blocks.1.ln1.b"]
        np.testing.assert_allclose(q @ m.W_Q[1, 1], cache["q", 1][:, :, 1], rtol=1e-4,
                                   atol=1e-5)
        sub = m.run_with_cache(x, names_filter=["pattern1", "blocks.0.hook_resid_post"])[1]
        self.assertEqual(list(sub.keys()), ["blocks.0.hook_resid_post",
                                            "blocks.1.attn.hook_pattern"])
        self.assertEqual(m.to_str_tokens(m.to_tokens("3 1 4 1 5 9 2 6")),
                         ["3", "1", "4", "1", "5", "9", "2", "6"])
        d = self.m["data"]
        self.assertEqual(d.to_str_tokens(d.to_tokens("ant dog cat")), ["ant", "dog", "cat"])

    # ---- the export ------------------------------------------------------------------------
    def test_export_into_transformer_lens(self):
        try:
            import torch
        except ImportError as e:
            self.skipTest("torch: %s" % e)
        import transformer_lens_torch as tl
        for name, tol in (("ind32", 2e-6), ("ind64", 1e-13), ("blk32", 2e-6), ("blk64", 1e-13)):
            with self.subTest(model=name):
                m = self.m[name]
                out = os.path.join(self.dir, name + ".tl")
                qkv.export_transformer_lens(self.path[name], out)
                sd, cfg = tl.load(out)
                self.assertEqual(cfg["dtype"], m.cfg.dtype.name)
                for key, a in m.state_dict().items():  # every weight, bit for bit
                    self.assertTrue(same_bits(sd[key].numpy(), a), key)
                x = self.inputs(name, 3, 17)
                logits, cache = m.run_with_cache(x)
                tl_logits, hooks = tl.run(sd, cfg, x, dtype=torch.float64)
                self.assertEqual(sorted(hooks), sorted(cache.keys()))
                for key, value in [("logits", logits)] + list(cache.items()):
                    ref = (tl_logits if key == "logits" else hooks[key]).numpy()
                    self.assertEqual(ref.shape, value.shape, key)
                    fin = np.isfinite(ref)
                    self.assertTrue(np.array_equal(fin, np.isfinite(value)), key)
                    scale = max(np.abs(ref[fin]).max(), 1e-30)
                    err = np.abs(value[fin].astype(np.float64) - ref[fin]).max() / scale
                    self.assertLessEqual(err, tol, "%s: %s off by %.2g of its largest" % (
                        name, key, err))

    def test_export_refuses_what_it_cannot_be(self):
        out = os.path.join(self.dir, "copy")
        qkv_cmd("train", "--task", "copy", "--steps", "2", "--eval-every", "2", "--quiet",
                "--threads", "1", "--out", out)
        with self.assertRaisesRegex(ValueError, "residual"):
            qkv.export_transformer_lens(out, os.path.join(self.dir, "copy.tl"))
        m = qkv.load(out)  # but it runs
        self.assertEqual(m.run_with_cache(self.inputs_of(m, 2))[0].shape[:2], (2, m.cfg.n_ctx))

    def inputs_of(self, m, n):
        return np.random.default_rng(0).integers(0, m.cfg.d_vocab, size=(n, m.cfg.n_ctx))

    # ---- bad input -------------------------------------------------------------------------
    def test_bad_input(self):
        m = self.m["ind32"]
        x = self.inputs("ind32", 2, 2)
        z = "blocks.1.attn.hook_z"
        cases = [
            (KeyError, "blocks.0.attn.hook_z", lambda: m.run_with_hooks(
                x, fwd_hooks=[("blocks.0.attn.hook_zz", lambda a, hook: a)])),
            (KeyError, "its names are", lambda: m.run_with_cache(x)[1]["blocks.9.hook_resid_pre"]),
            (KeyError, "not a hook", lambda: m.run_with_cache(x, names_filter="nope")),
            (ValueError, r"shape \(2, 16, 2, 31\), not \(2, 16, 2, 32\)", lambda: m.run_with_hooks(
                x, fwd_hooks=[(z, lambda a, hook: a[..., :31])])),
            (ValueError, "float64, not the model's float32", lambda: m.run_with_hooks(
                x, fwd_hooks=[(z, lambda a, hook: a.astype(np.float64))])),
            (ValueError, "not finite", lambda: m.run_with_hooks(
                x, fwd_hooks=[(z, lambda a, hook: a * np.nan)])),
            (ValueError, "not a numpy array", lambda: m.run_with_hooks(
                x, fwd_hooks=[(z, lambda a, hook: a.tolist())])),
            (ValueError, "may only look", lambda: m.run_with_hooks(
                x, fwd_hooks=[("blocks.0.hook_attn_out", lambda a, hook: a * 2)])),
            (ZeroDivisionError, "", lambda: m.run_with_hooks(
                x, fwd_hooks=[(z, lambda a, hook: 1 / 0)])),
            (ValueError, r"token 16 at \[0, 3\] is outside the vocabulary \(0..15\)",
             lambda: m.run_with_cache(np.where(np.arange(16) == 3, 16, x))),
            (ValueError, "token -1", lambda: m(np.full((1, 16), -1))),
            (ValueError, "different lengths", lambda: m.run_with_cache(
                [list(range(16)), list(range(15))])),
            (ValueError, "exactly 16", lambda: m.run_with_cache(x[:, :15])),
            (ValueError, "integers", lambda: m.run_with_cache(x.astype(np.float32))),
            (ValueError, "not \\(batch, pos\\)", lambda: m.run_with_cache(x[None])),
            (ValueError, "not \\(batch, pos\\)", lambda: m.run_with_cache(np.zeros((0, 16), int))),
            (ValueError, "'zz', is not a token", lambda: m.to_tokens("3 9 zz")),
            (ValueError, "id 0 is the padding", lambda: self.m["data"].run_with_cache([[0, 1]])),
            (ValueError, "more than the model's", lambda: self.m["data"].run_with_cache(
                np.ones((1, 99), int))),
            (FileNotFoundError, "no such file", lambda: qkv.load(os.path.join(self.dir, "no"))),
            (ValueError, "qkv.load", lambda: qkv.load(os.path.join(self.path["ind32"],
                                                                   "summary.json"))),
        ]
        for kind, message, call in cases:
            with self.subTest(message=message):
                with self.assertRaisesRegex(kind, message):
                    call()
        # and the model still runs, the same bits
        self.assertTrue(same_bits(m(x), m.run_with_cache(x)[0]))

    def test_encoder_decoder_refused(self):
        out = os.path.join(self.dir, "encdec")
        qkv_cmd("train", "--data", os.path.join(HERE, "..", "..", "tests", "data",
                                                "odd_words.tsv"),
                "--steps", "2", "--eval-every", "2", "--quiet", "--threads", "1", "--out", out)
        with self.assertRaisesRegex(ValueError, "encoder-decoder"):
            qkv.load(out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
