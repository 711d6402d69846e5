// Dashboard of one study: reads the analyst token from the URL fragment (#token=..., which the
// browser never sends to the server), fetches the study's summary and draws small SVG charts,
// and fetches it again every 60 s (#token=...&refresh=SECONDS changes that). Only periods that
// have ended carry an estimate; a vertical line marks today (at the edge of the plot when today
// is before the first period or after the last).
// No third-party code: everything here is shipped with dpfreq.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const W = 960, H = 280, PAD = { l: 64, r: 16, t: 12, b: 36 };

function el(name, attrs, parent) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}

function fmt(x) {
  const a = Math.abs(x);
  if (a >= 1e6) return (x / 1e6).toFixed(1) + "M";
  if (a >= 1e4) return (x / 1e3).toFixed(0) + "k";
  return (Math.round(x * 10) / 10).toString();
}

// A "nice" tick step (1, 2 or 5 times a power of ten) giving at most `most` intervals.
function niceStep(span, most) {
  const raw = span / most;
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

// Axes with evenly spaced round y ticks (the range is widened to whole steps) and x labels
// every `step` periods; `today` (1-based period: 0 before the first, past the last after the
// end) draws the today marker, at the plot's edge when today is outside the plotted periods.
function frame(container, ymin, ymax, labels, bars, today) {
  container.textContent = "";
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, role: "img" }, container);
  const inner = W - PAD.l - PAD.r;
  const x = bars
    ? (i) => PAD.l + ((i + 0.5) * inner) / Math.max(1, labels.length)
    : (i) => PAD.l + (labels.length <= 1 ? 0 : (i * inner) / (labels.length - 1));
  const ystep = niceStep(Math.max(ymax - ymin, 1), 5);
  const lo = Math.floor(ymin / ystep) * ystep, hi = Math.ceil(ymax / ystep) * ystep;
  const span = hi - lo || 1;
  const y = (v) => H - PAD.b - ((v - lo) * (H - PAD.t - PAD.b)) / span;
  el("line", { x1: PAD.l, y1: H - PAD.b, x2: W - PAD.r, y2: H - PAD.b, class: "axis" }, svg);
  el("line", { x1: PAD.l, y1: PAD.t, x2: PAD.l, y2: H - PAD.b, class: "axis" }, svg);
  for (let k = 0; lo + k * ystep <= hi + 1e-9 * ystep; k++) {
    const v = lo + k * ystep;
    const t = el("text", { x: PAD.l - 6, y: y(v) + 4, "text-anchor": "end", class: "tick ytick" }, svg);
    t.textContent = fmt(v);
  }
  const step = Math.max(1, Math.ceil(labels.length / 8));
  for (let i = 0; i < labels.length; i += step) {
    const t = el("text", { x: x(i), y: H - PAD.b + 16, "text-anchor": "middle", class: "tick xtick" }, svg);
    t.textContent = labels[i];
  }
  // today: on its period, or at the edge it lies beyond (a study that has ended, or not begun)
  const past = today > labels.length, before = today < 1;
  const tx = past ? W - PAD.r : before ? PAD.l : x(today - 1);
  el("line", { x1: tx, y1: PAD.t, x2: tx, y2: H - PAD.b, class: past ? "today past" : before ? "today before" : "today" }, svg);
  const t = el("text", { x: past ? tx - 4 : tx + 4, y: PAD.t + 10, "text-anchor": past ? "end" : "start",
                         class: "tick today-label" }, svg);
  t.textContent = past ? "today (after the last period) →" : before ? "← today (before the first period)" : "today";
  return { svg, x, y };
}

function day(iso) { return String(iso).slice(0, 10); }

// The estimate of the ended periods over the whole horizon's axis (`labels`).
function drawEstimate(container, est, labels, today) {
  const c = est.columns;
  // a period whose reports are not all in yet has no estimate (null): it is not drawn
  const known = c.estimate.map((v, i) => i).filter((i) => c.estimate[i] !== null);
  const lo = Math.min(0, ...known.map((i) => c.band_lower[i]));
  const hi = Math.max(1, ...known.map((i) => c.band_upper[i]));
  const { svg, x, y } = frame(container, lo, hi, labels.map(day), false, today);
  if (!known.length) return;
  const upper = known.map((i) => `${x(i)},${y(c.band_upper[i])}`);
  const lower = known.map((i) => `${x(i)},${y(c.band_lower[i])}`).reverse();
  el("polygon", { points: upper.concat(lower).join(" "), class: "band" }, svg);
  el("polyline", { points: known.map((i) => `${x(i)},${y(c.estimate[i])}`).join(" "), class: "line" }, svg);
}

function drawBars(container, labels, values, today) {
  const { svg, x, y } = frame(container, 0, Math.max(1, ...values), labels.map(day), true, today);
  const w = Math.max(1, (W - PAD.l - PAD.r) / Math.max(1, values.length) - 1);
  values.forEach((v, i) => {
    el("rect", { x: x(i) - w / 2, y: y(v), width: w, height: Math.max(0, y(0) - y(v)),
                 class: "bar", "data-period": i + 1, "data-reports": v }, svg);
  });
}

function fillTable(id, rows) {
  const body = document.querySelector(`#${id} tbody`);
  body.textContent = "";
  for (const [a, b] of rows) {
    const tr = document.createElement("tr");
    for (const v of [a, b]) { const td = document.createElement("td"); td.textContent = v; tr.appendChild(td); }
    body.appendChild(tr);
  }
}

function fragment() { return new URLSearchParams(location.hash.slice(1)); }

async function load() {
  const study = document.body.dataset.study;
  const status = document.getElementById("status");
  const token = fragment().get("token");
  if (!token) {
    status.textContent = "add #token=<analyst token> to the address to see this study";
    status.className = "error";
    return false;
  }
  const resp = await fetch(`/v1/studies/${encodeURIComponent(study)}/summary`, {
    headers: { Authorization: `Bearer ${token}` } });
  const data = await resp.json();
  if (!resp.ok) { status.textContent = data.error || `error ${resp.status}`; status.className = "error"; return true; }
  const rp = data.reports_per_period;
  document.getElementById("devices").textContent = data.devices;
  const min = data.study.min_devices;
  document.getElementById("minimum").textContent = data.estimate
    ? `estimates shown: at least ${min} devices have reported (the study's public minimum)`
    : `estimates withheld until at least ${min} devices have reported (the study's public minimum)`;
  document.getElementById("reports-total").textContent = rp.reports.reduce((a, b) => a + b, 0);
  document.getElementById("privacy").textContent = `ε = ${data.study.epsilon}`;
  drawBars(document.getElementById("reports-chart"), rp.date, rp.reports, data.today);
  fillTable("orders", data.enrolled_per_order.map((n, h) => [h, n]));
  fillTable("rejections", Object.entries(data.rejections));
  const note = document.getElementById("estimate-note");
  const vacuous = document.getElementById("vacuous");
  vacuous.hidden = true;
  if (data.estimate) {
    drawEstimate(document.getElementById("estimate-chart"), data.estimate, rp.date, data.today);
    vacuous.hidden = !data.estimate.band_vacuous;
    const none = data.periods_ended ? "" : "No period has ended yet: nothing is estimated. ";
    note.textContent = `${none}shaded: band holding for all ended periods at once, ` +
      `confidence ${data.estimate.confidence}. ${data.estimate.description}`;
  } else {
    document.getElementById("estimate-chart").textContent = "";
    note.textContent = `withheld until at least ${min} devices have reported (enrolled devices that have not reported do not count)`;
  }
  status.textContent = `updated ${new Date().toISOString().slice(0, 19)}Z`;
  document.body.dataset.ready = "1";
  document.body.dataset.loads = String(Number(document.body.dataset.loads || 0) + 1);
  return true;
}

function failed(e) {
  const status = document.getElementById("status");
  status.textContent = `could not load: ${e}`;
  status.className = "error";
}

// Refresh on a timer; a slow answer is awaited before the next one is asked for.
async function refresh() {
  const seconds = Math.max(1, Number(fragment().get("refresh")) || 60);
  let again = true;
  try { again = await load(); } catch (e) { failed(e); }
  if (again) setTimeout(refresh, seconds * 1000);
}

refresh();
