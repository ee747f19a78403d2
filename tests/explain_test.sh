#!/usr/bin/env bash
# explain_test.sh - qkv eval --data, ablate, patch and attribute end to end on one small
# induction model: the JSON objects of docs/explain.md (python3 reads them), --out writing the
# same object as --json, --dtype f64, the model as operand or --model, eval without --data
# unchanged, and the refusals that need a causal task (a position without a target).
#
# usage: tests/explain_test.sh path/to/qkv
set -u
QKV=${1:?usage: explain_test.sh QKV}
[ "$QKV" = "${QKV#/}" ] && QKV=$PWD/$QKV
PY=${QKV_PYTHON:-python3}
SRC=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/qkv_explain.XXXXXX")
trap 'rm -rf "$W"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }

"$QKV" train --task induction --d-model 32 --steps 150 --threads 1 --out "$W/m" --quiet ||
    { echo "explain_test: cannot train"; exit 1; }
cd "$W" || exit 1
printf '6 12 11 9 6 12 11 9 6 12 11 9 6 12 11 9\n1 2 3 4 1 2 3 4 1 2 3 4 1 2 3 4\n' >data.txt
clean="6 12 11 9 6 12 11 9 6 12 11 9 6 12 11 9"
corrupt="1 2 3 4 5 7 8 10 6 12 11 9 6 12 11 9"

# circuits, like ablate, patch and attribute: the model as the operand or --model
"$QKV" circuits m --json >a.txt && "$QKV" circuits --model m --json >b.txt && cmp -s a.txt b.txt &&
    ok "circuits DIR prints what circuits --model DIR prints" || fail "circuits DIR differs from circuits --model"

"$QKV" lens m --input "$clean" --json >a.txt && "$QKV" lens --model m --input "$clean" --json >b.txt &&
    cmp -s a.txt b.txt && ok "lens DIR prints what lens --model DIR prints" || fail "lens DIR differs from lens --model"
# the table: a row per position, a column per layer boundary, then the parts
"$QKV" lens m --input "$clean" >a.txt && grep -q '^  position  *final  *after 0 (embed)  *after 1  *after 2$' a.txt &&
    [ "$(grep -c '^  [0-9]*:' a.txt)" = 32 ] && ok "lens prints its table" || fail "lens's table: $(head -n 3 a.txt)"

# patch --pairs: a file of one pair gives what --clean/--corrupt gives; three pairs give the
# means of their own numbers, which --per-pair writes one line each
printf '%s\t%s\n' "$clean" "$corrupt" >one_pair.txt
"$QKV" patch m --pairs one_pair.txt --json >a.txt && "$QKV" patch m --clean "$clean" --corrupt "$corrupt" --json >b.txt &&
    "$PY" - a.txt b.txt <<'PYEOF' && ok "a pairs file of one pair gives the pair's numbers" || fail "patch --pairs of one pair differs"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["pairs"] == 1 and a["pairs_from"] == "one_pair.txt" and "tokens" not in a, a.keys()
for k in ("clean", "corrupt", "agreement"):
    assert a[k] == b[k], (k, a[k], b[k])
assert [(r["exact"], r["attribution"]) for r in a["results"]] == [(r["exact"], r["attribution"]) for r in b["results"]]
PYEOF
printf '%s\t%s\n%s\t%s\t9\t4\n%s\t%s\t9\t4\n' "$clean" "$corrupt" "$clean" "$corrupt" \
    "6 12 11 9 6 12 11 9 6 12 11 9 6 12 11 9" "6 12 11 9 6 12 11 9 1 2 3 4 6 12 11 9" >pairs.txt
"$QKV" patch m --pairs pairs.txt --site v --over key-position --per-pair per.jsonl --out p.json >/dev/null &&
    "$PY" - p.json per.jsonl <<'PYEOF' && ok "patch --pairs: shares of the means, --per-pair each pair's" || fail "patch --pairs or --per-pair"
import json, sys
js = json.load(open(sys.argv[1]))
lines = [json.loads(l) for l in open(sys.argv[2])]
assert js["pairs"] == 3 and len(lines) == 3 and [l["pair"] for l in lines] == [1, 2, 3]
assert js["site"] == "v" and js["over"] == "key-position"
assert len(js["results"]) == 2 * 2 * 16 and all(r["site"] == "v" and r["position"] is None for r in js["results"])
assert [r["key_position"] for r in js["results"][:3]] == [0, 1, 2]
clean = sum(l["clean"] for l in lines) / 3
corrupt = sum(l["corrupt"] for l in lines) / 3
assert abs(clean - js["clean"]) <= 1e-9 * abs(clean) and abs(corrupt - js["corrupt"]) <= 1e-9 * abs(clean)
for k, r in enumerate(js["results"]):
    patched = sum(l["results"][k]["patched"] for l in lines) / 3
    assert abs((patched - corrupt) / (clean - corrupt) - r["exact"]) <= 1e-6, (k, r["exact"])
PYEOF
# --corrupt-from resample on the induction model; --path: every path, the logits' own exact
"$QKV" patch m --corrupt-from resample --path --json >a.txt && "$PY" - a.txt <<'PYEOF' &&
import json, sys
js = json.load(open(sys.argv[1]))
assert js["path"] and js["pairs"] > 100 and js["pairs_from"] == "resample", (js["pairs"],)
p = js["paths"]
assert len(p) == 4 * 3 + 2 + 2 and [x["receiver"] for x in p[:7]] == ["2.1"] * 3 + ["2.2"] * 3 + ["logits"]
assert [x["via"] for x in p[:3]] == ["q", "k", "v"] and p[6]["via"] is None
for x in p:
    if x["receiver"] == "logits":
        assert abs(x["exact"] - x["attribution"]) <= 1e-4, x
PYEOF
    ok "patch --corrupt-from resample --path" || fail "patch --corrupt-from resample --path: $(head -c 300 a.txt)"
# --corrupt-from shuffle on a lookup model: every held-out example a pair or left out
if "$QKV" train --task lookup --d-model 16 --steps 60 --threads 1 --out lk --quiet 2>/dev/null &&
   "$QKV" patch lk --corrupt-from shuffle --json >a.txt; then
    "$PY" - a.txt <<'PYEOF' && ok "patch --corrupt-from shuffle" || fail "patch --corrupt-from shuffle: $(head -c 300 a.txt)"
import json, sys
js = json.load(open(sys.argv[1]))
assert js["pairs_from"] == "shuffle" and js["pairs"] > 0 and js["pairs"] + js["pairs_left_out"] == 512
assert js["answer"] != js["wrong"] and len(js["results"]) == 1
PYEOF
    # lookup's outputs are values: v2, never the pair token k0:v2 that shares its id
    lk_in="k3:v2 k5:v2 k6:v2 k0:v2 k1:v1 k2:v2 k4:v2 ?k5"
    "$QKV" eval lk | grep -Eq '^  held-out example: .* → _ _ _ _ _ _ _ ([0-9]+|v[0-9]+) \(' &&
        "$QKV" attribute lk --input "$lk_in" --token v1 | grep -q "^attribute: the logit of 'v1' " &&
        "$QKV" circuits lk | grep -Eq '^  1\.1  k0:v0->(v[0-9]+|[0-9]+)[!?]? ' &&
        "$QKV" lens lk --input "$lk_in" --json >a.txt && "$PY" - a.txt <<'PYEOF' &&
import json, re, sys
js = json.load(open(sys.argv[1]))
names = [t["token"] for b in js["layers"] for c in b["positions"] for t in c["top"]]
names += [d["token"] for d in js["decomposition"]]
assert all(re.fullmatch(r"v[0-3]|[0-9]+", n) for n in names), names
PYEOF
        ok "lookup: eval, attribute, circuits and lens name outputs as values" ||
        fail "lookup: an output named as a pair token"
else
    fail "lookup model or patch --corrupt-from shuffle"
fi
# ablate at a site: the stream entering each layer at each position
"$QKV" ablate m --site resid-pre --json >a.txt && "$PY" - a.txt <<'PYEOF' && ok "ablate --site resid-pre" || fail "ablate --site resid-pre"
import json, sys
js = json.load(open(sys.argv[1]))
assert js["site"] == "resid-pre" and js["over"] == "layer-position"
assert len(js["heads"]) == 2 * 16 and all(h["head"] is None for h in js["heads"])
PYEOF

# eval: the operand is --model, and without --data the bytes are those of before
"$QKV" eval --model m >a.txt && "$QKV" eval m >b.txt && cmp -s a.txt b.txt &&
    ok "eval DIR prints what eval --model DIR prints" || fail "eval DIR differs from eval --model"

# the example line: an output for every input position, the last (no target: _) too
"$QKV" eval m | grep -Eq '^  held-out example: ([0-9]+ ){16}→ _ _ _ _ ([0-9]+ ){11}_ \(' &&
    ok "eval's example line shows every position" || fail "eval's example line: $("$QKV" eval m | tail -1)"

# the help names what each command can exit with, and plot every analysis file it draws
"$QKV" eval --help | grep -q '^Exit codes: 0 done' && "$QKV" attribute --help | grep -q '5 a number is not finite' &&
    "$QKV" plot --help | grep -q '(lens.json, qkv lens --out)' && ok "help: exit codes and lens.json" ||
    fail "help: eval's exit codes, attribute's exit 5 or plot's lens.json missing"

# one example, one pair, an induction model: the words agree with their numbers
printf '%s\n' "$clean" >one.txt
printf '%s\t%s\n' "$clean" "$corrupt" >onepair.txt
"$QKV" eval m --data one.txt | grep -q '^eval: one.txt, 1 example, 11 positions with a target$' &&
    "$QKV" patch m --pairs onepair.txt | grep -q '^patch: logit\[answer\] - logit\[wrong\] over 1 pair (' &&
    { "$QKV" eval m --data onepair.txt 2>&1 | grep -q "a tab: an induction model's examples"; } &&
    "$QKV" ablate m | grep -q '^ablate: zero ablation of each head (--site z, --over head), ' &&
    ok "plurals and articles" || fail "plurals and articles"

# every command: --json is one object with the fields of docs/explain.md; --out the same object
check_json() { # FILE COMMAND FIELDS...
    "$PY" - "$@" <<'PYEOF'
import json, sys
path, command, fields = sys.argv[1], sys.argv[2], sys.argv[3:]
js = json.load(open(path))
missing = [f for f in ["command", "layers", "heads", "heads_per_layer"] + fields if f not in js]
assert not missing, "missing %s" % missing
assert js["command"] == command, js["command"]
# lens's "layers" is its list of layer boundaries (after 0, 1, 2), not the count
assert (len(js["layers"]) == 3 if command == "lens" else js["layers"] == 2) and \
    js["heads_per_layer"] == 2, (js["layers"], js["heads_per_layer"])
assert command == "ablate" or js["heads"] == 2, js["heads"]
if "tokens" in js:
    assert js["tokens"][:4] == ["6", "12", "11", "9"], js["tokens"]
if command == "attribute":
    s = sum(p["value"] for p in js["parts"])
    assert abs(s - js["logit"]) <= 1e-12 * sum(abs(p["value"]) for p in js["parts"]) or \
        js["dtype"] == "f32", (s, js["logit"])
    assert [p["name"] for p in js["parts"]] == ["embed", "1.1", "1.2", "2.1", "2.2", "bias"]
if command == "lens":
    P = len(js["positions"])
    assert P == 16 and [b["after"] for b in js["layers"]] == [0, 1, 2]
    for b in js["layers"]:
        assert [c["position"] for c in b["positions"]] == list(range(P))
        for c in b["positions"]:
            probs = [t["prob"] for t in c["top"]]
            assert len(probs) == 3 and probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-9
            assert len({t["token"] for t in c["top"]}) == 3 and c["rank_of_final"] >= 1
    assert [d["position"] for d in js["decomposition"]] == list(range(P))
    for d, last in zip(js["decomposition"], js["layers"][-1]["positions"]):
        # the last row is the model's output: its top token is the final prediction
        assert last["rank_of_final"] == 1 and last["top"][0]["token"] == d["token"], (last, d)
        assert [q["name"] for q in d["parts"]] == ["embed", "1.1", "1.2", "2.1", "2.2", "bias"]
        s = sum(q["value"] for q in d["parts"])
        tol = 1e-12 if js["dtype"] == "f64" else 1e-5
        assert abs(s - d["logit"]) <= tol * max(1, abs(d["logit"])), (s, d["logit"])
if command == "patch":
    assert len(js["results"]) == 4 and js["results"][0]["position"] is None
    assert js["agreement"] is not None
    for r in js["results"]:
        if r["layer"] == 2:
            assert abs(r["exact"] - r["attribution"]) <= (1e-9 if js["dtype"] == "f64" else 1e-3)
if command == "ablate":
    assert len(js["heads"]) == 4 and js["heads"][3] == {**js["heads"][3], "layer": 2, "head": 2}
if command == "eval":
    assert js["examples"] == 2 and js["counted"] == 22, (js["examples"], js["counted"])
    assert len(js["head_scores"]) == 4
PYEOF
}
run_both() { # NAME FIELDS -- ARGS...
    local name=$1 fields=$2
    shift 3
    if "$QKV" "$@" --json >"$name.stdout.json" && "$QKV" "$@" --out "$name.json" >"$name.txt" &&
       cmp -s "$name.stdout.json" "$name.json" && grep -q "^wrote $name.json" "$name.txt"; then
        # shellcheck disable=SC2086
        if err=$(check_json "$name.json" "$1" $fields 2>&1); then ok "$*"; else fail "$*: $err"; fi
    else
        fail "$*: --json and --out differ, or a command failed"
    fi
}
for dt in f32 f64; do
    run_both ablate_$dt "mode baseline heads together" -- ablate m --together --dtype $dt
    run_both patch_$dt "tokens positions clean corrupt results agreement" -- \
        patch m --clean "$clean" --corrupt "$corrupt" --dtype $dt
    run_both attribute_$dt "tokens positions logit parts sum" -- \
        attribute m --input "$clean" --dtype $dt
    run_both lens_$dt "tokens positions decomposition" -- lens m --input "$clean" --top 3 --dtype $dt
    run_both eval_$dt "examples loss accuracy chance by_position by_length head_scores" -- \
        eval m --data data.txt --dtype $dt
done
"$QKV" eval m --data data.txt --per-example per.jsonl >/dev/null &&
    [ "$(wc -l <per.jsonl)" = 2 ] && "$PY" -c "
import json
rows = [json.loads(l) for l in open('per.jsonl')]
assert rows[0]['line'] == 1 and len(rows[0]['predictions']) == 16 and rows[0]['targets'][0] is None
assert rows[0]['counted'] == 11 and rows[1]['counted'] == 11" && ok "eval --per-example" ||
    fail "eval --per-example"
# a one-layer model has no induction score: "-" in the table, null in the JSON
"$QKV" train --task induction --layers 1 --d-model 16 --steps 10 --threads 1 --out one --quiet 2>/dev/null &&
    "$QKV" eval one --data data.txt >one.txt && grep -Eq '^  1\.1 +[0-9.]+ +[0-9.]+ +[0-9.]+ +-$' one.txt &&
    "$QKV" eval one --data data.txt --json | "$PY" -c "
import json, sys
assert json.load(sys.stdin)['head_scores'][0]['induction'] is None" &&
    ok "one layer: no induction score" || fail "one layer: an induction score: $(tail -n 2 one.txt)"

# a vocabulary smaller than lens's default --top (5): a, b, c and the padding token, all listed
printf 'a b c\tb a c\nc a\ta c\nb b a\ta b b\n' >abc.tsv
"$QKV" train --data abc.tsv --heldout abc.tsv --d-model 4 --steps 1 --threads 1 --quiet --out abc \
    >/dev/null 2>&1 && "$QKV" lens abc --input "a b" --json >abc.json && "$PY" -c "
import json
js = json.load(open('abc.json'))
assert all(len(c['top']) == 4 for b in js['layers'] for c in b['positions']), js['layers'][0]
assert {t['token'] for t in js['layers'][0]['positions'][0]['top']} == {'a', 'b', 'c', '<pad>'}" &&
    ok "lens lists the whole of a 4-token vocabulary by default" || fail "lens on a 4-token vocabulary"

# every head of a model with more heads per layer (72) than training's evaluation scores (64):
# ablate lists each and takes --heads 1.70, attribute's parts add up to the logit, eval --data
# gives each head's entropy
"$QKV" train --task copy --seq-len 4 --vocab 8 --d-model 144 --heads 72 --steps 1 --batch 4 \
    --threads 1 --out w72 --quiet 2>/dev/null || fail "cannot train the 72-head model"
printf '1 2 3 4\n5 6 7 0\n' >w72.txt
"$QKV" ablate w72 --json >ab.json && "$QKV" ablate w72 --heads 1.70 --json >ab70.json &&
    "$QKV" attribute w72 --input '1 2 3 4' --json >at.json &&
    "$QKV" eval w72 --data w72.txt --json >ev.json &&
    "$PY" - <<'PY' && ok "72 heads: ablate, attribute and eval --data cover every head" || fail "72 heads: a head is missing"
import json
ab, ab70 = json.load(open("ab.json")), json.load(open("ab70.json"))
at, ev = json.load(open("at.json")), json.load(open("ev.json"))
assert [h["head"] for h in ab["heads"]] == list(range(1, 73)), len(ab["heads"])
assert [(h["layer"], h["head"]) for h in ab70["heads"]] == [(1, 70)]
heads = [p["name"] for p in at["parts"] if p["layer"] is not None]
assert heads == ["1.%d" % h for h in range(1, 73)], heads
assert abs(sum(p["value"] for p in at["parts"]) - at["logit"]) <= 1e-4 * (1 + abs(at["logit"]))
assert [h["head"] for h in ev["head_scores"]] == list(range(1, 73)), len(ev["head_scores"])
assert all(h["entropy"] is not None for h in ev["head_scores"])
PY
"$QKV" eval w72 2>/dev/null | grep -q '^  (the attention mass and head scores above are of the first 64 heads of each layer.s 72;' &&
    ok "72 heads: eval says its head scores stop at 64" || fail "72 heads: eval's summary hides its 64-head limit"
"$QKV" eval w72 2>/dev/null | head -1 | grep -q ', after 1 step$' && ok "eval: after 1 step" ||
    fail "eval of a 1-step model: $("$QKV" eval w72 2>/dev/null | head -1)"

# refusals: one line, the documented exit code, nothing written
refuse() { # CODE FRAGMENT ARGS...
    local code=$1 frag=$2
    shift 2
    "$QKV" "$@" >out.txt 2>err.txt
    local rc=$?
    if [ "$rc" = "$code" ] && [ "$(wc -l <err.txt)" = 1 ] && grep -q -- "$frag" err.txt &&
       [ ! -s out.txt ] && [ ! -e new.json ]; then ok "refused: $*"; else
        fail "$* gave exit $rc: $(cat err.txt out.txt)"; fi
}
# a position without a target (induction's first four and its last) is read, and named so;
# the lens marks them
"$QKV" lens m --input "$clean" >a.txt && grep -q '^  0:6\*  ' a.txt && grep -q '^  15:9\*  ' a.txt &&
    grep -q '^  4:6  ' a.txt && grep -q '; \* a position with no target in training)$' a.txt &&
    "$QKV" lens m --input "$clean" --json | "$PY" -c "
import json, sys
d = json.load(sys.stdin)['decomposition']
assert [e['has_target'] for e in d] == [False] * 4 + [True] * 11 + [False], d
" && ok "lens marks the positions without a target" || fail "lens: the positions without a target: $(head -c 600 a.txt)"
"$QKV" attribute m --input "$clean" --position 15 >a.txt &&
    grep -q "^attribute: the logit of '[0-9]*' at position 15:9 (no target in training) is " a.txt &&
    "$QKV" attribute m --input "$clean" --position 2 --token 11 --json >a.json &&
    "$QKV" patch m --clean "$clean" --corrupt "$corrupt" --position 0 --answer 12 --wrong 2 \
        --json >p.json &&
    "$PY" -c "
import json
a, p = json.load(open('a.json')), json.load(open('p.json'))
assert a['position'] == 2 and a['token'] == '11' and a['position_has_target'] is False, a
assert p['position'] == 0 and p['answer'] == '12' and p['position_has_target'] is False, p
" && ok "attribute and patch read a position without a target, and name it" ||
    fail "a position without a target: $(head -c 300 a.txt)"
refuse 2 "--position 16 is past the last position (15)" attribute m --input "$clean" \
    --position 16 --out new.json
refuse 2 "no position with a target" patch m --clean "1 2 3 4 5 7 8 10 13 14 15 0 6 2 3 4" \
    --corrupt "$corrupt"
refuse 2 "is the input" eval m --data data.txt --per-example data.txt
{ cat data.txt; echo "x 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15"; } >unknown.txt
echo "1 2 3" >short.txt
refuse 4 "unknown.txt line 3: unknown token 'x'" eval m --data unknown.txt
[ -e per.jsonl ] && cp per.jsonl per.before
refuse 4 "line 1: 3 input tokens; the model reads exactly 16" eval m --data short.txt \
    --per-example per.jsonl
cmp -s per.jsonl per.before && ok "a refused --per-example leaves the old file" ||
    fail "a refused eval changed per.jsonl"

# tokens named losslessly: a data model whose tokens are é, ü and two long tokens that share
# their first 30 bytes; every JSON output carries each token whole (UTF-8), never a label
long=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
"$PY" - "$long" <<'PYEOF'
import random, sys
random.seed(1)
toks = ['é', 'ü', sys.argv[1] + 'x1', sys.argv[1] + 'x2', 'cat', 'é' * 30]
with open('words.tsv', 'w') as f:
    for _ in range(40):
        xs = [random.choice(toks) for _ in range(4)]
        f.write(' '.join(xs) + '\t' + ' '.join(reversed(xs)) + '\n')
PYEOF
words="é ü ${long}x1 ${long}x2"
printf '%s\t%s\n' "$words" "${long}x2 ${long}x1 ü é" >words_in.tsv
if "$QKV" train --data words.tsv --heldout words.tsv --d-model 8 --steps 5 --threads 1 --quiet \
       --out u >/dev/null &&
    "$QKV" eval u --data words_in.tsv --per-example u_per.jsonl >/dev/null &&
    "$QKV" patch u --clean "$words" --corrupt "ü é ${long}x2 ${long}x1" --answer "${long}x1" \
        --wrong "${long}x2" --json >u_patch.json &&
    "$QKV" attribute u --input "$words" --json >u_attr.json &&
    "$QKV" lens u --input "$words" --top 7 --json >u_lens.json &&
    "$QKV" circuits u --json >u_circ.json &&
    "$QKV" inspect --model u --input "$words" --json >u_insp.json &&
    "$PY" - "$long" <<'PYEOF'
import json, sys
L = sys.argv[1]
words = ['é', 'ü', L + 'x1', L + 'x2']
per = json.loads(open('u_per.jsonl').readline())
assert per['input'] == words and per['targets'] == words[::-1], per
assert set(per['predictions']) <= set(words + ['cat', 'é' * 30, '<pad>']), per
patch = json.load(open('u_patch.json'))
assert patch['tokens'] == words and patch['answer'] == L + 'x1' and patch['wrong'] == L + 'x2'
assert patch['positions'] == ['%d:%s' % (i, w) for i, w in enumerate(words)], patch['positions']
attr = json.load(open('u_attr.json'))
assert attr['tokens'] == words and attr['token'] in words + ['cat', 'é' * 30, '<pad>'], attr
lens = json.load(open('u_lens.json'))
assert lens['tokens'] == words and len(lens['layers'][0]['positions']) == 4, lens['positions']
assert {t['token'] for t in lens['layers'][1]['positions'][0]['top']} == set(words + ['cat', 'é' * 30, '<pad>'])
vocab = json.load(open('u_circ.json'))['vocab']
assert set(words + ['é' * 30]) <= set(vocab) and len(set(vocab)) == len(vocab), vocab
insp = json.load(open('u_insp.json'))
assert insp['labels'] == ['%d:%s' % (i, w) for i, w in enumerate(words)], insp['labels']
PYEOF
then ok "JSON names é, ü and two long tokens whole"; else fail "a JSON output shortened or mangled a token"; fi
# gnuplot's labels may be shortened, but never inside a character: 30 é's (60 bytes) drawn
if command -v gnuplot >/dev/null; then
    if "$QKV" circuits u --out u/circuits.json >/dev/null && "$QKV" plot u >/dev/null &&
        "$PY" -c "
import glob
files = glob.glob('u/plots/circuit_*.dat')
assert files
for f in files: open(f, 'rb').read().decode('utf-8')"; then
        ok "plot's labels of long UTF-8 tokens stay UTF-8"; else fail "plot cut a label inside a character"; fi
fi

# eval --data gives the hint plain eval gives: a data model stopped after 40 steps, far below
# 90% on its own examples, gets the same "hint:" line over a file, and --json its text
head -n 200 "$SRC/tests/data/swap_pairs.tsv" >swap.tsv
if "$QKV" train --data swap.tsv --d-model 16 --steps 40 --threads 1 --quiet --out short >/dev/null 2>&1 &&
    plain=$("$QKV" eval short | grep '^hint: ') && [ -n "$plain" ] &&
    "$QKV" eval short --data swap.tsv >short.txt && [ "$(grep '^hint: ' short.txt)" = "$plain" ] &&
    "$QKV" eval short --data swap.tsv --json >short.json &&
    "$PY" -c "import json, sys; assert 'hint: ' + json.load(open('short.json'))['hint'] == sys.argv[1]" "$plain" &&
    "$QKV" eval m --data data.txt --json | "$PY" -c "import json, sys; assert json.load(sys.stdin)['hint'] is None"
then ok "eval --data gives plain eval's hint ($plain), null when none is due"
else fail "eval --data gives no hint, or another than plain eval's ($(grep '^hint' short.txt 2>/dev/null))"; fi

[ "$failures" -eq 0 ] && echo "explain_test: all passed" || echo "explain_test: $failures failed"
[ "$failures" -eq 0 ]
