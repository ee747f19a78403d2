#!/usr/bin/env bash
# Builds qkv and runs its main job: train toy attention models and plot what they learned.
set -euo pipefail
cd "$(dirname "$0")/.."
# the tests are not built: they need Check and more (scripts/setup.sh --test, scripts/test.sh)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DQKV_BUILD_TESTS=OFF >/dev/null
cmake --build build -j"$(nproc)"
for task in copy reverse; do
    # --snapshot-every: the attention every 20 steps, for the animation and the page's slider;
    # --force: a second demo replaces the first one's runs
    ./build/qkv train --task "$task" --snapshot-every 20 --out "runs/$task" --plot --force
    ./build/qkv plot "runs/$task" --format html
done
# the first lines of one held-out input's inspection; the whole text goes to a file beside the runs
# (a pipe into head would end qkv with SIGPIPE, and the script with it under pipefail)
./build/qkv inspect --model runs/reverse --input "1 2 3 4 5 6 7 8" --target "8 7 6 5 4 3 2 1" \
    >runs/reverse_inspect.txt
head -n 7 runs/reverse_inspect.txt
echo "demo: models, metrics, attention maps and plots are in runs/copy and runs/reverse;"
echo "      open runs/reverse/plots/attention.html in a browser"
