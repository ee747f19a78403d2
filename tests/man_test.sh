#!/bin/sh
# man_test.sh - docs/qkv.1 covers the tool and renders.
# usage: man_test.sh QKV_BINARY QKV_1
#   1. every command of `qkv --help` has a section, and every --option that `qkv --help` and
#      `qkv COMMAND --help` print appears in the page;
#   2. groff formats it without a warning (skipped without groff), and man renders it (skipped
#      without man);
#   3. its DESCRIPTION lists the tasks that `qkv train --help` lists, in the same order;
#   4. its generated parts (the SYNOPSIS, every command's list of options) are what
#      scripts/man_page.sh makes from this qkv's option tables now, for every command.
set -eu
qkv=$1 page=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/qkv-man.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
status=0

# The page's source without troff escapes before '-' (\- and \(em style dashes stay dashes).
sed -e 's/\\-/-/g' "$page" >"$tmp/page.txt"

"$qkv" --help >"$tmp/help.txt"
commands=$(sed -n '/^commands:/,/^$/p' "$tmp/help.txt" | awk 'NF >= 2 && $1 != "commands:" { print $1 }')
[ -n "$commands" ] || { echo "man_test: no commands in qkv --help" >&2; exit 1; }
for opt in $(grep -o -- '--[a-z][a-z0-9-]*' "$tmp/help.txt" | sort -u); do
    grep -q -- "$opt" "$tmp/page.txt" || { echo "man_test: qkv $opt is not in $page" >&2; status=1; }
done
n=0
for cmd in $commands; do
    grep -q "^\.SS .*qkv $cmd" "$tmp/page.txt" ||
        { echo "man_test: no .SS section for qkv $cmd in $page" >&2; status=1; }
    "$qkv" "$cmd" --help >"$tmp/cmd.txt"
    for opt in $(grep -o -- '--[a-z][a-z0-9-]*' "$tmp/cmd.txt" | sort -u); do
        n=$((n + 1))
        grep -q -- "$opt" "$tmp/page.txt" ||
            { echo "man_test: qkv $cmd $opt is not in $page" >&2; status=1; }
    done
done

# 3. the DESCRIPTION's list of tasks is the one `qkv train --help` gives for --task
"$qkv" train --help | tr -s ' \n' '  ' >"$tmp/train.txt"
tasks=$(sed -n 's/.*the task (default [a-z]*): \([^;]*\);.*/\1/p' "$tmp/train.txt" |
    sed -e 's/,/ /g' -e 's/ or / /g')
[ -n "$tasks" ] || { echo "man_test: no task list in qkv train --help" >&2; status=1; }
described=$(sed -n '/^\.SH DESCRIPTION/,/^\.PP/p' "$tmp/page.txt" | tr -s ' \n' '  ' |
    sed -n 's/.*on toy tasks (\([^)]*\)).*/\1/p' | sed -e 's/,/ /g' -e 's/ or / /g')
if [ "$(echo $tasks)" != "$(echo $described)" ]; then
    echo "man_test: the DESCRIPTION of $page lists the tasks '$(echo $described)'," \
        "qkv train --help '$(echo $tasks)'" >&2
    status=1
fi

# 4. the generated parts, made again from this binary's tables (bash runs the script)
if command -v bash >/dev/null 2>&1; then
    QKV=$qkv PAGE=$page bash "$(dirname "$0")/../scripts/man_page.sh" --check >"$tmp/gen.txt" 2>&1 ||
        { cat "$tmp/gen.txt" >&2; status=1; }
else
    echo "man_test: bash not found, the generated parts not checked"
fi

if command -v groff >/dev/null 2>&1; then
    groff -man -Tutf8 -ww -z "$page" 2>"$tmp/groff.txt" || status=1
    if [ -s "$tmp/groff.txt" ]; then
        echo "man_test: groff warns about $page:" >&2
        cat "$tmp/groff.txt" >&2
        status=1
    fi
else
    echo "man_test: groff not found, formatting not checked"
fi
if command -v man >/dev/null 2>&1; then
    MANWIDTH=80 man -l "$page" >"$tmp/man.txt" 2>"$tmp/man-err.txt" || status=1
    grep -q "qkv" "$tmp/man.txt" || { echo "man_test: man -l $page rendered nothing" >&2; cat "$tmp/man-err.txt" >&2; status=1; }
fi
[ $status -eq 0 ] && echo "man_test: ok, $(echo "$commands" | wc -w) commands and $n command options in $page"
exit $status
