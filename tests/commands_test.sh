#!/usr/bin/env bash
# commands_test.sh QKV - every command's working path once, on one model small enough to run
# under valgrind in seconds: train (with its plots and snapshots), eval, inspect, plot, circuits,
# ablate, patch (exact and attribution), attribute, lens, grads, both studies, bench, and a sweep of
# two runs and its table; and the commands that read a model (fourier among them) on a modular
# one. Each must exit 0 and write what it says it writes. Every command of
# `qkv --help` but gradcheck (every op's finite differences: minutes under valgrind;
# test_gradcheck runs its code in every other stage) and selftest (every kernel's cases and 20
# training steps on two paths, a minute under valgrind; selftest_test runs it in every other
# stage, and each command here runs the start-up probe's code, the same cases on the short
# list) must appear here: a new command fails this test until it has its line.
#
# The other tests check these commands' numbers (cli_test, explain_test, plot_test,
# inspect_test, the PyTorch oracles); this one is their common path at the smallest size, so
# that .ci/run's valgrind stage, where a process runs a thousand times slower, sees every
# command's code without their trainings (QKV may be a wrapper: "valgrind ... qkv").
set -u
QKV=$1
[ "$QKV" = "${QKV#/}" ] && [ -x "$QKV" ] && QKV=$PWD/$QKV
SELF=$(realpath "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
failures=0

# run NAME ARGS...: qkv ARGS must exit 0 (its output in NAME.out, its stderr in NAME.err)
run() {
    local name=$1
    shift
    $QKV "$@" >"$name.out" 2>"$name.err"
    local code=$?
    if [ "$code" != 0 ]; then
        echo "FAIL: qkv $* exited $code:"
        sed 's/^/    /' "$name.err"
        failures=$((failures + 1))
        return 1
    fi
}
# has FILE...: each file exists and is not empty
has() {
    for f in "$@"; do
        [ -s "$f" ] || { echo "FAIL: $f missing or empty"; failures=$((failures + 1)); }
    done
}
# says NAME TEXT: NAME.out holds TEXT
says() {
    grep -q -- "$2" "$1.out" ||
        { echo "FAIL: qkv's $1 output lacks '$2'"; failures=$((failures + 1)); }
}

# Two heads on two layers, so that every analysis has heads to compare and a second layer to
# compose with; 6 steps with metrics every 3 and a snapshot every 3.
run train train --task copy --seq-len 4 --vocab 8 --d-model 8 --heads 2 --layers 2 --batch 8 \
    --steps 6 --eval-every 3 --snapshot-every 3 --quiet --out run
has run/model.safetensors run/metrics.csv run/metrics.jsonl run/summary.json

run eval eval --model run --json && says eval '"accuracy"'
run inspect inspect --model run --input "1 2 3 4" && says inspect "layer 2"
run inspect_full inspect --model run --input "1 2 3 4" --full && says inspect_full "A V"
run circuits circuits --model run --out run/circuits.json && has run/circuits.json
run ablate ablate run --mode mean --together --out run/ablate.json && has run/ablate.json
run patch patch run --clean "1 2 3 4" --corrupt "5 6 7 0" --answer 4 --wrong 0 \
    --out run/patch.json && has run/patch.json
run patch_attr patch run --clean "1 2 3 4" --corrupt "5 6 7 0" --answer 4 --wrong 0 \
    --method attribution --over head-position --json &&
    says patch_attr '"method"'
run attribute attribute run --input "1 2 3 4" --json && says attribute '"heads"'
run lens lens run --input "1 2 3 4" --top 3 --out run/lens.json && has run/lens.json
run grads grads --model run --out grads.safetensors && has grads.safetensors
# the plots need gnuplot (the svg) but never a browser (the page is one file)
if command -v gnuplot >/dev/null; then
    run plot plot run --format svg &&
        has run/plots/overview.svg run/plots/attention_layer2_head2.svg run/plots/lens.svg \
            run/plots/lens_parts.svg
fi
run plot_html plot run --format html && has run/plots/attention.html

run softmax study softmax --vector 4,-1,2.1
run precision study precision --steps 1
run bench bench --config tiny --repeat 1 --seconds 0.01 --threads 1 --json &&
    says bench '"ms_per_step"'
run sweep sweep --grid 'lr=0.01,0.02' --out grid -- --task copy --seq-len 4 --vocab 8 \
    --d-model 4 --steps 2 --quiet && has grid/sweep.json grid/lr=0.02/model.safetensors
run collect sweep --collect grid && says collect "lr"

# modular arithmetic (one target at =, a split of the pairs, the full batch, an MLP): the
# commands that read a model, once each on a tiny one
run modular_train train --task modular --modulus 5 --d-model 8 --heads 2 --mlp 8 --steps 4 \
    --eval-every 2 --quiet --out mod && has mod/model.safetensors
run modular_eval eval --model mod --json && says modular_eval '"heldout_targets":18'
run modular_inspect inspect --model mod --input "1 2 =" && says modular_inspect "="
run modular_circuits circuits --model mod --json && says modular_circuits '"="'
run modular_ablate ablate mod --json && says modular_ablate '"examples":18'
run modular_patch patch mod --clean "1 2 =" --corrupt "3 2 =" --answer 3 --wrong 0 --json &&
    says modular_patch '"method"'
run modular_attribute attribute mod --input "1 2 =" --json && says modular_attribute '"parts"'
run modular_lens lens mod --input "1 2 =" --json && says modular_lens '"layers"'
run modular_grads grads --model mod --out mod_grads.safetensors && has mod_grads.safetensors
run modular_fourier fourier mod --out mod/fourier.json && has mod/fourier.json &&
    says modular_fourier "key frequencies"
if command -v gnuplot >/dev/null; then
    run modular_plot plot mod --format svg &&
        has mod/plots/grok_losses.svg mod/plots/grok_fourier.svg mod/plots/grok_neurons.svg \
            mod/plots/grok_attention_layer1.svg
fi
run modular_plot_html plot mod --format html && has mod/plots/attention.html
run modular_resume train --resume mod --steps 6 --quiet
# a modular run's progress measures and phases (docs/grokking.md)
grep -q '"grokking"' mod/summary.json && grep -q ',restricted_loss,' mod/metrics.csv ||
    { echo "FAIL: mod/summary.json has no grokking or mod/metrics.csv no restricted_loss"; failures=$((failures + 1)); }

# every command qkv lists ran above (the first word after "run NAME")
listed=$($QKV --help | sed -n 's/^  \([a-z]\{2,\}\)  .*/\1/p')
[ -n "$listed" ] || { echo "FAIL: qkv --help lists no commands"; failures=$((failures + 1)); }
for cmd in $listed; do
    [ "$cmd" = gradcheck ] || [ "$cmd" = selftest ] && continue
    grep -q "^run [a-z_]* $cmd\( \|\$\)" "$SELF" ||
        { echo "FAIL: commands_test runs no 'qkv $cmd'"; failures=$((failures + 1)); }
done

if [ "$failures" -gt 0 ]; then
    echo "commands_test: $failures failures"
    exit 1
fi
echo "commands_test: every command ran"
