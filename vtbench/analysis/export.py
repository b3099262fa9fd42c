"""Export an episode as a trajectory: a documented, versioned JSON file.

Schema ``vtbench.trajectory``, version 2 (the JSON Schema is :func:`json_schema`, written
as ``trajectory.schema.json`` next to every export). One file per episode, named
``<episode_id>.trajectory.json``, holding one object:

``schema``, ``schema_version``
    ``"vtbench.trajectory"`` and ``2``. A reader refuses other values; fields are only
    ever added in a new version.
``episode``
    Who and what: ``episode_id``, ``task``, ``agent``, ``seed``, ``budget_minutes``,
    ``started_at``/``ended_at`` (ISO-8601 UTC), ``status``, ``stop_reason``,
    ``submitted``, and the scores ``initial_val``, ``initial_test``, ``reference_test``,
    ``final_test``, ``gain``, ``normalized_gain`` (null when unknown).
``candidates``
    The record's lineage list: ``name``, ``origin`` (initial | trained | merged | reused),
    ``snapshot``, ``parents``, ``method``, ``weights``, for a trained candidate
    ``trained_with`` (components | outside | unknown) and ``trained_by`` (the processes
    the runner saw train it: command, arguments, working folder, what they used outside
    the components; new in version 2), and hashes (``data_hash``/``trainer_hash`` only
    where it was trained with the components).
``steps``
    In order, every validation and then the submission: ``number`` (1-based), ``event``
    (validation | submission), ``validation`` (the record's index), ``elapsed_seconds``
    (agent time), ``snapshot`` and ``previous`` (workspace commits compared),
    ``candidate``, ``origin``, ``score`` (validation score or null), ``best_so_far``,
    ``improved`` (raised the best so far), ``touched`` (components among D, T, H),
    ``kinds`` (change kinds, see :mod:`vtbench.analysis.changes`) and ``change`` (the full
    classification: per component its kinds, per file its status, kinds and a detail
    line, and row counts for data), null when the history could not be read.
``metrics``
    The episode metrics of :mod:`vtbench.analysis.metrics` (co-design rate,
    algorithm-change rate, improvement share, val→test gap, budget split, …).
``history_error``
    Why changes are missing, or null.
"""

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from vtbench.analysis.changes import ChangeKind, Component, SnapshotChange, Strict
from vtbench.analysis.history import Origin
from vtbench.analysis.loading import Episode
from vtbench.analysis.metrics import EpisodeMetrics
from vtbench.episode.record import Lineage

SCHEMA_NAME: Literal["vtbench.trajectory"] = "vtbench.trajectory"
SCHEMA_VERSION: Literal[2] = 2
SCHEMA_FILE = "trajectory.schema.json"


class EpisodeInfo(Strict):
    episode_id: str
    task: str
    agent: str
    seed: int
    budget_minutes: float
    started_at: str
    ended_at: str | None
    status: str
    stop_reason: str | None
    submitted: bool
    initial_val: float | None
    initial_test: float | None
    reference_test: float | None
    final_test: float | None
    gain: float | None
    normalized_gain: float | None


class TrajectoryStep(Strict):
    number: int
    event: Literal["validation", "submission"]
    validation: int | None
    elapsed_seconds: float
    snapshot: str
    previous: str | None
    candidate: str
    origin: Origin
    score: float | None
    best_so_far: float | None
    improved: bool
    touched: list[Component]
    kinds: list[ChangeKind]
    change: SnapshotChange | None


class Trajectory(Strict):
    schema_name: Literal["vtbench.trajectory"] = Field(SCHEMA_NAME, alias="schema")
    schema_version: Literal[2] = SCHEMA_VERSION
    episode: EpisodeInfo
    candidates: list[Lineage]
    steps: list[TrajectoryStep]
    metrics: EpisodeMetrics
    history_error: str | None


def trajectory(episode: Episode) -> Trajectory:
    record, metrics = episode.record, episode.metrics
    best = {p.validation: p for p in metrics.best_over_time}
    info = EpisodeInfo.model_validate(
        {name: getattr(record, name) for name in EpisodeInfo.model_fields})
    steps = []
    for step in episode.history.steps:
        point = best.get(step.validation) if step.validation is not None else None
        steps.append(TrajectoryStep(
            number=step.number, event=step.event, validation=step.validation,
            elapsed_seconds=step.elapsed_seconds, snapshot=step.snapshot,
            previous=step.previous, candidate=step.candidate, origin=step.origin,
            score=step.score, best_so_far=point.best if point else metrics.best_val,
            improved=bool(point and point.improved),
            touched=step.change.touched if step.change else [],
            kinds=step.change.kinds if step.change else [], change=step.change))
    return Trajectory(episode=info, candidates=record.candidates, steps=steps,
                      metrics=metrics, history_error=episode.history.error)


def json_schema() -> dict[str, Any]:
    schema = Trajectory.model_json_schema(by_alias=True)
    schema["$id"] = f"{SCHEMA_NAME}/{SCHEMA_VERSION}"
    return schema


def dumps(item: Trajectory) -> str:
    return item.model_dump_json(by_alias=True, indent=1)


def read_trajectory(path: Path) -> Trajectory:
    """Read an exported trajectory, refusing other schemas and versions."""
    return Trajectory.model_validate_json(path.read_bytes())


def write_trajectories(episodes: Sequence[Episode], folder: Path) -> list[Path]:
    """One ``<episode_id>.trajectory.json`` per episode plus the schema; returns the files."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SCHEMA_FILE).write_text(json.dumps(json_schema(), indent=1))
    written = []
    for episode in episodes:
        name = "".join(c if c.isalnum() or c in "-_." else "_"
                       for c in episode.record.episode_id)
        path = folder / f"{name}.trajectory.json"
        path.write_text(dumps(trajectory(episode)))
        written.append(path)
    return written
