"""A prepared task as one typed thing: what the runner, the grader and the CLI read of a
task's preparation (its initial system, the scores of its systems, the digest of the pack
they were built from).

Two loaders, both checking that the initial system is complete and scored on test:

* :func:`load_prepared` checks a task pack against its preparation by hashing the pack and
  its base model again (seconds at smol scale): the runner calls it once per episode, the
  CLI once per command. It records where the pack lies, under the task's id in the private
  store.
* :func:`prepared_by_id` finds the pack from the task id alone, through that record, and
  checks the digest the caller holds against the recorded one without hashing anything:
  the grader calls it once per request with the id and digest its ledger keeps for the
  episode, so a task prepared again in the middle of an episode is refused, not mixed.
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vtbench.errors import NotPrepared
from vtbench.prepare.digest import pack_digest, pack_record, recorded_digest, remember_pack
from vtbench.prepare.prepare import score_summary, system_folder
from vtbench.prepare.systems import is_complete, model_dir
from vtbench.tasks.registry import Task, load_task


@dataclass(frozen=True)
class PreparedTask:
    task: Task
    digest: str
    """sha256 of the task pack and base model the systems were built from."""
    scores: dict[str, Any]
    """:func:`vtbench.prepare.score_summary` of the task."""

    @property
    def id(self) -> str:
        return self.task.id

    @property
    def initial_model(self) -> Path:
        """The initial system's model (seed 0): every workspace's ``models/initial``."""
        return model_dir(system_folder(self.task, "initial"), 0)

    @property
    def initial_val(self) -> float | None:
        return self.scores["initial"]["val"]

    @property
    def initial_test(self) -> float:
        score: float = self.scores["initial"]["test"]
        return score

    @property
    def reference_test(self) -> float | None:
        return self.scores["reference"]["test"]

    @property
    def light_gain(self) -> float | None:
        """The light system's mean test gain over the calibration's seeds."""
        gain: float | None = self.scores["margin"]["light"]["gain"]
        return gain

    @property
    def reference_gain(self) -> float | None:
        """The reference system's mean test gain over the calibration's seeds."""
        gain: float | None = self.scores["margin"]["reference"]["gain"]
        return gain


def _checked(task: Task, digest: str) -> PreparedTask:
    hint = f"run: vtbench prepare --task {task.id}"
    scores = score_summary(task)
    prepared = PreparedTask(task=task, digest=digest, scores=scores)
    if not is_complete(prepared.initial_model) or scores["initial"]["test"] is None:
        raise NotPrepared(f"task {task.id!r} is not prepared", hint=hint)
    return prepared


def load_prepared(task: Task) -> PreparedTask:
    """The preparation of ``task`` as the pack is now; refuses a missing or stale one."""
    recorded = recorded_digest(task)
    if recorded is None:
        raise NotPrepared(f"task {task.id!r} is not prepared",
                          hint=f"run: vtbench prepare --task {task.id}")
    if recorded != pack_digest(task):
        raise NotPrepared(f"task {task.id!r} changed since it was prepared",
                          hint=f"run: vtbench prepare --task {task.id}")
    prepared = _checked(task, recorded)
    remember_pack(task, recorded)
    return prepared


def prepared_by_id(task_id: str, digest: str | None) -> PreparedTask:
    """The preparation recorded under ``task_id``, which must have been made from the pack
    with ``digest`` (the one the episode started with; None for an episode that did not
    record it: the preparation as it is)."""
    path = pack_record(task_id)
    if not path.exists():
        raise NotPrepared(f"task {task_id!r} is not prepared",
                          hint=f"run: vtbench prepare --task {task_id}")
    record = json.loads(path.read_text())
    task = load_task(Path(record["root"]))
    digest = digest or record["digest"]
    if task.id != task_id or recorded_digest(task) != digest or record["digest"] != digest:
        raise NotPrepared(f"task {task_id!r} was prepared again since this episode started",
                          hint="start a new episode")
    return _checked(task, digest)
