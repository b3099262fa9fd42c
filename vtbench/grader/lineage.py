"""Candidate lineage: how each model folder the grader sees came to be, kept by the grader.

Trusted code. Lineage is derived only from what the grader itself observed: the tree hash
its intake computed, the merges it carried out itself, the snapshots it committed itself
(``snapshots.git`` beside the workspace, out of the agent's reach) and the ledger. It never
reads a lineage claim from the workspace: a ``lineage.json`` (or anything else) the agent
writes into a model folder is just bytes inside that folder's hash. The one agent-written
hint that is kept, the training command in the folder's ``train_log.json``, is read from
the grader's stored copy and recorded as ``method = "claimed: <command>"``.

A candidate is recorded once per (episode, folder name, model hash), in the ledger's
append-only ``candidates`` table, the first time the grader sees it (episode creation for
``models/initial``, a validation, the submission, or as a merge parent or output). Its
origin is decided then, in this order:

``initial``
    ``models/initial`` with the hash it had when the operator created the episode
    (before the agent started).
``merged``
    the output of a merge the grader ran (``/v1/merges``), with the hash the merge wrote;
    recorded by the merge itself, with parents, method and weights.
``reused``
    a new name for a hash already recorded under another name in this episode (parents =
    the earliest such name). Renaming or copying a merged folder makes it ``reused``.
``trained``
    anything else, with ``snapshot`` = the workspace commit the grader takes at that
    moment. A merged (or initial) folder edited afterwards has a new hash and so becomes
    ``trained``.

What trained a ``trained`` folder is read from what the runner saw, never from the
workspace: the processes it recorded (``processes.json`` beside the workspace, see
:mod:`vtbench.episode.processes`) since this folder name was last recorded. ``trained_with``
is ``outside`` ("trained outside the components") when a process that named the folder
ran or named something outside ``trainer/``, ``data/`` and ``models/`` (``python
alt_trainer/train.py --data alt_data --out models/x``, ``trainer/train.py --config
/tmp/c.toml``); ``components`` when a program of ``trainer/`` named it and nothing else
did, and no training elsewhere that named no folder ran meanwhile; ``unknown`` otherwise
(no training was seen naming it: a copy, a hand-edited config, a trainer that hides its
output folder, an episode without a runner). Only ``components`` carries
``data_hash``/``trainer_hash``, the git tree hashes of ``data/`` and ``trainer/`` in the
snapshot: the record never credits the components with what it did not see them do.

Records are :class:`vtbench.grader.api.LineageRecord`, the shape the episode record keeps
too.
"""

import json
import logging
import shlex
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from vtbench.errors import VtbenchError
from vtbench.grader import db
from vtbench.grader.api import CandidateView, LineageRecord, ProcessSeen, TrainedWith
from vtbench.grader.intake import StoredCandidate, intake_from
from vtbench.grader.ledger import Episode, Validation
from vtbench.layout import EpisodePaths

log = logging.getLogger("vtbench.grader")
SeenAt = Literal["episode_created", "validation", "submission", "merge_parent", "merge_output"]
INITIAL = "models/initial"
TRAIN_LOG = "train_log.json"
_TRAIN_LOG_LIMIT = 256 * 1024
_CLAIM_LIMIT = 500
TRAINED_BY_LIMIT = 20
"""Most processes a lineage record lists (the latest ones)."""


def candidate_name(relative: str) -> str:
    """The one spelling of a workspace-relative folder (``models//a/`` -> ``models/a``)."""
    return PurePosixPath(relative).as_posix()


def claimed_command(stored: StoredCandidate) -> str | None:
    """``claimed: <command>`` when the stored ``train_log.json`` names a command, else None.

    Agent-written, so only labelled and shown, never believed: it decides nothing.
    """
    if TRAIN_LOG not in stored.files:
        return None
    path = stored.path / TRAIN_LOG
    try:
        if path.stat().st_size > _TRAIN_LOG_LIMIT:
            return None
        log = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    command = log.get("command") if isinstance(log, dict) else None
    if isinstance(command, list) and command and all(isinstance(c, str) for c in command):
        command = shlex.join(command)
    if not isinstance(command, str) or not command.strip():
        return None
    return f"claimed: {command.strip()[:_CLAIM_LIMIT]}"


@dataclass(frozen=True)
class Snapshot:
    """A workspace commit the grader took, in the episode's ``snapshots.git``."""

    commit: str
    git_dir: Path
    workspace: Path

    def tree(self, folder: str) -> str | None:
        """Git tree hash of ``folder`` in this commit (``git rev-parse C:folder``), or None."""
        from vtbench.workspace import git

        try:
            return git(self.git_dir, self.workspace, "rev-parse", "--verify", "--quiet",
                       f"{self.commit}:{folder}") or None
        except (OSError, subprocess.CalledProcessError):
            return None


class LineageBook:
    """The ledger's ``candidates`` table (created by the ledger's schema), one connection."""

    def __init__(self, path: Path) -> None:
        self._conn = db.connect(path)
        self._lock = threading.Lock()

    def close(self) -> None:
        self._conn.close()

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def record(self, episode: str, lineage: LineageRecord, seen_at: SeenAt) -> LineageRecord:
        """Store ``lineage`` unless (episode, name, hash) is known; returns the stored one."""
        assert lineage.model_hash is not None
        with self._lock, db.immediate(self._conn) as conn:
            conn.execute(
                "INSERT OR IGNORE INTO candidates (episode, name, model_hash, origin, lineage,"
                " seen_at, at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (episode, lineage.name, lineage.model_hash, lineage.origin,
                 lineage.model_dump_json(), seen_at, time.time()))
        known = self.find(episode, lineage.name, lineage.model_hash)
        assert known is not None
        return known

    def record_initial(self, episode: str, workspace: Path) -> None:
        """``models/initial`` as the operator hands the workspace over, before the agent
        starts: the one hash that counts as the initial model in this episode."""
        try:
            initial = intake_from(workspace, INITIAL, "model")
        except (VtbenchError, OSError) as err:
            log.info("episode %s has no initial model to record: %s", episode, err)
            return
        self.record(episode, LineageRecord(name=INITIAL, origin="initial",
                                           model_hash=initial.hash), "episode_created")

    def find(self, episode: str, name: str, model_hash: str) -> LineageRecord | None:
        rows = self._rows("SELECT lineage FROM candidates WHERE episode = ? AND name = ?"
                          " AND model_hash = ?", (episode, name, model_hash))
        return LineageRecord.model_validate_json(rows[0]["lineage"]) if rows else None

    def first_name_with(self, episode: str, model_hash: str, other_than: str) -> str | None:
        rows = self._rows("SELECT name FROM candidates WHERE episode = ? AND model_hash = ?"
                          " AND name != ? ORDER BY id LIMIT 1", (episode, model_hash, other_than))
        return str(rows[0]["name"]) if rows else None

    def candidates(self, episode: str) -> list[LineageRecord]:
        """Every candidate of the episode, in the order the grader first saw them."""
        rows = self._rows("SELECT lineage FROM candidates WHERE episode = ? ORDER BY id",
                          (episode,))
        return [LineageRecord.model_validate_json(row["lineage"]) for row in rows]

    def see(self, episode: Episode, name: str, stored: StoredCandidate, seen_at: SeenAt,
            snapshot: Callable[[], Snapshot | None]) -> LineageRecord:
        """The lineage of ``name`` holding ``stored``: known, reused, or trained now.

        ``snapshot()`` commits the workspace (or returns the commit just taken); it is
        called only for a new trained candidate.
        """
        name = candidate_name(name)
        known = self.find(episode.id, name, stored.hash)
        if known is not None:
            return known
        twin = self.first_name_with(episode.id, stored.hash, other_than=name)
        if twin is not None:
            lineage = LineageRecord(name=name, origin="reused", parents=[twin],
                                    model_hash=stored.hash)
            return self.record(episode.id, lineage, seen_at)
        taken = snapshot()
        verdict, processes = trained_with(observed(episode), name, self._last_recorded(
            episode.id, name))
        credited = verdict == "components" and taken is not None
        lineage = LineageRecord(
            name=name, origin="trained", snapshot=taken.commit if taken else None,
            method=claimed_command(stored), trained_with=verdict, trained_by=processes,
            data_hash=taken.tree("data") if credited and taken else None,
            trainer_hash=taken.tree("trainer") if credited and taken else None,
            model_hash=stored.hash)
        return self.record(episode.id, lineage, seen_at)

    def needs_no_snapshot(self, episode: str, name: str, model_hash: str) -> bool:
        """Whether :meth:`see` would answer without a snapshot (known or reused)."""
        return (self.find(episode, name, model_hash) is not None or
                self.first_name_with(episode, model_hash, other_than=name) is not None)

    def _last_recorded(self, episode: str, name: str) -> float:
        """When ``name`` was last recorded with another hash (0 when never)."""
        rows = self._rows("SELECT MAX(at) AS at FROM candidates WHERE episode = ? AND name = ?",
                          (episode, name))
        return float(rows[0]["at"] or 0.0) if rows else 0.0


def observed(episode: Episode) -> list[ProcessSeen]:
    """What the runner saw of the episode's processes so far (none without a runner)."""
    if episode.workspace is None:
        return []
    return read_processes(EpisodePaths.of_workspace(Path(episode.workspace)).processes)


def read_processes(path: Path) -> list[ProcessSeen]:
    """The runner's records at ``path``; none when it is missing or unreadable."""
    try:
        rows = json.loads(path.read_text())
        return [ProcessSeen.model_validate(row) for row in rows]
    except (OSError, ValueError, TypeError):
        return []


def trained_with(processes: list[ProcessSeen], name: str,
                 since: float) -> tuple[TrainedWith, list[ProcessSeen]]:
    """What trained folder ``name`` (see the module docstring), from the processes seen
    alive at ``since`` or later; returns the verdict and the processes it rests on."""
    recent = [p for p in processes if p.last_seen >= since]
    named = [p for p in recent if any(_related(path, name) for path in p.candidates)]
    hidden = [p for p in recent if p.training and p.elsewhere and not p.candidates]
    if any(p.elsewhere for p in named):
        verdict: TrainedWith = "outside"
    elif any(p.training for p in named) and not hidden:
        verdict = "components"
    else:
        verdict, named = "unknown", named + hidden
    return verdict, named[-TRAINED_BY_LIMIT:]


def _related(path: str, name: str) -> bool:
    """Whether a path a process named is the folder ``name``, inside it, or holds it."""
    return path == name or path.startswith(name + "/") or name.startswith(path + "/")


def candidate_views(candidates: list[LineageRecord],
                    validations: list[Validation]) -> list[CandidateView]:
    scores: dict[str, list[float]] = {}
    for validation in validations:
        score = (validation.result or {}).get("score")
        if validation.state == "completed" and isinstance(score, int | float):
            scores.setdefault(validation.inputs.get("model_hash", ""), []).append(float(score))
    return [CandidateView(**c.model_dump(), best_score=max(scores.get(c.model_hash or "", []),
                                                           default=None),
                          validations=len(scores.get(c.model_hash or "", [])))
            for c in candidates]
