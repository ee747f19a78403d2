#!/usr/bin/env bash
# docs_test.sh QKV - the docs' numbers and lists against the code:
#   1. every block scripts/docs_numbers.sh makes (docs/training.md's gradcheck and task
#      tables, the induction run's head scores, docs/plots.md's precision table) equals what
#      this qkv gives now, on one thread (the same bits as on any other count);
#   2. README's table of tasks lists the tasks `qkv train --help` names, in its order;
#   3. README's short table of timings is the first machine's table of docs/performance.md
#      (where its reproducing command is), row for row.
# (The man page's commands, options and tasks: man_test.)
set -u
QKV=${1:?usage: docs_test.sh path/to/qkv}
[ "$QKV" = "${QKV#/}" ] && QKV=$PWD/$QKV
cd "$(dirname "$0")/.." || exit 1
PY=${QKV_PYTHON:-}
if [ -z "$PY" ]; then
    if [ -x /usr/bin/python3 ]; then PY=/usr/bin/python3; else PY=$(command -v python3 || true); fi
fi
[ -n "$PY" ] || { echo "docs_test: no python3"; exit 1; }
status=0
QKV=$QKV QKV_PYTHON=$PY QKV_TRAIN_OPTS="--threads 1" bash scripts/docs_numbers.sh --check || status=1

tasks=$("$QKV" train --help | tr -s ' \n' '  ' | sed -n 's/.*the task (default [a-z]*): \([^;]*\);.*/\1/p' |
    sed -e 's/,/ /g' -e 's/ or / /g')
# README's table of tasks: the rows "| name | output at position i | ideal attention |"
listed=$(sed -n '/^| task | output at position i /,/^$/p' README.md | awk -F'|' 'NR > 2 && NF > 3 && $2 !~ /`/ { gsub(/ /, "", $2); print $2 }')
if [ -z "$tasks" ] || [ "$(echo $tasks)" != "$(echo $listed)" ]; then
    echo "docs_test: README's table of tasks lists '$(echo $listed)'; qkv train --help '$(echo $tasks)'"
    status=1
else
    echo "docs_test: README's table of tasks lists the $(echo $tasks | wc -w) tasks of qkv train --help"
fi

# README's timings: each row "| workload | qkv | PyTorch | ratio | qkv memory | PyTorch memory |"
# holds the numbers of that workload's row in docs/performance.md's first table
short=$(sed -n '/^| workload | qkv ms\/step | PyTorch ms\/step | ratio | qkv step memory/,/^$/p' README.md |
    awk -F'|' 'NR > 2 && NF > 6')
rows=0 timings=0
while IFS='|' read -r _ w q p r qm pm _; do
    [ -n "$w" ] || continue
    rows=$((rows + 1))
    full=$(sed -n '/^<!-- perf -->/,/^<!-- \/perf -->/p' docs/performance.md |
        grep -m1 "^| $(echo $w) | $(echo $q) (")
    for cell in "$p" "$r" "$qm" "$pm"; do
        case "$full" in
        *"| $(echo $cell) "*) ;;
        *) echo "docs_test: README's timing of $(echo $w) ($(echo $cell)) is not in docs/performance.md's first table"
           timings=1 ;;
        esac
    done
done <<EOF2
$short
EOF2
if [ "$rows" -ne 3 ]; then
    echo "docs_test: README has $rows rows of timings, not tiny, medium and long"; status=1
elif [ "$timings" -ne 0 ]; then
    status=1
else
    echo "docs_test: README's timings are docs/performance.md's first table's"
fi
exit $status
