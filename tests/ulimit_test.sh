#!/usr/bin/env bash
# ulimit_test.sh QKV - every command under an address-space limit (ulimit -v) from 8 MB to
# 256 MB either works (exit 0) or exits 6 with its one `qkv:` line, within seconds: never a
# hang, a crash, or the dynamic loader's exit 127 before main (docs/errors.md, "Memory
# limits"). qkv links no LAPACK (ldd, where it runs: readelf's NEEDED otherwise): circuits
# loads it when it needs it, and says so in one line when it cannot.
#
# The limits cross every threshold seen: the loader (about 7 MB), qkv's stack at start
# (1 MB beyond that), training's set-up, the threads' stacks, LAPACK's 30 MB (OpenBLAS) and its
# buffer of 128 MiB (from 75 x 75 matrices on), gnuplot's libraries (90 MB). Not under a
# sanitizer: AddressSanitizer's shadow memory alone is terabytes of address space.
set -u
QKV=${1:?usage: ulimit_test.sh path/to/qkv}
[ "$QKV" = "${QKV#/}" ] && QKV=$PWD/$QKV
W=$(mktemp -d "${TMPDIR:-/tmp}/qkv_ulimit.XXXXXX")
trap 'rm -rf "$W"' EXIT
cd "$W" || exit 1
failures=0 checks=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { checks=$((checks + 1)); }

# ---- LAPACK is no part of qkv's start-up ----
if command -v ldd >/dev/null && ldd "$QKV" >ldd.txt 2>&1; then
    grep -Ei 'lapack|blas|gfortran' ldd.txt && fail "qkv loads LAPACK or a BLAS at start-up" || ok
elif command -v readelf >/dev/null; then
    readelf -d "$QKV" >needed.txt 2>&1 || fail "readelf -d $QKV"
    grep NEEDED needed.txt | grep -Ei 'lapack|blas|gfortran' && fail "qkv links LAPACK or a BLAS" || ok
fi

# one_line NAME: the command's stderr (err.txt) is exactly one line, starting "qkv: "
one_line() {
    [ "$(wc -l <err.txt)" = 1 ] && grep -q '^qkv: ' err.txt && ok ||
        fail "$1: stderr is not one qkv: line: $(head -c 300 err.txt)"
}

# A model of two layers of two heads, and one whose head is 80 wide (OpenBLAS's blocked
# eigenvalues, from 75 on).
SMALL=(--task copy --seq-len 4 --vocab 8 --batch 8 --quiet)
"$QKV" train "${SMALL[@]}" --threads 1 --d-model 8 --heads 2 --layers 2 --steps 6 --eval-every 3 --out m \
    >/dev/null 2>err.txt || { echo "ulimit_test: cannot train the model: $(cat err.txt)"; exit 1; }
"$QKV" train "${SMALL[@]}" --threads 1 --d-model 80 --steps 1 --out wide >/dev/null 2>err.txt ||
    { echo "ulimit_test: cannot train the wide model: $(cat err.txt)"; exit 1; }

# 300 examples for eval --data and ablate --data: more than one analysis batch (256)
for i in $(seq 1 300); do echo "$((i % 8)) $(((i / 8) % 8)) 3 $((i % 5))"; done >d.txt

# LAPACK that cannot be loaded: circuits says so in one line (exit 3); other commands never
# load it.
QKV_TEST_LAPACK=libqkv-no-such-lapack.so "$QKV" circuits m >out.txt 2>err.txt
rc=$?
[ "$rc" = 3 ] && ok || fail "circuits without LAPACK: exit $rc, expected 3"
one_line "circuits without LAPACK"
grep -q 'cannot load LAPACK' err.txt && ok || fail "circuits without LAPACK: $(cat err.txt)"
[ -s out.txt ] && fail "circuits without LAPACK printed: $(head -n 3 out.txt)" || ok
QKV_TEST_LAPACK=libqkv-no-such-lapack.so "$QKV" eval --model m >/dev/null 2>err.txt &&
    ok || fail "eval needs LAPACK: $(cat err.txt)"

# A JSON that lost an item for lack of memory is never written or printed: QKV_TEST_FAIL_JSON_ALLOC=N
# fails cJSON's Nth allocation. circuits' object, early (the vocabulary) and late (a matrix);
# eval --data's per-example record (the object is built after the records).
for n in 5 300; do
    QKV_TEST_FAIL_JSON_ALLOC=$n "$QKV" circuits m --json >out.txt 2>err.txt
    rc=$?
    [ "$rc" = 6 ] && ok || fail "circuits --json, cJSON allocation $n failing: exit $rc, expected 6"
    one_line "circuits --json, cJSON allocation $n failing"
    [ -s out.txt ] && fail "circuits --json, cJSON allocation $n failing, printed $(head -c 200 out.txt)" || ok
done
QKV_TEST_FAIL_JSON_ALLOC=20 "$QKV" eval m --data d.txt --per-example ex.jsonl --out ev.json >out.txt 2>err.txt
rc=$?
[ "$rc" = 6 ] && ok || fail "eval --data --per-example, cJSON allocation 20 failing: exit $rc, expected 6"
one_line "eval --data --per-example, cJSON allocation 20 failing"
[ -e ex.jsonl ] || [ -e ev.json ] && fail "eval --data with a record lost wrote its files" || ok
# lens: a cell of its layers (early) or a part of its decomposition (late) lost
for n in 30 400; do
    QKV_TEST_FAIL_JSON_ALLOC=$n "$QKV" lens m --input "1 2 3 4" --out lens.json >out.txt 2>err.txt
    rc=$?
    [ "$rc" = 6 ] && ok || fail "lens --out, cJSON allocation $n failing: exit $rc, expected 6"
    one_line "lens --out, cJSON allocation $n failing"
    [ -e lens.json ] || [ -s out.txt ] && fail "lens with an item lost wrote or printed it" || ok
done

if ! (ulimit -v 400000 && exec "$QKV" --version) >/dev/null 2>&1; then
    echo "ulimit_test: qkv cannot start under ulimit -v 400000 (a sanitizer build): the limits are skipped"
    [ "$failures" = 0 ] || exit 1
    exit 0
fi

# The commands: each reads m (or a copy of it, p, for those that write into it) and d.txt,
# and writes under o. The analysis commands (ablate, eval --data) score 256 sequences at a
# time: their one memory check covers that batch.
COMMANDS=(
    "--version"
    "train ${SMALL[*]} --d-model 8 --steps 3 --threads 1 --out o"
    "train ${SMALL[*]} --d-model 8 --steps 3 --threads 2"
    "eval --model m"
    "circuits m"
    "circuits m --json"
    "circuits wide --json"
    "inspect --model m --input '1 2 3 4'"
    "attribute m --input '1 2 3 4'"
    "lens m --input '1 2 3 4'"
    "ablate m"
    "ablate m --data d.txt --mode mean --together"
    "eval --model m --data d.txt --per-example o.jsonl"
    "patch m --clean '1 2 3 4' --corrupt '5 6 7 0' --answer 4 --wrong 0"
    "grads --model m --out o.safetensors"
    "plot p --format html"
    "study softmax --vector 4,-1,2.1"
    "sweep --grid lr=0.01,0.02 --out o --jobs 1 -- ${SMALL[*]} --d-model 4 --steps 2"
    "sweep --grid lr=0.01,0.02 --out o --emit parallel"
)
command -v gnuplot >/dev/null && COMMANDS+=("plot p --format svg")
LIMITS=(8 12 16 24 32 48 64 96 128 192 256)

# complete NAME CMD: what a command that exited 0 wrote is whole: every head's matrices in
# circuits' JSON (m: 2 layers of 2 heads), a record for each of d.txt's 300 examples.
complete() {
    case $2 in
    "circuits m --json")
        [ "$(grep -o '"ov":' out.txt | wc -l)" = 4 ] && ok ||
            fail "$1: exit 0 with $(grep -o '"ov":' out.txt | wc -l) of 4 heads' OV circuits" ;;
    *--per-example*)
        [ "$(wc -l <o.jsonl)" = 300 ] && ok ||
            fail "$1: exit 0 with $(wc -l <o.jsonl) of 300 per-example records" ;;
    esac
}

for cmd in "${COMMANDS[@]}"; do
    codes=""
    for mb in "${LIMITS[@]}"; do
        rm -rf o o.safetensors p && cp -r m p
        start=$(date +%s%N)
        (ulimit -v $((mb * 1024)) && eval "exec timeout -k 2 20 \"\$QKV\" $cmd") >out.txt 2>err.txt
        rc=$?
        ms=$((($(date +%s%N) - start) / 1000000))
        codes+=" $mb:$rc"
        case $rc in
        0) ok && complete "qkv $cmd under ulimit -v ${mb} MB" "$cmd" ;;
        6) one_line "qkv $cmd under ulimit -v ${mb} MB" ;;
        124) fail "qkv $cmd under ulimit -v ${mb} MB hangs (killed after 20 s)" ;;
        *) fail "qkv $cmd under ulimit -v ${mb} MB: exit $rc, expected 0 or 6: $(head -c 300 err.txt)" ;;
        esac
        [ "$ms" -lt 5000 ] && ok || fail "qkv $cmd under ulimit -v ${mb} MB took $ms ms"
    done
    echo "qkv $cmd, exit codes by MB:$codes"
done

# Walking up: a command under limits from 8 MB in 4 MB steps until it works. Between the
# limits above lie narrower windows (an arena that outgrows its first block, a thread that
# cannot start, a kernel case of qkv selftest without its buffers), where an allocation that
# fails must still be exit 6 with its one line: never a crash, OpenMP's exit 1, or a path
# reported as differing from plain C. A model of the tour's size (induction: 2 layers,
# T 16) for eval, whose evaluation arena once grew into the arena's abort at 40 MB.
"$QKV" train --task induction --steps 1 --quiet --out ind >/dev/null 2>err.txt ||
    { echo "ulimit_test: cannot train the induction model: $(cat err.txt)"; exit 1; }
WALKED=(
    "selftest"
    "study precision --steps 2"
    "eval --model ind"
)
for cmd in "${WALKED[@]}"; do
    codes=""
    for mb in $(seq 8 4 96); do
        (ulimit -v $((mb * 1024)) && eval "exec timeout -k 2 30 \"\$QKV\" $cmd") >out.txt 2>err.txt
        rc=$?
        codes+=" $mb:$rc"
        case $rc in
        0) ok && break ;;
        6) one_line "qkv $cmd under ulimit -v ${mb} MB" ;;
        124) fail "qkv $cmd under ulimit -v ${mb} MB hangs (killed after 30 s)"; break ;;
        *) fail "qkv $cmd under ulimit -v ${mb} MB: exit $rc, expected 0 or 6: $(head -c 300 err.txt) $(grep -m 1 DIFFERS out.txt)" ;;
        esac
    done
    [ "$rc" = 0 ] || fail "qkv $cmd never worked up to 96 MB"
    echo "qkv $cmd, walking up, exit codes by MB:$codes"
done
# gradcheck (3 s when it works) only where its contexts cannot be made
(ulimit -v 8192 && exec timeout -k 2 30 "$QKV" gradcheck) >out.txt 2>err.txt
rc=$?
case $rc in
0) ok ;;
6) one_line "qkv gradcheck under ulimit -v 8 MB" ;;
*) fail "qkv gradcheck under ulimit -v 8 MB: exit $rc, expected 0 or 6: $(head -c 300 err.txt)" ;;
esac

if [ "$failures" -gt 0 ]; then
    echo "ulimit_test: $failures of $((checks + failures)) checks failed"
    exit 1
fi
echo "ulimit_test: $checks checks passed"
