#!/bin/sh
# explain_figures.sh - the worked study of docs/explain.md: trains the default induction model,
# reads its circuits (and, with a qkv that has them, ablates and patches its heads and reads
# its lens), plots everything and copies the figures the study shows into docs/figures/,
# printing the numbers the study quotes.
#
#   scripts/explain_figures.sh [QKV [WORK]]
#     QKV   the qkv binary (default: build/qkv)
#     WORK  where the run goes (default: runs/explain; runs/ is ignored by git)
#
# Needs gnuplot. Takes a few seconds. Every figure must stay under 100 KB.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
QKV=${1:-$ROOT/build/qkv}
WORK=${2:-$ROOT/runs/explain}
FIG=$ROOT/docs/figures
command -v gnuplot >/dev/null || { echo "explain_figures: gnuplot is needed" >&2; exit 1; }
[ -x "$QKV" ] || { echo "explain_figures: no qkv binary at $QKV (build first)" >&2; exit 1; }
mkdir -p "$WORK" "$FIG"
RUN=$WORK/induction
rm -rf "$RUN"

echo "== train: qkv train --task induction"
"$QKV" train --task induction --out "$RUN" --quiet
echo "== the head scores of the last evaluation (metrics.csv)"
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) name[i] = $i }
         { last = $0 }
         END { n = split(last, v, ",")
               for (i = 1; i <= n; i++)
                   if (name[i] ~ /^(prev|ind|entropy|copy)_l[0-9]+h[0-9]+$/) printf "  %-14s %s\n", name[i], v[i] }' \
    "$RUN/metrics.csv"
echo "== qkv circuits"
"$QKV" circuits --model "$RUN" --out "$RUN/circuits.json"
# Ablation and patching, with a qkv that has those commands: the layer-2 heads, and a clean
# repeated sequence against one whose first half differs.
if "$QKV" ablate --help >/dev/null 2>&1; then
    echo "== qkv ablate"
    "$QKV" ablate --model "$RUN" --out "$RUN/ablate.json"
    "$QKV" ablate --model "$RUN" --heads 2.1,2.2 --together
fi
if "$QKV" patch --help >/dev/null 2>&1; then
    echo "== qkv patch"
    clean="3 9 14 5 7 11 2 8 3 9 14 5 7 11 2 8"
    corrupt="6 12 1 10 4 13 0 15 3 9 14 5 7 11 2 8"
    "$QKV" patch --model "$RUN" --clean "$clean" --corrupt "$corrupt" --method both \
        --out "$RUN/patch.json"
fi
if "$QKV" lens --help >/dev/null 2>&1; then
    echo "== qkv lens"
    "$QKV" lens --model "$RUN" --input "3 9 14 5 7 11 2 8 3 9 14 5 7 11 2 8" \
        --out "$RUN/lens.json"
fi
"$QKV" plot "$RUN"
"$QKV" plot "$RUN" --format html   # the same views in the interactive page
P=$RUN/plots
cp "$P/curves.png" "$FIG/explain_induction_curves.png"
cp "$P/attention_layer1_head1.png" "$FIG/explain_attention_l1h1.png"
cp "$P/attention_layer2_head1.png" "$FIG/explain_attention_l2h1.png"
cp "$P/circuit_ov_layer2_head1.png" "$FIG/explain_ov_l2h1.png"
cp "$P/circuit_qk_layer2_head1.png" "$FIG/explain_qk_l2h1.png"
cp "$P/composition_k.png" "$FIG/explain_composition_k.png"
for f in ablate patch lens; do
    [ -f "$P/$f.png" ] && cp "$P/$f.png" "$FIG/explain_$f.png"
done
for f in "$FIG"/explain_*; do
    [ "$(wc -c <"$f")" -le 102400 ] || { echo "explain_figures: $f is over 100 KB" >&2; exit 1; }
done
echo "explain_figures: figures in $FIG"
