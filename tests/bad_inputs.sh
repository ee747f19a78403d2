#!/usr/bin/env bash
# bad_inputs.sh - the table of bad inputs (tests/bad_inputs.tsv, listed in docs/errors.md).
#
# usage: tests/bad_inputs.sh QKV [--show]        run every case (--show: print what each does)
#        tests/bad_inputs.sh QKV --setup DIR      make the fixtures in DIR
#        tests/bad_inputs.sh QKV --case ID DIR    run case ID in a copy of the fixtures in DIR
#        tests/bad_inputs.sh QKV --cases DIR <IDS the cases named on stdin, one after another
#                                                 in one copy of the fixtures
#        tests/bad_inputs.sh QKV --shard K N DIR  the table's cases K, K + N, K + 2N, ... (from
#                                                 1), as --cases does
#        tests/bad_inputs.sh --markdown           print the table as docs/errors.md lists it
#        tests/bad_inputs.sh --check-doc DOC      DOC's table is the one --markdown prints
#
# ctest runs the table in four shards (bad_inputs.1 to .4), after bad_inputs_setup.
# Every case runs `qkv ARGS` in a copy of the fixtures (a small trained model in run/,
# the broken files of tests/fuzz/corpus/safetensors/ in broken/, an empty directory, FIFOs,
# links, 66 GB sparse files, runs with symbolic links planted in them, two bad config
# files) and must:
#   - exit with the documented code, which is below 128 (no crash, no signal);
#   - print exactly one line on stderr, "qkv: ...", holding the expected fragment, and
#     nothing on stdout;
#   - leave no sanitizer report (ASan, UBSan, LeakSanitizer) behind;
#   - create or change no file: the fixture directory's listing and checksums are the same
#     after every case as before the first. Cases that share a copy (--cases, --shard) are
#     each checked right after they run; a case that changed the copy fails, and the cases
#     after it get a fresh one.
# ARGS is the table's command line, split as bash would ($'...' quotes control characters;
# $LONG is a 1100-character path, $MID a 1009-character one). QKV may be a wrapper (valgrind ...) as long as it exits
# with qkv's status.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
TSV=${BAD_INPUTS_TSV:-$HERE/bad_inputs.tsv}

# The cases: "id<TAB>command<TAB>exit<TAB>fragment", skipping comments and blank lines.
cases() { grep -v -e '^#' -e '^[[:space:]]*$' "$TSV"; }

markdown() {
    echo "| case | command line | exit | message contains |"
    echo "|---|---|---|---|"
    cases | while IFS=$'\t' read -r id cmd code frag; do # (a '|' in a cell is written '\|')
        printf '| %s | `qkv %s` | %s | %s |\n' "$id" "${cmd//|/\\|}" "$code" "${frag//|/\\|}"
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
    n=$(cases | wc -l)
    [ "$n" -ge 128 ] || { echo "bad_inputs: $n cases, fewer than the 128 the table has had"; exit 1; }
    echo "bad_inputs: $doc lists all $n cases"
    exit 0 ;;
"" | -*) echo "usage: bad_inputs.sh QKV [--show | --setup DIR | --case ID DIR | --cases DIR <ids | --shard K N DIR] | --markdown | --check-doc DOC" >&2; exit 2 ;;
esac

QKV=$1
MODE=${2:-}
[ "$QKV" = "${QKV#/}" ] && [ -x "$QKV" ] && QKV=$PWD/$QKV

# ---- fixtures: made once into a directory (ctest's bad_inputs_setup), copied for each case ----
setup() { # DIR
    local F=$1
    rm -rf "$F" && mkdir -p "$F" && cd "$F" || exit 1
    if ! $QKV train --task copy --seq-len 4 --vocab 8 --d-model 4 --steps 20 --quiet --out run \
        >setup.txt 2>&1; then
        echo "bad_inputs: cannot train the fixture model:"; cat setup.txt; exit 1
    fi
    rm setup.txt
    mkdir broken emptydir outside
    printf '{"dmodel": 8}\n' >config_unknown.json
    printf '{"d_model": "8"}\n' >config_type.json
    printf '{"d_model": 8, "d-model": 4}\n' >config_dupspell.json
    printf '{"steps": 2} {"steps": 3}\n' >config_trailing.json
    printf '{"seed": 9007199254740993}\n' >config_bigseed.json
    cp "$HERE"/fuzz/corpus/safetensors/*.safetensors broken/
    mkfifo fifo && mkdir fifodir && mkfifo fifodir/model.safetensors
    ln -s run/model.safetensors link.safetensors
    ln run/model.safetensors hard.safetensors
    cp -r run shortmetrics && head -n 1 run/metrics.csv >shortmetrics/metrics.csv
    cp -r run trap && rm -r trap/attention && ln -s ../outside trap/attention
    cp -r run trapplots && ln -s ../outside trapplots/plots
    cp -r run negv
    # Data files (qkv train --data): one good, and one broken way each.
    mkdir data
    printf 'a b c\tb a c\nc a\ta c\nb b a\ta b b\n' >data/good.tsv
    printf 'a b\tb a\na b c b a\nb a\ta b\n' >data/notab.tsv
    printf 'a b\tb a\nb a\ta b\na c\t \n' >data/empty_output.tsv
    printf 'a b\tb a\n\tb a\n' >data/empty_input.tsv
    printf 'a b\tb a\tc\n' >data/two_tabs.tsv
    printf 'a b c d\tb d\nb a\ta b\n' >data/mixed_rules.tsv
    printf 'a b c\tc b a\nb c a\ta c z\n' >data/held_unknown.tsv
    printf 'a b\tb a\nb\0a\ta b\n' >data/nul.tsv
    printf 'a b\tb a\nb \377\ta b\n' >data/bad_utf8.tsv
    printf 'a \300\257\ta b\n' >data/overlong.tsv
    printf 'a b c\t_ _ _\nc a\t_ _\nb b a\t_ _ _\n' >data/no_targets.tsv
    awk 'BEGIN { for (i = 0; i < 2000; i++) printf "a b "; printf "\t";
                 for (i = 0; i < 2000; i++) printf "b a "; print "" }' >data/long.tsv
    # Models with token strings for qkv inspect: one of a data file (datarun), one whose data
    # file and the run's copy of it are gone (datagone), one of translate (trun)
    cp data/good.tsv data/gone.tsv
    for m in datarun datagone; do
        file=data/good.tsv && [ $m = datagone ] && file=data/gone.tsv
        $QKV train --data $file --heldout data/good.tsv --d-model 4 --steps 5 --quiet --out $m \
            >setup.txt 2>&1 || { echo "bad_inputs: cannot train $m:"; cat setup.txt; exit 1; }
    done
    rm data/gone.tsv datagone/data/train.tsv
    $QKV train --task translate --seq-len 4 --vocab 16 --d-model 4 --steps 5 --quiet --out trun \
        >setup.txt 2>&1 || { echo "bad_inputs: cannot train trun:"; cat setup.txt; exit 1; }
    # An encoder-decoder of a data file (xrun: outputs of another length than the inputs), and
    # lines that break training's rules for it or for datarun; a translate input holding a
    # target word where a source word should be (its target is undefined)
    printf 'a b c\tb a\nc a\ta c b\nb b a\ta\n' >data/half.tsv
    $QKV train --data data/half.tsv --heldout data/half.tsv --d-model 4 --steps 1 --quiet \
        --out xrun >setup.txt 2>&1 || { echo "bad_inputs: cannot train xrun:"; cat setup.txt; exit 1; }
    printf 'a b\tb\n\tb a\n' >data/empty_input_cross.tsv
    # A model without the residual stream; files of prompt pairs for qkv patch --pairs: a token
    # the model lacks, a pair's inputs of two lengths (datarun), pairs of two lengths (datarun,
    # xrun), answer = wrong, five fields
    $QKV train --task copy --seq-len 4 --vocab 8 --d-model 4 --steps 1 --no-residual --quiet \
        --out nores >setup.txt 2>&1 || { echo "bad_inputs: cannot train nores:"; cat setup.txt; exit 1; }
    # A modular model for qkv fourier
    $QKV train --task modular --modulus 5 --d-model 4 --mlp 4 --steps 2 --quiet --out modrun \
        >setup.txt 2>&1 || { echo "bad_inputs: cannot train modrun:"; cat setup.txt; exit 1; }
    printf '1 2 3 4\t4 3 2 1\n1 2 3 4\t1 2 9 4\n' >data/pairs_unknown.txt
    printf 'a b c\tb a\n' >data/pairs_lengths.txt
    printf 'a b c\tc b a\nc a\ta c\n' >data/pairs_two_lengths.txt # for datarun and xrun alike
    printf '1 2 3 4\t4 3 2 1\t5\t5\n' >data/pairs_same.txt
    printf '1 2 3 4\t4 3 2 1\t5\t6\t7\n' >data/pairs_fields.txt
    printf 's0 s1 s2 s3\ns0 w1 s2 s3\n' >data/translate_target_word.txt
    # A data model whose held-out set is one example (no other to pair it with or resample
    # from), and a copy model's examples with a token its vocabulary lacks
    printf 'a b\tb a\n' >data/single.tsv
    $QKV train --data data/good.tsv --heldout data/single.tsv --d-model 4 --steps 1 --quiet \
        --out onerun >setup.txt 2>&1 || { echo "bad_inputs: cannot train onerun:"; cat setup.txt; exit 1; }
    printf '1 2 3 4\n1 2 9 4\n' >data/copy_unknown.txt
    rm setup.txt
    # Outputs that already hold something (a refused command must leave them), a link to one;
    # config files whose numbers a whole-number option cannot take
    printf '{}\n' >old.json && ln -s old.json oldlink.json
    printf '{"d_model": 8.5}\n' >config_fraction.json
    printf '{"steps": 1e300}\n' >config_huge.json
    printf '{"lr": 1e999}\n' >config_inf.json
    # Sweeps written (--emit: nothing run) whose one cell's summary.json is cut short, has no
    # status, is a FIFO, a link to itself, a link to nowhere or larger than 4 MiB; whose cell
    # is a link to nowhere; whose sweep.json is a link to itself
    for s in swcut swnostatus swfifo swmd swloop swdangle swbig swcell swjson; do
        $QKV sweep --grid seed=1 --out $s --emit parallel --quiet -- --task copy --steps 1 \
            >setup.txt 2>&1 || { echo "bad_inputs: cannot write sweep $s:"; cat setup.txt; exit 1; }
        mkdir $s/seed=1
    done
    head -c 60 run/summary.json >swcut/seed=1/summary.json
    printf '{"format": "qkv-summary"}\n' >swnostatus/seed=1/summary.json
    mkfifo swfifo/seed=1/summary.json
    ln -s summary.json swloop/seed=1/summary.json
    ln -s no_such_summary.json swdangle/seed=1/summary.json
    truncate -s 5M swbig/seed=1/summary.json
    rmdir swcell/seed=1 && ln -s no_such_cell swcell/seed=1
    rm swjson/sweep.json && ln -s sweep.json swjson/sweep.json
    rmdir swmd/seed=1 && mkdir swmd/sweep.md # a directory where --collect writes a table
    mkdir -p stdir/scaling.png               # and where study --scaling draws its figure
    rm setup.txt
    # Files no qkv writes, made from run/model.safetensors: a negative Adam second moment (one
    # flipped sign bit), metadata words qkv does not know, sparse files of 66 GB whose header
    # tells the truth, or lies, about their size, and a model whose forward overflows.
    python3 - <<'PY' || exit 1
import json, struct
def read(path):
    b = open(path, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]
def write(path, header, data, size=None):
    h = json.dumps(header, separators=(',', ':')).encode()
    h += b' ' * (-len(h) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + data)
        if size: f.truncate(size)
header, data = read('run/model.safetensors')
at = header['optim.v.tok_emb']['data_offsets'][0] + 4 * 3
data2 = bytearray(data); data2[at + 3] |= 0x80
write('negv/model.safetensors', header, bytes(data2))
for key, word in (('optim', 'rmsprop'), ('residual', 'yes'), ('causal', 'maybe'),
                  ('schedule', 'linear'), ('heads', '1.5'), ('warmup', '1e2'),
                  ('steps', '+20'), ('lr', '0x1p-3')):
    h = json.loads(json.dumps(header)); h['__metadata__'][key] = word
    write('broken/meta_%s_%s.safetensors' % (key, word), h, data)
def sparse(path, described, held):
    h = {'tok_emb': {'dtype': 'F32', 'shape': [described // 4], 'data_offsets': [0, described]}}
    hlen = len(json.dumps(h, separators=(',', ':'))) + 7 & ~7
    write(path, h, b'', 8 + hlen + held)
sparse('sparse.safetensors', 66 * 10**9, 66 * 10**9)
sparse('sparse_lie.safetensors', 1024, 66 * 10**9)
# huge.safetensors: run's model with token 4's embedding 3e38, finite (so it loads) but too
# large for the forward: an input holding token 4 gets logits that are not finite
at = header['tok_emb']['data_offsets'][0] + 4 * 4 * 4  # row 4 of (vocab 8, d_model 4)
huge = bytearray(data); huge[at:at + 16] = struct.pack('<4f', *[3e38] * 4)
write('huge.safetensors', header, bytes(huge))
PY
    printf '1 2 3 1\n1 2 3 4\n' >data/copy_token4.txt
    # Analysis files qkv plot must refuse, each in a directory beside run's model (one layer,
    # one head, vocabulary 8; hard links to run's files): counts that overflow, disagree with
    # the arrays or the model, are negative, fractions or strings; rows and cells of the
    # wrong size or type; trailing bytes. an_<case>/<file>.
    python3 - <<'PY' || exit 1
import json, os, shutil
def tree(name):
    shutil.copytree('run', name, copy_function=os.link)
    return name
V = [str(i) for i in range(8)]
square = [[0.5] * 8 for _ in range(8)]
head = {'layer': 1, 'head': 1, 'copying_score': 0.5, 'qk': square, 'ov': square}
good = {'command': 'circuits', 'layers': 1, 'heads_per_layer': 1, 'vocab': V,
        'query_labels': V, 'heads': [head], 'composition': []}
def circuits(case, text=None, **change):
    j = dict(good, **change)
    with open(tree('an_' + case) + '/circuits.json', 'w') as f:
        f.write(text if text is not None else json.dumps(j))
comp = lambda a, b: [{'from': a, 'to': b, 'kind': 'q', 'score': 1}]
circuits('overflow', layers=65537, heads_per_layer=65536, vocab=['0'], query_labels=['0'],
         heads=[], composition=comp('30000.65536', '30001.65536')) # (L - 1) H wraps to 0
circuits('claims_heads', layers=2, heads_per_layer=2000, heads=[],
         composition=comp('1.2000', '2.2000'))
circuits('too_many_heads', heads=[head, head])
circuits('too_few_heads', heads=[])
circuits('negative', heads_per_layer=-1)
circuits('fraction', heads_per_layer=1.5)
circuits('string_count', heads_per_layer='1')
circuits('vocab_count', vocab=1000000)
circuits('vocab_longer', vocab=[str(i) for i in range(2000)])
circuits('short_row', heads=[dict(head, ov=square[:7] + [[0.5] * 7])])
circuits('cell_string', heads=[dict(head, qk=[['x'] * 8] + square[1:])])
circuits('composition_one_layer', composition=comp('1.1', '2.1'))
circuits('key_tokens_outside', key_tokens=[0, 3, 8])  # 8: past the vocabulary's 8 tokens
circuits('key_tokens_falling', key_tokens=[3, 1])
circuits('key_tokens_empty', key_tokens=[])  # no row or column to draw
nine = [str(i) for i in range(9)]  # a vocabulary of 9 beside a model of 8
circuits('vocab_not_model', vocab=nine, query_labels=nine,
         heads=[dict(head, qk=[[0.5] * 9] * 9, ov=[[0.5] * 9] * 9)])
circuits('trailing', text=json.dumps(good) + ' x')
def other(case, name, j):
    with open(tree('an_' + case) + '/' + name, 'w') as f:
        json.dump(dict({'layers': 1, 'heads_per_layer': 1}, **j), f)
other('ablate_head', 'ablate.json',
      {'baseline': {'loss': 2}, 'heads': [{'layer': 1, 'head': 2000, 'loss': 2}]})
other('patch_position', 'patch.json', {'positions': ['0:1', '1:2', '2:3', '3:4'], 'results': [
      {'layer': 1, 'head': 1, 'position': 60000, 'exact': 0.5, 'attribution': 0.5}]})
other('patch_mlp_itself', 'patch.json', {'path': True, 'paths': [  # an MLP does not read its own output
      {'sender': 'mlp 1', 'receiver': 'mlp 1', 'via': 'mlp-pre', 'exact': 0.5, 'attribution': 0.5}]})
other('patch_positions_beyond', 'patch.json', {'positions': ['0:1', '1:2', '2:3', '3:4', '4:5'],
      'results': [{'layer': 1, 'head': 1, 'position': 4, 'exact': 0.5, 'attribution': 0.5}]})
other('attribute_head', 'attribute.json',
      {'logit': 1, 'parts': [{'name': '1.9', 'layer': 1, 'head': 9, 'value': 1}]})
# lens.json: one entry per boundary (after 0, after 1) and per position (4), the parts of the
# final logit at each position; each case breaks one of them
cell = lambda i: {'position': i, 'top': [{'token': '1', 'prob': 0.5}, {'token': '2', 'prob': 0.25}],
                  'rank_of_final': 1}
parts = [{'name': 'embed', 'value': 1}, {'name': '1.1', 'value': 2}, {'name': 'bias', 'value': 0}]
lens = {'command': 'lens', 'heads_per_layer': 1, 'positions': ['0:1', '1:2', '2:3', '3:4'],
        'layers': [{'after': b, 'positions': [cell(i) for i in range(4)]} for b in range(2)],
        'decomposition': [{'position': i, 'token': '1', 'logit': 3, 'parts': parts} for i in range(4)]}
def lens_case(case, **change):
    with open(tree('an_lens_' + case) + '/lens.json', 'w') as f:
        json.dump(dict(lens, **change), f)
lens_case('layers', layers=lens['layers'] + [{'after': 2, 'positions': [cell(i) for i in range(4)]}])
lens_case('position', layers=[lens['layers'][0], {'after': 1, 'positions': [cell(0), cell(60000), cell(2), cell(3)]}])
lens_case('token', layers=[lens['layers'][0], {'after': 1, 'positions': [
    dict(cell(0), top=[{'token': 5, 'prob': 0.5}])] + [cell(i) for i in range(1, 4)]}])
lens_case('prob', layers=[lens['layers'][0], {'after': 1, 'positions': [
    dict(cell(0), top=[{'token': '1', 'prob': 2}])] + [cell(i) for i in range(1, 4)]}])
lens_case('decomposition', decomposition=lens['decomposition'][:3])
lens_case('part', decomposition=[dict(d, parts=[{'name': '1.9', 'value': 1}]) for d in lens['decomposition']])
# 5 positions, each whole, beside a model of 4
lens_case('positions_beyond', positions=lens['positions'] + ['4:5'],
          layers=[{'after': b, 'positions': [cell(i) for i in range(5)]} for b in range(2)],
          decomposition=[dict(lens['decomposition'][0], position=i) for i in range(5)])
PY
    # Files that are there but cannot be read, never taken for missing ones: an analysis file
    # and a run's metrics.csv that link to nowhere, a data run's copy of its file that links
    # to itself, the metrics a resumed run reads back (metrics.csv to nowhere, metrics.jsonl
    # to itself)
    cp -r run an_dangle && ln -s no_such.json an_dangle/lens.json
    cp -r run pg_dangle && rm pg_dangle/metrics.csv && ln -s no_such.csv pg_dangle/metrics.csv
    cp -r datarun dataloop && rm dataloop/data/train.tsv && ln -s train.tsv dataloop/data/train.tsv
    cp -r run rsmetrics && rm rsmetrics/metrics.csv && ln -s no_such.csv rsmetrics/metrics.csv
    cp -r run rsjsonl && rm rsjsonl/metrics.jsonl && ln -s metrics.jsonl rsjsonl/metrics.jsonl
    # a modular run's files that its pictures read (docs/grokking.md, "Pictures"): a summary.json
    # that is not JSON, a metrics.jsonl that links to nowhere
    cp -r modrun modsummary && printf 'not json' >modsummary/summary.json
    cp -r modrun modjsonl && rm modjsonl/metrics.jsonl && ln -s no_such.jsonl modjsonl/metrics.jsonl
    # The fixtures' snapshot, taken once: a case's copy (cp -a keeps every time, mode and
    # link) has the same one, so each case takes only its "after" snapshot
    local before
    before=$(snapshot) && printf '%s\n' "$before" >.before
}

# Every path with its type, size, mode and modification time, and every file's checksum (the
# 66 GB sparse files by their size and time alone: reading them is what qkv must not do).
snapshot() {
    find . -mindepth 1 -printf '%y %p %s %m %T@\n' | LC_ALL=C sort
    find . -type f -size -100M -exec md5sum {} + | LC_ALL=C sort -k2
}

# Runs case $1 in a copy of fixture directory $2; prints FAIL lines; returns 0 if it passed.
# With $3, a copy that cases share (made by shared_copy): the case runs there.
run_case() {
    local want_id=$1 F=$2 shared=${3:-} id cmd want frag found=0
    local W O
    if [ -n "$shared" ]; then
        W=$shared && O=$(mktemp -d "${TMPDIR:-/tmp}/qkv_bad_input.XXXXXX") || return 1
        cp "$shared.before" "$O/before.txt"
    else
        W=$(mktemp -d "${TMPDIR:-/tmp}/qkv_bad_input.XXXXXX") && O=$W.out && mkdir "$O" || return 1
        cp -a "$F"/. "$W"/
        mv "$W/.before" "$O/before.txt" # the fixtures' snapshot (setup), which is the copy's
    fi
    printf -v LONG 'x%.0s' {1..1100} # a path too long for qkv's buffers
    printf -v MID 'long_dir/%.0s' {1..110} && MID+=nowhere.safetensors # fits, but not in a short message
    export LONG MID
    local status=0
    while IFS=$'\t' read -r id cmd want frag; do
        [ "$id" = "$want_id" ] || continue
        found=1
        eval "args=($cmd)"
        (cd "$W" && exec $QKV "${args[@]}" >"$O/out.txt" 2>"$O/err.txt" </dev/null)
        local rc=$?
        if [ -n "$SHOW" ]; then
            printf '%s\t%s\t%s\t%s\n' "$id" "$rc" "$(head -c 300 "$O/err.txt" | tr '\n' '|')" "$(head -c 100 "$O/out.txt")"
            continue
        fi
        local lines msg
        lines=$(wc -l <"$O/err.txt")
        msg=$(head -n 1 "$O/err.txt")
        fail() { echo "FAIL $id: $*"; status=1; }
        if [ "$rc" -ge 128 ]; then fail "crashed (exit $rc): qkv $cmd"
        elif [ "$rc" != "$want" ]; then fail "exit $rc, expected $want: qkv $cmd: $(head -c 300 "$O/err.txt")"
        elif grep -Eq 'Sanitizer|runtime error:|==[0-9]+==' "$O/err.txt"; then
            fail "sanitizer or valgrind report: $(head -c 600 "$O/err.txt")"
        elif [ "$lines" -ne 1 ]; then fail "$lines lines on stderr, expected 1: $(head -c 300 "$O/err.txt")"
        elif [ "${msg#qkv: }" = "$msg" ]; then fail "stderr does not start with 'qkv: ': $msg"
        elif ! grep -Fq -- "$frag" "$O/err.txt"; then fail "message '$msg' lacks '$frag'"
        elif [ -s "$O/out.txt" ]; then fail "printed on stdout: $(head -c 200 "$O/out.txt")"
        fi
        (cd "$W" && snapshot) >"$O/after.txt"
        if ! cmp -s "$O/before.txt" "$O/after.txt"; then
            fail "files were created or changed: $(diff "$O/before.txt" "$O/after.txt" | head -n 6 | tr '\n' ' ')"
            [ -n "$shared" ] && shared_copy "$F" "$shared" # the next case gets the fixtures as made
        fi
    done < <(cases | awk -F'\t' -v id="$want_id" '$1 == id')
    if [ -n "$shared" ]; then rm -rf "$O"; else rm -rf "$W" "$O"; fi
    [ "$found" = 1 ] || { echo "bad_inputs: no case '$want_id'"; return 1; }
    return $status
}

# A copy $2 of fixture directory $1 for cases to share, its snapshot beside it ($2.before).
shared_copy() {
    rm -rf "$2" && mkdir "$2" && cp -a "$1"/. "$2"/ && mv "$2/.before" "$2.before"
}

# The cases named on stdin, one after another in one copy of fixture directory $1.
run_cases() {
    local F=$1 S n=0 failures=0 id
    S=$(mktemp -d "${TMPDIR:-/tmp}/qkv_bad_inputs.XXXXXX") && shared_copy "$F" "$S" || return 1
    while read -r id; do
        n=$((n + 1))
        run_case "$id" "$F" "$S" || failures=$((failures + 1))
    done
    rm -rf "$S" "$S.before"
    echo "bad_inputs: $n cases in a shared copy of the fixtures, $failures failed"
    [ "$failures" -eq 0 ]
}

SHOW=
case "$MODE" in
--setup) setup "${3:?usage: bad_inputs.sh QKV --setup DIR}"; exit 0 ;;
--case) run_case "${3:?usage: bad_inputs.sh QKV --case ID DIR}" "${4:?fixture DIR}"; exit ;;
--cases) run_cases "${3:?usage: bad_inputs.sh QKV --cases DIR <ids}"; exit ;;
--shard)
    K=${3:?usage: bad_inputs.sh QKV --shard K N DIR} N=${4:?N}
    cases | awk -F'\t' -v k="$K" -v n="$N" '(NR - 1) % n == k - 1 { print $1 }' |
        run_cases "${5:?fixture DIR}"
    exit ;;
--show | "") SHOW=${MODE#--} ;;
*) echo "usage: bad_inputs.sh QKV [--show | --setup DIR | --case ID DIR | --cases DIR <ids | --shard K N DIR]" >&2; exit 2 ;;
esac

# Every case, in fixtures made for this run.
F=$(mktemp -d "${TMPDIR:-/tmp}/qkv_bad_fixtures.XXXXXX")
trap 'rm -rf "$F"' EXIT
(setup "$F") || exit 1
n=0 failures=0
while IFS=$'\t' read -r id _; do
    n=$((n + 1))
    run_case "$id" "$F" || failures=$((failures + 1))
done < <(cases)
[ -n "$SHOW" ] && exit 0
echo "bad_inputs: $n cases, $failures failed"
[ "$failures" -eq 0 ]
