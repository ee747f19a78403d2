#!/usr/bin/env python3
"""bench_python.py - the Python package's speed (docs/python.md, "Speed"): run_with_cache over a
batch of a task's sequences, against the C call it wraps, in one process, alternating.

  C call         qkv_model_forward_probe through ctypes, into an arena kept warm (reset
                 between calls): what run_with_cache runs
  run_with_cache the whole Python call: the tokens checked, the memory check, an arena from the
                 model's pool, the same C call, the ActivationCache of views
  + every entry  run_with_cache, then every array of the cache read (hook_embed's gather and,
                 with LayerNorm, hook_scale and hook_normalized are made when first read)

Each is timed `--rounds` times, in turn, after a warm-up; the medians and the Python layer's
overhead, run_with_cache / C call - 1, are printed (one JSON line with --json). The first call
of a fresh process also maps the arena's pages (the kernel's page faults), so it is timed
separately, once, before the rounds.

usage: PYTHONPATH=python python3 scripts/bench_python.py runs/induction [--n 1000]
       [--rounds 30] [--threads N] [--json]
"""
import argparse
import ctypes
import json
import os
import platform
import statistics
import sys
import time


import qkv
from qkv import _lib


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", help="a run directory (qkv train --out DIR) or its model.safetensors")
    ap.add_argument("--n", type=int, default=1000, help="sequences a call (default 1000)")
    ap.add_argument("--rounds", type=int, default=30, help="timed calls of each (default 30)")
    ap.add_argument("--threads", type=int, default=0, help="OpenMP threads (default: all)")
    ap.add_argument("--json", action="store_true", help="one JSON line")
    a = ap.parse_args()
    if a.threads:
        qkv.set_threads(a.threads)
    m = qkv.load(a.model)
    x, _ = m.sample_tokens(a.n, seed=1, heldout=True)
    i32p = ctypes.POINTER(ctypes.c_int32)

    t = time.perf_counter()
    m.run_with_cache(x)  # a fresh arena: its pages mapped as the forward pass writes them
    first = time.perf_counter() - t

    ctx = _lib.lib.qkv_ctx_new(int(_lib.lib.qkv_model_step_bytes(ctypes.byref(m._m.cfg), a.n)))
    _lib.lib.qkv_ctx_set_no_grad(ctx, True)

    def c_call():
        _lib.lib.qkv_ctx_reset(ctx)
        probe = _lib.Probe()
        t = time.perf_counter()
        _lib.lib.qkv_model_forward_probe(ctypes.byref(m._m), ctx, x.ctypes.data_as(i32p), None,
                                         a.n, ctypes.byref(probe))
        return time.perf_counter() - t

    held = []  # the last results stay alive while the next call runs, as in a loop of a user's
    inside = []  # run_with_cache's own C call (m.last_forward_seconds), paired with its total

    def python_call(read_all):
        t = time.perf_counter()
        logits, cache = m.run_with_cache(x)
        if read_all:
            for v in cache.values():
                v.shape
        dt = time.perf_counter() - t
        if not read_all:
            inside.append((dt, m.last_forward_seconds))
        held[:] = [logits, cache]
        return dt

    runs = {"c_call": lambda: c_call(), "run_with_cache": lambda: python_call(False),
            "run_with_cache_read_all": lambda: python_call(True)}
    for f in runs.values():  # warm-up: every arena at its size, every page mapped
        for _ in range(3):
            f()
    inside.clear()
    times = {k: [] for k in runs}
    for _ in range(a.rounds):
        for k, f in runs.items():
            times[k].append(f())
    _lib.lib.qkv_ctx_free(ctx)
    med = {k: statistics.median(v) for k, v in times.items()}
    out = {"model": a.model, "task": m.cfg.task, "n": a.n, "seq_len": m.cfg.n_ctx,
           "dtype": m.cfg.dtype.name, "threads": qkv.threads(), "simd": qkv.simd_path(),
           "cpu": cpu_name(), "cores": os.cpu_count(), "load": os.getloadavg()[0],
           "rounds": a.rounds, "first_call_s": first,
           "median_s": med, "min_s": {k: min(v) for k, v in times.items()},
           "overhead": med["run_with_cache"] / med["c_call"] - 1,
           # the same call's total over its own C call: paired, so the machine's load cancels
           "overhead_paired": statistics.median(t / c - 1 for t, c in inside),
           "python_ms_paired": 1e3 * statistics.median(t - c for t, c in inside),
           "overhead_read_all": med["run_with_cache_read_all"] / med["c_call"] - 1}
    if a.json:
        print(json.dumps(out))
        return
    print("%s: %d %s sequences of %d tokens, %s, %d threads, %s path, %s (load %.1f)" % (
        a.model, a.n, m.cfg.task, m.cfg.n_ctx, m.cfg.dtype.name, out["threads"], out["simd"],
        out["cpu"], out["load"]))
    print("first call of the process: %.1f ms (the arena's pages mapped)" % (first * 1e3))
    for k in runs:
        print("%-24s median %7.2f ms   min %7.2f ms" % (k, med[k] * 1e3, out["min_s"][k] * 1e3))
    print("Python layer's overhead over the C call: %+.1f%% of the medians (%+.1f%% reading "
          "every entry); within each call: %+.1f%%, %.2f ms (median)" % (
              100 * out["overhead"], 100 * out["overhead_read_all"],
              100 * out["overhead_paired"], out["python_ms_paired"]))


if __name__ == "__main__":
    sys.exit(main())
