#!/usr/bin/env bash
# tmux_test.sh QKV - the progress bar of `qkv train` in a real terminal: tmux panes 80 and 60
# columns wide. The bar is redrawn in place many times; at the end the screen must hold it on
# exactly one line, never wrapped (a wrapped bar turns every redraw into a new line) and never
# repeated. Piped, train prints plain lines with no carriage return. Exits 77 (ctest: skipped)
# when tmux is not installed, unless QKV_REQUIRE_TMUX=1 (CI installs it with scripts/setup.sh).
set -u
QKV=${1:?usage: tmux_test.sh path/to/qkv}
if ! command -v tmux >/dev/null 2>&1; then
    if [ "${QKV_REQUIRE_TMUX:-}" = 1 ]; then echo "tmux_test: tmux is not installed"; exit 1; fi
    echo "tmux_test: tmux is not installed; skipped"
    exit 77
fi
TMP=$(mktemp -d)
SOCK="qkv-tmux-test-$$"
trap 'for w in 80 60; do tmux -L "$SOCK-$w" kill-server 2>/dev/null; done; rm -rf "$TMP"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# a run long enough for dozens of redraws (one every 0.1 s)
args="train --task copy --d-model 16 --steps 2500 --threads 1"
for width in 80 60; do
    tmux -L "$SOCK-$width" -f /dev/null new-session -d -x "$width" -y 24 \
        "'$QKV' $args; echo QKV-EXIT \$?; sleep 600"
    screen=""
    for _ in $(seq 1 600); do
        screen=$(tmux -L "$SOCK-$width" capture-pane -p -J -t 0) || break
        case "$screen" in *QKV-EXIT*) break ;; esac
        sleep 0.2
    done
    case "$screen" in
    *"QKV-EXIT 0"*) ;;
    *) fail "$width columns: train did not finish with exit 0: $screen"; continue ;;
    esac
    # -J joins wrapped lines: a bar that wrapped is one joined line longer than the pane
    bars=$(printf '%s\n' "$screen" | grep -c 'step [0-9]*/2500')
    [ "$bars" = 1 ] || fail "$width columns: $bars lines hold the bar (a wrapped or repeated bar):
$screen"
    longest=$(printf '%s\n' "$screen" | grep 'step [0-9]*/2500' | awk '{ print length($0) }' | sort -n | tail -n 1)
    [ "${longest:-0}" -lt "$width" ] || fail "$width columns: the bar is $longest characters wide"
    printf '%s\n' "$screen" | grep -q 'step 2500/2500' || fail "$width columns: the bar does not end at 2500/2500"
    echo "tmux_test: $width columns: one bar line, $longest characters"
done

# piped: plain lines, no carriage returns, no escape sequences
"$QKV" train --task copy --d-model 16 --steps 200 --threads 1 >"$TMP/piped.txt"
grep -q $'\r' "$TMP/piped.txt" && fail "piped output holds a carriage return"
grep -q $'\033' "$TMP/piped.txt" && fail "piped output holds an escape sequence"
grep -q '^step 200/200 ' "$TMP/piped.txt" || fail "piped output has no plain log line: $(cat "$TMP/piped.txt")"

if [ "$fails" -gt 0 ]; then
    echo "tmux_test: $fails failures"
    exit 1
fi
echo "tmux_test: ok"
