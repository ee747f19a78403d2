#!/bin/sh
# bench_report_test.sh - scripts/bench.sh's report, from a --raw file of two rounds timed on a
# 2-core Zen 3 (tests/fixtures/bench_raw.txt): nothing is timed here.
# usage: bench_report_test.sh SOURCE_DIR
#   1. the table takes each side's median round at each thread count, its fastest count;
#   2. the lines paired by round give each round's own quotient (qkv over PyTorch, 1 thread
#      over the round's best), their median and their range, as worked out by hand from the
#      file: tiny's rounds 0.1370 and 0.1367 of PyTorch, long's 0.8193 and 0.5486; tiny from
#      1 thread 1.3548× and 1.9095×;
#   3. an unknown option is refused with the usage and exit code 2.
set -eu
src=$1
if ! command -v python3 >/dev/null 2>&1 && [ ! -x /usr/bin/python3 ]; then
    echo "bench_report_test: skipped: no python3 to run the report"
    exit 77
fi
out=$(mktemp "${TMPDIR:-/tmp}/qkv-bench-report.XXXXXX")
trap 'rm -f "$out"' EXIT
status=0
"$src/scripts/bench.sh" --from "$src/tests/fixtures/bench_raw.txt" --markdown >"$out"
expect() {
    grep -qF -- "$1" "$out" || { echo "bench_report_test: no line with: $1" >&2; status=1; }
}
expect "median of 2 rounds"
expect "| tiny | 0.726 (2 thr) | 6.185 (1 thr, eager) | 0.12x |"
expect "| long | 51.642 (2 thr) | 63.028 (1 thr, eager) | 0.82x |"
expect "qkv/PyTorch tiny 0.14x (0.14-0.14), medium 0.44x (0.39-0.50), long 0.68x (0.55-0.82)"
expect "1 thread to best tiny 1.63x (1.35-1.91), medium 1.55x (1.46-1.64), long 1.69x (1.43-1.95)"
if "$src/scripts/bench.sh" --no-such-option >"$out" 2>&1; then
    echo "bench_report_test: an unknown option was accepted" >&2
    status=1
else
    code=$?
    [ "$code" -eq 2 ] || { echo "bench_report_test: an unknown option exited $code, not 2" >&2; status=1; }
    grep -q "^usage: scripts/bench.sh" "$out" || { echo "bench_report_test: no usage line" >&2; status=1; }
fi
[ "$status" -eq 0 ] && echo "bench_report_test: the table and the lines paired by round are the file's"
exit "$status"
