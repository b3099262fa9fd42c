from pathlib import Path

import pytest

from tests.episode.conftest import quick_copy
from vtbench.errors import NotPrepared
from vtbench.prepare import load_prepared, prepare_task, prepared_by_id
from vtbench.prepare.digest import pack_digest
from vtbench.tasks import load_task


@pytest.fixture
def quick_arith(tmp_path: Path) -> Path:
    return quick_copy(tmp_path, "arith")


def test_an_unprepared_task_is_refused_with_the_command_that_prepares_it(
        quick_arith: Path) -> None:
    with pytest.raises(NotPrepared, match="not prepared") as refused:
        load_prepared(load_task(quick_arith))
    assert refused.value.hint == "run: vtbench prepare --task arith"
    with pytest.raises(NotPrepared, match="not prepared"):
        prepared_by_id("arith", "0" * 64)


def test_a_prepared_task_carries_its_initial_model_scores_and_digest(quick_arith: Path) -> None:
    task = load_task(quick_arith)
    scores = prepare_task(task)
    prepared = load_prepared(task)
    assert prepared.id == "arith" and prepared.digest == pack_digest(task)
    assert (prepared.initial_model / "config.json").exists()
    assert prepared.initial_test == scores["initial"]["test"]
    assert prepared.reference_test == scores["reference"]["test"]
    assert (prepared.light_gain, prepared.reference_gain) == (
        scores["margin"]["light"]["gain"], scores["margin"]["reference"]["gain"])


@pytest.mark.slow
def test_the_grader_finds_a_pack_outside_the_builtin_tasks_by_its_id(quick_arith: Path) -> None:
    task = load_task(quick_arith)
    prepare_task(task)
    found = prepared_by_id("arith", pack_digest(task))
    assert found.task.root == quick_arith.resolve()
    assert found.scores == load_prepared(task).scores


@pytest.mark.slow
def test_a_task_prepared_again_mid_episode_is_refused_by_id(quick_arith: Path) -> None:
    task = load_task(quick_arith)
    prepare_task(task)
    started_with = pack_digest(task)
    readme = quick_arith / "README.md"
    readme.write_text(readme.read_text() + "\nOne more line.\n")
    with pytest.raises(NotPrepared, match="changed since it was prepared"):
        load_prepared(task)
    prepare_task(task)
    with pytest.raises(NotPrepared, match="prepared again since this episode started"):
        prepared_by_id("arith", started_with)
    assert prepared_by_id("arith", pack_digest(task)).digest != started_with
