#!/usr/bin/env bash
# Installs what qkv needs on a fresh Debian machine (run as root, or through sudo).
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
    exec sudo bash "$0" "$@" # apt-get needs root
fi
export DEBIAN_FRONTEND=noninteractive
# arm64 packages too: .ci/run cross-compiles for aarch64 (cmake/toolchain-aarch64-linux-gnu.cmake)
dpkg --add-architecture arm64
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
    build-essential cmake pkg-config git \
    check libcjson-dev \
    gnuplot-nox groff-base man-db parallel \
    chromium chromium-driver tmux \
    python3 python3-numpy python3-torch \
    libopenblas-dev liblapack-dev \
    clang libclang-rt-dev libomp-dev valgrind \
    gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user check:arm64 libcjson-dev:arm64 \
    liblapack-dev:arm64 \
    >/dev/null
# libclang-rt-dev: libFuzzer, sanitizer runtimes; chromium, chromium-driver, tmux: browser_test
# and tmux_test; the last line: the aarch64 build (the cross compiler with its libgomp, qemu-user
# to run its tests, and the arm64 builds of the libraries qkv links, beside amd64's: both are
# Multi-Arch: same); liblapack-dev: the eigenvalues of qkv circuits (src/model/circuits.c)
echo "setup: done"
