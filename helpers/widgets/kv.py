"""KV-cache panels: the calculator (notebook 02, "拖动滑块") and the capacity panel (notebook 02, "容量规划").

The math lives in ``helpers.kvcache``; these panels only wire controls to it. Each panel exposes its
``controls`` (name -> widget) and the latest ``result``, so a test can set ``panel.controls["seq_len"].value``
and read ``panel.result`` without a browser.
"""
from __future__ import annotations

import html
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import ipywidgets as widgets
from IPython.display import display
from matplotlib.figure import Figure

from helpers.hardware import list_gpus, load_gpu
from helpers.kvcache import DTYPE_BYTES, format_bytes, kv_bytes_per_token, kv_cache_bytes
from helpers.kvcache.capacity import DEFAULT_GPU_MEMORY_UTILIZATION, CapacityPlan, plan_capacity
from helpers.kvcache.hybrid import state_bytes_per_layer
from helpers.models import ModelSpec, list_models, load_model
from helpers.models.hf_config import attention_kind
from helpers.plots.kv import plot_kv_vs_seq_len

MAX_TOKENS = 131_072  # the longest context the sliders offer (Llama-3.1's 128 K)
STATE_DTYPE_BYTES = 2  # a hybrid model's fixed state, 16-bit as its model (vLLM mamba_cache_dtype "auto")
WEIGHT_DTYPES = ("fp16", "bf16", "fp8", "int8", "int4")
KV_DTYPES = ("fp16", "bf16", "fp8", "int8")
_ARCHITECTURE = ("num_layers", "num_attention_heads", "num_kv_heads", "head_dim")
_STYLE = {"description_width": "150px"}
_LAYOUT = widgets.Layout(width="480px")


class Panel:
    """Controls, an output area and the latest result; displays as one box.

    Every change of a control recomputes ``result = compute(**values)`` and re-renders. A compute error
    (e.g. an impossible combination) is shown in the output and leaves ``result`` as ``None``.
    """

    def __init__(self, controls: dict[str, widgets.ValueWidget], compute: Callable[..., Any],
                 render: Callable[[Any], None]) -> None:
        self.controls = controls
        self.result: Any = None
        self.error: str | None = None
        self.output = widgets.Output()
        self.widget = widgets.VBox([*controls.values(), self.output])
        self._compute, self._render, self._holding = compute, render, False
        for control in controls.values():
            control.observe(self._on_change, names="value")
        self.update()

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Change controls without recomputing after each one."""
        holding, self._holding = self._holding, True
        try:
            yield
        finally:
            self._holding = holding

    def set_values(self, **values: Any) -> None:
        """Set several controls, then recompute once."""
        with self.hold():
            for name, value in values.items():
                self.controls[name].value = value
        if not self._holding:
            self.update()

    def update(self) -> None:
        values = {name: control.value for name, control in self.controls.items()}
        try:
            self.result, self.error = self._compute(**values), None
        except ValueError as exc:
            self.result, self.error = None, str(exc)
        self.output.clear_output(wait=True)
        with self.output:
            if self.error is None:
                self._render(self.result)
            else:
                display(widgets.HTML(f"<b style='color:#b00'>{html.escape(self.error)}</b>"))

    def _on_change(self, _change: dict) -> None:
        if not self._holding:
            self.update()

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)


@dataclass(frozen=True, slots=True)
class KVEstimate:
    """What the calculator shows: the (possibly edited) model and its KV cache for one setting; for a
    hybrid model also the fixed state its linear-attention layers keep per sequence (``state_bytes``, all
    ``batch_size`` sequences, 16-bit, as computed; ``plan_capacity`` adds vLLM's padding and copies)."""

    model: ModelSpec
    seq_len: int
    batch_size: int
    dtype: str
    bytes_per_token: int
    total_bytes: int  # KV only
    state_bytes: int = 0

    @property
    def exceeds_context(self) -> bool:
        """True when ``seq_len`` is longer than the model's context window (``max_position_embeddings``)."""
        return self.seq_len > self.model.max_position_embeddings

    @property
    def cache_bytes(self) -> int:
        """Everything the sequences keep: KV plus a hybrid model's fixed state."""
        return self.total_bytes + self.state_bytes


def edited_model(preset: ModelSpec, num_layers: int, num_attention_heads: int, num_kv_heads: int,
                 head_dim: int) -> ModelSpec:
    """The preset with the calculator's slider values; the attention kind follows the head counts.

    MLA models keep their latent (only the layer count applies). A sliding-window layout keeps its share of
    layers (all for Mistral, half for Gemma-2), a hybrid model its share of linear-attention layers (3 in 4
    for Qwen3-Next; at least one layer attends). Parameter counts are recomputed.
    """
    linear = preset.linear_attention
    if linear is not None:
        share = min(round(num_layers * linear.num_layers / preset.num_layers), num_layers - 1)
        linear = replace(linear, num_layers=share) if share > 0 else None
    if preset.attention == "MLA":
        edited = replace(preset, num_layers=num_layers, total_params=0, active_params=0)
    else:
        attending = num_layers - (linear.num_layers if linear else 0)
        windowed = round(attending * preset.num_sliding_window_layers / preset.num_attention_layers)
        edited = replace(preset, num_layers=num_layers, num_attention_heads=num_attention_heads,
                         num_kv_heads=num_kv_heads, head_dim=head_dim, num_sliding_window_layers=windowed,
                         attention=attention_kind(num_attention_heads, num_kv_heads), total_params=0,
                         active_params=0, linear_attention=linear)
    same = all(getattr(edited, n) == getattr(preset, n) for n in _ARCHITECTURE)
    return preset if same else replace(edited, name=f"{preset.name} (edited)")


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _formula(model: ModelSpec, dtype: str) -> str:
    size = DTYPE_BYTES[dtype]
    layers = (f"{model.num_attention_layers} of {model.num_layers} layers (full attention)" if model.is_hybrid
              else f"{model.num_layers} layers")
    if model.attention == "MLA":
        return (f"{layers} × (kv_lora_rank {model.kv_lora_rank}"
                f" + rope {model.qk_rope_head_dim}) × {size:g} B")
    return (f"2 (K and V) × {layers} × {model.num_kv_heads} KV heads"
            f" × {model.head_dim} head_dim × {size:g} B")


def _render_estimate(est: KVEstimate) -> None:
    model = est.model
    lines = [f"<b>{html.escape(model.name)}</b> · {model.attention}",
             f"per token: {_formula(model, est.dtype)} = <b>{est.bytes_per_token:,} B</b>"
             f" ({est.bytes_per_token / 2**10:,.1f} KiB)",
             f"{est.seq_len:,} tokens × batch {est.batch_size}: <b>{format_bytes(est.total_bytes)}</b>"]
    if model.linear_attention is not None:
        per_layer = state_bytes_per_layer(model, STATE_DTYPE_BYTES)
        lines.append(f"+ fixed state: {model.linear_attention.num_layers} linear-attention layers × "
                     f"{format_bytes(per_layer)} per sequence × batch {est.batch_size} = "
                     f"{format_bytes(est.state_bytes)}, whatever seq_len (16-bit) → "
                     f"<b>{format_bytes(est.cache_bytes)}</b> in all")
    if est.exceeds_context:
        lines.append(f"<b style='color:#b45f06'>seq_len {est.seq_len:,} exceeds this model's context window "
                     f"(max_position_embeddings {model.max_position_embeddings:,}): a server would reject "
                     "such a request; the bytes are shown anyway</b>")
    if model.sliding_window and est.seq_len > model.sliding_window:
        lines.append(f"{model.num_sliding_window_layers} of {model.num_layers} layers keep only the last "
                     f"{model.sliding_window:,} tokens (sliding window)")
    display(widgets.HTML("<br>".join(lines)))
    display(estimate_figure(est))


def estimate_figure(est: KVEstimate) -> Figure:
    """The calculator's plot: KV against seq_len up to twice the chosen length, never past the context window.

    The line stops at ``max_position_embeddings`` (marked by a dotted line when the range reaches it); a
    chosen ``seq_len`` beyond it is still dotted, next to the warning in the readout.
    """
    seq_lens = [est.seq_len * k // 32 for k in range(1, 65)]
    return plot_kv_vs_seq_len([est.model], seq_lens, batch_size=est.batch_size, dtype=est.dtype,
                              clip_to_context=True, mark_context=True, mark_seq_len=est.seq_len,
                              figsize=(6, 3))


def closest_divisor(n: int, value: int) -> int:
    """``value`` if it divides ``n``, else the divisor of ``n`` closest to it (the smaller one on a tie)."""
    return min(_divisors(n), key=lambda d: (abs(d - value), d))


class KVCalculator(Panel):
    """The calculator: a preset fills the architecture sliders; KV heads offers the divisors of the heads.

    When a new head count no longer divides by the chosen KV heads, the KV heads move to the closest divisor
    and ``note`` says so under the readout (37 heads, a prime, offers only 1 and 37).
    """

    note: str | None = None

    def load_preset(self, model: ModelSpec) -> None:
        for name in _ARCHITECTURE[1:]:
            self.controls[name].disabled = model.attention == "MLA"  # MLA caches a latent, not heads
        self.set_values(**{name: getattr(model, name) for name in _ARCHITECTURE})

    def update(self) -> None:
        super().update()
        if self.note is not None and self.error is None:
            with self.output:
                display(widgets.HTML(f"<b style='color:#b45f06'>{html.escape(self.note)}</b>"))

    def _on_change(self, change: dict) -> None:
        if change["owner"] is self.controls["preset"]:
            self.load_preset(load_model(change["new"]))
            return
        self.note = None
        if change["owner"] is self.controls["num_attention_heads"]:
            kv_heads, heads = self.controls["num_kv_heads"], change["new"]
            with self.hold():
                old, kv_heads.options = kv_heads.value, _divisors(heads)
                kv_heads.value = closest_divisor(heads, old)
            if kv_heads.value != old:
                self.note = (f"{heads} attention heads cannot share {old} KV heads ({heads} is not a "
                             f"multiple of {old}): KV heads set to {kv_heads.value}, the closest divisor "
                             f"of {heads}")
        super()._on_change(change)


def _compute_estimate(preset: str, num_layers: int, num_attention_heads: int, num_kv_heads: int,
                      head_dim: int, seq_len: float, batch_size: float, dtype: str) -> KVEstimate:
    seq_len, batch_size = round(seq_len), round(batch_size)  # the log sliders hold floats
    spec = edited_model(load_model(preset), num_layers, num_attention_heads, num_kv_heads, head_dim)
    state = (spec.linear_attention.num_layers * state_bytes_per_layer(spec, STATE_DTYPE_BYTES) * batch_size
             if spec.linear_attention else 0)
    return KVEstimate(spec, seq_len, batch_size, dtype, kv_bytes_per_token(spec, dtype),
                      kv_cache_bytes(spec, seq_len, batch_size=batch_size, dtype=dtype), state)


def _doubling_slider(value: int, lowest: int, highest: int, description: str,
                     options: dict[str, Any]) -> widgets.FloatLogSlider:
    """A slider on a log-2 scale with a notch per doubling, showing whole numbers."""
    return widgets.FloatLogSlider(value=value, base=2, min=math.log2(lowest), max=math.log2(highest), step=1,
                                  readout_format=",.0f", description=description, **options)


def kv_calculator(preset: str = "llama-2-7b", *, seq_len: int = 2048, batch_size: int = 1,
                  dtype: str = "fp16") -> KVCalculator:
    """KV-cache calculator (notebook 02): preset, architecture, seq_len, batch and dtype -> readout + plot.

    ``panel.result`` is a ``KVEstimate`` computed by ``kv_bytes_per_token`` / ``kv_cache_bytes``.
    """
    model = load_model(preset)
    slider = dict(style=_STYLE, layout=_LAYOUT, continuous_update=False)
    controls = {
        "preset": widgets.Dropdown(options=list_models(), value=model.name, description="preset",
                                   style=_STYLE),
        "num_layers": widgets.IntSlider(min=1, max=128, value=model.num_layers, description="layers",
                                        **slider),
        "num_attention_heads": widgets.IntSlider(min=1, max=128, value=model.num_attention_heads,
                                                 description="attention heads", **slider),
        "num_kv_heads": widgets.Dropdown(options=_divisors(model.num_attention_heads),
                                         value=model.num_kv_heads, description="KV heads", style=_STYLE),
        "head_dim": widgets.IntSlider(min=16, max=256, step=16, value=model.head_dim, description="head_dim",
                                      **slider),
        # lengths and batches span orders of magnitude: one notch per doubling (128 … 128 K, 1 … 256), so
        # 4096 or a batch of 8 are a few notches away; any other value can be typed into the readout
        "seq_len": _doubling_slider(seq_len, 128, MAX_TOKENS, "seq_len", slider),
        "batch_size": _doubling_slider(batch_size, 1, 256, "batch", slider),
        "dtype": widgets.ToggleButtons(options=list(DTYPE_BYTES), value=dtype, description="dtype",
                                       style=_STYLE),
    }
    for name in _ARCHITECTURE[1:]:
        controls[name].disabled = model.attention == "MLA"
    return KVCalculator(controls, _compute_estimate, _render_estimate)


def _render_plan(plan: CapacityPlan) -> None:
    verdict = "fits" if plan.fits else "does NOT fit"
    color = "#070" if plan.fits else "#b00"
    display(widgets.HTML(
        f"<b style='color:{color}'>{html.escape(plan.model.name)} on {html.escape(plan.gpu.display_name)}: "
        f"{verdict}</b><br>KV cache: <b>{plan.kv_cache_tokens:,} tokens</b> ({plan.num_blocks:,} blocks of "
        f"{plan.hybrid.block_size if plan.hybrid else plan.block_size}) · max concurrency at "
        f"{plan.max_model_len:,} tokens/request: <b>{plan.max_concurrency:.2f}</b>"
        + (f"<br>hybrid: each request also holds <b>{format_bytes(plan.state_bytes_per_sequence)}</b> of "
           "fixed linear-attention state in the same pool, however short it is" if plan.hybrid else "")))
    # pre-wrap with normal word breaks: long lines wrap between words, never inside a number
    display(widgets.HTML("<pre style='white-space:pre-wrap; word-break:normal; overflow-wrap:normal; "
                         f"font-family:monospace; line-height:1.3'>{html.escape(plan.explain())}</pre>"))


def _compute_plan(model: str, gpu: str, gpu_memory_utilization: float, max_model_len: int, weight_dtype: str,
                  kv_dtype: str, tensor_parallel_size: int) -> CapacityPlan:
    return plan_capacity(load_model(model), load_gpu(gpu), gpu_memory_utilization=gpu_memory_utilization,
                         max_model_len=max_model_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                         tensor_parallel_size=tensor_parallel_size)


def capacity_panel(model: str = "llama-2-13b", gpu: str = "rtx-4090", *,
                   gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
                   max_model_len: int = 4096, weight_dtype: str = "fp16", kv_dtype: str = "fp16",
                   tensor_parallel_size: int = 1) -> Panel:
    """Capacity panel (notebook 02, "容量规划"): model x GPU x settings -> ``plan_capacity`` and its
    explanation.

    ``panel.result`` is the ``CapacityPlan`` (KV tokens, max concurrency, fits); impossible settings show the
    error ``plan_capacity`` raises.
    """
    slider = dict(style=_STYLE, layout=_LAYOUT, continuous_update=False)
    controls = {
        "model": widgets.Dropdown(options=list_models(), value=load_model(model).name, description="model",
                                  style=_STYLE),
        "gpu": widgets.Dropdown(options=list_gpus(), value=load_gpu(gpu).name, description="GPU",
                                style=_STYLE),
        "gpu_memory_utilization": widgets.FloatSlider(
            min=0.5, max=0.98, step=0.01, value=gpu_memory_utilization, description="memory util.",
            tooltip="vLLM's gpu_memory_utilization", **slider),
        "max_model_len": widgets.IntSlider(min=256, max=MAX_TOKENS, step=256, value=max_model_len,
                                           description="max_model_len", **slider),
        "weight_dtype": widgets.ToggleButtons(options=WEIGHT_DTYPES, value=weight_dtype,
                                              description="weights", style=_STYLE),
        "kv_dtype": widgets.ToggleButtons(options=KV_DTYPES, value=kv_dtype, description="KV cache",
                                          style=_STYLE),
        "tensor_parallel_size": widgets.ToggleButtons(options=(1, 2, 4, 8), value=tensor_parallel_size,
                                                      description="GPUs (TP)", style=_STYLE),
    }
    return Panel(controls, _compute_plan, _render_plan)
