#!/bin/sh
# plot_test.sh QKV - qkv plot, train --plot and --snapshot-every, and qkv study softmax:
# every promised image exists and is a valid PNG, GIF or SVG of a sensible size, no temporary
# file is left behind, curves.png shows the head scores when metrics.csv has them, and the
# gnuplot-missing, gnuplot-failing and bad-input paths behave.
# Exits 77 (ctest: skipped) when gnuplot is not installed.
set -u
QKV=${1:?usage: plot_test.sh path/to/qkv}
if ! command -v gnuplot >/dev/null 2>&1; then
    echo "plot_test: gnuplot is not installed; skipped"
    exit 77
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# Big-endian and little-endian unsigned integers from bytes of a file.
be32() { od -An -tu1 -j "$2" -N4 "$1" | awk '{print (($1*256+$2)*256+$3)*256+$4}'; }
le16() { od -An -tu1 -j "$2" -N2 "$1" | awk '{print $1+$2*256}'; }
size() { wc -c <"$1" | tr -d ' '; }

# A PNG: the 8-byte signature, then the IHDR chunk with width and height at bytes 16 and 20.
check_png() {
    f=$1
    [ -f "$f" ] || { fail "$f is missing"; return; }
    sig=$(od -An -tx1 -N8 "$f" | tr -d ' \n')
    [ "$sig" = "89504e470d0a1a0a" ] || { fail "$f is not a PNG (starts $sig)"; return; }
    [ "$(dd if="$f" bs=1 skip=12 count=4 2>/dev/null)" = "IHDR" ] || fail "$f has no IHDR"
    width=$(be32 "$f" 16) height=$(be32 "$f" 20) bytes=$(size "$f")
    [ "$width" -ge 200 ] && [ "$height" -ge 150 ] || fail "$f is only ${width}x${height}"
    [ "$bytes" -gt 2048 ] || fail "$f is only $bytes bytes"
}

# A GIF: "GIF89a", the logical screen width and height (little-endian) at bytes 6 and 8, and
# for an animation more than one image descriptor.
check_gif() {
    f=$1
    [ -f "$f" ] || { fail "$f is missing"; return; }
    [ "$(dd if="$f" bs=1 count=6 2>/dev/null)" = "GIF89a" ] || { fail "$f is not a GIF89a"; return; }
    width=$(le16 "$f" 6) height=$(le16 "$f" 8) bytes=$(size "$f")
    [ "$width" -ge 200 ] && [ "$height" -ge 150 ] || fail "$f is only ${width}x${height}"
    [ "$bytes" -gt 2048 ] || fail "$f is only $bytes bytes"
    grep -q NETSCAPE2.0 "$f" || fail "$f is not an animation (no NETSCAPE2.0 loop block)"
}

check_svg() {
    f=$1
    [ -f "$f" ] || { fail "$f is missing"; return; }
    grep -q '<svg' "$f" && grep -q '</svg>' "$f" || fail "$f is not a complete SVG"
    [ "$(size "$f")" -gt 2048 ] || fail "$f is too small"
}

# ---- a short run: 2 layers x 2 heads, snapshots every 10 steps, plotted at the end ----
RUN=$TMP/run
"$QKV" train --task reverse --seq-len 6 --d-model 16 --heads 2 --layers 2 --steps 40 \
    --snapshot-every 10 --plot --quiet --out "$RUN" >/dev/null || fail "train --plot exited $?"
for l in 1 2; do
    for h in 1 2; do
        check_png "$RUN/plots/attention_layer${l}_head${h}.png"
        check_png "$RUN/plots/grads_layer${l}_head${h}.png"
        [ -f "$RUN/gradients/layer${l}_head${h}_dA.dat" ] || fail "gradients/layer${l}_head${h}_dA.dat missing"
        [ -f "$RUN/gradients/layer${l}_head${h}_dS.dat" ] || fail "gradients/layer${l}_head${h}_dS.dat missing"
        for s in 0 10 20 30 40; do
            [ -f "$RUN/snapshots/step${s}_layer${l}_head${h}.dat" ] || fail "snapshot step $s layer $l head $h missing"
        done
    done
done
check_png "$RUN/plots/overview.png"
check_png "$RUN/plots/curves.png"
check_gif "$RUN/plots/snapshots.gif"
head -1 "$RUN/metrics.csv" | grep -q '^step,loss,train_acc,heldout_acc,lr,heldout_loss,mass_l1,mass_l2,prev_l1h1,dup_l1h1,ind_l1h1,' ||
    fail "metrics.csv header: $(head -1 "$RUN/metrics.csv")"

# ---- qkv plot again, as SVG ----
"$QKV" plot "$RUN" --format svg >/dev/null || fail "plot --format svg exited $?"
for f in attention_layer1_head1 attention_layer2_head2 overview curves grads_layer1_head1; do
    check_svg "$RUN/plots/$f.svg"
done
ls "$RUN/plots" "$RUN/attention" "$RUN/snapshots" | grep -q '\.tmp\.' && fail "a temporary file was left"

# ---- the head scores in curves.png: a second row when metrics.csv has them ----
# induction (2 layers x 2 heads): the previous-token, duplicate-token and induction scores of
# every head, and the ideal-pattern mass by layer, below the loss and accuracy
IND=$TMP/induction
"$QKV" train --task induction --d-model 16 --steps 30 --plot --quiet --out "$IND" \
    >/dev/null || fail "train --task induction --plot exited $?"
check_png "$IND/plots/curves.png"
[ "$(be32 "$IND/plots/curves.png" 20)" -ge 800 ] || fail "induction curves.png has no row of head scores"
"$QKV" plot "$IND" --format svg >/dev/null || fail "plot induction --format svg exited $?"
for title in 'previous-token score' 'duplicate-token score' 'induction score (prefix matching)' \
    'ideal-pattern mass by layer' 'layer 2 head 1' 'formed (0.5)'; do
    grep -qF "$title" "$IND/plots/curves.svg" || fail "induction curves.svg has no '$title'"
done
# a run of before the head scores (its metrics.csv has the first six columns): one row
cut -d, -f1-6 "$IND/metrics.csv" >"$IND/metrics.tmp" && mv "$IND/metrics.tmp" "$IND/metrics.csv"
"$QKV" plot "$IND" >/dev/null || fail "plot of six columns exited $?"
[ "$(be32 "$IND/plots/curves.png" 20)" -lt 600 ] || fail "curves.png of six columns has a second row"
# translate: cross-attention has no head scores (and its 0s are not drawn as if it had)
TR=$TMP/translate
"$QKV" train --task translate --d-model 16 --steps 10 --plot --quiet --out "$TR" >/dev/null ||
    fail "train --task translate --plot exited $?"
check_png "$TR/plots/curves.png"
[ "$(be32 "$TR/plots/curves.png" 20)" -lt 600 ] || fail "translate curves.png draws head scores"
# a data file: the head scores, no ideal-pattern mass (the column is empty)
awk 'BEGIN { for (i = 0; i < 64; i++) printf "a%d b%d\tb%d a%d\n", i % 7, i % 5, i % 5, i % 7 }' >"$TMP/swap.tsv"
"$QKV" train --data "$TMP/swap.tsv" --d-model 16 --steps 10 --plot --quiet --out "$TMP/data" \
    >/dev/null || fail "train --data --plot exited $?"
[ "$(be32 "$TMP/data/plots/curves.png" 20)" -ge 800 ] || fail "data curves.png has no row of head scores"
"$QKV" plot "$TMP/data" --format svg >/dev/null || fail "plot data --format svg exited $?"
grep -qF 'induction score' "$TMP/data/plots/curves.svg" && ! grep -qF 'ideal-pattern mass' "$TMP/data/plots/curves.svg" ||
    fail "data curves.svg: the head scores without the ideal-pattern mass"

# ---- without gnuplot on PATH: one line, the data is still there ----
out=$(PATH=/nonexistent "$QKV" plot "$RUN" 2>&1)
rc=$?
[ "$rc" -eq 1 ] || fail "plot without gnuplot exited $rc, not 1"
[ "$out" = "qkv: gnuplot not found; data files are in $RUN" ] || fail "plot without gnuplot said: $out"
out=$(PATH=/nonexistent "$QKV" train --task copy --seq-len 4 --d-model 8 --steps 5 --quiet --plot \
      --out "$TMP/nognuplot" 2>&1 >/dev/null)
rc=$?
[ "$rc" -eq 0 ] || fail "train --plot without gnuplot exited $rc, not 0"
# (--quiet's hint goes to stderr too: five steps are too few)
[ "$out" = "hint: too few steps: copy takes about 3000 with the default options (--steps)
qkv: gnuplot not found; data files are in $TMP/nognuplot" ] || fail "train --plot without gnuplot said: $out"
[ -f "$TMP/nognuplot/model.safetensors" ] && [ -f "$TMP/nognuplot/attention/layer1_head1.dat" ] ||
    fail "train --plot without gnuplot did not write its data"

# ---- a gnuplot that fails: its last line, exit 1, no image or temporary left behind ----
mkdir -p "$TMP/failbin"
printf '#!/bin/sh\necho "line 7: undefined variable: x" >&2\nexit 1\n' >"$TMP/failbin/gnuplot"
chmod +x "$TMP/failbin/gnuplot"
cp -r "$RUN" "$TMP/failrun" && rm -rf "$TMP/failrun/plots"
out=$(PATH="$TMP/failbin" "$QKV" plot "$TMP/failrun" 2>&1)
rc=$?
[ "$rc" -eq 1 ] || fail "plot with a failing gnuplot exited $rc, not 1"
[ "$out" = "qkv: plot: gnuplot failed on attention.gp: line 7: undefined variable: x" ] ||
    fail "plot with a failing gnuplot said: $out"
[ -z "$(ls -A "$TMP/failrun/plots")" ] || fail "a failed plot left: $(ls -A "$TMP/failrun/plots")"
out=$(PATH="$TMP/failbin" "$QKV" study softmax --scaling --samples 50 --out "$TMP/failstudy" 2>&1 >/dev/null)
rc=$?
[ "$rc" -eq 1 ] || fail "study --scaling with a failing gnuplot exited $rc, not 1"
[ "$out" = "qkv: plot: gnuplot failed on scaling.gp: line 7: undefined variable: x" ] ||
    fail "study --scaling with a failing gnuplot said: $out"
out=$(PATH=/nonexistent "$QKV" study softmax --scaling --samples 50 --out "$TMP/nognustudy" 2>&1 >/dev/null)
rc=$?
[ "$rc" -eq 0 ] || fail "study --scaling without gnuplot exited $rc, not 0"
[ "$out" = "qkv: gnuplot not found; data files are in $TMP/nognustudy" ] ||
    fail "study --scaling without gnuplot said: $out"
[ -f "$TMP/nognustudy/scaling.dat" ] || fail "study --scaling without gnuplot wrote no scaling.dat"

# ---- bad input: one line on stderr, a non-zero exit, nothing half-written ----
bad() {
    want=$1
    shift
    err=$("$QKV" "$@" 2>&1 >/dev/null)
    rc=$?
    [ "$rc" -eq "$want" ] || fail "qkv $* exited $rc, not $want"
    [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] && case $err in "qkv: "*) true ;; *) false ;; esac ||
        fail "qkv $* printed: $err"
}
bad 2 plot
bad 2 plot "$RUN" --format jpeg
bad 2 plot "$RUN" "$RUN"
bad 3 plot "$TMP/nowhere"
bad 3 plot "$TMP"
bad 2 train --plot --steps 2
bad 2 train --snapshot-every x --out "$TMP/x"
bad 2 study softmax --vector 1,,2
bad 2 study softmax --vector 1,2 --dy 1
bad 2 study softmax --scaling --max-dk 100
bad 2 study
mkdir -p "$TMP/broken/attention"
printf 'not a model' >"$TMP/broken/model.safetensors"
bad 4 plot "$TMP/broken"

# ---- the analysis views: qkv circuits --out DIR/circuits.json, and the files of qkv ablate,
# patch and attribute --out (fixtures in tests/fixtures/analysis), drawn when present ----
FIX=$(dirname "$0")/fixtures/analysis
"$QKV" circuits --model "$RUN" --out "$RUN/circuits.json" >/dev/null || fail "circuits --out exited $?"
cp "$FIX/ablate.json" "$FIX/patch.json" "$FIX/attribute.json" "$RUN/"
"$QKV" plot "$RUN" >/dev/null || fail "plot with the analysis files exited $?"
for l in 1 2; do
    for h in 1 2; do
        check_png "$RUN/plots/circuit_qk_layer${l}_head${h}.png"
        check_png "$RUN/plots/circuit_ov_layer${l}_head${h}.png"
    done
done
for f in composition_q composition_k composition_v ablate patch attribute; do check_png "$RUN/plots/$f.png"; done
# the data behind them: the ablation grid holds loss - baseline, the patching map the exact
# share, the bars every part with its label, the OV matrix qkv circuits' numbers
awk 'NR == 3 && $1 == "layer_1" && $2 == 1.4075 && $3 == 0.0185 { ok = 1 } END { exit !ok }' \
    "$RUN/plots/ablate.dat" || fail "plots/ablate.dat is not the loss increase: $(cat "$RUN/plots/ablate.dat")"
awk 'NR == 4 && $1 == "layer_2" && $2 == 0.55 && $3 == 0.41 { ok = 1 } END { exit !ok }' \
    "$RUN/plots/patch.dat" || fail "plots/patch.dat is not the exact share: $(cat "$RUN/plots/patch.dat")"
[ "$(grep -v '^#' "$RUN/plots/attribute.dat" | awk '{print $1}' | tr '\n' ' ')" = "embed 1.1 1.2 2.1 2.2 bias " ] ||
    fail "plots/attribute.dat: $(cat "$RUN/plots/attribute.dat")"
[ "$(sed -n 2p "$RUN/plots/composition_k.dat")" = 'row\column 2.1 2.2' ] || fail "composition_k.dat header"
"$QKV" plot "$RUN" --format svg >/dev/null || fail "plot --format svg with the analysis files exited $?"
check_svg "$RUN/plots/circuit_ov_layer2_head1.svg"
check_svg "$RUN/plots/attribute.svg"
# readable from 1 to 64 heads and 4 to 128 tokens: a patching map of 64 heads x 4 positions
# and one of 2 heads x 128 positions, and bars for 64 heads (gnuplot thins the labels; the
# image grows). The files are of a model beside them of one layer of 64 heads (T 4), or of 2
# heads (T 128): plot refuses heads and positions the model does not have. Drawn without
# gradients and snapshots, fewer pictures to wait for.
BIG=$TMP/big LONG=$TMP/long
"$QKV" train --task copy --seq-len 4 --vocab 8 --d-model 64 --heads 64 --steps 1 --quiet \
    --out "$BIG" >/dev/null 2>&1 || fail "training the 64-head model exited $?"
"$QKV" train --task copy --seq-len 128 --vocab 8 --d-model 8 --heads 2 --steps 1 --quiet \
    --out "$LONG" >/dev/null 2>&1 || fail "training the 128-token model exited $?"
rm -rf "$BIG/gradients" "$BIG/snapshots" "$LONG/gradients" "$LONG/snapshots"
patch_json() { # HEADS POSITIONS
    awk -v H="$1" -v T="$2" 'BEGIN { printf "{\"clean\":1,\"corrupt\":0,\"layers\":1,\"heads_per_layer\":%d,\"positions\":[", H
    for (t = 0; t < T; t++) printf "%s\"%d:a\"", t ? "," : "", t
    printf "],\"results\":["
    for (h = 1; h <= H; h++) for (t = 0; t < T; t++)
        printf "%s{\"layer\":1,\"head\":%d,\"position\":%d,\"exact\":%.3f,\"attribution\":null}",
               (h > 1 || t > 0) ? "," : "", h, t, ((h * 7 + t) % 11) / 10 - 0.3
    printf "]}\n" }'
}
patch_json 64 4 >"$BIG/patch.json"
patch_json 2 128 >"$LONG/patch.json"
awk 'BEGIN { printf "{\"logit\":1,\"parts\":[{\"name\":\"embedding\",\"value\":0.5}"
    for (h = 1; h <= 64; h++) printf ",{\"name\":\"head\",\"layer\":1,\"head\":%d,\"value\":%.3f}", h, (h % 9) / 10 - 0.4
    printf "],\"sum\":1}\n" }' >"$BIG/attribute.json"
"$QKV" plot "$BIG" >/dev/null || fail "plot with the 64-head files exited $?"
"$QKV" plot "$LONG" >/dev/null || fail "plot with the 128-position files exited $?"
check_png "$BIG/plots/patch.png"
check_png "$BIG/plots/attribute.png"
check_png "$LONG/plots/patch.png"
[ "$(be32 "$LONG/plots/patch.png" 16)" -ge 1000 ] || fail "the 128-position patching map did not grow"
[ "$(sed -n 2p "$LONG/plots/patch.dat" | wc -w)" -eq 129 ] || fail "patch.dat of 128 positions"
[ "$(grep -c . "$BIG/plots/patch.dat")" -eq 66 ] || fail "patch.dat of 64 heads"
# the page holds the same views
"$QKV" plot "$BIG" --format html >/dev/null || fail "plot --format html with the 64-head files exited $?"
grep -q '"patch":{"clean":1' "$BIG/plots/attention.html" || fail "the page does not hold patch.json"
# a file that is not what its command writes: one line, exit 4, no picture or page of it
printf '{"heads": 3}' >"$BIG/ablate.json"
bad 4 plot "$BIG"
bad 4 plot "$BIG" --format html
printf 'not json' >"$BIG/ablate.json"
bad 4 plot "$BIG"
bad 4 plot "$BIG" --format html
# empty lists the checks accept (no part, no path, no ablated head) are drawn safely: nothing
# of them, no .dat, exit 0 (gnuplot once failed on the empty bars and paths)
EMPTY=$TMP/empty
cp -r "$RUN" "$EMPTY" && rm -rf "$EMPTY/plots" "$EMPTY/gradients" "$EMPTY/snapshots" "$EMPTY/circuits.json"
printf '{"logit":1,"parts":[]}' >"$EMPTY/attribute.json"
printf '{"path":true,"paths":[]}' >"$EMPTY/patch.json"
printf '{"baseline":{"loss":2},"heads":[]}' >"$EMPTY/ablate.json"
"$QKV" plot "$EMPTY" >/dev/null 2>"$TMP/err" || fail "plot of empty analysis lists exited $?: $(cat "$TMP/err")"
for f in attribute patch ablate; do
    [ -e "$EMPTY/plots/$f.png" ] || [ -e "$EMPTY/plots/$f.dat" ] && fail "an empty $f.json drew plots/$f"
done

# ---- what the analysis pictures say, and their layout: a shift model (causal; its first
# position has no target) of 16 positions, 2 x 2 heads: its patching of k by key position (4
# rows x 16 columns), attribution, lens and ablation, drawn as SVG ----
VIEWS=$TMP/views
"$QKV" train --task shift --seq-len 16 --vocab 8 --d-model 8 --heads 2 --layers 2 --steps 1 --quiet \
    --out "$VIEWS" >/dev/null 2>&1 || fail "training the shift model exited $?"
clean="1 2 3 4 5 6 7 0 1 2 3 4 5 6 7 0" corrupt="2 2 3 4 5 6 7 0 1 2 3 4 5 6 7 0"
"$QKV" patch "$VIEWS" --clean "$clean" --corrupt "$corrupt" --position 1 --answer 1 --wrong 2 \
    --site k --over key-position --out "$VIEWS/patch.json" >/dev/null || fail "patch --out exited $?"
"$QKV" attribute "$VIEWS" --input "$clean" --position 1 --out "$VIEWS/attribute.json" >/dev/null ||
    fail "attribute --out exited $?"
"$QKV" lens "$VIEWS" --input "$clean" --out "$VIEWS/lens.json" >/dev/null || fail "lens --out exited $?"
"$QKV" ablate "$VIEWS" --out "$VIEWS/ablate.json" >/dev/null || fail "ablate --out exited $?"
"$QKV" plot "$VIEWS" --format svg >/dev/null || fail "plot of the shift model's analyses exited $?"
"$QKV" plot "$VIEWS" >/dev/null || fail "plot (png) of the shift model's analyses exited $?"
python3 - "$VIEWS/plots" <<'PY' || fail "the analysis pictures of the shift model (above)"
import re, sys
d, bad = sys.argv[1], []
def texts(name):
    # gnuplot's SVG: each text in a <g transform="translate(x,y)" ... font-size="N"> of its own
    # (a title's lines as <tspan>s)
    svg = open(f"{d}/{name}.svg").read()
    got = [(float(x), float(y), float(fs), re.sub("<[^>]+>", "", t).strip())
           for x, y, fs, t in re.findall(r'translate\(([-\d.]+),([-\d.]+)\)[^>]*?font-size="([\d.]+)"[^>]*>\s*<text>(.*?)</text>', svg, re.S)]
    return got, svg
# every title names what the picture was made of
for name, words in (("patch", ["position 1:2", "answer 1", "wrong 2", "clean: 1 2 3", "corrupt: 2 2 3"]),
                    ("attribute", ["at position 1:2", "input: 1 2 3"]),
                    ("lens", ["input: 1 2 3", "(*: no target in training)", "0:1*"]),
                    ("lens_parts", ["input: 1 2 3", "0:1*"]),
                    ("ablate", ["over the held-out set"])):
    t, svg = texts(name)
    flat = " ".join(re.sub("<[^>]+>", " ", svg).split())
    for w in words:
        if w not in flat:
            bad.append(f"{name}.svg does not say {w!r}")
# the patching map of 4 rows x 16 key positions takes the height its cells need (it once left
# half of a 580-pixel picture empty), and its colour bar's tick labels stand apart (20 pixels
# or more: they were 17 here, and overlapped in the PNG)
h = int(re.search(r'viewBox="0 0 \d+ (\d+)"', open(f"{d}/patch.svg").read()).group(1))
if h >= 420:
    bad.append(f"patch.svg of 4 x 16 cells is {h} pixels high")
t, _ = texts("patch")
numbers = [(x, y, fs) for x, y, fs, s in t if re.fullmatch(r"-?[\d.]+(e-?\d+)?", s)]
right = max(x for x, _, _ in numbers)
bar = sorted(y for x, y, fs in numbers if x > right - 2)
gaps = [b - a for a, b in zip(bar, bar[1:])]
if len(bar) < 3 or min(gaps) < 20:
    bad.append(f"patch.svg's colour bar labels at {bar}: closer than 20 pixels")
# overview: one size for every panel's token labels (a row's labels once took another size)
t, _ = texts("overview")
sizes = {fs for x, y, fs, s in t if re.fullmatch(r"\d+:\d+", s)}
if len(sizes) != 1:
    bad.append(f"overview.svg's token labels have the sizes {sorted(sizes)}")
# grads: dA's masked cells hatched, as A's, dS's and the page's
if "dA = dLoss/dA (hatched: masked)" not in open(f"{d}/grads_layer1_head1.svg").read():
    bad.append("grads_layer1_head1.svg does not hatch dA's masked cells")
for b in bad:
    print("  " + b)
sys.exit(1 if bad else 0)
PY

# ---- padding and undefined values: a one-layer model of a data file whose examples have 2 to
# 7 tokens (its held-out file starts with a short one, the fixed example the maps show) ----
PAD=$TMP/padded
awk 'BEGIN { split("ab cd ef gh ij", w, " ")
    for (n = 0; n < 300; n++) { len = n == 0 ? 2 : 2 + (n * 5 + int(n / 3)) % 6; x = ""; y = ""
        for (i = 0; i < len; i++) { t = w[(n * 3 + i * i + int(n / 4) * i) % 5 + 1]; x = x (i ? " " : "") t; y = t (i ? " " : "") y }
        print x "\t" y > (n < 40 ? "'"$TMP"'/padded_held.tsv" : "'"$TMP"'/padded.tsv") } }'
"$QKV" train --data "$TMP/padded.tsv" --heldout "$TMP/padded_held.tsv" --d-model 16 --steps 30 --quiet \
    --out "$PAD" >/dev/null 2>&1 || fail "train of the padded data file exited $?"
"$QKV" circuits --model "$PAD" --out "$PAD/circuits.json" >/dev/null || fail "circuits of the padded model exited $?"
"$QKV" plot "$PAD" --format svg >/dev/null || fail "plot of the padded model exited $?"
MAP=$PAD/attention/layer1_head1.dat
grep -q '^query.key 0:[^ ]* 1:[^ ]* 2:<pad>' "$MAP" || fail "the padded run's fixed example is not padded: $(sed -n 2p "$MAP")"
# each weight is printed in its cell (8 tokens at most), but not in a padding row or column:
# as many numbers in the picture as real cells with a weight of 0.005 or more
want=$(awk 'NR == 2 { for (j = 2; j <= NF; j++) padk[j] = $j ~ /:<pad>$/ }
            NR > 2 && $1 !~ /:<pad>$/ { for (j = 2; j <= NF; j++) if (!padk[j] && $j >= 0.005) n++ }
            END { print n + 0 }' "$MAP")
got=$(grep -o '>[0-9]\.[0-9][0-9]<' "$PAD/plots/attention_layer1_head1.svg" | wc -l | tr -d ' ')
[ "$got" -eq "$want" ] || fail "the padded map prints $got weights, not the $want of its real cells"
for f in attention_layer1_head1 grads_layer1_head1; do
    grep -q 'hatched: padding\|(hatched: padding)' "$PAD/plots/$f.svg" || fail "$f.svg does not say the padding is hatched"
done
grep -q 'hatched: padding' "$PAD/plots/overview.svg" || fail "overview.svg does not say the padding is hatched"
# the key labels (n:<pad> ...) stand upright: they would run together side by side
upright=$(grep -A1 'rotate(-90)' "$PAD/plots/attention_layer1_head1.svg" | grep -c '[0-9]:&lt;pad>')
[ "$upright" -ge 5 ] || fail "the padded map's key labels are not upright ($upright of them)"
# one layer: no induction score is drawn as a number
grep -q 'not defined for one layer' "$PAD/plots/curves.svg" && ! grep -q 'formed (0.5)' "$PAD/plots/curves.svg" ||
    fail "curves.svg of one layer draws an induction score"
# ... nor printed: the summary's JSON and eval's table and JSON give none (null, '-')
tr -d ' \t\n' <"$PAD/summary.json" | grep -o '"induction":[^,}]*' | sort -u | tr '\n' ' ' | grep -qx '"induction":null ' ||
    fail "summary.json of one layer gives an induction score: $(tr -d ' \t\n' <"$PAD/summary.json" | grep -o '"induction":[^,}]*' | sort -u)"
"$QKV" eval --model "$PAD" --data "$TMP/padded_held.tsv" --json | grep -o '"induction":[^,}]*' | sort -u |
    tr '\n' ' ' | grep -qx '"induction":null ' || fail "eval --json of one layer gives an induction score"
"$QKV" eval --model "$PAD" --data "$TMP/padded_held.tsv" | awk '$1 == "1.1" { ok = NF == 5 && $5 == "-" } END { exit !ok }' ||
    fail "eval's table of one layer prints an induction score: $("$QKV" eval --model "$PAD" --data "$TMP/padded_held.tsv" | grep '^  1.1')"
# the circuits: the padding token's column holds no value, and it has no row (the OV circuit's
# rows are the tokens keys hold, which the padding never is); every other row is drawn
awk '$1 == "<pad>" { bad = 1 }
     NR == 2 && $2 != "<pad>" { bad = 1 }
     NR > 2 { rows++; if ($2 != "NaN") bad = 1 } END { exit bad || !rows }' "$PAD/plots/circuit_ov_layer1_head1.dat" ||
    fail "circuit_ov_layer1_head1.dat gives the padding token values: $(head -4 "$PAD/plots/circuit_ov_layer1_head1.dat")"
for t in ab cd ef gh ij; do
    [ "$(grep -c ">$t<" "$PAD/plots/circuit_ov_layer1_head1.svg")" -ge 2 ] ||
        fail "circuit_ov_layer1_head1.svg lacks the row or column of $t"
done

# ---- qkv study softmax: the Jacobian agrees three ways; var(q.k) ~ d_k; the plot ----
out=$("$QKV" study softmax --vector 4,-1,2.1) || fail "study softmax exited $?"
for label in "largest |J - finite differences|" "largest |J - backward rows|" "largest |J^T dy - backward|"; do
    d=$(printf '%s\n' "$out" | grep -F "$label" | awk '{print $NF}')
    awk -v d="$d" 'BEGIN { exit !(d != "" && d + 0 < 1e-8) }' || fail "study: $label = '$d'"
done
# a masked entry: weight 0, and no gradient reaches it (its row and column of J are 0)
out=$("$QKV" study softmax --vector 1,-inf,2) || fail "study softmax with -inf exited $?"
for label in "largest |J - finite differences|" "largest |J - backward rows|" "largest |J^T dy - backward|"; do
    d=$(printf '%s\n' "$out" | grep -F "$label" | awk '{print $NF}')
    awk -v d="$d" 'BEGIN { exit !(d != "" && d + 0 < 1e-8) }' || fail "study -inf: $label = '$d'"
done
printf '%s\n' "$out" | grep -q '^s = softmax(x) *( 0.268941,  0,  0.731059)' || fail "study -inf: s is not (0.2689, 0, 0.7311): $out"
printf '%s\n' "$out" | grep -q 'x_2 = -inf is a masked entry' || fail "study -inf does not say x_2 is masked"

# ---- qkv plot --format html: one page holding its data, scripts and styles inline ----
"$QKV" plot "$RUN" --format html >/dev/null || fail "plot --format html exited $?"
page="$RUN/plots/attention.html"
[ -s "$page" ] || fail "plot --format html wrote no $page"
grep -q 'const DATA = {"task":"reverse","layers":2,"heads":2' "$page" || fail "the page holds no data"
grep -q '"snapshots":{"steps":\[0,' "$page" || fail "the page holds no snapshots"
grep -q '"metrics":{"columns":\["step","loss"' "$page" || fail "the page holds no metrics"
if grep -E '<script src|<link|https?://' "$page" | grep -qv 'http://www.w3.org/2000/svg'; then
    fail "the page loads something from outside"
fi

# ---- a modular run's pictures (docs/grokking.md, "Pictures"): the four losses with the phases
# shaded, the embedding's norms over training, the neurons by frequency, the attention from =
# to a and b; their .dat files hold what train, summary.json, qkv fourier and qkv inspect say ----
GROK=$TMP/grok13
"$QKV" train --task modular --modulus 13 --train-frac 0.7 --d-model 32 --mlp 64 --lr 0.01 \
    --steps 200 --eval-every 20 --threads 1 --quiet --out "$GROK" >/dev/null 2>&1 || fail "train --task modular exited $?"
rm -rf "$GROK/gradients" # (fewer pictures to wait for)
"$QKV" plot "$GROK" --format svg >/dev/null || fail "plot of the modular run (svg) exited $?"
"$QKV" plot "$GROK" >/dev/null || fail "plot of the modular run exited $?"
for view in grok_losses grok_fourier grok_neurons grok_attention_layer1; do
    check_png "$GROK/plots/$view.png"
    check_svg "$GROK/plots/$view.svg"
    # every title names the run, the modulus and the op
    grep -qF 'grok13: (a + b) mod 13' "$GROK/plots/$view.svg" || fail "$view.svg's title does not name the run and its task"
done
# the losses: a row per evaluation, as metrics.csv has them (the same %.6g of the same numbers)
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    { print $c["step"], $c["train_set_loss"], $c["heldout_loss"], $c["restricted_loss"], $c["excluded_loss"] }' \
    "$GROK/metrics.csv" >"$TMP/grok_losses.want"
grep -v '^#' "$GROK/plots/grok_losses.dat" | cmp -s - "$TMP/grok_losses.want" ||
    fail "grok_losses.dat is not metrics.csv's four losses: $(grep -v '^#' "$GROK/plots/grok_losses.dat" | head -3)"
# the phases: summary.json's, in the .dat and in the picture's key
phases=$(tr -d ' \t\n' <"$GROK/summary.json" | grep -o '"grokking":{[^}]*}')
mem=$(printf '%s' "$phases" | grep -o '"memorization_end":[0-9a-z]*' | cut -d: -f2)
[ -n "$mem" ] && [ "$mem" != null ] || fail "the modular run did not memorize: $phases"
grep -q "^# phases (summary.json's grokking): memorization_end $mem circuit_formation_end - cleanup_end - generalization_step -\$" \
    "$GROK/plots/grok_losses.dat" || fail "grok_losses.dat's phases: $(sed -n 2p "$GROK/plots/grok_losses.dat") ($phases)"
for key in "memorization: 0 to $mem" 'circuit formation: not ended by step 200' 'cleanup: not reached' \
    'not generalized (test accuracy &lt; 99%)'; do
    grep -qF "$key" "$GROK/plots/grok_losses.svg" || fail "grok_losses.svg's key has no '$key'"
done
# the Fourier norms: a row per frequency 1..6, a column per evaluation (its step in the header)
[ "$(sed -n 2p "$GROK/plots/grok_fourier.dat")" = "# frequency\\step $(cut -d, -f1 "$GROK/metrics.csv" | tail -n +2 | tr '\n' ' ' | sed 's/ $//')" ] ||
    fail "grok_fourier.dat's steps: $(sed -n 2p "$GROK/plots/grok_fourier.dat")"
[ "$(grep -v '^#' "$GROK/plots/grok_fourier.dat" | awk '{ print $1 ":" NF }' | tr '\n' ' ')" = "1:12 2:12 3:12 4:12 5:12 6:12 " ] ||
    fail "grok_fourier.dat is not 6 frequencies x 11 evaluations"
# the neurons and the attention, against qkv fourier --json and qkv inspect of the same model
"$QKV" fourier "$GROK" --json >"$TMP/grok_fourier.json" || fail "fourier --json exited $?"
if command -v python3 >/dev/null 2>&1; then
    python3 - "$GROK" "$TMP/grok_fourier.json" <<'PYEOF' || fail "the modular run's .dat files disagree with metrics.jsonl or qkv fourier"
import json, math, sys
run, fourier = sys.argv[1], json.load(open(sys.argv[2]))
rows = [json.loads(l) for l in open(run + "/metrics.jsonl")]
norms = [l.split() for l in open(run + "/plots/grok_fourier.dat") if not l.startswith("#")]
for k, row in enumerate(norms, 1):          # %.6g of metrics.jsonl's embed_norms[k]
    assert row[1:] == ["%.6g" % r["embed_norms"][k] for r in rows], (k, row)
mlp = fourier["mlp"][0]
neurons = [l.split() for l in open(run + "/plots/grok_neurons.dat") if not l.startswith("#")]
assert len(neurons) == 64 and sorted(r[0] for r in neurons) == sorted("1.%d" % u for u in range(64))
order = []
for r in neurons:
    u, shares = int(r[0].split(".")[1]), [float(v) for v in r[1:]]
    cluster, share = mlp["cluster"][u], mlp["share"][u]
    if cluster == 0:                          # constant: no share
        assert all(math.isnan(v) for v in shares), r
    else:                                     # its largest share is qkv fourier's, at its cluster
        assert len(shares) == 6 and max(shares) == shares[cluster - 1], r
        assert abs(shares[cluster - 1] - share) <= 1e-5 * share, (r, share)
    order.append((cluster == 0, cluster, -(share or 0)))
assert order == sorted(order), "the neurons are not grouped by cluster, then by share"
PYEOF
fi
# the attention: 8 blocks (4 heads, on a and on b) of 13 x 13; pair (a, b) is row a, column b
awk '/^# head/ { blocks++ } !/^#/ && NF { rows++; if (NF != 13) bad = 1 } END { exit !(blocks == 8 && rows == 8 * 13 && !bad) }' \
    "$GROK/plots/grok_attention_layer1.dat" || fail "grok_attention_layer1.dat is not 8 blocks of 13 x 13"
for pair in "3 5" "12 0"; do
    set -- $pair
    "$QKV" inspect "$GROK" --input "$1 $2 =" >"$TMP/inspect.txt" || fail "inspect $pair exited $?"
    for h in 1 2 3 4; do
        want=$(awk -v h="$h" '/^== layer 1, head/ { cur = $5 } cur == h && $1 == "2:=" { print $2, $3 }' "$TMP/inspect.txt")
        got=$(awk -v h="$h" -v a="$1" -v b="$2" '/^# head/ { block++; row = 0; next } /^#/ || !NF { next }
            { if (row == a && block == 2 * h - 1) on_a = $(b + 1); if (row == a && block == 2 * h) on_b = $(b + 1); row++ }
            END { print on_a, on_b }' "$GROK/plots/grok_attention_layer1.dat")
        echo "$want $got" | awk '{ exit !($3 != "" && $4 != "" && ($1 - $3) ^ 2 <= 1e-6 * $1 ^ 2 + 1e-12 && ($2 - $4) ^ 2 <= 1e-6 * $2 ^ 2 + 1e-12) }' ||
            fail "head $h's attention from = for $1 $2: inspect says $want, grok_attention_layer1.dat $got"
    done
done
# a run that went through every phase shades all three (summary.json's grokking written here)
cp "$GROK/summary.json" "$TMP/summary.json"
sed "s/\"memorization_end\":[^,]*/\"memorization_end\": 20/; s/\"circuit_formation_end\":[^,]*/\"circuit_formation_end\": 60/;
     s/\"cleanup_end\":[^,]*/\"cleanup_end\": 140/; s/\"generalization_step\":[^,]*/\"generalization_step\": 120/;
     s/\"generalized\":[^,]*/\"generalized\": true/" "$TMP/summary.json" >"$GROK/summary.json"
"$QKV" plot "$GROK" --format svg >/dev/null || fail "plot of the modular run with every phase exited $?"
for key in 'memorization: 0 to 20' 'circuit formation: 20 to 60' 'cleanup: 60 to 140' \
    'generalized (test accuracy >= 99%) from step 120'; do
    grep -qF "$key" "$GROK/plots/grok_losses.svg" || fail "grok_losses.svg with every phase has no '$key'"
done
grep -q '^# phases (summary.json.s grokking): memorization_end 20 circuit_formation_end 60 cleanup_end 140 generalization_step 120$' \
    "$GROK/plots/grok_losses.dat" || fail "grok_losses.dat with every phase: $(sed -n 2p "$GROK/plots/grok_losses.dat")"
# mul without an MLP: no restricted or excluded loss, no neurons
GM=$TMP/grokmul
"$QKV" train --task modular --modulus 11 --op mul --mlp 0 --d-model 16 --heads 2 --steps 20 --eval-every 10 \
    --threads 1 --quiet --out "$GM" >/dev/null 2>&1 || fail "train --op mul --mlp 0 exited $?"
rm -rf "$GM/gradients"
"$QKV" plot "$GM" --format svg >/dev/null || fail "plot of the mul run exited $?"
[ -f "$GM/plots/grok_neurons.svg" ] && fail "a model without an MLP has a picture of its neurons"
grep -qF 'grokmul: (a * b) mod 11' "$GM/plots/grok_attention_layer1.svg" || fail "the mul run's attention title"
grep -qF 'restricted: not defined for mul' "$GM/plots/grok_losses.svg" || fail "the mul run's losses say nothing of the restricted loss"

out=$("$QKV" study softmax --scaling --samples 400 --out "$TMP/study") || fail "study --scaling exited $?"
printf '%s\n' "$out" | awk '$1 ~ /^[0-9]+$/ && NF == 7 {
        n++; if ($2 / $1 < 0.7 || $2 / $1 > 1.3) bad = 1
        if ($1 == 512) { raw = $6; scaled = $7 } }
    END { exit !(n == 10 && !bad && raw < scaled / 50) }' || fail "study --scaling table: $out"
[ -f "$TMP/study/scaling.dat" ] || fail "study --scaling wrote no scaling.dat"
check_png "$TMP/study/scaling.png"

if [ "$fails" -gt 0 ]; then
    echo "plot_test: $fails failures"
    exit 1
fi
echo "plot_test: ok"
