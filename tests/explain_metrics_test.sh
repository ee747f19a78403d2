#!/usr/bin/env bash
# explain_metrics_test.sh - the metrics, the data sets and the edits of docs/explain.md
# ("Metrics", "Over a data set", "Sets of heads, resampling, other examples") end to end on
# a small induction model and a data file's model: --metric logit-diff prints what no
# --metric prints; kl's clean value is 0; --heads keeps the full run's rows, --together's
# share of every head of a model without the residual stream is 1; resample ablation gives
# the same bits on 1 and 2 threads and the draws of its seed; lens --data and attribute
# --data are the means of single-input runs (qkv lens and qkv attribute on each example),
# and of their own --per-example lines; --corrupt-from other pairs a data model's examples,
# seeded, as a --pairs file of the same pairs does; circuits' composition_all holds
# composition's scores.
#
# usage: tests/explain_metrics_test.sh path/to/qkv
set -u
QKV=${1:?usage: explain_metrics_test.sh QKV}
[ "$QKV" = "${QKV#/}" ] && QKV=$PWD/$QKV
PY=${QKV_PYTHON:-python3}
W=$(mktemp -d "${TMPDIR:-/tmp}/qkv_explain_metrics.XXXXXX")
trap 'rm -rf "$W"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }
cd "$W" || exit 1

"$QKV" train --task induction --d-model 16 --steps 100 --threads 1 --out m --quiet &&
    "$QKV" train --task shift --seq-len 8 --vocab 8 --heads 2 --layers 2 --no-residual \
        --d-model 8 --steps 10 --threads 1 --out nores --quiet ||
    { echo "explain_metrics_test: cannot train"; exit 1; }
clean="6 12 11 9 6 12 11 9 6 12 11 9 6 12 11 9"
corrupt="1 2 3 4 5 7 8 10 6 12 11 9 6 12 11 9"

# --metric logit-diff is the default: the same bytes, table and JSON
"$QKV" patch m --clean "$clean" --corrupt "$corrupt" >a.txt &&
    "$QKV" patch m --clean "$clean" --corrupt "$corrupt" --metric logit-diff >b.txt &&
    cmp -s a.txt b.txt && "$QKV" patch m --clean "$clean" --corrupt "$corrupt" --path --json >a.txt &&
    "$QKV" patch m --clean "$clean" --corrupt "$corrupt" --path --json --metric logit-diff >b.txt &&
    cmp -s a.txt b.txt && ok "--metric logit-diff prints what no --metric prints" ||
    fail "--metric logit-diff differs from the default"

# kl: the clean run's own distribution, 0; loss and prob of the answer; --heads keeps the
# full run's rows of those heads, bit for bit, and --together adds the set's share
for metric in loss prob kl; do
    "$QKV" patch m --clean "$clean" --corrupt "$corrupt" --metric $metric --json >full.$metric.json &&
        "$QKV" patch m --clean "$clean" --corrupt "$corrupt" --metric $metric --json \
            --heads 2.2,1.1 --together >some.$metric.json || fail "patch --metric $metric"
done
"$PY" - <<'PYEOF' && ok "patch --metric loss, prob, kl; --heads and --together" || fail "patch --metric or --together"
import json
for m in ("loss", "prob", "kl"):
    full, some = (json.load(open("%s.%s.json" % (w, m))) for w in ("full", "some"))
    assert full["metric"] == m and some["selected_heads"] == ["2.2", "1.1"], some.keys()
    if m == "kl":
        assert full["clean"] == 0 and full["corrupt"] > 0, (full["clean"], full["corrupt"])
    if m == "prob":
        assert 0 <= full["corrupt"] < full["clean"] <= 1
    rows = {(r["layer"], r["head"]): r for r in full["results"]}
    assert [(r["layer"], r["head"]) for r in some["results"]] == [(2, 2), (1, 1)]
    for r in some["results"]:
        assert r == rows[(r["layer"], r["head"])], (r, rows[(r["layer"], r["head"])])
    t = some["together"]
    assert abs(t["attribution"] - sum(r["attribution"] for r in some["results"])) <= 1e-12
    assert "together" not in full and "selected_heads" not in full
PYEOF
# every head of a model without the residual stream patched at once: the clean logits, a
# share of 1 of every metric
for metric in logit-diff loss prob kl; do
    "$QKV" patch nores --clean "1 2 3 4 5 6 7 0" --corrupt "7 6 5 4 3 2 1 0" --metric $metric \
        --heads 1.1,1.2,2.1,2.2 --together --json || echo '{}'
done >nores.txt
"$PY" - nores.txt <<'PYEOF' && ok "every head together recovers all of every metric" || fail "patch --together of every head: $(cat nores.txt)"
import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)["together"]["exact"]
    assert abs(t - 1) <= 1e-9, t
PYEOF

# resample ablation: the same bits on 1 and 2 threads; another seed draws other partners;
# --draws 1 is the default
"$QKV" ablate m --mode resample --draws 3 --seed 4 --metric kl --together --threads 1 --json >r1.json &&
    "$QKV" ablate m --mode resample --draws 3 --seed 4 --metric kl --together --threads 2 --json >r2.json &&
    cmp -s r1.json r2.json && ok "ablate --mode resample: the same bits on 1 and 2 threads" ||
    fail "ablate --mode resample differs between 1 and 2 threads"
"$QKV" ablate m --mode resample --seed 5 --json >r3.json &&
    "$QKV" ablate m --mode resample --draws 1 --seed 5 --json >r4.json && cmp -s r3.json r4.json &&
    ! cmp -s r1.json r3.json && "$PY" - r1.json <<'PYEOF' && ok "ablate --mode resample: draws, seed, metric" || fail "ablate --mode resample's draws, seed or metric"
import json, sys
js = json.load(open(sys.argv[1]))
assert js["mode"] == "resample" and js["draws"] == 3 and js["seed"] == 4 and js["metric"] == "kl"
assert js["baseline"]["metric"] == 0 and all(h["metric"] > 0 for h in js["heads"])
assert js["together"]["metric"] > max(h["metric"] for h in js["heads"])
PYEOF

# lens --data and attribute --data: the means over every target position of the examples,
# recomputed from single-input runs of each example, and from their own --per-example lines
printf '%s\n' "$clean" "3 7 1 14 2 3 7 1 14 2 3 7 1 14 2 3" "5 10 15 0 4 8 5 10 15 0 4 8 5 10 15 0" >ex.txt
"$QKV" lens m --data ex.txt --per-example lens.jsonl --out lens.json >/dev/null &&
    "$QKV" attribute m --data ex.txt --per-example attr.jsonl --out attr.json >/dev/null ||
    fail "lens --data or attribute --data"
n=0
while read -r line; do
    n=$((n + 1))
    "$QKV" lens m --input "$line" --top 16 --json >single.lens.$n.json || fail "lens --input"
    "$PY" - "$line" <<'PYEOF' >positions.$n.txt || fail "the targets of $line"
import sys
s = [int(w) for w in sys.argv[1].split()]
k = 1
while s[k] != s[0]:
    k += 1
for i in range(k, len(s) - 1):  # induction's targets: each repeat's next token
    print(i, s[i + 1])
PYEOF
    while read -r i y; do
        "$QKV" attribute m --input "$line" --position "$i" --token "$y" --json \
            >single.attr.$n.$i.json || fail "attribute --input --position $i --token $y"
    done <positions.$n.txt
done <ex.txt
"$PY" - "$n" <<'PYEOF' && ok "lens --data, attribute --data: the means of single-input runs and of --per-example" || fail "lens --data or attribute --data against single-input runs"
import json, math, sys
n = int(sys.argv[1])
lens, attr = json.load(open("lens.json")), json.load(open("attr.json"))
cells, parts, logits = {}, {}, []
for e in range(1, n + 1):
    one = json.load(open("single.lens.%d.json" % e))
    final = {d["position"]: d["token"] for d in one["decomposition"]}
    for line in open("positions.%d.txt" % e):
        i, y = line.split()
        i = int(i)
        for b in one["layers"]:
            top = [t["token"] for t in b["positions"][i]["top"]]
            p = b["positions"][i]["top"][top.index(y)]["prob"]
            cells.setdefault(b["after"], []).append(
                (p, -math.log(p), top.index(y) + 1, top[0] == y, top[0] == final[i]))
        a = json.load(open("single.attr.%d.%d.json" % (e, i)))
        logits.append(a["logit"])
        for q in a["parts"]:
            parts.setdefault(q["name"], []).append(q["value"])
count = len(logits)
assert lens["target_positions"] == attr["target_positions"] == count and attr["examples"] == n
close = lambda a, b, tol=1e-12: abs(a - b) <= tol * max(1.0, abs(b))
for b in lens["layers"]:
    got = [b[k] for k in ("target_prob", "target_loss", "target_rank", "accuracy", "final_agreement")]
    want = [sum(c[k] for c in cells[b["after"]]) / count for k in range(5)]
    assert all(close(g, w, 1e-9) for g, w in zip(got, want)), (b, want)
for js in (lens, attr):
    assert close(js["logit"], sum(logits) / count), (js["logit"], sum(logits) / count)
    for q in js["parts"]:
        assert close(q["value"], sum(parts[q["name"]]) / count), q
# the per-example lines: each example's own means, which weighted by its count give the whole
for kind, js in (("lens", lens), ("attr", attr)):
    lines = [json.loads(l) for l in open(kind + ".jsonl")]
    assert [l["example"] for l in lines] == list(range(1, n + 1)) and lines[0]["line"] == 1
    assert sum(l["target_positions"] for l in lines) == count
    mean = sum(l["logit"] * l["target_positions"] for l in lines) / count
    assert close(mean, js["logit"], 1e-9), (mean, js["logit"])
    if kind == "lens":
        for b, layer in enumerate(js["layers"]):
            p = sum(l["layers"][b]["target_prob"] * l["target_positions"] for l in lines) / count
            assert close(p, layer["target_prob"], 1e-9)
PYEOF
"$QKV" lens m --data heldout --json >held.json && "$PY" - held.json <<'PYEOF' && ok "lens --data heldout: the held-out set" || fail "lens --data heldout"
import json, sys
js = json.load(open(sys.argv[1]))
assert js["data"] == "heldout" and js["examples"] == 512 and [b["after"] for b in js["layers"]] == [0, 1, 2]
assert js["layers"][-1]["final_agreement"] == 1
PYEOF

# --corrupt-from other on a data file's model: pairs of the held-out examples, seeded
printf 'a b c\tc b a\nb c a\ta c b\nc a b\tb a c\na b\tb a\nb a\ta b\nc b\tb c\na c\tc a\n' >d.tsv
"$QKV" train --data d.tsv --heldout d.tsv --d-model 8 --steps 30 --threads 1 --out dm --quiet &&
    "$QKV" patch dm --corrupt-from other --seed 3 --per-pair pp.jsonl --json >o1.json &&
    "$QKV" patch dm --corrupt-from other --seed 3 --threads 2 --json >o2.json && cmp -s o1.json o2.json &&
    "$PY" - o1.json pp.jsonl <<'PYEOF' && ok "patch --corrupt-from other on a data model" || fail "patch --corrupt-from other"
import json, sys
js = json.load(open(sys.argv[1]))
lines = [json.loads(l) for l in open(sys.argv[2])]
assert js["pairs_from"] == "other" and js["pairs"] + js["pairs_left_out"] == 7, js
assert js["pairs"] == len(lines) >= 4 and js["answer"] != js["wrong"]
assert all(l["clean"] > l["corrupt"] or l["clean"] < l["corrupt"] for l in lines)
# the same pairs as --pairs files (one a length): each example (a line of d.tsv, the
# held-out set) against its partner, of its length, its last target the answer and the
# partner's the wrong token
rows = [l.rstrip("\n").split("\t") for l in open("d.tsv")]
for l in lines:
    (x, y), (px, py) = rows[l["example"] - 1], rows[l["partner"] - 1]
    assert l["partner"] != l["example"] and len(x.split()) == len(px.split())
    assert y.split()[-1] != py.split()[-1]
    with open("rebuilt.%d.tsv" % len(x.split()), "a") as f:
        f.write("%s\t%s\t%s\t%s\n" % (x, px, y.split()[-1], py.split()[-1]))
    with open("rebuilt.%d.want" % len(x.split()), "a") as f:
        f.write(json.dumps(l) + "\n")
PYEOF
for len in 2 3; do
    "$QKV" patch dm --pairs rebuilt.$len.tsv --per-pair rebuilt.$len.jsonl --json >/dev/null &&
        "$PY" - rebuilt.$len.want rebuilt.$len.jsonl <<'PYEOF' || fail "--corrupt-from other against its --pairs file of length $len"
import json, sys
want, got = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
assert len(want) == len(got) > 0
for w, g in zip(want, got):
    for k in ("clean", "corrupt", "results"):
        assert w[k] == g[k], (k, w[k], g[k])
PYEOF
done && ok "--corrupt-from other: its pairs, as --pairs files, give its numbers"

# circuits: composition_all holds every pair of layers, the consecutive ones as composition
"$QKV" train --task reverse --seq-len 8 --vocab 8 --heads 2 --layers 3 --d-model 8 --steps 5 \
    --threads 1 --out r3 --quiet && "$QKV" circuits r3 --json >c.json &&
    "$PY" - c.json <<'PYEOF' && ok "circuits: composition_all" || fail "circuits' composition_all"
import json, sys
js = json.load(open(sys.argv[1]))
every = {(c["from"], c["to"], c["kind"]): c["score"] for c in js["composition_all"]}
assert len(every) == len(js["composition_all"]) == 3 * 3 * 4  # 3 pairs of layers, 3 kinds
assert all(every[(c["from"], c["to"], c["kind"])] == c["score"] for c in js["composition"])
assert ("1.2", "3.1", "v") in every
PYEOF

[ "$failures" -eq 0 ] && echo "explain_metrics_test: all passed" || echo "explain_metrics_test: $failures failed"
[ "$failures" -eq 0 ]
