#!/usr/bin/env python3
"""The default modular run's records and docs/grokking.md's tables of them.

usage: grok_seeds.py record RUN OUT.csv    reduce RUN's metrics.jsonl and summary.json to the
                                           record docs/data/grok113/ keeps (OUT.csv, OUT.json)
       grok_seeds.py rows RUN [STEP]       print RUN's rows up to STEP as a record has them
                                           (docs_test compares a short rerun with the record)
       grok_seeds.py table DIR             print docs/grokking.md's block from DIR's records

A record keeps, at each evaluation, the progress measures (docs/grokking.md) printed to six
significant digits: the same text from the same bits, so a rerun's first rows can be
compared with it character for character. Its .json holds the summary's `grokking`.
"""
import csv
import json
import os
import sys

COLUMNS = ["step", "train_set_loss", "train_set_acc", "heldout_loss", "heldout_acc",
           "restricted_loss", "restricted_acc", "excluded_loss", "sum_squared_weights",
           "gini_embed", "gini_neuron_logits", "logit_share", "key_frequencies"]


def cell(v):
    if isinstance(v, list):
        return " ".join(str(k) for k in v)
    if isinstance(v, int):
        return str(v)
    return "%.6g" % v


def rows(run, last=None):
    out = [",".join(COLUMNS)]
    with open(os.path.join(run, "metrics.jsonl")) as f:
        for line in f:
            j = json.loads(line)
            if last is not None and j["step"] > last:
                break
            out.append(",".join(cell(j[c]) for c in COLUMNS))
    return out


def record(run, out_csv):
    with open(out_csv, "w") as f:
        f.write("\n".join(rows(run)) + "\n")
    with open(os.path.join(run, "summary.json")) as f:
        summary = json.load(f)
    keep = {"seed": summary["config"]["seed"], "steps": summary["config"]["steps"],
            "grokking": summary["grokking"]}
    with open(out_csv[:-4] + ".json", "w") as f:
        json.dump(keep, f, indent=1, sort_keys=True)
        f.write("\n")


def load(dir_, name):
    with open(os.path.join(dir_, name + ".csv")) as f:
        table = list(csv.DictReader(f))
    with open(os.path.join(dir_, name + ".json")) as f:
        meta = json.load(f)
    for r in table:
        for k in COLUMNS[:-1]:
            r[k] = float(r[k])
    return table, meta


def first(table, test):
    for r in table:
        if test(r):
            return int(r["step"])
    return None


def step_text(s):
    return "–" if s is None else "%d" % s


def table(dir_):
    names = sorted(n[:-4] for n in os.listdir(dir_) if n.endswith(".csv"))
    runs = [(n,) + load(dir_, n) for n in names]
    print("| seed | memorization_end | circuit_formation_end | test acc ≥ 99% first "
          "| generalization_step | cleanup_end | restricted loss < 0.1 first | test loss < 0.1 first "
          "| test acc at the end | test loss at the end | Σ w² at the end | key frequencies |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, t, meta in runs:
        g, end = meta["grokking"], t[-1]
        print("| %d | %s | %s | %s | %s | %s | %s | %s | %.4f | %.3g | %.0f | %s |" % (
            meta["seed"], step_text(g["memorization_end"]), step_text(g["circuit_formation_end"]),
            step_text(first(t, lambda r: r["heldout_acc"] >= 0.99)),
            step_text(g["generalization_step"]), step_text(g["cleanup_end"]),
            step_text(first(t, lambda r: r["restricted_loss"] < 0.1)),
            step_text(first(t, lambda r: r["heldout_loss"] < 0.1)),
            end["heldout_acc"], end["heldout_loss"], end["sum_squared_weights"],
            " ".join(str(k) for k in g["key_frequencies"]) or "none"))
    print("| the paper (its figures, one run) | 1400 | 9400 | | | 13300 | | | | | | 14 35 41 42 52 |")
    print()
    for name, t, meta in runs:  # the story of each seed in a sentence
        r, e = (first(t, lambda r: r["restricted_loss"] < 0.1),
                first(t, lambda r: r["heldout_loss"] < 0.1))
        lead = ("the restricted loss fell below 0.1 nats %d steps before the test loss did"
                % (e - r)) if r is not None and e is not None else "the losses did not fall below 0.1"
        a = first(t, lambda r: r["heldout_acc"] >= 0.99)
        dips = [x for x in t if a is not None and x["step"] > a and x["heldout_acc"] < 0.99]
        if a is None:
            after = "its test accuracy never reached 99%"
        elif not dips:
            after = "its test accuracy stayed at 99%% or more from step %d on" % a
        else:
            low = min(dips, key=lambda x: x["heldout_acc"])
            after = ("after its test accuracy first reached 99%% (step %d) it fell below again at "
                     "%d evaluation%s (lowest %.3f, at step %d, with the train accuracy %.3f)" % (
                         a, len(dips), "" if len(dips) == 1 else "s", low["heldout_acc"],
                         low["step"], low["train_set_acc"]))
        spikes = sum(1 for x in t if x["step"] > (a or 0) and x["train_set_loss"] > 1e-3)
        print("- Seed %d: %s; %s; from that first 99%% on, the train loss was above 1e−3 at %d "
              "evaluation%s." % (meta["seed"], lead, after, spikes, "" if spikes == 1 else "s"))
    # each seed's run every 2500 steps (and where its phases end): test loss against the
    # restricted loss, the excluded loss, the weights and the Fourier sparsity
    for name, t, meta in runs:
        g = meta["grokking"]
        marks = {}
        for k in ("memorization_end", "circuit_formation_end", "generalization_step", "cleanup_end"):
            if g[k] is not None:
                marks[g[k]] = marks[g[k]] + ", " + k if g[k] in marks else k
        print()
        print("Seed %d:" % meta["seed"])
        print()
        print("| step | train loss | test loss | test acc | restricted loss | excluded loss "
              "| Σ w² | Gini embed | logit share | key frequencies | phase ends |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in t:
            s = int(r["step"])
            if s % 2500 and s not in marks:
                continue
            print("| %d | %.2g | %.3g | %.3f | %.3g | %.3g | %.0f | %.2f | %.2f | %s | %s |" % (
                s, r["train_set_loss"], r["heldout_loss"], r["heldout_acc"],
                r["restricted_loss"], r["excluded_loss"], r["sum_squared_weights"],
                r["gini_embed"], r["logit_share"], r["key_frequencies"] or "",
                marks.get(s, "").replace("_", " ")))


def main(argv):
    if len(argv) == 4 and argv[1] == "record":
        record(argv[2], argv[3])
    elif len(argv) in (3, 4) and argv[1] == "rows":
        print("\n".join(rows(argv[2], int(argv[3]) if len(argv) == 4 else None)))
    elif len(argv) == 3 and argv[1] == "table":
        table(argv[2])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
