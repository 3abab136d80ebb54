"""Benchmark summaries with vLLM's definitions and key names (notebooks 04 and 05, "指标怎么算").

``summarize`` turns per-request measurements (simulated or measured over HTTP) into the dict vLLM's
``benchmarks/serve.py`` writes with ``--save-result``: ``completed``, ``total_input_tokens``,
``output_throughput``, ``{mean,median,std,p90,p99}_{ttft,tpot,itl,e2el}_ms``, ``duration`` ...
TPOT per request = (E2E − TTFT) / (output tokens − 1) (requests with one token have none); ITL pools the
gaps of every request; percentiles use numpy's linear interpolation; an empty metric reports 0, as vLLM.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

METRICS = ("ttft", "tpot", "itl", "e2el")
DEFAULT_PERCENTILES = (90, 99)


def _stats(name: str, values_s: np.ndarray, percentiles: Sequence[float]) -> dict[str, float]:
    ms = values_s * 1000.0
    empty = len(ms) == 0
    out = {f"mean_{name}_ms": 0.0 if empty else float(ms.mean()),
           f"median_{name}_ms": 0.0 if empty else float(np.median(ms)),
           f"std_{name}_ms": 0.0 if empty else float(ms.std())}
    values = np.zeros(len(percentiles)) if empty else np.percentile(ms, percentiles)  # one partition
    for p, value in zip(percentiles, values.tolist()):
        out[f"p{p:g}_{name}_ms"] = value
    return out


def summarize(requests: pd.DataFrame | Iterable[Mapping[str, Any]], duration_s: float, *,
              percentiles: Sequence[float] = DEFAULT_PERCENTILES) -> dict[str, Any]:
    """vLLM's benchmark summary of ``requests`` run over ``duration_s`` seconds.

    ``requests`` is a DataFrame with one row per request, or an iterable of mappings, with
    ``prompt_tokens``, ``output_tokens``, ``ttft_s``, ``e2el_s``, ``itls_s`` (its inter-token gaps) and
    optionally ``success`` (default True; failed requests count only in ``failed``) and ``text_chunks``
    (chunks that carried its text: then ``tokens_per_chunk``, above 1 when a server sends several tokens
    per chunk, as with speculative decoding; ITL is per chunk, TPOT per token).
    """
    if duration_s <= 0:
        raise ValueError(f"duration_s must be positive, got {duration_s}")
    if hasattr(requests, "columns"):  # a DataFrame: use its columns directly
        df: pd.DataFrame = requests
        ok_mask = df["success"].to_numpy(bool) if "success" in df.columns else np.ones(len(df), bool)
        ok = df[ok_mask] if not ok_mask.all() else df
        num_rows = len(df)
        prompt, output, ttft, e2el = (ok[c].to_numpy(float) for c in ("prompt_tokens", "output_tokens",
                                                                     "ttft_s", "e2el_s"))
        itl_lists = list(ok["itls_s"])
        chunks = ok["text_chunks"].to_numpy(float) if "text_chunks" in df.columns else None
    else:
        rows = list(requests)
        ok = [r for r in rows if r.get("success", True)]
        num_rows = len(rows)
        prompt, output, ttft, e2el = (np.array([r[c] for r in ok], dtype=float) for c in
                                      ("prompt_tokens", "output_tokens", "ttft_s", "e2el_s"))
        itl_lists = [r["itls_s"] for r in ok]
        chunks = np.array([r["text_chunks"] for r in ok], float) if ok and "text_chunks" in ok[0] else None
    multi = output > 1
    tpot = (e2el[multi] - ttft[multi]) / (output[multi] - 1)
    itl = np.concatenate(itl_lists, dtype=float) if itl_lists else np.empty(0)
    completed = len(output)
    summary: dict[str, Any] = {
        "duration": float(duration_s),
        "completed": completed,
        "failed": num_rows - completed,
        "total_input_tokens": int(prompt.sum()),
        "total_output_tokens": int(output.sum()),
        "request_throughput": completed / duration_s,
        "output_throughput": float(output.sum()) / duration_s,
        "total_token_throughput": float(prompt.sum() + output.sum()) / duration_s,
    }
    for name, values in zip(METRICS, (ttft, tpot, itl, e2el)):
        summary.update(_stats(name, values, percentiles))
    if chunks is not None and chunks.sum() > 0:
        summary["tokens_per_chunk"] = float(output.sum() / chunks.sum())
    return summary
