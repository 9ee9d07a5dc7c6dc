/// The admin endpoint's dashboard: one self-contained page (no external assets) that polls
/// `/stats` and `/stats/history` every two seconds and draws them as inline SVG.
enum Dashboard {
    static let html = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Larder</title>
<style>
  :root { --bg:#0f1419; --panel:#171e26; --line:#263241; --text:#d7dee6; --dim:#7f8c99;
          --accent:#4fb3ff; --good:#5ad18a; --warn:#f0b44c; --bad:#ef6b6b; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; background: var(--bg); color: var(--text); }
  header { display: flex; align-items: baseline; gap: 16px; padding: 18px 24px 6px; }
  header h1 { margin: 0; font-size: 22px; letter-spacing: .5px; }
  header .meta { color: var(--dim); }
  header .live { margin-left: auto; color: var(--dim); font-size: 12px; }
  header .live.ok::before { content: "● "; color: var(--good); }
  header .live.down::before { content: "● "; color: var(--bad); }
  main { display: grid; grid-template-columns: repeat(12, 1fr); gap: 14px; padding: 12px 24px 24px; }
  .panel { background: var(--panel); border: 1px solid var(--line); border-radius: 10px; padding: 14px 16px; }
  .panel h2 { margin: 0 0 10px; font-size: 12px; font-weight: 600; text-transform: uppercase; letter-spacing: 1px; color: var(--dim); }
  .kpi { grid-column: span 2; }
  .kpi .value { font-size: 28px; font-weight: 650; }
  .kpi .sub { color: var(--dim); font-size: 12px; }
  .chart { grid-column: span 6; }
  .chart svg { width: 100%; height: 180px; display: block; }
  .chart .axis { stroke: var(--line); stroke-width: 1; }
  .chart .label { fill: var(--dim); font-size: 10px; }
  .chart .line { fill: none; stroke-width: 2; }
  .chart .area { opacity: .15; }
  .chart .note { fill: var(--dim); font-size: 12px; font-style: italic; }
  #chart-rps .line { stroke: var(--accent); } #chart-rps .area { fill: var(--accent); }
  #chart-hit .line { stroke: var(--good); } #chart-hit .area, #chart-hit .dot { fill: var(--good); }
  #chart-rps .dot { fill: var(--accent); }
  .tiers, .lookups { grid-column: span 6; }
  .hosts, .responses { grid-column: span 6; }
  .warm, .serving { grid-column: span 12; }
  .serving .list { display: flex; flex-wrap: wrap; gap: 6px 10px; align-items: baseline; margin: 2px 0; }
  .serving .what { color: var(--dim); font-size: 12px; min-width: 80px; }
  .chip { background: #0b1016; border: 1px solid var(--line); border-radius: 10px; padding: 1px 9px; font-size: 13px; }
  .bar { margin: 8px 0 12px; }
  .bar .name { display: flex; justify-content: space-between; font-size: 13px; }
  .bar .track { height: 10px; background: #0b1016; border-radius: 5px; overflow: hidden; margin-top: 4px; }
  .bar .fill { height: 100%; background: var(--accent); border-radius: 5px; }
  .stack { display: flex; height: 16px; border-radius: 5px; overflow: hidden; background: #0b1016; }
  .legend { display: flex; flex-wrap: wrap; gap: 10px 18px; margin-top: 10px; font-size: 12px; color: var(--dim); }
  .legend i { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 6px; vertical-align: -1px; }
  table { width: 100%; border-collapse: collapse; }
  td { padding: 4px 0; border-bottom: 1px solid var(--line); font-size: 13px; }
  td.n { text-align: right; color: var(--dim); width: 90px; font-variant-numeric: tabular-nums; }
  th { text-align: right; color: var(--dim); font-size: 11px; font-weight: 500; padding-bottom: 4px; }
  th:first-child { text-align: left; }
  td .hb { height: 4px; background: var(--accent); border-radius: 2px; margin-top: 3px; opacity: .7; }
  .empty { color: var(--dim); font-style: italic; }
  @media (max-width: 1000px) { .kpi { grid-column: span 4; } .chart, .tiers, .lookups, .hosts, .responses, .warm, .serving { grid-column: span 12; } }
</style>
</head>
<body>
<header>
  <h1>Larder</h1>
  <span class="meta" id="meta">caching proxy</span>
  <span class="live" id="live">connecting…</span>
</header>
<main>
  <section class="panel kpi"><h2>Hit ratio</h2><div class="value" id="k-hit">–</div><div class="sub" id="k-hit-bytes">bytes –</div></section>
  <section class="panel kpi"><h2>Requests/s</h2><div class="value" id="k-rps">–</div><div class="sub" id="k-req">– requests</div></section>
  <section class="panel kpi"><h2>Clients</h2><div class="value" id="k-conn">–</div><div class="sub" id="k-conn-total">– accepted</div></section>
  <section class="panel kpi"><h2>Cached</h2><div class="value" id="k-entries">–</div><div class="sub" id="k-bytes">–</div></section>
  <section class="panel kpi"><h2>Origin connections</h2><div class="value" id="k-origin" title="connections to origins open now, busy or idle in the pool">–</div><div class="sub" id="k-errors">– idle · – errors</div></section>
  <section class="panel kpi"><h2>Collapsed</h2><div class="value" id="k-collapsed">–</div><div class="sub" id="k-lag">loop lag –</div></section>
  <section class="panel chart" id="chart-rps"><h2>Requests per second</h2><svg viewBox="0 0 600 180" preserveAspectRatio="none"></svg></section>
  <section class="panel chart" id="chart-hit"><h2>Hit ratio</h2><svg viewBox="0 0 600 180" preserveAspectRatio="none"></svg></section>
  <section class="panel tiers"><h2>Storage</h2><div id="tiers"></div></section>
  <section class="panel lookups"><h2>What the cache did</h2><div class="stack" id="stack"></div><div class="legend" id="legend"></div></section>
  <section class="panel hosts"><h2>Top hosts</h2><table id="hosts"><tr><td class="empty">no requests yet</td></tr></table></section>
  <section class="panel responses"><h2>Responses and origin errors</h2><div id="responses"></div></section>
  <section class="panel serving"><h2>In force</h2><div id="serving"><div class="empty">–</div></div></section>
  <section class="panel warm"><h2>Warming</h2><div id="warm"><div class="empty">no warm job yet (POST /warm)</div></div></section>
</main>
<script>
"use strict";
const query = location.search;  // carries ?token= when the endpoint needs one
const $ = (id) => document.getElementById(id);
const fmtBytes = (n) => { const u = ["B","KiB","MiB","GiB","TiB"]; let i = 0; while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; } return (i ? n.toFixed(1) : n) + " " + u[i]; };
const fmtNum = (n) => n >= 1e6 ? (n / 1e6).toFixed(1) + "M" : n >= 1e4 ? (n / 1e3).toFixed(1) + "k" : String(Math.round(n));
const pct = (x) => (x * 100).toFixed(1) + "%";
// Axis values: small ones keep their decimals (0, 0.5, 1 rather than 0, 1, 1).
const fmtAxis = (n) => n >= 10 ? fmtNum(n) : String(Number(n.toPrecision(2)));
// The chart's top: the smallest 1, 2 or 5 times a power of ten at or above the largest value.
const niceTop = (v) => { const p = Math.pow(10, Math.floor(Math.log10(Math.max(v, 1e-9))));
  return [1, 2, 5, 10].map((m) => m * p).find((t) => t >= v); };
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({"&":"&amp;","<":"&lt;",">":"&gt;","\"":"&quot;"}[c]));
const sum = (o) => Object.values(o || {}).reduce((a, b) => a + b, 0);
const colors = { hit:"#5ad18a", stale_served:"#9fdc6a", revalidated_unchanged:"#4fb3ff", revalidated_changed:"#b48cff",
                 miss:"#f0b44c", only_if_cached_miss:"#ef6b6b", pass:"#7f8c99" };

// The history kept (up to 10 minutes), across the chart's width. A point without a value (an
// interval without cacheable lookups has no hit ratio) is a gap: the line stops and starts again,
// a lone point is a dot, and a chart without any value says so.
const ago = (s) => s >= 60 ? "-" + Math.round(s / 60) + " min" : "-" + Math.round(s) + " s";
function runs(points, value) {
  const out = [];
  let run = null;
  points.forEach((p, i) => {
    const v = value(p);
    if (v === null || v === undefined) { run = null; return; }
    if (!run) { run = []; out.push(run); }
    run.push([i, v]);
  });
  return out;
}
function drawChart(id, points, value, max, label, empty) {
  const svg = $(id).querySelector("svg");
  const W = 600, H = 180, L = 34, B = 16, T = 8;
  const top = Math.max(max(points), 1e-9);
  const span = Math.max(10, ...points.map((p) => p.t));
  const x = (i) => L + (W - L - 4) * (1 - points[i].t / span);
  const y = (v) => T + (H - T - B) * (1 - v / top);
  const segments = runs(points, value);
  const at = ([i, v]) => x(i).toFixed(1) + " " + y(v).toFixed(1);
  const line = segments.map((r) => "M" + r.map(at).join(" L")).join(" ");
  const area = segments.filter((r) => r.length > 1).map((r) => "M" + r.map(at).join(" L") +
      " L" + x(r[r.length - 1][0]).toFixed(1) + " " + (H - B) + " L" + x(r[0][0]).toFixed(1) + " " + (H - B) + " Z").join(" ");
  const dots = segments.filter((r) => r.length === 1).map((r) =>
      `<circle class="dot" cx="${x(r[0][0]).toFixed(1)}" cy="${y(r[0][1]).toFixed(1)}" r="2.5"/>`).join("");
  const grid = [0, 0.5, 1].map((f) => `<line class="axis" x1="${L}" x2="${W}" y1="${y(top * f)}" y2="${y(top * f)}"/>` +
      `<text class="label" x="2" y="${y(top * f) + 3}">${label(top * f)}</text>`).join("");
  const note = segments.length ? "" : `<text class="note" x="${(L + W) / 2 - 90}" y="${H / 2}">${empty}</text>`;
  svg.innerHTML = grid + `<path class="area" d="${area}"/><path class="line" d="${line}"/>` + dots + note +
      `<text class="label" x="${L}" y="${H - 2}">${ago(span)}</text>` +
      `<text class="label" x="${(L + W) / 2 - 14}" y="${H - 2}">${ago(span / 2)}</text>` +
      `<text class="label" x="${W - 30}" y="${H - 2}">now</text>`;
}

function bar(name, used, cap) {
  const f = cap > 0 ? Math.min(1, used / cap) : 0;
  const color = f > 0.9 ? "var(--warn)" : "var(--accent)";
  return `<div class="bar"><div class="name"><span>${name}</span><span>${fmtBytes(used)} of ${fmtBytes(cap)} · ${pct(f)}</span></div>` +
         `<div class="track"><div class="fill" style="width:${(f * 100).toFixed(1)}%;background:${color}"></div></div></div>`;
}

let lastRps = null;
async function refresh() {
  try {
    const [s, h] = await Promise.all([fetch("stats" + query).then((r) => r.json()), fetch("stats/history" + query).then((r) => r.json())]);
    $("live").className = "live ok"; $("live").textContent = "live";
    $("meta").textContent = `version ${s.version} · up ${Math.floor(s.uptime_seconds / 3600)}h ${Math.floor(s.uptime_seconds / 60) % 60}m`;
    const pts = h.points || [];
    lastRps = pts.length ? pts[pts.length - 1].rps : 0;
    $("k-hit").textContent = pct(s.hit_ratio.requests);
    $("k-hit-bytes").textContent = "bytes " + pct(s.hit_ratio.bytes);
    $("k-rps").textContent = fmtNum(lastRps);
    $("k-req").textContent = fmtNum(sum(s.requests)) + " requests";
    $("k-conn").textContent = fmtNum(s.client_connections_open);
    $("k-conn-total").textContent = fmtNum(s.client_connections) + " accepted";
    $("k-entries").textContent = fmtNum(s.cache_entries.disk + s.cache_entries.memory);
    $("k-bytes").textContent = s.cache_ephemeral ? fmtBytes(s.cache_bytes.memory) + " in memory only (ephemeral)"
        : fmtBytes(s.cache_bytes.disk) + " on disk";
    $("k-origin").textContent = fmtNum(s.origin_connections_open);
    $("k-errors").textContent = fmtNum(s.origin_connections_idle) + " idle · " + fmtNum(sum(s.origin_errors)) + " errors";
    $("k-collapsed").textContent = fmtNum(s.collapsed_requests);
    const lag = Math.max(0, ...Object.values(s.loop_lag_seconds || {}));
    $("k-lag").textContent = "loop lag " + (lag * 1000).toFixed(1) + " ms";
    drawChart("chart-rps", pts, (p) => p.rps, (ps) => niceTop(Math.max(...ps.map((p) => p.rps), 1)), fmtAxis,
              "no samples yet");
    drawChart("chart-hit", pts, (p) => p.hit_ratio, () => 1, (v) => Math.round(v * 100) + "%",
              "no cacheable requests in this span");
    // An ephemeral cache has no disk tier and no LMDB map.
    $("tiers").innerHTML = bar("Memory tier", s.cache_bytes.memory, s.cache_capacity_bytes.memory) + (s.cache_ephemeral
        ? `<div class="legend"><span>ephemeral: nothing is written to disk</span></div>`
        : bar("Disk tier", s.cache_bytes.disk, s.cache_capacity_bytes.disk) +
          bar("LMDB map", s.lmdb_map_used_bytes, s.lmdb_map_size_bytes));
    const total = sum(s.cache_lookups);
    $("stack").innerHTML = Object.entries(s.cache_lookups).filter(([, n]) => n > 0).map(([k, n]) =>
        `<div title="${k}: ${n}" style="width:${(n / total * 100).toFixed(2)}%;background:${colors[k] || "#888"}"></div>`).join("");
    $("legend").innerHTML = Object.entries(s.cache_lookups).map(([k, n]) =>
        `<span><i style="background:${colors[k] || "#888"}"></i>${k.replace(/_/g, " ")} ${fmtNum(n)}</span>`).join("");
    const classes = s.responses || {};
    const answered = Math.max(1, sum(classes));
    $("responses").innerHTML = Object.entries(classes).map(([k, n]) => {
      const c = k === "5xx" ? "var(--bad)" : k === "4xx" ? "var(--warn)" : k === "3xx" ? "#b48cff" : "var(--good)";
      return `<div class="bar"><div class="name"><span>${k}</span><span>${fmtNum(n)} · ${pct(n / answered)}</span></div>` +
             `<div class="track"><div class="fill" style="width:${(n / answered * 100).toFixed(1)}%;background:${c}"></div></div></div>`;
    }).join("") + `<div class="legend">` + Object.entries(s.origin_errors || {}).map(([k, n]) =>
        `<span>${k.replace(/_/g, " ")} ${fmtNum(n)}</span>`).join("") + `</div>`;
    const w = s.warm || { state: "idle" };
    if (w.state !== "idle") {
      const f = w.total > 0 ? w.done / w.total : 1;
      const eta = w.state === "running" && w.done > 0 ? " · ETA " + Math.round(w.elapsed_seconds / w.done * (w.total - w.done)) + " s" : "";
      const reasons = (w.failure_reasons || []).slice(0, 5).map((r) => `<span>${esc(r.reason)} ${fmtNum(r.count)}</span>`).join("");
      $("warm").innerHTML = `<div class="bar"><div class="name"><span>job ${w.job} · ${esc(w.state)}</span>` +
          `<span>${fmtNum(w.done)} of ${fmtNum(w.total)} · ${fmtBytes(w.bytes)} · ${w.elapsed_seconds.toFixed(1)} s${eta}</span></div>` +
          `<div class="track"><div class="fill" style="width:${(f * 100).toFixed(1)}%"></div></div></div>` +
          `<div class="legend"><span>stored ${fmtNum(w.stored)}</span><span>already fresh ${fmtNum(w.fresh)}</span>` +
          `<span>revalidated ${fmtNum(w.revalidated)}</span><span>not stored ${fmtNum(w.not_stored)}</span>` +
          `<span>failed ${fmtNum(w.failed)}</span></div>` + (reasons ? `<div class="legend">${reasons}</div>` : "");
    }
    const hosts = s.top_hosts || [];
    const most = hosts.length ? hosts[0].requests : 1;
    $("hosts").innerHTML = hosts.length ? `<tr><th>host</th><th>requests</th><th>hit ratio</th></tr>` + hosts.slice(0, 10).map((x) =>
        `<tr><td>${esc(x.host)}<div class="hb" style="width:${(x.requests / most * 100).toFixed(1)}%"></div></td><td class="n">${fmtNum(x.requests)}</td>` +
        `<td class="n" title="${x.hits} from the cache, ${x.misses} fetched">${x.hit_ratio === null || x.hit_ratio === undefined ? "–" : pct(x.hit_ratio)}</td></tr>`).join("")
        : `<tr><td class="empty">no requests yet</td></tr>`;
    // Named lists in force, one row each: the cache presets (listed, and those mirrors turn on), the mirrors.
    const lists = [["Presets", (s.presets || []).map(esc), "none (cache.presets)"],
                   ["Mirrors", (s.mirrors || []).map((m) => `${esc(m.name)} · ${esc(m.path)} → ${esc(m.upstream)}`),
                    "none (mirrors)"]];
    $("serving").innerHTML = lists.map(([what, items, none]) => `<div class="list"><span class="what">${what}</span>` +
        (items.length ? items.map((n) => `<span class="chip">${n}</span>`).join("") : `<span class="empty">${none}</span>`) +
        `</div>`).join("");
  } catch (e) {
    $("live").className = "live down"; $("live").textContent = "unreachable";
  }
}
refresh();
setInterval(refresh, 2000);
</script>
</body>
</html>
"""#
}
