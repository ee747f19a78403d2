#!/usr/bin/env bash
# Installs what qkv needs on a fresh Debian machine (run as root, or through sudo).
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
    exec sudo bash "$0" "$@" # apt-get needs root
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
    build-essential cmake pkg-config git \
    check libcjson-dev \
    gnuplot-nox groff-base man-db parallel \
    chromium chromium-driver tmux \
    python3 python3-numpy python3-torch \
    libopenblas-dev \
    clang libclang-rt-dev libomp-dev valgrind >/dev/null  # libclang-rt-dev: libFuzzer, sanitizer runtimes; chromium,
                        # chromium-driver, tmux: browser_test and tmux_test
echo "setup: done"
