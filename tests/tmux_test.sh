#!/usr/bin/env bash
# tmux_test.sh QKV - qkv in a real terminal: tmux panes 80 and 60 columns wide. The progress
# bar of `qkv train` is redrawn in place many times; at the end the screen must hold it on
# exactly one line, never wrapped (a wrapped bar turns every redraw into a new line) and never
# repeated. The text of train, eval, inspect, sweep and an error is wrapped at spaces to 80
# columns, never by the terminal inside a word. Piped, train prints plain lines with no
# carriage return, and no line is wrapped. Exits 77 (ctest: skipped)
# when tmux is not installed, unless QKV_REQUIRE_TMUX=1 (CI installs it with scripts/setup.sh).
set -u
QKV=${1:?usage: tmux_test.sh path/to/qkv}
[ "$QKV" = "${QKV#/}" ] && QKV=$PWD/$QKV
if ! command -v tmux >/dev/null 2>&1; then
    if [ "${QKV_REQUIRE_TMUX:-}" = 1 ]; then echo "tmux_test: tmux is not installed"; exit 1; fi
    echo "tmux_test: tmux is not installed; skipped"
    exit 77
fi
TMP=$(mktemp -d)
SOCK="qkv-tmux-test-$$"
trap 'for w in 80 60 wrap; do tmux -L "$SOCK-$w" kill-server 2>/dev/null; done; rm -rf "$TMP"' EXIT
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

# Every command's text in an 80-column pane: lines are wrapped at spaces by qkv itself, so the
# terminal never wraps one (capture-pane -J joins what the terminal wrapped: a joined line
# longer than the pane is a line cut by the terminal, inside a word or a number).
cat >"$TMP/session.sh" <<EOF
cd "$TMP"
'$QKV' train --task induction --d-model 32 --steps 120 --threads 1 --out ind
'$QKV' eval ind
'$QKV' inspect --model ind --input "6 12 11 9 6 12 11 9 6 12 11 9 6 12 11 9" \\
    --target "_ _ _ _ 12 11 9 6 12 11 9 6 12 11 9 6"
'$QKV' train --task translate --d-model 16 --steps 20 --threads 1 --out tr --quiet
'$QKV' inspect --model tr --input "s0 s1 s2 s3 s4 s5 s6 s7 s8 s9 s10 s11 s12 s13 s14 s15"
'$QKV' sweep --grid "d-model=8,16 lr=0.001,0.003" --out sw --jobs 1 -- --task copy --seq-len 4 --vocab 8 --steps 20
'$QKV' eval --model ind --data /nonexistent/directory/with/a/rather/long/name/examples.tsv --per-example /tmp/x.jsonl
echo QKV-DONE
sleep 600
EOF

tmux -L "$SOCK-wrap" -f /dev/null new-session -d -x 80 -y 50 "bash '$TMP/session.sh'"
tmux -L "$SOCK-wrap" set-option -g history-limit 20000 >/dev/null
screen=""
for _ in $(seq 1 900); do
    screen=$(tmux -L "$SOCK-wrap" capture-pane -p -J -S - -t 0) || break
    case "$screen" in *QKV-DONE*) break ;; esac
    sleep 0.2
done
case "$screen" in *QKV-DONE*) ;; *) fail "80 columns: the commands did not finish: $screen" ;; esac
[ -n "${QKV_TMUX_SHOW:-}" ] && printf "%s\n" "$screen"
for want in "strongest heads:" "held-out example:" "probability" "loss " "decoder" \
    "sweep: 4 cells run" "qkv: "; do
    printf '%s\n' "$screen" | grep -q -- "$want" || fail "80 columns: no '$want' on the screen"
done
wide=$(printf '%s\n' "$screen" | grep -v 'step [0-9]*/120' | perl -CI -ne 'chomp; print "$_\n" if length >= 80')
[ -z "$wide" ] || fail "80 columns: lines the terminal wrapped:
$wide"
echo "tmux_test: 80 columns: train, eval, inspect, sweep and an error: $(printf '%s\n' "$screen" | wc -l) lines, none wrapped by the terminal"
# redirected, nothing is wrapped: the summary stays one line
"$QKV" train --task induction --d-model 32 --steps 120 --threads 1 --quiet >"$TMP/one.txt" 2>/dev/null
[ "$(wc -l <"$TMP/one.txt")" = 1 ] && grep -q '^induction: .* steps in ' "$TMP/one.txt" ||
    fail "redirected, the summary is not one line: $(cat "$TMP/one.txt")"

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
