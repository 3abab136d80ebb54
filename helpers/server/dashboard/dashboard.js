// Classroom dashboard: polls /metrics (Prometheus text, vLLM's metric names plus inference_lab_learner_*)
// once a second and renders the room's state. Plain JS, no libraries, no build step.
"use strict";

const POLL_MS = 1000;
const HISTORY = 120;
const history = [];
let previous = null;

function parse(text) {
  const samples = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = line.match(/^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/);
    if (!m) continue;
    const labels = {};
    for (const pair of (m[2] || "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[pair[1]] = pair[2];
    samples.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return samples;
}

function total(samples, ...names) {
  for (const name of names) {
    const found = samples.filter((s) => s.name === name);
    if (found.length) return found.reduce((sum, s) => sum + s.value, 0);
  }
  return NaN;
}

// Percentile from a cumulative Prometheus histogram (linear within the bucket), summed over models.
function histogramQuantile(samples, name, q) {
  const buckets = new Map();
  for (const s of samples) {
    if (s.name !== name + "_bucket") continue;
    const le = s.labels.le === "+Inf" ? Infinity : Number(s.labels.le);
    buckets.set(le, (buckets.get(le) || 0) + s.value);
  }
  const edges = [...buckets.keys()].sort((a, b) => a - b);
  const count = buckets.get(Infinity) || 0;
  if (!count) return NaN;
  const rank = q * count;
  let lower = 0, below = 0;
  for (const le of edges) {
    const cum = buckets.get(le);
    if (cum >= rank) {
      if (le === Infinity) return lower;
      return lower + (le - lower) * (cum === below ? 0 : (rank - below) / (cum - below));
    }
    lower = le; below = cum;
  }
  return lower;
}

function fmt(x, digits = 0) { return Number.isFinite(x) ? x.toFixed(digits) : "–"; }
function pct(x) { return Number.isFinite(x) ? (100 * x).toFixed(1) + " %" : "–"; }

function learners(samples) {
  const rows = new Map();
  for (const s of samples) {
    const m = s.name.match(/^inference_lab_learner_(requests_(running|waiting|completed|rejected)(_total)?|ttft_wall_seconds)$/);
    if (!m || !s.labels.learner) continue;
    const row = rows.get(s.labels.learner) || { label: s.labels.learner };
    if (m[2]) row[m[2]] = s.value; else row["ttft" + s.labels.quantile] = s.value;
    rows.set(s.labels.learner, row);
  }
  return [...rows.values()].sort((a, b) => a.label.localeCompare(b.label));
}

function render(samples, now) {
  const running = total(samples, "vllm:num_requests_running");
  const waiting = total(samples, "vllm:num_requests_waiting");
  const kv = total(samples, "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc");
  const hits = total(samples, "vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total");
  const queries = total(samples, "vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total");
  const tokens = total(samples, "vllm:generation_tokens_total");
  let tps = NaN;
  if (previous && now > previous.t) tps = Math.max(0, (tokens - previous.tokens) / ((now - previous.t) / 1000));
  previous = { t: now, tokens };
  document.getElementById("running").textContent = fmt(running);
  document.getElementById("waiting").textContent = fmt(waiting);
  document.getElementById("kv").textContent = pct(kv);
  document.getElementById("prefix").textContent = queries > 0 ? pct(hits / queries) : "–";
  document.getElementById("tps").textContent = fmt(tps);
  document.getElementById("preempt").textContent = fmt(total(samples, "vllm:num_preemptions_total"));
  const p50 = histogramQuantile(samples, "vllm:time_to_first_token_seconds", 0.5);
  const p99 = histogramQuantile(samples, "vllm:time_to_first_token_seconds", 0.99);
  document.getElementById("ttft").textContent = `${fmt(p50, 2)} / ${fmt(p99, 2)}`;

  const body = document.getElementById("learners");
  body.replaceChildren(...learners(samples).map((r) => {
    const tr = document.createElement("tr");
    if ((r.running || 0) + (r.waiting || 0) > 0) tr.className = "busy";
    const ttft = `${fmt(1000 * r["ttft0.5"])} / ${fmt(1000 * r["ttft0.99"])}`;
    for (const cell of [r.label, fmt(r.running), fmt(r.waiting), fmt(r.completed), fmt(r.rejected), ttft]) {
      const td = document.createElement("td");
      td.textContent = cell;
      tr.appendChild(td);
    }
    return tr;
  }));

  history.push({ running, waiting, kv });
  if (history.length > HISTORY) history.shift();
  draw();
}

function draw() {
  const canvas = document.getElementById("chart");
  const ctx = canvas.getContext("2d");
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  const top = Math.max(10, ...history.map((h) => Math.max(h.running || 0, h.waiting || 0, 100 * (h.kv || 0))));
  const series = [["running", "#2f6fdd", 1], ["waiting", "#d9822b", 1], ["kv", "#2a9d5c", 100]];
  for (const [key, color, scale] of series) {
    ctx.strokeStyle = color;
    ctx.lineWidth = 2;
    ctx.beginPath();
    history.forEach((h, i) => {
      const x = (i / (HISTORY - 1)) * canvas.width;
      const y = canvas.height - 4 - ((h[key] || 0) * scale / top) * (canvas.height - 8);
      if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
    });
    ctx.stroke();
  }
}

async function poll() {
  const status = document.getElementById("status");
  try {
    const response = await fetch("/metrics", { cache: "no-store" });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    render(parse(await response.text()), Date.now());
    status.textContent = `更新于 ${new Date().toLocaleTimeString()}`;
  } catch (err) {
    status.textContent = `读取 /metrics 失败：${err.message}`;
  }
  setTimeout(poll, POLL_MS);
}

poll();
