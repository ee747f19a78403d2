#!/usr/bin/env bash
# hostile_test.sh QKV - what bad_inputs.tsv cannot hold: commands that succeed on hostile
# names, and runs that meet links, signals and limits (docs/errors.md, "Hostile paths ...").
#   1. Directory names that a shell or gnuplot would run ('<touch ...', '|touch ...', $(...),
#      backquotes, a newline, a leading '-'): train --plot --snapshot-every, plot, eval,
#      grads, inspect, plot --format html, resume and study all work on them, and nothing is
#      ever run.
#   2. A symbolic link planted at the name of a temporary is never written through.
#   3. Two runs on one directory: the second is refused; SIGTERM stops the first with one
#      line, no temporary left, and a checkpoint that evaluates and resumes.
#   4. ulimit -f: a file too large gives one line and exit 3, and leaves the old model whole.
#   5. ulimit -v: threads that cannot start give one line and exit 6 when asked for, and are
#      quietly fewer by default.
#   6. A run that diverges keeps its last good checkpoint and says which step it is.
# A model trained before all of this still evaluates to the same line at the end.
# Exits 77 (skipped) without gnuplot.
set -u
QKV=$1
[ "$QKV" = "${QKV#/}" ] && QKV=$PWD/$QKV
command -v gnuplot >/dev/null || { echo "hostile_test: gnuplot not found, skipped"; exit 77; }
W=$(mktemp -d "${TMPDIR:-/tmp}/qkv_hostile.XXXXXX")
bg=
trap '[ -n "$bg" ] && kill -KILL "$bg" 2>/dev/null; rm -rf "$W"' EXIT
cd "$W" || exit 1

failures=0 checks=0
ok() { checks=$((checks + 1)); }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# run WANT NAME CMD...: runs qkv CMD, expects exit WANT, keeps stderr in err.txt
run() {
    local want=$1 what=$2
    shift 2
    "$QKV" "$@" >out.txt 2>err.txt </dev/null
    local rc=$?
    [ "$rc" = "$want" ] && ok || fail "$what: exit $rc, expected $want: $(head -c 300 err.txt)"
}
one_line() { # the message of a failure is one "qkv: " line holding $2
    [ "$(wc -l <err.txt)" = 1 ] && grep -q "^qkv: .*$2" err.txt && ok ||
        fail "$1: stderr is not one 'qkv: ... $2' line: $(head -c 400 err.txt)"
}
no_temporaries() {
    local left
    left=$(find . -name '*.tmp.*')
    [ -z "$left" ] && ok || fail "$1: temporaries left: $left"
}

SMALL=(--task copy --seq-len 4 --vocab 8 --d-model 8 --steps 20 --quiet)
run 0 "the good model" train "${SMALL[@]}" --out good
"$QKV" eval --model good >good_before.txt

# ---- 1. hostile names ----
names=('<touch PWNED1 #' '|touch PWNED2 #' '$(touch PWNED3)' '`touch PWNED4`' ';touch PWNED5'
       $'new\nline' '-rf' "quote's\"" ' space ' 'set output "|touch PWNED6"')
for name in "${names[@]}"; do
    d="runs/$name"
    run 0 "train --out --plot ($name)" train "${SMALL[@]}" --snapshot-every 10 --plot --out "$d"
    [ -s "$d/plots/attention_layer1_head1.png" ] && [ -s "$d/plots/snapshots.gif" ] && ok ||
        fail "train --plot ($name) drew no images"
    run 0 "plot ($name)" plot "$d"
    run 0 "eval ($name)" eval --model "$d"
    run 0 "grads ($name)" grads --model "$d" --out "$d/grads.safetensors"
    run 0 "plot --format html ($name)" plot "$d" --format html
    run 0 "inspect --out ($name)" inspect --model "$d" --input "1 2 3 4" --target "1 2 3 4" \
        --out "$d/inspect.safetensors"
    run 0 "plot an inspect file ($name)" plot "$d/inspect.safetensors"
    [ -s "$d/plots/attention.html" ] && [ -s "$d/inspect/plots/grads_layer1_head1.png" ] && ok ||
        fail "plot --format html or plot of an inspect file ($name) wrote nothing"
    run 0 "resume ($name)" train --resume "$d" --steps 30 --quiet
    run 0 "study --out ($name)" study softmax --scaling --samples 10 --keys 2 --max-dk 4 --out "$d/study"
    [ -s "$d/study/scaling.png" ] && ok || fail "study ($name) drew no image"
done
pwned=$(find "$W" /tmp -maxdepth 4 -name 'PWNED*' 2>/dev/null)
[ -z "$pwned" ] && ok || fail "a name was run as a command: $pwned"
no_temporaries "hostile names"

# ---- 2. a symbolic link at a temporary's name ----
echo "not to be written" >victim
cp victim victim.orig
bash -c 'ln -s ../victim "good/grads.safetensors.tmp.$$.0" && exec "$0" grads --model good --out good/grads.safetensors' \
    "$QKV" >out.txt 2>err.txt
[ $? = 0 ] && ok || fail "grads beside a planted link: $(cat err.txt)"
cmp -s victim victim.orig && ok || fail "the planted link was written through"
[ -f good/grads.safetensors ] && [ ! -L good/grads.safetensors ] && ok ||
    fail "the output became the planted link"
rm -f good/grads.safetensors.tmp.*

# ---- 3. two runs on one directory; SIGTERM ----
"$QKV" train "${SMALL[@]}" --steps 100000000 --save-every 50 --out busy >busy_out.txt 2>busy_err.txt &
bg=$!
for _ in $(seq 200); do [ -e busy/model.safetensors ] && break; sleep 0.05; done
run 3 "a second run on busy" train "${SMALL[@]}" --out busy
one_line "a second run on busy" "busy is being written by another qkv run"
kill -TERM "$bg"
wait "$bg"
rc=$?
bg=
[ "$rc" = 7 ] && ok || fail "SIGTERM: exit $rc, expected 7: $(cat busy_err.txt)"
[ "$(wc -l <busy_err.txt)" = 1 ] &&
    grep -q '^qkv: interrupted by SIGTERM; the run in busy keeps its checkpoint of step [0-9]*$' busy_err.txt &&
    ok || fail "SIGTERM's line: $(cat busy_err.txt)"
no_temporaries "SIGTERM"
run 0 "eval after SIGTERM" eval --model busy
step=$(sed -n 's/.*checkpoint of step \([0-9]*\)$/\1/p' busy_err.txt)
run 0 "resume after SIGTERM" train --resume busy --steps $((step + 5)) --quiet

# ---- 4. ulimit -f ----
(ulimit -f 64 && exec "$QKV" train --task copy --vocab 2000 --d-model 128 --steps 2 --quiet --out big) \
    >out.txt 2>err.txt
rc=$?
[ "$rc" = 3 ] && ok || fail "ulimit -f: exit $rc, expected 3: $(cat err.txt)"
one_line "ulimit -f" "File too large"
[ "$(ls big)" = summary.json ] && grep -q '"status":[[:space:]]*"failed"' big/summary.json && ok ||
    fail "ulimit -f: the failed first save left more than a failed summary.json: $(ls big)"
cp good/model.safetensors good.orig
(ulimit -f 2 && exec "$QKV" train --resume good --steps 25 --quiet) >out.txt 2>err.txt
rc=$?
[ "$rc" = 3 ] && ok || fail "ulimit -f on resume: exit $rc, expected 3: $(cat err.txt)"
one_line "ulimit -f on resume" "File too large"
cmp -s good/model.safetensors good.orig && ok || fail "ulimit -f changed the saved model"
no_temporaries "ulimit -f"

# ---- 5. ulimit -v (not under AddressSanitizer, whose shadow memory alone is far larger) ----
if ! (ulimit -v 400000 && exec "$QKV" --version) >/dev/null 2>&1; then
    echo "hostile_test: qkv cannot start under ulimit -v 400000 (a sanitizer build): part 5 skipped"
else
(ulimit -v 400000 && exec "$QKV" train --task copy --seq-len 16 --d-model 64 --steps 5 --quiet --threads 256) \
    >out.txt 2>err.txt
rc=$?
[ "$rc" = 6 ] && ok || fail "ulimit -v with --threads 256: exit $rc, expected 6: $(cat err.txt)"
one_line "ulimit -v with --threads 256" "cannot start 256 threads"
(ulimit -v 400000 && OMP_NUM_THREADS=256 exec "$QKV" train --task copy --seq-len 16 --d-model 64 \
    --steps 5 --quiet) >out.txt 2>err.txt
[ $? = 0 ] && ok || fail "ulimit -v with 256 threads by default: $(cat err.txt)"
fi

# ---- 6. a diverging run keeps its last good checkpoint ----
run 5 "divergence" train --optim sgd --lr 1000000 --clip 0 --schedule constant --warmup 0 \
    --steps 50 --d-model 32 --quiet --save-every 1 --out diverged
one_line "divergence" "at step 3: training diverged (lower --lr); diverged keeps the checkpoint of step 2"
run 0 "eval of the kept checkpoint" eval --model diverged --json
grep -q '"steps":2,' out.txt && ok || fail "the kept checkpoint is not step 2: $(cat out.txt)"

"$QKV" eval --model good >good_after.txt
cmp -s good_before.txt good_after.txt && ok || fail "the good model evaluates differently now"
echo "hostile_test: $checks checks passed, $failures failed"
[ "$failures" = 0 ]
