#!/usr/bin/env bash
# isa_bits_test.sh QKV - the same seed gives the same bits on every SIMD path this CPU runs
# (QKV_SIMD=scalar, avx2, avx512, neon) and on one or two threads: trains a few models under
# each, and compares the saved models (weights and optimizer state) byte for byte.
set -u
QKV=$(realpath "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
failures=0 compared=0

# QKV_ISA_BITS_PATHS: the paths to compare, plain C first (default: every path this CPU runs);
# .ci/run's emulated stage compares only "scalar avx512", the others having run in stage 1
paths=()
for p in ${QKV_ISA_BITS_PATHS:-scalar avx2 avx512 neon}; do
    QKV_SIMD=$p "$QKV" --version >/dev/null 2>&1 && paths+=("$p")
done
echo "paths this CPU runs: ${paths[*]}"
[ "${#paths[@]}" -ge 2 ] || echo "only one path to compare: the thread counts alone are compared"

# Each exercises other kernels: small products (heads of 16), the packed tiles and depth blocks
# (B·T = 256 and 320 rows), key tiles with a tail (80 keys), masks, two residual layers, every
# optimizer, clipping; and transformer blocks: an MLP (each activation) and LayerNorm; and
# modular (the full batch, the queries, MLP and head at the target position only, the
# attention over 3 keys head by head). Small,
# because the plain C path is slow (a call per fused multiply-add on x86).
configs=(
    "--task copy --seq-len 16 --d-model 32 --heads 2 --batch 16 --steps 12"
    "--task induction --steps 3 --batch 4 --optim momentum --clip 0.5 --eval-every 100"
    "--task reverse --seq-len 80 --d-model 16 --vocab 8 --batch 4 --steps 2 --causal --optim sgd"
    "--task reverse --d-model 32 --heads 2 --layers 2 --residual --mlp 40 --norm layernorm --batch 4 --steps 2 --eval-every 100"
    "--task shift --d-model 16 --residual --mlp 24 --act gelu --batch 4 --steps 2 --eval-every 100"
    "--task copy --d-model 16 --residual --mlp 20 --act gelu-tanh --norm layernorm --dtype f64 --batch 4 --steps 2 --eval-every 100"
    "--task modular --modulus 23 --d-model 32 --heads 2 --mlp 48 --steps 3 --eval-every 100"
)
for c in "${!configs[@]}"; do
    ref=""
    for p in "${paths[@]}"; do
        for threads in 1 2; do
            dir="run_${c}_${p}_${threads}"
            # shellcheck disable=SC2086 # the options are split on purpose
            if ! QKV_SIMD=$p "$QKV" train ${configs[$c]} --seed 5 --threads "$threads" --quiet \
                --out "$dir" >"$dir.log" 2>&1; then
                echo "FAIL: QKV_SIMD=$p --threads $threads qkv train ${configs[$c]}: $(cat "$dir.log")"
                failures=$((failures + 1))
                continue
            fi
            if [ -z "$ref" ]; then
                ref=$dir
            elif cmp -s "$ref/model.safetensors" "$dir/model.safetensors"; then
                compared=$((compared + 1))
            else
                echo "FAIL: ${configs[$c]}: $dir differs from $ref"
                cmp "$ref/model.safetensors" "$dir/model.safetensors" | head -n 1
                failures=$((failures + 1))
            fi
        done
    done
done
echo "$compared models equal to their first, $failures failures"
[ "$failures" -eq 0 ] && [ "$compared" -gt 0 ]
