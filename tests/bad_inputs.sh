#!/usr/bin/env bash
# bad_inputs.sh - the table of bad inputs (tests/bad_inputs.tsv, listed in docs/errors.md).
#
# usage: tests/bad_inputs.sh QKV [--show]        run every case (--show: print what each does)
#        tests/bad_inputs.sh --markdown           print the table as docs/errors.md lists it
#        tests/bad_inputs.sh --check-doc DOC      DOC's table is the one --markdown prints
#
# Every case runs `qkv ARGS` in a directory of fixtures (a small trained model in run/, the
# broken files of tests/fuzz/corpus/safetensors/ in broken/, an empty directory, two bad
# config files) and must:
#   - exit with the documented code, which is below 128 (no crash, no signal);
#   - print exactly one line on stderr, "qkv: ...", holding the expected fragment, and
#     nothing on stdout;
#   - leave no sanitizer report (ASan, UBSan, LeakSanitizer) behind;
#   - create or change no file: the fixture directory's listing and checksums are the same
#     after every case as before the first.
# ARGS is the table's command line, split as bash would ($'...' quotes control characters;
# $LONG is a 1100-character path). QKV may be a wrapper (valgrind ...) as long as it exits
# with qkv's status.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
TSV=${BAD_INPUTS_TSV:-$HERE/bad_inputs.tsv}

# The cases: "id<TAB>command<TAB>exit<TAB>fragment", skipping comments and blank lines.
cases() { grep -v -e '^#' -e '^[[:space:]]*$' "$TSV"; }

markdown() {
    echo "| case | command line | exit | message contains |"
    echo "|---|---|---|---|"
    cases | while IFS=$'\t' read -r id cmd code frag; do
        printf '| %s | `qkv %s` | %s | %s |\n' "$id" "$cmd" "$code" "$frag"
    done
}

case "${1:-}" in
--markdown) markdown; exit 0 ;;
--check-doc)
    doc=${2:?usage: bad_inputs.sh --check-doc docs/errors.md}
    want=$(markdown)
    got=$(sed -n '/<!-- bad_inputs:begin -->/,/<!-- bad_inputs:end -->/p' "$doc" | sed '1d;$d')
    if [ "$want" != "$got" ]; then
        echo "bad_inputs: the table in $doc is not tests/bad_inputs.tsv; regenerate it with" >&2
        echo "  tests/bad_inputs.sh --markdown   (between the bad_inputs:begin/end markers)" >&2
        diff <(echo "$want") <(echo "$got") >&2
        exit 1
    fi
    echo "bad_inputs: $doc lists all $(cases | wc -l) cases"
    exit 0 ;;
"" | -*) echo "usage: bad_inputs.sh QKV [--show] | --markdown | --check-doc DOC" >&2; exit 2 ;;
esac

QKV=$1
SHOW=${2:-}
[ "$QKV" = "${QKV#/}" ] && [ -x "$QKV" ] && QKV=$PWD/$QKV
W=$(mktemp -d "${TMPDIR:-/tmp}/qkv_bad_inputs.XXXXXX")
O=$(mktemp -d "${TMPDIR:-/tmp}/qkv_bad_outputs.XXXXXX")
trap 'rm -rf "$W" "$O"' EXIT
cd "$W" || exit 1

# ---- fixtures ----
if ! $QKV train --task copy --seq-len 4 --vocab 8 --d-model 4 --steps 20 --quiet --out run \
    >"$O/setup.txt" 2>&1; then
    echo "bad_inputs: cannot train the fixture model:"; cat "$O/setup.txt"; exit 1
fi
mkdir broken emptydir
printf '{"dmodel": 8}\n' >config_unknown.json
printf '{"d_model": "8"}\n' >config_type.json
cp "$HERE"/fuzz/corpus/safetensors/*.safetensors broken/
LONG=$(printf 'x%.0s' $(seq 1100))
export LONG

snapshot() { # every path with its type, size and mode, and every file's checksum
    find . -mindepth 1 -printf '%y %p %s %m\n' | LC_ALL=C sort
    find . -type f -exec md5sum {} + | LC_ALL=C sort -k2
}
snapshot >"$O/before.txt"

failures=0 n=0
fail() { echo "FAIL $id: $*"; failures=$((failures + 1)); }
while IFS=$'\t' read -r id cmd want frag; do
    n=$((n + 1))
    eval "args=($cmd)"
    $QKV "${args[@]}" >"$O/out.txt" 2>"$O/err.txt" </dev/null
    rc=$?
    if [ -n "$SHOW" ]; then
        printf '%s\t%s\t%s\t%s\n' "$id" "$rc" "$(head -c 300 "$O/err.txt" | tr '\n' '|')" "$(head -c 100 "$O/out.txt")"
        continue
    fi
    lines=$(wc -l <"$O/err.txt")
    msg=$(head -n 1 "$O/err.txt")
    if [ "$rc" -ge 128 ]; then fail "crashed (exit $rc): qkv $cmd"
    elif [ "$rc" != "$want" ]; then fail "exit $rc, expected $want: qkv $cmd: $(head -c 300 "$O/err.txt")"
    elif grep -Eq 'Sanitizer|runtime error:|==[0-9]+==' "$O/err.txt"; then
        fail "sanitizer or valgrind report: $(head -c 600 "$O/err.txt")"
    elif [ "$lines" -ne 1 ]; then fail "$lines lines on stderr, expected 1: $(head -c 300 "$O/err.txt")"
    elif [ "${msg#qkv: }" = "$msg" ]; then fail "stderr does not start with 'qkv: ': $msg"
    elif ! grep -Fq -- "$frag" "$O/err.txt"; then fail "message '$msg' lacks '$frag'"
    elif [ -s "$O/out.txt" ]; then fail "printed on stdout: $(head -c 200 "$O/out.txt")"
    fi
    snapshot >"$O/after.txt"
    if ! cmp -s "$O/before.txt" "$O/after.txt"; then
        fail "files were created or changed: $(diff "$O/before.txt" "$O/after.txt" | head -n 6 | tr '\n' ' ')"
        snapshot >"$O/before.txt" # report each change once
    fi
done < <(cases)
[ -n "$SHOW" ] && exit 0
echo "bad_inputs: $n cases, $failures failed"
[ "$n" -ge 40 ] || { echo "bad_inputs: fewer than 40 cases"; exit 1; }
[ "$failures" -eq 0 ]
