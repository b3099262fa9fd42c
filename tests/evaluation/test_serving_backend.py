"""Which engine serves candidates: the task's ``[serving] backend``, or the operator's
``$VTBENCH_SERVING_BACKEND``; recorded in the task's digest."""

from pathlib import Path

import pytest

from tests.evaluation.test_evaluate import some_items
from vtbench.errors import MissingDependency, SpecError
from vtbench.evaluation import evaluate
from vtbench.prepare.digest import pack_digest
from vtbench.tasks import find_task


def test_the_task_chooses_the_backend_unless_the_operator_does(
        monkeypatch: pytest.MonkeyPatch) -> None:
    task = find_task("dsl")
    assert task.spec.serving.backend == task.serving_backend == "transformers"
    monkeypatch.setenv("VTBENCH_SERVING_BACKEND", "vllm")
    assert task.serving_backend == "vllm"
    monkeypatch.setenv("VTBENCH_SERVING_BACKEND", "tgi")
    with pytest.raises(SpecError, match="no serving backend"):
        _ = task.serving_backend


def test_another_backend_is_another_preparation(monkeypatch: pytest.MonkeyPatch) -> None:
    task = find_task("arith")
    default = pack_digest(task)
    monkeypatch.setenv("VTBENCH_SERVING_BACKEND", "vllm")
    assert pack_digest(task) != default
    monkeypatch.setenv("VTBENCH_SERVING_BACKEND", "transformers")
    assert pack_digest(task) == default


def test_an_evaluation_on_vllm_without_vllm_says_what_to_install(
        tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VTBENCH_SERVING_BACKEND", "vllm")
    with pytest.raises(MissingDependency, match="vllm") as missing:
        evaluate(find_task("dsl"), tiny_model, "val", items=some_items("dsl", 2))
    assert "pip install" in (missing.value.hint or "")
