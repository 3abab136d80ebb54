"""Every config the course ships or writes is accepted by real ``vllm serve``, every key as written.

Checked with vLLM's own parser and engine-config validation (``probes/accept_config.py``): the YAML files in
``data/vllm/``, the ``vllm serve`` command lines ``python -m helpers vllm`` prints for them, and the tiny-
model configs A and B that notebook 12 starts. The model is the tiny one in every case (the course's 13B
cannot be loaded offline), so a file's ``model`` key is left out of the copy that is checked: with
``--config``, the file's ``model`` would win over the command line's. Two controls show the check can fail:
a removed option is rejected, and a ``false`` under ``--config`` is dropped (vLLM 0.32.0
``FlexibleArgumentParser.load_config_file`` looks for ``--no-<key>`` among the top-level parser's options,
not the ``serve`` subcommand's).
"""
from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers.lessons.config_ab_launch import vllm_launch
from helpers.vllm_local import config_a, config_b, ensure_tiny_model
from helpers.vllm_local.server import write_config

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "data" / "vllm").glob("*.yaml"))


def expected_args(options: dict[str, Any]) -> dict[str, Any]:
    """What vLLM's parsed namespace must hold for these YAML options (``no-x: true`` means ``x`` False)."""
    expected = {}
    for key, value in options.items():
        if key == "model":
            continue
        if key.startswith("no-") and value is True:
            key, value = key[3:], False
        expected[key.replace("-", "_")] = value
    return expected


def matches(parsed: Any, written: Any) -> bool:
    return parsed == written or (isinstance(parsed, list) and parsed == [written])


CONTROLS = {"removed swap_space": {"swap_space": 4},
            "false dropped": {"enable_prefix_caching": False, "max_num_seqs": 3}}


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> dict[str, tuple[list[str], dict[str, Any]]]:
    """name -> (the words after ``vllm serve``, the options they were written from)."""
    model = str(ensure_tiny_model())
    folder = tmp_path_factory.mktemp("configs")
    made: dict[str, tuple[list[str], dict[str, Any]]] = {}
    for path in SHIPPED:
        options = yaml.safe_load(path.read_text(encoding="utf-8"))
        copy = folder / path.name
        copy.write_text(yaml.safe_dump({k: v for k, v in options.items() if k != "model"}), encoding="utf-8")
        made[f"file {path.name}"] = ([model, "--config", str(copy)], options)
        words = shlex.split(vllm_launch(path, "a100-80gb").serve)
        assert words[:3] == ["vllm", "serve", options["model"]], words
        made[f"command {path.name}"] = ([model, *words[3:]], options)
    for name, options in (("tiny A", config_a()), ("tiny B", config_b()), *CONTROLS.items()):
        path = write_config(options, "accept-" + name.replace(" ", "-"))
        made[name] = ([model, "--config", str(path)], options)
    return made


@pytest.fixture(scope="module")
def verdicts(probe, cases) -> dict[str, dict[str, Any]]:
    answers = probe("accept_config", stdin=[{"name": n, "argv": argv} for n, (argv, _) in cases.items()])
    return {answer["name"]: answer for answer in answers}


CASES = [f"{kind} {p.name}" for p in SHIPPED for kind in ("file", "command")] + ["tiny A", "tiny B"]


@pytest.mark.parametrize("name", CASES)
def test_vllm_accepts_the_config_with_every_key_as_written(verdicts, cases, name) -> None:
    verdict, options = verdicts[name], cases[name][1]
    assert verdict["ok"], f"{name}: vLLM 拒绝了这个配置：{verdict['error']}（改 data/vllm/ 或生成它的代码）"
    wrong = {k: (verdict["args"].get(k, "<missing>"), v) for k, v in expected_args(options).items()
             if not matches(verdict["args"].get(k, "<missing>"), v)}
    assert not wrong, f"{name}: 这些键 vLLM 没有按写的值接收（vLLM 解析到的, 文件里写的）：{wrong}"


def test_a_removed_option_is_rejected(verdicts) -> None:
    verdict = verdicts["removed swap_space"]
    assert not verdict["ok"] and "swap" in verdict["error"], verdict


def test_a_false_under_config_is_dropped(verdicts) -> None:
    """Why the course writes ``no-enable-prefix-caching: true``: the ``false`` form never reaches vLLM."""
    verdict = verdicts["false dropped"]
    assert verdict["ok"] and verdict["changed"].get("max_num_seqs") == 3, verdict
    assert "enable_prefix_caching" not in verdict["changed"], verdict
