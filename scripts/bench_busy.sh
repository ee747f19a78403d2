#!/usr/bin/env bash
# qkv on a machine that is doing something else: `scripts/bench.sh --busy [--rounds N]`.
# Two workloads, a training (train --task reverse, its defaults) and an analysis (patch
# --corrupt-from resample --site k --over key-position on an induction model this script
# trains first), each run three ways:
#   default   the default thread count (every core), as a user runs qkv
#   1 thread  --threads 1
#   every core  --threads set to the core count: how qkv ran by default before its default
#             left out the cores other programs keep busy
# first on the machine as it is ("quiet": nothing of this script's beside it), then beside
# two CPU-bound processes (sh -c 'while :; do :; done', ended at the end). A round runs the
# three in turn, so that all three see the same load; each time is the median of the rounds'
# wall seconds, and each ratio the median (lowest-highest) of the rounds' own quotients.
# Beside the busy processes the every-core form runs in the first round only (a run there
# takes several times the default's).
# The load average (uptime) before each part is printed with it: on a machine others use, a
# "quiet" part is only as quiet as they leave it.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=5
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds=$2; shift 2 ;;
        *) echo "usage: scripts/bench.sh --busy [--rounds N]" >&2; exit 2 ;;
    esac
done
qkv=${QKV:-build/qkv}
if [ ! -x "$qkv" ]; then
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build build -j"$(nproc)" >/dev/null
fi
qkv=$(cd "$(dirname "$qkv")" && pwd)/$(basename "$qkv")
work=$(mktemp -d)
hogs=()
stop_hogs() {
    for pid in "${hogs[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${hogs[@]}"; do wait "$pid" 2>/dev/null || true; done
    hogs=()
}
trap 'stop_hogs; rm -rf "$work"' EXIT
# the user's own wait or thread settings would change what is measured
unset OMP_WAIT_POLICY GOMP_SPINCOUNT KMP_BLOCKTIME OMP_NUM_THREADS SLURM_CPUS_PER_TASK
"$qkv" train --task induction --threads 1 --quiet --out "$work/induction" >/dev/null

# A workload: $1 the options after the command ("" or "--threads 1"), then the command that
# runs qkv (its path, after env and variables where the form sets any).
train() {
    local opts=$1
    shift
    rm -rf "$work/reverse"
    "$@" train --task reverse --quiet --out "$work/reverse" $opts >/dev/null
}
analysis() {
    local opts=$1
    shift
    "$@" patch "$work/induction" --corrupt-from resample --site k --over key-position $opts >/dev/null
}
# One timed run: "<part> <workload> <form> <round> <start> <end>" into the results.
timed() {
    local part=$1 workload=$2 form=$3 round=$4
    shift 4
    local t0=$EPOCHREALTIME
    "$workload" "$@"
    echo "$part $workload $form $round $t0 $EPOCHREALTIME" >>"$work/times"
}
measure() { # part: every workload, every form, in rounds
    local part=$1
    echo "load $part $(uptime | sed 's/.*load average: //')" >>"$work/times"
    for ((r = 1; r <= rounds; r++)); do
        for workload in train analysis; do
            timed "$part" "$workload" default "$r" "" "$qkv"
            timed "$part" "$workload" one "$r" "--threads 1" "$qkv"
            # beside the busy processes an every-core run takes several times as long: one round
            [ "$part" = busy ] && [ "$r" -gt 1 ] && continue
            timed "$part" "$workload" every "$r" "--threads $(nproc)" "$qkv"
        done
    done
}
measure quiet
for _ in 1 2; do
    sh -c 'while :; do :; done' &
    hogs+=($!)
done
sleep 1 # the load average catches up slowly; the hogs themselves run at once
measure busy
stop_hogs
python3 - "$work/times" "$rounds" "$(nproc)" "$("$qkv" --version | sed -n 's/^simd: \([^ ]*\).*/\1/p')" <<'PY'
import sys
path, rounds, cores, simd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
times, load = {}, {}
for line in open(path):
    f = line.split()
    if f[0] == "load":
        load[f[1]] = " ".join(f[2:])
        continue
    part, workload, form, rnd, start, end = f
    times.setdefault((part, workload), {}).setdefault(form, {})[int(rnd)] = float(end) - float(start)
def median(v):
    v = sorted(v)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2
def ratio(a, b):  # the rounds' own quotients a/b: median (lowest-highest)
    q = sorted(a[r] / b[r] for r in a if r in b)
    return f"{median(q):.2f}x ({q[0]:.2f}-{q[-1]:.2f})"
info = {}
for l in open("/proc/cpuinfo"):
    key, _, value = l.partition(":")
    info.setdefault(key.strip(), value.strip())
cpu = f"{info.get('model name', '')} (family {info.get('cpu family', '?')}, model {info.get('model', '?')})"
print(f"#### {cpu}, {cores} cores; qkv {simd} path; median of {rounds} rounds "
      "(every core beside the busy processes: the first round's)\n")
print("| workload | machine | default threads | --threads 1 | default / 1 thread | every core | every core / default |")
print("|---|---|---|---|---|---|---|")
names = {"train": "train --task reverse", "analysis": "patch --corrupt-from resample"}
parts = {"quiet": "quiet", "busy": "2 busy processes"}
for part in ("quiet", "busy"):
    for workload in ("train", "analysis"):
        t = times[(part, workload)]
        d, o, s = t["default"], t["one"], t["every"]
        print(f"| {names[workload]} | {parts[part]} | {median(d.values()):.2f} s | "
              f"{median(o.values()):.2f} s | {ratio(d, o)} | {median(s.values()):.2f} s | {ratio(s, d)} |")
print()
for part in ("quiet", "busy"):
    print(f"load average before the {parts[part]} part (1, 5, 15 min): {load[part]}")
PY
