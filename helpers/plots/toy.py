"""Figures for notebook 01 (prefill vs decode on the toy numpy transformer). Drawing only."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from helpers.toy.generate import Generation
from helpers.toy.measure import DecodeTiming, PhaseThroughput


def plot_step_latency(cached: Generation, uncached: Generation) -> Figure:
    """Per-token latency vs sequence length, with and without the KV cache (step 0 = prefill)."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    runs = ((uncached, "no cache: re-run the whole sequence"), (cached, "KV cache: one new token"))
    for gen, label in runs:
        ax.plot(gen.positions[1:], gen.step_times_s[1:] * 1e3, ".-", ms=3, label=label)
    ax.set(xlabel="sequence length when the token is produced", ylabel="step time (ms)",
           title="Time per generated token", ylim=(0, None))
    ax.legend()
    fig.tight_layout()
    return fig


def plot_generation_cost(flop_lengths: np.ndarray, flops: dict[str, np.ndarray],
                         time_lengths: np.ndarray, times_s: dict[str, np.ndarray]) -> Figure:
    """Left: analytic FLOPs to generate N tokens, per term, log-log. Right: measured wall time."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for label, values in flops.items():
        left.loglog(flop_lengths, values, "o-", ms=3, label=label)
    left.set(xlabel="tokens generated N", ylabel="FLOPs (analytic)", title="Work to generate N tokens")
    left.legend(fontsize=8)
    for label, values in times_s.items():
        right.loglog(time_lengths, values, "o-", ms=3, label=label)
    right.set(xlabel="tokens generated N", ylabel="wall time (s)", title="Measured on this CPU")
    right.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_phase_throughput(results: list[PhaseThroughput]) -> Figure:
    """Prefill tokens/s vs decode tokens/s for a few prompt lengths."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    x = np.arange(len(results))
    ax.bar(x - 0.2, [r.prefill_tokens_per_s for r in results], 0.4, label="prefill")
    ax.bar(x + 0.2, [r.decode_tokens_per_s for r in results], 0.4, label="decode (1 sequence)")
    ax.set_xticks(x, [f"prompt {r.prompt_len}" for r in results])
    ax.set(ylabel="tokens / s", yscale="log", title="Same weights, very different speed")
    ax.legend()
    fig.tight_layout()
    return fig


def plot_batch_decode(timings: list[DecodeTiming]) -> Figure:
    """Decode step time and tokens/s vs batch size."""
    sizes = [t.batch_size for t in timings]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    left.plot(sizes, [t.step_s * 1e3 for t in timings], "o-")
    left.set(xscale="log", xlabel="batch size B", ylabel="decode step time (ms)", ylim=(0, None),
             title="One step for B sequences")
    right.plot(sizes, [t.tokens_per_s for t in timings], "o-", color="C2")
    right.set(xscale="log", yscale="log", xlabel="batch size B", ylabel="tokens / s", title="Throughput")
    for axis in (left, right):
        axis.set_xticks(sizes, [str(s) for s in sizes])
    fig.tight_layout()
    return fig


def plot_roofline(bandwidth_bytes_per_s: float, peak_flops_per_s: float,
                  points: dict[str, tuple[float, float]]) -> Figure:
    """CPU roofline: attainable FLOP/s = min(peak, bandwidth × intensity).

    points: name -> (intensity in FLOP/byte, achieved FLOP/s)."""
    ridge = peak_flops_per_s / bandwidth_bytes_per_s
    xs = np.logspace(-1, max(3.0, np.log10(max(p[0] for p in points.values())) + 0.5), 200)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.loglog(xs, np.minimum(peak_flops_per_s, bandwidth_bytes_per_s * xs), "k-", lw=2, label="roofline")
    ax.axvline(ridge, color="grey", ls=":", label=f"ridge: {ridge:.1f} FLOP/byte")
    for i, (name, (intensity, rate)) in enumerate(points.items()):
        ax.loglog(intensity, rate, "o", ms=8, color=f"C{i}", label=name)
    ax.set(xlabel="arithmetic intensity (FLOP / byte)", ylabel="achieved FLOP/s",
           title="Where prefill and decode sit on this CPU")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def plot_decode_prediction(timings: list[DecodeTiming]) -> Figure:
    """Measured decode step time vs bytes ÷ bandwidth, for models of growing size."""
    mb = np.array([t.bytes_per_step for t in timings]) / 1e6
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ax.loglog(mb, [t.step_s * 1e3 for t in timings], "o-", label="measured")
    ax.loglog(mb, [t.predicted_s * 1e3 for t in timings], "s--", label="predicted: bytes / copy bandwidth")
    ax.set(xlabel="bytes read per decode step (MB)", ylabel="decode step time (ms)",
           title="Decode time follows the bytes it reads")
    ax.legend()
    fig.tight_layout()
    return fig
