"""EngineConfig: vLLM names, YAML files, errors that say what to do."""
from pathlib import Path

import pytest

from helpers.engine import EngineConfig

DATA = Path(__file__).resolve().parent.parent / "data" / "vllm"


def test_articles_configs_load_with_their_settings():
    a = EngineConfig.from_yaml(DATA / "config_a.yaml")
    b = EngineConfig.from_yaml(DATA / "config_b.yaml")
    assert a.max_num_seqs == 1 and not a.enable_prefix_caching and not a.enable_chunked_prefill
    assert b.max_num_seqs == 128 and b.enable_prefix_caching and b.enable_chunked_prefill
    assert b.model == "meta-llama/Llama-2-13b-chat-hf" and b.served_model_name == "local-13b"
    assert b.gpu_memory_utilization == 0.92 and b.max_model_len == 4096 and b.block_size == 16
    assert b.max_num_batched_tokens == 8192 and b.not_simulated == ()


def test_dashes_and_underscores_are_the_same_key(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("max-num-seqs: 7\nno_enable_chunked_prefill: true\nhost: 0.0.0.0\nport: 8000\n")
    config = EngineConfig.from_yaml(path)
    assert config.max_num_seqs == 7 and not config.enable_chunked_prefill
    assert [k for k, _ in config.not_simulated] == ["host", "port"]


def test_misspelled_key_is_an_error_with_a_suggestion(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("max_num_seq: 8\n")
    with pytest.raises(ValueError, match="did you mean 'max_num_seqs'"):
        EngineConfig.from_yaml(path)
    path.write_text("completely_made_up: 1\n")
    with pytest.raises(ValueError, match="not a vLLM engine option"):
        EngineConfig.from_yaml(path)


def test_missing_file_and_bad_values():
    with pytest.raises(FileNotFoundError, match="data/vllm"):
        EngineConfig.from_yaml("/no/such/file.yaml")
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        EngineConfig(gpu_memory_utilization=1.5)
    with pytest.raises(ValueError, match="scheduling_policy"):
        EngineConfig(scheduling_policy="dynamic")
    with pytest.raises(ValueError, match="quantization"):
        EngineConfig(quantization="magic")


def test_dtypes_and_quantization_map_to_storage_dtypes():
    assert EngineConfig().weight_dtype == "fp16" and EngineConfig().kv_dtype == "fp16"
    assert EngineConfig(dtype="bfloat16").kv_dtype == "bf16"
    assert EngineConfig(quantization="awq").weight_dtype == "awq-int4"  # 4-bit plus group scales
    assert EngineConfig(quantization="gptq_marlin").weight_dtype == "gptq-int4"
    assert EngineConfig(quantization="bitsandbytes").weight_dtype == "int4"
    assert EngineConfig(kv_cache_dtype="fp8_e5m2").kv_dtype == "fp8"
    assert EngineConfig(scheduling_policy="fcfs").scheduling_policy == "continuous"


def test_a_false_boolean_in_a_file_is_refused_because_vllm_would_ignore_it(tmp_path):
    # vLLM 0.32.0's `vllm serve --config` passes only true booleans on: `false` would leave the default (on)
    # in force.
    path = tmp_path / "c.yaml"
    path.write_text("max_num_seqs: 1\nenable_prefix_caching: false\n")
    with pytest.raises(ValueError, match="no-enable-prefix-caching: true"):
        EngineConfig.from_yaml(path)
    path.write_text("max_num_seqs: 1\nno-enable-prefix-caching: true\n")
    assert not EngineConfig.from_yaml(path).enable_prefix_caching
    assert not EngineConfig.from_dict({"enable_prefix_caching": False}).enable_prefix_caching  # Python: kept


def test_a_no_option_takes_true_and_never_contradicts_its_option():
    with pytest.raises(ValueError, match="takes true"):
        EngineConfig.from_dict({"no_enable_prefix_caching": False})
    with pytest.raises(ValueError, match="keep one"):
        EngineConfig.from_dict({"enable-prefix-caching": True, "no-enable-prefix-caching": True})


def test_batch_limits_are_the_filled_in_ones_and_a_scheduler_needs_them():
    from helpers.engine.kv_cache_manager import KVCacheManager
    from helpers.engine.scheduler import Scheduler

    unset = EngineConfig()
    with pytest.raises(ValueError, match="for_gpu"):
        unset.batch_limits()
    with pytest.raises(ValueError, match="for_gpu"):
        Scheduler(unset, KVCacheManager(8, 16, True))
    filled = unset.for_gpu("a100-80gb")
    assert filled.batch_limits() == (filled.max_num_seqs, filled.max_num_batched_tokens) == (256, 2048)
    assert Scheduler(filled, KVCacheManager(8, 16, True)).max_num_seqs == 256
