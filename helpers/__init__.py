"""Inference Lab toolkit: the real logic behind the course notebooks.

Public names are imported lazily, so ``import helpers`` does no work (no file
reads, no matplotlib, no server). Layers, from pure math up to I/O:
models, hardware, kvcache, roofline, engine, toy | server, client, plots, widgets.
"""
from __future__ import annotations

import importlib
from typing import Any

# public name -> submodule that defines it
_EXPORTS: dict[str, str] = {}


def _export(module: str, *names: str) -> None:
    for name in names:
        _EXPORTS[name] = module


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'helpers' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"helpers.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
_export("toy.config", "ToyConfig", "toy_preset", "width_sweep")
_export("toy.generate", "ToyModel", "Generation", "random_prompt")
_export("toy.counts", "ToyStepCost", "toy_step_cost", "toy_generation_cost", "growth_exponent")
_export("toy.probe", "copy_bandwidth_bytes_per_s", "matmul_flops_per_s")
_export("toy.measure", "PhaseThroughput", "DecodeTiming", "phase_throughput", "decode_timing",
        "batch_decode_timings", "fastest_generation")
_export("plots.toy", "plot_step_latency", "plot_generation_cost", "plot_phase_throughput",
        "plot_batch_decode", "plot_roofline", "plot_decode_prediction")
_export("client.settings", "Settings", "load_settings", "mask_secret")
_export("client.urls", "normalize_base_url", "UrlFix")
_export("client.proxies", "proxy_variables", "bypass_proxy_for_loopback")
_export("client.factory", "make_client", "make_async_client")
_export("client.metrics", "RequestMetrics", "NoTokensError", "ChunkEvent", "metrics_from_trace")
_export("client.stream", "stream_once", "astream_once")
_export("client.naive", "NaiveMetrics", "naive_measure", "naive_p99")
_export("client.diagnose", "diagnose", "Diagnosis")
_export("client.check", "check_settings", "SettingsCheck")
_export("models", "ModelSpec", "ParamLayout", "load_model", "list_models", "attention_kind")
_export("hardware", "GPUSpec", "load_gpu", "list_gpus")
_export("kvcache", "DTYPE_BYTES", "dtype_bytes", "kv_bytes_per_token", "kv_cache_bytes", "weights_bytes",
        "format_bytes", "compare_attention", "AttentionVariant", "WEIGHT_FORMATS", "WeightFormat",
        "weight_bytes_per_param", "embedding_params")
_export("capacity", "plan_capacity", "CapacityPlan", "activation_peak_bytes", "NON_TORCH_BYTES")
_export("params", "count_params")
_export("widgets.kv", "kv_calculator", "capacity_panel", "KVEstimate")
_export("plots.kv", "plot_kv_vs_seq_len", "plot_kv_vs_batch", "plot_kv_savings")
_export("server.launcher", "start_mock_server", "spawn_mock_server", "MockServer")
_export("server.app", "create_app")
_export("server.tokenizer", "count_tokens", "encode_chat")
_export("server.textgen", "text_of_length")
_export("roofline", "step_time", "StepCost", "cost_model", "decode_tokens_per_s_ceiling",
        "prefill_time_floor_s", "decode_compute_bound_batch_size")
_export("engine", "EngineConfig", "LLMEngine", "Request", "RequestRecord", "StepOutput", "EngineStats")
_export("engine.simulate", "simulate", "simulate_requests", "SimulationResult")
_export("batch_defaults", "vllm_batch_defaults", "BatchDefaults")
_export("metrics", "summarize")
_export("fidelity", "Efficiency", "load_published", "compare_with_published", "calibrate_efficiency",
        "fidelity_split", "fit_rows", "error_table", "error_summary", "per_gpu_efficiency")
_export("plots.fidelity", "plot_sim_vs_published")
_export("client.backend", "get_backend", "measuring_target", "what_if_target", "targets_ready", "Target")
_export("bench", "BenchPrompt", "BenchResult", "RequestResult", "FewSamplesWarning", "synthetic_prompts",
        "prompts_from_log", "make_prompts", "run_benchmark", "arun_benchmark", "sweep", "asweep",
        "load_jsonl", "summarize_results", "to_simulated", "arrival_times_s", "replay_benchmark",
        "replay_sweep", "engine_clock_summary")
_export("bench.goodput", "parse_goodput", "good_requests", "goodput_summary", "with_goodput")
_export("bench.slo", "SLO", "SLOSearch", "SimWorkload", "search_slo", "simulated_levels", "http_levels",
        "backlog_growth")
_export("cost", "GPUPrice", "load_prices", "gpu_price", "usd_per_million_tokens", "cost_row", "pareto_front")
_export("plots.slo", "plot_goodput_knee", "plot_pareto")
_export("bench.arrivals", "ramp_up_arrivals", "load_trace", "trace_workload", "chat_sessions")
_export("bench.sessions", "ChatSession", "chat_scripts", "run_sessions", "arun_sessions", "turn_table",
        "replay_sessions")
_export("bench.report", "report_html", "write_report")
_export("plots.runs", "plot_latency_distributions", "plot_request_timeline")
_export("plots.bench", "plot_throughput_vs_concurrency", "plot_ttft_vs_concurrency",
        "plot_latency_throughput")
_export("vllm_command", "vllm_launch", "VllmLaunch", "serve_command", "api_server_command")
_export("streaming", "unique_prompt", "user_message", "compare_with_naive", "ttft_vs_prompt_length",
        "prefill_fit", "tps_vs_max_tokens", "engine_prefill_ms", "measurement_overhead")
_export("plots.streaming", "plot_stream_timeline", "plot_ttft_vs_prompt", "plot_tps_vs_max_tokens",
        "plot_ttft_bars")
_export("troubleshoot", "try_and_diagnose", "temporary_env", "closed_port_url", "first_request",
        "FirstRequest", "FirstRequestFailed")
_export("environment", "PackageCheck", "check_packages", "read_requirements", "python_ok", "package_summary")
_export("engine.trace", "trace_requests", "timeline", "block_snapshot", "Trace", "BlockSnapshot")
_export("engine.sweep", "concurrency_sweep", "decode_tokens_per_s", "speculative_gain_sweep")
_export("plots.engine", "plot_timeline", "plot_block_table", "plot_prefix_hit_rate", "plot_itl_tail",
        "plot_kv_pressure", "plot_concurrency_sweep")
_export("client.prom", "Sample", "parse_metrics", "metric_value", "vllm_snapshot", "scrape_metrics",
        "MetricsPoller")
_export("config_ab", "article_table", "article_sweep", "as_article_table", "compare_with_article",
        "feature_ladder")
_export("request_log", "load_request_log", "length_percentiles", "prefix_hit_rate_bound", "log_prompts")
_export("sizing", "kv_demand_tokens", "size_deployment", "DeploymentSizing", "gpu_options")
_export("plots.capacity", "plot_length_distribution", "plot_metrics_timeline")
_export("toy.quant", "QuantizedMatrix", "quantize_matrix", "quantize_weights", "weight_bytes_per_step",
        "dequantized_bytes_per_step", "round_fp8_e4m3", "round_kv", "QuantizedKVCache",
        "toy_kv_bytes_per_token")
_export("toy.quant_error", "QuantError", "quantization_error", "AttentionError", "kv_attention_error")
_export("toy.speculative", "SpeculativeGeneration", "speculative_generate", "truncated_draft",
        "SpeculativeTiming", "speculative_sweep", "with_quiet_layers")
_export("engine.speculative", "SpeculativeConfig", "SpeculativeStep", "expected_tokens_per_step",
        "speculative_step", "speculative_batch_sweep", "best_num_speculative_tokens")
_export("exercises.ex01", "check_decode_weight_bytes", "check_decode_ceiling", "check_batch_decode_gain")
_export("exercises.ex02", "check_kv_bytes_per_token", "check_batch_kv_gib", "check_requests_that_fit",
        "PHI4_MINI_CONFIG")
_export("exercises.ex03", "check_gqa_saving", "check_mla_bytes_per_token", "check_sliding_window_gib")
_export("exercises.ex04", "check_ttft_from_chunks", "check_tpot", "check_p99", "check_which_ttft_is_right",
        "STREAM_CHUNKS", "TTFT_SAMPLES_MS")
_export("exercises.ex05", "check_blocks_per_request", "check_prefix_hit_rate", "check_chunked_prefill_steps")
_export("exercises.ex06", "check_queued_ttft_p99", "check_little_law", "check_config_b_speedup")
_export("exercises.ex07", "check_base_url", "check_wrong_key_status", "check_finish_reason",
        "check_connection_refused")
_export("exercises.ex08", "check_log_prompt_p99", "check_metrics_hit_rate", "check_kv_demand",
        "METRICS_SAMPLE")
_export("exercises.ex09", "check_goodput", "check_usd_per_million_output", "check_slo_search_winner",
        "GOODPUT_REQUESTS", "SEARCH_PROBES")
_export("exercises.ex10", "check_awq_weight_gib", "check_expected_tokens_per_step", "check_fits_4090")
_export("exercises", "CheckResult", "notebook_exercises")
