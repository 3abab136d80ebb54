"""Engine configuration with vLLM's names and defaults (notebook 05 §2 "配置 A 与配置 B").

``EngineConfig.from_yaml`` reads the file a real ``vllm serve --config file.yaml`` reads: keys with dashes
or underscores, the ``model`` key as a preset name or Hugging Face id. vLLM options the simulator does not
model (``host``, ``port``, ``disable_log_stats``, ...) are accepted and listed in ``not_simulated``; an option
vLLM 0.32.0 no longer has (``swap_space``, the partial-prefill options, ``disable_log_requests``, ...:
``REMOVED_KEYS``) is refused, because the real launch stops on it; a key that is not a vLLM option at all is
an error with a did-you-mean, because a typo in a real launch silently changes nothing. A boolean is
switched off as vLLM's command line does it, ``no-<option>: true``: vLLM 0.32.0's ``vllm serve --config``
turns a config file's ``true`` into ``--<option>`` and drops ``false`` (``FlexibleArgumentParser.
load_config_file``, ``vllm/utils/argparse_utils.py``, looks for ``--no-<key>`` among the options of the top
parser, which has none of ``serve``'s; data/vllm/FACTS.md §9), so a file that writes ``false`` is refused
with that fix. ``tests/vllm/test_facts.py`` checks all three lists against the installed vLLM's parser.
"""
from __future__ import annotations

import dataclasses
import difflib
import logging
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from helpers.engine.speculative import SpeculativeConfig
from helpers.hardware import GPUSpec
from helpers.kvcache.batch_defaults import vllm_batch_defaults
from helpers.kvcache.capacity import DEFAULT_GPU_MEMORY_UTILIZATION
from helpers.vllm_version import VLLM_VERSION

logger = logging.getLogger("helpers.engine")

SCHEDULING_POLICIES = ("continuous", "static")
# vLLM --dtype -> weight bytes dtype in helpers.kvcache.DTYPE_BYTES
_DTYPES = {"auto": "fp16", "half": "fp16", "float16": "fp16", "fp16": "fp16", "bfloat16": "bf16",
           "bf16": "bf16", "float": "fp32", "float32": "fp32", "fp32": "fp32"}
_KV_DTYPES = {"fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "fp8_inc": "fp8"}
# vLLM --quantization -> stored weight format: AWQ/GPTQ checkpoints are almost always 4-bit with group-128
# scales (helpers.kvcache.WEIGHT_FORMATS counts them); the others as ideal dtypes (their scales ignored)
_QUANTIZATION = {"awq": "awq-int4", "awq_marlin": "awq-int4", "gptq": "gptq-int4", "gptq_marlin": "gptq-int4",
                 "marlin": "int4", "bitsandbytes": "int4", "fp8": "fp8", "compressed-tensors": "int8",
                 "experts_int8": "int8"}
# Real `vllm serve` options (vLLM 0.32.0) accepted in a config file but not modelled by the simulator.
NOT_SIMULATED_KEYS = frozenset("""
host port uvicorn_log_level api_key allowed_origins allowed_methods allowed_headers ssl_keyfile ssl_certfile
root_path middleware response_role chat_template chat_template_content_format enable_auto_tool_choice
tool_call_parser reasoning_parser lora_modules return_tokens_as_token_ids
tokenizer tokenizer_mode revision code_revision tokenizer_revision trust_remote_code download_dir load_format
config_format seed cpu_offload_gb pipeline_parallel_size data_parallel_size distributed_executor_backend
enforce_eager disable_custom_all_reduce disable_log_stats
enable_log_requests max_logprobs generation_config override_generation_config
enable_lora max_loras max_lora_rank max_cpu_loras hf_overrides compilation_config
kv_transfer_config long_prefill_token_threshold limit_mm_per_prompt
enable_expert_parallel disable_sliding_window max_num_queued_tokens
max_parallel_loading_workers enable_prompt_tokens_details enable_per_request_metrics
enable_server_load_tracking
performance_mode api_server_count
""".split())
# Options older vLLM releases had and vLLM 0.32.0's `vllm serve` refuses ("unrecognized arguments"): a config
# file with one of them does not start (swap_space: removed by vLLM PR #36216; the partial-prefill options and
# disable_log_requests: gone by 0.32.0, FACTS.md §4).
REMOVED_KEYS = frozenset("""
swap_space max_num_partial_prefills max_long_partial_prefills disable_log_requests calculate_kv_scales
block_allocator disable_frontend_multiprocessing guided_decoding_backend max_seq_len_to_capture
num_lookahead_slots num_scheduler_steps preemption_mode prompt_adapters rope_scaling rope_theta
scheduler_delay_factor use_v2_block_manager
""".split())


@dataclass(frozen=True)
class EngineConfig:
    """vLLM engine arguments the simulator models, with vLLM's defaults (recent v1 releases).

    ``scheduling_policy`` "continuous" is vLLM's FCFS iteration-level scheduler ("fcfs" is accepted as
    an alias); "static" is the traditional static-batching baseline vLLM does not have.
    ``max_num_seqs`` / ``max_num_batched_tokens`` left as None take vLLM 0.32.0's defaults for the GPU
    the engine runs on, as ``vllm serve`` picks them (``for_gpu``; helpers/kvcache/batch_defaults.py): 2048
    tokens and 256 sequences on an A100 or any GPU under 70 GiB, 8192 and 1024 on larger ones, 16384 and
    1024 from 160 GiB. ``max_num_queued_reqs`` is vLLM's admission control (``SchedulerConfig``,
    vllm/config/scheduler.py): at most that many requests in flight (waiting + running); the mock answers
    the next one HTTP 503 with vLLM's error body (``helpers.server.errors.queue_overflow``). None: no cap.
    ``tensor_parallel_size`` is simulated as ``plan_capacity`` splits memory and ``helpers.roofline`` prices
    it: N× FLOPs and bandwidth plus two all-reduces per layer. ``speculative_config`` takes vLLM's dict (or
    its JSON) with the simulator-only keys ``acceptance_rate`` (required), ``draft_cost_ratio``,
    ``acceptance_seed`` (``helpers.engine.speculative``), or a ``SpeculativeConfig``; continuous batching
    only. ``not_simulated`` lists accepted vLLM options that change nothing here.
    """

    model: str = "llama-2-13b"
    served_model_name: str | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int = 16
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION  # 0.92, vLLM 0.32.0
    max_model_len: int | None = None
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True
    dtype: str = "fp16"
    kv_cache_dtype: str = "auto"
    quantization: str | None = None
    scheduling_policy: str = "continuous"
    tensor_parallel_size: int = 1
    num_gpu_blocks_override: int | None = None
    max_num_queued_reqs: int | None = None
    speculative_config: SpeculativeConfig | None = None
    not_simulated: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.scheduling_policy == "fcfs":
            object.__setattr__(self, "scheduling_policy", "continuous")
        if self.scheduling_policy not in SCHEDULING_POLICIES:
            raise ValueError(f"scheduling_policy must be one of {SCHEDULING_POLICIES} (or vLLM's 'fcfs'), "
                             f"got {self.scheduling_policy!r}")
        for name in ("max_num_seqs", "max_num_batched_tokens", "block_size", "tensor_parallel_size"):
            if getattr(self, name) is not None and int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError("gpu_memory_utilization is a fraction in (0, 1], "
                             f"got {self.gpu_memory_utilization}")
        if self.max_num_queued_reqs is not None and int(self.max_num_queued_reqs) < 0:
            raise ValueError(f"max_num_queued_reqs must be >= 0 (vLLM: Field(ge=0)), "
                             f"got {self.max_num_queued_reqs}")
        if self.max_model_len is not None and self.max_model_len < 1:
            raise ValueError(f"max_model_len must be >= 1, got {self.max_model_len}")
        if self.speculative_config is not None and not isinstance(self.speculative_config, SpeculativeConfig):
            spec = SpeculativeConfig.from_dict(self.speculative_config)  # vLLM's dict, or its JSON
            object.__setattr__(self, "speculative_config", spec)
        if self.speculative_config is not None and self.scheduling_policy == "static":
            raise ValueError("speculative decoding is simulated with continuous batching only: drop "
                             "speculative_config or use scheduling_policy 'continuous'")
        self.weight_dtype  # noqa: B018  (validates dtype and quantization)
        self.kv_dtype  # noqa: B018

    @property
    def weight_dtype(self) -> str:
        """Dtype of the stored weights: the quantization's if any, else ``dtype``."""
        if self.quantization is not None:
            if self.quantization not in _QUANTIZATION:
                raise ValueError(f"quantization {self.quantization!r} is not simulated; choose one of "
                                 f"{', '.join(sorted(_QUANTIZATION))} or leave it unset")
            return _QUANTIZATION[self.quantization]
        if self.dtype not in _DTYPES:
            raise ValueError(f"dtype {self.dtype!r} unknown; choose one of {', '.join(sorted(_DTYPES))}")
        return _DTYPES[self.dtype]

    @property
    def kv_dtype(self) -> str:
        """Dtype of the KV cache: ``kv_cache_dtype`` or, for "auto", the model's compute dtype."""
        if self.kv_cache_dtype == "auto":
            return _DTYPES.get(self.dtype, "fp16")
        if self.kv_cache_dtype not in _KV_DTYPES and self.kv_cache_dtype not in _DTYPES:
            raise ValueError(f"kv_cache_dtype {self.kv_cache_dtype!r} unknown; "
                             "use auto, fp8, fp8_e4m3 or fp8_e5m2")
        return _KV_DTYPES.get(self.kv_cache_dtype) or _DTYPES[self.kv_cache_dtype]

    @classmethod
    def from_dict(cls, options: dict[str, Any], source: str = "config") -> EngineConfig:
        """Build from vLLM option names (dashes or underscores); see the module docstring for the rules."""
        known = {f.name for f in fields(cls)} - {"not_simulated"}
        values: dict[str, Any] = {}
        ignored: list[tuple[str, Any]] = []
        for raw_key, value in options.items():
            key = str(raw_key).strip().lstrip("-").replace("-", "_")
            if key.startswith("no_") and isinstance(getattr(cls, key[3:], None), bool):
                if value is not True:
                    raise ValueError(f"{source}: {raw_key!r} takes true (it switches {key[3:]!r} off), "
                                     f"got {value!r}")
                if key[3:] in options or key[3:].replace("_", "-") in options:
                    raise ValueError(f"{source}: both {key[3:]!r} and {raw_key!r} are given; keep one")
                key, value = key[3:], False
            if key in known:
                values[key] = value
            elif key in REMOVED_KEYS:
                raise ValueError(f"{source}: {raw_key!r} is not an option of vLLM {VLLM_VERSION} (removed "
                                 "from `vllm serve`; a real launch stops with 'unrecognized arguments'): "
                                 "delete it")
            elif key in NOT_SIMULATED_KEYS:
                ignored.append((key, value))
            else:
                close = difflib.get_close_matches(key, sorted(known | NOT_SIMULATED_KEYS), n=1, cutoff=0.6)
                hint = f"; did you mean {close[0]!r}?" if close else "; it is not a vLLM engine option"
                raise ValueError(f"{source}: unknown option {raw_key!r}{hint}")
        if isinstance(values.get("served_model_name"), list):
            names = values["served_model_name"]
            values["served_model_name"] = names[0] if names else None
        config = cls(**values, not_simulated=tuple(ignored))
        if ignored:
            logger.info("%s: accepted but not simulated: %s", source, ", ".join(k for k, _ in ignored))
        return config

    @classmethod
    def from_yaml(cls, path: str | Path) -> EngineConfig:
        """Read a ``vllm serve --config`` YAML file (the files in ``data/vllm/``)."""
        import yaml

        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"no such config file: {path} (the course's are in data/vllm/)")
        if not path.is_file():
            raise ValueError(f"{path} is a folder, not a config file (e.g. data/vllm/config_b.yaml)")
        try:
            options = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (UnicodeDecodeError, yaml.YAMLError) as exc:
            where = getattr(exc, "problem_mark", None)
            line = f" (line {where.line + 1})" if where is not None else ""
            raise ValueError(f"{path} is not a YAML config file{line}: a vLLM config is lines of "
                             "`option: value`, like data/vllm/config_b.yaml") from None
        if not isinstance(options, dict):
            raise ValueError(f"{path}: a vLLM config file is a mapping of option: value, "
                             f"got {type(options).__name__}")
        dropped = [str(k) for k, v in options.items() if v is False]
        if dropped:
            fixes = ", ".join(f"`no-{k.strip().lstrip('-').replace('_', '-')}: true`" for k in dropped)
            raise ValueError(f"{path.name}: `{dropped[0]}: false` would be ignored by `vllm serve --config` "
                             f"(vLLM {VLLM_VERSION} passes only true booleans on, "
                             "vllm/utils/argparse_utils.py), "
                             f"leaving the default on; write {fixes} instead, or leave a default alone")
        return cls.from_dict(options, source=path.name)

    def for_gpu(self, gpu: GPUSpec | str, max_model_len: int | None = None, *,
                usage_context: str = "openai") -> EngineConfig:
        """This config with ``max_num_seqs`` / ``max_num_batched_tokens`` filled in where None, as vLLM
        0.32.0 defaults them on ``gpu`` (``vllm_batch_defaults``; ``usage_context`` "openai" is
        ``vllm serve``, "llm" the offline ``LLM`` class), for a context of ``max_model_len`` (default:
        this config's, else the model's)."""
        if self.max_num_seqs is not None and self.max_num_batched_tokens is not None:
            return self
        if max_model_len is None:
            from helpers.models import load_model

            max_model_len = self.max_model_len or load_model(self.model).max_position_embeddings
        limits = vllm_batch_defaults(gpu, usage_context, max_model_len,
                                     enable_chunked_prefill=self.enable_chunked_prefill,
                                     max_num_batched_tokens=self.max_num_batched_tokens,
                                     max_num_seqs=self.max_num_seqs)
        return self.replace(max_num_seqs=limits.max_num_seqs,
                            max_num_batched_tokens=limits.max_num_batched_tokens)

    def batch_limits(self) -> tuple[int, int]:
        """(``max_num_seqs``, ``max_num_batched_tokens``) of a config whose limits are set (``for_gpu`` fills
        them in; ``LLMEngine`` does it); ValueError if one is still None."""
        if self.max_num_seqs is None or self.max_num_batched_tokens is None:
            raise ValueError("max_num_seqs and max_num_batched_tokens are unset: take config.for_gpu(gpu) "
                             "(LLMEngine does), or set both")
        return self.max_num_seqs, self.max_num_batched_tokens

    def replace(self, **changes: Any) -> EngineConfig:
        """A copy with some options changed (e.g. ``config.replace(max_num_seqs=1)``)."""
        return dataclasses.replace(self, **changes)
