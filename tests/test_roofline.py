"""helpers.roofline: step costs and physical limits."""
import math

import numpy as np
import pytest

from helpers.hardware import load_gpu
from helpers.kvcache import weights_bytes
from helpers.models import load_model
from helpers.roofline import (
    cost_model,
    decode_compute_bound_batch_size,
    decode_tokens_per_s_ceiling,
    prefill_time_floor_s,
    step_time,
)

L13 = load_model("llama-2-13b")
A100 = load_gpu("a100-80gb")
RTX = load_gpu("rtx-4090")


def test_single_stream_decode_ceiling_is_bandwidth_over_weight_bytes():
    ceiling = decode_tokens_per_s_ceiling(L13, RTX)
    assert ceiling == pytest.approx(RTX.memory_bandwidth_bytes_per_s / weights_bytes(L13, "fp16"), rel=1e-3)
    assert 38 < ceiling < 39.5  # NOTES.md error 4: 1008 GB/s / 26.03 GB = 38.7 tok/s


def test_decode_is_memory_bound_and_prefill_compute_bound():
    assert step_time(L13, A100, [(1, 1000)]).bound == "memory"
    assert step_time(L13, A100, [(2048, 0)]).bound == "compute"


def test_time_is_overhead_plus_max_of_compute_and_memory():
    # A 512-token prefill chunk after 100 cached tokens and one decode token at context 700, priced by hand
    # from the model's and the card's facts (default MFU 0.5, MBU 0.75, fp16).
    cost = step_time(L13, A100, [(512, 100), (1, 700)], overhead_s=0.003)
    attn_flops_per_token_ctx = 2 * L13.num_layers * L13.num_attention_heads * (2 * L13.head_dim)
    flops = 2 * L13.active_params * 513 + attn_flops_per_token_ctx * (512 * (100 + 512 / 2) + 1 * (700 + 0.5))
    kv_bytes_per_token = 2 * L13.num_layers * L13.num_kv_heads * L13.head_dim * 2
    memory = weights_bytes(L13, "fp16") + kv_bytes_per_token * (100 + 512 + 700 + 1)
    compute_s = flops / (A100.fp16_flops_per_s * 0.5)
    memory_s = memory / (A100.memory_bandwidth_bytes_per_s * 0.75)
    assert compute_s > memory_s  # 513 new tokens: compute-bound on an A100
    assert cost.time_s == pytest.approx(0.003 + compute_s, rel=1e-9)
    assert cost.bound == "compute"
    decode = step_time(L13, A100, [(1, 700)], overhead_s=0.003)
    one_token_memory_s = ((weights_bytes(L13, "fp16") + kv_bytes_per_token * 701)
                          / (A100.memory_bandwidth_bytes_per_s * 0.75))
    assert decode.time_s == pytest.approx(0.003 + one_token_memory_s, rel=1e-9) and decode.bound == "memory"
    assert step_time(L13, A100, []).time_s == 0


def test_batching_decode_amortises_weight_reads():
    one = step_time(L13, A100, [(1, 1000)]).time_s
    many = step_time(L13, A100, [(1, 1000)] * 32).time_s
    assert many < 2 * one  # 32 tokens for less than the price of two
    assert decode_tokens_per_s_ceiling(L13, A100, batch_size=32) > 20 * decode_tokens_per_s_ceiling(L13, A100)


def test_quantized_weights_read_fewer_bytes():
    fp16 = step_time(L13, RTX, [(1, 0)], mbu=1, overhead_s=0).memory_bytes
    int4 = step_time(L13, RTX, [(1, 0)], weight_dtype="int4", mbu=1, overhead_s=0).memory_bytes
    int8 = step_time(L13, RTX, [(1, 0)], weight_dtype="int8", mbu=1, overhead_s=0).memory_bytes
    assert int8 == pytest.approx(fp16 / 2, rel=0.01) and int4 == pytest.approx(fp16 / 4, rel=0.01)


def test_prefill_floor_is_two_flops_per_param_per_token_at_least():
    floor = prefill_time_floor_s(L13, A100, 1024)
    assert floor >= 2 * L13.active_params * 1024 / A100.fp16_flops_per_s
    assert floor < 0.2


def test_compute_bound_batch_size_short_context_and_never_for_long():
    batch = decode_compute_bound_batch_size(L13, A100, context_len=0)
    expected = A100.fp16_flops_per_s / A100.memory_bandwidth_bytes_per_s  # ~153 FLOP/byte, 1 FLOP/byte/token
    assert 0.5 * expected < batch < 1.5 * expected
    assert decode_compute_bound_batch_size(L13, A100, context_len=100_000) is None


def test_moe_reads_only_touched_experts_and_computes_active_params():
    mix = load_model("mixtral-8x7b")
    cm = cost_model(mix, A100)
    assert cm.flops_per_token == pytest.approx(2 * mix.active_params)
    assert cm.weight_bytes(1) < cm.weight_bytes(8) < cm.weight_bytes(10_000)
    assert cm.weight_bytes(10_000) == pytest.approx(weights_bytes(mix, "fp16"), rel=1e-6)
    one = cm.weight_bytes(1)
    assert one == pytest.approx(cm.shared_weight_bytes + cm.expert_weight_bytes * 2 / 8)


def test_sliding_window_caps_attended_context():
    mistral = load_model("mistral-7b")
    short = step_time(mistral, A100, [(1, mistral.sliding_window)]).memory_bytes
    long = step_time(mistral, A100, [(1, 4 * mistral.sliding_window)]).memory_bytes
    assert long == pytest.approx(short, rel=1e-3)


def test_bad_efficiency_is_an_error():
    with pytest.raises(ValueError, match="mfu"):
        step_time(L13, A100, [(1, 0)], mfu=0)
    assert math.isfinite(step_time(L13, A100, [(1, 0)], mbu=1.0).time_s)


def test_tensor_parallelism_adds_two_all_reduces_per_layer():
    l70 = load_model("llama-3.1-70b")
    decode = [(1, 1000)] * 8
    one = step_time(l70, "h200", decode, tensor_parallel_size=1)
    assert one.comm_s == 0.0
    tp4 = step_time(l70, "h200", decode, tensor_parallel_size=4, allreduce_latency_s=20e-6)
    latency_only = 2 * l70.num_layers * 20e-6
    assert latency_only < tp4.comm_s < 1.05 * latency_only  # 8 tokens of activations: latency-bound
    one_gpu = step_time(l70, "h200", decode, allreduce_latency_s=20e-6)  # TP splits compute and memory by 4
    assert tp4.time_s == pytest.approx(one_gpu.overhead_s + (one_gpu.time_s - one_gpu.overhead_s) / 4
                                       + tp4.comm_s, rel=1e-9)
    prefill = step_time(l70, "h200", [(8192, 0)], tensor_parallel_size=4, allreduce_latency_s=0.0)
    ring = 2 * 3 / 4 * 8192 * l70.hidden_size * 2 / (900e9 / 2)  # 2(N-1)/N of the activations, one way
    assert prefill.comm_s == pytest.approx(2 * l70.num_layers * ring)
    pcie = step_time(l70, "rtx-4090", [(8192, 0)], tensor_parallel_size=4, allreduce_latency_s=0.0,
                     weight_dtype="int4")
    assert pcie.comm_s == pytest.approx(prefill.comm_s * 900 / 64)  # PCIe 4.0: 64 GB/s, not NVLink's 900


def test_decode_times_include_the_all_reduces_like_cost():
    cm = cost_model("llama-3.1-70b", "h200", tensor_parallel_size=2)
    times = cm.decode_times_s(np.array([100.0, 200.0]), 3)
    singles = [cm.cost(np.ones(2), np.array([100.0 + j, 200.0 + j])).time_s for j in range(3)]
    np.testing.assert_allclose(times, singles, rtol=1e-12)
