// cashg studio page: write tab (text, writer or drawn references, neatness, streamed line) and
// browse tab (metrics, pictures, report). No external assets: works offline.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { info: null, writer: null, pad: [], points: [], text: "", busy: false };
const BOXES = 8;

// ---- tabs -----------------------------------------------------------------------------------
for (const tab of document.querySelectorAll(".tab")) {
  tab.addEventListener("click", () => {
    for (const t of document.querySelectorAll(".tab")) t.classList.toggle("active", t === tab);
    for (const p of document.querySelectorAll(".panel")) p.hidden = p.id !== "panel-" + tab.dataset.panel;
    if (tab.dataset.panel === "browse") loadBrowse();
  });
}

// ---- info, text, writers --------------------------------------------------------------------
async function loadInfo() {
  const info = await (await fetch("/api/info")).json();
  state.info = info;
  $("experiment").textContent = "· " + info.experiment;
  $("text").maxLength = info.limits.max_text_chars;
  $("text-hint").textContent = info.alphabet ? "The model writes these characters: " + info.alphabet : "";
  const check = $("check");
  check.checked = !!(info.check && info.check.default);
  check.disabled = !(info.check && info.check.available);
  check.parentElement.title = info.check && info.check.available
    ? "each letter drawn " + info.check.candidates + " times; the run's glyph reader keeps the drawing it reads best"
    : "this run has no glyph reader to check letters with";
  const neat = $("neatness");
  neat.value = info.decoding.neatness.toFixed(2);
  const tick = document.createElement("option");
  tick.value = info.decoding.neatness.toFixed(2);
  $("neat-ticks").appendChild(tick);
  $("tuned-label").textContent = "▲ tuned (temperature " + info.decoding.temperature + ")";
  $("tuned-label").style.left = (info.decoding.neatness * 100).toFixed(1) + "%";
  $("seed").value = info.decoding.seed;
  if (info.decoding_curve) {
    // what neatness costs in style, measured on held-out writers by the pipeline
    $("neat-cost").textContent = "Held-out writers: " + info.decoding_curve.map((r) =>
      "temperature " + r.temperature + ": misread " + Math.round(100 * r.CER) +
      " % of characters, style recognised " + Math.round(100 * r.STYLE_top1) + " %").join(" · ");
  }
  updateTemperature();
  updateCount();
  const box = $("writers");
  for (const w of info.writers) {
    const b = document.createElement("button");
    b.type = "button"; b.className = "writer"; b.dataset.writer = w.id; b.setAttribute("role", "option");
    b.innerHTML = "";
    const img = document.createElement("img");
    img.loading = "lazy"; img.alt = "references of " + w.id;
    img.src = "/api/writer.png?writer=" + encodeURIComponent(w.id) + "&n=6";
    const label = document.createElement("span");
    label.textContent = w.id + (w.split !== "test" ? " (" + w.split + ")" : "");
    b.append(img, label);
    b.addEventListener("click", () => selectWriter(w.id));
    box.appendChild(b);
  }
  if (info.writers.length) selectWriter(info.writers[0].id);
  else document.querySelector("input[value=drawing]").click();
  drawPad();
}

function selectWriter(id) {
  state.writer = id;
  for (const b of document.querySelectorAll(".writer")) b.classList.toggle("selected", b.dataset.writer === id);
}

function updateTemperature() {
  const n = parseFloat($("neatness").value);
  $("temperature").textContent = "temperature " + (1.0 - 0.5 * n).toFixed(2);
}
function updateCount() {
  const t = $("text").value;
  $("text-count").textContent = t.length + " / " + (state.info ? state.info.limits.max_text_chars : "");
}
$("neatness").addEventListener("input", updateTemperature);
$("text").addEventListener("input", updateCount);
for (const r of document.querySelectorAll("input[name=style]")) {
  r.addEventListener("change", () => {
    const drawing = document.querySelector("input[name=style]:checked").value === "drawing";
    $("writer-pane").hidden = drawing; $("drawing-pane").hidden = !drawing;
  });
}

// ---- drawing pad: one glyph per box, pointer events (mouse, touch, pen) ---------------------
const pad = $("pad");
const padCtx = pad.getContext("2d");
state.pad = Array.from({ length: BOXES }, () => []);
let current = null; // {box, stroke}

function boxWidth() { return pad.width / BOXES; }
function padPoint(ev) {
  const r = pad.getBoundingClientRect();
  return [(ev.clientX - r.left) * pad.width / r.width, (ev.clientY - r.top) * pad.height / r.height];
}
function drawPad() {
  const w = boxWidth(), h = pad.height;
  padCtx.clearRect(0, 0, pad.width, h);
  const letters = (state.info && state.info.suggested) || [];
  for (let i = 0; i < BOXES; i++) {
    padCtx.strokeStyle = "#d7dbe3"; padCtx.lineWidth = 1;
    padCtx.strokeRect(i * w + 0.5, 0.5, w - 1, h - 1);
    padCtx.fillStyle = "rgba(45, 91, 215, 0.10)";
    padCtx.font = Math.round(h * 0.62) + "px serif"; padCtx.textAlign = "center"; padCtx.textBaseline = "middle";
    if (letters[i]) padCtx.fillText(letters[i], i * w + w / 2, h * 0.52);
  }
  padCtx.strokeStyle = "#1b2a4a"; padCtx.lineWidth = 3; padCtx.lineCap = "round"; padCtx.lineJoin = "round";
  state.pad.forEach((strokes, i) => {
    for (const s of strokes) {
      padCtx.beginPath();
      s.forEach(([x, y], k) => (k ? padCtx.lineTo(i * w + x, y) : padCtx.moveTo(i * w + x, y)));
      if (s.length === 1) padCtx.lineTo(i * w + s[0][0] + 0.1, s[0][1]);
      padCtx.stroke();
    }
  });
  const n = state.pad.filter((s) => s.length).length;
  const pts = state.pad.flat().reduce((a, s) => a + s.length, 0);
  $("pad-info").textContent = n + " glyph(s), " + pts + " points drawn" +
    (state.info ? "; the model reads " + state.info.style_refs + " references" : "");
}
pad.addEventListener("pointerdown", (ev) => {
  ev.preventDefault();
  pad.setPointerCapture(ev.pointerId);
  const [x, y] = padPoint(ev);
  const box = Math.min(BOXES - 1, Math.max(0, Math.floor(x / boxWidth())));
  current = { box, stroke: [[x - box * boxWidth(), y]] };
  state.pad[box].push(current.stroke);
  drawPad();
});
pad.addEventListener("pointermove", (ev) => {
  if (!current) return;
  const [x, y] = padPoint(ev);
  const w = boxWidth();
  const bx = Math.min(w, Math.max(0, x - current.box * w)), by = Math.min(pad.height, Math.max(0, y));
  const last = current.stroke[current.stroke.length - 1];
  if (Math.hypot(bx - last[0], by - last[1]) >= 1) { current.stroke.push([bx, by]); drawPad(); }
});
for (const t of ["pointerup", "pointercancel", "pointerleave"]) pad.addEventListener(t, () => { current = null; });
$("clear-pad").addEventListener("click", () => { state.pad = Array.from({ length: BOXES }, () => []); drawPad(); });

// ---- the generated line, redrawn to fit as points arrive ------------------------------------
const ink = $("ink");
function drawInk() {
  const dpr = window.devicePixelRatio || 1;
  const cw = ink.clientWidth, ch = ink.clientHeight;
  if (ink.width !== Math.round(cw * dpr)) { ink.width = Math.round(cw * dpr); ink.height = Math.round(ch * dpr); }
  const ctx = ink.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = "#ffffff"; ctx.fillRect(0, 0, cw, ch);
  const pts = state.points;
  ink.dataset.points = String(pts.length);
  if (!pts.length) return;
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  for (const p of pts) { x0 = Math.min(x0, p[0]); x1 = Math.max(x1, p[0]); y0 = Math.min(y0, p[1]); y1 = Math.max(y1, p[1]); }
  const m = 20;
  const scale = Math.min(110, (cw - 2 * m) / Math.max(x1 - x0, 1e-3), (ch - 2 * m) / Math.max(y1 - y0, 1e-3));
  const ox = m - x0 * scale, oy = (ch - (y1 - y0) * scale) / 2 - y0 * scale;
  ctx.strokeStyle = "#1b2a4a"; ctx.lineWidth = Math.max(1.2, scale * 0.035); ctx.lineCap = "round"; ctx.lineJoin = "round";
  const space = (c) => /\s/.test(state.text[c] || "");
  ctx.beginPath();
  let down = false;
  for (let i = 0; i < pts.length; i++) {
    const [x, y, pen, c] = pts[i];
    if (space(c)) { down = false; continue; }
    const X = ox + x * scale, Y = oy + y * scale;
    if (down) ctx.lineTo(X, Y); else { ctx.moveTo(X, Y); ctx.lineTo(X + 0.01, Y); }
    down = !(pen === 1 || pen === 3);
  }
  ctx.stroke();
}
let frame = null;
function scheduleDraw() { if (!frame) frame = requestAnimationFrame(() => { frame = null; drawInk(); }); }
window.addEventListener("resize", scheduleDraw);

// ---- write: POST, then read the server-sent events of the response --------------------------
function setStatus(text, isError) { $("status").textContent = text; $("status").classList.toggle("error", !!isError); }

function requestBody() {
  const body = { text: $("text").value, seed: parseInt($("seed").value || "0", 10), neatness: parseFloat($("neatness").value) };
  if (state.info && state.info.check && state.info.check.available) body.check = $("check").checked;
  if (document.querySelector("input[name=style]:checked").value === "writer") body.writer = state.writer;
  else {
    const letters = (state.info && state.info.suggested) || [];
    body.drawing = { height: pad.height, glyphs: state.pad.map((strokes, i) => ({ char: letters[i] || "", strokes })) };
  }
  return body;
}

async function write() {
  if (state.busy) return;
  state.busy = true; $("write").disabled = true;
  state.points = []; state.text = $("text").value; $("points-count").textContent = "0";
  $("downloads").hidden = true; drawInk();
  const t0 = performance.now();
  let first = null;
  setStatus("sending…");
  try {
    const res = await fetch("/api/write", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(requestBody()) });
    if (!res.ok) {
      let msg = res.status + " " + res.statusText;
      try { msg = (await res.json()).error || msg; } catch (e) { /* not JSON */ }
      setStatus(msg, true); return;
    }
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const raw = buf.slice(0, cut); buf = buf.slice(cut + 2);
        let event = "message", data = "";
        for (const line of raw.split("\n")) {
          if (line.startsWith("event: ")) event = line.slice(7);
          else if (line.startsWith("data: ")) data += line.slice(6);
        }
        const msg = data ? JSON.parse(data) : {};
        if (event === "queued") setStatus("waiting in the queue: position " + msg.position);
        else if (event === "start") {
          setStatus("writing…");
          $("refs").src = msg.references_png; $("refs-box").hidden = false; $("refs-note").textContent = msg.note;
        } else if (event === "points") {
          if (first === null) first = (performance.now() - t0) / 1000;
          for (const p of msg.points) state.points.push(p);
          $("points-count").textContent = String(state.points.length);
          scheduleDraw();
        } else if (event === "done") {
          state.points = msg.points; $("points-count").textContent = String(state.points.length); scheduleDraw();
          const total = (performance.now() - t0) / 1000;
          setStatus("done: first stroke after " + (first ?? total).toFixed(2) + " s, whole line in " + total.toFixed(2) + " s (" + msg.points.length + " points)");
          for (const [fmt, url] of Object.entries(msg.downloads)) { const a = $("dl-" + fmt); if (a) a.href = url; }
          $("downloads").hidden = false;
        } else if (event === "error") setStatus(msg.error, true);
      }
    }
  } catch (e) {
    setStatus("connection failed: " + e, true);
  } finally {
    state.busy = false; $("write").disabled = false;
  }
}
$("write").addEventListener("click", write);
$("text").addEventListener("keydown", (ev) => { if (ev.key === "Enter") write(); });

// ---- browse ---------------------------------------------------------------------------------
let browsed = false;
function fmt(v) { return v === null || v === undefined ? "--" : (typeof v === "number" ? v.toFixed(3) : String(v)); }
async function loadBrowse() {
  if (browsed) return;
  browsed = true;
  const data = await (await fetch("/api/browse")).json();
  const box = $("experiments");
  for (const e of data.experiments) {
    const card = document.createElement("div"); card.className = "card";
    const h = document.createElement("h2"); h.textContent = e.name; card.appendChild(h);
    if (e.metrics) {
      const t = document.createElement("table");
      t.innerHTML = "<tr><th>score</th><th>value</th></tr>";
      for (const [k, v] of Object.entries(e.metrics.scores)) { const r = t.insertRow(); r.insertCell().textContent = k; r.insertCell().textContent = fmt(v); }
      card.appendChild(t);
      if (Object.keys(e.metrics.classes).length) {
        const c = document.createElement("table");
        c.innerHTML = "<tr><th>character class</th><th>error (generated)</th><th>error (ground truth)</th></tr>";
        for (const [k, v] of Object.entries(e.metrics.classes)) { const r = c.insertRow(); r.insertCell().textContent = k; r.insertCell().textContent = fmt(v.generated); r.insertCell().textContent = fmt(v.ground_truth); }
        card.appendChild(c);
      }
    } else { const p = document.createElement("p"); p.className = "muted"; p.textContent = "no metrics"; card.appendChild(p); }
    for (const [kind, url] of Object.entries(e.pictures)) {
      const p = document.createElement("p"); p.textContent = kind === "generated" ? "generated held-out lines (each under its ground truth)" : "new text";
      const img = document.createElement("img"); img.loading = "lazy"; img.src = url; img.alt = e.name + " " + kind;
      card.append(p, img);
    }
    box.appendChild(card);
  }
  const rep = await fetch("/api/report");
  $("report").innerHTML = rep.ok ? (await rep.json()).html : "<p class='muted'>this run has no report</p>";
}

loadInfo().catch((e) => setStatus("could not load the run: " + e, true));
