"""The lightweight baselines in real episodes (quick copy of arith): each validates what it
trains and submits the best, and its submission differs from the initial system only in
what its description allows. Every snapshot the episode took (validations, submission,
the lineage of every candidate), read from ``snapshots.git`` beside the workspace, differs
from snapshot 0 only in ``data/*.jsonl`` (filter, light) and in ``trainer/config.toml``'s
``lr``, ``steps``, ``schedule`` and ``warmup_steps`` (tuner, light); never in the harness,
the trainer's code or TASK.md; the data rows are rows of the shipped data or those rows in
the harness's prompt format, with the same completion; every candidate was trained by the
trainer's programs on the components (no merge, no reuse, nothing trained elsewhere), on
the shipped data or trainer where the agent may not change them."""

import json
import subprocess
import tomllib
from pathlib import Path

import pytest

from vtbench.agents.tuner_agent import TUNED
from vtbench.analysis import episode_history
from vtbench.episode.record import EpisodeRecord, Validation
from vtbench.episode.runner import RunOptions, run_episode
from vtbench.tasks import load_task

pytestmark = pytest.mark.slow
CONFIG = "trainer/config.toml"


def best(record: EpisodeRecord) -> Validation:
    return max(record.validations, key=lambda v: v.score if v.score is not None else -1.0)


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(folder / "snapshots.git"), *args],
                          capture_output=True, text=True, check=True).stdout


def snapshots(record: EpisodeRecord) -> set[str]:
    assert record.submission is not None
    return ({v.snapshot for v in record.validations} | {record.submission.snapshot}
            | {c.snapshot for c in record.candidates if c.snapshot})


def rows(folder: Path, commit: str) -> list[dict]:
    names = git(folder, "ls-tree", "-r", "--name-only", commit, "data").split()
    return [json.loads(line) for name in names if name.endswith(".jsonl")
            for line in git(folder, "show", f"{commit}:{name}").splitlines()]


def assert_only_allowed_changes(record: EpisodeRecord, folder: Path, task: Path, *,
                                data: bool, config: bool) -> None:
    first = git(folder, "rev-list", "--max-parents=0", "HEAD").strip()
    shipped_config = tomllib.loads(git(folder, "show", f"{first}:{CONFIG}"))
    builder = load_task(task).builder
    shipped_rows = rows(folder, first)
    shipped = {(builder.normalize(builder.row_input(row)), row["completion"])
               for row in shipped_rows}
    for commit in snapshots(record):
        changed = git(folder, "diff", "--name-only", first, commit).split()
        allowed = [path for path in changed if (data and path.startswith("data/")
                                                and path.endswith(".jsonl"))
                   or (config and path == CONFIG)]
        assert changed == allowed, (commit, changed)
        settings = tomllib.loads(git(folder, "show", f"{commit}:{CONFIG}"))
        assert {k: v for k, v in settings.items() if k not in TUNED} == {
            k: v for k, v in shipped_config.items() if k not in TUNED}
        if not any(path.startswith("data/") for path in changed):
            continue
        kept = rows(folder, commit)
        assert len(kept) < len(shipped_rows)
        assert all((builder.normalize(builder.row_input(row)), row["completion"]) in shipped
                   and row["prompt"].startswith("Question: ") for row in kept)
    assert_lineage_shows_only_allowed_changes(record, folder, data=data, config=config)


def assert_lineage_shows_only_allowed_changes(record: EpisodeRecord, folder: Path, *,
                                              data: bool, config: bool) -> None:
    """Every candidate was trained by the trainer's programs on ``data/``, as the runner
    saw it; the data and trainer trees it was trained on are the shipped ones where the
    agent may not change them."""
    first = git(folder, "rev-list", "--max-parents=0", "HEAD").strip()
    assert {c.origin for c in record.candidates} <= {"initial", "trained"}
    for candidate in (c for c in record.candidates if c.origin == "trained"):
        assert candidate.trained_with == "components", candidate
        assert candidate.snapshot is not None
        trees = {part: git(folder, "rev-parse", f"{candidate.snapshot}:{part}").strip()
                 for part in ("data", "trainer")}
        assert (candidate.data_hash, candidate.trainer_hash) == (trees["data"], trees["trainer"])
        if not data:
            assert candidate.data_hash == git(folder, "rev-parse", f"{first}:data").strip()
        if not config:
            assert candidate.trainer_hash == git(folder, "rev-parse", f"{first}:trainer").strip()


def finished_episode(task: Path, agent: str, out: Path) -> tuple[EpisodeRecord, Path]:
    record, path = run_episode(RunOptions(task=str(task), agent=agent, out=out,
                                          budget_minutes=10))
    assert record.status == "finished" and record.submitted and record.submission
    assert record.submission.candidate == best(record).candidate
    history = episode_history(record, path.parent)
    assert history.classified, history.error
    return record, path.parent


def test_the_filter_changes_only_the_data_and_submits_its_best(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    record, folder = finished_episode(prepared_arith, "filter", tmp_path)
    assert [v.candidate for v in record.validations] == ["models/initial", "models/filtered"]
    assert_only_allowed_changes(record, folder, prepared_arith, data=True, config=False)
    filtered = next(v.snapshot for v in record.validations if v.candidate == "models/filtered")
    first = git(folder, "rev-list", "--max-parents=0", "HEAD").strip()
    assert git(folder, "diff", "--name-only", first, filtered).split() == ["data/train.jsonl"]
    assert_submits_the_config_it_trained_with(record, folder)


def test_the_tuner_changes_only_its_settings_and_submits_its_best_with_its_config(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    record, folder = finished_episode(prepared_arith, "tuner", tmp_path)
    tried = [v.candidate for v in record.validations]
    assert tried[0] == "models/initial" and len(tried) == 5, tried
    assert all(candidate.startswith("models/tune-") for candidate in tried[1:])
    assert_only_allowed_changes(record, folder, prepared_arith, data=False, config=True)
    assert_submits_the_config_it_trained_with(record, folder)


def test_the_light_agent_filters_then_tunes_and_changes_nothing_else(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    record, folder = finished_episode(prepared_arith, "light", tmp_path)
    tried = [v.candidate for v in record.validations]
    assert tried[0] == "models/initial" and len(tried) == 5, tried
    assert_only_allowed_changes(record, folder, prepared_arith, data=True, config=True)
    tuned = next(v.snapshot for v in record.validations if v.candidate == tried[1])
    first = git(folder, "rev-list", "--max-parents=0", "HEAD").strip()
    assert set(git(folder, "diff", "--name-only", first, tuned).split()) == {
        "data/train.jsonl", CONFIG}
    assert_submits_the_config_it_trained_with(record, folder)


def assert_submits_the_config_it_trained_with(record: EpisodeRecord, folder: Path) -> None:
    """Each validation's snapshot, and the submission's, holds the settings its model was
    trained with; the initial model is submitted from a snapshot equal to snapshot 0."""
    assert record.submission is not None
    for validation in record.validations[1:]:
        config = tomllib.loads(git(folder, "show", f"{validation.snapshot}:{CONFIG}"))
        log = folder / "workspace" / validation.candidate / "train_log.json"
        assert config == json.loads(log.read_text())["config"], validation.candidate
    submitted, commit = record.submission.candidate, record.submission.snapshot
    first = git(folder, "rev-list", "--max-parents=0", "HEAD").strip()
    if submitted == "models/initial":
        assert git(folder, "diff", "--name-only", first, commit) == ""
        return
    config = tomllib.loads(git(folder, "show", f"{commit}:{CONFIG}"))
    log = json.loads((folder / "workspace" / submitted / "train_log.json").read_text())
    assert config == log["config"]
