"""``vtbench reproduce``: retrain an episode's submission from its snapshots and check it
against the agent's own validation score.

Operator work after the episode, never on the agent's budget. The submission is rebuilt
from the record's :class:`~vtbench.episode.recipe.Retraining` (each training with the
task's trainer entry, in a sandbox: :mod:`vtbench.attribution.rebuild`) and scored on val
with the submitted harness. It is *not reproducible* when the record shows that the
snapshot is not what trained it (trained with data or programs outside ``data/``,
``trainer/``, ``harness/``; ``data/`` or ``trainer/`` changed after the training started;
a training command other than the trainer entry), when it cannot be retrained, or when
the retrained score misses the agent's validation score by more than the task's seed SD
on val (then, with no other reason, non-determinism). The result is cached beside the
rebuilt systems and written into the record's ``reproduction`` section.
"""

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from vtbench import layout
from vtbench.attribution.rebuild import Rebuilder, RebuildFailed
from vtbench.episode.recipe import Retraining, RetrainStep, Snapshots
from vtbench.episode.record import EpisodeRecord
from vtbench.episode.retrained import Attribution, Reproduction
from vtbench.errors import VtbenchError
from vtbench.layout import EpisodePaths
from vtbench.prepare import PreparedTask, prepared_by_id
from vtbench.tasks.store import atomic_write

Say = Callable[[str], None]


class NothingToReproduce(VtbenchError):
    """The record names no submission, or was written before records kept its recipe."""


def load_record(folder: Path) -> EpisodeRecord:
    paths = EpisodePaths(folder)
    if not paths.record.exists():
        raise NothingToReproduce(f"{folder}: no episode record here",
                                 hint="pass an episode folder (it holds episode.json)")
    return EpisodeRecord.model_validate_json(paths.record.read_text())


def save_record(folder: Path, record: EpisodeRecord) -> None:
    atomic_write(EpisodePaths(folder).record, record.model_dump_json(indent=2), mode=0o644)


def store_of(record: EpisodeRecord, recipe: Retraining) -> Path:
    return layout.attribution_store(f"{record.episode_id}-{recipe.model_hash[:12]}")


def rebuilder(folder: Path, record: EpisodeRecord, sandbox: str = "bwrap",
              say: Say = lambda line: None) -> tuple[Rebuilder, PreparedTask]:
    recipe = record.retraining
    if recipe is None:
        raise NothingToReproduce(f"{folder}: the record keeps no recipe of a submission",
                                 hint="only episodes with a submission, run by this version, "
                                      "can be retrained")
    prepared = prepared_by_id(record.task, record.provenance.task_digest)
    paths = EpisodePaths(folder)
    snapshots = Snapshots(paths.snapshots, paths.workspace)
    return Rebuilder(recipe, snapshots, prepared, store_of(record, recipe), sandbox, say), \
        prepared


def step_reasons(step: RetrainStep) -> list[str]:
    """What the record shows against retraining ``step`` from its snapshot."""
    if step.origin != "trained":
        return []
    name = step.name
    if step.trained_with == "outside":
        return [f"{name} was trained with data or programs outside data/, trainer/, harness/"]
    if step.trained_with != "components":
        return [f"{name} was not seen trained by a program of trainer/ (data or programs "
                f"outside data/, trainer/, harness/, or copied in)"]
    found = []
    if step.data_at_start and step.data_at_start != step.data_tree:
        found.append(f"{name} was trained on data/ other than its snapshot's (data outside "
                     "data/, trainer/, harness/ at the snapshot: files changed or deleted "
                     "after the training started)")
    if step.trainer_at_start and step.trainer_at_start != step.trainer_tree:
        found.append(f"{name} was trained by a trainer/ other than its snapshot's (programs "
                     "changed or deleted after the training started)")
    if step.entry_mismatch:
        found.append(f"{name} was trained by a training command other than the trainer "
                     f"entry: {step.entry_mismatch}")
    return found


def tolerance(prepared: PreparedTask) -> tuple[float, str]:
    """The task's seed SD on val (the largest of its systems'), else one val instance."""
    spreads = {name: sd for name, sd in prepared.scores["seed_sd"].items() if sd is not None}
    if spreads:
        name = max(spreads, key=lambda n: spreads[n])
        return spreads[name], f"seed SD of the task's {name} system on val " \
                              f"({prepared.scores['seeds']} seeds)"
    size = prepared.task.spec.splits.val
    return 1.0 / size, f"one instance of val ({size}): the task was prepared with one seed"


def validation_score(record: EpisodeRecord) -> float | None:
    """The agent's best validation of the submitted model with the submitted harness."""
    if record.submission is None:
        return None
    scores = [v.score for v in record.validations if v.score is not None
              and v.model_hash == record.submission.model_hash
              and v.harness_hash == record.submission.harness_hash]
    return max(scores, default=None)


def reproduce(folder: Path, sandbox: str = "bwrap", say: Say = lambda line: None,
              refresh: bool = False) -> Reproduction:
    """Reproduce the episode in ``folder`` (cached: a second call does nothing)."""
    folder = folder.resolve()
    record = load_record(folder)
    built, prepared = rebuilder(folder, record, sandbox, say)
    cached = built.store / "reproduction.json"
    if cached.exists() and not refresh:
        result = Reproduction.model_validate_json(cached.read_text())
        return _keep(folder, record, result.model_copy(update={"seconds": 0.0}))
    started = time.monotonic()
    assert record.retraining is not None
    reasons = [r for step in record.retraining.steps for r in step_reasons(step)]
    ours = validation_score(record)
    allowed, why = tolerance(prepared)
    score, failed = None, False
    try:
        score = built.score(frozenset(built.changed()), 0, "val")
    except RebuildFailed as error:
        reasons.append(error.one_line())
        failed = True
    if score is not None and ours is not None and abs(score - ours) > allowed + 1e-9 \
            and not reasons:
        reasons.append(f"non-determinism: retrained from its snapshot it scores {score:.4f} "
                       f"on val, the agent's validation {ours:.4f} (tolerance {allowed:.4f})")
    elif score is not None and ours is not None and abs(score - ours) > allowed + 1e-9:
        reasons.append(f"retrained from its snapshot it scores {score:.4f} on val, the "
                       f"agent's validation {ours:.4f} (tolerance {allowed:.4f})")
    result = Reproduction(reproducible=not reasons, reasons=reasons, validation_score=ours,
                          reproduced_score=score, tolerance=round(allowed, 6),
                          tolerance_from=why, seconds=round(time.monotonic() - started, 1))
    if not failed:  # a retraining that failed is tried again next time
        atomic_write(cached, result.model_dump_json(indent=2))
    return _keep(folder, record, result)


Kept = TypeVar("Kept", Reproduction, Attribution)


def keep_on_record(folder: Path, record: EpisodeRecord, field: str, result: Kept) -> Kept:
    """Store ``result`` as the record's ``field`` (``reproduction`` or ``attribution``),
    writing the record only when more than its seconds changed."""
    kept = getattr(record, field)
    if kept is None or kept.model_dump(exclude={"seconds"}) != \
            result.model_dump(exclude={"seconds"}):
        setattr(record, field, result)
        save_record(folder, record)
    return result


def _keep(folder: Path, record: EpisodeRecord, result: Reproduction) -> Reproduction:
    return keep_on_record(folder, record, "reproduction", result)
