"""The facts the course states about vLLM, checked against the installed vLLM (``make vllm-test``).

One probe (``tests/vllm/probes/facts.py``) runs in the vLLM venv and prints what vLLM's own code returns,
prints or registers; each test below compares one fact with what the course computes or says. A fact that
no test can check names its source line in data/vllm/FACTS.md instead.
"""
from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pandas as pd
import pytest

from helpers.bench.goodput import goodput_summary
from helpers.client.latency import ChunkEvent, metrics_from_trace
from helpers.client.prom import VLLM_METRICS
from helpers.engine.config import NOT_SIMULATED_KEYS, REMOVED_KEYS, EngineConfig
from helpers.engine.engine import kv_cache_log_line
from helpers.engine.speculative import lookahead_slots
from helpers.hardware import list_gpus, load_gpu
from helpers.kvcache.batch_defaults import vllm_batch_defaults
from helpers.kvcache.capacity import DEFAULT_GPU_MEMORY_UTILIZATION
from helpers.lessons.config_ab_launch import vllm_launch
from helpers.lessons.real_vllm import ENGINE_CORE_BUSY_POLL_S
from helpers.server.errors import queue_overflow
from helpers.vllm_version import VLLM_VERSION

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data" / "vllm"

# A scripted chat stream (seconds after the request was sent): role-only chunk, two content chunks, the finish
# chunk, the usage chunk. vLLM's benchmark client reads it in the probe; the course's client code below.
STREAM = [
    (0.10, {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
    (0.25, {"choices": [{"index": 0, "delta": {"content": "a"}}]}),
    (0.40, {"choices": [{"index": 0, "delta": {"content": "b"}}]}),
    (0.45, {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    (0.60, {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}),
]
# Finished requests for calculate_metrics: limits met exactly, missed, one output token (TPOT 0 for goodput)
ROWS = [
    {"ttft": 0.2, "latency": 1.0, "output_tokens": 9},    # TPOT 0.1 s: exactly at the limit -> good
    {"ttft": 0.5, "latency": 1.0, "output_tokens": 11},   # TTFT over 0.3 s -> not good
    {"ttft": 0.1, "latency": 2.0, "output_tokens": 11},   # TPOT 0.19 s -> not good
    {"ttft": 0.3, "latency": 0.3, "output_tokens": 1},    # one token: TPOT counts as 0 -> good
    {"ttft": 0.05, "latency": 0.5, "output_tokens": 10},  # good
]
GOODPUT_MS = {"ttft": 300.0, "tpot": 100.0}
# transformers' Qwen3NextConfig defaults (the Qwen3-Next-80B-A3B checkpoint), the fields the state shapes use
QWEN3_NEXT = {"linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
              "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4}
# the course's Qwen3-Next preset in a pool of 1,086 blocks (what plan_capacity gives it on a B200 at 32 K)
HYBRID_POOL = {"gdn": QWEN3_NEXT, "num_kv_heads": 2, "head_dim": 256, "block_size": 16, "num_blocks": 1086,
               "max_model_len": 32768, "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 12}
DURATION_S = 4.0


def _serve_argv(command: str) -> list[str]:
    argv = shlex.split(command)
    assert argv[:2] == ["vllm", "serve"], command
    return argv[2:]


def _launch(config: str) -> str:
    return vllm_launch(DATA / config, "a100-80gb").serve


@pytest.fixture(scope="module")
def facts(probe) -> dict:
    """The probe's JSON (``probe`` from tests/vllm/conftest.py: the vLLM venv and its environment)."""
    spec = {
        "stream": STREAM,
        "metrics": {"rows": ROWS, "duration_s": DURATION_S, "goodput": GOODPUT_MS},
        "gdn": QWEN3_NEXT,
        "hybrid_pool": HYBRID_POOL,
        "serve_commands": [_serve_argv(_launch("config_a.yaml")), _serve_argv(_launch("config_b.yaml")),
                           ["some-model", "--config", str(DATA / "config_a.yaml")],
                           ["some-model", "--config", str(DATA / "config_b.yaml")]],
    }
    return probe("facts", stdin=spec)


def test_the_installed_vllm_is_the_one_the_course_describes(facts):
    assert facts["version"] == VLLM_VERSION
    head = (DATA / "FACTS.md").read_text(encoding="utf-8").splitlines()[:6]
    assert any(f"vLLM {VLLM_VERSION}" in line for line in head), "FACTS.md must name the version at its head"
    assert f"vLLM {VLLM_VERSION}" in (DATA / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("gpu", list_gpus())
def test_batch_defaults_are_vllms_for_every_gpu_and_usage_context(facts, gpu):
    got = facts["batch_defaults"][gpu]
    assert got["memory_bytes"] == load_gpu(gpu).memory_bytes  # the probe faked this GPU
    for context, (tokens, seqs) in got["table"].items():
        ours = vllm_batch_defaults(gpu, context)  # no max_model_len: the table itself
        assert (ours.max_num_batched_tokens, ours.max_num_seqs) == (tokens, min(seqs, tokens)), context
    for case, expected in got["defaulted"].items():  # the whole defaulting, max_model_len 4096
        context, chunked, mode = case.split("/")
        ours = vllm_batch_defaults(gpu, context, 4096, enable_chunked_prefill=chunked == "chunked=True",
                                   performance_mode=mode)
        assert [ours.max_num_batched_tokens, ours.max_num_seqs] == expected, case


def test_the_160_gib_tier_exists_and_b200_is_in_it(facts):
    b200 = facts["batch_defaults"]["b200"]["table"]
    h200 = facts["batch_defaults"]["h200"]["table"]
    assert b200["openai"] == [16384, 1024] and h200["openai"] == [8192, 1024]
    assert vllm_batch_defaults("b200").table == "largest"


def test_the_kv_cache_log_line_is_vllms(facts):
    log = facts["kv_cache_log"]
    for device, prefix in (("cuda", "GPU"), ("cpu", "CPU")):
        assert log["lines"][device] == [
            kv_cache_log_line(log["num_tokens"], log["max_model_len"], log["concurrency"], device=prefix)]


def test_the_default_gpu_memory_utilization_and_cuda_graph_profiling(facts):
    defaults = facts["engine_defaults"]
    assert defaults["gpu_memory_utilization"] == DEFAULT_GPU_MEMORY_UTILIZATION
    assert facts["serve"]["defaults"]["gpu_memory_utilization"] == DEFAULT_GPU_MEMORY_UTILIZATION
    assert EngineConfig().gpu_memory_utilization == DEFAULT_GPU_MEMORY_UTILIZATION
    # the CUDA-graph estimate comes off the KV pool by default (FACTS.md §3)
    assert defaults["estimate_cudagraphs"] is True
    # prefix caching on by default; block_size left to the platform (16 on CUDA, FACTS.md §8)
    assert defaults["enable_prefix_caching"] is True


def test_admission_control_and_the_mocks_503(facts):
    assert facts["engine_defaults"]["max_num_queued_reqs"] is None  # off unless set
    assert "--max-num-queued-reqs" in facts["serve"]["options"]
    vllm = facts["admission"]["QueueOverflowError"]
    ours = queue_overflow()
    assert (ours.status, ours.body()) == (vllm["status"], vllm["body"])


def _options(facts) -> set[str]:
    return set(facts["serve"]["options"])


def test_every_option_the_course_accepts_is_a_vllm_serve_option(facts):
    options = _options(facts)
    for key in sorted(NOT_SIMULATED_KEYS) + [k for k in EngineConfig.__dataclass_fields__
                                               if k not in ("not_simulated", "scheduling_policy")]:
        assert "--" + key.replace("_", "-") in options, key


def test_options_the_course_calls_removed_are_gone(facts):
    options = _options(facts)
    for key in sorted(REMOVED_KEYS):
        assert "--" + key.replace("_", "-") not in options, key
    for flag in ("--swap-space", "--max-num-partial-prefills", "--max-long-partial-prefills",
                 "--disable-log-requests"):
        assert flag not in options, flag


def test_the_launch_commands_and_config_files_parse_in_vllm(facts):
    a_cmd, b_cmd, a_file, b_file = facts["serve_commands"]
    for parsed in (a_cmd, b_cmd, a_file, b_file):
        assert parsed["ok"], parsed.get("error")
    a = EngineConfig.from_yaml(DATA / "config_a.yaml")
    b = EngineConfig.from_yaml(DATA / "config_b.yaml")
    for parsed, config in ((a_cmd, a), (a_file, a), (b_cmd, b), (b_file, b)):
        values = parsed["values"]
        for key in ("max_num_seqs", "enable_prefix_caching", "enable_chunked_prefill",
                    "gpu_memory_utilization", "max_model_len"):
            ours = getattr(config, key)
            theirs = values[key]
            # an option the file leaves out stays None in vLLM's namespace (vLLM's default then applies)
            assert theirs == ours or (theirs is None and key.startswith("enable_") and ours is True), key


def test_a_false_boolean_in_a_config_file_is_dropped(facts):
    booleans = facts["serve"]["config_yaml_booleans"]
    assert booleans["enable_prefix_caching: false"] is None  # dropped: vLLM's default (on) stays
    assert booleans["enable-prefix-caching: false"] is None
    assert booleans["no-enable-prefix-caching: true"] is False  # how the course's files switch it off
    with pytest.raises(ValueError, match="no-enable-prefix-caching: true"):
        path = ROOT / ".cache" / "false.yaml"
        path.write_text("enable_prefix_caching: false\n", encoding="utf-8")
        EngineConfig.from_yaml(path)


def test_where_api_server_count_is_defined(facts):
    assert facts["serve"]["defined_in"]["--api-server-count"] == "vllm/entrypoints/launchers/cli_args.py"


_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
# flags of other tools the prose writes (pip, JupyterLab, pytest/nbval): not vLLM's, named here on purpose
OTHER_TOOLS = {"--no-index", "--find-links", "--allow-root", "--notebook-dir", "--nbval-lax", "--flag",
               "--no-flag", "--no", "--help"}


# vllm bench sweep's SLA search flag, named in the prose as gone (test_bench_sweep_subcommands_and_no_sla_...)
GONE_SWEEP_FLAGS = {"--sla-params"}


def _prose_files() -> list[Path]:
    return [*sorted((ROOT / "notebooks").glob("*.ipynb")), *sorted((ROOT / "docs").glob("**/*.md")),
            ROOT / "README.md", *sorted((ROOT / "data").glob("**/*.md")), *sorted(DATA.glob("*.yaml"))]


def test_every_flag_the_course_writes_is_vllms_or_the_courses(facts):
    from helpers.__main__ import _parsers

    _, course = _parsers(None)
    ours = {s for p in course.values() for a in p._actions for s in a.option_strings}
    scripts = [*sorted((ROOT / "benchmarks").glob("*.py")), *sorted((ROOT / "data").glob("**/*.py"))]
    for script in scripts:  # the benchmark and data scripts' own options
        ours |= set(re.findall(r"[\"'](--[a-z][a-z0-9-]*)[\"']", script.read_text(encoding="utf-8")))
    vllm = _options(facts) | set(facts["bench_serve_options"])
    vllm |= {o for opts in facts["bench_sweep"]["options"].values() for o in opts}
    removed = {"--" + k.replace("_", "-") for k in REMOVED_KEYS} | GONE_SWEEP_FLAGS
    unknown = {}
    for path in _prose_files():
        for flag in _FLAG.findall(path.read_text(encoding="utf-8")):
            if flag not in vllm | ours | OTHER_TOOLS | removed:
                unknown.setdefault(flag, path.name)
    assert not unknown, f"flags that are neither vLLM {VLLM_VERSION}'s nor the course's: {unknown}"


def test_every_vllm_source_file_the_course_cites_exists(facts):
    root = Path(facts["vllm_root"]).parent
    cited = {}
    for path in [*_prose_files(), *sorted((ROOT / "helpers").glob("**/*.py"))]:
        for rel in re.findall(r"(?<![\w/])vllm/[A-Za-z0-9_/]+\.py", path.read_text(encoding="utf-8")):
            cited.setdefault(rel, path.name)
    missing = {rel: where for rel, where in cited.items() if not (root / rel).exists()}
    assert not missing, f"files cited that vLLM {VLLM_VERSION} does not have: {missing}"


def test_speculative_methods_and_their_kv_lookahead(facts):
    spec = facts["speculative_methods"]
    for method in ("ngram", "draft_model", "eagle", "eagle3", "mtp", "suffix"):  # the ones notebook 10 names
        assert method in spec["methods"], method
    for method, slots in spec["lookahead_slots"].items():
        assert lookahead_slots(method, spec["k"]) == slots, method
    assert "synthetic" in spec["rejection_sample_methods"]


def test_awq_and_gptq_are_the_auto_configs(facts):
    q = facts["quantization"]
    assert q["config_class"] == {"awq": "AutoAWQConfig", "awq_marlin": "AutoAWQConfig",
                                 "gptq": "AutoGPTQConfig", "gptq_marlin": "AutoGPTQConfig"}
    assert "bitsandbytes" not in q["methods"] and "gguf" not in q["methods"]
    for method in ("awq", "gptq", "fp8", "compressed-tensors", "experts_int8"):
        assert method in q["methods"], method


def _kind(name: str, metrics: dict[str, str]) -> str | None:
    """The kind vLLM registers ``name`` as (an exposed sample name: ``_total`` etc. stripped)."""
    if name in metrics:
        return metrics[name]
    for suffix in ("_total", "_count", "_sum", "_bucket"):
        if name.endswith(suffix) and name[: -len(suffix)] in metrics:
            return metrics[name[: -len(suffix)]]
    return None


def test_metric_names_the_course_reads_exist_and_the_v0_names_do_not(facts):
    metrics = facts["metrics"]["metrics"]
    for key, (name, *older) in VLLM_METRICS.items():
        kind = _kind(name, metrics)
        assert kind is not None, f"{key}: {name} is not in vLLM {VLLM_VERSION}"
        assert name.endswith("_total") == (kind == "counter"), name  # counters are exposed with _total
        for old in older:
            assert _kind(old, metrics) is None, old
    read = set()
    for path in [*_prose_files(), *sorted((ROOT / "helpers").glob("**/*.py")),
                 *sorted((ROOT / "helpers").glob("**/*.js"))]:
        read |= set(re.findall(r"vllm:[a-z][a-z0-9_]*", path.read_text(encoding="utf-8")))
    v0 = {old for _, *older in VLLM_METRICS.values() for old in older}
    missing = sorted(n for n in read - v0 if _kind(n, metrics) is None and not n.endswith("_"))
    assert not missing, f"metric names in the course that vLLM {VLLM_VERSION} does not register: {missing}"


def test_the_mock_exports_vllms_names_with_vllms_kinds(facts):
    from prometheus_client.parser import text_string_to_metric_families

    from helpers.engine.engine import LLMEngine
    from helpers.server.driver import EngineDriver
    from helpers.server.prometheus import ServerMetrics

    config = EngineConfig(model="llama-2-7b", speculative_config={"num_speculative_tokens": 2,
                                                                  "acceptance_rate": 0.7})
    metrics = ServerMetrics({"m": EngineDriver(LLMEngine(config, "a100-80gb"))})
    families = list(text_string_to_metric_families(metrics.render().decode()))
    vllm = facts["metrics"]["metrics"]
    exported = {f.name: f.type for f in families if f.name.startswith("vllm:")}
    assert len(exported) >= 10
    for name, kind in exported.items():
        assert vllm.get(name) == kind, f"{name}: mock {kind}, vLLM {vllm.get(name)}"


def test_bench_serve_ttft_itl_e2el_on_a_scripted_stream(facts):
    vllm = facts["bench_chat_stream"]
    assert vllm["success"] and vllm["output_tokens"] == 2
    assert vllm["ttft"] == pytest.approx(0.10)  # the role-only chunk: the first chunk with choices
    assert vllm["itl"] == pytest.approx([0.15, 0.15, 0.05])  # the finish chunk adds a gap
    assert vllm["latency"] == pytest.approx(0.45)  # the last chunk with choices; not the usage chunk
    trace = [ChunkEvent(t, content=(p["choices"][0]["delta"].get("content") or "") if p["choices"] else "",
                        role=p["choices"][0]["delta"].get("role") if p["choices"] else None,
                        finish_reason=p["choices"][0].get("finish_reason") if p["choices"] else None,
                        n_choices=len(p["choices"]), has_usage="usage" in p) for t, p in STREAM]
    ours = metrics_from_trace(trace, usage=STREAM[-1][1]["usage"])
    # the course's stricter reading (FACTS.md §1): only chunks with text count
    assert (ours.ttft_s, ours.e2e_s) == pytest.approx((0.25, 0.40)) and ours.itl_s == pytest.approx((0.15,))
    assert ours.ttfb_s == pytest.approx(vllm["ttft"])  # vLLM's TTFT is the course's time to first chunk


def test_tpot_and_goodput_are_vllms(facts):
    vllm = facts["bench_metrics"]
    rows = pd.DataFrame({"ttft_s": [r["ttft"] for r in ROWS], "e2el_s": [r["latency"] for r in ROWS],
                         "output_tokens": [r["output_tokens"] for r in ROWS]})
    ours = goodput_summary(rows, DURATION_S, GOODPUT_MS)
    assert ours["request_goodput"] == pytest.approx(vllm["request_goodput"]) == pytest.approx(3 / DURATION_S)
    tpot = [(r["latency"] - r["ttft"]) / (r["output_tokens"] - 1) for r in ROWS if r["output_tokens"] > 1]
    assert vllm["mean_tpot_ms"] == pytest.approx(1000 * sum(tpot) / len(tpot))


def test_bench_sweep_subcommands_and_no_sla_search(facts):
    from helpers.bench.slo import VLLM_SWEEP_SUBCOMMANDS

    sweep = facts["bench_sweep"]
    assert tuple(sweep["subcommands"]) == VLLM_SWEEP_SUBCOMMANDS
    assert "serve_sla" not in sweep["modules"]
    assert all(flag not in opts for opts in sweep["options"].values() for flag in GONE_SWEEP_FLAGS)
    assert "--workload-iters" in sweep["options"]["serve_workload"]


def test_gated_delta_net_state_is_vllms(facts):
    from helpers.kvcache.hybrid import gated_delta_net_state_shapes

    conv, recurrent = facts["gated_delta_net"]
    ours_conv, ours_recurrent = gated_delta_net_state_shapes(QWEN3_NEXT)
    assert sorted(conv) == sorted(ours_conv)  # vLLM orients it (dim, len) or (len, dim) by kernel layout
    assert recurrent == list(ours_recurrent)


@pytest.mark.parametrize("mode", ["align", "none"])
def test_a_hybrid_models_pool_is_laid_out_as_vllm_does(facts, mode):
    from helpers.kvcache.hybrid import hybrid_blocks, state_bytes_per_layer
    from helpers.models import load_model

    vllm = facts["hybrid_pool"][mode]
    model = load_model("qwen3-next-80b-a3b")
    assert (model.num_kv_heads, model.head_dim) == (HYBRID_POOL["num_kv_heads"], HYBRID_POOL["head_dim"])
    ours = hybrid_blocks(attention_layers=model.num_attention_layers,
                         linear_layers=model.num_layers - model.num_attention_layers,
                         kv_bytes_per_token_per_layer=2 * model.num_kv_heads * model.head_dim * 2,
                         state_bytes_per_layer=state_bytes_per_layer(model),
                         block_size=HYBRID_POOL["block_size"], enable_prefix_caching=mode == "align")
    assert (ours.block_size, ours.page_bytes, ours.state_bytes) == (
        vllm["block_size"], vllm["page_bytes"], vllm["state_bytes"])
    kinds = [kind for kind, _ in vllm["groups"]]
    assert {n for _, n in vllm["groups"]} == {ours.group_size}
    assert kinds.count("FullAttentionSpec") == ours.attention_groups
    assert kinds.count("MambaSpec") == ours.linear_groups
    blocks = HYBRID_POOL["num_blocks"] / ours.blocks_per_request(HYBRID_POOL["max_model_len"])
    assert blocks == pytest.approx(vllm["max_concurrency"], rel=1e-12)


def test_prompt_tokens_details_needs_the_flag(facts):
    details = facts["prompt_tokens_details"]
    assert facts["serve"]["defaults"]["enable_prompt_tokens_details"] is False
    assert all(details[f"enabled=False/cached={c}"] is None for c in ("None", "0", "32"))
    # with the flag, a request without hits reads cached_tokens 0 (v0.19.0 left the field out then)
    assert details["enabled=True/cached=0"]["cached_tokens"] == 0


def test_the_engine_core_busy_polls_its_worker(facts):
    """Why notebook 12 sends its A/B workload at once (helpers/lessons/real_vllm.py): vLLM's engine core spins
    on the shared-memory queue for a while after each result before it sleeps, so on two cores the API
    server and the client get what is left."""
    assert facts["engine_core_polling"] == {"busy_loop_s": ENGINE_CORE_BUSY_POLL_S, "yields": True}, (
        f"预期 vLLM 的 SpinCondition 在每次读到结果后忙等 {ENGINE_CORE_BUSY_POLL_S:g} 秒（sched_yield），"
        f"装的 vLLM 给出 {facts['engine_core_polling']}：更新 ENGINE_CORE_BUSY_POLL_S 和第 12 课的说明。")
    text = (ROOT / "notebooks" / "12_real_vllm.ipynb").read_text(encoding="utf-8")
    assert f"忙等 {ENGINE_CORE_BUSY_POLL_S:g} 秒" in text, "第 12 课第 3 节应写出 vLLM 引擎进程忙等的时长"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
