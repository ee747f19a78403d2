#!/usr/bin/env bash
# selftest_test.sh QKV - `qkv selftest` and the start-up probe of the SIMD path:
#   1. selftest lists every path this CPU runs (qkv --version's list), one line each, says
#      "same bits" for each, and exits 0; --json gives the same as {paths: [{name, native,
#      same_bits, first_difference}]};
#   2. with a path made faulty (QKV_TEST_SIMD_FAULT: its small products one unit in the last
#      place off), selftest names that path and the kernel and shape that differ, exit 1;
#   3. the commands that compute probe the path they chose: with the best path faulty, train
#      says so on stderr and runs the next path, whose model it saves bit for bit; eval and an
#      analysis command say so too; --no-selftest (or QKV_NO_SELFTEST=1) skips the probe (and
#      trains on the faulty path: another model); QKV_SIMD naming the faulty path keeps it,
#      with the warning.
set -u
QKV=$(realpath "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

runs=$("$QKV" --version | sed -n 's/^simd: .*this CPU runs \(.*\))$/\1/p' | sed 's/ (emulated over SIMDe)//g')
# the paths the probe may fall back to: not the emulated ones of a QKV_SIMD_EMULATE build
native=$("$QKV" --version | sed -n 's/^simd: .*this CPU runs \(.*\))$/\1/p' |
    sed 's/[a-z0-9]* (emulated over SIMDe)//g')
best=$("$QKV" --version | sed -n 's/^simd: \([a-z0-9]*\) .*/\1/p')
echo "paths this CPU runs: $runs (best: $best)"

# 1. every path agrees
"$QKV" selftest >out.txt 2>err.txt
rc=$?
cat out.txt
[ "$rc" -eq 0 ] || fail "selftest exit $rc: $(cat err.txt)"
for p in $runs; do
    if [ "$p" = scalar ]; then
        grep -q "^selftest: scalar  the reference" out.txt || fail "selftest: no line for scalar"
    else
        grep -q "^selftest: $p *same bits (" out.txt || fail "selftest: no 'same bits' line for $p"
    fi
done
lines=$(grep -cE '^selftest: [a-z0-9]+ +(same bits|DIFFERS|the reference)' out.txt)
[ "$lines" -eq "$(echo "$runs" | wc -w)" ] || fail "selftest: $lines path lines for the paths '$runs'"
"$QKV" selftest --json >json.txt || fail "selftest --json exit $?"
python3 - "$runs" json.txt <<'PY' || fail "selftest --json: $(cat json.txt)"
import json, sys
runs, o = sys.argv[1].split(), json.load(open(sys.argv[2]))
assert [p["name"] for p in o["paths"]] == runs, o
for p in o["paths"]:
    assert set(p) >= {"name", "native", "same_bits", "first_difference"}, p
    assert p["same_bits"] is True and p["first_difference"] is None, p
    assert isinstance(p["native"], bool), p
assert o["same_bits"] is True
PY

if [ "$best" = scalar ]; then # nothing to fall back from
    echo "selftest_test: this CPU runs only the plain C path: the fallback is not shown here"
    [ "$failures" -eq 0 ]
    exit
fi
next=$(echo "$native" | tr ' ' '\n' | grep -v -x -e "$best" -e scalar -e '' | head -n 1)
next=${next:-scalar}

# 2. a faulty path is named, with the kernel and shape that differ
QKV_TEST_SIMD_FAULT=$best "$QKV" selftest >out.txt 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "selftest with $best faulty: exit $rc"
grep -q "^selftest: $best *DIFFERS (.*): gemm.* M=[0-9]* N=[0-9]* K=[0-9]*.*output 0 is" out.txt ||
    fail "selftest with $best faulty: $(cat out.txt)"
QKV_TEST_SIMD_FAULT=$best "$QKV" selftest --json >json.txt
python3 - "$best" json.txt <<'PY' || fail "selftest --json with $1 faulty: $(cat json.txt)"
import json, sys
o = json.load(open(sys.argv[2]))
bad = [p for p in o["paths"] if not p["same_bits"]]
assert [p["name"] for p in bad] == [sys.argv[1]], o
assert bad[0]["first_difference"].startswith("gemm"), o
assert o["same_bits"] is False
PY

# 3. the probe at start-up, and its fallback
train=(train --task reverse --heads 2 --d-model 64 --steps 5 --batch 8 --seed 3 --quiet)
QKV_TEST_SIMD_FAULT=$best "$QKV" "${train[@]}" --out fallback >out.txt 2>err.txt ||
    fail "train with $best faulty: exit $?: $(cat err.txt)"
grep -q "^qkv: warning: the $best path's bits differ from the plain C path's (gemm.*): running $next instead, which agrees" err.txt ||
    fail "train with $best faulty says: $(cat err.txt)"
[ "$(grep -c '^qkv: warning' err.txt)" -eq 1 ] || fail "train: more than one warning: $(cat err.txt)"
QKV_SIMD=$next "$QKV" "${train[@]}" --out next >/dev/null 2>&1 || fail "train on $next"
QKV_SIMD=scalar "$QKV" "${train[@]}" --out scalar >/dev/null 2>&1 || fail "train on scalar"
cmp -s fallback/model.safetensors next/model.safetensors ||
    fail "the fallback's model is not $next's"
cmp -s fallback/model.safetensors scalar/model.safetensors ||
    fail "the fallback's model is not the plain C path's"
QKV_TEST_SIMD_FAULT=$best "$QKV" "${train[@]}" --out skipped --no-selftest >out.txt 2>err.txt ||
    fail "train --no-selftest: exit $?"
grep -q 'warning' err.txt && fail "train --no-selftest probed: $(cat err.txt)"
cmp -s skipped/model.safetensors next/model.safetensors &&
    fail "--no-selftest trained on a faulty $best and still gave $next's model: the fault did nothing"
QKV_NO_SELFTEST=1 QKV_TEST_SIMD_FAULT=$best "$QKV" "${train[@]}" --out skipped_env >out.txt 2>err.txt ||
    fail "QKV_NO_SELFTEST=1 train: exit $?"
grep -q 'warning' err.txt && fail "QKV_NO_SELFTEST=1 train probed: $(cat err.txt)"
cmp -s skipped_env/model.safetensors skipped/model.safetensors ||
    fail "QKV_NO_SELFTEST=1 did not train as --no-selftest does"
QKV_TEST_SIMD_FAULT=$best QKV_SIMD=$best "$QKV" "${train[@]}" --out forced >out.txt 2>err.txt ||
    fail "train with QKV_SIMD=$best faulty: exit $?"
grep -q "^qkv: warning: QKV_SIMD=$best: this path's bits differ .*running it as QKV_SIMD asks" err.txt ||
    fail "QKV_SIMD=$best, faulty: $(cat err.txt)"
cmp -s forced/model.safetensors skipped/model.safetensors ||
    fail "QKV_SIMD=$best, faulty, did not run $best"
QKV_TEST_SIMD_FAULT=$best "$QKV" attribute next --input "3 1 4 1 5 9 2 6" >out.txt 2>err.txt ||
    fail "qkv attribute with $best faulty: exit $?: $(cat err.txt)"
grep -q "^qkv: warning: the $best path's bits differ" err.txt || fail "qkv attribute did not probe: $(cat err.txt)"
for cmd in "eval next" "ablate next" "circuits next" "bench --config tiny --repeat 5"; do
    # shellcheck disable=SC2086 # the command's words split on purpose
    QKV_TEST_SIMD_FAULT=$best "$QKV" $cmd >out.txt 2>err.txt || fail "qkv $cmd with $best faulty: exit $?: $(cat err.txt)"
    grep -q "^qkv: warning: the $best path's bits differ" err.txt ||
        fail "qkv $cmd did not probe: $(cat err.txt)"
done
# commands that compute nothing do not probe
for cmd in "--version" "plot next" "train --help"; do
    # shellcheck disable=SC2086
    QKV_TEST_SIMD_FAULT=$best "$QKV" $cmd >out.txt 2>err.txt
    grep -q 'warning' err.txt && fail "qkv $cmd probed: $(cat err.txt)"
done
echo "selftest_test: $failures failures"
[ "$failures" -eq 0 ]
