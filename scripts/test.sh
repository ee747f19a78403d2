#!/usr/bin/env bash
# Builds qkv and runs every test. Usage: scripts/test.sh [BUILD_DIR] [extra cmake options]
#   scripts/test.sh                               normal build in build/
#   scripts/test.sh build-asan -DQKV_SANITIZE=ON  AddressSanitizer + UBSan build
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
# QKV_BUILD_TESTS=ON: scripts/demo.sh may have configured the same directory without them
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DQKV_BUILD_TESTS=ON "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
count=$(ctest --test-dir "$build" -N | sed -n 's/^Total Tests: //p')
if ! ctest --test-dir "$build" --output-on-failure -j"${CTEST_PARALLEL_LEVEL:-2}"; then
    # ctest lists the failures above; this line says so at the end, as the success line does
    failed=$(sed -n 's/^[0-9]*:\(.*\)/\1/p' "$build/Testing/Temporary/LastTestsFailed.log" 2>/dev/null |
             tr '\n' ' ' || true)
    echo "test: FAILED: ${failed:-some} of $count tests in $build (ctest --test-dir $build --rerun-failed --output-on-failure)" >&2
    exit 1
fi
echo "test: all $count tests passed in $build (Check suites, CLI, plots, browser, kill, oracles)"
