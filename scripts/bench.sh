#!/usr/bin/env bash
# qkv against PyTorch on the same training step, side by side, in one run.
#   scripts/bench.sh [--seconds X] [--rounds N] [--markdown] [--threads "1 2 4"] [--simd PATH] [--no-gemm]
#                    [--config C] [--raw FILE | --from FILE]
# For each workload (tiny, medium, long, mlp: a transformer block, and grok: an epoch of the default
# modular run, every training pair as one batch, AdamW) it times qkv at each
# thread count, and PyTorch at each thread count in each form it has (eager;
# torch.nn.functional.scaled_dot_product_attention from PyTorch 2.0 on), takes each side at
# its fastest, and prints ms/step, the ratio qkv/PyTorch, GFLOP/s and step memory, under a
# header naming the machine: CPU model, cores, qkv's ISA path and the PyTorch version. The figures hold for that machine only. --markdown
# prints the table of docs/performance.md for it instead. Under the table, the ratio to PyTorch and the
# speed-up from 1 thread again, paired by round: each round's quotient of its own two times
# (which ran seconds apart, where the rounds' medians may be minutes apart on a machine
# whose speed drifts), as the median over the rounds and the lowest and highest.
#   --rounds   times each side is timed at each thread count and form, the two sides in turn
#              (default 3): each takes its median round, so that a spell of load on the
#              shared machine moves one round of one side, not the comparison
#   --threads  the thread counts to try (default 1, 2, 4, ... up to the cores, and the cores)
#   --simd     run qkv on that path (QKV_SIMD), e.g. --simd avx2 on an AVX-512 machine
#   --config   one workload only (tiny, medium, long, mlp or grok; default all of them)
#   --raw      also write every timed run to FILE, one JSON line each after "qkv " or "torch ",
#              each round after a line "round N" (every round at every thread count and
#              form: the scaling from 1 thread to all)
#   --from     time nothing: print the tables of the runs in FILE, a --raw file of this
#              machine (the header names this machine's CPU and cores)
#   --no-gemm  skip the second part: build/tests/bench_gemm (qkv's f32 matmul against
#              OpenBLAS) once per x86 path this CPU runs, QKV_SIMD forced
#   scripts/bench.sh --busy [--rounds N]
#              instead: qkv on a machine that is doing something else, beside two CPU-bound
#              processes, at the default thread count and on 1 thread (scripts/bench_busy.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: scripts/bench.sh [--busy [--rounds N]] | [--seconds X] [--rounds N] [--markdown] [--threads \"1 2 4\"] [--simd PATH] [--no-gemm] [--config C] [--raw FILE | --from FILE]"
seconds=3 rounds=3 markdown=0 gemm=1 threads="" raw="" from="" config=all
while [ $# -gt 0 ]; do
    case "$1" in
        --busy) shift; exec bash scripts/bench_busy.sh "$@" ;;
        --seconds) seconds=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --markdown) markdown=1; shift ;;
        --threads) threads=$2; shift 2 ;;
        --simd) export QKV_SIMD=$2; shift 2 ;;
        --no-gemm) gemm=0; shift ;;
        --config) config=$2; shift 2 ;;
        --raw) raw=$2; shift 2 ;;
        --from) from=$2; gemm=0; shift 2 ;;
        *) echo "$usage" >&2; exit 2 ;;
    esac
done
cores=$(nproc)
if [ -z "$threads" ]; then
    for ((n = 1; n < cores; n *= 2)); do threads+="$n "; done
    threads+="$cores"
fi
qkv=${QKV:-build/qkv}
if [ -z "$from" ] && [ ! -x "$qkv" ]; then
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build build -j"$cores" >/dev/null
fi
py=/usr/bin/python3
$py -c "import torch" 2>/dev/null || py=python3
forms="eager"
$py -c "import torch, sys; sys.exit(not hasattr(torch.nn.functional, 'scaled_dot_product_attention'))" \
    2>/dev/null && forms+=" sdpa"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# PyTorch's products are OpenBLAS's where it is Debian's python3-torch, and an OpenBLAS older
# than the CPU falls back to its generic SSE3 core ("Prescott": 22 GFLOP/s on 512³ on a Xeon
# of model 207, 129 with its own core). Each side is timed at its best, so PyTorch gets the
# core of the widest vectors the CPU has, as bench_gemm gives it; the header names the core.
if [ -z "$from" ] && [ -z "${OPENBLAS_CORETYPE:-}" ]; then
    blas_core=$($py -c 'import ctypes
f = ctypes.CDLL("libopenblas.so.0").openblas_get_corename
f.restype = ctypes.c_char_p
print(f().decode())' 2>/dev/null || true)
    if [ "$blas_core" = Prescott ]; then
        if grep -qw avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX
        elif grep -qw avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell
        fi
    fi
fi
if [ -n "$from" ]; then
    cp "$from" "$out"
    rounds=0 # none timed here: the file's rounds
else
    "$qkv" --version | sed 's/^/version /' >>"$out"
    if [ -n "${OPENBLAS_CORETYPE:-}" ]; then echo "blas $OPENBLAS_CORETYPE" >>"$out"; fi
fi
for ((round = 1; round <= rounds; round++)); do
    echo "round $round" >>"$out"
    for n in $threads; do # the two sides in turn at each count, so that both see the same load
        "$qkv" bench --json --peak --config "$config" --threads "$n" --seconds "$seconds" |
            sed 's/^/qkv /' >>"$out"
        for form in $forms; do
            $py scripts/bench_torch.py --config "$config" --threads "$n" --seconds "$seconds" --form "$form" |
                sed 's/^/torch /' >>"$out"
        done
    done
done
if [ -n "$raw" ]; then cp "$out" "$raw"; fi
$py - "$out" "$markdown" "$cores" "${QKV_SIMD:-}" "$rounds" <<'PY'
import json, sys, platform
path, md, cores, forced = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3]), sys.argv[4]
rounds = int(sys.argv[5])
rows, simd, round_no, blas_core = {}, "", 0, ""
for line in open(path):
    side, rest = line.rstrip("\n").split(" ", 1)
    if side == "blas":  # the OpenBLAS core PyTorch was given (OPENBLAS_CORETYPE)
        blas_core = rest
        continue
    if side == "version":
        if rest.startswith("simd: "):
            simd = rest.split()[1]
        continue
    if side == "round":
        round_no = int(rest)
        rounds = max(rounds, round_no)
        continue
    r = json.loads(rest)
    if "peak" in r:  # the FMA peak's line: each workload's row carries its share
        continue
    r["round"] = round_no
    rows.setdefault((side, r["config"]), []).append(r)
    simd = simd or r.get("simd", "")
if not simd:  # a qkv that names no path: the one forced, or the default (the best this CPU runs)
    simd = forced or "default"
def medians(side, cfg):  # the median round of each thread count and form
    groups = {}
    for r in rows[(side, cfg)]:
        groups.setdefault((r["threads"], r.get("form", "")), []).append(r)
    return [sorted(g, key=lambda r: r["ms_per_step"])[len(g) // 2] for g in groups.values()]
def best(side, cfg):
    return min(medians(side, cfg), key=lambda r: r["ms_per_step"])
def scaling(cfg):  # qkv's speed-up from 1 thread to its best count
    by = {r["threads"]: r["ms_per_step"] for r in medians("qkv", cfg)}
    return by[1] / min(by.values()) if 1 in by else float("nan")
cpu, cpuflags, family, model = platform.processor() or platform.machine(), "", None, None
try:
    for l in open("/proc/cpuinfo"):
        key, _, value = l.partition(":")
        key, value = key.strip(), value.strip()
        if key == "model name" and cpu in (platform.processor(), platform.machine()):
            cpu = value
        if key == "flags" and not cpuflags:
            cpuflags = l
        if key == "cpu family" and family is None:
            family = int(value)
        if key == "model" and model is None:
            model = int(value)
except (OSError, ValueError):
    pass
def amd_core(family, model):  # AMD's family and model numbers of the Zen cores, as AMD lists them
    if family == 23:
        return "Zen 2" if model >= 0x30 else "Zen or Zen+"
    if family == 25:
        if 0x10 <= model <= 0x1F or 0x60 <= model <= 0x7F or 0xA0 <= model <= 0xAF:
            return "Zen 4"
        return "Zen 3"
    if family == 26:
        return "Zen 5"
    return None
if family is not None and model is not None:  # the microarchitecture, which "AMD EPYC" does not say
    core = amd_core(family, model) if "AMD" in cpu else None
    cpu += f" ({core + ', ' if core else ''}family {family}, model {model})"
# the workloads timed (a --config run, or a file from before mlp, has fewer), in this order
configs = [c for c in ("tiny", "medium", "long", "mlp", "grok") if ("qkv", c) in rows]
have_torch = all(("torch", c) in rows for c in configs) and bool(configs)
torch_version = rows[("torch", configs[0])][0]["torch"] if have_torch else "not installed"
forms = sorted({r.get("form", "eager") for (side, _), rs in rows.items() if side == "torch" for r in rs})
header = (f"{cpu}, {cores} cores ({platform.machine()}); qkv {simd} path"
          f"{' (QKV_SIMD)' if forced else ''}; PyTorch {torch_version}"
          f"{' (' + ', '.join(forms) + ')' if forms else ''}"
          f"{'; OpenBLAS core ' + blas_core if blas_core else ''}; threads tried: "
          + " ".join(sorted({str(r['threads']) for rs in rows.values() for r in rs}, key=int))
          + f"; median of {rounds} rounds")
# The targets, the same on every machine and path: qkv's step at most half of PyTorch's
# (each side at its best), at least 80% of the FMA peak on as many threads for medium and
# long (65% for tiny), 1 -> 2 threads at least 1.85x; and long's step memory at most 0.25x
# PyTorch's. mlp, the transformer block (its products are the largest), is held to medium's.
# grok, an epoch of the default modular run, to a tenth of PyTorch's epoch and 60% of the peak
# (its FLOPs counted as the step does them: the queries, the MLP and the head at the last
# position only, in qkv and in PyTorch alike).
targets = {"tiny": 0.5, "medium": 0.5, "long": 0.5, "mlp": 0.5, "grok": 0.1}
share_targets = {"tiny": 65, "medium": 80, "long": 80, "mlp": 65, "grok": 60}
scaling_target = 1.85
if md:
    print(f"#### {header}\n")
    print("| workload | qkv ms/step | PyTorch ms/step | ratio | target | qkv GFLOP/s | share of FMA peak | target | qkv step memory | PyTorch step memory | memory ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
else:
    print(f"machine: {header}")
    print(f"{'workload':8} {'qkv ms':>9} {'thr':>3} {'torch ms':>9} {'thr':>3} {'form':>5} {'ratio':>6} {'target':>6} {'GFLOP/s':>8} {'peak':>5} {'qkv MB':>7} {'torch MB':>8} {'mem':>5} {'1→best':>6}")
ok = bool(configs)
for cfg in configs:
    q = best("qkv", cfg)
    if not have_torch:
        print(f"{cfg:8} {q['ms_per_step']:9.3f} {q['threads']:3d}   (no PyTorch to compare with)")
        ok = False
        continue
    t = best("torch", cfg)
    ratio = q["ms_per_step"] / t["ms_per_step"]
    mem = q["step_mem_mb"] / t["step_mem_mb"] if t["step_mem_mb"] > 0 else float("nan")
    share = 100 * q.get("peak_share", float("nan"))  # of the f32 FMA peak on as many threads
    met = (ratio <= targets[cfg] and share >= share_targets[cfg]
           and (cfg != "long" or mem <= 0.25) and not scaling(cfg) < scaling_target)
    ok = ok and met
    form = t.get("form", "eager")
    if md:
        print(f"| {cfg} | {q['ms_per_step']:.3f} ({q['threads']} thr) | {t['ms_per_step']:.3f} ({t['threads']} thr, {form}) | {ratio:.2f}x | ≤ {targets[cfg]}x | {q['gflops']:.1f} | {share:.0f}% | ≥ {share_targets[cfg]}% | {q['step_mem_mb']:.1f} MB | {t['step_mem_mb']:.1f} MB | {mem:.2f}x |")
    else:
        print(f"{cfg:8} {q['ms_per_step']:9.3f} {q['threads']:3d} {t['ms_per_step']:9.3f} {t['threads']:3d} {form:>5} {ratio:6.2f} {targets[cfg]:6.2f} {q['gflops']:8.1f} {share:4.0f}% {q['step_mem_mb']:7.1f} {t['step_mem_mb']:8.1f} {mem:5.2f} {scaling(cfg):6.2f}")
print(("\n" if md else "") + "qkv from 1 thread to its best: "
      + ", ".join(f"{cfg} {scaling(cfg):.2f}x" for cfg in configs)
      + f" (target ≥ {scaling_target}x); targets {'met' if ok else 'NOT met'}")
# The same figures paired by round: within a round the two sides, and qkv's thread counts,
# run seconds apart, where the rounds' medians may be minutes apart, so a machine whose speed
# drifts moves both terms of a round's quotient alike. Each quotient's median over the
# rounds, and its lowest and highest.
def per_round(side, cfg):  # round -> that side's fastest ms/step in the round
    by = {}
    for r in rows.get((side, cfg), []):
        by[r["round"]] = min(by.get(r["round"], float("inf")), r["ms_per_step"])
    return by
def spread(values):
    v = sorted(values)
    if not v:
        return "-"
    median = (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2
    return f"{median:.2f}x ({v[0]:.2f}-{v[-1]:.2f})"
def paired(quotient):
    return ", ".join(f"{cfg} {spread(quotient(cfg))}" for cfg in configs)
def torch_ratios(cfg):  # qkv over PyTorch, each side at its fastest in the round
    q, t = per_round("qkv", cfg), per_round("torch", cfg)
    return [q[k] / t[k] for k in q if k in t]
def round_scaling(cfg):  # qkv's 1 thread over its fastest count in the round
    one = {r["round"]: r["ms_per_step"] for r in rows.get(("qkv", cfg), []) if r["threads"] == 1}
    fastest = per_round("qkv", cfg)
    return [one[k] / fastest[k] for k in one if k in fastest]
if have_torch and round_no:
    print(("\n" if md else "") + "paired by round, median (lowest-highest): qkv/PyTorch " + paired(torch_ratios))
if round_no and configs and 1 in {r["threads"] for r in rows.get(("qkv", configs[0]), [])}:
    print(("\n" if md else "") + "paired by round, median (lowest-highest): 1 thread to best " + paired(round_scaling))
# The scaling: each side's median ms/step at each thread count (PyTorch's faster form at each),
# and its speed-up over its own 1-thread step.
counts = sorted({r["threads"] for r in medians("qkv", configs[0])}) if configs else []
if len(counts) > 1:
    def by_threads(side, cfg):
        by = {}
        for r in medians(side, cfg):
            by[r["threads"]] = min(by.get(r["threads"], float("inf")), r["ms_per_step"])
        return by
    def cell(by, n):
        if n not in by:
            return "-"
        return f"{by[n]:.3f} ({by[1] / by[n]:.2f}x)" if 1 in by else f"{by[n]:.3f}"
    sides = [("qkv", "qkv")] + ([("torch", "PyTorch")] if have_torch else [])
    if md:
        print("\n| ms/step (speed-up over 1 thread) | " + " | ".join(f"{n} thr" for n in counts) + " |")
        print("|---|" + "---|" * len(counts))
    else:
        print("\nms/step by thread count (speed-up over 1 thread):")
    for cfg in configs:
        for side, name in sides:
            by = by_threads(side, cfg)
            if md:
                print(f"| {cfg}, {name} | " + " | ".join(cell(by, n) for n in counts) + " |")
            else:
                print(f"{cfg + ' ' + name:14} " + " ".join(f"{cell(by, n):>16}" for n in counts))
PY
[ "$gemm" = 1 ] || exit 0
bench_gemm=$(dirname "$qkv")/tests/bench_gemm
if [ ! -x "$bench_gemm" ]; then
    echo; echo "bench_gemm: not built ($bench_gemm; it needs libopenblas-dev): skipped"
    exit 0
fi
# Each x86 path this CPU runs; the plain-C one is "scalar" ("portable" in older kernels).
paths=()
if grep -q '"scalar"' src/kernels/*.c; then paths+=(scalar); else paths+=(portable); fi
if [ "$(uname -m)" = x86_64 ]; then
    flags=$(grep -m1 '^flags' /proc/cpuinfo)
    [[ " $flags " == *" avx2 "* && " $flags " == *" fma "* ]] && paths+=(avx2)
    [[ " $flags " == *" avx512f "* ]] && paths+=(avx512)
fi
for p in "${paths[@]}"; do
    echo
    echo "bench_gemm, QKV_SIMD=$p, 1 thread:"
    QKV_SIMD=$p "$bench_gemm" --threads 1
done
