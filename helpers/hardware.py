"""GPU facts from ``data/gpus.csv`` (notebook 02, §容量规划; roofline in notebook 04).

``memory_bytes`` is the device total the driver reports (``nvidia-smi`` / ``torch.cuda.mem_get_info``),
which is what vLLM multiplies by ``gpu_memory_utilization``: a "24 GB" RTX 4090 reports 24564 MiB
(23.99 GiB, 25.76 GB). ``data/README.md`` says where each figure comes from.
"""

from __future__ import annotations

import csv
import difflib
from dataclasses import dataclass
from functools import lru_cache

from helpers.models import DATA_DIR

GPUS_CSV = DATA_DIR / "gpus.csv"
MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class GPUSpec:
    """One accelerator: memory, bandwidth, dense FP16/BF16 tensor throughput and its GPU-to-GPU link."""

    name: str
    display_name: str
    memory_bytes: int
    memory_bandwidth_bytes_per_s: float
    fp16_tflops: float  # dense FP16/BF16 tensor TFLOPS (what a PyTorch GEMM can reach)
    memory_type: str
    source: str
    bf16_supported: bool = True
    notes: str = ""
    interconnect: str = ""  # the GPU-to-GPU link of tensor parallelism (NVLink, PCIe, Infinity Fabric)
    interconnect_bytes_per_s: float = 0.0  # its bidirectional total per GPU, as datasheets state it

    @property
    def fp16_flops_per_s(self) -> float:
        return self.fp16_tflops * 1e12


@lru_cache(maxsize=1)
def _gpus() -> dict[str, GPUSpec]:
    with GPUS_CSV.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    return {
        row["name"]: GPUSpec(
            name=row["name"],
            display_name=row["display_name"],
            memory_bytes=int(row["memory_mib"]) * MIB,
            memory_bandwidth_bytes_per_s=float(row["memory_bandwidth_gbps"]) * 1e9,
            fp16_tflops=float(row["fp16_tflops_dense"]),
            memory_type=row["memory_type"],
            source=row["source"],
            bf16_supported=row["bf16_supported"] == "yes",
            notes=row["notes"],
            interconnect=row["interconnect"],
            interconnect_bytes_per_s=float(row["interconnect_gbps"]) * 1e9,
        )
        for row in rows
    }


def list_gpus() -> list[str]:
    """GPU names, smallest memory first."""
    return [g.name for g in sorted(_gpus().values(), key=lambda g: (g.memory_bytes, g.name))]


def load_gpu(name: str) -> GPUSpec:
    """A GPU by slug ("a100-80gb"); case, spaces and underscores are forgiven."""
    key = name.strip().lower().replace(" ", "-").replace("_", "-")
    gpus = _gpus()
    if key in gpus:
        return gpus[key]
    close = difflib.get_close_matches(key, list(gpus), n=3, cutoff=0.5)
    hint = f"close matches: {', '.join(close)}; " if close else ""
    raise ValueError(f"unknown GPU {name!r}; {hint}known GPUs: {', '.join(list_gpus())}")
