#!/usr/bin/env bash
# views_test.sh - the views that could mislead say what they show (docs/explain.md):
#   - circuits' mapping view: a translate model's head writes each source word's translation
#     (mapping 16/16) though its copying score is below 0; the table explains the copying
#     score; the JSON keeps its fields and adds the mapping; an encoder-decoder's key tokens
#     are the encoder's, and qkv plot draws only those as keys;
#   - a data file's mapping: each word of an encoder-decoder's input maps to the output word
#     the examples pair it with (ant -> ANT);
#   - patch and attribute on an encoder-decoder's short input default to the last decoder
#     position that had a target in training, and name a position without one;
#   - eval's held-out example line agrees with the batch evaluation's predictions (eval --data
#     --per-example) on each SIMD path this CPU runs, for a model trained on AVX2;
#   - snapshots are kept every K steps and, between, where the attention moved by over 0.1 since
#     the last one kept; they change no weight, and a resumed run keeps the same ones.
#
# usage: tests/views_test.sh path/to/qkv SOURCE_DIR
set -u
QKV=${1:?usage: views_test.sh QKV SOURCE_DIR}
SRC=${2:?usage: views_test.sh QKV SOURCE_DIR}
[ "$QKV" = "${QKV#/}" ] && QKV=$PWD/$QKV
[ "$SRC" = "${SRC#/}" ] && SRC=$PWD/$SRC
PY=${QKV_PYTHON:-python3}
W=$(mktemp -d "${TMPDIR:-/tmp}/qkv_views.XXXXXX")
trap 'rm -rf "$W"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }
cd "$W" || exit 1

# ---- circuits on a translate model: a mapping, not a copy ----
"$QKV" train --task translate --d-model 32 --steps 200 --threads 1 --out tr --quiet >/dev/null ||
    { echo "views_test: cannot train translate"; exit 1; }
"$QKV" circuits tr >tr.txt || fail "circuits tr"
awk '$1 == 1 && $2 == 1 { ok = $3 < 0 && $4 == "16/16" } END { exit !ok }' tr.txt &&
    ok "translate's head: copying below 0, mapping 16/16" ||
    fail "translate's head row: $(grep -E '^ +1 +1 ' tr.txt)"
grep -q 'It measures copying' tr.txt && grep -q 'only: a head that writes another token' tr.txt &&
    ok "the table explains the copying score's limits" || fail "no explanation of the copying score"
grep -q '^  1\.1  s0->w[0-9]' tr.txt && ! grep -q -- '->[^ ]*!' tr.txt &&
    ok "each source word's top target is printed, all the task's" || fail "top targets: $(tail -1 tr.txt)"
"$QKV" circuits tr --json >tr.json && "$QKV" circuits tr --out tr/circuits.json >/dev/null ||
    fail "circuits --json"
"$PY" - tr.json <<'PYEOF' && ok "translate's JSON: every field, the mapping, the encoder's key tokens" || fail "translate's circuits JSON"
import json, sys
j = json.load(open(sys.argv[1]))
for f in ["command", "layers", "heads_per_layer", "d_k", "scale", "encoder_decoder", "vocab",
          "query_labels", "query_positions", "key_positions", "heads", "composition",
          "key_tokens", "mapping_source", "expected_targets"]:
    assert f in j, f
assert j["key_tokens"] == list(range(16)), j["key_tokens"]       # s0..s15, never w0..w15
assert [j["vocab"][k] for k in j["key_tokens"]] == ["s%d" % i for i in range(16)]
assert j["mapping_source"] == "task"
assert all(t.startswith("w") for t in j["expected_targets"]), j["expected_targets"]
assert len(set(j["expected_targets"])) == 16                    # a dictionary: one to one
h = j["heads"][0]
for f in ["layer", "head", "copying_score", "qk", "qk_pos", "ov", "mapping"]:
    assert f in h, f
m = h["mapping"]
assert m["top_targets"] == j["expected_targets"], (m, j["expected_targets"])
assert (m["right"], m["sources"], m["share"]) == (16, 16, 1), m
assert h["copying_score"] < 0
PYEOF
if command -v gnuplot >/dev/null 2>&1; then
    "$QKV" plot tr >/dev/null || fail "plot tr"
    # the QK circuit's key columns and the OV circuit's rows: the 16 source words only
    sed -n 2p tr/plots/circuit_qk_layer1_head1.dat | awk '{ exit !(NF == 17 && $2 == "s0" && $17 == "s15") }' &&
        awk 'NR > 2 && $1 !~ /^s[0-9]+$/ { bad = 1 } NR > 2 { n++ } END { exit bad || n != 16 }' \
            tr/plots/circuit_ov_layer1_head1.dat &&
        ok "the plotted circuits' keys are the encoder's 16 tokens" ||
        fail "plotted keys: $(sed -n 2p tr/plots/circuit_qk_layer1_head1.dat)"
fi

# ---- a data file's encoder-decoder: its mapping, and its positions without a target ----
"$QKV" train --data "$SRC/tests/data/odd_words.tsv" --d-model 16 --steps 20 --threads 1 --out od \
    --quiet >/dev/null 2>&1 || { echo "views_test: cannot train odd_words"; exit 1; }
"$QKV" circuits od --json >od.json || fail "circuits od"
"$PY" - od.json <<'PYEOF' && ok "odd_words' mapping: each word to its capital, the encoder's words as keys" || fail "odd_words' mapping"
import json, sys
j = json.load(open(sys.argv[1]))
keys = [j["vocab"][k] for k in j["key_tokens"]]
assert keys and all(k.islower() for k in keys), keys           # no output word, no padding
assert j["mapping_source"] == "data"
assert j["expected_targets"] == [k.upper() for k in keys], (keys, j["expected_targets"])
PYEOF
# inputs of 4 to 8 words train 2 to 4 targets: "ant bee" (nearest, 4 words) had targets at 0, 1
"$QKV" attribute od --input "ant bee" --json >a1.json &&
    "$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(not (j["position"] == 1 and j["position_has_target"] is True))' a1.json &&
    ok "attribute's default position: the last decoder position with a target in training" ||
    fail "attribute's default position: $(cat a1.json)"
"$QKV" patch od --clean "ant bee" --corrupt "ant dog" --answer BEE --wrong DOG --json >p1.json &&
    "$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(not (j["position"] == 1 and j["position_has_target"] is True))' p1.json &&
    ok "patch's default position: the same" || fail "patch's default position: $(head -c 300 p1.json)"
"$QKV" attribute od --input "ant bee" --position 3 --json >a3.json &&
    "$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(not (j["position"] == 3 and j["position_has_target"] is False))' a3.json &&
    "$QKV" attribute od --input "ant bee" --position 3 | grep -q 'at position 3 (no target in training)' &&
    "$QKV" patch od --clean "ant bee" --corrupt "ant dog" --answer BEE --wrong DOG --position 3 |
        grep -q 'at position 3 (no target in training)' &&
    ok "a position without a target in training is named so, in the table and the JSON" ||
    fail "position 3 of a 2-word input: $(cat a3.json)"

# ---- eval's example line against the batch evaluation, on every path, trained on AVX2 ----
# (the default induction model: heads 32 wide, whose one-example forward once took another
# product's branch than the batch's on AVX-512 and read its weights wrongly)
QKV_SIMD=avx2 "$QKV" train --task induction --steps 100 --threads 1 --out ind --quiet \
    >/dev/null 2>&1 || QKV_SIMD= "$QKV" train --task induction --steps 100 --threads 1 \
    --out ind --quiet --force >/dev/null 2>&1 || { echo "views_test: cannot train induction"; exit 1; }
for path in avx2 avx512 neon; do # the SIMD paths (selftest holds each to plain C's bits)
    QKV_SIMD=$path "$QKV" eval ind >ev.txt 2>ev.err ||
        { grep -q "qkv: QKV_SIMD=$path:" ev.err || fail "eval on $path"; continue; } # runs it?
    line=$(grep 'held-out example:' ev.txt)
    input=$(sed 's/.*held-out example: \(.*\) → .*/\1/' <<<"$line")
    # the example's input as a data file, among others: one batch with the held-out example
    { echo "$input"; grep -v '^$' <<<"1 2 3 4 1 2 3 4 1 2 3 4 1 2 3 4
5 6 7 8 9 10 5 6 7 8 9 10 5 6 7 8"; } >ex.txt
    QKV_SIMD=$path "$QKV" eval ind --data ex.txt --per-example pe.jsonl >/dev/null 2>&1 ||
        { fail "eval --data on $path"; continue; }
    "$PY" - "$line" pe.jsonl <<'PYEOF' && ok "$path: the example line agrees with the batch's predictions" || fail "$path: $line"
import json, re, sys
line, pe = sys.argv[1], sys.argv[2]
m = re.search(r"held-out example: (.*) → (.*) \((\d+) of (\d+) targets right\)", line)
shown = m.group(2).split()
first = json.loads(open(pe).readline())
batch = [p if t is not None else "_" for t, p in zip(first["targets"], first["predictions"])]
batch = [str(b) for b in batch][:len(shown)]
assert shown == batch, (shown, batch)
assert int(m.group(3)) == first["correct"] and int(m.group(4)) == first["counted"], (m.groups(), first)
PYEOF
done

# ---- snapshots: denser where the attention changes fastest; the same bits; resumed alike ----
FORM=(--task reverse --steps 24 --schedule constant --warmup 0 --threads 1 --quiet)
"$QKV" train "${FORM[@]}" --snapshot-every 8 --out fm >/dev/null &&
    "$QKV" train "${FORM[@]}" --out fm0 >/dev/null || { echo "views_test: cannot train reverse"; exit 1; }
cmp -s fm/model.safetensors fm0/model.safetensors && ok "snapshots leave the weights' bits as they are" ||
    fail "a run with snapshots has other weights than one without"
"$PY" - fm/snapshots <<'PYEOF' && ok "snapshots every 8 steps, and between them where the attention moved by over 0.1" || fail "the snapshots' steps"
import glob, os, re, sys
d = sys.argv[1]
def load(step):
    maps = []
    for path in sorted(glob.glob(f"{d}/step{step}_layer*_head*.dat")):
        rows = [l.split()[1:] for l in open(path) if not l.startswith("#")][1:]
        maps.append([[float(v) for v in r] for r in rows])
    return maps
def change(a, b):  # the largest over heads of the mean over rows of the total variation
    return max(sum(sum(abs(x - y) for x, y in zip(ra, rb)) / 2 for ra, rb in zip(ha, hb)) / len(ha)
               for ha, hb in zip(a, b))
steps = sorted({int(re.match(r"step(\d+)_", os.path.basename(p)).group(1)) for p in glob.glob(d + "/step*.dat")})
assert {0, 8, 16, 24} <= set(steps), steps
extra = [s for s in steps if s % 8]
assert extra and all(s % 2 == 0 for s in extra), steps  # measured every 8 / 4 steps
for before, s in zip(steps, steps[1:]):
    if s in extra:
        assert change(load(before), load(s)) > 0.1, (before, s)
print("snapshot steps", steps)
PYEOF
# a run stopped at step 13 and resumed keeps the snapshots the whole run keeps
"$QKV" train "${FORM[@]/24/13}" --snapshot-every 8 --out fr >/dev/null &&
    "$QKV" train --resume fr --steps 24 --snapshot-every 8 --threads 1 --quiet >/dev/null &&
    diff -r fm/snapshots fr/snapshots >/dev/null && ok "a resumed run keeps the same snapshots" ||
    fail "a resumed run's snapshots: $(ls fr/snapshots | tr '\n' ' ')"

[ "$failures" -eq 0 ] && echo "views_test: all ok" || echo "views_test: $failures failure(s)"
exit $((failures > 0))
