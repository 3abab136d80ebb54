"""A vLLM config file as the command that launches it, and whether it can work on a GPU (notebook 06 §1).

``vllm_launch("data/vllm/config_b.yaml", "a100-80gb")`` gives both forms of the launch:

- ``vllm serve <model> --flag value ...``: every option of the file on the command line (booleans as
  ``--flag`` / ``--no-flag``, vLLM's ``BooleanOptionalAction`` spelling, so ``false`` overrides a default
  that is on);
- the articles' form ``python -m vllm.entrypoints.openai.api_server --config file.yaml --host H --port P``;

and the warnings ``plan_capacity`` finds: weights that do not fit, a KV pool too small for one
``max_model_len`` request (vLLM refuses to start), ``max_num_seqs × max_model_len`` above the KV tokens (the
scheduler preempts long requests at full concurrency). Pure: reads the YAML file, no server, no network.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.engine.config import EngineConfig
from helpers.engine.speculative import SIMULATOR_ONLY_KEYS
from helpers.hardware import GPUSpec
from helpers.kvcache.capacity import CapacityPlan, plan_capacity


@dataclass(frozen=True, slots=True)
class VllmLaunch:
    """The two command lines for one config file, and what would go wrong on ``plan.gpu``."""

    serve: str
    api_server: str
    warnings: tuple[str, ...]
    plan: CapacityPlan


def read_options(path: str | Path) -> dict[str, Any]:
    """The options of a ``vllm serve --config`` YAML file, in file order (validated by ``EngineConfig``)."""
    import yaml

    path = Path(path)
    EngineConfig.from_yaml(path)  # unknown options are errors with a did-you-mean
    with path.open(encoding="utf-8") as f:
        return dict(yaml.safe_load(f) or {})


def _flag(key: str) -> str:
    return "--" + str(key).strip().lstrip("-").replace("_", "-")


def _args(key: str, value: Any) -> list[str]:
    flag = _flag(key)
    if isinstance(value, bool):
        return [flag if value else "--no-" + flag[2:]]
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [flag, *(str(v) for v in value)]
    if isinstance(value, dict):
        return [flag, json.dumps(value, separators=(",", ":"))]
    return [flag, str(value)]


def _vllm_value(key: str, value: Any) -> Any:
    """The value as vLLM takes it: a ``speculative_config`` without the simulator-only keys."""
    if _flag(key) == "--speculative-config" and isinstance(value, str | dict):
        spec = json.loads(value) if isinstance(value, str) else value
        return {k: v for k, v in spec.items() if k not in SIMULATOR_ONLY_KEYS}
    return value


def serve_command(options: dict[str, Any], *, host: str | None = None, port: int | None = None) -> str:
    """``vllm serve <model> --flag value ...`` for these options (``model`` is the positional argument;
    a ``speculative_config``'s simulator-only keys, ``acceptance_rate`` ..., are left out)."""
    if not options.get("model"):
        raise ValueError(
            "the config has no 'model': vllm serve needs one (a Hugging Face id or a local path)"
        )
    words = ["vllm", "serve", str(options["model"])]
    for key, value in options.items():
        if _flag(key) not in ("--model", "--host", "--port"):
            words += _args(key, _vllm_value(key, value))
    words += _args("host", host if host is not None else options.get("host"))
    words += _args("port", port if port is not None else options.get("port"))
    return shlex.join(words)


def api_server_command(config_path: str | Path, *, host: str = "0.0.0.0", port: int = 8000) -> str:
    """The articles' launch: ``python -m vllm.entrypoints.openai.api_server --config FILE --host --port``."""
    return shlex.join(
        [
            "python",
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--config",
            str(config_path),
            "--host",
            host,
            "--port",
            str(port),
        ]
    )


def plan_for(config: EngineConfig, gpu: GPUSpec | str) -> CapacityPlan:
    """``plan_capacity`` with the config's options (what vLLM would log at start-up)."""
    config = config.for_gpu(gpu)
    return plan_capacity(
        config.model,
        gpu,
        gpu_memory_utilization=config.gpu_memory_utilization,
        max_model_len=config.max_model_len,
        weight_dtype=config.weight_dtype,
        kv_dtype=config.kv_dtype,
        block_size=config.block_size,
        tensor_parallel_size=config.tensor_parallel_size,
        max_num_batched_tokens=config.max_num_batched_tokens,
        max_num_seqs=config.max_num_seqs,
    )


def fit_warnings(config: EngineConfig, plan: CapacityPlan) -> list[str]:
    """Why this config cannot work, or cannot work at full load, on ``plan.gpu`` (in Chinese), with the
    batch limits the plan was made with (``plan_for``: the config's, or vLLM's defaults for the GPU)."""
    where = f"{plan.model.name} 在 {plan.gpu.name} 上"
    if not plan.fits:
        return [f"{where}无法启动：{plan.reason}。"]
    found = []
    wanted = plan.max_num_seqs * plan.tokens_per_request
    if wanted > plan.kv_cache_tokens:
        found.append(
            f"max_num_seqs {plan.max_num_seqs} × max_model_len {plan.max_model_len} = "
            f"{wanted:,.0f} tokens，"
            f"超过 KV cache 的 {plan.kv_cache_tokens:,} tokens：请求都很长时最多只能同时跑 "
            f"{plan.max_concurrency:.1f} 条，其余会排队或被抢占（preemption）。"
        )
    if not config.enable_chunked_prefill and plan.max_num_batched_tokens < plan.max_model_len:
        found.append(
            f"关闭 chunked prefill 时 max_num_batched_tokens ({plan.max_num_batched_tokens}) 小于 "
            f"max_model_len ({plan.max_model_len})：vLLM 会拒绝启动。"
        )
    return found


def vllm_launch(
    config_path: str | Path, gpu: GPUSpec | str, *, host: str = "0.0.0.0", port: int = 8000
) -> VllmLaunch:
    """Both command lines for ``config_path`` and the warnings for ``gpu``."""
    config = EngineConfig.from_yaml(config_path)
    options = read_options(config_path)
    plan = plan_for(config, gpu)
    return VllmLaunch(
        serve_command(options, host=host, port=port),
        api_server_command(config_path, host=host, port=port),
        tuple(fit_warnings(config, plan)),
        plan,
    )
