#!/usr/bin/env bash
# travel_test.sh QKV DATA - a run directory is self-contained (docs/model.md, "Data files").
#   1. A task model, a data-file model and an encoder-decoder with a --heldout file: each run
#      directory is copied elsewhere, the original run and its data files are deleted, and the
#      copy gives the same `eval --json` (all but "seconds", the evaluation's wall time),
#      `inspect --json` and `ablate --json` as the original did. A resume of the copy into
#      a third directory carries the data along.
#   2. A data run killed at each file event of its data copies starts again and ends with
#      copies equal to the files, and no temporary.
#   3. Planted names: DIR/data as a link is refused and its target untouched; a link at
#      DIR/data/train.tsv is replaced, never written through; a user's own data file kept at
#      DIR/data/train.tsv stays when --force clears the old run.
set -u
QKV=$1 DATA=$2
[ "$QKV" = "${QKV#/}" ] && QKV=$PWD/$QKV
[ "$DATA" = "${DATA#/}" ] && DATA=$PWD/$DATA
W=$(mktemp -d "${TMPDIR:-/tmp}/qkv_travel.XXXXXX")
trap 'rm -rf "$W"' EXIT
cd "$W" || exit 1

failures=0 checks=0
ok() { checks=$((checks + 1)); }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# the JSON of a command without its "seconds" field (a wall time)
json() { "$QKV" "$@" 2>err.txt | sed -E 's/"seconds":[0-9.e+-]+,?//'; }

# ---- 1. three kinds of model, moved ----
mkdir in
cp "$DATA/swap_pairs.tsv" in/pairs.tsv
head -n 200 "$DATA/odd_words.tsv" >in/words.tsv
tail -n 40 "$DATA/odd_words.tsv" >in/held.tsv
SMALL=(--d-model 16 --steps 30 --quiet)
# (the hints of so short a run go to stderr: dropped)
{ "$QKV" train --task reverse --seq-len 6 --vocab 8 "${SMALL[@]}" --out task &&
    "$QKV" train --data in/pairs.tsv "${SMALL[@]}" --out pairs &&
    "$QKV" train --data in/words.tsv --heldout in/held.tsv "${SMALL[@]}" --out words; } \
    >/dev/null 2>&1 || { echo "travel_test: training failed"; exit 1; }
[ -f pairs/data/train.tsv ] && cmp -s pairs/data/train.tsv in/pairs.tsv && ok ||
    fail "pairs/data/train.tsv is not a copy of the data file"
[ -f words/data/heldout.tsv ] && cmp -s words/data/heldout.tsv in/held.tsv && ok ||
    fail "words/data/heldout.tsv is not a copy of the held-out file"
[ ! -e task/data ] && ok || fail "a task run has a data directory"

for run in task pairs words; do
    json eval --model $run --json >$run.eval
    json inspect --model $run --input "$(head -n 1 in/pairs.tsv | cut -f1)" --json >$run.inspect
    json ablate --model $run --json >$run.ablate
done
mkdir -p far/away
mv task pairs words far/away/
rm -rf in
for run in task pairs words; do
    json eval --model far/away/$run --json >moved.eval
    [ -s $run.eval ] && cmp -s $run.eval moved.eval && ok ||
        fail "$run: eval --json differs after the move: $(head -c 300 err.txt)"
    json ablate --model far/away/$run --json >moved.ablate
    [ -s $run.ablate ] && cmp -s $run.ablate moved.ablate && ok ||
        fail "$run: ablate --json differs after the move: $(head -c 300 err.txt)"
done
json inspect --model far/away/pairs --input "$(head -n 1 "$DATA/swap_pairs.tsv" | cut -f1)" \
    --json >moved.inspect
[ -s pairs.inspect ] && cmp -s pairs.inspect moved.inspect && ok ||
    fail "pairs: inspect --json differs after the move: $(head -c 300 err.txt)"
# a resume of the moved run into another directory takes the data along
"$QKV" train --resume far/away/words --steps 40 --out again --quiet >/dev/null 2>err.txt &&
    cmp -s again/data/train.tsv far/away/words/data/train.tsv &&
    cmp -s again/data/heldout.tsv far/away/words/data/heldout.tsv && ok ||
    fail "a resume into another directory: $(head -c 300 err.txt)"
rm -rf far/away/words
"$QKV" eval --model again >/dev/null 2>err.txt && ok || fail "the resumed run: $(cat err.txt)"

# ---- 2. killed while copying ----
# The copies are the first files a data run writes: its first three file events are the
# train.tsv temporary created, written, renamed (src/io/atomic.c).
for n in 1 2 3 4; do
    rm -rf k
    (QKV_TEST_KILL_AT=$n "$QKV" train --data "$DATA/swap_pairs.tsv" "${SMALL[@]}" --out k; exit $?) \
        >log.txt 2>&1
    [ $? = 137 ] && ok || fail "kill at event $n: not killed: $(head -c 300 log.txt)"
    [ ! -e k/model.safetensors ] && ok || fail "kill at event $n: a model was committed"
    "$QKV" train --data "$DATA/swap_pairs.tsv" "${SMALL[@]}" --out k >/dev/null 2>err.txt &&
        cmp -s k/data/train.tsv "$DATA/swap_pairs.tsv" && [ -z "$(find k -name '*.tmp.*')" ] &&
        ok || fail "after a kill at event $n, the run again: $(head -c 300 err.txt)"
done

# ---- 3. planted names ----
mkdir -p elsewhere link_dir && echo keep >elsewhere/train.tsv
ln -s ../elsewhere link_dir/data
"$QKV" train --data "$DATA/swap_pairs.tsv" "${SMALL[@]}" --out link_dir >/dev/null 2>err.txt
rc=$?
[ "$rc" = 3 ] && grep -q '^qkv: .*data exists and is not a directory' err.txt && ok ||
    fail "DIR/data a link: exit $rc: $(head -c 300 err.txt)"
[ "$(cat elsewhere/train.tsv)" = keep ] && ok || fail "DIR/data a link: its target changed"
mkdir -p link_file/data && echo victim >victim.txt && ln -s ../../victim.txt link_file/data/train.tsv
"$QKV" train --data "$DATA/swap_pairs.tsv" "${SMALL[@]}" --out link_file >/dev/null 2>err.txt &&
    [ "$(cat victim.txt)" = victim ] && [ ! -L link_file/data/train.tsv ] &&
    cmp -s link_file/data/train.tsv "$DATA/swap_pairs.tsv" && ok ||
    fail "a link at DIR/data/train.tsv: $(head -c 300 err.txt)"
# a user's own file at the copy's name: the run reads it, --force keeps it
"$QKV" train --task copy --seq-len 4 --vocab 8 "${SMALL[@]}" --out own >/dev/null 2>&1
mkdir -p own/data && cp "$DATA/swap_pairs.tsv" own/data/train.tsv
"$QKV" train --data own/data/train.tsv "${SMALL[@]}" --out own --force >/dev/null 2>err.txt &&
    cmp -s own/data/train.tsv "$DATA/swap_pairs.tsv" && "$QKV" eval --model own >/dev/null &&
    ok || fail "the data file at DIR/data/train.tsv with --force: $(head -c 300 err.txt)"

echo "travel_test: $checks checks passed, $failures failed"
[ "$failures" = 0 ]
