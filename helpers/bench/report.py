"""A load test as one self-contained HTML page to share (``python -m helpers bench --report out.html``).

``write_report(runs, path)`` writes metadata (target with its secrets masked, model, how the load was sent,
seed, time scale, package versions), vLLM's summary figures per run, the failure kinds, the latency
distributions and a request timeline. Two or more runs (``{"A": result_a, "B": result_b}``, or the levels of
a sweep) are overlaid for an A/B comparison. Figures are inline PNGs: the file needs no network, no CDN and
no other file, so it can be mailed or opened offline.
"""

from __future__ import annotations

import base64
import datetime
import html
import io
import platform
from collections.abc import Mapping
from importlib import metadata as package_metadata
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from helpers.bench.loadgen import BenchResult
from helpers.client.settings import redact_url
from helpers.plots.runs import plot_latency_distributions, plot_request_timeline

SUMMARY_KEYS = ("completed", "failed", "duration", "request_throughput", "output_throughput",
                "total_token_throughput", "request_goodput", "median_ttft_ms", "p99_ttft_ms",
                "median_tpot_ms", "p99_tpot_ms", "median_itl_ms", "p99_itl_ms", "median_e2el_ms",
                "p99_e2el_ms")
RUN_KEYS = ("model_id", "max_concurrency", "request_rate", "burstiness", "num_prompts", "num_warmups", "seed")
PACKAGES = ("openai", "httpx", "numpy", "pandas", "fastapi", "uvicorn")
STYLE = """body{font-family:system-ui,"Noto Sans CJK SC",sans-serif;margin:2em;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}img{max-width:100%}
.note{color:#555}"""


def _png(fig: Figure) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img alt="figure" src="data:image/png;base64,{data}">'


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}"
    return html.escape("" if value is None else str(value))


def _table(rows: Mapping[str, Mapping[str, Any]], keys: tuple[str, ...]) -> str:
    """One column per run, one row per key that any run has."""
    present = [k for k in keys if any(k in row for row in rows.values())]
    head = "".join(f"<th>{html.escape(label)}</th>" for label in rows)
    body = "".join(f"<tr><td>{html.escape(k)}</td>" + "".join(f"<td>{_cell(row.get(k))}</td>"
                                                              for row in rows.values()) + "</tr>"
                   for k in present)
    return f"<table><tr><th></th>{head}</tr>{body}</table>"


def _versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = package_metadata.version(name)
        except package_metadata.PackageNotFoundError:
            continue
    return found


def _time_scale(result: BenchResult) -> float | None:
    timings = [t for t in result.requests.get("server_timing", []) if isinstance(t, Mapping)]
    return float(timings[0]["time_scale"]) if timings and "time_scale" in timings[0] else None


def report_html(runs: BenchResult | Mapping[str, BenchResult], *, title: str = "Inference Lab load test",
                metadata: Mapping[str, Any] | None = None) -> str:
    """The page as a string (see the module docstring); ``metadata`` adds rows (e.g. target, config)."""
    runs = {"run": runs} if isinstance(runs, BenchResult) else dict(runs)
    if not runs:
        raise ValueError("no runs to report")
    meta = {k: redact_url(str(v)) if "url" in k.lower() else v for k, v in (metadata or {}).items()}
    scales = {s for r in runs.values() if (s := _time_scale(r)) is not None}
    if scales:
        meta.setdefault("time_scale", ", ".join(f"{s:g}" for s in sorted(scales)))
    meta["generated"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    meta.update(_versions())
    failures = {label: r.requests["error_kind"].dropna().value_counts().to_dict()
                for label, r in runs.items()}
    kinds = tuple(sorted({kind for counts in failures.values() for kind in counts}))
    scaled_note = ("<p class='note'>The server is a time-scaled mock (time_scale above): every figure here "
                   "is wall-clock; divide latencies by the time scale for simulated GPU seconds (the "
                   "client's overhead is divided too).</p>" if scales - {1.0} else "")
    frames = {label: r.requests for label, r in runs.items()}
    parts = [
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
        f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>",
        "<h2>Run</h2>", _table({"": meta}, tuple(meta)),
        _table({label: r.run for label, r in runs.items()}, RUN_KEYS),
        "<h2>Summary (vLLM's keys)</h2>", scaled_note,
        _table({label: r.summary for label, r in runs.items()}, SUMMARY_KEYS),
        "<h2>Failures</h2>",
        _table(failures, kinds) if kinds else "<p>No request failed.</p>",
        "<h2>Latency distributions</h2>", _png(plot_latency_distributions(frames)),
        "<h2>Request timeline</h2>", _png(plot_request_timeline(frames)),
        "</body></html>",
    ]
    return "\n".join(parts)


def write_report(runs: BenchResult | Mapping[str, BenchResult], path: str | Path, **options: Any) -> Path:
    """Write ``report_html(runs, **options)`` to ``path`` (UTF-8) and return the path."""
    path = Path(path)
    path.write_text(report_html(runs, **options), encoding="utf-8")
    return path
