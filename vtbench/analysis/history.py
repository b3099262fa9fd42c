"""An episode's steps (validations, then the submission) with the change each one made.

Step *i* compares its snapshot with the snapshot of the step before it (step 1 with
snapshot 0, the workspace's first commit). :func:`episode_history` reads the snapshot
repository of the workspace named by the record: the runner's ``snapshots.git`` beside it
whenever there is one (never a ``.git`` the agent left inside), else the workspace's own
``.git``; :func:`write_history` stores the result next to the
record as ``changes.json`` so that reports over many episodes need not read git again.
A stored history is used only when its classifier version and its snapshots match the
record, so it can never describe another history than the record's.
"""

import json
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from vtbench.analysis.changes import FOLDERS, SnapshotChange, Strict, classify
from vtbench.analysis.gitstore import SnapshotStore, find_git_dir
from vtbench.episode.record import EpisodeRecord
from vtbench.errors import VtbenchError

CLASSIFIER_VERSION = 2
"""Bumped whenever a rule of the classifier changes; stored histories of another version
are recomputed."""
HISTORY_FILE = "changes.json"
FOLDER_NAMES = tuple(FOLDERS.values())

Origin = Literal["initial", "trained", "merged", "reused", "unknown"]


class Step(Strict):
    number: int
    """1-based position among the episode's steps."""
    event: Literal["validation", "submission"]
    validation: int | None = None
    """The record's validation index (validations only)."""
    snapshot: str
    previous: str | None
    """Snapshot this step is compared with (None when snapshot 0 is unknown)."""
    elapsed_seconds: float
    candidate: str
    origin: Origin
    """How the candidate came to be, from the record's lineage."""
    score: float | None = None
    """Validation score (None for a failed validation or the submission)."""
    change: SnapshotChange | None = None
    """None when the workspace history could not be read."""


class EpisodeHistory(Strict):
    schema_version: Literal[1] = 1
    classifier_version: int = CLASSIFIER_VERSION
    episode_id: str
    snapshot0: str | None = None
    steps: list[Step] = Field(default_factory=list)
    error: str | None = None
    """Why changes are missing (no workspace, unreadable history), else None."""

    @property
    def classified(self) -> bool:
        return self.error is None


def episode_history(record: EpisodeRecord, episode_dir: Path) -> EpisodeHistory:
    """Steps of one episode with each change classified from its workspace repository."""
    history = EpisodeHistory(episode_id=record.episode_id, steps=_steps(record))
    if not history.steps:
        return history
    repo = (episode_dir / record.workspace).resolve()
    if find_git_dir(repo) is None:
        history.error = f"no workspace history at {repo}"
        return history
    try:
        with SnapshotStore(repo) as store:
            history.snapshot0 = store.root(history.steps[0].snapshot)
            # Read every snapshot's trees up front: a few batched reads instead of many.
            store.files_many(list(dict.fromkeys(
                [history.snapshot0, *(s.snapshot for s in history.steps)])), FOLDER_NAMES)
            previous = history.snapshot0
            for step in history.steps:
                step.previous = previous
                step.change = classify(store, previous, step.snapshot,
                                       record.provenance.method_settings)
                previous = step.snapshot
    except VtbenchError as err:
        history.error = err.one_line()
        for step in history.steps:
            step.change = None
    return history


def _steps(record: EpisodeRecord) -> list[Step]:
    origins = {c.name: c.origin for c in record.candidates}
    steps = [Step(number=i + 1, event="validation", validation=v.index, snapshot=v.snapshot,
                  previous=None, elapsed_seconds=v.elapsed_seconds, candidate=v.candidate,
                  origin=origins.get(v.candidate, "unknown"), score=v.score)
             for i, v in enumerate(sorted(record.validations, key=lambda v: v.index))]
    if record.submission is not None:
        sub = record.submission
        steps.append(Step(number=len(steps) + 1, event="submission", snapshot=sub.snapshot,
                          previous=None, elapsed_seconds=sub.elapsed_seconds,
                          candidate=sub.candidate,
                          origin=origins.get(sub.candidate, "unknown")))
    return steps


def load_history(record: EpisodeRecord, episode_dir: Path) -> EpisodeHistory:
    """The stored history when it still matches the record, else a fresh classification."""
    stored = _read_stored(episode_dir / HISTORY_FILE)
    expected = [s.snapshot for s in _steps(record)]
    if (stored is not None and stored.episode_id == record.episode_id
            and stored.classifier_version == CLASSIFIER_VERSION
            and [s.snapshot for s in stored.steps] == expected):
        return stored
    return episode_history(record, episode_dir)


def write_history(record: EpisodeRecord, episode_dir: Path) -> EpisodeHistory:
    """Classify the episode and store ``changes.json`` next to its record (atomically)."""
    history = episode_history(record, episode_dir)
    target = episode_dir / HISTORY_FILE
    partial = target.with_suffix(".json.partial")
    partial.write_text(history.model_dump_json(indent=1))
    partial.replace(target)
    return history


def _read_stored(path: Path) -> EpisodeHistory | None:
    try:
        return EpisodeHistory.model_validate_json(path.read_bytes())
    except (OSError, ValidationError, json.JSONDecodeError):
        return None
