#!/usr/bin/env bash
# Installs what qkv needs on a fresh Debian machine (run as root, or through sudo).
#   scripts/setup.sh          what building, running and plotting need: a C11 compiler (gcc, whose
#                             libgomp gives OpenMP), CMake, pkg-config, cJSON, gnuplot, and
#                             python3 with numpy for the Python package
#   scripts/setup.sh --test   that, and what the tests need besides (scripts/test.sh, .ci/run)
set -euo pipefail
with_tests=0
case "${1:-}" in
    "") ;;
    --test) with_tests=1 ;;
    *) echo "usage: scripts/setup.sh [--test]" >&2; exit 2 ;;
esac
if [ "$(id -u)" -ne 0 ]; then
    exec sudo bash "$0" "$@" # apt-get needs root
fi
export DEBIAN_FRONTEND=noninteractive
# liblapack-dev: the eigenvalues of qkv circuits (src/model/circuits.c); python3-numpy: the
# Python package (python/qkv, docs/python.md), which reaches libqkv through ctypes
packages=(build-essential cmake pkg-config libcjson-dev liblapack-dev gnuplot-nox python3-numpy)
if [ "$with_tests" = 1 ]; then
    # arm64 packages too: .ci/run cross-compiles for aarch64 (cmake/toolchain-aarch64-linux-gnu.cmake)
    dpkg --add-architecture arm64
    # check: the Check suites; libsimde-dev: CI's AVX-512 path emulated on any x86-64 CPU
    # (-DQKV_SIMD_EMULATE=ON); groff-base, man-db: the man page test; parallel: the shell tests;
    # chromium, chromium-driver, tmux: browser_test and tmux_test; python3-*: the PyTorch oracle;
    # libopenblas-dev: the GEMM comparison; clang, libclang-rt-dev (libFuzzer, sanitizer
    # runtimes), libomp-dev, valgrind: CI's clang, fuzz and memcheck stages; the last line: the
    # aarch64 build (the cross compiler with its libgomp, qemu-user to run its tests, and the
    # arm64 builds of the libraries qkv links, beside amd64's: both are Multi-Arch: same)
    packages+=(git check libsimde-dev groff-base man-db parallel
        chromium chromium-driver tmux
        python3 python3-numpy python3-torch
        libopenblas-dev
        clang libclang-rt-dev libomp-dev valgrind
        gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user check:arm64 libcjson-dev:arm64
        liblapack-dev:arm64)
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
if [ "$with_tests" = 1 ]; then
    echo "setup: done (build, plots and tests); next: bash scripts/test.sh"
else
    echo "setup: done (build and plots); next: bash scripts/demo.sh"
fi
