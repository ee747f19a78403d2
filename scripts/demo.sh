#!/usr/bin/env bash
# Builds qkv and runs its main job: train toy attention models and plot what they learned.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
for task in copy reverse; do
    ./build/qkv train --task "$task" --out "runs/$task" --plot
done
echo "demo: models, metrics, attention maps and plots are in runs/copy and runs/reverse"
