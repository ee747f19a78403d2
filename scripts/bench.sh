#!/usr/bin/env bash
# qkv against PyTorch on the same training step, side by side, in one run.
#   scripts/bench.sh [--seconds X] [--markdown]
# For each workload (tiny, medium, long) it times qkv with 1 and 2 threads and PyTorch with 1
# and 2 threads, takes each side at its fastest thread count, and prints ms/step, the ratio
# qkv/PyTorch, GFLOP/s and step memory. --markdown prints the README table instead.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=3
markdown=0
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) seconds=$2; shift 2 ;;
        --markdown) markdown=1; shift ;;
        *) echo "usage: scripts/bench.sh [--seconds X] [--markdown]" >&2; exit 2 ;;
    esac
done
qkv=${QKV:-build/qkv}
[ -x "$qkv" ] || { cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build build -j"$(nproc)" >/dev/null; }
py=/usr/bin/python3
$py -c "import torch" 2>/dev/null || py=python3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for threads in 1 2; do
    "$qkv" bench --json --threads "$threads" --seconds "$seconds" | sed 's/^/qkv /' >>"$out"
    $py scripts/bench_torch.py --threads "$threads" --seconds "$seconds" | sed 's/^/torch /' >>"$out"
done
$py - "$out" "$markdown" <<'PY'
import json, sys, platform
rows = {}
for line in open(sys.argv[1]):
    side, js = line.split(" ", 1)
    r = json.loads(js)
    rows.setdefault((side, r["config"]), []).append(r)
def best(side, cfg):
    return min(rows[(side, cfg)], key=lambda r: r["ms_per_step"])
def scaling(cfg):
    by = {r["threads"]: r["ms_per_step"] for r in rows[("qkv", cfg)]}
    return by[1] / by[2] if 1 in by and 2 in by else float("nan")
cpu = "unknown CPU"
try:
    for l in open("/proc/cpuinfo"):
        if l.startswith("model name"):
            cpu = l.split(":", 1)[1].strip(); break
except OSError:
    pass
targets = {"tiny": 0.25, "medium": 0.5, "long": 0.5}
md = sys.argv[2] == "1"
if md:
    print("| workload | qkv ms/step | PyTorch ms/step | ratio | target | qkv GFLOP/s | qkv step memory | PyTorch step memory | memory ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
else:
    print(f"{'workload':8} {'qkv ms':>9} {'thr':>3} {'torch ms':>9} {'thr':>3} {'ratio':>6} {'target':>6} {'GFLOP/s':>8} {'qkv MB':>7} {'torch MB':>8} {'mem':>5} {'1→2 thr':>7}")
ok = True
for cfg in ["tiny", "medium", "long"]:
    q, t = best("qkv", cfg), best("torch", cfg)
    ratio = q["ms_per_step"] / t["ms_per_step"]
    mem = q["step_mem_mb"] / t["step_mem_mb"] if t["step_mem_mb"] > 0 else float("nan")
    met = ratio <= targets[cfg] and (cfg != "long" or mem <= 0.25)
    ok = ok and met
    if md:
        print(f"| {cfg} | {q['ms_per_step']:.3f} ({q['threads']} thr) | {t['ms_per_step']:.3f} ({t['threads']} thr) | {ratio:.2f}x | ≤ {targets[cfg]}x | {q['gflops']:.1f} | {q['step_mem_mb']:.1f} MB | {t['step_mem_mb']:.1f} MB | {mem:.2f}x |")
    else:
        print(f"{cfg:8} {q['ms_per_step']:9.3f} {q['threads']:3d} {t['ms_per_step']:9.3f} {t['threads']:3d} {ratio:6.2f} {targets[cfg]:6.2f} {q['gflops']:8.1f} {q['step_mem_mb']:7.1f} {t['step_mem_mb']:8.1f} {mem:5.2f} {scaling(cfg):7.2f}")
print(("" if not md else "\n") + f"machine: {cpu}, {platform.machine()}, PyTorch {rows[('torch','tiny')][0]['torch']}; "
      f"qkv medium 1→2 threads speed-up {scaling('medium'):.2f}x; targets {'met' if ok else 'NOT met'}")
PY
