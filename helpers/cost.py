"""Dollars per million tokens from $/GPU-hour (notebook 09 §"每百万 token 的成本"). Pure.

A GPU rented at P $/hour that serves T tokens/s costs P / (3600 · T) · 10⁶ $ per million tokens. T must be
the throughput *at the load that meets the SLO* (an ``helpers.bench.slo`` search), not the peak: the peak
sits past the knee, where requests miss their latency targets. Prices: ``data/gpu_prices.csv`` (on-demand
list prices with source and date; they move: pass your own with ``usd_per_gpu_hour``).

tokens/s/user and tokens/s/GPU as ``vllm bench sweep plot_pareto`` defines them (vLLM 0.32.0,
``vllm/benchmarks/sweep/plot_pareto.py``): output throughput ÷ users and ÷ GPUs. Users = ``max_concurrency``
when the run had one; else the mean number in flight, request throughput × mean E2E latency (Little's law,
as ``vllm/benchmarks/sweep/serve_workload.py`` estimates a concurrency). Departure: vLLM's plot falls back to
``request_rate`` as the user count, which is not a number of users.
"""
from __future__ import annotations

import csv
import datetime as dt
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from helpers.models import DATA_DIR

PRICES_CSV = DATA_DIR / "gpu_prices.csv"
SECONDS_PER_HOUR = 3600.0
STALE_AFTER_DAYS = 365  # a list price read more than a year ago is marked stale


@dataclass(frozen=True, slots=True)
class GPUPrice:
    """One on-demand list price: $/GPU-hour, who lists it, where and when it was read."""

    gpu: str
    usd_per_gpu_hour: float
    provider: str
    offer: str
    source: str
    read_on: str
    via: str

    @property
    def gpus_in_offer(self) -> int:
        """How many GPUs the listed offer has (its price was divided by this): "8x ..." / "... for 8 GPUs"."""
        match = re.match(r"(\d+)x ", self.offer) or re.search(r"for (\d+) GPUs", self.offer)
        return int(match.group(1)) if match else 1

    def age_days(self, as_of: dt.date | None = None) -> int:
        """Days between ``read_on`` and ``as_of`` (default: today)."""
        return ((as_of or dt.date.today()) - dt.date.fromisoformat(self.read_on)).days

    def is_stale(self, as_of: dt.date | None = None) -> bool:
        """Read more than ``STALE_AFTER_DAYS`` before ``as_of`` (default: today): re-check ``source``."""
        return self.age_days(as_of) > STALE_AFTER_DAYS


@lru_cache(maxsize=1)
def load_prices() -> tuple[GPUPrice, ...]:
    """Every row of ``data/gpu_prices.csv``, in file order."""
    with PRICES_CSV.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        columns = {field.name for field in fields(GPUPrice)}
        if set(reader.fieldnames or ()) != columns:
            raise ValueError(f"{PRICES_CSV}: columns {reader.fieldnames}, expected {sorted(columns)}")
        return tuple(GPUPrice(gpu=row["gpu"], usd_per_gpu_hour=float(row["usd_per_gpu_hour"]),
                              provider=row["provider"], offer=row["offer"], source=row["source"],
                              read_on=row["read_on"], via=row["via"])
                     for row in reader)


def gpu_price(gpu: str, provider: str | None = None) -> GPUPrice:
    """The price of ``gpu`` (a ``gpus.csv`` slug): its first row, or ``provider``'s."""
    rows = [p for p in load_prices() if p.gpu == gpu and (provider is None or p.provider == provider)]
    if not rows:
        priced = sorted({p.gpu for p in load_prices()})
        where = f" from {provider}" if provider else ""
        raise KeyError(f"no price for {gpu!r}{where} in data/gpu_prices.csv "
                       f"(priced: {', '.join(priced)}); pass usd_per_gpu_hour=... with your own price")
    return rows[0]


def price_table(as_of: dt.date | None = None) -> pd.DataFrame:
    """Every price with its basis (GPUs in the offer) and whether it is stale on ``as_of`` (default today)."""
    return pd.DataFrame([{"gpu": p.gpu, "provider": p.provider, "usd_per_gpu_hour": p.usd_per_gpu_hour,
                          "gpus_in_offer": p.gpus_in_offer, "read_on": p.read_on,
                          "age_days": p.age_days(as_of), "stale": p.is_stale(as_of)} for p in load_prices()])


def offer_bases(prices: Iterable[GPUPrice] | None = None) -> dict[str, int]:
    """GPUs per listed offer, by provider: every provider's rows share one basis (default: the whole file).

    A price is per GPU either way (an 8-GPU instance's hourly price ÷ 8), but an 8-GPU node's per-GPU price is
    usually lower than a single GPU's, so a provider whose rows mixed the two would compare a node discount
    with a list price across its own GPUs. Raises ``ValueError`` naming the provider and its offers then.
    """
    offers: dict[str, dict[int, list[str]]] = {}
    for p in load_prices() if prices is None else prices:
        offers.setdefault(p.provider, {}).setdefault(p.gpus_in_offer, []).append(p.gpu)
    mixed = {provider: sizes for provider, sizes in offers.items() if len(sizes) > 1}
    if mixed:
        detail = "; ".join(f"{provider}: " + ", ".join(f"{n}-GPU {gpus}" for n, gpus in sorted(sizes.items()))
                           for provider, sizes in mixed.items())
        raise ValueError(f"a provider's prices mix offer sizes ({detail}): keep one basis per provider in "
                         "data/gpu_prices.csv (the 1-GPU or the 8-GPU offers), see data/README.md")
    return {provider: next(iter(sizes)) for provider, sizes in offers.items()}


def price_spreads(as_of: dt.date | None = None) -> pd.DataFrame:
    """Per GPU listed by more than one provider: cheapest, dearest, their ratio, the offer sizes they come
    from and whether either is stale on ``as_of`` (default today); largest spread first (the claim "the same
    card costs N× more elsewhere" is rendered from this, never written by hand)."""
    table = price_table(as_of)
    rows = []
    for gpu, group in table.groupby("gpu"):
        if len(group) > 1:
            price = group["usd_per_gpu_hour"]
            low, high = group.loc[price.idxmin()], group.loc[price.idxmax()]
            rows.append({"gpu": gpu, "cheapest": f"{low['provider']} {low['usd_per_gpu_hour']:.2f}",
                         "dearest": f"{high['provider']} {high['usd_per_gpu_hour']:.2f}",
                         "spread": high["usd_per_gpu_hour"] / low["usd_per_gpu_hour"],
                         "offers": f"{low['gpus_in_offer']}-GPU vs {high['gpus_in_offer']}-GPU",
                         "stale": bool(low["stale"] or high["stale"])})
    return pd.DataFrame(rows).sort_values("spread", ascending=False).set_index("gpu")


def usd_per_million_tokens(usd_per_hour: float, tokens_per_s: float) -> float:
    """$ per 10⁶ tokens for hardware at ``usd_per_hour`` producing ``tokens_per_s`` (inf at 0 tokens/s)."""
    if usd_per_hour < 0 or tokens_per_s < 0:
        raise ValueError(f"price and throughput must be >= 0, got {usd_per_hour} and {tokens_per_s}")
    return math.inf if tokens_per_s == 0 else usd_per_hour / (SECONDS_PER_HOUR * tokens_per_s) * 1e6


def users(summary: Mapping[str, Any]) -> float:
    """Users of a run (module doc): ``max_concurrency``, else request throughput × mean E2E."""
    concurrency = summary.get("max_concurrency")
    if concurrency:
        return float(concurrency)
    return float(summary["request_throughput"]) * float(summary["mean_e2el_ms"]) / 1000.0


def cost_row(summary: Mapping[str, Any], gpu: str, *, num_gpus: int = 1,
             usd_per_gpu_hour: float | None = None, provider: str | None = None) -> dict[str, Any]:
    """$/1M output and total tokens, tokens/s/user and tokens/s/GPU of one run on ``num_gpus`` ``gpu``s."""
    price = usd_per_gpu_hour if usd_per_gpu_hour is not None else gpu_price(gpu, provider).usd_per_gpu_hour
    usd_per_hour = price * num_gpus
    output = float(summary["output_throughput"])
    return {"gpu": gpu, "num_gpus": num_gpus, "usd_per_gpu_hour": price,
            "usd_per_1m_output_tokens": usd_per_million_tokens(usd_per_hour, output),
            "usd_per_1m_total_tokens": usd_per_million_tokens(usd_per_hour,
                                                              float(summary["total_token_throughput"])),
            "tokens_per_s_per_user": output / users(summary) if users(summary) > 0 else 0.0,
            "tokens_per_s_per_gpu": output / num_gpus}


def pareto_front(table: pd.DataFrame, x: str = "tokens_per_s_per_user",
                 y: str = "tokens_per_s_per_gpu") -> np.ndarray:
    """One bool per row: no other row is at least as good on both ``x`` and ``y`` and better on one."""
    xs, ys = table[x].to_numpy(float), table[y].to_numpy(float)
    dominated = ((xs[None, :] >= xs[:, None]) & (ys[None, :] >= ys[:, None])
                 & ((xs[None, :] > xs[:, None]) | (ys[None, :] > ys[:, None]))).any(axis=1)
    return ~dominated
