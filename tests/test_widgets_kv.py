"""The KV panels driven headless: set a control's value, read ``panel.result``; the math must be kvcache's."""
from __future__ import annotations

import pytest

from helpers.kvcache import kv_bytes_per_token, kv_cache_bytes
from helpers.kvcache.capacity import plan_capacity
from helpers.models import load_model
from helpers.widgets.kv import capacity_panel, estimate_figure, kv_calculator

ARCHITECTURE = ("num_layers", "num_attention_heads", "num_kv_heads", "head_dim")


@pytest.fixture(scope="module")
def calc():
    return kv_calculator("llama-2-7b", seq_len=2048)


def test_calculator_starts_at_llama_2_7b_one_gib(calc) -> None:
    # Hand-computed: 2 x 32 layers x 32 KV heads x 128 x 2 B = 524,288 B/token; x 2048 = 2**30.
    assert calc.result.bytes_per_token == 524_288
    assert calc.result.total_bytes == 2**30
    assert calc.result.model == load_model("llama-2-7b")


@pytest.mark.parametrize("preset",
                         ["llama-3-8b", "gemma-2-9b", "mistral-7b", "falcon-7b", "deepseek-v3", "gpt2"])
def test_preset_fills_sliders_and_readout_equals_kvcache(calc, preset: str) -> None:
    calc.controls["preset"].value = preset
    calc.set_values(seq_len=8192, batch_size=3, dtype="fp8")
    model = load_model(preset)
    assert [calc.controls[name].value for name in ARCHITECTURE] == [getattr(model, n) for n in ARCHITECTURE]
    assert calc.result.model == model
    assert calc.result.bytes_per_token == kv_bytes_per_token(model, "fp8")
    assert calc.result.total_bytes == kv_cache_bytes(model, 8192, batch_size=3, dtype="fp8")


def test_kv_heads_slider_turns_mha_into_gqa_and_mqa(calc) -> None:
    calc.controls["preset"].value = "llama-2-7b"
    calc.set_values(seq_len=4096, batch_size=1, dtype="fp16")
    model = load_model("llama-2-7b")
    calc.controls["num_kv_heads"].value = 8
    assert calc.result.model.attention == "GQA"
    assert calc.result.total_bytes == kv_cache_bytes(model.with_attention("GQA", 8), 4096) == 2**30 // 2
    calc.controls["num_kv_heads"].value = 1
    assert calc.result.model.attention == "MQA"
    assert calc.result.bytes_per_token == kv_bytes_per_token(model.with_attention("MQA")) == 16_384


def test_kv_heads_choices_are_the_divisors_of_the_head_count(calc) -> None:
    calc.controls["preset"].value = "llama-3-8b"
    calc.controls["num_attention_heads"].value = 12
    assert list(calc.controls["num_kv_heads"].options) == [1, 2, 3, 4, 6, 12]
    assert calc.controls["num_kv_heads"].value == 6          # largest divisor not above the old 8
    assert calc.result.model.name == "llama-3-8b (edited)" and calc.error is None


def test_mla_preset_disables_head_sliders_and_counts_layers_only(calc) -> None:
    calc.controls["preset"].value = "deepseek-v3"
    assert all(calc.controls[name].disabled for name in ARCHITECTURE[1:])
    calc.set_values(dtype="fp16", batch_size=1)
    assert calc.result.bytes_per_token == 61 * (512 + 64) * 2
    calc.controls["num_layers"].value = 30
    assert calc.result.bytes_per_token == 30 * (512 + 64) * 2
    calc.controls["preset"].value = "llama-2-13b"
    assert not any(calc.controls[name].disabled for name in ARCHITECTURE[1:])


def test_sliding_window_share_follows_the_layer_slider(calc) -> None:
    calc.controls["preset"].value = "gemma-2-9b"
    calc.set_values(seq_len=8192, batch_size=1, dtype="fp16", num_layers=20)
    edited = calc.result.model
    assert (edited.num_layers, edited.num_sliding_window_layers) == (20, 10)
    assert calc.result.total_bytes == kv_cache_bytes(edited, 8192) == 2 * 10 * 8 * 256 * 2 * (8192 + 4096)


def test_set_values_recomputes_once() -> None:
    panel = kv_calculator("llama-2-7b")
    calls = []
    compute = panel._compute
    panel._compute = lambda **kw: calls.append(kw) or compute(**kw)
    panel.set_values(seq_len=1024, batch_size=4, dtype="int8")
    assert len(calls) == 1
    assert panel.result.total_bytes == kv_cache_bytes(load_model("llama-2-7b"), 1024, 4, "int8")


def test_capacity_panel_result_is_plan_capacity() -> None:
    panel = capacity_panel("llama-2-13b", "rtx-4090", gpu_memory_utilization=0.92, max_model_len=4096)
    assert panel.result == plan_capacity("llama-2-13b", "rtx-4090", gpu_memory_utilization=0.92,
                                         max_model_len=4096)
    assert not panel.result.fits                              # 26.03 GB of fp16 weights on a 24 GB card
    panel.controls["weight_dtype"].value = "int8"
    assert panel.result.fits
    assert panel.result == plan_capacity("llama-2-13b", "rtx-4090", gpu_memory_utilization=0.92,
                                         max_model_len=4096, weight_dtype="int8")
    panel.set_values(model="llama-3-8b", gpu="a100-80gb", gpu_memory_utilization=0.9, max_model_len=8192,
                     weight_dtype="fp16", kv_dtype="fp8", tensor_parallel_size=2)
    expected = plan_capacity("llama-3-8b", "a100-80gb", gpu_memory_utilization=0.9, max_model_len=8192,
                             kv_dtype="fp8", tensor_parallel_size=2)
    assert panel.result == expected and panel.result.kv_cache_tokens > 0


def test_capacity_panel_shows_the_error_for_impossible_settings() -> None:
    panel = capacity_panel("llama-3-8b", "rtx-4090", max_model_len=8192)
    panel.controls["model"].value = "llama-2-7b"              # max_position_embeddings 4096 < 8192
    assert panel.result is None and "max_model_len" in panel.error
    panel.controls["max_model_len"].value = 4096
    assert panel.error is None and panel.result.max_model_len == 4096


def test_typed_seq_len_is_used_and_a_length_past_the_context_is_flagged() -> None:
    panel = kv_calculator("llama-2-7b")                      # max_position_embeddings 4096
    panel.controls["seq_len"].value = 3000                   # a typed value, not a power of two
    assert panel.result.total_bytes == kv_cache_bytes(load_model("llama-2-7b"), 3000)
    assert not panel.result.exceeds_context
    panel.controls["seq_len"].value = 8192
    assert panel.result.exceeds_context and panel.result.total_bytes == 4 * 2**30


def test_a_prime_head_count_keeps_mha_and_says_why_kv_heads_moved() -> None:
    panel = kv_calculator("llama-2-7b")                      # 32 heads, 32 KV heads (MHA)
    panel.controls["num_attention_heads"].value = 37         # prime: only 1 and 37 divide it
    assert panel.controls["num_kv_heads"].value == 37        # the closest divisor to 32, not MQA's 1
    assert panel.result.model.attention == "MHA" and "37" in panel.note and "32" in panel.note
    panel.controls["num_attention_heads"].value = 74         # 37 still divides 74: kept, nothing to say
    assert panel.controls["num_kv_heads"].value == 37 and panel.note is None
    assert panel.result.model.attention == "GQA"
    panel.controls["seq_len"].value = 1024                   # any other change clears the note
    assert panel.note is None


def test_calculator_plot_stops_at_the_context_window() -> None:
    panel = kv_calculator("llama-2-7b", seq_len=3072)        # the plot's range is 2 x 3072 > 4096
    line = estimate_figure(panel.result).axes[0].lines[0]
    assert max(line.get_xdata()) <= 4096
    lines = estimate_figure(panel.result).axes[0].lines
    context_marks = [ln for ln in lines if "context window" in ln.get_label()]
    assert len(context_marks) == 1 and context_marks[0].get_xdata()[0] == 4096


def test_seq_len_and_batch_move_a_doubling_per_notch() -> None:
    """Notebook 02's sliders: 4096 tokens and a batch of 8 are a few notches away, not a hair's width."""
    import math

    panel = kv_calculator("llama-2-7b", seq_len=2048)
    for name, target in (("seq_len", 4096), ("batch_size", 8)):
        control = panel.controls[name]
        notches = round((control.max - control.min) / control.step)
        assert notches <= 12 and float(math.log2(target) - control.min).is_integer()  # a notch, exactly
        panel.controls[name].value = target
    assert (panel.result.seq_len, panel.result.batch_size) == (4096, 8)
    assert isinstance(panel.result.seq_len, int)


def _shown(panel, capsys) -> str:
    """What the panel renders (outside a kernel, ipywidgets' Output lets display() reach stdout)."""
    capsys.readouterr()
    panel.update()
    return capsys.readouterr().out


def test_calculator_counts_a_hybrid_models_kv_on_attention_layers_and_adds_its_state(calc, capsys) -> None:
    calc.controls["preset"].value = "qwen3-next-80b-a3b"
    calc.set_values(seq_len=32768, batch_size=4, dtype="fp16")
    model, result = load_model("qwen3-next-80b-a3b"), calc.result
    assert result.model == model and result.bytes_per_token == 12 * 2 * 2 * 256 * 2
    assert result.total_bytes == kv_cache_bytes(model, 32768, batch_size=4)
    assert result.state_bytes == 4 * 36 * (8192 * 3 + 32 * 128 * 128) * 2  # whatever the length
    assert result.cache_bytes == result.total_bytes + result.state_bytes
    shown = _shown(calc, capsys)
    assert "12 of 48 layers" in shown and "fixed state" in shown
    calc.controls["num_layers"].value = 8                    # the 3-in-4 linear share follows the slider
    assert (calc.result.model.num_attention_layers, calc.result.model.linear_attention.num_layers) == (2, 6)
    calc.controls["num_layers"].value = 1                    # one layer left: it attends, no state
    assert not calc.result.model.is_hybrid and calc.result.state_bytes == 0
    calc.controls["preset"].value = "llama-2-7b"


def test_capacity_panel_plans_a_hybrid_model_with_its_state(capsys) -> None:
    panel = capacity_panel("qwen3-next-80b-a3b", "b200", max_model_len=32768)
    assert panel.result == plan_capacity("qwen3-next-80b-a3b", "b200", max_model_len=32768)
    assert panel.result.fits and panel.result.state_bytes_per_sequence > 0
    shown = _shown(panel, capsys)
    assert "blocks of 544" in shown and "fixed linear-attention state" in shown
    assert "36 个线性注意力层" in shown
    panel.controls["weight_dtype"].value = "int4"             # more pool: more requests, same state each
    assert panel.result.max_concurrency > plan_capacity("qwen3-next-80b-a3b", "b200",
                                                        max_model_len=32768).max_concurrency
