"""helpers.hardware: GPU facts and the GiB-vs-GB memory totals."""

from __future__ import annotations

import pytest

from helpers.hardware import list_gpus, load_gpu

REQUIRED = {
    "rtx-3090",
    "rtx-4090",
    "a10",
    "l4",
    "l40s",
    "a100-40gb",
    "a100-80gb",
    "h100-sxm",
    "h100-pcie",
    "h200",
    "b200",
    "mi300x",
    "t4",
}


def test_required_gpus_ship() -> None:
    assert REQUIRED <= set(list_gpus())


def test_list_is_sorted_by_memory() -> None:
    memories = [load_gpu(name).memory_bytes for name in list_gpus()]
    assert memories == sorted(memories)


def test_rtx_4090_memory_is_the_driver_total_not_24e9() -> None:
    gpu = load_gpu("rtx-4090")
    assert gpu.memory_bytes == 24564 * 2**20
    assert 23.98 < gpu.memory_bytes / 2**30 < 24.0 and gpu.memory_bytes > 24e9


@pytest.mark.parametrize(
    "name, bandwidth_gbps, tflops",
    [
        ("a100-80gb", 2039, 312),
        ("h100-sxm", 3350, 989.4),
        ("rtx-4090", 1008, 165.2),
        ("mi300x", 5300, 1307.4),
    ],
)
def test_datasheet_figures(name: str, bandwidth_gbps: float, tflops: float) -> None:
    gpu = load_gpu(name)
    assert gpu.memory_bandwidth_bytes_per_s == bandwidth_gbps * 1e9
    assert gpu.fp16_flops_per_s == tflops * 1e12


def test_every_gpu_has_a_source_and_sane_numbers() -> None:
    for name in list_gpus():
        gpu = load_gpu(name)
        assert gpu.source and gpu.display_name
        assert 10 * 2**30 < gpu.memory_bytes < 256 * 2**30
        assert 1e11 < gpu.memory_bandwidth_bytes_per_s < 1e13 and 10 < gpu.fp16_tflops < 5000


def test_names_are_forgiving_and_unknown_names_suggest() -> None:
    assert load_gpu("RTX 4090").name == "rtx-4090"
    with pytest.raises(ValueError, match="close matches: rtx-4090"):
        load_gpu("rtx-4091")


def test_t4_has_no_bf16() -> None:
    assert not load_gpu("t4").bf16_supported and load_gpu("a100-80gb").bf16_supported
