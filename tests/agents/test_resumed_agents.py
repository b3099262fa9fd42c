"""A resumed episode runs its agent again in the workspace the interrupted run left: the
lightweight agents begin their work again from the components as shipped, so the filter
finds the same rows to drop (and trains) and the tuner's recipe does not compound; every
scripted agent takes up what it validated before the restart, from the real grader's
status, without validating or training it again."""

import json
import shutil
import time
from pathlib import Path

import pytest

from tests.evaluation.conftest import tiny_model  # noqa: F401
from tests.grader.conftest import GraderProcess, grader, small_task, workspace  # noqa: F401
from vtbench.agents.filter_agent import filter_data
from vtbench.agents.row_checks import row_check
from vtbench.agents.scripted import SHIPPED, BestSoFar, start_from_shipped
from vtbench.agents.tuner_agent import Tuner, hyperparameters, recipe, set_hyperparameters
from vtbench.client import DEADLINE_ENV, GraderClient
from vtbench.tasks import find_task
from vtbench.tasks.materialize import materialize


def extract_workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "extract-workspace"
    materialize(find_task("extract"), folder)
    return folder


def contents(folder: Path) -> dict[str, bytes]:
    files = (p for p in sorted(folder.rglob("*")) if p.is_file())
    return {str(p.relative_to(folder)): p.read_bytes() for p in files
            if p.relative_to(folder).parts[0] != "models"}


def test_the_filter_started_again_finds_the_same_rows_to_drop(tmp_path: Path) -> None:
    folder = extract_workspace(tmp_path)
    shipped = contents(folder)
    start_from_shipped(folder)
    first = filter_data(folder / "data", row_check(folder))
    assert first.dropped > 0
    start_from_shipped(folder)  # the resumed run
    assert contents(folder) == shipped
    assert filter_data(folder / "data", row_check(folder)) == first


def test_the_tuner_started_again_tunes_the_shipped_settings_not_its_own(
        tmp_path: Path) -> None:
    folder = extract_workspace(tmp_path)
    config = folder / "trainer" / "config.toml"
    start_from_shipped(folder)
    first = recipe(hyperparameters(config))
    set_hyperparameters(config, first)
    start_from_shipped(folder)
    assert recipe(hyperparameters(config)) == first


def test_an_interrupted_first_save_is_made_again_from_the_workspace(tmp_path: Path) -> None:
    folder = extract_workspace(tmp_path)
    shipped = contents(folder)
    partial = (folder / SHIPPED).with_name(f"{SHIPPED.name}.partial")
    (partial / "data").mkdir(parents=True)
    start_from_shipped(folder)
    assert not partial.exists()
    assert contents(folder / SHIPPED) == {k: v for k, v in shipped.items()
                                          if k.startswith("data/") or k == "trainer/config.toml"}


def test_an_agent_started_again_takes_up_its_earlier_validations_without_repeating_them(
        grader: GraderProcess, small_task: Path, workspace: Path) -> None:  # noqa: F811
    grader.start()
    shutil.copytree(small_task / "public" / "harness", workspace / "harness")
    shutil.copytree(workspace / "models" / "good", workspace / "models" / "gone")
    client = GraderClient(grader.socket, grader.create_episode(small_task, workspace))
    first = client.validate("models/good")
    with_harness = client.validate("models//good/", harness="harness")
    client.validate("models/gone")
    views = client.status().validations
    assert [(v.model, v.harness, v.harness_folder) for v in views] == [
        ("models/good", "pristine", None), ("models/good", "candidate", "harness"),
        ("models/gone", "pristine", None)]
    shutil.rmtree(workspace / "models" / "gone")
    (workspace / "trainer").mkdir()
    (workspace / "trainer" / "train.py").write_text("raise SystemExit('trained again')\n")
    said: list[str] = []

    board = BestSoFar(client, said.append, workspace)  # the agent's second start

    assert board.kept("models/good") and not board.kept("models/gone")
    assert board.train("good", seed=0) == "models/good"
    assert board.validate("models/good") == first.score
    assert board.validate("models/good", harness="harness") == with_harness.score
    assert len(client.status().validations) == 3
    assert board.best()[1:] == max([(first.score, "models/good", None),
                                    (with_harness.score, "models/good", "harness")],
                                   key=lambda r: r[0] or 0.0)[1:]
    assert "resumed: 2 validation(s) from before the restart" in said
    assert "kept models/good: trained and validated before the restart" in said


def test_a_resumed_tuner_takes_up_a_candidate_it_would_have_no_time_to_train_again(
        grader: GraderProcess, small_task: Path, workspace: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    grader.start()
    shutil.copytree(small_task / "public" / "data", workspace / "data")
    shutil.copytree(small_task.parent / "_tiny" / "trainer", workspace / "trainer")
    (workspace / "trainer" / "train.py").write_text("raise SystemExit('trained again')\n")
    models = workspace / "models"
    (models / "good").rename(models / "initial")
    (models / "initial" / "train_log.json").write_text(
        json.dumps({"seconds": 10**6, "config": {"steps": 1}}))  # no training fits
    shutil.copytree(models / "initial", models / "tune-1")
    client = GraderClient(grader.socket, grader.create_episode(small_task, workspace))
    client.validate("models/initial")
    client.validate("models/tune-1")
    monkeypatch.setenv(DEADLINE_ENV, str(time.time() + 600))
    said: list[str] = []

    tuner = Tuner(client, seed=0, workspace=workspace, say=said.append)
    tuner.start()
    tuner.search()

    assert "kept models/tune-1: trained and validated before the restart" in said
    assert any(line.startswith("validated models/tune-1 (harness initial) before the restart")
               for line in said)
    assert any(line.startswith("skipping") and "would not end in time" in line
               for line in said)
    assert len(client.status().validations) == 2
