#!/usr/bin/env python3
"""inspect_test.py QKV - `qkv inspect` on every task, its numbers checked against each other
and against what `qkv train` saved.

For a small model of each task (one of them 2 layers x 2 heads, one causal):
  - on the run's fixed held-out example (its tokens are the labels of attention/*.dat), the
    weights A of every head equal the run's attention/ maps, and with the example's target, dA
    and dS equal its gradients/ maps: inspect and train see the same model;
  - S/sqrt(d_k) = S / sqrt(d_k); A = softmax of it with the masked keys dropped (null in JSON);
    each row of A sums to 1; the head's output = A V;
  - dS = A * (dA - rowsum(dA * A)); dQ = dS K / sqrt(d_k) and dK = dS^T Q / sqrt(d_k);
  - the text output names every head and marks masked cells; --out writes the tensors a
    safetensors reader finds; `qkv plot FILE` draws it (with gnuplot), `--format html` too.
"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

QKV = sys.argv[1]
fails = 0


def fail(msg):
    global fails
    fails += 1
    print("FAIL:", msg)


def qkv(*args, check=True):
    r = subprocess.run([QKV, *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise SystemExit(f"qkv {' '.join(args)} exited {r.returncode}: {r.stderr}")
    return r


def read_dat(path):
    rows = [l.split() for l in open(path) if not l.startswith("#")]
    return [r[0] for r in rows[1:]], [[float(x) for x in r[1:]] for r in rows[1:]]


def close(a, b, tol, what):
    worst = 0.0
    for ra, rb in zip(a, b):
        for x, y in zip(ra, rb):
            if x is None or y is None:
                if (x is None) != (y is None):
                    fail(f"{what}: null against {x if y is None else y}")
                    return
                continue
            worst = max(worst, abs(x - y) / max(1.0, abs(y)))
    if worst > tol:
        fail(f"{what}: differs by {worst:.3g} (tolerance {tol:g})")


def matmul(a, b):
    return [[sum(a[i][k] * b[k][j] for k in range(len(b))) for j in range(len(b[0]))]
            for i in range(len(a))]


def transpose(a):
    return [list(r) for r in zip(*a)]


def check_head(task, d, h, causal):
    dk = len(h["q"][0])
    T = len(h["q"])
    where = f"{task} layer {h['layer']} head {h['head']}"
    close(h["scaled"], [[s / math.sqrt(dk) for s in r] for r in h["scores"]], 1e-5, where + ": scaled")
    soft = []
    for i, r in enumerate(h["scaled"]):
        keep = [j for j in range(T) if not (causal and j > i)]
        m = max(r[j] for j in keep)
        e = {j: math.exp(r[j] - m) for j in keep}
        z = sum(e.values())
        soft.append([e[j] / z if j in e else None for j in range(T)])
    close(h["weights"], soft, 1e-5, where + ": weights = softmax(scaled, masked)")
    for i, r in enumerate(h["weights"]):
        if abs(sum(w for w in r if w is not None) - 1) > 1e-5:
            fail(f"{where}: row {i} of A sums to {sum(w for w in r if w is not None)}")
    A = [[w or 0.0 for w in r] for r in h["weights"]]
    close(h["out"], matmul(A, h["v"]), 1e-4, where + ": out = A V")
    if "dA" not in h:
        return
    dA, dS = h["dA"], h["dS"]
    expect = [[A[i][j] * (dA[i][j] - sum(dA[i][k] * A[i][k] for k in range(T))) for j in range(T)]
              for i in range(T)]
    scale = max(1e-30, max(abs(x) for r in expect for x in r))
    close([[x / scale for x in r] for r in dS], [[x / scale for x in r] for r in expect], 1e-4,
          where + ": dS = A * (dA - rowsum(dA * A))")
    gq = matmul(dS, h["k"])
    gk = matmul(transpose(dS), h["q"])
    for name, got, want in (("dQ", h["dQ"], gq), ("dK", h["dK"], gk)):
        want = [[x / math.sqrt(dk) for x in r] for r in want]
        s = max(1e-30, max(abs(x) for r in want for x in r))
        close([[x / s for x in r] for r in got], [[x / s for x in r] for r in want], 1e-4,
              f"{where}: {name} = dS {'K' if name == 'dQ' else '^T Q'} / sqrt(d_k)")


def safetensors_names(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return {k: v["shape"] for k, v in header.items() if k != "__metadata__"}, header.get("__metadata__", {})


def main():
    tmp = tempfile.mkdtemp(prefix="qkv-inspect-")
    os.chdir(tmp)
    runs = [("copy", ["--d-model", "8"]), ("reverse", ["--d-model", "8", "--layers", "2", "--heads", "2"]),
            ("shift", ["--d-model", "8", "--heads", "2"]), ("lookup", ["--d-model", "16"]),
            ("max", ["--d-model", "8"])]
    for task, extra in runs:
        qkv("train", "--task", task, *extra, "--steps", "40", "--quiet", "--out", task)
        meta = safetensors_names(os.path.join(task, "model.safetensors"))[1]
        L, H, causal = int(meta["layers"]), int(meta["heads"]), meta["causal"] == "true"
        labels, _ = read_dat(f"{task}/attention/layer1_head1.dat")
        tokens = [lab.split(":", 1)[1] for lab in labels]
        if task == "lookup":  # the held-out target: the value paired with the queried key
            key = tokens[-1][1:]
            value = next(t.split(":")[1] for t in tokens[:-1] if t.split(":")[0] == key)
            target = ["_"] * (len(tokens) - 1) + [value]
        elif task == "copy":
            target = tokens
        elif task == "reverse":
            target = tokens[::-1]
        elif task == "shift":
            target = ["_"] + tokens[:-1]
        else:
            target = [str(max(int(t) for t in tokens))] * len(tokens)
        r = qkv("inspect", "--model", task, "--input", " ".join(tokens), "--target",
                " ".join(target), "--json")
        d = json.loads(r.stdout)
        if d["labels"] != labels:
            fail(f"{task}: labels {d['labels']} are not the run's {labels}")
        if not (d["loss"] >= 0):
            fail(f"{task}: loss {d['loss']}")
        heads = d["attention"]
        if len(heads) != L * H:
            fail(f"{task}: {len(heads)} heads, not {L * H}")
        for h in heads:
            l, k = h["layer"], h["head"]
            _, A = read_dat(f"{task}/attention/layer{l}_head{k}.dat")
            close([[w or 0.0 for w in r] for r in h["weights"]], A, 2e-4, f"{task} L{l}H{k}: A = attention/")
            _, dA = read_dat(f"{task}/gradients/layer{l}_head{k}_dA.dat")
            _, dS = read_dat(f"{task}/gradients/layer{l}_head{k}_dS.dat")
            for name, mine, theirs in (("dA", h["dA"], dA), ("dS", h["dS"], dS)):
                s = max(1e-30, max(abs(x) for row in theirs for x in row))
                close([[x / s for x in row] for row in mine], [[x / s for x in row] for row in theirs],
                      1e-3, f"{task} L{l}H{k}: {name} = gradients/")
            check_head(task, d, h, causal)
        text = qkv("inspect", "--model", task, "--input", " ".join(tokens)).stdout
        for l in range(1, L + 1):
            for k in range(1, H + 1):
                if f"== layer {l}, head {k}" not in text:
                    fail(f"{task}: the text has no layer {l}, head {k}")
        if causal and "masked" not in text:
            fail(f"{task}: the text marks no masked cell")
        if "prediction" not in text or "dQ" in text:
            fail(f"{task}: the text without --target: {text[:300]}")
        out = f"{task}_inspect.safetensors"
        qkv("inspect", "--model", task, "--input", " ".join(tokens), "--target", " ".join(target),
            "--out", out)
        names, meta = safetensors_names(out)
        T = len(tokens)
        for want in ["tokens", "logits", "mask", "targets", "loss"] + [
                f"layer{l}.{p}" for l in range(1, L + 1)
                for p in ("q", "k", "v", "scores", "scaled", "weights", "out", "dA", "dS", "dQ", "dK", "dV")]:
            if want not in names:
                fail(f"{task}: {out} has no tensor {want}")
        if names.get("layer1.weights") != [H, T, T] or meta.get("format") != "qkv-inspect":
            fail(f"{task}: {out}: layer1.weights is {names.get('layer1.weights')}, format {meta.get('format')}")
        if shutil.which("gnuplot"):
            qkv("plot", out)
            for f in ["overview.png", "attention_layer1_head1.png", "grads_layer1_head1.png"]:
                p = os.path.join(f"{task}_inspect", "plots", f)
                if not os.path.getsize(p) > 1000:
                    fail(f"{task}: qkv plot {out} drew no {p}")
        qkv("plot", out, "--format", "html")
        page = os.path.join(f"{task}_inspect", "plots", "attention.html")
        if "const DATA = {" not in open(page).read():
            fail(f"{task}: {page} holds no data")
        print(f"inspect_test: {task}: {L} x {H} heads checked")
    shutil.rmtree(tmp, ignore_errors=True)
    if fails:
        print(f"inspect_test: {fails} failures")
        sys.exit(1)
    print("inspect_test: ok")


main()
