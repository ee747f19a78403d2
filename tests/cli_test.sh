#!/usr/bin/env bash
# cli_test.sh - qkv train, eval and grads end to end, and every bad input the CLI must refuse.
#
# usage: tests/cli_test.sh path/to/qkv
#
# Needs a python3 (json, struct: no torch) to validate JSON output and to craft broken model
# files; QKV_PYTHON chooses it (default /usr/bin/python3, else python3 on PATH).
set -u

QKV=${1:?usage: cli_test.sh path/to/qkv}
PY=${QKV_PYTHON:-}
if [ -z "$PY" ]; then
    if [ -x /usr/bin/python3 ]; then PY=/usr/bin/python3; else PY=$(command -v python3 || true); fi
fi
[ -n "$PY" ] || { echo "cli_test: no python3 to validate JSON and craft files" >&2; exit 1; }

FIXTURES=$(cd "$(dirname "$0")" && pwd)/fixtures
W=$(mktemp -d "${TMPDIR:-/tmp}/qkv_cli_test.XXXXXX")
trap 'rm -rf "$W"' EXIT
cd "$W" || exit 1

failures=0
checks=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { checks=$((checks + 1)); }
check() { # check DESCRIPTION COMMAND...: the command must succeed
    local desc=$1; shift
    if "$@"; then ok; else fail "$desc"; fi
}

# run CODE DESC -- ARGS...: runs qkv ARGS, expects exit CODE; leaves out.txt and err.txt.
run() {
    local want=$1 desc=$2; shift 3
    "$QKV" "$@" >out.txt 2>err.txt
    local rc=$?
    if [ "$rc" -ne "$want" ]; then
        fail "$desc: exit $rc, expected $want (qkv $*): $(head -c 300 err.txt)"
        return 1
    fi
    ok
}

# bad CODE DESC -- ARGS...: must fail with CODE (< 128: no crash) and exactly one stderr line
# starting with "qkv: ".
bad() {
    local want=$1 desc=$2; shift 3
    "$QKV" "$@" >out.txt 2>err.txt
    local rc=$?
    if [ "$rc" -ge 128 ]; then fail "$desc: crashed with exit $rc (qkv $*)"; return; fi
    if [ "$rc" -ne "$want" ]; then
        fail "$desc: exit $rc, expected $want (qkv $*): $(head -c 300 err.txt)"; return
    fi
    local lines
    lines=$(wc -l <err.txt)
    if [ "$lines" -ne 1 ]; then
        fail "$desc: $lines lines on stderr, expected 1: $(head -c 300 err.txt)"; return
    fi
    if ! grep -q '^qkv: ' err.txt; then fail "$desc: stderr does not start with 'qkv: ': $(cat err.txt)"; return; fi
    if [ -s out.txt ]; then fail "$desc: printed on stdout: $(head -c 200 out.txt)"; return; fi
    ok
}

no_tmp_files() { # no leftover temporary files (NAME.tmp.PID) under a directory
    local left
    left=$(find "$1" -name '*.tmp.*' 2>/dev/null | head -n 3)
    [ -z "$left" ] || { echo "leftover: $left"; return 1; }
}

json_get() { # json_get FILE KEY: prints one value of the single JSON object in FILE
    "$PY" - "$1" "$2" <<'EOF'
import json, sys
text = open(sys.argv[1]).read()
print(json.loads(text)[sys.argv[2]])
EOF
}

# ---- train: files ---------------------------------------------------------------------------
run 0 "train copy --out" -- train --task copy --steps 300 --d-model 32 --out run1 --quiet
check "train --quiet prints only the one-line result" test "$(grep -c . out.txt)" = 1
grep -q "^copy: held-out accuracy" out.txt && ok || fail "train --quiet result line: $(cat out.txt)"
check "train --quiet prints nothing on stderr" test ! -s err.txt
check "model.safetensors written" test -s run1/model.safetensors
check "metrics.csv written" test -s run1/metrics.csv
check "attention/layer1_head1.dat written" test -s run1/attention/layer1_head1.dat
check "no temporary files left" no_tmp_files run1
run 0 "train --out into missing parents" -- train --task copy --steps 5 --d-model 8 --out runs/a/b --quiet
check "--out creates its parents (like mkdir -p)" test -s runs/a/b/model.safetensors
header=$(head -n 1 run1/metrics.csv)
case "$header" in
    step,loss,train_acc,heldout_acc,lr*) ok ;;
    *) fail "metrics.csv header is '$header'" ;;
esac
rows=$(tail -n +2 run1/metrics.csv | grep -c '^[0-9]')
[ "$rows" -ge 10 ] && ok || fail "metrics.csv has $rows rows"
last_step=$(tail -n 1 run1/metrics.csv | cut -d, -f1)
[ "$last_step" = 300 ] && ok || fail "metrics.csv ends at step '$last_step', not 300"
# every row: step,loss,train_acc,heldout_acc,lr as numbers
"$PY" - run1/metrics.csv <<'EOF' && ok || fail "metrics.csv rows are not numbers"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for r in rows:
    int(r["step"]); [float(r[k]) for k in ("loss", "train_acc", "heldout_acc", "lr")]
assert 0 <= float(rows[-1]["heldout_acc"]) <= 1
EOF
# the attention map: a comment, a header of T token labels, T rows of label + T weights
"$PY" - run1/attention/layer1_head1.dat <<'EOF' && ok || fail "attention map is malformed"
import sys
lines = [l.split() for l in open(sys.argv[1]) if not l.startswith("#")]
T = 8
assert len(lines) == T + 1 and len(lines[0]) == T + 1, lines[0]
for row in lines[1:]:
    w = [float(x) for x in row[1:]]
    assert len(w) == T and abs(sum(w) - 1) < 1e-3, row
EOF

# ---- train --json and eval reproduce the same held-out accuracy -----------------------------
run 0 "train --json" -- train --task reverse --steps 300 --d-model 32 --out run2 --json
cp out.txt train.json
"$PY" - train.json <<'EOF' && ok || fail "train --json is not one JSON object with the fields: $(cat train.json)"
import json, sys
text = open(sys.argv[1]).read()
assert text.count("\n") == 1 and text.endswith("}\n"), "one line"
d = json.loads(text)
assert isinstance(d, dict)
for k in ("task", "steps", "loss", "accuracy", "attention_mass", "seconds"):
    assert k in d, k
assert d["task"] == "reverse" and d["steps"] == 300, d
for k in ("loss", "accuracy", "attention_mass", "seconds"):
    assert isinstance(d[k], (int, float)), k
assert 0 <= d["accuracy"] <= 1 and 0 <= d["attention_mass"] <= 1
EOF
run 0 "eval --json" -- eval --model run2 --json
cp out.txt eval.json
"$PY" - train.json eval.json <<'EOF' && ok || fail "eval does not reproduce train: $(cat train.json eval.json)"
import json, re, sys
raw = [open(p).read() for p in sys.argv[1:3]]
t, e = (json.loads(r) for r in raw)
for r in raw:
    json.loads(r)
for k in ("task", "steps", "accuracy", "attention_mass", "loss"):
    assert t[k] == e[k], (k, t[k], e[k])
# the very same digits, not just the same float
num = lambda r, k: re.search('"%s":([^,}]*)' % k, r).group(1)
assert num(raw[0], "accuracy") == num(raw[1], "accuracy")
for k in ("task", "steps", "loss", "accuracy", "attention_mass", "seconds"):
    assert k in e, k
EOF
"$PY" - train.json eval.json <<'EOF' && ok || fail "the --json fields of 0.2: $(cat train.json eval.json)"
import json, sys
t, e = (json.load(open(p)) for p in sys.argv[1:3])
for d in (t, e):
    for k in ("dtype", "heldout_loss", "heldout_accuracy", "heldout_correct", "heldout_targets",
              "last_batch_loss", "loss", "accuracy", "train_loss"):
        assert k in d, k
    assert d["dtype"] == "f32"
    assert d["heldout_accuracy"] == d["accuracy"] and d["heldout_loss"] == d["loss"]
    assert abs(d["heldout_correct"] / d["heldout_targets"] - d["heldout_accuracy"]) < 1e-6
    assert d["heldout_targets"] == 512 * 8  # reverse: every position has a target
assert t["last_batch_loss"] == t["train_loss"] and t["last_batch_loss"] is not None
assert e["last_batch_loss"] is None and e["train_loss"] == e["heldout_loss"]  # as before 0.2
assert t["heldout_correct"] == e["heldout_correct"]
EOF
run 0 "eval on the model file itself" -- eval --model run2/model.safetensors
grep -q "held-out accuracy" out.txt && ok || fail "eval without --json: $(cat out.txt)"

# ---- --resume ---------------------------------------------------------------------------------
run 0 "train --resume to more steps" -- train --resume run2 --steps 400 --quiet
last_step=$(tail -n 1 run2/metrics.csv | cut -d, -f1)
[ "$last_step" = 400 ] && ok || fail "resumed metrics.csv ends at step '$last_step', not 400"
run 0 "eval after resume" -- eval --model run2 --json
[ "$(json_get out.txt steps)" = 400 ] && ok || fail "resumed model has $(json_get out.txt steps) steps"
first_rows=$(grep -c '^300,' run2/metrics.csv)
[ "$first_rows" = 1 ] && ok || fail "resumed metrics.csv has step 300 $first_rows times"
bad 2 "resume with a model option" -- train --resume run2 --d-model 64
bad 2 "resume below the steps taken" -- train --resume run2 --steps 100
# a resume that changes --steps says how the learning rate changes (not with --quiet)
run 0 "resume to 450 steps" -- train --resume run2 --steps 450
grep -q "^resume: --steps 450 (was 400): the cosine schedule now decays to 0 at step 450 instead of 400" out.txt &&
    ok || fail "a resume to more steps does not say how the schedule changes: $(head -n 2 out.txt)"
run 0 "resume without more steps" -- train --resume run2
grep -q "^resume:" out.txt && fail "a resume that keeps --steps talks of the schedule" || ok

# A run that stops at 100 and is resumed to 200 equals a straight run of 200, byte for byte
# (a constant schedule, so that the plan does not depend on --steps).
same=(--task shift --d-model 32 --heads 2 --schedule constant --warmup 0 --eval-every 10 --quiet)
run 0 "straight 200" -- train "${same[@]}" --steps 200 --out straight
run 0 "first 100" -- train "${same[@]}" --steps 100 --out resumed
run 0 "resume to 200" -- train --resume resumed --steps 200 --eval-every 10 --quiet
check "resumed model.safetensors == straight" cmp -s straight/model.safetensors resumed/model.safetensors
check "resumed metrics.csv == straight" cmp -s straight/metrics.csv resumed/metrics.csv
check "resumed attention map == straight" cmp -s straight/attention/layer1_head1.dat resumed/attention/layer1_head1.dat

# ---- reproducibility: bit-identical whatever --threads is ------------------------------------
# Large enough for the kernels' parallel paths (matrix products above ~8e6 flops).
big=(--task copy --seq-len 16 --d-model 128 --heads 2 --batch 128 --steps 12 --eval-every 4 --quiet)
run 0 "threads 1" -- train "${big[@]}" --threads 1 --out t1
run 0 "threads 2" -- train "${big[@]}" --threads 2 --out t2
check "model.safetensors identical with 1 and 2 threads" cmp -s t1/model.safetensors t2/model.safetensors
check "metrics.csv identical with 1 and 2 threads" cmp -s t1/metrics.csv t2/metrics.csv
small64=(--task lookup --d-model 32 --heads 2 --batch 16 --steps 6 --eval-every 2 --dtype f64 --quiet)
run 0 "f64, threads 1" -- train "${small64[@]}" --threads 1 --out t64a
run 0 "f64, threads 2" -- train "${small64[@]}" --threads 2 --out t64b
check "f64 model.safetensors identical with 1 and 2 threads" cmp -s t64a/model.safetensors t64b/model.safetensors
# modular's full batch (every training pair, in two shards whatever the threads), repeated
# from its summary.json (batch "full", the split's options), and continued by --resume
mod=(--task modular --modulus 17 --d-model 32 --mlp 64 --steps 8 --eval-every 2 --quiet)
run 0 "modular, threads 1" -- train "${mod[@]}" --threads 1 --out m1
run 0 "modular, threads 2" -- train "${mod[@]}" --threads 2 --out m2
check "modular model.safetensors identical with 1 and 2 threads" cmp -s m1/model.safetensors m2/model.safetensors
check "modular metrics.csv identical with 1 and 2 threads" cmp -s m1/metrics.csv m2/metrics.csv
check "modular summary.json records the full batch and the split" \
    grep -q '"modulus":17,"op":"add","train_frac":0.3,"data_seed":0,.*"batch":"full"' \
    <(tr -d ' \t\n' <m1/summary.json)
run 0 "modular repeated from summary.json" -- train --config m1/summary.json --out m3 --quiet
check "modular --config summary.json gives the same model" cmp -s m1/model.safetensors m3/model.safetensors
run 0 "modular, 4 steps" -- train "${mod[@]}" --steps 4 --out m4
run 0 "modular resumed to 8" -- train --resume m4 --steps 8 --eval-every 2 --quiet
check "modular resumed model == straight" cmp -s m1/model.safetensors m4/model.safetensors
run 0 "same seed again" -- train --task copy --steps 300 --d-model 32 --out run1b --quiet
check "same seed, same model.safetensors" cmp -s run1/model.safetensors run1b/model.safetensors
check "same seed, same metrics.csv" cmp -s run1/metrics.csv run1b/metrics.csv
run 0 "another seed" -- train --task copy --steps 300 --d-model 32 --seed 2 --out run1c --quiet
if cmp -s run1/model.safetensors run1c/model.safetensors; then fail "--seed 2 gives the same model"; else ok; fi

# ---- progress: plain log lines when stdout is not a terminal --------------------------------
run 0 "train without --quiet" -- train --task copy --steps 100 --d-model 32
# one layer: no induction score (it needs a layer before it), the other two scores printed
one_layer='^  strongest heads: previous-token [0-9.]* (layer 1, head 1), '
one_layer+='duplicate-token [0-9.]* (layer 1, head 1)$'
grep -q "$one_layer" out.txt && ok || fail "one-layer strongest heads: $(grep strongest out.txt)"
grep -Eq '^step [0-9]+/100 loss [0-9.]+' out.txt && ok || fail "no log lines: $(head -c 300 out.txt)"
logs=$(grep -Ec '^step [0-9]+/100 ' out.txt)
[ "$logs" -ge 2 ] && ok || fail "$logs log lines"
grep -q 'held-out accuracy' out.txt && ok || fail "no final summary line"
grep -q $'\r' out.txt && fail "a progress bar (\\r) was printed to a file" || ok
# one layer's induction score nowhere as a number: null in the JSON, an empty metrics.csv cell
run 0 "a one-layer model's JSON" -- train --task copy --steps 20 --d-model 16 --quiet --json --out one_layer
"$PY" -c 'import json,sys; r=json.load(open("out.txt"))["report"]
assert r["strongest_heads"]["induction"] is None, r["strongest_heads"]
assert all(h["induction"] is None and h["previous_token"] is not None for h in r["head_scores"]), r["head_scores"]' &&
    ok || fail "a one-layer model's JSON gives an induction score"
"$PY" -c 'import csv; rows = list(csv.DictReader(open("one_layer/metrics.csv")))
assert rows and all(r["ind_l1h1"] == "" and r["prev_l1h1"] != "" for r in rows)' &&
    ok || fail "a one-layer model's metrics.csv has induction numbers: $(head -n 2 one_layer/metrics.csv)"

# ---- help and version ---------------------------------------------------------------------------
run 0 "--version" -- --version
head -n 1 out.txt | grep -Eq '^qkv [0-9]+\.[0-9]+\.[0-9]+$' && ok || fail "--version prints '$(cat out.txt)'"
grep -Eq '^simd: (avx512|avx2|neon|scalar) ' out.txt && ok || fail "--version names no SIMD path: '$(cat out.txt)'"
grep -Eq '^threads: [0-9]+ ' out.txt && ok || fail "--version names no thread count: '$(cat out.txt)'"
QKV_SIMD=scalar "$QKV" --version >out.txt 2>err.txt
grep -q '^simd: scalar (forced by QKV_SIMD' out.txt && ok || fail "QKV_SIMD=scalar --version says '$(cat out.txt)'"
# QKV_SIMD naming a path that does not exist, or that this build or CPU cannot run: refused
# before anything runs (exit 2, one line naming the paths this CPU runs), by every command
runs=$("$QKV" --version | sed -n 's/^simd: .*this CPU runs \(.*\))$/\1/p' | sed 's/ (emulated over SIMDe)//g')
for value in portable AVX2 "avx2 " neon-ish; do
    for cmd in "train --steps 1" selftest "eval nowhere" "bench --peak" "plot nowhere" \
               "sweep --collect nowhere" "circuits nowhere" gradcheck "study softmax"; do
        # shellcheck disable=SC2086 # the command's words split on purpose
        QKV_SIMD="$value" "$QKV" $cmd >out.txt 2>err.txt
        rc=$?
        [ "$rc" -eq 2 ] && [ "$(wc -l <err.txt)" -eq 1 ] && [ ! -s out.txt ] &&
            grep -qF "qkv: QKV_SIMD=$value: unknown path (one of avx512, avx2, neon, scalar; this CPU runs: $runs)" err.txt &&
            ok || fail "QKV_SIMD='$value' qkv $cmd: exit $rc, $(cat err.txt)"
    done
done
for value in scalar avx2 avx512 neon; do
    if QKV_SIMD=$value "$QKV" --version >out.txt 2>err.txt; then
        grep -q "^simd: $value " out.txt && ok || fail "QKV_SIMD=$value ran $(grep simd out.txt)"
    else
        [ "$?" -eq 2 ] && grep -q "^qkv: QKV_SIMD=$value: this \(CPU\|build\) cannot run it" err.txt &&
            ok || fail "QKV_SIMD=$value refused with: $(cat err.txt)"
    fi
done
run 0 "--help" -- --help
for cmd in train eval grads gradcheck; do
    grep -q "^  $cmd " out.txt && ok || fail "qkv --help does not list $cmd"
done
grep -q -- "--version" out.txt && ok || fail "qkv --help does not list --version"
run 0 "train --help" -- train --help
cp out.txt train_help.txt
# every option has an entry (its line and any continuation lines) that states its default
"$PY" - train_help.txt <<'EOF' && ok || fail "train --help does not list every option with its default"
import re, sys
entries, cur = {}, None
for line in open(sys.argv[1]):
    m = re.match(r"^  (?:-\w, )?--([a-z-]+)", line)
    if m:
        cur = m.group(1)
        entries[cur] = line
    elif cur and re.match(r"^ {6,}\S", line):
        entries[cur] += line
    else:
        cur = None
missing = []
for opt in ("task seq-len vocab d-model heads layers residual causal init init-scale optim lr batch "
            "steps weight-decay clip schedule warmup seed threads out resume eval-every "
            "save-every json quiet").split():
    if opt not in entries:
        missing.append("--%s is not listed" % opt)
    elif "default" not in entries[opt]:
        missing.append("--%s has no default: %s" % (opt, entries[opt].strip()))
if missing:
    print("\n".join(missing))
    sys.exit(1)
EOF
# The defaults the help states are the ones used: train with defaults and read the file back.
run 0 "train with default options" -- train --steps 20 --out defaults --quiet
"$PY" - defaults/model.safetensors train_help.txt <<'EOF' && ok || fail "train --help states wrong defaults"
import json, re, struct, sys
raw = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
meta = json.loads(raw[8:8 + n])["__metadata__"]
helptext = open(sys.argv[2]).read()
def stated(opt):
    m = re.search(r"^  --%s .*?\(default:? ([^;)]*)" % re.escape(opt), helptext, re.M)
    assert m, opt
    return m.group(1).strip()
bad = []
def expect(opt, key, conv=str):
    s = stated(opt)
    if opt == "lr":  # "adam X, momentum Y, sgd Z"
        s = re.search(r"adam ([0-9.e-]+)", s).group(1)
    if conv(s) != conv(meta[key]):
        bad.append("--%s: help says %s, the file says %s" % (opt, s, meta[key]))
for opt, key, conv in [("task", "task", str), ("seq-len", "seq_len", int), ("vocab", "vocab", int),
                       ("d-model", "d_model", int), ("heads", "heads", int),
                       ("layers", "layers", int), ("init-scale", "init_scale", float),
                       ("optim", "optim", str), ("lr", "lr", float), ("batch", "batch", int),
                       ("weight-decay", "weight_decay", float), ("clip", "clip", float),
                       ("schedule", "schedule", str), ("seed", "seed", int)]:
    expect(opt, key, conv)
for opt, key in [("residual", "residual"), ("causal", "causal")]:
    if not stated(opt).startswith("off") or meta[key] != "false":
        bad.append("--%s: help says %s, the file says %s" % (opt, stated(opt), meta[key]))
# --init: its default on the entry's last line; a qkv model's file has no "init"
m = re.search(r"^  --init .*?\(default (\w+);", helptext, re.M | re.S)
if not m or m.group(1) != "qkv" or "init" in meta:
    bad.append("--init: help says %s, the file says %s" % (m and m.group(1), meta.get("init")))
if bad:
    print("\n".join(bad))
    sys.exit(1)
EOF
rows=$(tail -n +2 defaults/metrics.csv | grep -c '^[0-9]')
[ "$rows" = 21 ] && ok || fail "--eval-every defaults to steps/20 after a step-0 row: $rows rows for 20 steps"
for cmd in eval grads; do
    run 0 "$cmd --help" -- $cmd --help
    grep -q -- "--model" out.txt && ok || fail "$cmd --help does not list --model"
done

# ---- grads ----------------------------------------------------------------------------------
run 0 "grads" -- grads --model run1 --out g.safetensors --batch 4 --seed 3
"$PY" - g.safetensors <<'EOF' && ok || fail "the grads file does not load"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
h = json.loads(raw[8:8 + n])
assert h["__metadata__"]["format"] == "qkv-grads"
assert h["tokens"]["dtype"] == "I32" and h["tokens"]["shape"] == [4, 8]
assert h["targets"]["shape"] == [4, 8] and h["logits"]["shape"] == [4, 8, 16]
assert h["loss"]["shape"] == []
names = ["tok_emb", "pos_emb", "head.w", "head.b"] + ["attn.0." + w for w in ("w_q", "w_k", "w_v", "w_o")]
for p in names:
    assert h["grad." + p]["dtype"] == "F32", p
end = max(v["data_offsets"][1] for k, v in h.items() if k != "__metadata__")
assert 8 + n + end == len(raw)
EOF
run 0 "grads again, same seed" -- grads --model run1 --out g2.safetensors --batch 4 --seed 3
check "grads is deterministic" cmp -s g.safetensors g2.safetensors

# ---- bad command lines: exit 2, one line, nothing written ----------------------------------------
t=(train --steps 50 --d-model 32 --quiet)
"$QKV" >out.txt 2>err.txt; rc=$?
[ "$rc" = 2 ] && [ -s err.txt ] && [ ! -s out.txt ] && ok || fail "qkv without a command: exit $rc"
bad 2 "unknown command" -- frobnicate
bad 2 "unknown task" -- "${t[@]}" --task bubble --out bad1
bad 2 "unknown option" -- "${t[@]}" --bogus --out bad2
bad 2 "missing option value" -- "${t[@]}" --out bad3 --heads
bad 2 "value not a number" -- "${t[@]}" --heads abc --out bad4
bad 2 "trailing garbage in a number" -- "${t[@]}" --lr 0.01x --out bad5
bad 2 "0 heads" -- "${t[@]}" --heads 0 --out bad6
bad 2 "heads not dividing d_model" -- "${t[@]}" --heads 3 --out bad7
bad 2 "lr = 0" -- "${t[@]}" --lr 0 --out bad8
bad 2 "lr = -1" -- "${t[@]}" --lr -1 --out bad9
bad 2 "seq-len too large for lookup" -- "${t[@]}" --task lookup --seq-len 40 --out bad10
bad 2 "vocab too small" -- "${t[@]}" --vocab 2 --out bad11
bad 2 "vocab too small for lookup" -- "${t[@]}" --task lookup --vocab 10 --out bad12
bad 2 "steps 0" -- "${t[@]}" --steps 0 --out bad13
bad 2 "unknown optimizer" -- "${t[@]}" --optim rmsprop --out bad14
bad 2 "unexpected argument" -- "${t[@]}" extra --out bad15
for i in $(seq 1 15); do
    [ ! -e "bad$i" ] && ok || fail "a refused train created bad$i"
done
bad 2 "eval without --model" -- eval
bad 2 "eval unknown option" -- eval --model run1 --bogus
bad 2 "grads without --out" -- grads --model run1
bad 2 "grads bad batch" -- grads --model run1 --out bad_g.safetensors --batch 0
bad 2 "grads bad seed" -- grads --model run1 --out bad_g.safetensors --seed -3
check "a refused grads wrote nothing" test ! -e bad_g.safetensors
bad 3 "resume from a missing directory" -- train --resume nowhere --quiet
check "a refused resume created nothing" test ! -e nowhere

# ---- bad model files, for eval and for grads: exit 3 (io) or 4 (format), nothing written ------
mkdir -p broken
M=run1/model.safetensors
size=$(wc -c <"$M")
head -c 1000 "$M" >broken/truncated.safetensors
head -c "$((size - 4))" "$M" >broken/short_data.safetensors
head -c 4096 /dev/urandom >broken/random.safetensors
# a header length that passes the size check but holds random bytes
"$PY" - broken/random_header.safetensors <<'EOF'
import os, struct, sys
open(sys.argv[1], "wb").write(struct.pack("<Q", 64) + os.urandom(64 + 256))
EOF
: >broken/empty.safetensors
mkdir -p broken/emptydir

# craft OUT TRANSFORM: rewrite the real model with one change, in Python
craft() {
    "$PY" - "$M" "broken/$1.safetensors" "$1" <<'EOF'
import json, struct, sys
src, dst, kind = sys.argv[1:4]
raw = open(src, "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8:8 + n])
data = raw[8 + n:]
meta = header.pop("__metadata__")
tensors = {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
           for k, v in header.items()}
if kind == "flipped_json":      # bytes flipped inside the JSON header
    b = bytearray(raw)
    for i in range(9, 40):
        b[i] ^= 0x5A
    open(dst, "wb").write(bytes(b))
    sys.exit(0)
if kind == "length_beyond_end":  # the 8-byte header length points past the end of the file
    open(dst, "wb").write(struct.pack("<Q", len(raw) + 1000) + raw[8:])
    sys.exit(0)
if kind == "wrong_dtype":        # head.w as F64 (its values widened), where F32 is expected
    dt, shape, b = tensors["head.w"]
    vals = struct.unpack("<%df" % (len(b) // 4), b)
    tensors["head.w"] = ("F64", shape, struct.pack("<%dd" % len(vals), *vals))
elif kind == "wrong_shape":      # tok_emb (V, C) stored as (C, V): same bytes, other shape
    dt, shape, b = tensors["tok_emb"]
    tensors["tok_emb"] = (dt, shape[::-1], b)
elif kind == "missing_tensor":
    del tensors["attn.0.w_k"]
elif kind == "nan":              # one NaN in attn.0.w_v
    dt, shape, b = tensors["attn.0.w_v"]
    tensors["attn.0.w_v"] = (dt, shape, b[:12] + struct.pack("<f", float("nan")) + b[16:])
elif kind == "inf":
    dt, shape, b = tensors["pos_emb"]
    tensors["pos_emb"] = (dt, shape, struct.pack("<f", float("inf")) + b[4:])
elif kind == "bad_metadata":     # a valid file whose config makes no sense
    meta["heads"] = "7"
elif kind == "no_metadata":
    meta = None
elif kind == "overlap":          # two tensors claim the same bytes
    pass
else:
    raise SystemExit("unknown transform " + kind)
out, body, off = {}, b"", 0
if meta is not None:
    out["__metadata__"] = meta
for k, (dt, shape, b) in tensors.items():
    out[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}
    body += b
    off += len(b)
if kind == "overlap":
    first = next(k for k in out if k != "__metadata__")
    out[first]["data_offsets"] = [0, out[first]["data_offsets"][1]]
    second = [k for k in out if k != "__metadata__"][1]
    s, e = out[second]["data_offsets"]
    out[second]["data_offsets"] = [s - 4, e - 4]
hdr = json.dumps(out).encode()
hdr += b" " * (-len(hdr) % 8)
open(dst, "wb").write(struct.pack("<Q", len(hdr)) + hdr + body)
EOF
}
for kind in flipped_json length_beyond_end wrong_dtype wrong_shape missing_tensor nan inf \
            bad_metadata no_metadata overlap; do
    craft "$kind" || fail "could not craft $kind"
done
# a sanity check of the crafting itself: an unchanged rewrite must load
cp "$M" broken/control.safetensors

cases=(missing:3 emptydir:3 truncated:4 short_data:4 random:4 random_header:4 empty:4
       flipped_json:4 length_beyond_end:4 wrong_dtype:4 wrong_shape:4 missing_tensor:4 nan:4
       inf:4 bad_metadata:4 no_metadata:4 overlap:4)
for c in "${cases[@]}"; do
    name=${c%%:*} code=${c##*:}
    f=broken/$name.safetensors
    [ "$name" = missing ] && f=broken/missing.safetensors
    [ "$name" = emptydir ] && f=broken/emptydir
    before=""
    [ -f "$f" ] && before=$(cksum <"$f")
    bad "$code" "eval: $name model" -- eval --model "$f"
    bad "$code" "grads: $name model" -- grads --model "$f" --out "broken/g_$name.safetensors"
    [ ! -e "broken/g_$name.safetensors" ] && ok || fail "grads on a $name model wrote a file"
    bad "$code" "resume: $name model" -- train --resume "$f" --out "broken/r_$name" --quiet
    [ ! -e "broken/r_$name" ] && ok || fail "resume from a $name model created a directory"
    if [ -n "$before" ]; then
        [ "$(cksum <"$f")" = "$before" ] && ok || fail "the $name model file was changed"
    fi
done
[ ! -e broken/missing.safetensors ] && ok || fail "eval created the missing model file"
check "no temporary files left in broken/" no_tmp_files broken
run 0 "control: the real model still loads" -- eval --model broken/control.safetensors

# A failing grads run must not replace an existing output file.
cp g.safetensors keep.safetensors
bad 4 "grads onto an existing file from a bad model" -- grads --model broken/nan.safetensors --out keep.safetensors
check "the existing output file is untouched" cmp -s g.safetensors keep.safetensors

# ---- f64: train, eval and grads end to end; an f32 model evaluated in f64 -----------------------
run 0 "train --dtype f64" -- train --task copy --steps 60 --d-model 16 --dtype f64 --out run64 --json
grep -q '"dtype":"f64"' out.txt && ok || fail "train --dtype f64 --json: $(cat out.txt)"
"$PY" - run64/model.safetensors <<'EOF' && ok || fail "an f64 model is saved as F64 tensors with dtype f64"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
h = json.loads(raw[8:8 + n])
assert h["__metadata__"]["dtype"] == "f64"
assert all(v["dtype"] == "F64" for k, v in h.items() if k != "__metadata__")
EOF
run 0 "eval of an f64 model" -- eval --model run64 --json
grep -q '"dtype":"f64"' out.txt && ok || fail "eval of an f64 model: $(cat out.txt)"
run 0 "grads of an f64 model" -- grads --model run64 --out g64.safetensors
run 0 "eval of an f32 model" -- eval --model run2 --json
cp out.txt eval32.json
run 0 "eval --dtype f64 of an f32 model" -- eval --model run2 --dtype f64 --json
"$PY" - eval32.json out.txt <<'EOF' && ok || fail "eval --dtype f64 of an f32 model: $(cat out.txt)"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert b["dtype"] == "f64" and abs(a["heldout_loss"] - b["heldout_loss"]) <= 1e-5 * a["heldout_loss"] + 1e-6
EOF

# ---- study precision: the fused backward's forms against f64, on saturated attention --------
run 0 "study precision" -- study precision
# columns: name, |g64|, composed, legacy, split-l, wide-d, d-from-p
awk '$1 == "attn.0.w_q" { found = 1; ok = $4 > $3 && $3 > 10 * $7 } END { exit !(found && ok) }' \
    out.txt && ok || fail "study precision: w_q's f32 errors are not legacy > composed > 10 x d-from-p: $(cat out.txt)"
grep -q "put more" out.txt && ok || fail "study precision: no saturation line: $(cat out.txt)"
run 0 "study precision --form legacy" -- study precision --form legacy --batch 2
bad 2 "study precision --form fast" -- study precision --form fast

# ---- divergence: a NaN loss stops training with the step and a hint ---------------------------
"$QKV" train --task copy --optim sgd --lr 1000000 --clip 0 --schedule constant --warmup 0 \
    --steps 50 --d-model 32 --quiet --out diverged >out.txt 2>err.txt
rc=$?
[ "$rc" = 5 ] && ok || fail "divergence: exit $rc, expected 5: $(cat err.txt)"
grep -Eq '^qkv: .*at step [0-9]+.*lower --lr' err.txt && ok || fail "divergence message: $(cat err.txt)"
[ "$(wc -l <err.txt)" -eq 1 ] && ok || fail "divergence: $(wc -l <err.txt) lines on stderr"
[ "$(ls diverged)" = summary.json ] && ok ||
    fail "a run that diverged before its first save left more than its summary: $(ls diverged)"

# ---- a data file: trained, saved with its vocabulary, evaluated again; the same bits on 1 and
# 2 threads; the token strings label the maps; an encoder-decoder's maps are n_q x n_k ----------
"$PY" - <<'EOF'
import random
r = random.Random(3)
with open("swap.tsv", "w") as f:
    for n in range(200):
        x = [r.choice("ab cd ef gh ij".split()) for _ in range(r.randint(2, 6))]
        y = [x[i + 1 if i % 2 == 0 and i + 1 < len(x) else i - 1 if i % 2 else i] for i in range(len(x))]
        f.write(" ".join(x) + "\t" + " ".join(y) + "\n")
with open("half.tsv", "w") as f:
    for n in range(200):
        x = [r.choice("ab cd ef gh ij".split()) for _ in range(2 * r.randint(1, 3))]
        f.write(" ".join(x) + "\t" + " ".join(w.upper() for w in x[1::2]) + "\n")
EOF
for f in swap half; do
    for th in 1 2; do
        run 0 "train --data $f.tsv --threads $th" -- train --data "$f.tsv" --steps 30 --d-model 16 \
            --threads $th --out "data_${f}_$th" --json
        cp out.txt "data_${f}_$th.json"
    done
    cmp -s "data_${f}_1/model.safetensors" "data_${f}_2/model.safetensors" && ok ||
        fail "--data $f.tsv: 1 and 2 threads gave different models"
    run 0 "eval of a data model" -- eval --model "data_${f}_1" --json
    "$PY" - "data_${f}_1.json" out.txt <<'EOF' && ok || fail "eval of a data model does not reproduce train: $(cat out.txt)"
import json, sys
t, e = (json.load(open(p)) for p in sys.argv[1:3])
assert t["task"] == "data" and t["heldout_correct"] == e["heldout_correct"] and t["heldout_targets"] == e["heldout_targets"]
assert t["heldout_targets"] > 0 and 0 < t["chance"] <= 0.5
EOF
    grep -q ' [0-9]*:\(ab\|cd\|ef\) ' "data_${f}_1/attention/layer1_head1.dat" && ok ||
        fail "--data $f.tsv: the maps are not labelled by the tokens: $(head -2 "data_${f}_1/attention/layer1_head1.dat")"
done
# the summary shows held-out example 1 in the file's words: an input line of the file, the
# model's output where there are targets (half as many for half.tsv), and how many are right
for f in swap half; do
    run 0 "eval of a data model, its example" -- eval --model "data_${f}_1"
    "$PY" - "$f.tsv" out.txt <<'EOF' && ok || fail "--data $f.tsv: the example line: $(cat out.txt)"
import re, sys
lines = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
words = {w for l in lines for side in l for w in side.split()}
m = re.search(r"^  held-out example: (.*) → (.*) \((\d+) of (\d+) targets right\)$",
              open(sys.argv[2]).read(), re.M)
src, out, right, targets = m.group(1).split(), m.group(2).split(), int(m.group(3)), int(m.group(4))
want = [y.split() for x, y in lines if x.split() == src]
assert want, "the input is not one of the file's"
assert targets == len(want[0]) == len(out) and set(out) <= words
assert right == sum(a == b for a, b in zip(out, want[0]))
EOF
done
# half.tsv: an encoder-decoder: 3 decoder rows (and the header line) against 6 keys
[ "$(grep -vc '^#' data_half_1/attention/layer1_head1.dat)" = 4 ] && ok ||
    fail "half.tsv: the map is not 3 x 6: $(cat data_half_1/attention/layer1_head1.dat)"
run 0 "train --data --resume" -- train --resume data_swap_1 --steps 40 --quiet
# qkv grads of a data model draws a training batch of its examples, padded, with their lengths;
# of an encoder-decoder (half.tsv, translate), its targets and logits have the decoder's rows
run 0 "train translate" -- train --task translate --steps 20 --d-model 16 --out tr --quiet
# the head scores are of self-attention: an encoder-decoder's columns stay empty, never 0
check "translate: empty head-score columns" test "$(awk -F, 'NR > 1 { print $8 $9 $10 }' tr/metrics.csv | sort -u)" = ""
for m in data_swap_1:swap data_half_1:half tr:translate; do
    run 0 "grads of ${m#*:}" -- grads --model "${m%%:*}" --out "g_${m#*:}.safetensors" --batch 5 --seed 4
    "$PY" - "g_${m#*:}.safetensors" "${m#*:}" <<'EOF' && ok || fail "grads of ${m#*:}: $(cat out.txt)"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
h = json.loads(raw[8:8 + n])
kind = sys.argv[2]
B, T = h["tokens"]["shape"]
To = {"swap": T, "half": T // 2, "translate": T // 2}[kind]
assert B == 5 and h["targets"]["shape"] == [B, To], h["targets"]
assert h["logits"]["shape"][:2] == [B, To] and h["loss"]["shape"] == []
assert ("lengths" in h) == (kind != "translate"), list(h)
assert h["__metadata__"]["task"] == ("translate" if kind == "translate" else "data")
assert ("grad.dec_pos_emb" in h) == (kind != "swap"), list(h)
def tensor(name, fmt):
    a, b = h[name]["data_offsets"]
    return struct.unpack("<%d%s" % ((b - a) // 4, fmt), raw[8 + n + a:8 + n + b])
loss = tensor("loss", "f")[0]
assert 0 < loss < 10, loss
if kind != "translate":  # padding (token 0) after each example's length, none before it
    tokens, lengths = tensor("tokens", "i"), tensor("lengths", "i")
    assert all(1 <= l <= T for l in lengths) and min(lengths) < T, lengths
    for b, l in enumerate(lengths):
        row = tokens[b * T:(b + 1) * T]
        assert all(t > 0 for t in row[:l]) and all(t == 0 for t in row[l:]), (row, l)
EOF
done
run 0 "grads of a data model again, same seed" -- grads --model data_half_1 --out g_half2.safetensors --batch 5 --seed 4
check "grads of a data model is deterministic" cmp -s g_half.safetensors g_half2.safetensors
# the run reads its own copy of the data file: a change to the file is not seen, and a
# changed copy is refused by the model trained on it
echo "ab cd	cd ab" >>swap.tsv
run 0 "eval after the data file changed: its copy in the run" -- eval --model data_swap_1
echo "ab cd	cd ab" >>data_swap_1/data/train.tsv
bad 4 "eval after the run's copy of the data file changed" -- eval --model data_swap_1

# ---- the summary: chance, and a hint: an impossible mask, too few layers or steps, too narrow -
run 0 "reverse --causal" -- train --task reverse --causal --steps 200 --d-model 16
grep -q 'chance 6.25%' out.txt && ok || fail "no chance level in the summary: $(cat out.txt)"
grep -q '^hint: the causal mask hides' out.txt && ok || fail "no causal-mask hint: $(cat out.txt)"
run 0 "induction with one layer" -- train --task induction --layers 1 --steps 100 --d-model 16
grep -q '^hint: induction needs 2 layers' out.txt && ok || fail "no layers hint: $(cat out.txt)"
# too few steps: below the task's default steps (sort: 1500), with the layers it needs; one hint
# (--threads 1: these runs are tiny, and other jobs on the cores slow OpenMP's threads a lot)
run 0 "sort with too few steps" -- train --task sort --steps 20 --d-model 16 --threads 1
grep -q '^hint: too few steps: sort takes about 1500 with the default options (--steps)$' out.txt &&
    ok || fail "no too-few-steps hint: $(cat out.txt)"
[ "$(grep -c '^hint:' out.txt)" = 1 ] && ok || fail "not one hint line: $(grep '^hint:' out.txt)"
# too narrow: translate's default steps (500) at width 2 stay near chance; one step fewer and
# the steps come first
run 0 "translate at width 2" -- train --task translate --d-model 2 --threads 1
grep -q 'chance 6.25%' out.txt && ok || fail "no chance level for translate: $(cat out.txt)"
grep -q '^hint: the model may be too narrow for 32 tokens: try a wider --d-model$' out.txt &&
    ok || fail "no width hint: $(cat out.txt)"
[ "$(grep -c '^hint:' out.txt)" = 1 ] && ok || fail "not one hint line: $(grep '^hint:' out.txt)"
run 0 "translate at width 2, 499 steps" -- train --task translate --d-model 2 --steps 499 --threads 1
grep -q '^hint: too few steps: translate takes about 500 with' out.txt && ok ||
    fail "499 of translate's 500 steps: no too-few-steps hint: $(grep '^hint:' out.txt)"

# ---- hints under --quiet go to stderr; a diverged run is not told of too few steps; a data
# file gets hints too (reversed words of 3 to 8 letters: the default one layer stays near 53%,
# two layers with the residual reach 100% at 400 steps) -----------------------------------------
run 0 "induction, one layer, --quiet" -- train --task induction --layers 1 --steps 40 --quiet --threads 1
[ "$(wc -l <out.txt)" = 1 ] && ok || fail "--quiet: more than one line on stdout: $(cat out.txt)"
grep -q '^hint: induction needs 2 layers' err.txt && ok || fail "--quiet: no hint on stderr: $(cat err.txt)"
run 0 "copy at lr 1000" -- train --task copy --lr 1000 --steps 60 --threads 1
grep -q '^hint: training diverged: the held-out loss rose from' out.txt && ok ||
    fail "no diverged hint: $(grep '^hint:' out.txt)"
grep -q 'too few steps' out.txt && fail "a diverged run is told of too few steps: $(cat out.txt)" || ok
"$PY" - <<'EOF2'
import random
r = random.Random(7)
lines = set()
while len(lines) < 600:
    w = [r.choice("abcdefghijkl") for _ in range(r.randint(3, 8))]
    lines.add(" ".join(w) + "\t" + " ".join(reversed(w)))
with open("reversed.tsv", "w") as f:
    f.write("\n".join(sorted(lines)) + "\n")
EOF2
run 0 "reversed words, one layer" -- train --data reversed.tsv --steps 300 --threads 1
grep -q '^hint: one layer stays at [0-9]*%: try two layers with the residual stream' out.txt &&
    ok || fail "reversed words, one layer: no depth hint: $(cat out.txt)"
run 0 "reversed words, two layers" -- train --data reversed.tsv --layers 2 --residual --steps 400 --threads 1
grep -q '^hint:' out.txt && fail "reversed words, two layers: a hint: $(cat out.txt)" || ok
run 0 "reversed words, --json" -- train --data reversed.tsv --steps 300 --threads 1 --json
"$PY" -c 'import json,sys; r=json.load(open("out.txt"))["report"]; assert r["hint"].startswith("one layer stays"), r; assert r["layer_mass"] is None and len(r["head_scores"]) == 1' &&
    ok || fail "reversed words --json: no report with the hint: $(head -c 300 out.txt)"
# one line that the hash keeps for training: "1 line is too few", not "1 lines are"
printf 'ab\tx\n' > one_line.tsv
run 4 "one-line data file" -- train --data one_line.tsv --steps 2 --out one_line_run
grep -q '; 1 line is too few)' err.txt && ok || fail "one-line file: $(cat err.txt)"

# ---- bench --profile: each part's share of the step, adding up to it, in text and JSON ------
run 0 "bench --profile --json" -- bench --config tiny --repeat 5 --threads 2 --profile --json
"$PY" - out.txt <<'EOF' && ok || fail "bench --profile --json: $(cat out.txt)"
import json, sys
row = json.loads(open(sys.argv[1]).read())
parts = row["profile"]
want = ["products", "exp_and_softmax", "layout_and_copies", "elementwise", "embedding", "loss",
        "optimizer", "waiting_on_threads", "other"]
assert list(parts) == want, list(parts)
assert all(v >= 0 for v in parts.values()), parts
assert abs(sum(parts.values()) - 1) < 0.01, sum(parts.values())
assert parts["products"] > 0 and row["profile_ms_per_step"] > 0
EOF
run 0 "bench --profile" -- bench --config tiny --repeat 5 --threads 1 --profile
grep -q '^        profile of a step: [0-9.]* ms, 5 steps with the profile on$' out.txt &&
    grep -qE '^          waiting on threads +0\.0%' out.txt && ok ||
    fail "bench --profile: no profile, or waiting on one thread: $(cat out.txt)"

# ---- bench --probs and --peak: P kept or recomputed, the same loss; the FMA units' width -----
run 0 "bench --probs keep --peak --json" -- bench --config tiny --repeat 3 --threads 1 \
    --probs keep --peak --json --seconds 0.2
cp out.txt keep.json
run 0 "bench --probs recompute --json" -- bench --config tiny --repeat 3 --threads 1 \
    --probs recompute --json
"$PY" - keep.json out.txt <<'EOF' && ok || fail "bench --probs, --peak: $(cat keep.json out.txt)"
import json, sys
keep = [json.loads(l) for l in open(sys.argv[1])]
peak, kept = keep[0], keep[1]
recomputed = json.loads(open(sys.argv[2]).read())
assert kept["probs"] == "keep" and recomputed["probs"] == "recompute", (kept, recomputed)
assert kept["loss"] == recomputed["loss"], (kept["loss"], recomputed["loss"])
if peak["simd"] == "avx512":  # the AVX2 path's peak beside it, and the width they say
    ratio = peak["gflops_1_thread"] / peak["avx2_gflops_1_thread"]
    assert abs(ratio - peak["avx512_over_avx2"]) < 0.01, peak
    # told (true or false) at 1.5 or more and under 1.3; null: the machine too busy to tell
    r = peak["avx512_over_avx2"]
    assert peak["full_width"] in ((True, None) if r >= 1.5 else (False, None) if r < 1.3 else (None,)), peak
else:
    assert "full_width" not in peak, peak
EOF

# ---- transformer blocks: --mlp, --act, --norm; and a model file from before them ----------------
# A model qkv 0.2 wrote (tests/fixtures/model_v0.2: reverse, 2 layers, d_model 8, 20 steps) loads
# and evaluates to the numbers 0.2 gave (eval.json beside it), bit for bit.
FIXTURE=$FIXTURES/model_v0.2
mkdir -p old_model && cp "$FIXTURE/model.safetensors" old_model/
if run 0 "eval of a model qkv 0.2 wrote" -- eval old_model --json; then
    check "the 0.2 model's held-out numbers are 0.2's" "$PY" - out.txt "$FIXTURE/eval.json" <<'EOF'
import json, sys
report = json.loads(open(sys.argv[1]).read())["report"]
want = json.loads(open(sys.argv[2]).read())
for key, value in want.items():
    assert report[key] == value, (key, report[key], value)
EOF
fi
run 0 "train an MLP + LayerNorm model" -- train --task reverse --d-model 16 --heads 2 --layers 2 \
    --residual --mlp 32 --act gelu-tanh --norm layernorm --steps 20 --out blocks --quiet
check "summary.json's config has mlp, act and norm" "$PY" - blocks/summary.json <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))["config"]
assert (c["mlp"], c["act"], c["norm"]) == (32, "gelu-tanh", "layernorm"), c
EOF
run 0 "resume an MLP model" -- train --resume blocks --steps 30 --quiet
run 0 "eval of an MLP model" -- eval blocks
run 0 "ablate an MLP model" -- ablate blocks
run 0 "attribute of an MLP model, each neuron" -- attribute blocks --input "1 2 3 4 5 6 7 8" --neurons --json
check "attribute's parts: the MLP's neurons and bias, and the final LayerNorm's scale" "$PY" - out.txt <<'EOF'
import json, sys
r = json.loads(open(sys.argv[1]).read())
names = [p["name"] for p in r["parts"]]
assert "mlp 2.31" in names and "mlp 1 bias" in names and "1.2" in names, names
assert [p["neuron"] for p in r["parts"] if p["name"] == "mlp 2.31"] == [31], r["parts"]
assert abs(sum(p["value"] for p in r["parts"]) - r["logit"]) < 1e-4, r
assert r["final_scale"] > 0, r
EOF
run 2 "attribute --neurons without an MLP" -- attribute old_model --input "1 2 3 4 5 6 7 8" --neurons
check "--neurons' line" grep -q "the model has no MLP" err.txt
run 0 "lens of an MLP model" -- lens blocks --input "1 2 3 4 5 6 7 8"
run 0 "circuits of a LayerNorm model, folded" -- circuits blocks
check "circuits says the LayerNorms are folded" grep -q "LayerNorm folded" out.txt
run 0 "an MLP model without LayerNorm" -- train --task reverse --d-model 16 --heads 2 --residual \
    --mlp 12 --steps 10 --out mlp_only --quiet
run 0 "circuits of an MLP model: the neuron-logit map" -- circuits mlp_only --json
check "circuits' neuron-logit map is (neurons, vocab)" "$PY" - out.txt <<'EOF'
import json, sys
m = json.loads(open(sys.argv[1]).read())["mlp"]
assert len(m) == 1 and m[0]["neurons"] == 12 and len(m[0]["neuron_logits"]) == 12, m
assert all(len(row) == 16 for row in m[0]["neuron_logits"]), m
EOF
run 0 "patch --path of an MLP model" -- patch blocks --path --clean "1 2 3 4 5 6 7 8" --corrupt "2 2 3 4 5 6 7 8" \
    --answer 1 --wrong 2 --json
check "patch --path's MLPs send and receive" "$PY" - out.txt <<'EOF'
import json, sys
p = json.loads(open(sys.argv[1]).read())["paths"]
ends = {(x["sender"], x["receiver"], x["via"]) for x in p}
assert ("1.1", "mlp 1", "mlp-pre") in ends and ("mlp 1", "logits", None) in ends, sorted(ends)
assert not any(x["sender"] == "mlp 1" and x["receiver"] == "mlp 1" for x in p), p
EOF
run 2 "--mlp without the residual stream" -- train --task reverse --mlp 8 --steps 1
check "--mlp's line" grep -q -- "--mlp 8 needs the residual stream (add --residual)" err.txt
run 2 "--norm without the residual stream" -- train --task reverse --norm layernorm --steps 1
run 2 "--act unknown" -- train --task reverse --mlp 8 --residual --act tanh --steps 1
run 2 "--mlp out of range" -- train --task reverse --mlp 70000 --residual --steps 1
# an MLP tensor missing from the file, and the MLP's width not its tensors': format errors
# naming the tensor
"$PY" - blocks/model.safetensors <<'EOF'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
for out, edit in (("missing.safetensors", lambda h: h.update({"mlp.1.w_ouT": h.pop("mlp.1.w_out")})),
                  ("narrow.safetensors", lambda h: h["__metadata__"].update({"mlp": "16"}))):
    header = json.loads(raw[8:8 + n])
    edit(header)
    text = json.dumps(header).encode()
    open(out, "wb").write(struct.pack("<Q", len(text)) + text + raw[8 + n:])
EOF
run 4 "a model file without an MLP tensor" -- eval --model missing.safetensors
check "the missing tensor is named" grep -q "tensor 'mlp.1.w_out' is missing" err.txt
run 4 "a model file whose MLP tensors are not its width" -- eval --model narrow.safetensors
check "the tensor of the wrong shape is named" grep -q "tensor 'mlp.0.w_in' has shape (16,32), expected (16,16)" err.txt

echo "cli_test: $checks checks passed, $failures failed"
[ "$failures" -eq 0 ]
