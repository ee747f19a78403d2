#!/usr/bin/env python3
"""browser_test.py QKV - the page of `qkv plot DIR --format html` in a real browser.

Trains five small models with snapshots (reverse: 2 layers x 2 heads; shift: causal, 1 x 3;
lookup: 1 x 1, labels such as 2:k1:v3; translate: cross-attention, 8 queries x 16 keys; a data
file whose outputs are half its inputs, tokens such as <s> and i|j), and makes a sixth directory
of cross-attention maps (3 queries x 5 keys),
writes their pages, and drives headless Chromium through chromedriver's W3C WebDriver API
(plain HTTP, urllib only). For each page it checks that:
  - the page loads with no console error (and no failed request: it must need no network);
  - clicking a head in the grid selects it (the title and the grid's highlight follow);
  - moving the slider with the keyboard changes what is drawn (the heatmap and the head view);
  - clicking a query token highlights its row;
  - a screenshot is not blank (many distinct colours);
  - for translate and the data file, the map is n_q x n_k with the run's query and key labels,
    in the page's data and in the head view;
  - with the files of qkv ablate, patch (by head and by head and position), attribute,
    circuits and lens --out in the run (the 2 x 2 reverse run), the analysis views draw one
    cell per head (ablation, patching), per head and position, one bar per part, a V x V OV
    and an R x V QK circuit, (L-1)H x (L-1)H composition scores, (L+1) x positions lens cells
    (each its top token and probability, as lens.json says) and the parts of one position's
    final logit; a click on a head in a view selects it and redraws the circuits for it, a
    click on a lens position shows its parts; the save buttons give a PNG (its pixels drawn) and a
    well-formed SVG holding the view's cells; no two labels of a view overlap and none is
    clipped, there and in crowded views (128 positions of long labels, 130 bars);
  - on copies of the 2 x 2 run (trained with a residual stream) holding other files: the graph
    of `patch --path` draws one edge per path, its width ordered as |share| (proportional above
    the hairlines), its colour the legend's for its via (q, k, v, logits), dashed when the share
    is negative, its numbers in its tooltip; the threshold control hides the small paths; a
    click on a head selects it; it saves as PNG and SVG (every edge); and so for the paths of a
    2 x 2 model with MLPs and LayerNorms, whose MLPs are nodes of their own (via mlp-pre). The patching map of
    `--site k --over key-position` has a row per head and a column per key position (labelled
    by its token), the ablation of `--site resid-pre --over layer-position` a row per layer and
    a column per position; labels neither overlap nor clip at 1400 x 1000 and 1000 x 800;
  - on a padded data file (self-attention, examples of 2 to 7 tokens), the padding queries and
    keys are marked in the page's data, greyed in the head view and hatched in the heatmap,
    and the vocabulary's padding token is hatched in the circuits; a one-layer model has no
    induction chart and its score charts run from 0 to 1;
  - tokens `</script><b>` and `<img/src/onerror=P()>` in that file run no script and add no
    element: they are drawn as text;
  - on a modular run (P = 13, 4 heads, an MLP of 64: seconds), and on a copy whose summary.json
    names every phase, the grokking views (docs/grokking.md, "Pictures"): the page's losses,
    norms and phases are metrics.jsonl's and summary.json's, the neurons' clusters qkv
    fourier's and the attention from = qkv inspect's; the four loss curves are drawn and the
    phases that ended (only those) are shaded from and to their steps, the key saying where
    the run stopped; each heatmap image's pixels are its numbers' colours (a up, b across);
    every title names the run and its task; the attention's view (images inside its SVG) saves
    as PNG and SVG.
Exits 77 (ctest: skipped) when chromium or chromedriver is not installed, unless
QKV_REQUIRE_BROWSER=1 (CI installs them with scripts/setup.sh, so there it fails instead).
"""
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zlib
import xml.etree.ElementTree as ET

QKV = sys.argv[1] if len(sys.argv) > 1 else sys.exit("usage: browser_test.py path/to/qkv")
fails = 0


def fail(msg):
    global fails
    fails += 1
    print("FAIL:", msg)


def find(*names):
    for n in names:
        p = shutil.which(n)
        if p:
            return p
    return None


chromium = find("chromium", "chromium-browser", "google-chrome")
driver = find("chromedriver")
if not chromium or not driver:
    missing = "chromium" if not chromium else "chromedriver (Debian: chromium-driver)"
    if os.environ.get("QKV_REQUIRE_BROWSER") == "1":
        print(f"browser_test: {missing} is not installed, and QKV_REQUIRE_BROWSER=1")
        sys.exit(1)
    print(f"browser_test: {missing} is not installed; skipped")
    sys.exit(77)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class WebDriver:
    """The few W3C WebDriver commands the test needs, over HTTP."""

    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"
        self.sid = None

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return json.loads(r.read() or b"{}").get("value")
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"{method} {path}: {e.code} {e.read()[:300]!r}")

    def s(self, method, path, body=None):
        return self.call(method, f"/session/{self.sid}{path}", body)

    def start(self):
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:loggingPrefs": {"browser": "ALL"},
            "goog:chromeOptions": {"binary": chromium, "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900", "--force-device-scale-factor=1"]}}}}
        self.sid = self.call("POST", "/session", caps)["sessionId"]

    def run(self, script, *args):
        return self.s("POST", "/execute/sync", {"script": script, "args": list(args)})

    def element(self, css):
        v = self.s("POST", "/element", {"using": "css selector", "value": css})
        return next(iter(v.values()))

    def run_async(self, script, *args):
        return self.s("POST", "/execute/async", {"script": script, "args": list(args)})

    def click(self, css):
        self.s("POST", f"/element/{self.element(css)}/click", {})

    def logs(self):
        return self.s("POST", "/se/log", {"type": "browser"}) or []


def png_colours(png):
    """The number of distinct colours of a PNG (8-bit RGB or RGBA, not interlaced)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w = 8, b"", 0
    while pos < len(png):
        n, kind = struct.unpack(">I4s", png[pos:pos + 8])
        chunk = png[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and ctype in (2, 6), (depth, ctype)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + n
    raw, stride, prev, colours = zlib.decompress(idat), w * bpp, bytearray(w * bpp), set()
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        if y % 4 == 0:  # every 4th row is plenty to tell a drawing from a blank page
            colours.update(bytes(line[i:i + 3]) for i in range(0, stride, bpp * 2))
        prev = line
    return len(colours)


def drawn(wd):
    """What the head is drawn as now: the heatmap's pixels and the head view's lines."""
    return wd.run("return [document.getElementById('heatmap').toDataURL(),"
                  " document.getElementById('headview').innerHTML];")


def check_page(wd, page, name, layers, heads):
    wd.s("POST", "/url", {"url": "file://" + page})
    for _ in range(50):
        if wd.run("return document.readyState") == "complete":
            break
        time.sleep(0.1)
    errors = [e for e in wd.logs() if e.get("level") == "SEVERE"]
    if errors:
        fail(f"{name}: console errors on load: {errors[:3]}")
    if not wd.run("return !!(window.qkv && window.qkv.data)"):
        fail(f"{name}: the page has no data")
        return
    # a head can be selected
    last = f"#cell-{layers}-{heads}"
    wd.s("POST", f"/element/{wd.element(last)}/click", {})
    title = wd.run("return document.getElementById('head-title').textContent")
    if title != f"layer {layers}, head {heads}":
        fail(f"{name}: clicking {last} gave the title {title!r}")
    sel = wd.run("return [...document.querySelectorAll('.cell.selected')].map(e => e.id)")
    if sel != [last[1:]]:
        fail(f"{name}: the grid highlights {sel}, not {last[1:]}")
    # clicking a query token highlights its row (in the head view and the heatmap)
    heat = wd.run("return document.getElementById('heatmap').toDataURL()")
    wd.s("POST", f"/element/{wd.element('#q-tok-1')}/click", {})
    active = wd.run("return [...document.querySelectorAll('#headview .tok.active')].map(e => e.id)")
    if active != ["q-tok-1"]:
        fail(f"{name}: clicking query 1 highlights {active}")
    if wd.run("return document.getElementById('heatmap').toDataURL()") == heat:
        fail(f"{name}: clicking query 1 left the heatmap as it was")
    # the slider changes what is drawn
    before, label0 = drawn(wd), wd.run("return document.getElementById('step-label').textContent")
    slider = wd.element("#slider")
    wd.s("POST", f"/element/{slider}/click", {})
    wd.s("POST", f"/element/{slider}/value", {"text": "\ue011"})  # Home: the first snapshot
    after, label1 = drawn(wd), wd.run("return document.getElementById('step-label').textContent")
    if label0 == label1:
        fail(f"{name}: the slider did not move ({label0!r})")
    if before[0] == after[0] or before[1] == after[1]:
        fail(f"{name}: moving the slider from {label0!r} to {label1!r} did not change the "
             f"heatmap ({before[0] != after[0]}) and the head view ({before[1] != after[1]})")
    errors = [e for e in wd.logs() if e.get("level") == "SEVERE"]
    if errors:
        fail(f"{name}: console errors while used: {errors[:3]}")
    shot = base64.b64decode(wd.s("GET", "/screenshot"))
    if os.environ.get("QKV_BROWSER_SHOTS"):  # a directory to keep the screenshots in
        with open(os.path.join(os.environ["QKV_BROWSER_SHOTS"], name + ".png"), "wb") as f:
            f.write(shot)
    colours = png_colours(shot)
    if colours < 30:
        fail(f"{name}: the screenshot has {colours} colours: blank")
    print(f"browser_test: {name}: selected {title!r}, slider {label0!r} -> {label1!r}, "
          f"{colours} colours on screen")


def check_labels(wd, name, dat):
    """The page draws the run's n_q x n_k maps with the run's labels: its data, the head view's
    query and key tokens, and the heatmap's size."""
    lines = [l.split() for l in open(dat) if not l.startswith("#")]
    keys, queries = lines[0][1:], [r[0] for r in lines[1:]]
    got = wd.run("const m = window.qkv.data.attention[0]; return [m.q, m.k, m.w.length, m.w[0].length];")
    if got != [queries, keys, len(queries), len(keys)]:
        fail(f"{name}: the page's map is {got[2]} x {got[3]} with labels {got[0]} / {got[1]}, not "
             f"{len(queries)} x {len(keys)} with {queries} / {keys}")
    wd.run("window.qkv.select(0, 0);")
    shown = wd.run("const t = (s) => [...document.querySelectorAll(`#headview text.tok[id^='${s}-tok-']`)]"
                   ".map(e => e.textContent); return [t('q'), t('k')];")
    if shown != [queries, keys]:
        fail(f"{name}: the head view shows queries {shown[0]} and keys {shown[1]}")
    sub = wd.run("return document.getElementById('subtitle').textContent")
    if len(queries) != len(keys) and f"{len(queries)} queries over {len(keys)} keys" not in sub:
        fail(f"{name}: the subtitle {sub!r} does not say {len(queries)} queries over {len(keys)} keys")
    print(f"browser_test: {name}: {len(queries)} x {len(keys)} map labelled {queries[0]} .. / {keys[0]} ..")


def check_score_charts(wd, name, heads_per_chart):
    """The head scores of metrics.csv are grouped: one chart per score, a line per head (none
    for an encoder-decoder, whose cross-attention has no head scores)."""
    charts = wd.run("return [...document.querySelectorAll('#metrics svg')].map(s => "
                    "[s.querySelector('text').textContent, s.querySelectorAll('polyline').length]);")
    scores = {t: n for t, n in charts if t in ("previous-token score", "duplicate-token score", "induction score")}
    want = {t: heads_per_chart for t in ("previous-token score", "duplicate-token score", "induction score")} \
        if heads_per_chart else {}
    if scores != want:
        fail(f"{name}: the head-score charts are {scores}, not {want} (all charts: {charts})")

def saved_file(wd, css):
    """Clicks save button css and returns (name, bytes) of what it saved (window.qkv.saved)."""
    n = wd.run("return window.qkv.saved.length")
    wd.click(css)
    return wd.run_async("""
        const done = arguments[arguments.length - 1], n = arguments[0];
        const wait = (k) => {
          const s = window.qkv.saved;
          if (s.length > n) {
            const r = new FileReader(), last = s[s.length - 1];
            r.onload = () => done([last.name, r.result.split(',')[1]]);
            r.readAsDataURL(last.blob);
          } else if (k > 100) done(null); else setTimeout(() => wait(k + 1), 50);
        };
        wait(0);""", n)


def png_size(png):
    return struct.unpack(">II", png[16:24])


def check_analysis(wd, name, layers, heads, parts, vocab, qrows, positions, lens):
    """The analysis views of a run holding ablate.json, patch.json (by head and position),
    attribute.json and circuits.json: their cells, a click on a head, the save buttons."""
    wd.run("window.qkv.select(0, 0);")
    count = ("const n = (id, sel) => document.querySelectorAll(`#svg-${id} ${sel}`).length;"
             "return {ablate: n('ablate', 'rect.hcell'), patch: n('patch', 'rect.hcell'),"
             " attribute: n('attribute', 'rect.bar'), qk: n('circuit-qk', 'rect.hcell'),"
             " ov: n('circuit-ov', 'rect.hcell'), q: n('composition-q', 'rect.hcell'),"
             " k: n('composition-k', 'rect.hcell'), v: n('composition-v', 'rect.hcell'),"
             " lens: n('lens', 'rect.hcell'), lensParts: n('lens-parts', 'rect.bar'),"
             " hidden: document.getElementById('analysis-section').hidden};")
    got = wd.run(count)
    c = (layers - 1) * heads
    want = {"ablate": layers * heads, "patch": layers * heads * positions, "attribute": len(parts),
            "qk": qrows * vocab, "ov": vocab * vocab, "q": c * c, "k": c * c, "v": c * c,
            "lens": (layers + 1) * positions, "lensParts": len(lens["decomposition"][-1]["parts"]),
            "hidden": False}
    if got != want:
        fail(f"{name}: the analysis views have {got}, not {want}")
    # a click on head (layers, heads) in the ablation grid selects it and redraws its circuits
    # (parts: the attribution's parts, to find the bar of head 1 of the last layer)
    title = lambda: wd.run("return document.querySelector('#svg-circuit-ov text.title').textContent")
    ov = lambda: wd.run("return [...document.querySelectorAll('#svg-circuit-ov rect.hcell')].map(r => r.getAttribute('fill')).join()")
    before_title, before = title(), ov()
    wd.click(f'#svg-ablate rect.hcell[data-i="{layers - 1}"][data-j="{heads - 1}"]')
    head = wd.run("return document.getElementById('head-title').textContent")
    if head != f"layer {layers}, head {heads}":
        fail(f"{name}: a click on head {layers}.{heads} in the ablation grid selected {head!r}")
    if title() != f"OV circuit of layer {layers}, head {heads}" or ov() == before:
        fail(f"{name}: the click left the OV circuit as it was ({before_title!r} -> {title()!r})")
    chosen = wd.run("return document.querySelectorAll('#svg-ablate rect.chosen').length")
    if chosen != 1:
        fail(f"{name}: the ablation grid outlines {chosen} heads, not 1")
    # and a click on a head's bar in the attribution
    bar = [k for k, p in enumerate(parts) if p["layer"] == layers and p["head"] == 1][0]
    wd.click(f'#svg-attribute rect.bar[data-k="{bar}"]')
    head = wd.run("return document.getElementById('head-title').textContent")
    if head != f"layer {layers}, head 1":
        fail(f"{name}: a click on the bar of head {layers}.1 selected {head!r}")
    # the lens: each cell shows its top token and probability, as lens.json says; a click on
    # position 0 shows its parts, and a click on the bar of head (layers).1 selects that head
    shown = wd.run("return [...document.querySelectorAll('#svg-lens text.celltext')].map(t => t.textContent)")
    want_text = [x for b in lens["layers"] for p in b["positions"]
                 for x in (p["top"][0]["token"], "%.2f" % float("%.4g" % p["top"][0]["prob"]))]
    if shown != want_text:
        fail(f"{name}: the lens cells show {shown[:8]}.., not {want_text[:8]}..")
    wd.click('#svg-lens rect.hcell[data-i="0"][data-j="0"]')
    title = wd.run("return document.querySelector('#svg-lens-parts text.title').textContent")
    if not title.startswith("position %s:" % lens["positions"][0]):
        fail(f"{name}: a click on lens position 0 shows the parts titled {title!r}")
    values = wd.run("return [...document.querySelectorAll('#svg-lens-parts rect.bar title')].map(t => t.textContent)")
    want_values = ["%s: %s" % (q["name"], "%.4g" % q["value"]) for q in lens["decomposition"][0]["parts"]]
    if [v.split(":")[0] for v in values] != [w.split(":")[0] for w in want_values]:
        fail(f"{name}: the lens parts of position 0 are {values}, not {want_values}")
    clipped = wd.run("""const out = [];
        for (const id of ['svg-lens', 'svg-lens-parts']) {
          const s = document.getElementById(id), t = s.querySelector('text.title');
          if (t.getBoundingClientRect().right > s.getBoundingClientRect().right + 1) out.push(id);
        }
        return out;""")
    if clipped:
        fail(f"{name}: the titles of {clipped} are clipped")
    bar = [k for k, q in enumerate(lens["decomposition"][0]["parts"]) if q["name"] == f"{layers}.1"][0]
    wd.click(f'#svg-lens-parts rect.bar[data-k="{bar}"]')
    head = wd.run("return document.getElementById('head-title').textContent")
    if head != f"layer {layers}, head 1":
        fail(f"{name}: a click on the lens bar of head {layers}.1 selected {head!r}")
    check_saves(wd, name, (("ablate", want["ablate"]), ("circuit-ov", want["ov"]), ("attribute", 0),
                           ("lens", want["lens"]), ("lens-parts", 0)))
    check_labels_fit(wd, name)
    print(f"browser_test: {name}: analysis views {want}, head click and PNG/SVG saves checked")


def check_view_titles(wd, name, d):
    """What the analysis views of run d say they are made of, and how they mark a choice: each
    view's title and subtitle (part of a saved image) name the input, the position, the token,
    the answer and wrong tokens, or the examples; the captions hold the whole input; the lens
    marks with '*' the positions without a target; the selected head's outline in a bar chart
    hugs its bar (never the plot's height, a bar at the axis maximum); an upright axis label
    starts below the titles however short its view."""
    files = {k: json.load(open(os.path.join(d, k + ".json"))) for k in ("ablate", "patch", "attribute", "lens")}
    wd.run("window.qkv.select(0, 0);")
    texts = wd.run("""const out = {};
        for (const id of ['ablate', 'patch', 'attribute', 'lens', 'lens-parts']) {
          const s = document.getElementById('svg-' + id);
          out[id] = [s.querySelector('text.title').textContent,
                     [...s.querySelectorAll('text.subtitle')].map(t => t.textContent).join(' / '),
                     document.querySelector('#view-' + id + ' figcaption span.caption').textContent];
        }
        return out;""")
    p, a, z = files["patch"], files["attribute"], files["lens"]
    want = {"ablate": ["over the held-out set"],
            "patch": [f"position {p['positions'][p['position']]}", f"answer {p['answer']}", f"wrong {p['wrong']}",
                      f"clean {p['tokens'][0]} {p['tokens'][1]}", f"corrupt {p['corrupt_tokens'][0]} {p['corrupt_tokens'][1]}"],
            "attribute": [f"the logit of {a['token']} at position {a['positions'][a['position']]}",
                          f"input: {a['tokens'][0]} {a['tokens'][1]}"],
            "lens": [f"input: {z['tokens'][0]} {z['tokens'][1]}"], "lens-parts": [f"input: {z['tokens'][0]}"]}
    for view, words in want.items():
        title, sub, caption = texts[view]
        for w in words:
            if w not in title + " / " + sub:
                fail(f"{name}: the {view} view's title and subtitle ({title!r}, {sub!r}) do not say {w!r}")
    for view, j in (("patch", p), ("attribute", a), ("lens", z)):
        if " ".join(j["tokens"]) not in texts[view][2]:
            fail(f"{name}: the {view} view's caption does not hold its input: {texts[view][2]!r}")
    check_lens_marks(wd, name, z)
    # head 1.1 is selected: its outline in the attribution and the lens's parts hugs its bar
    for view, parts in (("attribute", a["parts"]), ("lens-parts", z["decomposition"][-1]["parts"])):
        k = [i for i, q in enumerate(parts) if q.get("name") == "1.1" or (q.get("layer"), q.get("head")) == (1, 1)]
        if view == "lens-parts":
            wd.click(f'#svg-lens rect.hcell[data-i="0"][data-j="{len(z["positions"]) - 1}"]')
        boxes = wd.run("""const s = document.getElementById('svg-' + arguments[0]);
            const box = (e) => { const r = e.getBoundingClientRect(); return [r.top, r.bottom]; };
            return [[...s.querySelectorAll('rect.chosen')].map(box), box(s.querySelector(`rect.bar[data-k="${arguments[1]}"]`))];""",
                       view, k[0] if k else -1) if k else None
        if not boxes or len(boxes[0]) != 1:
            fail(f"{name}: the {view} view outlines {boxes and boxes[0]} for head 1.1")
        elif boxes[0][0][0] < boxes[1][0] - 3 or boxes[0][0][1] > boxes[1][1] + 3:
            fail(f"{name}: the {view} view's outline of head 1.1 spans {boxes[0][0]}, not its bar's {boxes[1]}")
    # upright axis labels start below the titles
    bad = wd.run("""const out = [];
        for (const s of document.querySelectorAll('figure.view svg')) {
          const heads = [...s.querySelectorAll('text.title, text.subtitle')].map(t => t.getBoundingClientRect().bottom);
          for (const t of s.querySelectorAll('text.axis[transform*="rotate"]'))
            if (heads.length && t.getBoundingClientRect().top < Math.max(...heads) + 1) out.push(`${s.id}: ${t.textContent}`);
        }
        return out;""")
    if bad:
        fail(f"{name}: upright axis labels reach the titles: {bad}")
    print(f"browser_test: {name}: the views name their inputs, position and tokens; outlines hug their bars")


def check_lens_marks(wd, name, z):
    """The lens view's column labels: each position's, marked '*' where lens.json's decomposition
    says it has no target in training (as qkv lens's table marks it), and the x label says so."""
    cols = wd.run("return [...document.querySelectorAll('#svg-lens text.collab')].map(t => t.textContent)")
    marked = [str(c) + ("*" if e.get("has_target") is False else "") for c, e in zip(z["positions"], z["decomposition"])]
    xlabel = wd.run("return [...document.querySelectorAll('#svg-lens text.axis')].map(t => t.textContent).join('|')")
    if cols != marked:
        fail(f"{name}: the lens's positions are labelled {cols}, not {marked}")
    elif any(c.endswith("*") for c in marked) != ("no target" in xlabel):
        fail(f"{name}: the lens's x label ({xlabel!r}) does not say what '*' marks")
    else:
        n = sum(c.endswith("*") for c in marked)
        print(f"browser_test: {name}: the lens marks {n} position{'' if n == 1 else 's'} without a target")


def check_saves(wd, name, views):
    """The save buttons of each (view, cells): a PNG of the drawn view (twice its size), a
    well-formed SVG of it holding its `cells` cells (heatmap cells, or a graph's edges)."""
    for view, cells in views:
        size = wd.run(f"const s = document.getElementById('svg-{view}'); return [Number(s.getAttribute('width')), Number(s.getAttribute('height'))];")
        got = saved_file(wd, f"#save-{view}-png")
        if not got:
            fail(f"{name}: save PNG of {view} saved nothing")
        else:
            png = base64.b64decode(got[1])
            if got[0] != f"{view}.png" or png[:8] != b"\x89PNG\r\n\x1a\n":
                fail(f"{name}: save PNG of {view} gave {got[0]!r}, starting {png[:8]!r}")
            elif png_size(png) != (2 * size[0], 2 * size[1]) or png_colours(png) < 8:
                fail(f"{name}: the PNG of {view} is {png_size(png)} with {png_colours(png)} colours, "
                     f"not {2 * size[0]} x {2 * size[1]} drawn")
        got = saved_file(wd, f"#save-{view}-svg")
        if not got:
            fail(f"{name}: save SVG of {view} saved nothing")
            continue
        text = base64.b64decode(got[1]).decode()
        try:
            root = ET.fromstring(text)
        except ET.ParseError as e:
            fail(f"{name}: the SVG of {view} is not well-formed: {e}")
            continue
        rects = [r for r in root.iter("{http://www.w3.org/2000/svg}rect") if "hcell" in r.get("class", "")]
        rects += [e for e in root.iter("{http://www.w3.org/2000/svg}path") if e.get("class", "").split()[:1] == ["edge"]]
        if got[0] != f"{view}.svg" or not root.tag.endswith("svg") or (cells and len(rects) != cells):
            fail(f"{name}: the SVG of {view} ({got[0]!r}) holds {len(rects)} cells, not {cells}")


def check_paths(wd, name, patch, ablate):
    """The path-patching graph (patch.json of qkv patch --path): one edge per path, its width
    |share| (the exact one; ordered as the shares, proportional above the hairlines), its
    colour the legend's for its via, dashed when negative, its numbers in its tooltip; the
    threshold control hides the small ones; a click on a head selects it; the PNG and SVG
    saves. And ablate.json of the stream (resid-pre by layer and position): a row per layer,
    a column per position."""
    paths = patch["paths"]
    share = lambda e: e["exact"] if e["exact"] is not None else e["attribution"]
    wd.run("window.qkv.select(0, 0);")
    edges = wd.run("""return [...document.querySelectorAll('#svg-paths path.edge')].map(e => [Number(e.dataset.k),
                        Number(e.getAttribute('stroke-width')), e.getAttribute('stroke'), e.dataset.via,
                        !!e.getAttribute('stroke-dasharray'), e.querySelector('title').textContent]);""")
    keys = wd.run("return Object.fromEntries([...document.querySelectorAll('#svg-paths line.legend-key')]"
                  ".map(e => [e.dataset.via, e.getAttribute('stroke')]))")
    if sorted(k for k, *_ in edges) != list(range(len(paths))):
        fail(f"{name}: the path graph has edges {sorted(k for k, *_ in edges)}, not one for each of {len(paths)} paths")
        return
    mlp = any(e["via"] == "mlp-pre" for e in paths)  # a model with MLPs: "mlp L" ends, via mlp-pre
    vias = ["q", "k", "v"] + (["mlp-pre"] if mlp else [])
    if sorted(keys) != sorted(vias + ["logits", "neg"]) or len({keys[v] for v in vias} | {keys["logits"]}) != len(vias) + 1:
        fail(f"{name}: the path graph's legend keys are {keys}, not a colour for each of {vias} and the logits and a dashed one")
        return
    mlps = wd.run("return [...document.querySelectorAll('#svg-paths g.mnode')].map(g => g.textContent)")
    if mlp and mlps != ["the MLP of layer 1mlp 1in", "the MLP of layer 2mlp 2in"]:
        fail(f"{name}: the path graph's MLP nodes are {mlps}")
    by_share = sorted(edges, key=lambda e: abs(share(paths[e[0]])))
    widths = [e[1] for e in by_share]
    if widths != sorted(widths) or widths[-1] < 4 * widths[0]:
        fail(f"{name}: the edges' widths {widths} are not ordered as their |share|s")
    wide = [(e[1], abs(share(paths[e[0]]))) for e in edges if e[1] > 1.3]
    if wide and max(w / a for w, a in wide) > 1.01 * min(w / a for w, a in wide):
        fail(f"{name}: the widths of the wide edges are not proportional to |share|: {wide}")
    for k, w, colour, via, dashed, tip in edges:
        e = paths[k]
        want = e["via"] if e["receiver"] != "logits" else "logits"
        if via != want or colour != keys[want] or dashed != (share(e) < 0):
            fail(f"{name}: the edge of {e} is {colour} ({via}), dashed {dashed}: not the legend's {keys[want]}")
        said = [float(tip.split(f"{what} ")[1].split(",")[0]) for what in ("exact", "attribution")]
        if not tip.startswith(f"{e['sender']} \u2192 {e['receiver']}") or \
                any(abs(a - b) > 1e-3 * abs(b) for a, b in zip(said, (e["exact"], e["attribution"]))):
            fail(f"{name}: the tooltip of {e} is {tip!r}")
    # the control: paths under |share| 0.05 hidden
    shown = wd.run("const t = document.getElementById('path-threshold'), m = document.getElementById('path-small');"
                   "t.value = '0.05'; m.value = 'hide'; m.dispatchEvent(new Event('change'));"
                   "return [...document.querySelectorAll('#svg-paths path.edge')].map(e => Number(e.dataset.k)).sort((a, b) => a - b);")
    if shown != [k for k, e in enumerate(paths) if abs(share(e)) >= 0.05]:
        fail(f"{name}: with paths under 0.05 hidden the graph shows {shown}")
    wd.run("const t = document.getElementById('path-threshold'), m = document.getElementById('path-small');"
           "t.value = '0.01'; m.value = 'thin'; m.dispatchEvent(new Event('change'));")
    # a click on head 2.1 selects it
    wd.click('#svg-paths g.node[data-layer="2"][data-head="1"] rect')
    head = wd.run("return document.getElementById('head-title').textContent")
    chosen = wd.run("return [...document.querySelectorAll('#svg-paths rect.chosen')].map(r => r.parentNode.dataset.layer + '.' + r.parentNode.dataset.head)")
    if head != "layer 2, head 1" or chosen != ["2.1"]:
        fail(f"{name}: a click on head 2.1 in the path graph selected {head!r}, outlined {chosen}")
    check_saves(wd, name, (("paths", len(paths)),))
    # ablate.json of resid-pre: a row per layer, a column per position, a cell per row of the file
    rows = ablate["heads"]
    T = max(e["position"] for e in rows) + 1
    got = wd.run("""const s = document.getElementById('svg-ablate'), t = (c) => [...s.querySelectorAll('text.' + c)].map(e => e.textContent);
                    return [s.querySelector('text.title').textContent, t('rowlab'), t('collab'),
                            s.querySelectorAll('rect.hcell').length, s.querySelectorAll('rect.hcell:not(.none)').length];""")
    want = ["ablation of resid-pre: loss increase, layer x position", ["1", "2"], [str(t) for t in range(T)], 2 * T, len(rows)]
    if got != want:
        fail(f"{name}: the resid-pre ablation view is {got}, not {want}")
    print(f"browser_test: {name}: {len(edges)} paths drawn{' (MLPs among them)' if mlp else ''} (widths by |share|, colours by via, legend {sorted(keys)}), "
          f"threshold, head click, PNG/SVG saves; resid-pre ablation 2 x {T}")


def check_sites(wd, name, patch):
    """patch.json of k by key position: a row per head, a column per key position labelled by
    its token, a cell per row of the file, titled with the site."""
    tokens, rows = patch["tokens"], patch["results"]
    got = wd.run("""const s = document.getElementById('svg-patch'), t = (c) => [...s.querySelectorAll('text.' + c)].map(e => e.textContent);
                    return [s.querySelector('text.title').textContent, t('rowlab'), t('collab'),
                            s.querySelectorAll('rect.hcell').length, s.querySelectorAll('rect.hcell:not(.none)').length,
                            [...s.querySelectorAll('text.axis')].map(e => e.textContent).slice(0, 2)];""")
    T = len(tokens)
    want = ["activation patching of k: layer.head x key position", ["1.1", "1.2", "2.1", "2.2"],
            [f"{t}:{tokens[t]}" for t in range(T)], 4 * T, len(rows), ["key position", "layer.head"]]
    if got != want:
        fail(f"{name}: the patching view of k by key position is {got}, not {want}")
    print(f"browser_test: {name}: patching of k, 4 heads x {T} key positions")


def check_neurons(wd, name, ablate):
    """ablate.json of an MLP's neurons (mlp-post, one row per neuron): a row per layer, a
    column per neuron, a cell per row of the file, titled with the site."""
    rows = ablate["heads"]
    N = max(e["neuron"] for e in rows) + 1
    got = wd.run("""const s = document.getElementById('svg-ablate'), t = (c) => [...s.querySelectorAll('text.' + c)].map(e => e.textContent);
                    return [s.querySelector('text.title').textContent, t('rowlab'), t('collab'),
                            s.querySelectorAll('rect.hcell').length, s.querySelectorAll('rect.hcell:not(.none)').length];""")
    want = ["ablation of mlp-post: loss increase, layer x neuron", ["layer 1", "layer 2"],
            [str(n) for n in range(N)], 2 * N, len(rows)]
    if got != want:
        fail(f"{name}: the ablation view of MLP neurons is {got}, not {want}")
    print(f"browser_test: {name}: ablation of mlp-post, 2 layers x {N} neurons")


def check_grokking(wd, name, d, inspect, saves):
    """A modular run's views (docs/grokking.md, "Pictures"): the page's data is the run's
    (metrics.jsonl, summary.json, the model's neurons and attention, as qkv fourier and qkv
    inspect give them); the losses' curves and the shaded phases sit at the evaluations'
    steps; each heatmap's pixels are its numbers; every title names the run and its task;
    the views save as PNG and SVG."""
    rows = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))]
    summary = json.load(open(os.path.join(d, "summary.json")))["grokking"]
    fourier = json.loads(subprocess.run([QKV, "fourier", d, "--json"], check=True, capture_output=True).stdout)
    g = wd.run("return window.qkv.data.grokking")
    if not g:
        fail(f"{name}: the page has no grokking data")
        return
    P, F = g["modulus"], g["modulus"] // 2
    close = lambda a, b: (a is None and b is None) or (a is not None and b is not None and abs(a - b) <= 1e-3 * abs(b) + 1e-9)
    losses = {"train": "train_set_loss", "test": "heldout_loss", "restricted": "restricted_loss", "excluded": "excluded_loss"}
    if g["evals"]["step"] != [r["step"] for r in rows] or not all(
            close(g["evals"][k][i], r[c]) for k, c in losses.items() for i, r in enumerate(rows)) or not all(
            close(a, b) for e, r in zip(g["evals"]["embed_norms"], rows) for a, b in zip(e, r["embed_norms"][1:])):
        fail(f"{name}: the page's losses or norms are not metrics.jsonl's")
    want_phases = {k: summary[k] for k in ("memorization_end", "circuit_formation_end", "cleanup_end", "generalization_step")}
    if {k: g["phases"][k] for k in want_phases} != want_phases or g["phases"]["generalized"] != summary["generalized"]:
        fail(f"{name}: the page's phases {g['phases']} are not summary.json's {summary}")
    # the losses: a curve each, the phases that ended shaded from and to their steps' x
    got = wd.run("""const s = document.getElementById('svg-grok-losses');
        const pts = (k) => { const p = s.querySelector(`polyline[data-column="${k}"]`); return p ? [...p.points].map(q => q.x) : null; };
        return {title: s.querySelector('text.title').textContent, train: pts('train'),
                curves: [...s.querySelectorAll('polyline.loss')].map(p => p.dataset.column).sort(),
                bands: [...s.querySelectorAll('rect.phase')].map(r => [r.dataset.phase, Number(r.getAttribute('x')),
                         Number(r.getAttribute('x')) + Number(r.getAttribute('width'))]),
                gen: [...s.querySelectorAll('line.generalization')].map(l => Number(l.getAttribute('x1'))),
                key: [...s.querySelectorAll('text.phase-text')].map(t => t.textContent)};""")
    x_of = dict(zip(g["evals"]["step"], got["train"] or []))
    mem, circ, clean, gen = (want_phases[k] for k in ("memorization_end", "circuit_formation_end", "cleanup_end", "generalization_step"))
    bands = [b for b in (("memorization", 0, mem), ("circuit formation", mem, circ), ("cleanup", circ, clean))
             if b[1] is not None and b[2] is not None]
    if got["curves"] != ["excluded", "restricted", "test", "train"] or len(x_of) != len(rows):
        fail(f"{name}: the losses' curves are {got['curves']} of {len(x_of)} points, not 4 of {len(rows)}")
    elif [b[0] for b in got["bands"]] != [b[0] for b in bands] or any(
            abs(x0 - x_of[f]) > 0.06 or abs(x1 - x_of[t]) > 0.06 for (_, x0, x1), (_, f, t) in zip(got["bands"], bands)):
        fail(f"{name}: the shaded phases are {got['bands']}, not {bands} at the curves' x {x_of}")
    elif got["gen"] != ([] if gen is None else [got["gen"][0]]) or (gen is not None and abs(got["gen"][0] - x_of[gen]) > 0.06):
        fail(f"{name}: the generalization line is at {got['gen']}, not at step {gen}")
    last = rows[-1]["step"]
    want_key = [f"memorization: 0 to {mem}" if mem is not None else f"memorization: not ended by step {last}",
                f"circuit formation: {mem} to {circ}" if circ is not None else f"circuit formation: not ended by step {last}"
                if mem is not None else "circuit formation: not reached",
                f"cleanup: {circ} to {clean}" if clean is not None else f"cleanup: not ended by step {last}"
                if circ is not None else "cleanup: not reached",
                f"generalized (test accuracy >= 99%) from step {gen}" if gen is not None else "not generalized (test accuracy < 99%)"]
    if got["key"] != want_key:
        fail(f"{name}: the phases' key says {got['key']}, not {want_key}")
    # the neurons: qkv fourier's clusters; the images' pixels are the numbers' colours
    z = g["neurons"]
    clusters = {f"1.{u}": c for u, c in enumerate(fourier["mlp"][0]["cluster"])}
    if sorted(z["name"]) != sorted(clusters) or any(clusters[n] != c for n, c in zip(z["name"], z["cluster"])):
        fail(f"{name}: the page's neuron clusters are not qkv fourier's")
    pixels = wd.run_async("""const done = arguments[arguments.length - 1], out = {};
        const imgs = [...document.querySelectorAll('#grokking image.heat')];
        let left = imgs.length;
        imgs.forEach((e, n) => {
          const i = new Image();
          i.onload = () => { const c = document.createElement('canvas'); c.width = i.width; c.height = i.height;
            const x = c.getContext('2d'); x.drawImage(i, 0, 0);
            const fig = e.closest('figure').id;
            out[`${fig}/${e.dataset.head || ''}${e.dataset.to || ''}`] = [e.dataset.cells, [...x.getImageData(0, 0, i.width, i.height).data]];
            if (--left === 0) done(out); };
          i.src = e.getAttribute('href'); });""")
    blues = lambda vs: wd.run("return arguments[0].map(v => v === null ? [212, 216, 221] : grokBlue(v))", vs)
    want_images = {"view-grok-fourier/", "view-grok-neurons/"} | {f"view-grok-attention-l1/{h}{t}" for h in range(1, 5) for t in "ab"}
    if set(pixels) != want_images:
        fail(f"{name}: the heatmap images are {sorted(pixels)}, not {sorted(want_images)}")
        return
    rgb = lambda px, w, i, j: px[4 * (j * w + i):4 * (j * w + i) + 3]
    cells, px = pixels["view-grok-neurons/"]
    sample = (0, len(z["name"]) // 2, len(z["name"]) - 1)
    colours = blues([v for u in sample for v in z["by_frequency"][u]])
    if cells != f"{F}x{len(z['name'])}" or any(rgb(px, F, k, u) != colours[n * F + k]
                                               for n, u in enumerate(sample) for k in range(F)):
        fail(f"{name}: the neurons' image ({cells}) is not their shares")
    cells, px = pixels["view-grok-fourier/"]
    width, top = int(cells.split("x")[0]), max(v for e in g["evals"]["embed_norms"] for v in e if v is not None)
    colours = blues([v / top for v in g["evals"]["embed_norms"][-1]])
    if cells != f"{width}x{F}" or any(rgb(px, width, width - 1, F - k) != colours[k - 1] for k in range(1, F + 1)):
        fail(f"{name}: the last column of the norms' image ({cells}) is not the last evaluation's norms")
    at = g["attention"][0]
    for h in range(4):
        for t in "ab":
            cells, px = pixels[f"view-grok-attention-l1/{h + 1}{t}"]
            colours = wd.run("return arguments[0].map(r => r.map(v => grokBlue(v)))", at[h][t])
            if cells != f"{P}x{P}" or any(rgb(px, P, b, P - 1 - a) != colours[a][b] for a in range(P) for b in range(P)):
                fail(f"{name}: head {h + 1}'s image of the weight on {t} ({cells}) is not its numbers (a up, b across)")
        # one pair against qkv inspect: row = of its weights, columns a and b
        (a, b), w = inspect
        wa, wb = w[h][2][0], w[h][2][1]
        if not close(at[h]["a"][a][b], wa) or not close(at[h]["b"][a][b], wb):
            fail(f"{name}: head {h + 1}'s weights from = for {a} {b} are {at[h]['a'][a][b]}, {at[h]['b'][a][b]}; qkv inspect's {wa}, {wb}")
    titles = wd.run("return [...document.querySelectorAll('#grokking text.title')].map(t => t.textContent)")
    if len(titles) != 4 or not all(t.startswith(f"{g['run']}: (a + b) mod {P}") for t in titles):
        fail(f"{name}: the titles {titles} do not all name the run and its task")
    if saves:  # the view of heatmap images inside its SVG (a PNG is decoded here in Python: seconds)
        check_saves(wd, name, (("grok-attention-l1", 0),))
    print(f"browser_test: {name}: {len(rows)} evaluations, phases {[b[0] for b in bands]} shaded, "
          f"{len(z['name'])} neurons, 4 heads x {P} x {P} attention, pixels{' and saves' if saves else ''} checked")


def check_labels_fit(wd, name):
    """In every analysis view, no two row labels and no two column labels overlap, and none
    reaches outside its view (clipped)."""
    bad = wd.run("""
        const out = [];
        for (const s of document.querySelectorAll('figure.view svg')) {
          const box = s.getBoundingClientRect();
          for (const cls of ['rowlab', 'collab']) {
            const r = [...s.querySelectorAll('text.' + cls)].map(t => [t.textContent, t.getBoundingClientRect()]);
            for (const [t, b] of r)
              if (b.left < box.left - 1 || b.right > box.right + 1 || b.top < box.top - 1 || b.bottom > box.bottom + 1)
                out.push(`${s.id}: ${t} is clipped`);
            for (let i = 1; i < r.length; i++) {
              const a = r[i - 1][1], b = r[i][1];
              if (a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5)
                out.push(`${s.id}: ${r[i - 1][0]} and ${r[i][0]} overlap`);
            }
          }
        }
        return out;""")
    if bad:
        fail(f"{name}: labels that overlap or are clipped: {bad[:6]} ({len(bad)} in all)")
    return len(bad) == 0


SIZES = ((1400, 1000), (1000, 800))  # the window sizes every panel must fit at


def set_viewport(wd, width, height):
    """Makes the page's viewport width x height (the window's frame taken into account)."""
    wd.s("POST", "/window/rect", {"width": width, "height": height})
    inner = wd.run("return [innerWidth, innerHeight]")
    wd.s("POST", "/window/rect", {"width": 2 * width - inner[0], "height": 2 * height - inner[1]})
    for _ in range(40):  # the window may take a moment to resize (a busy machine)
        got = wd.run("return [innerWidth, innerHeight]")
        if got == [width, height]:
            break
        time.sleep(0.05)
    return got


def check_panels_fit(wd, name, shots=()):
    """At each of SIZES: in every panel of the page (the head view, the charts over training,
    the analysis views), no text is clipped by its panel, no two texts overlap, no text lies on
    a curve or on the slider's mark, and no panel runs past the window's right edge. Returns
    the problems found, for the report. With QKV_BROWSER_SHOTS set, the views named in shots
    are kept there at each size (NAME_WxH.png)."""
    found = []
    for width, height in SIZES:
        got = set_viewport(wd, width, height)
        if got != [width, height]:
            fail(f"{name}: the viewport is {got}, not {width} x {height}")
        wd.s("POST", "/refresh", {})
        for view in shots if os.environ.get("QKV_BROWSER_SHOTS") else ():
            with open(os.path.join(os.environ["QKV_BROWSER_SHOTS"], f"{view}_{width}x{height}.png"), "wb") as f:
                f.write(base64.b64decode(wd.s("GET", f"/element/{wd.element('#view-' + view)}/screenshot")))
        bad = wd.run("""
            const out = [], right = document.documentElement.clientWidth;
            const inside = (p, b) => p.x > b.left + 0.5 && p.x < b.right - 0.5 && p.y > b.top + 0.5 && p.y < b.bottom - 0.5;
            for (const s of document.querySelectorAll('main svg')) {
              const box = s.getBoundingClientRect(), id = s.id || s.dataset.title || 'svg';
              if (!box.width) continue;
              if (box.right > right + 0.5) out.push(`${id}: runs past the window (${Math.round(box.right)} > ${right})`);
              const texts = [...s.querySelectorAll('text')].filter(t => t.textContent.trim())
                .map(t => [t.textContent, t.getBoundingClientRect()]);
              for (const [t, b] of texts)
                if (b.left < box.left - 1 || b.right > box.right + 1 || b.top < box.top - 1 || b.bottom > box.bottom + 1)
                  out.push(`${id}: '${t}' is clipped`);
              for (let i = 0; i < texts.length; i++)
                for (let j = i + 1; j < texts.length; j++) {
                  const a = texts[i][1], b = texts[j][1];
                  if (a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5)
                    out.push(`${id}: '${texts[i][0]}' and '${texts[j][0]}' overlap`);
                }
              /* the curves and the slider's mark, walked a pixel at a time */
              for (const c of s.querySelectorAll('polyline, #metrics-mark')) {
                const m = c.getScreenCTM(), pts = [];
                if (c.tagName === 'polyline') for (const p of c.points) pts.push(p);
                else pts.push({x: c.x1.baseVal.value, y: c.y1.baseVal.value}, {x: c.x2.baseVal.value, y: c.y2.baseVal.value});
                const on = pts.map(p => new DOMPoint(p.x, p.y).matrixTransform(m));
                for (const [t, b] of texts) {
                  let hit = false;
                  for (let k = 1; k < on.length && !hit; k++) {
                    const n = Math.ceil(Math.hypot(on[k].x - on[k - 1].x, on[k].y - on[k - 1].y)) + 1;
                    for (let q = 0; q <= n && !hit; q++)
                      hit = inside({x: on[k - 1].x + (on[k].x - on[k - 1].x) * q / n,
                                    y: on[k - 1].y + (on[k].y - on[k - 1].y) * q / n}, b);
                  }
                  if (hit) out.push(`${id}: '${t}' lies on ${c.dataset.column || c.id || 'a curve'}`);
                }
              }
            }
            return out;""")
        for b in bad:
            fail(f"{name} at {width} x {height}: {b}")
        found += bad
    set_viewport(wd, 1280, 900)
    wd.s("POST", "/refresh", {})
    if not found:
        print(f"browser_test: {name}: every panel fits at " + " and ".join(f"{w} x {h}" for w, h in SIZES) +
              ": no text clipped, overlapping or on a curve")
    return found


def check_padding(wd, name, dat, key_rows, token):
    """Padding on a self-attention data file: marked, greyed and hatched; no induction chart
    for one layer; score axes 0 to 1; the hostile token drawn as text."""
    lines = [l.split() for l in open(dat) if not l.startswith("#")]
    keys = lines[0][1:]
    pad = [k.endswith(":<pad>") for k in keys]
    if not any(pad) or all(pad):
        fail(f"{name}: the fixed example {keys} has no padding to check")
        return
    got = wd.run("return window.qkv.data.padding")
    if got != {"q": [int(p) for p in pad], "k": [int(p) for p in pad]}:
        fail(f"{name}: the page marks padding {got}, not {pad}")
    wd.run("window.qkv.select(0, 0);")
    greyed = wd.run("return [...document.querySelectorAll('#headview text.tok.pad')].map(e => e.id)")
    want = [f"q-tok-{i}" for i, p in enumerate(pad) if p] + [f"k-tok-{j}" for j, p in enumerate(pad) if p]
    if greyed != want:
        fail(f"{name}: the head view greys {greyed}, not {want}")
    # the heatmap: a padding key of a real query, and a real key of a padding query, are
    # hatched grey; a real cell is not
    first_pad = pad.index(True)
    pixel = ("const c = document.getElementById('heatmap'), d = c.dataset, px = Number(d.px);"
             "const x = Number(d.left) + (arguments[1] + 0.2) * px, y = Number(d.top) + (arguments[0] + 0.2) * px;"
             "return [...c.getContext('2d').getImageData(Math.round(x), Math.round(y), 1, 1).data].slice(0, 3);")
    grey = [212, 216, 221]
    for i, j, hatched in ((0, first_pad, True), (first_pad, 0, True), (0, 0, False)):
        rgb = wd.run(pixel, i, j)
        if (rgb == grey) != hatched:
            fail(f"{name}: heatmap cell ({i}, {j}) is {rgb}: {'not ' if hatched else ''}hatched grey")
    # the circuits: the vocabulary's padding token (id 0) is hatched in its column of the OV
    # circuit, one in each of its key_rows rows, and has no row there (the rows are the tokens
    # keys hold, which the padding never is)
    if key_rows:
        pads = wd.run("return document.querySelectorAll('#svg-circuit-ov rect.hcell.pad').length")
        if pads != key_rows:
            fail(f"{name}: the OV circuit hatches {pads} cells, not the padding column's {key_rows}")
    # long labels are never clipped: the head view's tokens lie inside it, and the heatmap's
    # margins are as wide as its longest labels
    clipped = wd.run("""
        const v = document.getElementById('headview').getBoundingClientRect();
        const out = [...document.querySelectorAll('#headview text.tok')].filter(t => {
          const b = t.getBoundingClientRect();
          return b.left < v.left - 1 || b.right > v.right + 1; }).map(t => t.textContent);
        const c = document.getElementById('heatmap'), g = document.createElement('canvas').getContext('2d');
        const m = window.qkv.data.attention[0], px = Number(c.dataset.px);
        g.font = `${Math.min(12, px - 2)}px system-ui, sans-serif`;
        const wq = Math.max(...m.q.map(t => g.measureText(t).width)), wk = Math.max(...m.k.map(t => g.measureText(t).width));
        if (Number(c.dataset.left) < wq) out.push(`heatmap left margin ${c.dataset.left} < ${wq}`);
        if (Number(c.dataset.top) < wk * 0.87) out.push(`heatmap top margin ${c.dataset.top} < ${wk * 0.87}`);
        return out;""")
    if clipped:
        fail(f"{name}: clipped labels: {clipped}")
    # one layer: no induction chart; the score charts run from 0 to 1
    charts = wd.run("return [...document.querySelectorAll('#metrics svg')].map(s => [s.dataset.title,"
                    " [...s.querySelectorAll('text.axis-label')].slice(0, 2).map(t => t.textContent)]);")
    titles = [t for t, _ in charts]
    if "induction score" in titles:
        fail(f"{name}: a one-layer model has an induction chart")
    for t, axis in charts:
        if t in ("previous-token score", "duplicate-token score", "accuracy") and axis != ["1", "0"]:
            fail(f"{name}: the axis of {t!r} runs {axis}, not 1 to 0")
    if "previous-token score" not in titles:
        fail(f"{name}: no previous-token chart among {titles}")
    # the hostile token: in the data as it is, drawn as text, no script ran, no element added
    state = wd.run("return [!document.querySelector('b'), document.querySelectorAll('img').length,"
                   " window.qkv.data.circuits.vocab.includes(arguments[0]),"
                   " [...document.querySelectorAll('#svg-circuit-ov text.rowlab')].some(t => t.textContent === arguments[0])];", token)
    if state != [True, 0, True, True]:
        fail(f"{name}: the token {token!r}: no element added {state[0]}, images {state[1]}, in the data "
             f"{state[2]}, drawn as text {state[3]}")
    print(f"browser_test: {name}: padding {pad} marked, greyed and hatched; {len(charts)} charts")


def main():
    tmp = tempfile.mkdtemp(prefix="qkv-browser-")
    # A data file whose outputs are half its inputs (cross-attention over padded inputs), its
    # tokens strings that the page must escape and show as they are.
    half = os.path.join(tmp, "half.tsv")
    words = ["ant", "<s>", "i|j", "e.f", "Bee", "&amp"]
    with open(half, "w") as f:
        for n in range(400):
            x = [words[(n * 7 + i * i + n // 5 * i) % len(words)] for i in range(2 * (2 + n % 3))]
            f.write(" ".join(x) + "\t" + " ".join(x[2 * i + 1].upper() for i in range(len(x) // 2)) + "\n")
    # A self-attention data file of 2 to 7 tokens (padded), among them a token that would be
    # markup if the page did not escape it; its held-out file starts with a short example (the
    # fixed one, which the maps show).
    # (a script that ran would call P, which does not exist: a console error)
    token = "<img/src/onerror=P()>"
    vocab = ["ab", "</script><b>", token, "e&f", "a-rather-long-token"]
    padded, padded_held = os.path.join(tmp, "padded.tsv"), os.path.join(tmp, "padded_held.tsv")
    for path, count in ((padded, 400), (padded_held, 40)):
        with open(path, "w") as f:
            for n in range(count):
                length = 2 if n == 0 else 2 + (n * 5 + n // 3) % 6
                x = [vocab[(n * 3 + i * i + n // 4 * i) % len(vocab)] for i in range(length)]
                f.write(" ".join(x) + "\t" + " ".join(reversed(x)) + "\n")
    runs = [("reverse", ["--task", "reverse", "--layers", "2", "--heads", "2", "--d-model", "16", "--residual"], 2, 2),
            ("shift", ["--task", "shift", "--heads", "3", "--d-model", "24"], 1, 3),
            ("lookup", ["--task", "lookup", "--d-model", "16"], 1, 1),
            ("translate", ["--task", "translate", "--heads", "2", "--d-model", "16"], 1, 2),
            ("data", ["--data", half, "--d-model", "16"], 1, 1),
            ("padded", ["--data", padded, "--heldout", padded_held, "--d-model", "16"], 1, 1),
            ("modular", ["--task", "modular", "--modulus", "13", "--train-frac", "0.7", "--d-model", "32",
                         "--mlp", "64", "--lr", "0.01", "--eval-every", "10"], 1, 4)]
    pages = []
    for name, args, layers, heads in runs:
        d = os.path.join(tmp, name)
        subprocess.run([QKV, "train", *args, "--steps", "60", "--snapshot-every", "10", "--quiet",
                        "--out", d], check=True, stderr=subprocess.DEVNULL)
        if name in ("reverse", "padded"):  # the analysis files the page shows
            subprocess.run([QKV, "circuits", "--model", d, "--out", os.path.join(d, "circuits.json")],
                           check=True, stdout=subprocess.DEVNULL)
        if name == "shift":  # a lens whose first position has no target (shift's)
            with open(os.path.join(d, "attention", "layer1_head1.dat")) as f:
                held = [k.split(":", 1)[1] for k in f.readlines()[1].split()[1:]]
            subprocess.run([QKV, "lens", "--model", d, "--input", " ".join(held), "--out",
                            os.path.join(d, "lens.json")], check=True, stdout=subprocess.DEVNULL)
        if name == "reverse":
            with open(os.path.join(d, "attention", "layer1_head1.dat")) as f:
                clean = [k.split(":", 1)[1] for k in f.readlines()[1].split()[1:]]
            corrupt = [str((int(clean[0]) + 1) % 10)] + clean[1:]  # another last answer
            metric = ["--answer", clean[0], "--wrong", corrupt[0]]  # (the model may predict neither)
            for cmd in (["ablate", "--model", d], ["attribute", "--model", d, "--input", " ".join(clean)],
                        ["lens", "--model", d, "--input", " ".join(clean)],
                        ["patch", "--model", d, "--clean", " ".join(clean), "--corrupt",
                         " ".join(corrupt), "--over", "head-position", *metric]):
                subprocess.run([QKV, *cmd, "--out", os.path.join(d, cmd[0] + ".json")], check=True,
                               stdout=subprocess.DEVNULL)
            # the files of the pages of other sites: the paths, k by key position, the stream
            pair = ["--clean", " ".join(clean), "--corrupt", " ".join(corrupt), *metric]
            for out, cmd in (("paths", ["patch", *pair, "--path"]),
                             ("patch_k", ["patch", *pair, "--site", "k", "--over", "key-position"]),
                             ("ablate_resid", ["ablate", "--site", "resid-pre", "--over", "layer-position"])):
                subprocess.run([QKV, cmd[0], "--model", d, *cmd[1:], "--out", os.path.join(tmp, out + ".json")],
                               check=True, stdout=subprocess.DEVNULL)
        subprocess.run([QKV, "plot", d, "--format", "html"], check=True, stdout=subprocess.DEVNULL)
        page = os.path.join(d, "plots", "attention.html")
        text = open(page, encoding="utf-8").read()
        if "http://" in text.replace("http://www.w3.org/2000/svg", "") or "https://" in text:
            fail(f"{name}: the page names a network address")
        if "<script src" in text or "<link" in text:
            fail(f"{name}: the page loads a file")
        pages.append((page, name, layers, heads))
    # Cross-attention: 3 queries over 5 keys (as a model with an encoder would have), written
    # over a copy of the shift run, with two snapshots so that the slider has somewhere to go.
    cross = os.path.join(tmp, "cross")
    shutil.copytree(os.path.join(tmp, "shift"), cross)
    shutil.rmtree(os.path.join(cross, "gradients"))
    shutil.rmtree(os.path.join(cross, "snapshots"))
    os.mkdir(os.path.join(cross, "snapshots"))
    queries, keys = ["0:a", "1:b", "2:c"], ["0:w", "1:x", "2:y", "3:z", "4:v"]

    def cross_map(path, step, h):
        with open(path, "w") as f:
            f.write("# cross-attention, 3 queries x 5 keys\nquery\\key " + " ".join(keys) + "\n")
            for i, q in enumerate(queries):
                w = [0.0 if j > i + 2 else 1.0 + (step + h) * (j == i + 2) for j in range(5)]
                f.write(q + " " + " ".join(f"{x / sum(w):.4f}" for x in w) + "\n")

    for h in range(1, 4):
        cross_map(os.path.join(cross, "attention", f"layer1_head{h}.dat"), 10, h)
        for step in (0, 10):
            cross_map(os.path.join(cross, "snapshots", f"step{step}_layer1_head{h}.dat"), step, h)
    subprocess.run([QKV, "plot", cross, "--format", "html"], check=True, stdout=subprocess.DEVNULL)
    pages.append((os.path.join(cross, "plots", "attention.html"), "cross-attention", 1, 3))
    # Crowded views: a 2 x 2 run of 128 positions (plot refuses positions its model lacks) with
    # a patching map over them, of long labels, and 130 attribution parts (the lowest just
    # under 0, its axis label beside 0's): labels are thinned or upright, never overlapping or
    # clipped.
    crowded = os.path.join(tmp, "crowded")
    subprocess.run([QKV, "train", "--task", "copy", "--seq-len", "128", "--vocab", "8", "--layers", "2",
                    "--heads", "2", "--d-model", "8", "--steps", "1", "--quiet", "--out", crowded],
                   check=True, stderr=subprocess.DEVNULL)
    with open(os.path.join(crowded, "patch.json"), "w") as f:
        json.dump({"clean": 1, "corrupt": 0, "positions": [f"{t}:token{t % 17}" for t in range(128)],
                   "results": [{"layer": l, "head": h, "position": t, "exact": ((l * 7 + h * 3 + t) % 11) / 10 - 0.3,
                                "attribution": None} for l in (1, 2) for h in (1, 2) for t in range(128)]}, f)
    with open(os.path.join(crowded, "attribute.json"), "w") as f:
        json.dump({"logit": 1, "sum": 1, "parts": [{"name": f"part{k}", "layer": None, "head": None,
                                                    "value": (k % 9) / 10 - 0.01} for k in range(130)]}, f)
    subprocess.run([QKV, "plot", crowded, "--format", "html"], check=True, stdout=subprocess.DEVNULL)
    crowded_page = os.path.join(crowded, "plots", "attention.html")
    # Other sites, over copies of the reverse run: the graph of its paths with the ablation of
    # the stream (resid-pre, by layer and position), and the patching of k by key position.
    # An ablation of an MLP's neurons (qkv ablate --site mlp-post: a row per layer and neuron,
    # head null), as a model with --mlp 12 writes it, over a copy of the reverse run.
    with open(os.path.join(tmp, "ablate_neurons.json"), "w") as f:
        json.dump({"site": "mlp-post", "over": "neuron", "baseline": {"loss": 0.5, "accuracy": 1},
                   "heads": [{"site": "mlp-post", "layer": l, "head": None, "position": None,
                              "key_position": None, "neuron": n, "loss": 0.5 + ((l * 5 + n) % 7) / 20,
                              "accuracy": 1} for l in (1, 2) for n in range(12)]}, f)
    # The paths of a model of transformer blocks of the same grid (2 x 2, MLPs, LayerNorms) and
    # task: MLPs among the senders and receivers.
    blocks = os.path.join(tmp, "blocks")
    subprocess.run([QKV, "train", "--task", "reverse", "--layers", "2", "--heads", "2", "--d-model", "16",
                    "--residual", "--mlp", "8", "--norm", "layernorm", "--steps", "10", "--quiet",
                    "--out", blocks], check=True, stderr=subprocess.DEVNULL)
    subprocess.run([QKV, "patch", "--model", blocks, *pair, "--path", "--out", os.path.join(tmp, "paths_mlp.json")],
                   check=True, stdout=subprocess.DEVNULL)
    site_pages = {}
    for page, files in (("paths", {"patch": "paths", "ablate": "ablate_resid"}), ("sites", {"patch": "patch_k"}),
                        ("neurons", {"ablate": "ablate_neurons"}),
                        ("paths_mlp", {"patch": "paths_mlp", "ablate": "ablate_resid"})):
        d = os.path.join(tmp, page)
        shutil.copytree(os.path.join(tmp, "reverse"), d)
        for kind, src in files.items():
            shutil.copy(os.path.join(tmp, src + ".json"), os.path.join(d, kind + ".json"))
        subprocess.run([QKV, "plot", d, "--format", "html"], check=True, stdout=subprocess.DEVNULL)
        site_pages[page] = os.path.join(d, "plots", "attention.html")
    # The modular run again with every phase in summary.json (written here): three shaded.
    phased = os.path.join(tmp, "modular_phases")
    shutil.copytree(os.path.join(tmp, "modular"), phased)
    summary = json.load(open(os.path.join(phased, "summary.json")))
    summary["grokking"].update(memorization_end=10, circuit_formation_end=30, cleanup_end=50,
                               generalization_step=40, generalized=True)
    json.dump(summary, open(os.path.join(phased, "summary.json"), "w"))
    subprocess.run([QKV, "plot", phased, "--format", "html"], check=True, stdout=subprocess.DEVNULL)
    pages.append((os.path.join(phased, "plots", "attention.html"), "modular_phases", 1, 4))
    grok_pair = (3, 5)
    inspected = json.loads(subprocess.run([QKV, "inspect", os.path.join(tmp, "modular"), "--input", "3 5 =", "--json"],
                                          check=True, capture_output=True).stdout)
    modular_inspect = (grok_pair, [e["weights"] for e in inspected["attention"]])
    port = free_port()
    proc = subprocess.Popen([driver, f"--port={port}"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    wd = WebDriver(port)
    try:
        for _ in range(100):
            try:
                if wd.call("GET", "/status").get("ready"):
                    break
            except (OSError, RuntimeError):
                pass
            time.sleep(0.1)
        wd.start()
        wd.s("POST", "/url", {"url": "file://" + crowded_page})
        got = wd.run("return [document.querySelectorAll('#svg-patch rect.hcell').length,"
                     " document.querySelectorAll('#svg-attribute rect.bar').length]")
        if got != [4 * 128, 130]:
            fail(f"crowded: the views have {got[0]} cells and {got[1]} bars, not 512 and 130")
        check_panels_fit(wd, "crowded")
        if check_labels_fit(wd, "crowded"):
            print("browser_test: crowded: 4 heads x 128 positions and 130 bars, labels thinned, none overlapping")
        for page, check in (("paths", lambda: check_paths(wd, "paths", *(json.load(open(os.path.join(tmp, f + ".json")))
                                                                         for f in ("paths", "ablate_resid")))),
                            ("sites", lambda: check_sites(wd, "sites", json.load(open(os.path.join(tmp, "patch_k.json"))))),
                            ("neurons", lambda: check_neurons(wd, "neurons",
                                                              json.load(open(os.path.join(tmp, "ablate_neurons.json"))))),
                            ("paths_mlp", lambda: check_paths(wd, "paths_mlp", *(json.load(open(os.path.join(tmp, f + ".json")))
                                                                                 for f in ("paths_mlp", "ablate_resid"))))):
            wd.s("POST", "/url", {"url": "file://" + site_pages[page]})
            errors = [e for e in wd.logs() if e.get("level") == "SEVERE"]
            if errors:
                fail(f"{page}: console errors on load: {errors[:3]}")
            try:
                check()
            except RuntimeError as e:  # the page's script failed
                fail(f"{page}: {str(e)[:300]}")
            check_labels_fit(wd, page)
            check_panels_fit(wd, page, ("paths",) if page.startswith("paths") else ())
        for page in pages:
            check_page(wd, *page)
            if page[1] in ("translate", "data"):  # real cross-attention runs: 8 x 16, 4 x 8
                check_labels(wd, page[1], os.path.join(tmp, page[1], "attention", "layer1_head1.dat"))
                check_score_charts(wd, page[1], 0)
            if page[1] == "reverse":  # 2 layers x 2 heads
                check_score_charts(wd, page[1], 4)
                d = os.path.join(tmp, "reverse")
                parts = json.load(open(os.path.join(d, "attribute.json")))["parts"]
                circuits = json.load(open(os.path.join(d, "circuits.json")))
                positions = len(open(os.path.join(d, "attention", "layer1_head1.dat")).readlines()[1].split()) - 1
                check_analysis(wd, page[1], 2, 2, parts, len(circuits["vocab"]),
                               len(circuits["query_labels"]), positions,
                               json.load(open(os.path.join(d, "lens.json"))))
                check_view_titles(wd, page[1], d)
            if page[1] == "shift":
                check_lens_marks(wd, page[1], json.load(open(os.path.join(tmp, "shift", "lens.json"))))
            if page[1] == "padded":
                d = os.path.join(tmp, "padded")
                circuits = json.load(open(os.path.join(d, "circuits.json")))
                check_padding(wd, page[1], os.path.join(d, "attention", "layer1_head1.dat"),
                              len(circuits["key_tokens"]) if circuits["vocab"][0] == "<pad>" else 0, token)
            if page[1] in ("modular", "modular_phases"):
                check_grokking(wd, page[1], os.path.dirname(os.path.dirname(page[0])), modular_inspect,
                               page[1] == "modular")
            check_panels_fit(wd, page[1])
    finally:
        if wd.sid:
            try:
                wd.call("DELETE", f"/session/{wd.sid}")
            except (OSError, RuntimeError):
                pass
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)
    if fails:
        print(f"browser_test: {fails} failures")
        sys.exit(1)
    print("browser_test: ok")


main()
