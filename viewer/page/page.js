// page.js: the exported page's script (viewer/page/page.h). It reads the JSON in #page-data (the
// nodes, the summaries of their values, the history's events; docs/page.md), makes the SVG graph
// Graphviz drew clickable, pannable and zoomable, fills the side panel, and drives the history
// slider. Plain DOM, no library, nothing loaded.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("page-data").textContent);
  const nodes = new Map(data.nodes.map((n) => [n.id, n]));
  const events = data.events;
  const graph = document.getElementById("graph");
  const svg = graph.querySelector("svg");
  const panel = document.getElementById("panel");
  const boxes = new Map();   // node id -> its <g class="node"> (Graphviz titles it "n<id>")
  for (const g of svg.querySelectorAll("g.node")) {
    const m = /^n(\d+)$/.exec(g.querySelector("title").textContent);
    if (m && nodes.has(Number(m[1]))) boxes.set(Number(m[1]), g);
  }

  // ---- small helpers
  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }
  function num(x) {
    if (x === null) return "NaN";
    if (x === Infinity) return "inf";
    if (x === -Infinity) return "-inf";
    return String(x);
  }
  const S = (i) => (i === undefined ? "" : data.strings[i]);   // repeated strings are indices into data.strings
  const basename = (file) => file.slice(file.lastIndexOf("/") + 1);
  const where = (file, line) => (file ? basename(file) + ":" + line : "?");
  function nodeText(id) {
    const n = nodes.get(id);
    if (!n) return "#" + id;
    const label = n.name || n.label || "";
    return "#" + id + " " + n.op + (label ? "  " + label : "");
  }
  function nodeLink(id) {
    if (!nodes.has(id)) return "#" + id + " (not drawn)";
    return el("a", { class: "node-link", onclick: () => select(id, true) }, nodeText(id));
  }
  function facts(rows) {
    return el("table", { class: "facts" }, ...rows.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v))));
  }

  // ---- values: statistics and a heatmap in the viewer's colours (heat_colour, as a palette)
  function colour(x, lo, hi) {
    const p = data.palette;
    if (x === null || Number.isNaN(x)) return p.nan;
    if (x === Infinity) return p.pos_inf;
    if (x === -Infinity) return p.neg_inf;
    if (lo < 0 && hi > 0) {   // diverging around 0
      const t = Math.min(1, Math.max(-1, x / Math.max(-lo, hi)));
      return p.diverging[Math.round((t + 1) * 32)];
    }
    const t = hi > lo ? Math.min(1, Math.max(0, (x - lo) / (hi - lo))) : 0.5;
    return p.sequential[Math.round(t * 64)];
  }
  function heatmap(v) {
    const g = v.grid;
    const lo = v.finite ? v.min : 0, hi = v.finite ? v.max : 0;
    const cell = Math.max(3, Math.min(16, Math.floor(360 / g.cols), Math.floor(240 / g.rows)));
    const canvas = el("canvas", { width: g.cols * cell, height: g.rows * cell });
    const ctx = canvas.getContext("2d");
    g.v.forEach((x, i) => {
      ctx.fillStyle = colour(x, lo, hi);
      ctx.fillRect((i % g.cols) * cell, Math.floor(i / g.cols) * cell, cell, cell);
    });
    const every = [[g.row_step, "row"], [g.col_step, "column"]].filter(([k]) => k > 1).map(([k, what]) => `1 ${what} in ${k}`);
    const sampled = every.length ? "sampled: " + every.join(", ") : "hover a cell for its value";
    const readout = el("div", { class: "cell" }, sampled);
    canvas.addEventListener("mousemove", (e) => {
      const r = Math.floor(e.offsetY / cell), c = Math.floor(e.offsetX / cell);
      if (r < g.rows && c < g.cols) readout.textContent = `[${r * g.row_step}, ${c * g.col_step}] = ${num(g.v[r * g.cols + c])}`;
    });
    canvas.addEventListener("mouseleave", () => { readout.textContent = sampled; });
    return el("div", { class: "heatmap" }, canvas, readout);
  }
  function valueBlock(index, note) {
    if (index === undefined || index < 0) return el("p", { class: "note" }, note || "no value");
    const v = data.values[index];
    const pairs = [["min", v.min, "max", v.max], ["mean", v.mean, "std", v.std], ["NaN", v.nan, "Inf", v.pos_inf + v.neg_inf]];
    const block = el("div", { class: "value" },
      facts([["shape", "[" + v.shape.join(",") + "]  " + v.dtype + "  (" + v.count + " elements)"]]),
      el("table", { class: "stats" }, ...pairs.map(([a, x, b, y]) =>
        el("tr", {}, el("th", {}, a), el("td", {}, num(x)), el("th", {}, b), el("td", {}, num(y))))));
    if (v.item !== undefined) block.append(facts([["value", num(v.item)]]));
    if (v.grid) block.append(heatmap(v));
    return block;
  }

  // ---- the panel: a node
  function showNode(id) {
    const n = nodes.get(id);
    const pass = n.backward ? el("span", { class: "phase-backward" }, "backward, grad of ", nodeLink(n.group))
      : el("span", { class: "phase-forward" }, n.leaf ? (n.parameter ? "forward (a parameter)" : "forward (a leaf)") : "forward");
    const inputs = el("span", {});
    (n.inputs || []).forEach((i, k) => inputs.append(k ? ", " : "", nodeLink(i)));
    const label = n.name || (n.label ? n.label + "  (from its inputs)" : "(none)");
    panel.replaceChildren(el("h2", {}, "#" + n.id + " " + n.op),
      facts([["op", n.op], ["name", label], ["pass", pass], ["module", S(n.module) || "(none)"],
             ["line", n.file !== undefined ? S(n.file) + ":" + n.line : "?"], ["inputs", n.inputs ? inputs : "(none)"]]));
    if (n.src !== undefined) panel.append(el("pre", { class: "src" }, S(n.src)));
    n.outputs.forEach((v, k) => panel.append(el("h3", {}, n.outputs.length > 1 ? "value, output " + (k + 1) : "value"),
                                             valueBlock(v, S(n.value_note))));
    if (!n.backward) panel.append(el("h3", {}, "gradient"), valueBlock(n.grad, S(n.grad_note)));
    else panel.append(el("p", { class: "note" }, S(n.grad_note)));
  }
  let selected = null;
  function select(id, centre) {
    if (selected !== null && boxes.has(selected)) boxes.get(selected).classList.remove("selected");
    selected = id;
    if (boxes.has(id)) boxes.get(id).classList.add("selected");
    showNode(id);
    if (centre) centreOn(id);
  }

  // ---- the panel: a history event, its values as they were then
  function eventValues(title, list, open) {
    if (!list.length) return null;
    const part = el("div", {}, el("h3", {}, title));
    for (const [id, v] of list) {
      const shown = v >= 0 ? data.values[v] : null;
      const head = (id ? nodeText(id) : "(no node)") + (shown ? "  [" + shown.shape.join(",") + "]  mean " + num(shown.mean) : "  -");
      part.append(el("details", open ? { open: "" } : {}, el("summary", {}, head), valueBlock(v, "none")));
    }
    return part;
  }
  function showEvent(k) {
    const e = events[k];
    for (const [id, g] of boxes) {
      g.classList.toggle("current", id === e.node);
      g.classList.toggle("later", id > e.newest);
    }
    const what = (e.group ? "backward, grad of " : "forward ") + nodeText(e.node);
    document.getElementById("event-text").textContent = `event ${k + 1} of ${events.length}: ${what}  (${where(S(e.file), e.line)})`;
    const n = nodes.get(e.node);
    panel.replaceChildren(el("h2", {}, "event " + (k + 1) + ": " + (e.group ? "backward group" : "forward op")),
      facts([["node", nodeLink(e.node)], ["op", e.op], ["line", e.file !== undefined ? S(e.file) + ":" + e.line : "?"]]));
    if (n && n.src !== undefined) panel.append(el("pre", { class: "src" }, S(n.src)));
    if (!e.kept) panel.append(el("p", { class: "note" }, "its values fell out of the history's budget (:history SIZE keeps more)"));
    panel.append(el("p", { class: "hint" }, "values as they were at this event"));
    for (const part of [eventValues("inputs", e.inputs, false), eventValues("outputs", e.outputs, !e.group),
                        eventValues("gradient arrived (grad_output)", e.grad_outputs, e.group),
                        eventValues("gradients sent (grad_input)", e.grad_inputs, false)])
      if (part) panel.append(part);
    document.getElementById("prev").disabled = k === 0;
    document.getElementById("next").disabled = k === events.length - 1;
    if (boxes.has(e.node) && !visible(e.node)) centreOn(e.node);
  }
  function timeline() {
    const bar = document.getElementById("timeline");
    if (!events.length) {
      bar.className = "absent";
      bar.textContent = data.history_note;
      return;
    }
    const slider = el("input", { type: "range", id: "slider", min: 0, max: events.length - 1, value: events.length - 1 });
    const step = (d) => {
      slider.value = Math.min(events.length - 1, Math.max(0, Number(slider.value) + d));
      showEvent(Number(slider.value));
    };
    slider.addEventListener("input", () => showEvent(Number(slider.value)));
    bar.append(el("span", {}, "history"), el("button", { id: "prev", title: "previous event (left arrow)", onclick: () => step(-1) }, "\u25c0 prev"),
      slider, el("button", { id: "next", title: "next event (right arrow)", onclick: () => step(1) }, "next \u25b6"),
      el("span", { class: "event", id: "event-text" }));
    if (data.history_note) bar.append(el("span", { class: "note" }, "(" + data.history_note + ")"));
    document.addEventListener("keydown", (e) => {
      if (e.key === "ArrowLeft") step(-1);
      if (e.key === "ArrowRight") step(1);
    });
    showEvent(events.length - 1);
  }

  // ---- pan and zoom: the SVG's viewBox, `scale` pixels per layout unit
  const box = svg.viewBox.baseVal;
  const full = { x: box.x, y: box.y, w: box.width, h: box.height };
  svg.removeAttribute("width");
  svg.removeAttribute("height");
  const view = { x: full.x, y: full.y, scale: 1 };
  function apply() {
    const r = graph.getBoundingClientRect();
    svg.setAttribute("viewBox", `${view.x} ${view.y} ${r.width / view.scale} ${r.height / view.scale}`);
  }
  function fit() {
    const r = graph.getBoundingClientRect();
    view.scale = Math.min(r.width / full.w, r.height / full.h) * 0.98;
    view.x = full.x - (r.width / view.scale - full.w) / 2;
    view.y = full.y - (r.height / view.scale - full.h) / 2;
    apply();
  }
  function zoom(factor, cx, cy) {
    const ux = view.x + cx / view.scale, uy = view.y + cy / view.scale;
    view.scale = Math.min(8, Math.max(0.02, view.scale * factor));
    view.x = ux - cx / view.scale;
    view.y = uy - cy / view.scale;
    apply();
  }
  function centreOf(g) {   // a box's centre in layout units
    const r = g.getBoundingClientRect(), gr = graph.getBoundingClientRect();
    return { x: view.x + ((r.left + r.right) / 2 - gr.left) / view.scale, y: view.y + ((r.top + r.bottom) / 2 - gr.top) / view.scale };
  }
  function visible(id) {
    const r = boxes.get(id).getBoundingClientRect(), gr = graph.getBoundingClientRect();
    return r.left >= gr.left && r.right <= gr.right && r.top >= gr.top && r.bottom <= gr.bottom;
  }
  function centreOn(id) {
    if (!boxes.has(id)) return;
    const c = centreOf(boxes.get(id)), gr = graph.getBoundingClientRect();
    view.x = c.x - gr.width / 2 / view.scale;
    view.y = c.y - gr.height / 2 / view.scale;
    apply();
  }
  let drag = null;
  graph.addEventListener("mousedown", (e) => { drag = { x: e.clientX, y: e.clientY, vx: view.x, vy: view.y, moved: false }; });
  window.addEventListener("mousemove", (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) { drag.moved = true; graph.classList.add("dragging"); }
    view.x = drag.vx - dx / view.scale;
    view.y = drag.vy - dy / view.scale;
    apply();
  });
  window.addEventListener("mouseup", (e) => {
    const click = drag && !drag.moved;
    drag = null;
    graph.classList.remove("dragging");
    const g = click && e.target.closest ? e.target.closest("g.node") : null;
    if (g) for (const [id, b] of boxes) if (b === g) select(id, false);
  });
  graph.addEventListener("wheel", (e) => {
    e.preventDefault();
    const r = graph.getBoundingClientRect();
    zoom(Math.exp(-e.deltaY * 0.0015), e.clientX - r.left, e.clientY - r.top);
  }, { passive: false });
  document.getElementById("fit").addEventListener("click", fit);
  document.getElementById("zoom-in").addEventListener("click", () => zoom(1.25, graph.clientWidth / 2, graph.clientHeight / 2));
  document.getElementById("zoom-out").addEventListener("click", () => zoom(0.8, graph.clientWidth / 2, graph.clientHeight / 2));
  document.addEventListener("keydown", (e) => {
    if (e.key === "f") fit();
    if (e.key === "+" || e.key === "=") zoom(1.25, graph.clientWidth / 2, graph.clientHeight / 2);
    if (e.key === "-") zoom(0.8, graph.clientWidth / 2, graph.clientHeight / 2);
  });
  window.addEventListener("resize", apply);

  // ---- the saved values a backward node reads (forward -> backward edges, not laid out by Graphviz)
  function savedEdges() {
    const layer = document.createElementNS(svg.namespaceURI, "g");
    layer.setAttribute("id", "saved-values");
    for (const n of data.nodes) {
      if (!n.backward || !boxes.has(n.id)) continue;
      for (const i of n.inputs || []) {
        const from = nodes.get(i);
        if (!from || from.backward || !boxes.has(i)) continue;
        const a = centreOf(boxes.get(i)), b = centreOf(boxes.get(n.id));
        const line = document.createElementNS(svg.namespaceURI, "line");
        for (const [k, v] of [["x1", a.x], ["y1", a.y], ["x2", b.x], ["y2", b.y], ["class", "saved"]]) line.setAttribute(k, v);
        layer.append(line);
      }
    }
    svg.insertBefore(layer, svg.firstChild);   // under the boxes (page.css clears Graphviz's white background)
    document.getElementById("saved").addEventListener("change", (e) => { layer.style.display = e.target.checked ? "" : "none"; });
  }

  // ---- start: counts, notes, the first view
  document.getElementById("counts").textContent = `${data.nodes.length} nodes` +
    (data.total_nodes > data.nodes.length ? ` of ${data.total_nodes}` : "") + `, ${events.length} history events`;
  document.getElementById("notes").textContent = data.notes.join(" ");
  const gr = graph.getBoundingClientRect();
  if (Math.min(gr.width / full.w, gr.height / full.h) >= 0.6) fit();
  else apply();
  savedEdges();
  timeline();
  if (!events.length && data.nodes.length) centreOn(data.focus || data.nodes[data.nodes.length - 1].id);
})();
