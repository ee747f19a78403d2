/* grokking.js - the views of a modular run in the page of `qkv plot DIR --format html`
   (docs/grokking.md, "Pictures"). qkv puts this file into attention.html's script, where
   DATA.grokking (src/plot/grokking.c, grok_json) holds: the run, the modulus and op, the
   model's step, summary.json's phases, metrics.jsonl's losses and embedding norms at each
   evaluation, the model's neurons (each one's share of variance by frequency, grouped by
   cluster) and each head's attention from = to a and to b over every pair. It uses the
   page's helpers (svg, mix, BLUES, textWidth, viewFigure, $). Each view is an SVG with its
   save buttons; the heatmaps are images inside it, one pixel per cell, drawn from the data. */

const GROK_COLOURS = { train: "#2171b5", test: "#e6550d", restricted: "#31a354", excluded: "#bcbddc" };
/* the size the page draws its SVG text at (its stylesheet's `svg text`), for the widths */
const GROK_FONT = 12;
const GROK_PHASE_COLOURS = { memorization: "#fdd9b5", "circuit formation": "#cde8c4", cleanup: "#cfe0f3" };

/* "(a + b) mod 13" */
function grokTask(g) {
  return `(a ${g.op === "sub" ? "-" : g.op === "mul" ? "*" : "+"} b) mod ${g.modulus}`;
}

/* A view's SVG (viewFigure's, with its save buttons), in the grokking section. */
function grokFigure(id, caption) {
  const s = viewFigure(id, caption), fig = $(`view-${id}`);
  if (fig.parentNode !== $("grokking")) $("grokking").appendChild(fig);
  return s;
}

/* About `count` round steps from 0 to max: 1, 2 or 5 times a power of ten apart. */
function grokTicks(max, count) {
  const raw = Math.max(1, max / count), p = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((m) => m * p).find((v) => v >= raw);
  const out = [];
  for (let t = 0; t <= max + 1e-9; t += step) out.push(t);
  return out;
}

/* An image of nx x ny cells (one pixel each) into SVG s at (x, y), w x h pixels on the page,
   cell (i, j) (column i, row j from the top) coloured colour(i, j) (null: the page's grey).
   The image keeps its cells sharp; its pixels can be read back (data-cells: nx x ny). */
function grokRaster(s, x, y, w, h, nx, ny, colour, cls) {
  const c = document.createElement("canvas");
  c.width = nx; c.height = ny;
  const g = c.getContext("2d"), img = g.createImageData(nx, ny);
  for (let j = 0; j < ny; j++)
    for (let i = 0; i < nx; i++) {
      const rgb = colour(i, j) || [212, 216, 221], k = 4 * (j * nx + i);
      img.data[k] = rgb[0]; img.data[k + 1] = rgb[1]; img.data[k + 2] = rgb[2]; img.data[k + 3] = 255;
    }
  g.putImageData(img, 0, 0);
  return svg("image", { x, y, width: w, height: h, preserveAspectRatio: "none", href: c.toDataURL("image/png"),
                        class: cls, "data-cells": `${nx}x${ny}`, style: "image-rendering:pixelated" }, s);
}

/* BLUES at t in [0, 1] as [r, g, b] (mix gives a CSS colour). */
function grokBlue(t) {
  return mix(BLUES, t).slice(4, -1).split(",").map(Number);
}

/* A colour bar from 0 (white) to `top` at (x, y), h high. */
function grokColourBar(s, x, y, h, top, label) {
  const steps = 20;
  for (let k = 0; k < steps; k++)
    svg("rect", { x, y: y + k * h / steps, width: 10, height: h / steps + 0.5, fill: mix(BLUES, 1 - (k + 0.5) / steps) }, s);
  svg("text", { x: x + 13, y: y + 8, class: "axis" }, s).textContent = String(Number(top.toPrecision(2)));
  svg("text", { x: x + 13, y: y + h, class: "axis" }, s).textContent = "0";
  if (label) svg("text", { transform: `translate(${x + 13 + 30},${y + h / 2}) rotate(90)`, "text-anchor": "middle",
                           class: "axis" }, s).textContent = label;
}

/* The tooltip of a heatmap image: text(i, j) of the cell under the pointer. */
function grokTip(img, nx, ny, text) {
  const tip = $("tooltip");
  img.addEventListener("mousemove", (ev) => {
    const r = img.getBoundingClientRect();
    const i = Math.min(nx - 1, Math.floor((ev.clientX - r.left) / r.width * nx));
    const j = Math.min(ny - 1, Math.floor((ev.clientY - r.top) / r.height * ny));
    tip.textContent = text(i, j);
    tip.style.left = `${ev.clientX + 12}px`; tip.style.top = `${ev.clientY + 12}px`; tip.style.display = "block";
  });
  img.addEventListener("mouseleave", () => { tip.style.display = "none"; });
}

/* The phases summary.json names: [name, from, to] of each that ended, and the key's lines. */
function grokPhases(g, last) {
  const p = g.phases, bands = [], lines = [];
  if (!p) return { bands, lines: ["no phases: summary.json has no grokking"], gen: null };
  const mem = p.memorization_end, circ = p.circuit_formation_end, clean = p.cleanup_end, mul = g.op === "mul";
  if (mem !== null) bands.push(["memorization", 0, mem]);
  if (mem !== null && circ !== null) bands.push(["circuit formation", mem, circ]);
  if (circ !== null && clean !== null) bands.push(["cleanup", circ, clean]);
  const named = (name) => bands.find((b) => b[0] === name);
  lines.push(mem !== null ? `memorization: 0 to ${mem}` : `memorization: not ended by step ${last}`);
  lines.push(mul ? "circuit formation: not named for mul" : named("circuit formation")
    ? `circuit formation: ${mem} to ${circ}` : mem !== null ? `circuit formation: not ended by step ${last}` : "circuit formation: not reached");
  lines.push(mul ? "cleanup: not named for mul" : named("cleanup")
    ? `cleanup: ${circ} to ${clean}` : circ !== null ? `cleanup: not ended by step ${last}` : "cleanup: not reached");
  const gen = p.generalization_step;
  lines.push(gen !== null ? `generalized (test accuracy >= 99%) from step ${gen}` : "not generalized (test accuracy < 99%)");
  return { bands, lines, gen };
}

/* The step axis under a plot from x0 to x0 + w, and its label. */
function grokStepAxis(s, X, x0, w, y, xmax) {
  svg("line", { x1: x0, y1: y, x2: x0 + w, y2: y, stroke: "#999" }, s);
  const ticks = grokTicks(xmax, Math.max(2, Math.floor(w / 90)));
  for (const t of ticks) {
    svg("line", { x1: X(t), y1: y, x2: X(t), y2: y + 4, stroke: "#999" }, s);
    svg("text", { x: X(t), y: y + 16, "text-anchor": "middle", class: "axis" }, s).textContent = t;
  }
  svg("text", { x: x0 + w / 2, y: y + 32, "text-anchor": "middle", class: "axis" }, s).textContent = "step";
}

/* (a) The four losses over training, on a log scale, the phases that ended shaded. */
function grokLosses(g) {
  const e = g.evals, n = e.step.length, last = n ? e.step[n - 1] : 0;
  const s = grokFigure("grok-losses", "the train loss (every training pair), the test loss (every held-out pair), " +
                       "the restricted and the excluded loss at each evaluation (metrics.jsonl); the phases of " +
                       "summary.json's grokking shaded (docs/grokking.md)");
  const title = `${g.run}: ${grokTask(g)}: the four losses, the phases shaded`;
  const series = [["train", "train (every training pair)"], ["test", "test (every held-out pair)"],
                  ["restricted", g.op === "mul" ? "restricted: not defined for mul" : "restricted (held-out pairs, the key frequencies only)"],
                  ["excluded", g.op === "mul" ? "excluded: not defined for mul" : "excluded (training pairs, the key directions removed)"]];
  const ph = grokPhases(g, last);
  const L = 60, T = 30, plotW = 560, plotH = 250;
  let lo = Infinity, hi = -Infinity;
  for (const [k] of series) for (const v of e[k]) if (v !== null && v > 0) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  /* the legend: the curves in the first column, the phases in the second */
  const font = GROK_FONT, rowH = 17, keyW = 22;
  const col1 = Math.max(...series.map(([, t]) => textWidth(t, font))) + keyW + 16;
  const col2 = Math.max(...ph.lines.map((t) => textWidth(t, font))) + keyW + 4;
  const W = Math.ceil(Math.max(L + plotW + 16, 8 + col1 + col2 + 8, textWidth(title, 13, true) + 12));
  const legendTop = T + plotH + 52, H = legendTop + Math.max(series.length, ph.lines.length) * rowH + 6;
  s.setAttribute("width", W); s.setAttribute("height", H);
  svg("text", { x: 4, y: 15, class: "title" }, s).textContent = title;
  if (!n || !(lo <= hi)) {
    svg("text", { x: L, y: T + 20, class: "axis" }, s).textContent = "no losses: metrics.jsonl has no evaluation";
    return;
  }
  const ylo = Math.floor(Math.log10(lo)), yhi = Math.max(ylo + 1, Math.ceil(Math.log10(hi)));
  const xmax = Math.max(1, last);
  const X = (x) => L + plotW * x / xmax, Y = (v) => T + plotH * (yhi - Math.log10(v)) / (yhi - ylo);
  for (const [name, from, to] of ph.bands)
    svg("rect", { x: X(from), y: T, width: Math.max(0, X(to) - X(from)), height: plotH,
                  fill: GROK_PHASE_COLOURS[name], class: "phase", "data-phase": name, "data-from": from, "data-to": to }, s);
  if (ph.gen !== null && ph.gen !== undefined)
    svg("line", { x1: X(ph.gen), y1: T, x2: X(ph.gen), y2: T + plotH, stroke: "#555", "stroke-dasharray": "5,3",
                  class: "generalization", "data-step": ph.gen }, s);
  svg("line", { x1: L, y1: T, x2: L, y2: T + plotH, stroke: "#999" }, s);
  /* a label per power of ten, fewer when they would be closer than 14 pixels */
  const every = Math.ceil(14 / (plotH / (yhi - ylo)));
  for (let d = ylo; d <= yhi; d += every) {
    svg("line", { x1: L - 4, y1: Y(10 ** d), x2: L, y2: Y(10 ** d), stroke: "#999" }, s);
    svg("text", { x: L - 6, y: Y(10 ** d) + 4, "text-anchor": "end", class: "axis" }, s).textContent =
      d >= -2 && d <= 3 ? String(10 ** d) : `1e${d}`;
  }
  svg("text", { transform: `translate(12,${T + plotH / 2}) rotate(-90)`, "text-anchor": "middle", class: "axis" }, s)
    .textContent = "loss (log scale)";
  grokStepAxis(s, X, L, plotW, T + plotH, xmax);
  /* the excluded loss is a wide light band under the others: while there is no key frequency
     it is the train loss (over P outputs), and one line would hide the other */
  for (const k of ["excluded", "restricted", "test", "train"]) {
    const pts = e.step.map((x, i) => [x, e[k][i]]).filter(([, v]) => v !== null && v > 0)
                      .map(([x, v]) => `${X(x).toFixed(1)},${Y(v).toFixed(1)}`);
    if (pts.length)
      svg("polyline", { points: pts.join(" "), fill: "none", stroke: GROK_COLOURS[k], "stroke-width": k === "excluded" ? 5 : 1.8,
                        "data-column": k, class: "loss" }, s);
  }
  series.forEach(([k, t], i) => {
    const y = legendTop + i * rowH;
    svg("line", { x1: 8, y1: y - 4, x2: 8 + keyW - 6, y2: y - 4, stroke: GROK_COLOURS[k], "stroke-width": k === "excluded" ? 5 : 3 }, s);
    svg("text", { x: 8 + keyW, y, class: "legend" }, s).textContent = t;
  });
  ph.lines.forEach((t, i) => {
    const y = legendTop + i * rowH, x = 8 + col1, band = ph.bands.find((b) => t.startsWith(b[0] + ":"));
    if (band) svg("rect", { x, y: y - 10, width: keyW - 6, height: 10, fill: GROK_PHASE_COLOURS[band[0]] }, s);
    if (i === 3 && ph.gen !== null && ph.gen !== undefined)
      svg("line", { x1: x, y1: y - 4, x2: x + keyW - 6, y2: y - 4, stroke: "#555", "stroke-dasharray": "5,3" }, s);
    svg("text", { x: x + keyW, y, class: "legend phase-text" }, s).textContent = t;
  });
}

/* (b) The embedding's norm in each frequency (up) at each evaluation (across, by step). */
function grokFourier(g) {
  const e = g.evals, n = e.step.length, F = Math.floor(g.modulus / 2), last = n ? e.step[n - 1] : 0;
  const s = grokFigure("grok-fourier", "the embedding's norm in each frequency of Z/P at each evaluation " +
                       "(metrics.jsonl's embed_norms); dashed: the phases' ends and the generalization step");
  const title = `${g.run}: ${grokTask(g)}: the embedding's norm in each frequency over training`;
  const L = 64, T = 30, plotW = 560, plotH = Math.max(120, Math.min(320, F * 14));
  const W = Math.ceil(Math.max(L + plotW + 70, textWidth(title, 13, true) + 12)), H = T + plotH + 40;
  s.setAttribute("width", W); s.setAttribute("height", H);
  svg("text", { x: 4, y: 15, class: "title" }, s).textContent = title;
  if (!n || F < 1) {
    svg("text", { x: L, y: T + 20, class: "axis" }, s).textContent = "no norms: metrics.jsonl has no evaluation";
    return;
  }
  /* each evaluation's cell spans half-way to its neighbours' steps */
  const edge = (i) => i <= 0 ? e.step[0] - (n > 1 ? (e.step[1] - e.step[0]) / 2 : 0.5)
                    : i >= n ? e.step[n - 1] + (n > 1 ? (e.step[n - 1] - e.step[n - 2]) / 2 : 0.5)
                    : (e.step[i - 1] + e.step[i]) / 2;
  const x0 = edge(0), x1 = edge(n), X = (x) => L + plotW * (x - x0) / (x1 - x0);
  let top = 0;
  for (const row of e.embed_norms) for (const v of row) if (v !== null) top = Math.max(top, v);
  if (!(top > 0)) top = 1;
  /* the image: a pixel column per page pixel, the evaluation whose cell covers it */
  const column = [];
  for (let px = 0, i = 0; px < plotW; px++) {
    const step = x0 + (x1 - x0) * (px + 0.5) / plotW;
    while (i < n - 1 && edge(i + 1) <= step) i++;
    column.push(i);
  }
  const img = grokRaster(s, L, T, plotW, plotH, plotW, F, (px, j) => {
    const v = e.embed_norms[column[px]][F - 1 - j];
    return v === null ? null : grokBlue(v / top);
  }, "heat");
  grokTip(img, plotW, F, (px, j) => { const v = e.embed_norms[column[px]][F - 1 - j];
    return `step ${e.step[column[px]]}, frequency ${F - j}: norm ${v === null ? "none" : v.toPrecision(3)}`; });
  const Y = (k) => T + plotH * (F - k + 0.5) / F;
  /* the frequencies' labels, the key ones always, the others while 13 pixels apart */
  const keys = new Set(g.key_frequencies), shown = [];
  for (const k of g.key_frequencies) if (k >= 1 && k <= F) shown.push(k);
  for (let k = 1; k <= F; k++)
    if (!keys.has(k) && shown.every((m) => Math.abs(Y(m) - Y(k)) >= 13)) shown.push(k);
  for (const k of shown)
    svg("text", { x: L - 6, y: Y(k) + 4, "text-anchor": "end", class: keys.has(k) ? "axis key" : "axis",
                  style: keys.has(k) ? "fill:#08306b;font-weight:bold" : "" }, s).textContent = keys.has(k) ? `key ${k}` : k;
  svg("text", { transform: `translate(12,${T + plotH / 2}) rotate(-90)`, "text-anchor": "middle", class: "axis" }, s)
    .textContent = "frequency k";
  const p = g.phases;
  if (p)
    for (const k of ["memorization_end", "circuit_formation_end", "cleanup_end", "generalization_step"])
      if (p[k] !== null && p[k] >= x0 && p[k] <= x1)
        svg("line", { x1: X(p[k]), y1: T, x2: X(p[k]), y2: T + plotH, stroke: "#d94801", "stroke-dasharray": "4,3",
                      class: "phase-end", "data-phase": k }, s);
  const ticks = grokTicks(x1, Math.max(2, Math.floor(plotW / 90))).filter((t) => t >= x0);
  svg("line", { x1: L, y1: T + plotH, x2: L + plotW, y2: T + plotH, stroke: "#999" }, s);
  for (const t of ticks) {
    svg("line", { x1: X(t), y1: T + plotH, x2: X(t), y2: T + plotH + 4, stroke: "#999" }, s);
    svg("text", { x: X(t), y: T + plotH + 16, "text-anchor": "middle", class: "axis" }, s).textContent = t;
  }
  svg("text", { x: L + plotW / 2, y: T + plotH + 32, "text-anchor": "middle", class: "axis" }, s).textContent = "step";
  grokColourBar(s, L + plotW + 10, T, Math.min(plotH, 200), top, "");
}

/* (c) The MLP neurons grouped by cluster: each one's share of variance in each frequency. */
function grokNeurons(g) {
  const z = g.neurons, F = Math.floor(g.modulus / 2);
  if (!z) return; /* no MLP */
  const s = grokFigure("grok-neurons", "each MLP neuron's share of its variance over the pairs (at =) in each " +
                       "frequency, the neurons grouped by their cluster (the frequency of the largest share; " +
                       "constant neurons have none, grey); * a key frequency");
  const title = `${g.run}: ${grokTask(g)}, step ${g.step}: the MLP neurons by frequency`;
  if (z.too_large) {
    s.setAttribute("width", Math.ceil(textWidth(title, 13, true) + 12)); s.setAttribute("height", 40);
    svg("text", { x: 4, y: 15, class: "title" }, s).textContent = title;
    svg("text", { x: 4, y: 32, class: "axis" }, s).textContent = `too many numbers for the page (over ${z.too_large}): qkv plot draws them`;
    return;
  }
  const U = z.name.length, cellW = Math.max(4, Math.min(32, Math.floor(480 / F)));
  const rowH = Math.min(12, 360 / U), plotW = cellW * F, plotH = Math.ceil(rowH * U);
  /* the clusters: [frequency, first row, count] */
  const groups = [];
  z.cluster.forEach((c, u) => { if (!groups.length || groups[groups.length - 1][0] !== c) groups.push([c, u, 0]); groups[groups.length - 1][2]++; });
  const names = groups.map(([c, , count]) => (c ? `k = ${c} (${count})` : `constant (${count})`));
  const L = Math.ceil(Math.max(...names.map((t) => textWidth(t, GROK_FONT)))) + 30, T = 30;
  const W = Math.ceil(Math.max(L + plotW + 70, textWidth(title, 13, true) + 12)), H = T + plotH + 40;
  s.setAttribute("width", W); s.setAttribute("height", H);
  svg("text", { x: 4, y: 15, class: "title" }, s).textContent = title;
  const img = grokRaster(s, L, T, plotW, plotH, F, U, (k, u) => {
    const v = z.by_frequency[u][k];
    return v === null ? null : grokBlue(v);
  }, "heat");
  grokTip(img, F, U, (k, u) => { const v = z.by_frequency[u][k];
    return `neuron ${z.name[u]} (cluster ${z.cluster[u] || "none: constant"}), frequency ${k + 1}: share ${v === null ? "none" : v.toFixed(3)}`; });
  let named = -100;
  groups.forEach(([c, first, count], i) => {
    const y = T + (first + count / 2) * rowH;
    if (first > 0)
      svg("line", { x1: L, y1: T + first * rowH, x2: L + plotW, y2: T + first * rowH, stroke: "#e6550d", class: "cluster-edge" }, s);
    if (y - named < 13) return;
    svg("text", { x: L - 6, y: y + 4, "text-anchor": "end", class: "axis cluster", "data-cluster": c }, s).textContent = names[i];
    named = y;
  });
  svg("text", { transform: `translate(12,${T + plotH / 2}) rotate(-90)`, "text-anchor": "middle", class: "axis" }, s)
    .textContent = "neurons, by cluster";
  const keys = new Set(g.key_frequencies), shown = [];
  for (const k of g.key_frequencies) if (k >= 1 && k <= F) shown.push(k);
  const labelW = (k) => textWidth(keys.has(k) ? `${k}*` : String(k), GROK_FONT) + 6;
  for (let k = 1; k <= F; k++)
    if (!keys.has(k) && shown.every((m) => Math.abs(m - k) * cellW >= (labelW(m) + labelW(k)) / 2)) shown.push(k);
  for (const k of shown)
    svg("text", { x: L + (k - 0.5) * cellW, y: T + plotH + 14, "text-anchor": "middle", class: "axis" }, s)
      .textContent = keys.has(k) ? `${k}*` : k;
  svg("text", { x: L + plotW / 2, y: T + plotH + 30, "text-anchor": "middle", class: "axis" }, s).textContent = "frequency k";
  grokColourBar(s, L + plotW + 10, T, Math.min(plotH, 200), 1, "");
}

/* (d) Each head's attention from = to a and to b, for every pair: a head per column, on a
   above on b, a up the side (0 at the bottom) and b across. A function of (a, b), not an
   average: a trained model's heads weigh a against b periodically, in the key frequencies. */
function grokAttention(g) {
  const P = g.modulus, at = g.attention;
  for (let l = 0; l < g.layers; l++) {
    const id = `grok-attention-l${l + 1}`;
    const s = grokFigure(id, `layer ${l + 1}: each head's attention from = (position 2) to a (position 0) and to b ` +
                         `(position 1) for every pair; the rest of each row's weight is on = itself`);
    const title = `${g.run}: ${grokTask(g)}, step ${g.step}: layer ${l + 1}'s attention from = to a and to b`;
    if (!Array.isArray(at)) {
      s.setAttribute("width", Math.ceil(textWidth(title, 13, true) + 12)); s.setAttribute("height", 40);
      svg("text", { x: 4, y: 15, class: "title" }, s).textContent = title;
      svg("text", { x: 4, y: 32, class: "axis" }, s).textContent = `too many numbers for the page (over ${at && at.too_large}): qkv plot draws them`;
      continue;
    }
    const heads = at[l], cols = Math.min(g.heads, 4), bands = Math.ceil(g.heads / cols), size = 140, gap = 30;
    const top = String(P - 1), L = Math.ceil(textWidth(top, GROK_FONT)) + 30, T = 30, W0 = L + cols * (size + gap) + 50;
    const W = Math.ceil(Math.max(W0, textWidth(title, 13, true) + 12));
    const H = T + bands * 2 * (size + gap) + 24;
    s.setAttribute("width", W); s.setAttribute("height", H);
    svg("text", { x: 4, y: 15, class: "title" }, s).textContent = title;
    heads.forEach((m, h) => {
      const c = h % cols, band = Math.floor(h / cols);
      ["a", "b"].forEach((to, r) => {
        const x = L + c * (size + gap), y = T + (2 * band + r) * (size + gap) + 16;
        svg("text", { x: x + size / 2, y: y - 4, "text-anchor": "middle", class: "axis panel" }, s)
          .textContent = `head ${h + 1}: on ${to}`;
        /* row a of the data is drawn a-th from the bottom */
        const img = grokRaster(s, x, y, size, size, P, P, (b, j) => grokBlue(m[to][P - 1 - j][b]), "heat");
        img.dataset.head = h + 1; img.dataset.to = to;
        grokTip(img, P, P, (b, j) => `head ${h + 1}, a = ${P - 1 - j}, b = ${b}: weight on ${to} ${m[to][P - 1 - j][b].toFixed(3)}`);
        if (c === 0) {
          svg("text", { x: x - 4, y: y + size, "text-anchor": "end", class: "axis" }, s).textContent = "0";
          svg("text", { x: x - 4, y: y + 10, "text-anchor": "end", class: "axis" }, s).textContent = P - 1;
          svg("text", { x: x - 4, y: y + size / 2 + 4, "text-anchor": "end", class: "axis" }, s).textContent = "a";
        }
        if (r === 1 && (band === bands - 1 || h + cols >= g.heads)) {
          svg("text", { x, y: y + size + 12, "text-anchor": "start", class: "axis" }, s).textContent = "0";
          svg("text", { x: x + size, y: y + size + 12, "text-anchor": "end", class: "axis" }, s).textContent = P - 1;
          svg("text", { x: x + size / 2, y: y + size + 12, "text-anchor": "middle", class: "axis" }, s).textContent = "b";
        }
      });
    });
    grokColourBar(s, L + cols * (size + gap), T + 16, 120, 1, "");
  }
}

function drawGrokking() {
  const g = DATA.grokking;
  if (!g) return;
  $("grokking-section").hidden = false;
  grokLosses(g); grokFourier(g); grokNeurons(g); grokAttention(g);
}
