#include "launcher/observe/status_page.hpp"

namespace ddprun::launcher {
namespace {

// The page is written for the DOM the tests read back: each rank is <tr data-rank="N"> whose cells
// carry the field's name as their class (td.pid, td.state, td.step ...).
constexpr std::string_view kPage = R"HTML(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>ddprun</title>
<style>
  :root { --fg: #1d2330; --muted: #6b7280; --line: #e5e7eb; --bg: #ffffff; --head: #f3f4f6;
          --ok: #15803d; --bad: #b91c1c; --warn: #b45309; --accent: #1d4ed8; }
  @media (prefers-color-scheme: dark) {
    :root { --fg: #e5e7eb; --muted: #9ca3af; --line: #374151; --bg: #111827; --head: #1f2937;
            --ok: #4ade80; --bad: #f87171; --warn: #fbbf24; --accent: #93c5fd; }
  }
  body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg);
         background: var(--bg); margin: 0; padding: 16px 24px; }
  h1 { font-size: 18px; margin: 0 0 4px 0; }
  h2 { font-size: 15px; margin: 20px 0 6px 0; }
  .muted { color: var(--muted); }
  #summary span { margin-right: 18px; }
  #conn.live { color: var(--ok); } #conn.lost { color: var(--bad); }
  table { border-collapse: collapse; min-width: 60%; font-variant-numeric: tabular-nums; }
  th, td { border-bottom: 1px solid var(--line); padding: 4px 8px; text-align: left; white-space: nowrap; }
  th { background: var(--head); font-weight: 600; position: sticky; top: 0; }
  td.num, th.num { text-align: right; }
  td.text, td.detail { white-space: normal; max-width: 40em; overflow-wrap: anywhere; }
  .state-running { color: var(--ok); } .state-failed { color: var(--bad); font-weight: 600; }
  .state-stopped, .state-exited { color: var(--muted); } .state-starting { color: var(--warn); }
  tr.straggler td { background: rgba(245, 158, 11, 0.15); }
  tr.straggler td.rank::after { content: " straggler"; color: var(--warn); font-size: 12px; }
  tr.gpu-straggler td { background: rgba(245, 158, 11, 0.15); }
  tr.gpu-straggler td.rank::after { content: " gpu straggler"; color: var(--warn); font-size: 12px; }
  td.gpu { font-family: ui-monospace, monospace; cursor: help; }
  td.gpu.warn { color: var(--warn); } td.gpu.bad { color: var(--bad); font-weight: 600; }
  table.no-gpu .gpu { display: none; }
  #gpu-notes div { color: var(--warn); margin-top: 4px; }
  button { font: inherit; padding: 4px 12px; border: 1px solid var(--line); border-radius: 4px;
           background: var(--head); color: var(--fg); cursor: pointer; }
  button:disabled { opacity: 0.6; cursor: progress; }
  pre { background: var(--head); padding: 8px; overflow: auto; margin: 4px 0; }
  #digest div { font-family: ui-monospace, monospace; white-space: pre-wrap; }
  #events td.time { color: var(--muted); }
  details summary { cursor: pointer; }
  .error { color: var(--bad); }
</style>
</head>
<body>
<h1>ddprun <span id="run-id" class="muted"></span></h1>
<div id="summary">
  <span>world size <b id="world-size">-</b></span>
  <span>restarts <b id="restarts">-</b></span>
  <span>hangs <b id="hangs">-</b></span>
  <span>attempt <b id="attempt">-</b></span>
  <span id="nodes" class="muted"></span>
  <span id="conn" class="muted">connecting</span>
</div>

<h2>Ranks</h2>
<table id="ranks" class="no-gpu">
  <thead><tr>
    <th class="num">rank</th><th class="num">node</th><th class="num">pid</th><th>state</th>
    <th class="num">step</th><th class="num">samples/s</th><th class="num">CPU %</th>
    <th class="num">RSS</th><th class="gpu">GPU</th><th class="num">output age</th><th>text</th>
  </tr></thead>
  <tbody></tbody>
</table>
<div id="gpu-notes"></div>

<h2>Stacks <button id="stacks-button" type="button">Capture stacks</button> <span id="stacks-state" class="muted"></span></h2>
<div id="digest"></div>
<div id="stacks"></div>

<h2>Events</h2>
<table id="events">
  <thead><tr><th>time</th><th>event</th><th class="num">node</th><th class="num">rank</th><th class="num">pid</th><th>detail</th></tr></thead>
  <tbody></tbody>
</table>

<script>
"use strict";
// The page's own ?token=, passed on to the API (an endpoint bound beyond loopback requires it).
const token = new URLSearchParams(window.location.search).get("token");
function api(path) {
  return token === null ? path : path + "?token=" + encodeURIComponent(token);
}
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function setText(id, text) { document.getElementById(id).textContent = String(text); }
function bytes(n) {
  if (!(n > 0)) return "0";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n.toFixed(0) : n.toFixed(1)) + " " + units[i];
}
function seconds(s) {
  if (s === undefined || s === null || s < 0) return "-";
  if (s < 60) return s.toFixed(1) + " s";
  if (s < 3600) return Math.floor(s / 60) + " min " + Math.floor(s % 60) + " s";
  return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
}
function fixed(x, digits) { return typeof x === "number" ? x.toFixed(digits) : "-"; }

// A rank's GPUs, as the console's gpu column says them (status_render.cpp: shown_gpu, gpu_cell,
// gpu_problem_word). A value NVML did not give is null: shown "-", never 0.
function known(x) { return typeof x === "number"; }
function shownGpu(gpus) {
  if (!gpus || !gpus.length) return null;
  const holds = gpus.some((g) => g.own_memory_bytes > 0);
  let first = null;
  for (const g of gpus) {
    if (holds && !(g.own_memory_bytes > 0)) continue;
    if (g.problem) return g;
    if (first === null) first = g;
  }
  return first;
}
function problemWord(problem) {
  const words = [["GPU_IS_LOST", "LOST"], ["RESET_REQUIRED", "RESET"], ["retired memory pages", "RETIRED"],
                 ["ECC", "ECC"], ["remapping", "REMAP"]];
  for (const [needle, word] of words) if (problem.includes(needle)) return word;
  return "UNHEALTHY";
}
function gib(n) {
  if (n === 0) return "0";
  const v = n / 1073741824;
  return v < 9.95 ? v.toFixed(1) : v.toFixed(0);
}
function lastXid(g) { return (g.xids || []).length ? String(g.xids[g.xids.length - 1]) : ""; }
function gpuCell(gpus) {
  const g = shownGpu(gpus);
  if (!g) return "";
  let cell;
  if (g.problem) {
    cell = problemWord(g.problem);
  } else {
    const used = g.memory_used_bytes, total = g.memory_total_bytes;
    cell = (known(g.utilisation_percent) ? g.utilisation_percent + "%" : "-") + " " +
           (known(used) || known(total) ? (known(used) ? gib(used) : "-") + "/" + (known(total) ? gib(total) : "-") + "G" : "-") +
           " " + (known(g.temperature_c) ? g.temperature_c + "C" : "-");
    if ((g.throttle || []).length) cell += " thr";
    if (g.xid_count > 0) cell += " xid" + lastXid(g);
  }
  if (gpus.length > 1) cell += " +" + (gpus.length - 1);
  return cell;
}
// Every GPU of the rank in full, for the cell's tooltip: one line each.
function gpuDetail(gpus) {
  const lines = [];
  for (const g of gpus || []) {
    const parts = [
      "utilisation " + (known(g.utilisation_percent) ? g.utilisation_percent + " %" : "-"),
      "memory " + (known(g.memory_used_bytes) ? bytes(g.memory_used_bytes) : "-") + " of " +
        (known(g.memory_total_bytes) ? bytes(g.memory_total_bytes) : "-") +
        ", own " + (known(g.own_memory_bytes) ? bytes(g.own_memory_bytes) : "-"),
      "temperature " + (known(g.temperature_c) ? g.temperature_c + " C" : "-"),
      "power " + (known(g.power_watts) ? g.power_watts.toFixed(1) + " W" : "-"),
      "throttled " + ((g.throttle || []).length ? g.throttle.join(" ") : "no"),
      "uncorrectable ECC errors " + (known(g.uncorrectable_ecc_errors) ? g.uncorrectable_ecc_errors : "-"),
      "Xids " + (g.xid_count || 0) + ((g.xids || []).length ? " (last: " + g.xids.join(" ") + ")" : ""),
    ];
    if (g.problem) parts.push("problem: " + g.problem);
    lines.push("GPU " + g.index + " (" + (g.uuid || "uuid unknown") + ", " + (g.bus_id ? "bus " + g.bus_id : "bus unknown") +
               "): " + parts.join(", "));
  }
  return lines.join("\n");
}

function renderStatus(status) {
  setText("run-id", status.run_id || "");
  setText("world-size", status.world_size);
  const nodes = status.nodes || [];
  let restarts = 0, hangs = 0, attempts = [];
  const hosts = [];
  const rows = [];
  const notes = [];
  let anyGpu = false;
  for (const node of nodes) {
    restarts = Math.max(restarts, node.restarts || 0);
    hangs += node.hangs || 0;
    attempts.push(node.attempt);
    hosts.push("node " + node.node_rank + ": " + node.host);
    const said = new Set();
    for (const rank of node.ranks || []) {
      rows.push([node, rank]);
      if ((rank.gpus || []).length) anyGpu = true;
      // Each unhealthy GPU once per node (several ranks may see it), with its whole reason.
      for (const g of rank.gpus || []) {
        if (!g.problem || said.has(g.index)) continue;
        said.add(g.index);
        notes.push("node " + node.node_rank + ": GPU " + g.index + " (" + (g.uuid || "uuid unknown") + ", " +
                   (g.bus_id ? "bus " + g.bus_id : "bus unknown") + ") " + g.problem);
      }
    }
  }
  for (const node of nodes) {
    if (node.gpu_note) notes.push("node " + node.node_rank + ": gpu: " + node.gpu_note);
  }
  rows.sort((a, b) => a[1].rank - b[1].rank);
  setText("restarts", restarts);
  setText("hangs", hangs);
  setText("attempt", attempts.length ? Array.from(new Set(attempts)).join(",") : "-");
  setText("nodes", hosts.join("  "));
  const body = document.createElement("tbody");
  for (const [node, rank] of rows) {
    const tr = document.createElement("tr");
    tr.dataset.rank = rank.rank;
    // A rank that is both is a straggler (its step rate is the nearer measure), as in the console.
    if (rank.straggler) tr.className = "straggler";
    else if (rank.gpu_straggler) tr.className = "gpu-straggler";
    const p = rank.progress;
    const cells = [
      ["rank", rank.rank, "num"], ["node", node.node_rank, "num"], ["pid", rank.pid, "num"],
      ["state", rank.state + ((rank.state === "failed" || rank.state === "exited") ? " (" + rank.exitcode + ")" : ""),
       "state-" + rank.state],
      ["step", p ? p.step : "-", "num"], ["samples-per-second", p ? fixed(p.samples_per_second, 1) : "-", "num"],
      ["cpu", fixed(rank.cpu_percent, 0), "num"], ["rss", bytes(rank.rss_bytes), "num"],
      ["gpu", gpuCell(rank.gpus)], ["output-age", seconds(rank.output_age_seconds), "num"], ["text", p ? p.text : ""],
    ];
    for (const [name, value, extra] of cells) tr.appendChild(el("td", value, name + (extra ? " " + extra : "")));
    const shown = shownGpu(rank.gpus);
    if (shown) {
      const gpu = tr.querySelector("td.gpu");
      gpu.title = gpuDetail(rank.gpus);
      if (shown.problem) gpu.classList.add("bad");
      else if ((shown.throttle || []).length || shown.xid_count > 0) gpu.classList.add("warn");
    }
    body.appendChild(tr);
  }
  const table = document.getElementById("ranks");
  table.replaceChild(body, table.tBodies[0]);
  table.classList.toggle("no-gpu", !anyGpu);
  document.getElementById("gpu-notes").replaceChildren(...notes.map((line) => el("div", line)));
}

function renderEvents(events) {
  const body = document.createElement("tbody");
  for (const ev of (events || []).slice().reverse()) {
    const tr = document.createElement("tr");
    const detail = {};
    for (const key of Object.keys(ev)) {
      if (!["time", "event", "node_rank", "rank", "pid"].includes(key)) detail[key] = ev[key];
    }
    const when = new Date(ev.time * 1000);
    tr.appendChild(el("td", when.toLocaleTimeString(), "time"));
    tr.appendChild(el("td", ev.event, "event"));
    tr.appendChild(el("td", ev.node_rank >= 0 ? ev.node_rank : "", "num"));
    tr.appendChild(el("td", ev.rank >= 0 ? ev.rank : "", "num"));
    tr.appendChild(el("td", ev.pid > 0 ? ev.pid : "", "num"));
    tr.appendChild(el("td", Object.keys(detail).length ? JSON.stringify(detail) : "", "detail"));
    body.appendChild(tr);
  }
  const table = document.getElementById("events");
  table.replaceChild(body, table.tBodies[0]);
}

let polling = false;
async function poll() {
  if (polling) return;
  polling = true;
  const conn = document.getElementById("conn");
  try {
    const reply = await fetch(api("api/status"), {cache: "no-store"});
    if (!reply.ok) throw new Error("HTTP " + reply.status);
    const status = await reply.json();
    renderStatus(status);
    renderEvents(status.events);
    conn.textContent = "live";
    conn.className = "live";
  } catch (e) {
    conn.textContent = "not answering (" + e.message + ")";
    conn.className = "lost";
  } finally {
    polling = false;
  }
}

function renderStacks(reply) {
  const digest = document.getElementById("digest");
  const stacks = document.getElementById("stacks");
  digest.replaceChildren();
  stacks.replaceChildren();
  for (const line of reply.digest || []) digest.appendChild(el("div", line));
  for (const rank of reply.ranks || []) {
    const details = document.createElement("details");
    details.dataset.rank = rank.rank;
    const title = "rank " + rank.rank + " (pid " + rank.pid + ", node " + rank.node_rank + ")" +
                  (rank.error ? ": " + rank.error : "") + (rank.file ? "  " + rank.file : "");
    details.appendChild(el("summary", title, rank.error ? "error" : ""));
    const lines = [];
    for (const thread of rank.threads || []) {
      lines.push((thread.python ? "Python " : "") + thread.name);
      for (const frame of thread.frames || []) {
        lines.push("  " + frame.function + (frame.location ? "  " + frame.location : ""));
      }
    }
    details.appendChild(el("pre", lines.join("\n")));
    stacks.appendChild(details);
  }
}

async function captureStacks() {
  const button = document.getElementById("stacks-button");
  const state = document.getElementById("stacks-state");
  button.disabled = true;
  state.textContent = "capturing...";
  state.className = "muted";
  try {
    const reply = await fetch(api("api/stacks"), {cache: "no-store"});
    const body = await reply.json().catch(() => ({}));
    if (!reply.ok) throw new Error(body.error || ("HTTP " + reply.status));
    renderStacks(body);
    state.textContent = "captured at " + new Date().toLocaleTimeString();
  } catch (e) {
    state.textContent = "no stacks: " + e.message;
    state.className = "error";
  } finally {
    button.disabled = false;
  }
}

document.getElementById("stacks-button").addEventListener("click", captureStacks);
// A link to the page with #stacks captures at once.
if (window.location.hash === "#stacks") captureStacks();
poll();
setInterval(poll, 1000);
</script>
</body>
</html>
)HTML";

}  // namespace

std::string_view status_page_html() { return kPage; }

}  // namespace ddprun::launcher
