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
    safetensors reader finds; `qkv plot FILE` draws it (with gnuplot), `--format html` too;
  - models with token strings (translate, and two data files, one padded self-attention and
    one cross-attention): the input typed as token strings gives the run's n_q x n_k maps and
    labels, in JSON, text, --out and the page.
"""
import json
import math
import os
import random
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
    Tq, T = len(h["scores"]), len(h["scores"][0])  # queries x keys: Tq != T in cross-attention
    where = f"{task} layer {h['layer']} head {h['head']}"
    if len(h["q"]) != Tq or len(h["k"]) != T or len(h["v"]) != T or len(h["out"]) != Tq:
        fail(f"{where}: Q {len(h['q'])}, K {len(h['k'])}, V {len(h['v'])}, out {len(h['out'])} rows "
             f"for {Tq} queries x {T} keys")
    close(h["scaled"], [[s / math.sqrt(dk) for s in r] for r in h["scores"]], 1e-5, where + ": scaled")
    soft = []
    for i, r in enumerate(h["scaled"]):
        keep = [j for j in range(T) if not (causal and j > i + T - Tq)]  # aligned at the end
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
              for i in range(Tq)]
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


def check_with_run(name, run, d, queries, keys, heads, pad_rows=False):
    """inspect's maps (queries x keys) against the run's attention/ and gradients/ files, whose
    rows and columns past the typed input are the padding: zero weight on every padded key."""
    for h in heads:
        l, k = h["layer"], h["head"]
        rows, A = read_dat(f"{run}/attention/layer{l}_head{k}.dat")
        for i, r in enumerate(A[:len(queries)]):
            if any(w != 0 for w in r[len(keys):]):
                fail(f"{name} L{l}H{k}: row {i} of attention/ puts weight on the padding: {r}")
        A = [r[:len(keys)] for r in A[:len(queries)]]
        if len(h["weights"]) != len(queries) or len(h["weights"][0]) != len(keys):
            fail(f"{name} L{l}H{k}: weights are {len(h['weights'])} x {len(h['weights'][0])}, not "
                 f"{len(queries)} x {len(keys)}")
            continue
        close([[w or 0.0 for w in r] for r in h["weights"]], A, 2e-4, f"{name} L{l}H{k}: A = attention/")
        for g in ("dA", "dS"):
            _, theirs = read_dat(f"{run}/gradients/layer{l}_head{k}_{g}.dat")
            theirs = [r[:len(keys)] for r in theirs[:len(queries)]]
            s = max(1e-30, max(abs(x) for row in theirs for x in row))
            close([[x / s for x in row] for row in h[g]], [[x / s for x in row] for row in theirs],
                  1e-3, f"{name} L{l}H{k}: {g} = gradients/")


def token_models(tmp):
    """inspect on models with token strings: translate (cross-attention, 8 queries over 16
    keys), a data file of the same length rule (swap neighbours, padded), and a data file whose
    outputs are half its inputs (cross-attention over padded inputs). Each run's fixed held-out
    example is typed back as token strings; the labels, the maps and the gradients must be the
    run's, and the padding must be what the run padded."""
    rng = random.Random(5)
    words = ["ant", "Bee", "c-3", "dog", "<s>", "e.f", "gnu", "HOG", "i|j", "jay"]
    with open("swap.tsv", "w") as f:
        for _ in range(400):
            x = [rng.choice(words) for _ in range(2 * rng.randint(1, 4))]
            y = [x[i ^ 1] for i in range(len(x))]
            f.write(" ".join(x) + "\t" + " ".join(y) + "\n")
    with open("half.tsv", "w") as f:  # output i: the token at 2i+1, in capitals
        for _ in range(400):
            x = [rng.choice(words[:6]) for _ in range(2 * rng.randint(2, 4))]
            f.write(" ".join(x) + "\t" + " ".join(x[2 * i + 1].upper() for i in range(len(x) // 2)) + "\n")
    runs = [("translate", ["--task", "translate", "--d-model", "16", "--heads", "2"]),
            ("swap", ["--data", "swap.tsv", "--d-model", "16", "--layers", "2"]),
            ("half", ["--data", "half.tsv", "--d-model", "16", "--causal"])]
    for name, args in runs:
        qkv("train", *args, "--steps", "40", "--quiet", "--out", name)
        meta = safetensors_names(os.path.join(name, "model.safetensors"))[1]
        L, H, causal = int(meta["layers"]), int(meta["heads"]), meta["causal"] == "true"
        rows, _ = read_dat(f"{name}/attention/layer1_head1.dat")
        keys = [k for k in open(f"{name}/attention/layer1_head1.dat").read().split("\n")[1].split()[1:]
                if not k.endswith(":<pad>")]
        tokens = [k.split(":", 1)[1] for k in keys]
        cross = name != "swap"
        if cross:  # decoder rows, labelled by their target ("_": none)
            queries = rows
            target = [r.split(":", 1)[1] for r in rows]
        else:
            queries = keys
            target = [tokens[i ^ 1] for i in range(len(tokens))]
        r = qkv("inspect", "--model", name, "--input", " ".join(tokens), "--target", " ".join(target), "--json")
        d = json.loads(r.stdout)
        if d["labels"] != keys or d["query_labels"] != queries:
            fail(f"{name}: labels {d['labels']} / {d['query_labels']}, not the run's {keys} / {queries}")
        if d["cross_attention"] != cross or d["queries"] != len(queries) or d["keys"] != len(keys):
            fail(f"{name}: cross_attention {d['cross_attention']}, {d['queries']} x {d['keys']}")
        if len(d["attention"]) != L * H:
            fail(f"{name}: {len(d['attention'])} heads, not {L * H}")
        check_with_run(name, name, d, queries, keys, d["attention"])
        for h in d["attention"]:
            check_head(name, d, h, causal)
        # without a target, decoder rows are labelled by the prediction
        d2 = json.loads(qkv("inspect", "--model", name, "--input", " ".join(tokens), "--json").stdout)
        want = [f"{i}:{p['label']}" for i, p in enumerate(d2["predictions"])] if cross else keys
        if d2["query_labels"] != want:
            fail(f"{name}: without --target the rows are {d2['query_labels']}, not {want}")
        text = qkv("inspect", "--model", name, "--input", " ".join(tokens), "--target", " ".join(target)).stdout
        for label in (keys[-1], queries[-1]):
            if label[:10] not in text:
                fail(f"{name}: the text has no label {label}")
        if cross and ("cross-attention" not in text or f"({len(queries)} x {len(keys)}, rows: decoder" not in text):
            fail(f"{name}: the text does not show {len(queries)} x {len(keys)} cross-attention: {text[:400]}")
        # the text leads with the predictions and shows A and dS per head; Q, K, V come with --full
        heads = L * H
        if not text.startswith(f"{meta['task']} model:") or text.count("\nA = softmax") != heads \
                or text.count("\ndS = ") != heads or "\nQ = " in text or "\ndQ = " in text:
            fail(f"{name}: the text without --full is not the weights and dS of {heads} heads: {text[:400]}")
        full = qkv("inspect", "--model", name, "--input", " ".join(tokens), "--target", " ".join(target), "--full").stdout
        for part in ("\nQ = ", "\nK = ", "\nV = ", "\nS = Q K^T", "\nA V ", "\ndA = ", "\ndQ = ", "\ndV = "):
            if full.count(part) != heads:
                fail(f"{name}: --full shows {full.count(part)} of {part.strip()!r}, not {heads}")
        out = f"{name}_inspect.safetensors"
        qkv("inspect", "--model", name, "--input", " ".join(tokens), "--target", " ".join(target), "--out", out)
        names, meta = safetensors_names(out)
        if names.get("layer1.weights") != [H, len(queries), len(keys)] or names.get("layer1.k") != [H, len(keys), 16 // H]:
            fail(f"{name}: {out}: layer1.weights {names.get('layer1.weights')}, layer1.k {names.get('layer1.k')}")
        if meta.get("labels", "").split() != keys or meta.get("query_labels", "").split() != queries:
            fail(f"{name}: {out}: labels {meta.get('labels')} / {meta.get('query_labels')}")
        qkv("plot", out, "--format", "html")
        dat_rows, _ = read_dat(f"{name}_inspect/attention/layer1_head1.dat")
        if dat_rows != queries:
            fail(f"{name}: qkv plot {out} wrote rows {dat_rows}, not {queries}")
        page = open(os.path.join(f"{name}_inspect", "plots", "attention.html")).read()
        data = json.loads(page.split("const DATA = ", 1)[1].split(";\n", 1)[0])
        m = data["attention"][0]
        if m["q"] != queries or m["k"] != keys or len(m["w"]) != len(queries):
            fail(f"{name}: the page's map is {m['q']} x {m['k']}")
        if shutil.which("gnuplot"):
            qkv("plot", out)
            p = os.path.join(f"{name}_inspect", "plots", "attention_layer1_head1.png")
            if not os.path.getsize(p) > 1000:
                fail(f"{name}: qkv plot {out} drew no {p}")
        print(f"inspect_test: {name}: {len(queries)} queries x {len(keys)} keys, {L} x {H} heads checked")


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
    token_models(tmp)
    shutil.rmtree(tmp, ignore_errors=True)
    if fails:
        print(f"inspect_test: {fails} failures")
        sys.exit(1)
    print("inspect_test: ok")


main()
