"""The built-in reference agent in a real episode (quick copy of arith), and the change
classifier describing what it really did."""

import json
from pathlib import Path

import pytest

from vtbench.analysis import episode_history
from vtbench.episode.runner import RunOptions, run_episode

pytestmark = pytest.mark.slow


def test_the_reference_agent_co_designs_and_is_classified_as_it_acted(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    record, path = run_episode(RunOptions(task=str(prepared_arith), agent="reference",
                                          out=tmp_path, budget_minutes=10))
    assert record.status == "finished" and record.submitted
    assert record.validations_used == 5
    origins = {c.name: c.origin for c in record.candidates}
    assert origins["models/initial"] == "initial"
    assert origins["models/clean-data"] == origins["models/tuned-a"] == "trained"
    merged = next(c for c in record.candidates if c.name == "models/merged")
    assert merged.origin == "merged" and merged.method == "linear"
    assert sorted(merged.parents) == ["models/tuned-a", "models/tuned-b"]

    history = episode_history(record, path.parent)
    assert history.classified, history.error
    steps = {s.candidate: s for s in history.steps if s.event == "validation"}
    data_change = steps["models/clean-data"].change
    assert data_change is not None and data_change.touched == ["D"]
    data_kinds = set(data_change.components[0].kinds)
    assert {"filter", "augment"} <= data_kinds
    trainer_change = steps["models/tuned-a"].change
    assert trainer_change is not None and trainer_change.touched == ["T"]
    assert {"algorithm", "hyperparameters"} <= set(trainer_change.components[0].kinds)
    assert steps["models/merged"].origin == "merged"
    assert steps["models/merged"].change is not None
    assert steps["models/merged"].change.touched == []


def test_a_reference_episode_splits_its_wall_time_into_agent_training_grading_and_runner(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    record, path = run_episode(RunOptions(task=str(prepared_arith), agent="reference",
                                          out=tmp_path, budget_minutes=10))
    spent = record.spent
    assert spent.agent_seconds > 0 and spent.grading_seconds > 0
    models = path.parent / "workspace" / "models"
    claimed = {name: json.loads((models / name / "train_log.json").read_text())["seconds"]
               for name in ("clean-data", "tuned-a", "tuned-b")}
    # the trainer's own clock (model load to save) lies inside the process the runner saw;
    # tuned-a and tuned-b ran side by side or in turn: at least the longer of them counts
    assert spent.training_seconds >= claimed["clean-data"] + max(
        claimed["tuned-a"], claimed["tuned-b"]) - 2.0
    assert spent.training_seconds > 0 and spent.runner_seconds > 0
    parts = (spent.agent_seconds + spent.training_seconds + spent.grading_seconds
             + spent.runner_seconds)
    assert abs(parts - spent.wall_seconds) <= 0.05 * spent.wall_seconds
    assert abs(spent.unaccounted_seconds) <= 0.05 * spent.wall_seconds
