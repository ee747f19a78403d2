#!/usr/bin/env bash
# make_corpus.sh QKV - (re)writes the seed corpora of tests/fuzz/corpus/ from a qkv binary:
#   safetensors/  small models written by qkv (every optimizer, tasks, layers and heads), a
#                 grads file, and broken ones derived from them (truncated, NaN, overlaps, ...)
#   cli/          typical command lines of every command, one argument per line
# Inputs named crash-* (crashes the fuzzers found, kept as regression tests) are left alone.
# Needs python3 (json and struct only).
set -euo pipefail
QKV=$(realpath "${1:?usage: make_corpus.sh path/to/qkv}")
HERE=$(cd "$(dirname "$0")" && pwd)
ST=$HERE/corpus/safetensors CLI=$HERE/corpus/cli
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir -p "$ST" "$CLI"
find "$ST" "$CLI" -type f ! -name 'crash-*' -delete

cd "$W"
"$QKV" train --task copy --seq-len 4 --vocab 8 --d-model 4 --steps 2 --quiet --out adam
"$QKV" train --task shift --seq-len 4 --vocab 8 --d-model 4 --heads 2 --layers 2 --residual \
    --optim sgd --steps 2 --quiet --out sgd
"$QKV" train --task lookup --seq-len 5 --d-model 4 --optim momentum --steps 2 --quiet --out momentum
"$QKV" train --task max --seq-len 4 --vocab 8 --d-model 2 --causal --steps 1 --quiet --out max
"$QKV" grads --model adam --out grads.safetensors --batch 1 >/dev/null
cp adam/model.safetensors "$ST/model_adam.safetensors"
cp sgd/model.safetensors "$ST/model_sgd_2layers_2heads.safetensors"
cp momentum/model.safetensors "$ST/model_momentum_lookup.safetensors"
cp max/model.safetensors "$ST/model_max_causal.safetensors"
cp grads.safetensors "$ST/grads.safetensors"
"$QKV" train --task copy --seq-len 4 --vocab 8 --d-model 4 --steps 2 --dtype f64 --quiet --out f64
"$QKV" grads --model f64 --out grads_f64.safetensors --batch 1 >/dev/null
cp f64/model.safetensors "$ST/model_f64.safetensors"
cp grads_f64.safetensors "$ST/grads_f64.safetensors"

python3 - "$ST" adam/model.safetensors <<'PY'
import json, struct, sys
out, src = sys.argv[1], sys.argv[2]
raw = open(src, "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8:8 + n])
data = raw[8 + n:]
meta = header.pop("__metadata__")
tensors = {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
           for k, v in header.items()}

def write(name, blob):
    open("%s/%s.safetensors" % (out, name), "wb").write(blob)

def build(meta, tensors, extra=None, hdr_edit=None):
    h, body, off = {}, b"", 0
    if meta is not None:
        h["__metadata__"] = meta
    for k, (dt, shape, b) in tensors.items():
        h[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}
        body += b
        off += len(b)
    if hdr_edit:
        hdr_edit(h)
    text = json.dumps(h).encode() if extra is None else extra
    return struct.pack("<Q", len(text)) + text + body

def edited(**changes):
    t = dict(tensors)
    t.update(changes)
    return t

w, sh, b = tensors["attn.0.w_v"]
write("truncated_8_bytes", raw[:8])
write("truncated_7_bytes", raw[:7])
write("empty", b"")
write("truncated_header", raw[:8 + n // 2])
write("truncated_data", raw[:-4])
write("header_length_beyond_end", struct.pack("<Q", len(raw)) + raw[8:])
write("header_length_2_64", b"\xff" * 8 + raw[8:])
write("header_not_object", build(meta, tensors, extra=b"[1, 2, 3]     "))
write("header_not_json", build(meta, tensors, extra=b"{\"a\": {\"dtype\": \"F32\", "))
write("nan", build(meta, edited(**{"attn.0.w_v": (w, sh, b[:12] + struct.pack("<f", float("nan")) + b[16:])})))
write("inf", build(meta, edited(**{"attn.0.w_v": (w, sh, struct.pack("<f", float("-inf")) + b[4:])})))
dt, shp, hb = tensors["head.w"]
vals = struct.unpack("<%df" % (len(hb) // 4), hb)
write("wrong_dtype_f64", build(meta, edited(**{"head.w": ("F64", shp, struct.pack("<%dd" % len(vals), *vals))})))
write("dtype_f16", build(meta, edited(**{"head.w": ("F16", [len(hb) // 2], hb)})))
write("wrong_shape", build(meta, edited(**{"tok_emb": (tensors["tok_emb"][0], tensors["tok_emb"][1][::-1], tensors["tok_emb"][2])})))
write("five_dims", build(meta, edited(**{"head.b": ("F32", [1, 1, 2, 2, 2], tensors["head.b"][2])})))
write("zero_dim", build(meta, edited(extra0=("F32", [0, 3], b""))))
write("scalar_f64", build(meta, edited(scalar=("F64", [], struct.pack("<d", 2.5)))))
write("i32_tensor", build(meta, edited(ints=("I32", [2], struct.pack("<2i", -1, 7)))))
t2 = dict(tensors); del t2["attn.0.w_k"]
write("missing_tensor", build(meta, t2))
write("no_metadata", build(None, tensors))
def overlap(h):
    keys = [k for k in h if k != "__metadata__"]
    s, e = h[keys[1]]["data_offsets"]
    h[keys[1]]["data_offsets"] = [s - 4, e - 4]
write("overlap", build(meta, tensors, hdr_edit=overlap))
def gap(h):  # the last tensor 4 bytes later, and 4 more bytes of data: a hole before it
    keys = [k for k in h if k != "__metadata__"]
    s, e = h[keys[-1]]["data_offsets"]
    h[keys[-1]]["data_offsets"] = [s + 4, e + 4]
blob = build(meta, tensors, hdr_edit=gap)
(hl,) = struct.unpack("<Q", blob[:8])
body = blob[8 + hl:]
last = tensors[list(tensors)[-1]][2]
write("gap", blob[:8 + hl] + body[:len(body) - len(last)] + b"\0" * 4 + last)
def negative(h):
    keys = [k for k in h if k != "__metadata__"]
    h[keys[0]]["data_offsets"] = [-8, 8]
write("negative_offset", build(meta, tensors, hdr_edit=negative))
def fractional(h):
    keys = [k for k in h if k != "__metadata__"]
    h[keys[0]]["shape"] = [2.5, 4]
write("fractional_shape", build(meta, tensors, hdr_edit=fractional))
def huge_shape(h):
    keys = [k for k in h if k != "__metadata__"]
    h[keys[0]]["shape"] = [1e15, 1e15, 1e15, 1e15]
write("huge_shape", build(meta, tensors, hdr_edit=huge_shape))
# the same key twice: json.dumps cannot, so by hand
text = json.dumps({"__metadata__": meta}).encode()[:-1] + b', "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}'
write("duplicate_name", struct.pack("<Q", len(text)) + text + struct.pack("<2f", 1, 2))
text = b'{"__metadata__": {"format": "qkv-model"}, "__metadata__": {"task": "copy"}}'
write("duplicate_metadata", struct.pack("<Q", len(text)) + text)
write("metadata_not_string", build(dict(meta, heads=2), tensors))
write("metadata_array", build(["qkv-model"], tensors))
write("metadata_string", build("qkv-model", tensors))
deep = b"[" * 2000 + b"]" * 2000
write("deep_json", struct.pack("<Q", len(deep)) + deep)
for key, value in [("heads", "3"), ("d_model", "9999"), ("vocab", "1"), ("seq_len", "5000"),
                   ("task", "sort"), ("data_rng", "xyz"), ("data_rng", "g" * 64), ("step", "-1"),
                   ("lr", "nan"), ("seed", "1e30"), ("layers", "0"), ("batch", "65537"),
                   ("format", "qkv-grads"), ("steps", "1.5"), ("dtype", "f16"), ("dtype", "f64")]:
    write("meta_%s_%s" % (key, "".join(c if c.isalnum() else "_" for c in value[:8])),
          build(dict(meta, **{key: value}), tensors))
write("meta_huge_model", build(dict(meta, d_model="8192", vocab="1000000", layers="8"), tensors))
m2 = dict(meta); del m2["data_rng"]
write("meta_missing_data_rng", build(m2, tensors))
PY

# ---- command lines: one argument per line, the command first ----
seed() { printf '%s\n' "${@:2}" >"$CLI/$1"; }
seed train_defaults train
seed train_small train --task copy --steps 300 --d-model 32 --out run --quiet
seed train_f64 train --task copy --steps 30 --d-model 16 --dtype f64 --out run --quiet
seed eval_f64 eval --model run --dtype f64 --json
seed grads_f64 grads --model run --out g.safetensors --dtype f64
seed bench_forms bench --config tiny --dtype f64 --backward-form legacy --repeat 1
seed train_all_options train --task lookup --seq-len 9 --vocab 40 --d-model 32 --heads 2 \
    --layers 2 --residual --causal --init-scale 0.7 --optim momentum --lr 0.1 --batch 16 \
    --steps 100 --weight-decay 0.01 --clip 0.5 --schedule constant --warmup 10 --seed 7 \
    --threads 2 --out run --eval-every 10 --save-every 20 --snapshot-every 5 --plot --json
seed train_resume train --resume run --steps 400 --quiet
seed train_resume_model_option train --resume run --d-model 64
seed train_equals train --steps=50 --task=reverse --lr=1e-3
seed train_bad_number train --heads abc
seed train_missing_value train --out run --heads
seed train_unknown_option train --bogus
seed train_short_cluster train -hx
seed train_ambiguous train --s 5
seed train_flag_with_value train --json=yes
seed train_plot_without_out train --plot
seed train_huge train --d-model 8192 --layers 8 --vocab 1000000
seed train_extra train extra
seed train_help train --help
seed eval eval --model run --json --threads 1
seed eval_missing eval
seed grads grads --model run --out g.safetensors --batch 4 --seed 3
seed grads_bad_seed grads --model run --out g.safetensors --seed -3
seed gradcheck gradcheck --tol 1e-6 --seed 2 --json
seed gradcheck_bad_tol gradcheck --tol 2
seed bench bench --config tiny --repeat 5 --threads 1 --seconds 0.5 --json
seed bench_unknown bench --config huge
seed plot plot run --format svg
seed plot_two_dirs plot a b
seed study study softmax --vector 1,2,3 --dy 0.1,0.2,0.3
seed study_scaling study softmax --scaling --samples 100 --keys 8 --max-dk 64 --out s --format svg
seed study_bad_list study softmax --vector 1,,2
seed study_unknown study entropy
seed study_masked study softmax --vector 1,-inf,2
seed plot_html plot run --format html
seed inspect inspect --model run --input "1 2 3 4" --target "1 _ 3 4" --json
seed inspect_out inspect --model run --input "k0:v1 ?k0" --out i.safetensors
seed inspect_missing_input inspect --model run
seed version --version
seed help --help
seed unknown frobnicate
printf 'train\n--task\nco\001py\n--out\nr\tun\n' >"$CLI/train_control_chars"
echo "make_corpus: $(ls "$ST" | wc -l) safetensors and $(ls "$CLI" | wc -l) command-line inputs"
