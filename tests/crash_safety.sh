#!/usr/bin/env bash
# crash_safety.sh - checkpoints survive SIGKILL (docs/errors.md, "Crash safety").
#
# usage: tests/crash_safety.sh QKV [ROUNDS [SEED]]      (default 20 rounds, seed 6)
#
# A model that takes a while to save (d-model 256, vocab 10000: a 65 MB model.safetensors
# with its Adam moments) and whose steps are cheap (batch 1, seq-len 2) is trained for one
# step. A first run of `qkv train --resume DIR --save-every 1` measures how long writing
# model.safetensors takes: how long its temporary file model.safetensors.tmp.PID exists.
# Then, ROUNDS times, the same command runs and, the moment a save of the model begins (its
# temporary file appears), a delay drawn at random (from SEED) within 4/5 of that duration
# starts; at its end qkv gets SIGKILL. Every time, DIR/model.safetensors must still load and
# evaluate (`qkv eval --model DIR` exits 0), at a step no earlier than the round before; a
# kill inside a save (it leaves the temporary file behind, which is then removed, as a user
# would) must leave model.safetensors exactly as it was before that save; and at least 3/4 of
# the kills must land inside a save. A save can run much faster than the one measured (the
# page cache took 33 MB in 11 ms in one run), so the watched save may end, and the kill land
# in a later one (the temporary file has the same name, another inode): model.safetensors
# must then have been replaced (by the watched save's file, or a later one's: a rename keeps
# the file), and it must load, as every round checks. A kill that lands after the save
# (none left running) shows that saves now take less than its delay: the window shrinks to
# 4/5 of that delay, and rounds go on past ROUNDS (up to twice as many) until 3/4 of ROUNDS
# kills have landed inside a save. (Measured beside the other tests, the first save took
# 402 ms, and 8 of 20 kills drawn from that window came after the saves had ended.)
set -u
export LC_ALL=C # EPOCHREALTIME with a '.'
QKV=${1:?usage: crash_safety.sh path/to/qkv [ROUNDS [SEED]]}
ROUNDS=${2:-20}
SEED=${3:-6}
[ "$QKV" = "${QKV#/}" ] && QKV=$PWD/$QKV
W=$(mktemp -d "${TMPDIR:-/tmp}/qkv_crash_safety.XXXXXX")
pid=
trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$W"' EXIT
cd "$W" || exit 1

now_us() { now=${EPOCHREALTIME/./}; now=$((10#$now)); } # sets $now, without a subshell
step_of() { sed -n 's/.*"steps":\([0-9]*\).*/\1/p' "$1"; }

# prev.safetensors: a hard link to the checkpoint the run starts from. Besides keeping it for
# the comparison below, it makes replacing model.safetensors cheap (the rename drops a link
# instead of freeing 65 MB), so that a save is mostly writing, where the kills should land.
start_training() {
    ln -f run/model.safetensors prev.safetensors
    "$QKV" train --resume run --steps 100000000 --save-every 1 --eval-every 100000000 \
        --threads 1 --quiet >out.txt 2>err.txt &
    pid=$!
    tmp=run/model.safetensors.tmp.$pid.0
}

# Busy-waits (this shell's builtins only: microsecond resolution) until the model's temporary
# file exists (want=1) or is gone (want=0); false if qkv died or 120 s went by.
wait_tmp() {
    now_us
    local until=$((now + 120000000)) i=0
    while :; do
        if [ "$1" = 1 ]; then [ -e "$tmp" ] && return 0; else [ -e "$tmp" ] || return 0; fi
        if [ $((++i % 1000)) = 0 ]; then
            kill -0 "$pid" 2>/dev/null || return 1
            now_us
            [ "$now" -lt "$until" ] || return 1
        fi
    done
}

stop_training() {
    kill -KILL "$pid" 2>/dev/null
    { wait "$pid"; } 2>/dev/null # no "Killed" line from bash
    status=$?
    pid=
}

if ! "$QKV" train --task copy --seq-len 2 --vocab 10000 --d-model 256 --batch 1 --steps 1 \
    --out run --quiet 2>err.txt; then
    echo "crash_safety: the first training run failed: $(cat err.txt)"; exit 1
fi

# ---- how long the first save of a resumed run takes (what the rounds kill): the shortest
# of 3 runs ----
save_us=
for _ in 1 2 3; do
    start_training
    if wait_tmp 1; then
        now_us; t0=$now
        if wait_tmp 0; then
            now_us
            d=$((now - t0))
            if [ -z "$save_us" ] || [ "$d" -lt "$save_us" ]; then save_us=$d; fi
        fi
    fi
    stop_training
    find run -name '*.tmp.*' -delete
done
if [ -z "$save_us" ]; then
    echo "crash_safety: could not watch a save: $(head -c 300 err.txt)"; exit 1
fi
echo "crash_safety: writing model.safetensors takes $((save_us / 1000)) ms (the shortest of 3 saves)"

window=$((save_us * 4 / 5))
[ "$window" -ge 1 ] || window=1
RANDOM=$SEED
failures=0 in_save=0 prev=1 need=$((ROUNDS * 3 / 4)) round=0
while [ "$round" -lt "$ROUNDS" ] || { [ "$in_save" -lt "$need" ] && [ "$round" -lt $((2 * ROUNDS)) ]; }; do
    round=$((round + 1))
    start_training
    delay=$(((RANDOM * 32768 + RANDOM) % window))
    watched=
    if wait_tmp 1; then
        now_us
        end=$((now + delay))
        watched=$(stat -c %i "$tmp" 2>/dev/null) # the inode of the save the delay runs in
        while [ "$now" -lt "$end" ]; do now_us; done
    fi
    stop_training
    during=no
    if [ -e "$tmp" ]; then
        during="yes, $(wc -c <"$tmp") bytes of it written"
        in_save=$((in_save + 1))
        killed=$(stat -c %i "$tmp")
        if [ -n "$watched" ] && [ "$killed" != "$watched" ]; then
            during="yes, in a save after the watched one, $(wc -c <"$tmp") bytes of it written"
            if [ "$(stat -c %i run/model.safetensors)" = "$(stat -c %i prev.safetensors)" ]; then
                echo "FAIL round $round: the watched save ended, yet model.safetensors is the old file"
                failures=$((failures + 1))
            fi
        elif ! cmp -s run/model.safetensors prev.safetensors; then
            echo "FAIL round $round: killed inside a save, yet model.safetensors changed"
            failures=$((failures + 1))
        fi
    fi
    find run -name '*.tmp.*' -delete
    if [ "$during" = no ] && [ -n "$watched" ]; then # the save ended before the kill
        window=$((delay * 4 / 5))
        [ "$window" -ge 1 ] || window=1
    fi
    if [ "$status" -ne 137 ]; then
        echo "FAIL round $round: train was not killed (exit $status): $(head -c 300 err.txt)"
        failures=$((failures + 1))
        continue
    fi
    if ! "$QKV" eval --model run --json >eval.json 2>err.txt; then
        echo "FAIL round $round: killed $((delay / 1000)) ms into a save, model.safetensors does not load: $(cat err.txt)"
        failures=$((failures + 1))
        continue
    fi
    step=$(step_of eval.json)
    if [ -z "$step" ] || [ "$step" -lt "$prev" ]; then
        echo "FAIL round $round: the model went back from step $prev to step '$step'"
        failures=$((failures + 1))
        continue
    fi
    echo "round $round: killed $((delay / 1000)) ms into a save (inside it: $during); the model, at step $step, loads and evaluates"
    prev=$step
done
echo "crash_safety: $((round - failures)) of $round rounds passed; $in_save kills landed inside a save"
[ "$failures" -eq 0 ] || exit 1
[ "$in_save" -ge "$need" ] || { echo "crash_safety: fewer than $need kills landed inside a save"; exit 1; }
