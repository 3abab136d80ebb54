"""``python -m helpers kv``: KV-cache size and a vLLM-style capacity plan (notebook 02).

python -m helpers kv --model llama-2-13b --gpu rtx-4090 --seq-len 4096 --batch 8 --kv-dtype fp8
python -m helpers kv --config path/to/config.json --gpu a100-80gb --json
python -m helpers kv --list-gpus        (or --list-models: the presets, with their context lengths)
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from helpers.cli.args import fail
from helpers.kvcache import (
    DTYPE_BYTES,
    format_bytes,
    kv_bytes_per_token,
    kv_cache_bytes,
    weights_bytes,
)
from helpers.models import ModelSpec, load_model


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="preset name or Hugging Face id (e.g. llama-2-13b)")
    source.add_argument("--config", help="path to a Hugging Face config.json")
    source.add_argument("--list-gpus", action="store_true", help="list the GPUs --gpu accepts, and exit")
    source.add_argument("--list-models", action="store_true", help="list the model presets, and exit")
    parser.add_argument("--gpu", help="GPU name for a capacity plan (e.g. rtx-4090); omit for sizes only")
    parser.add_argument(
        "--seq-len",
        type=int,
        default=None,
        help="tokens per sequence (default: max_model_len, else the model's context)",
    )
    parser.add_argument("--batch", type=int, default=1, help="number of sequences (default 1)")
    dtypes = list(DTYPE_BYTES)
    parser.add_argument("--kv-dtype", choices=dtypes, default="fp16", help="KV-cache dtype (default fp16)")
    parser.add_argument("--weight-dtype", choices=dtypes, default="fp16", help="weight dtype (default fp16)")
    parser.add_argument(
        "--gpu-memory-utilization", type=float, default=0.9, help="vLLM's share (default 0.9)"
    )
    parser.add_argument("--max-model-len", type=int, default=None, help="default: the model's context")
    parser.add_argument("--tensor-parallel-size", type=int, default=1, help="GPUs sharing the model")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _load(args: argparse.Namespace) -> ModelSpec:
    if args.model:
        return load_model(args.model)
    try:
        with open(args.config, encoding="utf-8") as f:
            config = json.load(f)
    except OSError as exc:
        raise ValueError(f"cannot read {args.config}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{args.config} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
    return ModelSpec.from_hf_config(config)


def _report(args: argparse.Namespace) -> dict[str, Any]:
    from helpers.kvcache.capacity import plan_capacity

    model = _load(args)
    for name in ("batch", "seq_len", "max_model_len", "tensor_parallel_size"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    seq_len = args.seq_len or args.max_model_len or model.max_position_embeddings
    warnings = []
    if seq_len > model.max_position_embeddings:
        warnings.append(
            f"{seq_len:,} tokens per sequence exceed {model.name}'s context length, "
            f"{model.max_position_embeddings:,} tokens (max_position_embeddings in its config.json): "
            "no sequence can be that long; the KV figure is arithmetic only"
        )
    report: dict[str, Any] = {
        "model": model.to_dict(),
        "seq_len": seq_len,
        "batch": args.batch,
        "kv_dtype": args.kv_dtype,
        "weight_dtype": args.weight_dtype,
        "kv_bytes_per_token": kv_bytes_per_token(model, args.kv_dtype),
        "kv_cache_bytes": kv_cache_bytes(model, seq_len, args.batch, args.kv_dtype),
        "weights_bytes": weights_bytes(model, args.weight_dtype),
        "capacity": None,
        "warnings": warnings,
    }
    if args.gpu:
        plan = plan_capacity(
            model,
            args.gpu,
            gpu_memory_utilization=args.gpu_memory_utilization,
            max_model_len=args.max_model_len,
            weight_dtype=args.weight_dtype,
            kv_dtype=args.kv_dtype,
            tensor_parallel_size=args.tensor_parallel_size,
        )
        fits = plan.fits and seq_len <= plan.max_model_len and plan.concurrency_for(seq_len) >= args.batch
        why = f" (longer than max_model_len {plan.max_model_len:,})" if seq_len > plan.max_model_len else ""
        report["capacity"] = {**plan.to_dict(), "batch_fits": fits, "explain": plan.explain(), "why": why}
    return report


def _text(report: dict[str, Any]) -> str:
    m = report["model"]
    lines = [
        f"{m['name']}: {m['num_layers']} layers, {m['attention']} ({m['num_attention_heads']} heads, "
        f"{m['num_kv_heads']} KV heads, head_dim {m['head_dim']}), {m['total_params'] / 1e9:.2f}B params",
        f"KV per token ({report['kv_dtype']}): {format_bytes(report['kv_bytes_per_token'])}",
        f"KV for {report['batch']} x {report['seq_len']} tokens: {format_bytes(report['kv_cache_bytes'])}",
        f"weights ({report['weight_dtype']}): {format_bytes(report['weights_bytes'])}",
    ]
    if m["sliding_window"]:
        lines.insert(1, f"sliding window {m['sliding_window']} on {m['num_sliding_window_layers']} layers")
    if m["linear_attention"]:
        linear = m["linear_attention"]["num_layers"]
        lines.insert(1, f"hybrid: {m['num_layers'] - linear} attention layers keep KV, {linear} "
                        "linear-attention layers a fixed state per sequence (in the capacity plan below)")
    lines += [f"note: {note}" for note in m["assumptions"]]
    lines += [f"WARNING: {warning}" for warning in report["warnings"]]
    cap = report["capacity"]
    if cap:
        verdict = "fits" if cap["batch_fits"] else "does NOT fit" + cap["why"]
        lines += [
            "",
            cap["explain"],
            "",
            f"batch {report['batch']} x {report['seq_len']} tokens in the KV pool: {verdict}",
        ]
    return "\n".join(lines)


def _gpu_table() -> str:
    from helpers.hardware import list_gpus, load_gpu

    lines = [f"{'--gpu':<12}{'name':<30}{'memory':>10}{'bandwidth':>13}{'FP16 dense':>13}"]
    for name in list_gpus():
        gpu = load_gpu(name)
        lines.append(f"{name:<12}{gpu.display_name:<30}{gpu.memory_bytes / 2**30:>6.1f} GiB"
                     f"{gpu.memory_bandwidth_bytes_per_s / 1e9:>8,.0f} GB/s{gpu.fp16_tflops:>8,.0f} TFLOPS")
    return "\n".join(lines)


def _model_table() -> str:
    from helpers.models import list_models

    lines = [f"{'--model':<16}{'params':>9}{'layers':>8}  {'attention':<10}{'KV heads':>9}{'context':>10}"
             f"{'window':>8}"]
    for name in list_models():
        m = load_model(name)
        lines.append(f"{name:<16}{m.total_params / 1e9:>8.1f}B{m.num_layers:>8}  {m.attention:<10}"
                     f"{m.num_kv_heads:>9}{m.max_position_embeddings:>10,}{m.sliding_window or '-':>8}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if args.list_gpus or args.list_models:
        print(_gpu_table() if args.list_gpus else _model_table())
        return 0
    try:
        report = _report(args)
    except ValueError as exc:
        return fail(str(exc))
    print(json.dumps(report, ensure_ascii=False) if args.json else _text(report))
    return 0
