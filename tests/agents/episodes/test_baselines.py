"""The filter and tuner baselines in real episodes (quick copy of arith): each validates
what it trains, submits the best, and the change classifier finds it changed only its own
component."""

import json
import subprocess
import tomllib
from pathlib import Path

import pytest

from vtbench.agents.tuner_agent import hyperparameters
from vtbench.analysis import episode_history
from vtbench.episode.record import EpisodeRecord, Validation
from vtbench.episode.runner import RunOptions, run_episode

pytestmark = pytest.mark.slow


def best(record: EpisodeRecord) -> Validation:
    return max(record.validations, key=lambda v: v.score if v.score is not None else -1.0)


def changes_by_candidate(record: EpisodeRecord, folder: Path) -> dict[str, list[str]]:
    history = episode_history(record, folder)
    assert history.classified, history.error
    return {step.candidate: (step.change.touched if step.change else [])
            for step in history.steps if step.event == "validation" and step.candidate}


def snapshot_file(folder: Path, commit: str, path: str) -> str:
    return subprocess.run(["git", "--git-dir", str(folder / "snapshots.git"), "show",
                           f"{commit}:{path}"], capture_output=True, text=True,
                          check=True).stdout


def test_the_filter_changes_only_the_data_and_submits_its_best(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    record, path = run_episode(RunOptions(task=str(prepared_arith), agent="filter",
                                          out=tmp_path, budget_minutes=8))
    assert record.status == "finished" and record.submitted and record.submission
    assert [v.candidate for v in record.validations] == ["models/initial", "models/filtered"]
    assert record.submission.candidate == best(record).candidate
    changes = changes_by_candidate(record, path.parent)
    assert changes["models/filtered"] == ["D"]
    filtered = next(c for c in record.candidates if c.name == "models/filtered")
    assert filtered.trained_with == "components" and filtered.data_hash is not None


def test_the_tuner_changes_only_hyperparameters_and_submits_its_best_with_its_config(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    record, path = run_episode(RunOptions(task=str(prepared_arith), agent="tuner",
                                          out=tmp_path, budget_minutes=10))
    assert record.status == "finished" and record.submitted and record.submission
    tried = [v.candidate for v in record.validations]
    assert tried[0] == "models/initial" and len(tried) == 5, tried
    assert all(candidate.startswith("models/tune-") for candidate in tried[1:])
    changes = changes_by_candidate(record, path.parent)
    assert all(changes[candidate] == ["T"] for candidate in tried[1:]), changes
    assert all(c.trained_with == "components" for c in record.candidates
               if c.origin == "trained"), record.candidates
    submitted = record.submission.candidate
    assert submitted == best(record).candidate
    config = tomllib.loads(snapshot_file(path.parent, record.submission.snapshot,
                                         "trainer/config.toml"))
    workspace = path.parent / "workspace"
    if submitted == "models/initial":
        shipped = prepared_arith.parent / "_tiny" / "trainer" / "config.toml"
        assert {k: config[k] for k in ("lr", "steps", "schedule")} == hyperparameters(shipped)
    else:
        trained_with = json.loads((workspace / submitted / "train_log.json").read_text())
        assert config == trained_with["config"]
