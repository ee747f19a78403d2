#!/usr/bin/env bash
# Builds qkv and runs every test. Usage: scripts/test.sh [BUILD_DIR] [extra cmake options]
#   scripts/test.sh                               normal build in build/
#   scripts/test.sh build-asan -DQKV_SANITIZE=ON  AddressSanitizer + UBSan build
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure -j2
