#!/usr/bin/env bash
# The README's demo command as a user runs it: scripts/demo.sh in a fresh copy of the source
# tree (no build/, no runs/), which must end with exit 0, its closing line naming the page to
# open, and the files that line names. .ci/run runs it as a stage of its own.
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the tracked and the untracked-but-not-ignored files: what a fresh clone (plus local edits) holds
(cd "$src" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -xf - -C "$tmp"
start=$SECONDS
bash "$tmp/scripts/demo.sh" >"$tmp/demo.out" 2>&1
rc=$?
elapsed=$((SECONDS - start))
fail() { echo "demo_fresh: $1"; tail -n 20 "$tmp/demo.out"; exit 1; }
[ "$rc" -eq 0 ] || fail "scripts/demo.sh ended with exit $rc, not 0"
last=$(tail -n 1 "$tmp/demo.out")
want="      open runs/reverse/plots/attention.html in a browser"
[ "$last" = "$want" ] || fail "last line is '$last', not '$want'"
for f in runs/copy/model.safetensors runs/reverse/model.safetensors runs/reverse/plots/attention.html \
    runs/copy/plots/attention.html; do
    [ -s "$tmp/$f" ] || fail "$f is missing or empty"
done
echo "demo_fresh: scripts/demo.sh ended with exit 0 and its closing line in ${elapsed} s"
