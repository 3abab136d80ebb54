// Classroom dashboard: polls /dashboard/state.json once a second and draws it. Every number (windows,
// failure kinds, who needs help, the ten-minute history) is computed by the server (helpers/server/room.py),
// so a reload keeps the history and the page has no state of its own. Plain JS, no libraries, no build step.
"use strict";

const POLL_MS = 1000;
const STATUS_TEXT = { failing: "出错", starved: "饿着", runaway: "超额", busy: "运行", idle: "空闲" };
const KIND_TEXT = { "429": "429", "4xx": "其他 4xx", "5xx": "5xx", aborted: "中断" };
const HEAD = ["学员", "状态", "运行", "排队", "完成", "429", "4xx", "5xx", "中断", "tok/s", "TTFT P50 / P99"];

function fmt(x, digits = 0) { return Number.isFinite(x) ? x.toFixed(digits) : "–"; }
function pct(x) { return Number.isFinite(x) ? (100 * x).toFixed(1) + " %" : "–"; }
function setText(id, text) { document.getElementById(id).textContent = text; }

function renderTiles(s) {
  const r = s.room;
  setText("running", fmt(r.running));
  setText("waiting", fmt(r.waiting));
  setText("waiting-split", `引擎队列 ${r.waiting_engine} · 学员份额队列 ${r.waiting_share}`);
  setText("kv", pct(r.kv_usage));
  setText("preempt", `抢占 ${r.preemptions}（最近 ${s.window_s} s：${fmt(r.preemptions_in_window)}）`);
  setText("prefix", pct(r.prefix_hit_rate));
  setText("prefix-window", `最近 ${s.window_s} s 的前缀查询（按 token）`);
  setText("tps", fmt(r.tokens_per_s));
  setText("tps-window", `最近 ${s.window_s} s 的平均（墙钟）`);
  setText("ttft", `${fmt(r.ttft_p50_ms)} / ${fmt(r.ttft_p99_ms)}`);
  setText("ttft-window", `墙钟 ms，最近 ${s.ttft_window_s} s 的 ${r.ttft_count} 个流式请求`);
  setText("completed", `${r.completed} / ${Object.values(r.failures).reduce((a, b) => a + b, 0)}`);
  setText("failures", Object.entries(r.failures).map(([k, n]) => `${KIND_TEXT[k]} ${n}`).join(" · ")
    + (r.unknown_key_401 ? ` · 无效 Key 401 ${r.unknown_key_401}` : ""));
  setText("needs-help", fmt(r.needs_help));
}

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
}

function renderLearners(s) {
  const box = document.getElementById("learners");
  const rows = s.learners;
  const columns = Math.max(1, Math.min(4, Math.floor((box.clientWidth + 10) / 600)));
  const perTable = Math.max(1, Math.ceil(rows.length / columns));
  const tables = [];
  for (let start = 0; start < rows.length; start += perTable) {
    const table = document.createElement("table");
    const head = table.createTHead().insertRow();
    for (const name of HEAD) { const th = document.createElement("th"); th.textContent = name; head.appendChild(th); }
    const body = table.createTBody();
    for (const r of rows.slice(start, start + perTable)) {
      const tr = body.insertRow();
      tr.className = r.status;
      tr.dataset.learner = r.label;
      if (r.reason) tr.title = r.reason;
      cell(tr, r.label);
      cell(tr, STATUS_TEXT[r.status], "status");
      for (const n of [r.running, r.waiting, r.completed, r.failures["429"], r.failures["4xx"], r.failures["5xx"],
        r.failures.aborted]) cell(tr, fmt(n), n ? "" : "zero");
      cell(tr, fmt(r.tokens_per_s), r.tokens_per_s ? "" : "zero");
      cell(tr, r.ttft_count ? `${fmt(r.ttft_p50_ms)} / ${fmt(r.ttft_p99_ms)}` : "–");
    }
    tables.push(table);
  }
  box.replaceChildren(...tables);
  setText("learners-note", `（按 Key 的标签，不显示 Key；需要帮助的排在前面；tok/s 为最近 ${s.window_s} s，`
    + `TTFT 为墙钟 ms、最近 ${s.ttft_window_s} s；鼠标停在一行上看原因）`);
  const help = rows.filter((r) => r.reason);
  const list = document.getElementById("help");
  list.replaceChildren(...help.slice(0, 8).map((r) => {
    const li = document.createElement("li");
    li.className = r.status;
    li.textContent = `${r.label} ${STATUS_TEXT[r.status]}：${r.reason}`;
    return li;
  }));
  if (help.length > 8) list.append(Object.assign(document.createElement("li"), { textContent: `…… 还有 ${help.length - 8} 位` }));
}

function niceMax(x) {
  if (!(x > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(x));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}

// A line chart with a time axis (the last history_s seconds), a left axis and an optional right axis.
function drawChart(canvas, history, spanS, left, right) {
  const ctx = canvas.getContext("2d");
  canvas.dataset.points = String(history.length);  // how much history the server handed over (tests read it)
  const W = canvas.width, H = canvas.height, L = 48, R = right ? 48 : 12, T = 18, B = 30;
  ctx.clearRect(0, 0, W, H);
  ctx.font = "11px system-ui, 'Noto Sans CJK SC', sans-serif";
  const scale = (axis) => axis.max || niceMax(Math.max(0, ...history.flatMap((h) => axis.series.map((s) => h[s.key] || 0))));
  const axes = [left, right].filter(Boolean).map((a) => ({ ...a, top: scale(a) }));
  const x = (t) => L + (W - L - R) * (1 + t / spanS);
  const y = (v, top) => H - B - (H - T - B) * Math.min(1, v / top);
  ctx.strokeStyle = "#e3e6ea"; ctx.fillStyle = "#5b6573"; ctx.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {  // horizontal grid and the left axis' ticks
    const v = axes[0].top * i / 4, yy = y(v, axes[0].top);
    ctx.beginPath(); ctx.moveTo(L, yy); ctx.lineTo(W - R, yy); ctx.stroke();
    ctx.textAlign = "right"; ctx.fillText(fmt(v, v % 1 ? 1 : 0), L - 4, yy + 4);
    if (axes[1]) { ctx.textAlign = "left"; ctx.fillText(fmt(axes[1].top * i / 4, 0), W - R + 4, yy + 4); }
  }
  ctx.textAlign = "center";
  const step = spanS <= 60 ? 10 : spanS <= 180 ? 30 : 60;
  for (let t = -spanS; t <= 0; t += step) {  // time ticks
    ctx.fillText(t === 0 ? "现在" : spanS <= 180 ? `${t} s` : `${t / 60} min`, x(t), H - B + 14);
  }
  ctx.fillText("时间（墙钟）", (L + W - R) / 2, H - 3);
  ctx.textAlign = "left"; ctx.fillText(axes[0].label, 2, 11);
  if (axes[1]) { ctx.textAlign = "right"; ctx.fillText(axes[1].label, W - 2, 11); }
  ctx.strokeStyle = "#8a94a3"; ctx.beginPath(); ctx.moveTo(L, T); ctx.lineTo(L, H - B); ctx.lineTo(W - R, H - B); ctx.stroke();
  for (const axis of axes) {
    for (const s of axis.series) {
      ctx.strokeStyle = s.color; ctx.lineWidth = 2; ctx.setLineDash(s.dash || []);
      ctx.beginPath();
      let drawing = false;
      for (const h of history) {
        const v = h[s.key];
        if (!Number.isFinite(v) || h.t_s < -spanS) { drawing = false; continue; }
        if (drawing) ctx.lineTo(x(h.t_s), y(v, axis.top)); else ctx.moveTo(x(h.t_s), y(v, axis.top));
        drawing = true;
      }
      ctx.stroke();
      ctx.setLineDash([]);
    }
  }
}

// The time axis: the history there is, rounded up to whole minutes (1 to 10 min), so that a young room
// is not squeezed against the right edge.
function span(s) {
  const oldest = s.history.length ? -s.history[0].t_s : 0;
  return Math.min(s.history_s, Math.max(60, 60 * Math.ceil(oldest / 60)));
}

function renderCharts(s) {
  const spanS = span(s);
  drawChart(document.getElementById("chart-requests"), s.history, spanS,
    { label: "请求数", series: [{ key: "running", color: "#2f6fdd" }, { key: "waiting", color: "#d9822b" }] },
    { label: "KV %", max: 100, series: [{ key: "kv_pct", color: "#2a9d5c", dash: [5, 3] }] });
  drawChart(document.getElementById("chart-rates"), s.history, spanS,
    { label: `tokens/s（${s.window_s} s 窗口）`, series: [{ key: "tokens_per_s", color: "#6a3fb5" }] },
    { label: "失败/s", series: [{ key: "failures_per_s", color: "#c0392b", dash: [5, 3] }] });
}

function render(s) {
  renderTiles(s);
  renderLearners(s);
  renderCharts(s);
  const scale = s.time_scale === 1 ? "实时（时间倍率 1）" : `时间倍率 ${s.time_scale}：墙钟 1 s = 模拟 GPU 上 ${fmt(1 / s.time_scale, 1)} s`;
  setText("status", `更新于 ${new Date().toLocaleTimeString()}；${scale}；速率为最近 ${s.window_s} s 的滑动窗口`);
}

async function poll() {
  try {
    const response = await fetch("/dashboard/state.json", { cache: "no-store" });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    render(await response.json());
  } catch (err) {
    setText("status", `读取 /dashboard/state.json 失败：${err.message}`);
  }
  setTimeout(poll, POLL_MS);
}

poll();
