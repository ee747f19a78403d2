#!/usr/bin/env bash
# slow_cpu_test.sh QKV - a CPU without AVX2 and FMA runs the plain C loops, and qkv says so:
# qkv is run under qemu-x86_64 as an x86-64 of the first generation (-cpu qemu64: SSE2, no
# AVX), where it must pick the scalar path by itself and
#   1. `qkv --version` names it and gives the reason on a "slow:" line;
#   2. `qkv bench` and a training run of 500 steps say it on stderr, first;
#   3. a short run (under 500 steps) and QKV_SIMD=scalar on this CPU say nothing of it.
# Exits 77 (skipped) without qemu-x86_64 or on another architecture.
set -u
QKV=${1:?usage: slow_cpu_test.sh path/to/qkv}
[ "$QKV" = "${QKV#/}" ] && QKV=$PWD/$QKV
[ "$(uname -m)" = x86_64 ] || { echo "slow_cpu_test: not an x86-64; skipped"; exit 77; }
command -v qemu-x86_64 >/dev/null || { echo "slow_cpu_test: no qemu-x86_64 (qemu-user); skipped"; exit 77; }
# OpenBLAS (LAPACK, for the copying scores) tells CPUs apart by their model number, which qemu
# does not emulate: it would take qemu64 for a Haswell and run AVX. Name its kernels instead.
# OMP_WAIT_POLICY=passive: the emulated threads wait asleep, beside the other tests.
old_cpu() { OMP_WAIT_POLICY=passive OPENBLAS_CORETYPE=Prescott timeout "${LIMIT:-300}" qemu-x86_64 -cpu qemu64 "$QKV" "$@"; }
W=$(mktemp -d "${TMPDIR:-/tmp}/qkv_slow_cpu.XXXXXX")
trap 'rm -rf "$W"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

old_cpu --version >"$W/version.txt" 2>&1 || fail "--version under qemu64: $(cat "$W/version.txt")"
grep -q '^simd: scalar (the best this CPU runs' "$W/version.txt" &&
    grep -q '^slow: this CPU has no AVX2 with FMA' "$W/version.txt" ||
    fail "--version does not say why it is slow: $(cat "$W/version.txt")"
# (the note comes before the first step: the run is stopped after 3 s)
LIMIT=3 old_cpu train --task copy --seq-len 4 --vocab 8 --d-model 8 --steps 500 --threads 1 \
    --quiet >"$W/out.txt" 2>"$W/err.txt"
head -n 1 "$W/err.txt" | grep -q '^note: this CPU has no AVX2 with FMA' ||
    fail "a 500-step run does not say it first: $(head -c 300 "$W/err.txt")"
old_cpu bench --config tiny --repeat 1 >"$W/out.txt" 2>"$W/err.txt" || fail "bench under qemu64: $(cat "$W/err.txt")"
grep -q '^note: this CPU has no AVX2 with FMA' "$W/err.txt" || fail "bench does not say it: $(cat "$W/err.txt")"
old_cpu train --task copy --seq-len 4 --vocab 8 --d-model 8 --steps 20 --threads 1 --quiet \
    >"$W/out.txt" 2>"$W/err.txt"
grep -q 'no AVX2 with FMA' "$W/err.txt" && fail "a 20-step run speaks of the CPU: $(cat "$W/err.txt")"
# here, on this CPU: a SIMD path, nothing said; QKV_SIMD=scalar is named as the reason only
"$QKV" --version | grep -q '^slow:' && fail "--version on this CPU says slow: $("$QKV" --version)"
QKV_SIMD=scalar "$QKV" --version | grep -q '^slow: QKV_SIMD=scalar forces the plain C loops' ||
    fail "QKV_SIMD=scalar --version: $(QKV_SIMD=scalar "$QKV" --version)"
QKV_SIMD=scalar "$QKV" train --task copy --seq-len 4 --vocab 8 --d-model 8 --steps 500 \
    --threads 1 --quiet 2>"$W/err.txt" >/dev/null
grep -q '^note:' "$W/err.txt" && fail "QKV_SIMD=scalar: train speaks of it: $(cat "$W/err.txt")"
echo "slow_cpu_test: $failures failures"
[ "$failures" = 0 ]
