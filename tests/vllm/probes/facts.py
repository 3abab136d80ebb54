"""Read the facts the course states about vLLM out of the INSTALLED vLLM; print them as one JSON object.

Runs in the vLLM venv (``$INFERENCE_LAB_VLLM_VENV/bin/python tests/vllm/probes/facts.py``, PYTHONPATH = the
repository), one process (importing vLLM takes ~15 s). ``tests/vllm/test_facts.py`` compares the output with
what the course says and computes. Nothing here restates a vLLM value: each entry is what vLLM's own code
returns, parses, prints or registers. Where a function asks the device (memory, name), the device is faked
with the numbers of ``data/gpus.csv`` and the rest of vLLM's code path runs as it is.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import io
import json
import logging
import re
import sys
import tempfile
import typing
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

from helpers.hardware import list_gpus, load_gpu

MAX_MODEL_LEN = 4096  # a Llama-2 context, the course's configs A and B
# EngineArgs resolves `model` in __post_init__; an existing folder stays local (no hub lookup)
_LOCAL_DIR = str(Path(__file__).resolve().parent)


def _literal_values(tp: object) -> list[str]:
    """Every string of a (nested) ``Literal[...]``."""
    out: list[str] = []
    for arg in typing.get_args(tp):
        out.extend(_literal_values(arg) if typing.get_args(arg) else [arg])
    return out


@contextlib.contextmanager
def _fake_gpu(memory_bytes: int, name: str):
    """``current_platform`` as a CUDA GPU of that total memory and NVML name (vLLM asks exactly these)."""
    from vllm.engine import arg_utils

    platform = arg_utils.current_platform
    with mock.patch.object(platform, "get_device_total_memory", lambda *a, **k: memory_bytes), \
            mock.patch.object(platform, "get_device_name", lambda *a, **k: name), \
            mock.patch.object(platform, "is_cpu", lambda *a, **k: False), \
            mock.patch.object(platform, "is_tpu", lambda *a, **k: False):
        yield


def batch_defaults() -> dict:
    """``EngineArgs.get_batch_defaults`` and the defaulting that follows it, per GPU of data/gpus.csv."""
    from vllm.engine.arg_utils import EngineArgs
    from vllm.usage.usage_lib import UsageContext

    contexts = {"openai": UsageContext.OPENAI_API_SERVER, "llm": UsageContext.LLM_CLASS}
    out: dict[str, dict] = {}
    for gpu_name in list_gpus():
        gpu = load_gpu(gpu_name)
        with _fake_gpu(gpu.memory_bytes, gpu.display_name):
            tokens, seqs = EngineArgs.get_batch_defaults(world_size=1)
            row: dict[str, object] = {
                "memory_bytes": gpu.memory_bytes, "device_name": gpu.display_name,
                "table": {k: [tokens[c], seqs[c]] for k, c in contexts.items()},
            }
            # the whole defaulting (_set_default_max_num_seqs_and_batched_tokens_args) for a few configs
            cases = {}
            for chunked in (True, False):
                for mode in ("balanced", "throughput"):
                    for context, usage in contexts.items():
                        args = EngineArgs(model=_LOCAL_DIR, enable_chunked_prefill=chunked,
                                          performance_mode=mode)  # a local path: no hub lookup
                        model_config = SimpleNamespace(max_model_len=MAX_MODEL_LEN, is_multimodal_model=False,
                                                       is_mm_prefix_lm=False)
                        args._set_default_max_num_seqs_and_batched_tokens_args(
                            usage, model_config, SimpleNamespace(use_batched_dp_moe=False))
                        cases[f"{context}/chunked={chunked}/{mode}"] = [args.max_num_batched_tokens,
                                                                      args.max_num_seqs]
            row["defaulted"] = cases
        out[gpu_name] = row
    return out


def kv_cache_log_line(num_tokens: int, max_model_len: int, concurrency: float) -> dict:
    """What ``update_kv_cache_capacity`` (vllm/v1/core/kv_cache_utils.py) logs, for a GPU and a CPU."""
    from vllm.v1.core import kv_cache_utils

    lines = {}
    for device_type in ("cuda", "cpu"):
        logged: list[str] = []
        config = SimpleNamespace(
            model_config=SimpleNamespace(max_model_len=max_model_len),
            cache_config=SimpleNamespace(),
            device_config=SimpleNamespace(device_type=device_type),
            attention_config=SimpleNamespace(hisparse_config=None),
        )
        def capture(msg: str, *args: object, _into: list[str] = logged, **kw: object) -> None:
            _into.append(msg % args)

        with mock.patch.object(kv_cache_utils, "get_kv_cache_capacity",
                               lambda *a: (num_tokens, concurrency)), \
                mock.patch.object(kv_cache_utils.logger, "info_once", capture):
            kv_cache_utils.update_kv_cache_capacity(config, None)
        lines[device_type] = logged
    return {"num_tokens": num_tokens, "max_model_len": max_model_len, "concurrency": concurrency,
            "lines": lines}


def serve_parser() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The parsers of ``vllm serve`` as ``vllm/entrypoints/cli/main.py`` builds them (root, serve)."""
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    root = FlexibleArgumentParser(description="vLLM CLI")
    subparsers = root.add_subparsers(required=False, dest="subparser")
    serve = ServeSubcommand().subparser_init(subparsers)
    return root, serve


def serve_flags() -> dict:
    root, serve = serve_parser()
    options = sorted({s for action in serve._actions for s in action.option_strings})
    defaults = {a.dest: a.default for a in serve._actions if a.option_strings}
    wanted = ("gpu_memory_utilization", "block_size", "enable_prefix_caching", "enable_chunked_prefill",
              "max_num_seqs", "max_num_batched_tokens", "max_num_queued_reqs", "max_num_queued_tokens",
              "enable_prompt_tokens_details", "enable_per_request_metrics", "api_server_count",
              "kv_cache_dtype", "max_model_len", "enable_log_requests")
    from vllm.entrypoints.launchers import cli_args

    where = {flag: Path(inspect.getsourcefile(cli_args)).relative_to(_VLLM_ROOT.parent).as_posix()
             for flag in ("--api-server-count", "--enable-prompt-tokens-details")
             if flag in inspect.getsource(cli_args)}
    # a `--config` YAML through the root parser, as `vllm serve --config f.yaml` runs it
    config_bools = {}
    for key in ("enable_prefix_caching", "enable-prefix-caching", "no-enable-prefix-caching"):
        for value in (True, False):
            with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
                f.write(f"{key}: {str(value).lower()}\n")
            parsed = root.parse_args(["serve", "some-model", "--config", f.name])
            config_bools[f"{key}: {str(value).lower()}"] = parsed.enable_prefix_caching
            Path(f.name).unlink()
    return {"options": options, "defaults": {k: _jsonable(defaults.get(k)) for k in wanted},
            "defined_in": where, "config_yaml_booleans": config_bools}


def parse_serve_commands(commands: list[list[str]]) -> list[dict]:
    """Each ``vllm serve ARGS`` through vLLM's own parser: the values it ends with, or its error."""
    root, _ = serve_parser()
    out = []
    for argv in commands:
        err = []
        try:
            def error(self: object, message: str, _into: list[str] = err) -> None:
                _into.append(message)
                sys.exit(2)

            with mock.patch.object(argparse.ArgumentParser, "error", error), \
                    contextlib.redirect_stderr(io.StringIO()):
                ns = root.parse_args(["serve", *argv])
            out.append({"ok": True, "values": {k: _jsonable(v) for k, v in sorted(vars(ns).items())}})
        except SystemExit:
            out.append({"ok": False, "error": err[0] if err else "exit"})
        except Exception as exc:  # noqa: BLE001 - vLLM's own validation errors
            out.append({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
    return out


def _jsonable(value: object) -> object:
    return value if isinstance(value, (int, float, str, bool, type(None))) else repr(value)


def _field_default(f: object) -> object:
    """A (pydantic) dataclass field's default: ``Field(default=...)`` is a FieldInfo inside ``f.default``."""
    default = getattr(f, "default", None)
    return _jsonable(getattr(default, "default", default))


def engine_defaults() -> dict:
    import dataclasses
    import os

    from vllm.config.cache import CacheConfig
    from vllm.config.scheduler import SchedulerConfig

    os.environ.pop("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", None)
    import vllm.envs as envs

    cache = {f.name: _field_default(f) for f in dataclasses.fields(CacheConfig)}
    gmu = cache["gpu_memory_utilization"]
    sched = {f.name: _field_default(f) for f in dataclasses.fields(SchedulerConfig)}
    return {
        "gpu_memory_utilization": gmu,
        "block_size": cache["block_size"],
        "enable_prefix_caching": cache.get("enable_prefix_caching"),
        "estimate_cudagraphs": envs.VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS,
        "max_num_queued_reqs": _jsonable(sched.get("max_num_queued_reqs", "absent")),
        "max_num_queued_tokens": _jsonable(sched.get("max_num_queued_tokens", "absent")),
        "scheduler_fields": sorted(sched),
        "default_max_num_batched_tokens": SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS,
        "default_max_num_seqs": SchedulerConfig.DEFAULT_MAX_NUM_SEQS,
    }


def admission() -> dict:
    """The body and status vLLM's API server answers when a queue cap rejects a request."""
    from vllm import exceptions
    from vllm.entrypoints.serve.exception_handling.error_response import create_error_response

    out = {}
    for name in ("QueueOverflowError", "MaxQueuedTokensError"):
        exc = getattr(exceptions, name)()
        out[name] = {"status": int(exc.http_status), "body": create_error_response(exc).model_dump()}
    return out


def speculative_methods(k: int = 4) -> dict:
    """The methods ``--speculative-config`` accepts, and the KV lookahead slots vLLM reserves for each
    (``VllmConfig.num_lookahead_tokens`` on a config with that method, after vLLM's *_mtp rename)."""
    from vllm.config.speculative import MTPModelTypes, SpeculativeConfig, SpeculativeMethod
    from vllm.config.vllm import VllmConfig

    methods = sorted(set(_literal_values(SpeculativeMethod)))
    mtp = set(_literal_values(MTPModelTypes))
    slots = {}
    for method in methods:
        spec = SimpleNamespace(method="mtp" if method in mtp else method,
                               draft_model_config=SimpleNamespace(hf_config=SimpleNamespace()))
        for name in ("use_dflash", "use_dspark", "use_eagle", "uses_draft_model"):
            fn = getattr(SpeculativeConfig, name)
            setattr(spec, name, (lambda f, s: lambda: f(s))(fn, spec))
        slots[method] = VllmConfig.num_lookahead_tokens.fget(
            SimpleNamespace(speculative_config=spec, num_speculative_tokens=k))
    return {"methods": methods, "k": k, "lookahead_slots": slots,
            "rejection_sample_methods": _literal_values(
                __import__("vllm.config.speculative", fromlist=["x"]).RejectionSampleMethod)}


def quantization() -> dict:
    from vllm.model_executor.layers import quantization as q

    methods = list(q.QUANTIZATION_METHODS)
    return {"methods": methods,
            "config_class": {m: q.get_quantization_config(m).__name__
                             for m in ("awq", "awq_marlin", "gptq", "gptq_marlin") if m in methods}}


def metric_names() -> dict:
    """Every ``vllm:`` metric registered by vLLM's metrics code, with its kind (counter/gauge/histogram)."""
    files = ("v1/metrics/loggers.py", "v1/spec_decode/metrics.py")
    found: dict[str, str] = {}
    for rel in files:
        text = (_VLLM_ROOT / rel).read_text()
        for kind, name in re.findall(r"_(counter|gauge|histogram)_cls\(\s*name=\"(vllm:[a-z0-9_]+)\"", text):
            found[name] = kind
        # info metrics are gauges fixed at 1 (log_metrics_info: `name = "vllm:cache_config_info"`)
        for name in re.findall(r"name = \"(vllm:[a-z0-9_]+_info)\"", text):
            found.setdefault(name, "gauge")
        # spec-decode counters are declared as (name, doc) pairs then built with _counter_cls
        for name in re.findall(r"\(\s*\"(vllm:spec_decode_[a-z0-9_]+)\",\s*\"", text):
            found.setdefault(name, "counter")
    return {"files": list(files), "metrics": dict(sorted(found.items()))}


class _Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def bench_chat_stream(chunks: list[tuple[float, dict]]) -> dict:
    """``async_request_openai_chat_completions`` on a scripted SSE stream: the message at t arrives at t."""
    from vllm.benchmarks.lib import endpoint_request_func as erf

    clock = _Clock()

    class _Content:
        async def iter_any(self):
            for t, payload in chunks:
                clock.now = t
                yield f"data: {json.dumps(payload)}\n\n".encode()
            yield b"data: [DONE]\n\n"

    class _Response:
        status = 200
        reason = "OK"
        content = _Content()

        async def __aenter__(self):
            return self

        async def __aexit__(self, *exc):
            return False

    class _Session:
        def post(self, **kwargs):
            return _Response()

    request = erf.RequestFuncInput(prompt="hi", api_url="http://127.0.0.1:1/v1/chat/completions",
                                   prompt_len=1, output_len=8, model="m")
    with mock.patch.object(erf.time, "perf_counter", clock):
        output = asyncio.run(erf.async_request_openai_chat_completions(request, _Session()))
    return {"success": output.success, "ttft": output.ttft, "itl": list(output.itl),
            "latency": output.latency, "output_tokens": output.output_tokens}


def bench_metrics(rows: list[dict], duration_s: float, goodput: dict[str, float]) -> dict:
    """``calculate_metrics`` (vllm/benchmarks/serve.py) on finished requests given as ttft/latency/tokens."""
    from vllm.benchmarks import serve
    from vllm.benchmarks.lib.endpoint_request_func import RequestFuncOutput

    outputs = []
    for i, r in enumerate(rows):
        out = RequestFuncOutput(success=r.get("success", True), latency=r["latency"],
                                output_tokens=r["output_tokens"], ttft=r["ttft"], prompt_len=10,
                                itl=r.get("itl", []))
        out.start_time = float(i)
        outputs.append(out)
    with contextlib.redirect_stdout(sys.stderr):
        metrics, _ = serve.calculate_metrics(input_requests=[], outputs=outputs, dur_s=duration_s,
                                             tokenizer=None, selected_percentiles=[50.0, 99.0],
                                             goodput_config_dict=goodput)
    keys = ("completed", "request_goodput", "request_throughput", "mean_ttft_ms", "mean_tpot_ms",
            "mean_e2el_ms", "median_tpot_ms", "mean_itl_ms")
    return {k: float(getattr(metrics, k)) for k in keys}


def bench_sweep() -> dict:
    from vllm.benchmarks.sweep import cli
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    cli.add_cli_args(parser)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    options = {name: sorted({s for a in p._actions for s in a.option_strings})
               for name, p in sub.choices.items()}
    return {"subcommands": [c.parser_name for c, _ in cli.SUBCOMMANDS], "options": options,
            "modules": sorted(p.stem for p in (_VLLM_ROOT / "benchmarks" / "sweep").glob("*.py"))}


def bench_serve_options() -> list[str]:
    from vllm.benchmarks.serve import add_cli_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    return sorted({s for a in parser._actions for s in a.option_strings})


def gated_delta_net_shapes(config: dict) -> list:
    """vLLM's Gated DeltaNet state shapes for a config (one GPU, no speculation), as lists."""
    from vllm.model_executor.layers.mamba.mamba_utils import MambaStateShapeCalculator

    shapes = MambaStateShapeCalculator.gated_delta_net_state_shape(
        1, config["linear_num_key_heads"], config["linear_num_value_heads"], config["linear_key_head_dim"],
        config["linear_value_head_dim"], config["linear_conv_kernel_dim"])
    return [list(s) for s in shapes]


def hybrid_pool(spec: dict) -> dict:
    """vLLM's KV-pool layout of a Qwen3-Next-shaped hybrid: the block size and padded state page
    ``Platform._align_hybrid_block_size`` sets (the attention backend faked as one whose kernel blocks are
    multiples of 16, as FlashAttention's), the groups ``_get_kv_cache_groups_uniform_page_size`` forms and the
    concurrency ``get_max_concurrency_for_kv_cache_config`` gives ``num_blocks`` at ``max_model_len``, with
    prefix caching ("align") and without ("none")."""
    import torch
    from vllm.model_executor.models.qwen3_next import Qwen3NextForCausalLM
    from vllm.platforms.interface import Platform
    from vllm.v1.attention.backend import MultipleOf
    from vllm.v1.core import kv_cache_utils
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, MambaSpec

    class Backend:  # what _align_hybrid_block_size asks of the attention backend
        get_supported_kernel_block_sizes = staticmethod(lambda: [MultipleOf(16)])
        customize_spec = staticmethod(lambda attention_spec: attention_spec)
        get_name = staticmethod(lambda: "FLASH_ATTN-like")

    out: dict = {}
    for mode in ("align", "none"):
        cache = SimpleNamespace(cache_dtype="auto", block_size=spec["block_size"], mamba_cache_mode=mode,
                                mamba_block_size=None, mamba_page_size_padded=None, mamba_cache_dtype="auto",
                                mamba_ssm_cache_dtype="auto")
        model = SimpleNamespace(dtype=torch.bfloat16, use_mla=False, architecture="Qwen3NextForCausalLM",
                                get_num_kv_heads=lambda _parallel: spec["num_kv_heads"],
                                get_head_size=lambda: spec["head_dim"], max_model_len=spec["max_model_len"],
                                hf_text_config=SimpleNamespace(**spec["gdn"]))
        config = SimpleNamespace(cache_config=cache, model_config=model, speculative_config=None,
                                 parallel_config=SimpleNamespace(tensor_parallel_size=1,
                                                                 decode_context_parallel_size=1))
        with mock.patch("vllm.model_executor.models.ModelRegistry.resolve_model_cls",
                        return_value=(Qwen3NextForCausalLM, "Qwen3NextForCausalLM")), \
                mock.patch.object(Platform, "_find_non_ssm_backends", return_value=[Backend]), \
                mock.patch("vllm.config.vllm.set_current_vllm_config", lambda _c: contextlib.nullcontext()):
            Platform._align_hybrid_block_size(config, Backend)
        attention = FullAttentionSpec(block_size=cache.block_size, num_kv_heads=spec["num_kv_heads"],
                                      head_size=spec["head_dim"], dtype=torch.bfloat16)
        state = MambaSpec(shapes=Qwen3NextForCausalLM.get_mamba_state_shape_from_config(config),
                          dtypes=Qwen3NextForCausalLM.get_mamba_state_dtype_from_config(config),
                          block_size=cache.mamba_block_size or spec["max_model_len"],
                          page_size_padded=cache.mamba_page_size_padded, mamba_cache_mode=mode)
        layers = {f"model.layers.{i}.attn": attention if kind == "full_attention" else state
                  for i, kind in enumerate(spec["layer_types"])}
        groups = kv_cache_utils._get_kv_cache_groups_uniform_page_size(layers)
        kv_config = KVCacheConfig(num_blocks=spec["num_blocks"], kv_cache_tensors=[], kv_cache_groups=groups)
        out[mode] = {
            "block_size": cache.block_size, "page_bytes": attention.page_size_bytes,
            "state_bytes": state.real_page_size_bytes,
            "groups": [[type(g.kv_cache_spec).__name__, len(g.layer_names)] for g in groups],
            "max_concurrency": kv_cache_utils.get_max_concurrency_for_kv_cache_config(config, kv_config),
        }
    return out


def prompt_tokens_details() -> dict:
    from vllm.entrypoints.openai.chat_completion import serving

    make = serving._make_prompt_tokens_details
    out = {}
    for enabled in (False, True):
        for cached in (None, 0, 32):
            details = make(enabled, cached, None, None)
            out[f"enabled={enabled}/cached={cached}"] = None if details is None else details.model_dump()
    return out


def engine_core_polling() -> dict:
    """How the engine core waits for its worker (shm message queue): busy-polling with sched_yield for
    ``busy_loop_s`` after each read, only then sleeping on a socket."""
    import inspect

    from vllm.distributed.device_communicators import shm_broadcast

    condition = shm_broadcast.SpinCondition
    return {"busy_loop_s": inspect.signature(condition.__init__).parameters["busy_loop_s"].default,
            "yields": "sched_yield()" in inspect.getsource(condition.wait)}


def main() -> None:
    logging.disable(logging.WARNING)
    import vllm

    global _VLLM_ROOT
    _VLLM_ROOT = Path(vllm.__file__).parent
    spec = json.loads(sys.stdin.read() or "{}")
    result = {
        "version": vllm.__version__,
        "vllm_root": str(_VLLM_ROOT),
        "batch_defaults": batch_defaults(),
        "kv_cache_log": kv_cache_log_line(**spec.get("kv_log", {"num_tokens": 1048576, "max_model_len": 2048,
                                                                "concurrency": 512.0})),
        "serve": serve_flags(),
        "serve_commands": parse_serve_commands(spec.get("serve_commands", [])),
        "engine_defaults": engine_defaults(),
        "admission": admission(),
        "speculative_methods": speculative_methods(),
        "quantization": quantization(),
        "metrics": metric_names(),
        "bench_chat_stream": bench_chat_stream(spec["stream"]) if "stream" in spec else None,
        "bench_metrics": bench_metrics(**spec["metrics"]) if "metrics" in spec else None,
        "bench_serve_options": bench_serve_options(),
        "bench_sweep": bench_sweep(),
        "prompt_tokens_details": prompt_tokens_details(),
        "engine_core_polling": engine_core_polling(),
        "gated_delta_net": gated_delta_net_shapes(spec["gdn"]) if "gdn" in spec else None,
        "hybrid_pool": hybrid_pool(spec["hybrid_pool"]) if "hybrid_pool" in spec else None,
    }
    json.dump(result, sys.stdout)


_VLLM_ROOT = Path()

if __name__ == "__main__":
    main()
