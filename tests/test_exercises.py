"""练习 checks: each accepts its solution, names each typical mistake, never raises on a learner's input."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

import helpers
from helpers.exercises import NOTEBOOKS, ChoiceExercise, NumberExercise, notebook_exercises
from helpers.exercises.check import _fmt
from helpers.exercises.solutions import SOLUTIONS

EXERCISES = [ex for nb in NOTEBOOKS for ex in notebook_exercises(nb)]
IDS = [ex.id for ex in EXERCISES]


def _mistakes(ex):
    if isinstance(ex, ChoiceExercise) and ex.options:
        return [(f"option_{letter}", letter) for letter in ex.wrong_messages()]
    return [(m.key, m.value) for m in ex.mistakes(ex.expected())]


def test_every_notebook_has_three_to_five_exercises_with_unique_ids_and_names() -> None:
    for nb in NOTEBOOKS:
        exercises = notebook_exercises(nb)
        assert 3 <= len(exercises) <= 5, nb
        assert all(ex.id.startswith(nb + ".") for ex in exercises)
    assert len(set(IDS)) == len(IDS)
    assert len({ex.name for ex in EXERCISES}) == len(EXERCISES)


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_check_is_exported_under_its_name_and_has_a_solution(ex) -> None:
    assert getattr(helpers, ex.name) is ex
    assert ex.name in SOLUTIONS


def test_solutions_cover_exactly_the_exercises() -> None:
    assert set(SOLUTIONS) == {ex.name for ex in EXERCISES}


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_the_solution_passes(ex, capsys) -> None:
    result = ex(SOLUTIONS[ex.name]())
    assert result.passed, result.message
    assert "正确" in capsys.readouterr().out


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_each_typical_mistake_is_named_with_the_hint(ex) -> None:
    mistakes = _mistakes(ex)
    assert mistakes, f"{ex.id} recognises no typical mistake"
    for key, value in mistakes:
        result = ex.judge(value)
        assert (result.status, result.mistake) == ("wrong", key), (ex.id, key, value, result.message)
        assert ex.hint in result.message


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_unanswered_is_friendly_and_garbage_is_invalid_never_an_exception(ex, capsys) -> None:
    assert ex(...).status == "unanswered"
    assert "未作答" in capsys.readouterr().out
    for garbage in (None, True, float("nan"), [1], {"a": 1}, ""):
        assert ex.judge(garbage).status == "invalid", (ex.id, garbage)
    kind_mismatch = "12" if isinstance(ex, NumberExercise) else 12
    assert ex.judge(kind_mismatch).status == "invalid"


@pytest.mark.parametrize("ex", [e for e in EXERCISES if isinstance(e, NumberExercise)],
                         ids=[e.id for e in EXERCISES if isinstance(e, NumberExercise)])
def test_an_unknown_wrong_number_gets_the_hint_not_the_answer(ex) -> None:
    expected = ex.expected()
    value = expected * 3.7 + 11
    assert not any(math.isclose(value, float(v), rel_tol=0.05) for _, v in _mistakes(ex))
    result = ex.judge(value)
    assert result.status == "wrong" and result.mistake is None
    assert ex.hint in result.message
    shown = result.message.replace(_fmt(value), "").replace(ex.id, "")
    assert len(_fmt(expected)) < 2 or _fmt(expected) not in shown


def test_kv_bytes_hand_computed_for_phi4_mini() -> None:
    """Phi-4-mini: 32 layers x 8 KV heads x head_dim 128 x (K and V) x 2 bytes."""
    check = helpers.check_kv_bytes_per_token
    assert check.judge(131072).passed
    assert check.judge(393216).mistake == "hidden_size"  # 2 x 32 x hidden_size 3072 x 2
    assert check.judge(65536).mistake == "kv_once"


def test_gib_and_gb_are_told_apart() -> None:
    check = helpers.check_batch_kv_gib  # Llama-3-8B, 32 x 4096 tokens, fp16: exactly 16 GiB
    assert check.judge(16).passed
    assert check.judge(17.18).mistake == "gib_vs_gb"


def test_p99_by_sorted_index_is_named() -> None:
    assert helpers.check_p99.judge(max(helpers.TTFT_SAMPLES_MS)).mistake == "sorted_int_n"


def test_role_chunk_as_first_token_is_named() -> None:
    assert helpers.check_ttft_from_chunks.judge(41).mistake == "role_chunk"


def test_choice_answers_ignore_case_and_quotes() -> None:
    assert helpers.check_finish_reason.judge(" b ").passed
    assert helpers.check_base_url.judge("'https://taotoken.net/api/v1/'").passed
    assert helpers.check_finish_reason.judge("E").status == "invalid"


def test_weights_forgotten_is_named_for_the_capacity_question() -> None:
    exercise = helpers.check_requests_that_fit
    forgot = next(m for m in exercise.mistakes(exercise.expected()) if m.key == "weights_forgotten")
    assert forgot.value > 2 * exercise.expected()  # the pool as if the weights took no memory: far above
    result = exercise.judge(forgot.value)
    assert result.mistake == "weights_forgotten" and "权重" in result.message


def test_goodput_limits_are_inclusive_and_a_one_token_request_is_good() -> None:
    from helpers.exercises.ex09 import GOODPUT_DURATION_S, GOODPUT_REQUESTS

    check = helpers.check_goodput  # rows 2 and 3 sit exactly on a limit; row 6 has one output token
    assert check.judge(4 / GOODPUT_DURATION_S).passed  # rows 1, 2, 3 and the one-token row 6 are good
    assert check.judge(2 / GOODPUT_DURATION_S).mistake == "strict_limit"
    assert check.judge(3 / GOODPUT_DURATION_S).mistake == "one_token_bad"
    # the benchmark lasts at least as long as its longest request
    assert GOODPUT_DURATION_S >= max(r["e2el_s"] for r in GOODPUT_REQUESTS if r["success"])


def test_slo_winner_and_4090_fit_follow_the_helpers() -> None:
    from helpers.exercises.ex09 import _max_rate_within_slo

    assert (_max_rate_within_slo("X"), _max_rate_within_slo("Y")) == (2.0, 3.5)  # Y's 3.5 is TTFT == 1000
    assert helpers.check_slo_search_winner.correct() == "B"
    fits = {w: helpers.plan_capacity("llama-2-13b", "rtx-4090", gpu_memory_utilization=0.92,
                                     max_model_len=4096, weight_dtype=w).fits for w in ("fp16", "awq-int4")}
    assert fits == {"fp16": False, "awq-int4": True} and helpers.check_fits_4090.correct() == "B"


def test_result_does_not_display_twice_in_jupyter() -> None:
    result = helpers.check_little_law.judge(4)
    assert result._ipython_display_() is None and result.passed


def test_exercise_cells_are_unanswered_clean_and_unique() -> None:
    from helpers.exercises.cells import ANSWER_LINE, exercise_cells

    ids = []
    for nb in NOTEBOOKS:
        cells = exercise_cells(nb)
        assert cells[0]["source"][0].startswith("## 练习")
        answers = [c for c in cells if c["metadata"]["inference_lab"].get("role") == "answer"]
        assert len(answers) == len(notebook_exercises(nb))
        for cell, ex in zip(answers, notebook_exercises(nb)):
            assert "".join(cell["source"]) == f"{ANSWER_LINE}\n{ex.name}(answer)"
            assert cell["outputs"] == [] and cell["execution_count"] is None
        ids += [c["id"] for c in cells]
    assert len(ids) == len(set(ids))


def test_with_exercises_replaces_its_own_section_only() -> None:
    from helpers.exercises.cells import with_exercises

    nb = {"cells": [{"cell_type": "markdown", "id": "keep1", "metadata": {}, "source": ["# 02"]}]}
    once = with_exercises(nb, "02")
    assert with_exercises(once, "02") == once
    assert once["cells"][0] == nb["cells"][0]


def test_nbgrader_source_has_a_solution_and_a_locked_graded_test_per_exercise(tmp_path) -> None:
    import json

    from helpers.exercises.graded import nbgrader_source

    nb = nbgrader_source({"cells": []}, "04")
    solutions = [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("solution")]
    tests = [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade")]
    assert len(solutions) == len(tests) == len(notebook_exercises("04"))
    assert all(t["metadata"]["nbgrader"]["locked"] for t in tests)
    assert all(t["metadata"]["nbgrader"]["points"] == 1 for t in tests)
    namespace: dict = {}
    exec("from helpers import " + ", ".join(ex.name for ex in notebook_exercises("04")), namespace)
    for solution, test in zip(solutions, tests):  # the source notebook passes its own tests
        source = "".join(solution["source"])
        assert "### BEGIN SOLUTION" in source and "### END SOLUTION" in source
        exec(source, namespace)
        exec("".join(test["source"]), namespace)
    assert len({c["id"] for c in nb["cells"]}) == len(nb["cells"])
    json.dumps(nb)


INTEGER = [ex for ex in EXERCISES if isinstance(ex, NumberExercise) and ex.integer]


def test_counts_are_integer_exercises() -> None:
    assert {ex.id for ex in INTEGER} >= {"02.1", "02.3", "05.1", "05.3", "07.2"}


@pytest.mark.parametrize("ex", INTEGER, ids=[e.id for e in INTEGER])
def test_an_integer_answer_is_checked_exactly(ex) -> None:
    right = ex.expected()
    assert float(right).is_integer()
    assert ex.judge(right).passed and ex.judge(int(right)).passed
    for near in (right + 1, right - 1, right + 0.4, right - 0.4):
        assert ex.judge(near).status == "wrong", (ex.id, near)


def test_the_floor_is_right_even_when_the_fraction_passes_a_half() -> None:
    """02.3: vLLM's max concurrency 5.67 means 5 requests fit; 6 (rounded) is the named mistake."""
    from helpers.exercises.ex02 import _fit_plan

    exact = _fit_plan().max_concurrency
    assert exact % 1 > 0.5  # the case a ±0.5 tolerance around the fraction got wrong
    check = helpers.check_requests_that_fit
    assert check.judge(math.floor(exact)).passed
    assert check.judge(round(exact)).mistake == "rounded"


def test_02_3_is_not_a_cell_of_notebook_02s_capacity_table() -> None:
    import json

    from helpers.exercises.cells import MARK
    from helpers.exercises.ex02 import FIT_GPU, FIT_LEN, FIT_MODEL, FIT_UTIL

    path = Path(__file__).resolve().parents[1] / "notebooks" / "02_kv_cache_memory.ipynb"
    lesson = "".join("".join(c["source"]) for c in json.loads(path.read_text("utf-8"))["cells"]
                     if MARK not in c.get("metadata", {}))  # the lesson, without the 练习 section
    assert FIT_LEN != 4096 and FIT_UTIL != 0.9  # the table: every model x GPU at max_model_len 4096, 0.9
    assert FIT_MODEL in lesson and FIT_GPU in lesson
    assert f"max_model_len={FIT_LEN}" not in lesson  # no plan of the lesson at this length


def test_graded_mode_keeps_the_answers_and_checks_still_work(monkeypatch) -> None:
    from helpers.exercises.check import GRADED_ENV

    monkeypatch.setenv(GRADED_ENV, "1")
    for ex in EXERCISES:
        sealed = ex.correct if isinstance(ex, ChoiceExercise) and ex.options else ex.expected
        with pytest.raises(PermissionError, match="评分模式"):
            sealed()
        assert ex.judge(SOLUTIONS[ex.name]()).passed, ex.id


def test_no_exercise_module_computes_at_import(monkeypatch) -> None:
    import importlib

    import helpers.exercises.ex09 as ex09
    import helpers.exercises.ex10 as ex10
    import helpers.kvcache.capacity

    def boom(*args, **kwargs):
        raise AssertionError("computed at import")

    monkeypatch.setattr(helpers.kvcache.capacity, "plan_capacity", boom)
    monkeypatch.setattr(ex09, "_max_rate_within_slo", boom)
    importlib.reload(ex10)  # would call plan_capacity while building check_fits_4090
    monkeypatch.undo()
    importlib.reload(ex10)
    importlib.reload(ex09)


def test_every_fit_combination_has_an_option() -> None:
    from helpers.exercises.ex10 import FIT_LETTERS

    assert sorted(FIT_LETTERS) == [(a, b) for a in (False, True) for b in (False, True)]
    assert sorted(FIT_LETTERS.values()) == sorted(helpers.check_fits_4090.options)


def test_wrong_option_messages_follow_the_outcome(monkeypatch) -> None:
    import helpers.exercises.ex09 as ex09
    import helpers.exercises.ex10 as ex10

    check = helpers.check_slo_search_winner
    assert "3.5 个/秒" in check.judge("A").message  # Y's highest rate within the SLO, from the probes
    flipped = {"X": ex09.SEARCH_PROBES["Y"], "Y": ex09.SEARCH_PROBES["X"]}
    monkeypatch.setattr(ex09, "SEARCH_PROBES", flipped)
    assert check.judge("A").passed and check.judge("B").mistake == "option_B"
    assert "配置 X 满足 SLO 的最高一档是 3.5 个/秒" in check.judge("B").message

    fp16 = ex10._fit_plan("fp16")
    assert f"{fp16.weights_bytes / 2**30:.1f} GiB" in helpers.check_fits_4090.judge("A").message
    monkeypatch.setattr(ex10, "FIT_UTILIZATION", 0.35)  # AWQ's KV pool no longer holds a 4096-token request
    assert helpers.check_fits_4090.judge("C").passed, helpers.check_fits_4090.judge("C").message
    assert "装得下" not in helpers.check_fits_4090.judge("B").message.split("提示")[0].replace("装不下", "")
