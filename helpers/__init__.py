"""Inference Lab toolkit: the real logic behind the course notebooks.

Notebooks import the public names from here (``from helpers import plan_capacity``). Layers, from pure math
up to I/O (rules in pyproject.toml, checked by import-linter in the suite):
models, hardware, kvcache, roofline, cost, engine, toy, text | server, client, bench | plots, widgets |
lessons, cli.

``import helpers`` does no work: each public name is imported from its module on first use (PEP 562), so a
notebook that only needs the KV formula never loads matplotlib, the OpenAI SDK or the mock server. Type
checkers read the same names from the ``TYPE_CHECKING`` block below (explicit ``X as X`` re-exports): it
is there for laziness, not to hide a cycle. tests/test_public_api.py keeps the block and ``_EXPORTS``
equal, name for name.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from helpers.bench import (
        BenchPrompt as BenchPrompt,
        BenchResult as BenchResult,
        FewSamplesWarning as FewSamplesWarning,
        RequestResult as RequestResult,
        arrival_times_s as arrival_times_s,
        arun_benchmark as arun_benchmark,
        asweep as asweep,
        engine_clock_summary as engine_clock_summary,
        engine_prefill_s as engine_prefill_s,
        load_jsonl as load_jsonl,
        make_prompts as make_prompts,
        prompts_from_log as prompts_from_log,
        replay_benchmark as replay_benchmark,
        replay_sweep as replay_sweep,
        run_benchmark as run_benchmark,
        summarize_results as summarize_results,
        sweep as sweep,
        synthetic_prompts as synthetic_prompts,
        to_simulated as to_simulated,
    )
    from helpers.bench.arrivals import (
        chat_sessions as chat_sessions,
        load_trace as load_trace,
        ramp_up_arrivals as ramp_up_arrivals,
        trace_workload as trace_workload,
    )
    from helpers.bench.goodput import (
        good_requests as good_requests,
        goodput_summary as goodput_summary,
        parse_goodput as parse_goodput,
        with_goodput as with_goodput,
    )
    from helpers.bench.report import report_html as report_html, write_report as write_report
    from helpers.bench.sessions import (
        ChatSession as ChatSession,
        arun_sessions as arun_sessions,
        chat_scripts as chat_scripts,
        replay_sessions as replay_sessions,
        run_sessions as run_sessions,
        turn_table as turn_table,
    )
    from helpers.bench.slo import (
        SLO as SLO,
        SimWorkload as SimWorkload,
        SLOSearch as SLOSearch,
        backlog_growth as backlog_growth,
        http_levels as http_levels,
        search_slo as search_slo,
        simulated_levels as simulated_levels,
    )
    from helpers.client.backend import (
        Target as Target,
        get_backend as get_backend,
        measuring_target as measuring_target,
        targets_ready as targets_ready,
        what_if_target as what_if_target,
    )
    from helpers.client.check import SettingsCheck as SettingsCheck, check_settings as check_settings
    from helpers.client.diagnose import Diagnosis as Diagnosis, diagnose as diagnose
    from helpers.client.factory import make_async_client as make_async_client, make_client as make_client
    from helpers.client.latency import (
        ChunkEvent as ChunkEvent,
        NoTokensError as NoTokensError,
        RequestMetrics as RequestMetrics,
        metrics_from_trace as metrics_from_trace,
    )
    from helpers.client.naive import (
        NaiveMetrics as NaiveMetrics,
        naive_measure as naive_measure,
        naive_p99 as naive_p99,
    )
    from helpers.client.prom import (
        MetricsPoller as MetricsPoller,
        Sample as Sample,
        metric_value as metric_value,
        parse_metrics as parse_metrics,
        scrape_metrics as scrape_metrics,
        vllm_snapshot as vllm_snapshot,
    )
    from helpers.client.proxies import (
        bypass_proxy_for_loopback as bypass_proxy_for_loopback,
        proxy_variables as proxy_variables,
    )
    from helpers.client.settings import (
        Settings as Settings,
        load_settings as load_settings,
        mask_secret as mask_secret,
    )
    from helpers.client.stream import astream_once as astream_once, stream_once as stream_once
    from helpers.client.urls import UrlFix as UrlFix, normalize_base_url as normalize_base_url
    from helpers.cost import (
        GPUPrice as GPUPrice,
        cost_row as cost_row,
        gpu_price as gpu_price,
        load_prices as load_prices,
        offer_bases as offer_bases,
        pareto_front as pareto_front,
        price_spreads as price_spreads,
        price_table as price_table,
        usd_per_million_tokens as usd_per_million_tokens,
    )
    from helpers.engine import (
        EngineConfig as EngineConfig,
        EngineStats as EngineStats,
        LLMEngine as LLMEngine,
        Request as Request,
        RequestRecord as RequestRecord,
        StepOutput as StepOutput,
        kv_cache_log_line as kv_cache_log_line,
    )
    from helpers.engine.simulate import (
        SimulationResult as SimulationResult,
        simulate as simulate,
        simulate_requests as simulate_requests,
    )
    from helpers.engine.speculative import (
        SpeculativeConfig as SpeculativeConfig,
        SpeculativeStep as SpeculativeStep,
        best_num_speculative_tokens as best_num_speculative_tokens,
        expected_tokens_per_step as expected_tokens_per_step,
        speculative_batch_sweep as speculative_batch_sweep,
        speculative_step as speculative_step,
    )
    from helpers.engine.summary import summarize as summarize
    from helpers.engine.sweep import (
        concurrency_sweep as concurrency_sweep,
        decode_tokens_per_s as decode_tokens_per_s,
        speculative_gain_sweep as speculative_gain_sweep,
    )
    from helpers.engine.trace import (
        BlockSnapshot as BlockSnapshot,
        Trace as Trace,
        block_snapshot as block_snapshot,
        timeline as timeline,
        trace_requests as trace_requests,
    )
    from helpers.exercises import CheckResult as CheckResult, notebook_exercises as notebook_exercises
    from helpers.exercises.ex01 import (
        check_batch_decode_gain as check_batch_decode_gain,
        check_decode_ceiling as check_decode_ceiling,
        check_decode_weight_bytes as check_decode_weight_bytes,
    )
    from helpers.exercises.ex02 import (
        PHI4_MINI_CONFIG as PHI4_MINI_CONFIG,
        check_batch_kv_gib as check_batch_kv_gib,
        check_kv_bytes_per_token as check_kv_bytes_per_token,
        check_requests_that_fit as check_requests_that_fit,
    )
    from helpers.exercises.ex03 import (
        check_gqa_saving as check_gqa_saving,
        check_mla_bytes_per_token as check_mla_bytes_per_token,
        check_sliding_window_gib as check_sliding_window_gib,
    )
    from helpers.exercises.ex04 import (
        STREAM_CHUNKS as STREAM_CHUNKS,
        TTFT_SAMPLES_MS as TTFT_SAMPLES_MS,
        check_p99 as check_p99,
        check_tpot as check_tpot,
        check_ttft_from_chunks as check_ttft_from_chunks,
        check_which_ttft_is_right as check_which_ttft_is_right,
    )
    from helpers.exercises.ex05 import (
        check_blocks_per_request as check_blocks_per_request,
        check_chunked_prefill_steps as check_chunked_prefill_steps,
        check_prefix_hit_rate as check_prefix_hit_rate,
    )
    from helpers.exercises.ex06 import (
        check_config_b_speedup as check_config_b_speedup,
        check_little_law as check_little_law,
        check_queued_ttft_p99 as check_queued_ttft_p99,
    )
    from helpers.exercises.ex07 import (
        check_base_url as check_base_url,
        check_connection_refused as check_connection_refused,
        check_finish_reason as check_finish_reason,
        check_wrong_key_status as check_wrong_key_status,
    )
    from helpers.exercises.ex08 import (
        METRICS_SAMPLE as METRICS_SAMPLE,
        check_kv_demand as check_kv_demand,
        check_log_prompt_p99 as check_log_prompt_p99,
        check_metrics_hit_rate as check_metrics_hit_rate,
    )
    from helpers.exercises.ex09 import (
        GOODPUT_REQUESTS as GOODPUT_REQUESTS,
        SEARCH_PROBES as SEARCH_PROBES,
        check_goodput as check_goodput,
        check_slo_search_winner as check_slo_search_winner,
        check_usd_per_million_output as check_usd_per_million_output,
    )
    from helpers.exercises.ex10 import (
        check_awq_weight_gib as check_awq_weight_gib,
        check_expected_tokens_per_step as check_expected_tokens_per_step,
        check_fits_4090 as check_fits_4090,
    )
    from helpers.hardware import GPUSpec as GPUSpec, list_gpus as list_gpus, load_gpu as load_gpu
    from helpers.kvcache import (
        DTYPE_BYTES as DTYPE_BYTES,
        WEIGHT_FORMATS as WEIGHT_FORMATS,
        AttentionVariant as AttentionVariant,
        WeightFormat as WeightFormat,
        compare_attention as compare_attention,
        dtype_bytes as dtype_bytes,
        embedding_params as embedding_params,
        format_bytes as format_bytes,
        kv_bytes_per_token as kv_bytes_per_token,
        kv_cache_bytes as kv_cache_bytes,
        weight_bytes_per_param as weight_bytes_per_param,
        weights_bytes as weights_bytes,
    )
    from helpers.kvcache.batch_defaults import (
        BatchDefaults as BatchDefaults,
        vllm_batch_defaults as vllm_batch_defaults,
    )
    from helpers.kvcache.capacity import (
        NON_TORCH_BYTES as NON_TORCH_BYTES,
        CapacityPlan as CapacityPlan,
        activation_peak_bytes as activation_peak_bytes,
        plan_capacity as plan_capacity,
    )
    from helpers.kvcache.hybrid import HybridCache as HybridCache, hybrid_cache as hybrid_cache
    from helpers.lessons.capacity_planning import (
        DeploymentSizing as DeploymentSizing,
        gpu_options as gpu_options,
        kv_demand_tokens as kv_demand_tokens,
        size_deployment as size_deployment,
    )
    from helpers.lessons.capacity_planning_log import (
        length_percentiles as length_percentiles,
        load_request_log as load_request_log,
        log_prompts as log_prompts,
        prefix_hit_rate_bound as prefix_hit_rate_bound,
    )
    from helpers.lessons.config_ab import (
        article_sweep as article_sweep,
        article_table as article_table,
        as_article_table as as_article_table,
        compare_with_article as compare_with_article,
        feature_ladder as feature_ladder,
    )
    from helpers.lessons.config_ab_launch import (
        VllmLaunch as VllmLaunch,
        api_server_command as api_server_command,
        serve_command as serve_command,
        vllm_launch as vllm_launch,
    )
    from helpers.lessons.fidelity import (
        Efficiency as Efficiency,
        calibrate_efficiency as calibrate_efficiency,
        compare_with_published as compare_with_published,
        error_summary as error_summary,
        error_table as error_table,
        fidelity_split as fidelity_split,
        fit_rows as fit_rows,
        load_published as load_published,
        per_gpu_efficiency as per_gpu_efficiency,
    )
    from helpers.lessons.setup import (
        PackageCheck as PackageCheck,
        check_packages as check_packages,
        package_summary as package_summary,
        python_ok as python_ok,
        read_requirements as read_requirements,
    )
    from helpers.lessons.slo_goodput_cost import (
        generated_block_bonus as generated_block_bonus,
        goodput_vs_slo_search as goodput_vs_slo_search,
        multiturn_findings as multiturn_findings,
    )
    from helpers.lessons.streaming import (
        compare_with_naive as compare_with_naive,
        engine_prefill_ms as engine_prefill_ms,
        measurement_overhead as measurement_overhead,
        peak_in_flight as peak_in_flight,
        prefill_fit as prefill_fit,
        shared_engine_note as shared_engine_note,
        tps_vs_max_tokens as tps_vs_max_tokens,
        ttft_vs_prompt_length as ttft_vs_prompt_length,
        unique_prompt as unique_prompt,
        user_message as user_message,
    )
    from helpers.lessons.troubleshooting import (
        FirstRequest as FirstRequest,
        FirstRequestFailed as FirstRequestFailed,
        closed_port_url as closed_port_url,
        first_request as first_request,
        temporary_env as temporary_env,
        try_and_diagnose as try_and_diagnose,
    )
    from helpers.models import (
        ModelSpec as ModelSpec,
        ParamLayout as ParamLayout,
        attention_kind as attention_kind,
        list_models as list_models,
        load_model as load_model,
    )
    from helpers.models.params import count_params as count_params
    from helpers.plots.bench import (
        plot_latency_throughput as plot_latency_throughput,
        plot_throughput_vs_concurrency as plot_throughput_vs_concurrency,
        plot_ttft_vs_concurrency as plot_ttft_vs_concurrency,
    )
    from helpers.plots.capacity import (
        plot_length_distribution as plot_length_distribution,
        plot_metrics_timeline as plot_metrics_timeline,
    )
    from helpers.plots.engine import (
        plot_block_table as plot_block_table,
        plot_concurrency_sweep as plot_concurrency_sweep,
        plot_itl_tail as plot_itl_tail,
        plot_kv_pressure as plot_kv_pressure,
        plot_prefix_hit_rate as plot_prefix_hit_rate,
        plot_timeline as plot_timeline,
    )
    from helpers.plots.fidelity import plot_sim_vs_published as plot_sim_vs_published
    from helpers.plots.kv import (
        plot_kv_savings as plot_kv_savings,
        plot_kv_vs_batch as plot_kv_vs_batch,
        plot_kv_vs_seq_len as plot_kv_vs_seq_len,
    )
    from helpers.plots.runs import (
        plot_latency_distributions as plot_latency_distributions,
        plot_request_timeline as plot_request_timeline,
    )
    from helpers.plots.slo import plot_goodput_knee as plot_goodput_knee, plot_pareto as plot_pareto
    from helpers.plots.streaming import (
        plot_stream_timeline as plot_stream_timeline,
        plot_tps_vs_max_tokens as plot_tps_vs_max_tokens,
        plot_ttft_bars as plot_ttft_bars,
        plot_ttft_vs_prompt as plot_ttft_vs_prompt,
    )
    from helpers.plots.toy import (
        plot_batch_decode as plot_batch_decode,
        plot_decode_prediction as plot_decode_prediction,
        plot_generation_cost as plot_generation_cost,
        plot_phase_throughput as plot_phase_throughput,
        plot_roofline as plot_roofline,
        plot_step_latency as plot_step_latency,
    )
    from helpers.roofline import (
        StepCost as StepCost,
        cost_model as cost_model,
        decode_compute_bound_batch_size as decode_compute_bound_batch_size,
        decode_tokens_per_s_ceiling as decode_tokens_per_s_ceiling,
        prefill_time_floor_s as prefill_time_floor_s,
        step_time as step_time,
    )
    from helpers.server.app import create_app as create_app
    from helpers.server.launcher import (
        MockServer as MockServer,
        spawn_mock_server as spawn_mock_server,
        start_mock_server as start_mock_server,
    )
    from helpers.text.textgen import text_of_length as text_of_length
    from helpers.text.tokenizer import count_tokens as count_tokens, encode_chat as encode_chat
    from helpers.toy.config import (
        ToyConfig as ToyConfig,
        toy_preset as toy_preset,
        width_sweep as width_sweep,
    )
    from helpers.toy.counts import (
        ToyStepCost as ToyStepCost,
        growth_exponent as growth_exponent,
        toy_generation_cost as toy_generation_cost,
        toy_step_cost as toy_step_cost,
    )
    from helpers.toy.generate import (
        Generation as Generation,
        ToyModel as ToyModel,
        random_prompt as random_prompt,
    )
    from helpers.toy.measure import (
        DecodeTiming as DecodeTiming,
        PhaseThroughput as PhaseThroughput,
        batch_decode_timings as batch_decode_timings,
        decode_timing as decode_timing,
        fastest_generation as fastest_generation,
        phase_throughput as phase_throughput,
    )
    from helpers.toy.probe import (
        copy_bandwidth_bytes_per_s as copy_bandwidth_bytes_per_s,
        matmul_flops_per_s as matmul_flops_per_s,
    )
    from helpers.toy.quant import (
        QuantizedKVCache as QuantizedKVCache,
        QuantizedMatrix as QuantizedMatrix,
        dequantized_bytes_per_step as dequantized_bytes_per_step,
        quantize_matrix as quantize_matrix,
        quantize_weights as quantize_weights,
        round_fp8_e4m3 as round_fp8_e4m3,
        round_kv as round_kv,
        toy_kv_bytes_per_token as toy_kv_bytes_per_token,
        weight_bytes_per_step as weight_bytes_per_step,
    )
    from helpers.toy.quant_error import (
        AttentionError as AttentionError,
        QuantError as QuantError,
        kv_attention_error as kv_attention_error,
        quantization_error as quantization_error,
    )
    from helpers.toy.speculative import (
        SpeculativeGeneration as SpeculativeGeneration,
        SpeculativeTiming as SpeculativeTiming,
        acceptance_by_position as acceptance_by_position,
        alpha_estimate as alpha_estimate,
        speculative_generate as speculative_generate,
        speculative_sweep as speculative_sweep,
        truncated_draft as truncated_draft,
        with_quiet_layers as with_quiet_layers,
    )
    from helpers.vllm_local import (
        StartupLog as StartupLog,
        VllmServer as VllmServer,
        VllmStartError as VllmStartError,
        config_a as config_a,
        config_b as config_b,
        ensure_tiny_model as ensure_tiny_model,
        parse_startup_log as parse_startup_log,
        start_vllm as start_vllm,
        vllm_status as vllm_status,
    )
    from helpers.widgets.kv import (
        KVEstimate as KVEstimate,
        capacity_panel as capacity_panel,
        kv_calculator as kv_calculator,
    )

# public name -> the module under helpers that defines it (imported on first use)
_EXPORTS: dict[str, str] = {
    "ToyConfig": "toy.config", "toy_preset": "toy.config", "width_sweep": "toy.config",
    "ToyModel": "toy.generate", "Generation": "toy.generate", "random_prompt": "toy.generate",
    "ToyStepCost": "toy.counts", "toy_step_cost": "toy.counts", "toy_generation_cost": "toy.counts",
    "growth_exponent": "toy.counts",
    "copy_bandwidth_bytes_per_s": "toy.probe", "matmul_flops_per_s": "toy.probe",
    "PhaseThroughput": "toy.measure", "DecodeTiming": "toy.measure", "phase_throughput": "toy.measure",
    "decode_timing": "toy.measure", "batch_decode_timings": "toy.measure",
    "fastest_generation": "toy.measure",
    "plot_step_latency": "plots.toy", "plot_generation_cost": "plots.toy",
    "plot_phase_throughput": "plots.toy", "plot_batch_decode": "plots.toy", "plot_roofline": "plots.toy",
    "plot_decode_prediction": "plots.toy",
    "Settings": "client.settings", "load_settings": "client.settings", "mask_secret": "client.settings",
    "normalize_base_url": "client.urls", "UrlFix": "client.urls",
    "proxy_variables": "client.proxies", "bypass_proxy_for_loopback": "client.proxies",
    "make_client": "client.factory", "make_async_client": "client.factory",
    "RequestMetrics": "client.latency", "NoTokensError": "client.latency", "ChunkEvent": "client.latency",
    "metrics_from_trace": "client.latency",
    "stream_once": "client.stream", "astream_once": "client.stream",
    "NaiveMetrics": "client.naive", "naive_measure": "client.naive", "naive_p99": "client.naive",
    "diagnose": "client.diagnose", "Diagnosis": "client.diagnose",
    "check_settings": "client.check", "SettingsCheck": "client.check",
    "ModelSpec": "models", "ParamLayout": "models", "load_model": "models", "list_models": "models",
    "attention_kind": "models",
    "GPUSpec": "hardware", "load_gpu": "hardware", "list_gpus": "hardware",
    "DTYPE_BYTES": "kvcache", "dtype_bytes": "kvcache", "kv_bytes_per_token": "kvcache",
    "kv_cache_bytes": "kvcache", "weights_bytes": "kvcache", "format_bytes": "kvcache",
    "compare_attention": "kvcache", "AttentionVariant": "kvcache", "WEIGHT_FORMATS": "kvcache",
    "WeightFormat": "kvcache", "weight_bytes_per_param": "kvcache", "embedding_params": "kvcache",
    "hybrid_cache": "kvcache.hybrid", "HybridCache": "kvcache.hybrid",
    "plan_capacity": "kvcache.capacity", "CapacityPlan": "kvcache.capacity",
    "activation_peak_bytes": "kvcache.capacity", "NON_TORCH_BYTES": "kvcache.capacity",
    "count_params": "models.params",
    "kv_calculator": "widgets.kv", "capacity_panel": "widgets.kv", "KVEstimate": "widgets.kv",
    "plot_kv_vs_seq_len": "plots.kv", "plot_kv_vs_batch": "plots.kv", "plot_kv_savings": "plots.kv",
    "start_mock_server": "server.launcher", "spawn_mock_server": "server.launcher",
    "MockServer": "server.launcher",
    "create_app": "server.app",
    "count_tokens": "text.tokenizer", "encode_chat": "text.tokenizer",
    "text_of_length": "text.textgen",
    "step_time": "roofline", "StepCost": "roofline", "cost_model": "roofline",
    "decode_tokens_per_s_ceiling": "roofline", "prefill_time_floor_s": "roofline",
    "decode_compute_bound_batch_size": "roofline",
    "EngineConfig": "engine", "LLMEngine": "engine", "Request": "engine", "RequestRecord": "engine",
    "StepOutput": "engine", "EngineStats": "engine", "kv_cache_log_line": "engine",
    "simulate": "engine.simulate", "simulate_requests": "engine.simulate",
    "SimulationResult": "engine.simulate",
    "vllm_batch_defaults": "kvcache.batch_defaults", "BatchDefaults": "kvcache.batch_defaults",
    "summarize": "engine.summary",
    "Efficiency": "lessons.fidelity", "load_published": "lessons.fidelity",
    "compare_with_published": "lessons.fidelity", "calibrate_efficiency": "lessons.fidelity",
    "fidelity_split": "lessons.fidelity", "fit_rows": "lessons.fidelity", "error_table": "lessons.fidelity",
    "error_summary": "lessons.fidelity", "per_gpu_efficiency": "lessons.fidelity",
    "plot_sim_vs_published": "plots.fidelity",
    "get_backend": "client.backend",
    "BenchPrompt": "bench", "BenchResult": "bench", "RequestResult": "bench", "FewSamplesWarning": "bench",
    "synthetic_prompts": "bench", "prompts_from_log": "bench", "make_prompts": "bench",
    "run_benchmark": "bench", "arun_benchmark": "bench", "sweep": "bench", "asweep": "bench",
    "load_jsonl": "bench", "summarize_results": "bench", "to_simulated": "bench", "arrival_times_s": "bench",
    "replay_benchmark": "bench", "replay_sweep": "bench", "engine_clock_summary": "bench",
    "engine_prefill_s": "bench",
    "parse_goodput": "bench.goodput", "good_requests": "bench.goodput", "goodput_summary": "bench.goodput",
    "with_goodput": "bench.goodput",
    "SLO": "bench.slo", "SLOSearch": "bench.slo", "SimWorkload": "bench.slo", "search_slo": "bench.slo",
    "simulated_levels": "bench.slo", "http_levels": "bench.slo", "backlog_growth": "bench.slo",
    "GPUPrice": "cost", "load_prices": "cost", "gpu_price": "cost", "usd_per_million_tokens": "cost",
    "cost_row": "cost", "pareto_front": "cost", "price_spreads": "cost", "price_table": "cost",
    "offer_bases": "cost",
    "plot_goodput_knee": "plots.slo", "plot_pareto": "plots.slo",
    "ramp_up_arrivals": "bench.arrivals", "load_trace": "bench.arrivals", "trace_workload": "bench.arrivals",
    "chat_sessions": "bench.arrivals",
    "ChatSession": "bench.sessions", "chat_scripts": "bench.sessions", "run_sessions": "bench.sessions",
    "arun_sessions": "bench.sessions", "turn_table": "bench.sessions", "replay_sessions": "bench.sessions",
    "report_html": "bench.report", "write_report": "bench.report",
    "plot_latency_distributions": "plots.runs", "plot_request_timeline": "plots.runs",
    "plot_throughput_vs_concurrency": "plots.bench", "plot_ttft_vs_concurrency": "plots.bench",
    "plot_latency_throughput": "plots.bench",
    "vllm_launch": "lessons.config_ab_launch", "VllmLaunch": "lessons.config_ab_launch",
    "serve_command": "lessons.config_ab_launch", "api_server_command": "lessons.config_ab_launch",
    "unique_prompt": "lessons.streaming", "user_message": "lessons.streaming",
    "compare_with_naive": "lessons.streaming", "ttft_vs_prompt_length": "lessons.streaming",
    "prefill_fit": "lessons.streaming", "tps_vs_max_tokens": "lessons.streaming",
    "engine_prefill_ms": "lessons.streaming", "measurement_overhead": "lessons.streaming",
    "peak_in_flight": "lessons.streaming", "shared_engine_note": "lessons.streaming",
    "plot_stream_timeline": "plots.streaming", "plot_ttft_vs_prompt": "plots.streaming",
    "plot_tps_vs_max_tokens": "plots.streaming", "plot_ttft_bars": "plots.streaming",
    "try_and_diagnose": "lessons.troubleshooting", "temporary_env": "lessons.troubleshooting",
    "closed_port_url": "lessons.troubleshooting", "first_request": "lessons.troubleshooting",
    "FirstRequest": "lessons.troubleshooting", "FirstRequestFailed": "lessons.troubleshooting",
    "PackageCheck": "lessons.setup", "check_packages": "lessons.setup", "read_requirements": "lessons.setup",
    "python_ok": "lessons.setup", "package_summary": "lessons.setup",
    "trace_requests": "engine.trace", "timeline": "engine.trace", "block_snapshot": "engine.trace",
    "Trace": "engine.trace", "BlockSnapshot": "engine.trace",
    "concurrency_sweep": "engine.sweep", "decode_tokens_per_s": "engine.sweep",
    "speculative_gain_sweep": "engine.sweep",
    "plot_timeline": "plots.engine", "plot_block_table": "plots.engine",
    "plot_prefix_hit_rate": "plots.engine", "plot_itl_tail": "plots.engine",
    "plot_kv_pressure": "plots.engine", "plot_concurrency_sweep": "plots.engine",
    "Sample": "client.prom", "parse_metrics": "client.prom", "metric_value": "client.prom",
    "vllm_snapshot": "client.prom", "scrape_metrics": "client.prom", "MetricsPoller": "client.prom",
    "article_table": "lessons.config_ab", "article_sweep": "lessons.config_ab",
    "as_article_table": "lessons.config_ab", "compare_with_article": "lessons.config_ab",
    "feature_ladder": "lessons.config_ab",
    "load_request_log": "lessons.capacity_planning_log",
    "length_percentiles": "lessons.capacity_planning_log",
    "prefix_hit_rate_bound": "lessons.capacity_planning_log", "log_prompts": "lessons.capacity_planning_log",
    "kv_demand_tokens": "lessons.capacity_planning", "size_deployment": "lessons.capacity_planning",
    "DeploymentSizing": "lessons.capacity_planning", "gpu_options": "lessons.capacity_planning",
    "plot_length_distribution": "plots.capacity", "plot_metrics_timeline": "plots.capacity",
    "QuantizedMatrix": "toy.quant", "quantize_matrix": "toy.quant", "quantize_weights": "toy.quant",
    "weight_bytes_per_step": "toy.quant", "dequantized_bytes_per_step": "toy.quant",
    "round_fp8_e4m3": "toy.quant", "round_kv": "toy.quant", "QuantizedKVCache": "toy.quant",
    "toy_kv_bytes_per_token": "toy.quant",
    "QuantError": "toy.quant_error", "quantization_error": "toy.quant_error",
    "AttentionError": "toy.quant_error", "kv_attention_error": "toy.quant_error",
    "SpeculativeGeneration": "toy.speculative", "speculative_generate": "toy.speculative",
    "truncated_draft": "toy.speculative", "SpeculativeTiming": "toy.speculative",
    "speculative_sweep": "toy.speculative", "with_quiet_layers": "toy.speculative",
    "acceptance_by_position": "toy.speculative", "alpha_estimate": "toy.speculative",
    "multiturn_findings": "lessons.slo_goodput_cost", "generated_block_bonus": "lessons.slo_goodput_cost",
    "goodput_vs_slo_search": "lessons.slo_goodput_cost",
    "SpeculativeConfig": "engine.speculative", "SpeculativeStep": "engine.speculative",
    "expected_tokens_per_step": "engine.speculative", "speculative_step": "engine.speculative",
    "speculative_batch_sweep": "engine.speculative", "best_num_speculative_tokens": "engine.speculative",
    "check_decode_weight_bytes": "exercises.ex01", "check_decode_ceiling": "exercises.ex01",
    "check_batch_decode_gain": "exercises.ex01",
    "check_kv_bytes_per_token": "exercises.ex02", "check_batch_kv_gib": "exercises.ex02",
    "check_requests_that_fit": "exercises.ex02", "PHI4_MINI_CONFIG": "exercises.ex02",
    "check_gqa_saving": "exercises.ex03", "check_mla_bytes_per_token": "exercises.ex03",
    "check_sliding_window_gib": "exercises.ex03",
    "check_ttft_from_chunks": "exercises.ex04", "check_tpot": "exercises.ex04", "check_p99": "exercises.ex04",
    "check_which_ttft_is_right": "exercises.ex04", "STREAM_CHUNKS": "exercises.ex04",
    "TTFT_SAMPLES_MS": "exercises.ex04",
    "check_blocks_per_request": "exercises.ex05", "check_prefix_hit_rate": "exercises.ex05",
    "check_chunked_prefill_steps": "exercises.ex05",
    "check_queued_ttft_p99": "exercises.ex06", "check_little_law": "exercises.ex06",
    "check_config_b_speedup": "exercises.ex06",
    "check_base_url": "exercises.ex07", "check_wrong_key_status": "exercises.ex07",
    "check_finish_reason": "exercises.ex07", "check_connection_refused": "exercises.ex07",
    "check_log_prompt_p99": "exercises.ex08", "check_metrics_hit_rate": "exercises.ex08",
    "check_kv_demand": "exercises.ex08", "METRICS_SAMPLE": "exercises.ex08",
    "check_goodput": "exercises.ex09", "check_usd_per_million_output": "exercises.ex09",
    "check_slo_search_winner": "exercises.ex09", "GOODPUT_REQUESTS": "exercises.ex09",
    "SEARCH_PROBES": "exercises.ex09",
    "check_awq_weight_gib": "exercises.ex10", "check_expected_tokens_per_step": "exercises.ex10",
    "check_fits_4090": "exercises.ex10",
    "CheckResult": "exercises", "notebook_exercises": "exercises",
    "StartupLog": "vllm_local",
    "VllmServer": "vllm_local",
    "VllmStartError": "vllm_local",
    "config_a": "vllm_local",
    "config_b": "vllm_local",
    "ensure_tiny_model": "vllm_local",
    "parse_startup_log": "vllm_local",
    "start_vllm": "vllm_local",
    "vllm_status": "vllm_local",
    "measuring_target": "client.backend",
    "what_if_target": "client.backend",
    "targets_ready": "client.backend",
    "Target": "client.backend",
}

__all__ = sorted(_EXPORTS)

if not TYPE_CHECKING:  # to a type checker every public name is imported above, and an unknown one is an error

    def __getattr__(name: str) -> Any:
        module = _EXPORTS.get(name)
        if module is None:
            raise AttributeError(f"module 'helpers' has no attribute {name!r}")
        value = getattr(importlib.import_module(f"helpers.{module}"), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
