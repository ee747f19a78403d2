#!/bin/sh
# make_figures.sh - trains copy, reverse, shift, lookup and induction with the default options, plots
# them, runs the softmax scaling study, and copies small images into docs/figures/.
#
#   scripts/make_figures.sh [QKV [WORK]]
#     QKV   the qkv binary (default: build/qkv)
#     WORK  where the runs go (default: runs/figures; runs/ is ignored by git)
#
# Needs gnuplot. Takes a few minutes: four default trainings (3000 steps each), two short
# runs for the animation and the gradients, one small two-layer, two-head model for the
# overview, the sweep of docs/sweeps.md (15 runs), and the small modular run of
# docs/grokking.md (14000 steps). Every figure must stay under 100 KB.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
QKV=${1:-$ROOT/build/qkv}
WORK=${2:-$ROOT/runs/figures}
FIG=$ROOT/docs/figures
command -v gnuplot >/dev/null || { echo "make_figures: gnuplot is needed" >&2; exit 1; }
[ -x "$QKV" ] || { echo "make_figures: no qkv binary at $QKV (build first)" >&2; exit 1; }
mkdir -p "$WORK" "$FIG"

# The four tasks with their default options (the default evaluations are dense in the first
# hundred steps, where the attention forms), with snapshots for the interactive page.
for task in copy reverse shift lookup; do
    echo "== $task"
    "$QKV" train --task "$task" --out "$WORK/$task" --force --plot --snapshot-every 20
    "$QKV" plot "$WORK/$task" --format html
    cp "$WORK/$task/plots/attention_layer1_head1.png" "$FIG/${task}_attention.png"
done
cp "$WORK/copy/plots/curves.png" "$FIG/copy_curves.png"
cp "$WORK/lookup/plots/curves.png" "$FIG/lookup_curves.png"
cp "$WORK/copy/plots/grads_layer1_head1.png" "$FIG/copy_grads.png"

# Induction with its default options (two layers of two heads): the head scores under the
# curves show the induction head forming.
echo "== induction"
"$QKV" train --task induction --out "$WORK/induction" --force --plot
cp "$WORK/induction/plots/curves.png" "$FIG/induction_curves.png"

# The pattern forms within a few dozen steps, so the animation comes from a short run with a
# snapshot every 2 steps (constant learning rate, no warm-up), and the gradients of a model
# still learning from a run stopped after 8 steps.
echo "== reverse, forming"
"$QKV" train --task reverse --steps 24 --schedule constant --warmup 0 --snapshot-every 2 \
    --out "$WORK/reverse_forming" --force --plot --quiet
cp "$WORK/reverse_forming/plots/snapshots.gif" "$FIG/reverse_snapshots.gif"
echo "== reverse, after 8 steps"
"$QKV" train --task reverse --steps 8 --schedule constant --warmup 0 \
    --out "$WORK/reverse_early" --force --plot --quiet
cp "$WORK/reverse_early/plots/grads_layer1_head1.png" "$FIG/reverse_grads_early.png"

# A small model with two layers of two heads, for the overview grid.
echo "== reverse, 2 layers x 2 heads"
"$QKV" train --task reverse --layers 2 --heads 2 --residual --steps 1500 \
    --out "$WORK/reverse_2x2" --force --plot
cp "$WORK/reverse_2x2/plots/overview.png" "$FIG/reverse_2x2_overview.png"

# The interactive page of reverse, as a browser shows it (when Chromium is installed).
if command -v chromium >/dev/null; then
    echo "== the page of reverse"
    "$QKV" plot "$WORK/reverse" --format html
    chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars --window-size=1000,640 \
        --screenshot="$FIG/reverse_page.png" "file://$WORK/reverse/plots/attention.html" 2>/dev/null
fi

echo "== softmax scaling study"
"$QKV" study softmax --scaling --out "$WORK/study"
cp "$WORK/study/scaling.png" "$FIG/softmax_scaling.png"

# docs/sweeps.md: d_k against attention mass on lookup, a grid of 15 runs, 2 at a time.
echo "== sweep: heads x seed on lookup"
"$QKV" sweep --grid 'heads=1,2,4,8,16 seed=1,2,3' --out "$WORK/sweep_dk" --jobs 2 --quiet -- \
    --task lookup --d-model 64
"$QKV" sweep --collect "$WORK/sweep_dk" --x d_k --average seed --metric attention_mass --quiet
cp "$WORK/sweep_dk/sweep.png" "$FIG/sweep_dk_attention_mass.png"

# docs/grokking.md, "Pictures": the small modular run of that page (P = 31, 14000 steps of the
# full batch, qkv's initialization) and its four pictures.
echo "== modular, P = 31"
"$QKV" train --task modular --init qkv --modulus 31 --train-frac 0.7 --d-model 64 --mlp 128 --init-scale 0.25 \
    --steps 14000 --eval-every 400 --out "$WORK/grok31" --force --plot --quiet
for f in losses fourier neurons attention_layer1; do
    cp "$WORK/grok31/plots/grok_$f.png" "$FIG/grok31_$f.png"
done

# Keep the repository small: no figure over 100 KB (the animation is dropped if it is).
status=0
for f in "$FIG"/*; do
    bytes=$(wc -c <"$f" | tr -d ' ')
    if [ "$bytes" -gt 102400 ]; then
        case $f in
        *.gif) echo "make_figures: $f is $bytes bytes; dropped" >&2; rm -f "$f" ;;
        *) echo "make_figures: $f is $bytes bytes, over 100 KB" >&2; status=1 ;;
        esac
    fi
done
ls -l "$FIG"
exit $status
