#!/bin/sh
# symbols_test.sh - the shared library exports the public API and nothing else.
# usage: symbols_test.sh NM LIBQKV_SO QKV_H
#   1. every defined dynamic symbol of libqkv.so starts with qkv_ (linker-made symbols such as
#      _init, _fini, _edata, _end, __bss_start, and the instrumentation symbols of a sanitizer
#      build, are not ours and are ignored);
#   2. every function the header declares with QKV_API is exported, and every exported qkv_
#      symbol is declared there (no internal qkv_* helper leaks out).
set -eu
nm=$1 lib=$2 header=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/qkv-symbols.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

"$nm" -D --defined-only "$lib" >"$tmp/nm.txt" || { echo "symbols_test: $nm -D failed on $lib" >&2; exit 1; }
# "ADDRESS TYPE NAME[@VERSION]" -> NAME
awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }' "$tmp/nm.txt" | sort -u >"$tmp/exported.txt"
grep -v -E '^(_init|_fini|_edata|_end|__bss_start|__end__|_etext|__data_start|_DYNAMIC|_GLOBAL_OFFSET_TABLE_)$' "$tmp/exported.txt" |
    grep -v -E '^(___?asan|__odr_asan|__ubsan|__sancov|__lsan|__msan|__tsan)' >"$tmp/ours.txt" || true

status=0
if grep -v '^qkv_' "$tmp/ours.txt" >"$tmp/foreign.txt"; then
    echo "symbols_test: $lib exports symbols outside the qkv_ namespace:" >&2
    sed 's/^/  /' "$tmp/foreign.txt" >&2
    status=1
fi

# Declared: "QKV_API <return type> [*]qkv_name(" on one line.
grep -o 'QKV_API[^(]*(' "$header" | sed -n 's/.*[ *]\(qkv_[A-Za-z0-9_]*\)($/\1/p' | sort -u >"$tmp/declared.txt"
[ -s "$tmp/declared.txt" ] || { echo "symbols_test: no QKV_API functions found in $header" >&2; exit 1; }
grep '^qkv_' "$tmp/ours.txt" >"$tmp/qkv.txt" || true
if comm -23 "$tmp/declared.txt" "$tmp/qkv.txt" | grep . >"$tmp/missing.txt"; then
    echo "symbols_test: declared QKV_API in $(basename "$header") but not exported by $lib:" >&2
    sed 's/^/  /' "$tmp/missing.txt" >&2
    status=1
fi
if comm -13 "$tmp/declared.txt" "$tmp/qkv.txt" | grep . >"$tmp/extra.txt"; then
    echo "symbols_test: exported by $lib but not declared QKV_API in $(basename "$header"):" >&2
    sed 's/^/  /' "$tmp/extra.txt" >&2
    status=1
fi
[ $status -eq 0 ] && echo "symbols_test: ok, $(wc -l <"$tmp/qkv.txt") symbols exported, all qkv_ and all in $(basename "$header")"
exit $status
