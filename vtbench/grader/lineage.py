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
    moment and ``data_hash``/``trainer_hash`` = the git tree hashes of ``data/`` and
    ``trainer/`` in it. A merged (or initial) folder edited afterwards has a new hash and
    so becomes ``trained``.

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
from vtbench.grader.api import CandidateView, LineageRecord
from vtbench.grader.intake import StoredCandidate, intake_from
from vtbench.grader.ledger import Validation

log = logging.getLogger("vtbench.grader")
SeenAt = Literal["episode_created", "validation", "submission", "merge_parent", "merge_output"]
INITIAL = "models/initial"
TRAIN_LOG = "train_log.json"
_TRAIN_LOG_LIMIT = 256 * 1024
_CLAIM_LIMIT = 500


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

    def see(self, episode: str, name: str, stored: StoredCandidate, seen_at: SeenAt,
            snapshot: Callable[[], Snapshot | None]) -> LineageRecord:
        """The lineage of ``name`` holding ``stored``: known, reused, or trained now.

        ``snapshot()`` commits the workspace (or returns the commit just taken); it is
        called only for a new trained candidate.
        """
        name = candidate_name(name)
        known = self.find(episode, name, stored.hash)
        if known is not None:
            return known
        twin = self.first_name_with(episode, stored.hash, other_than=name)
        if twin is not None:
            lineage = LineageRecord(name=name, origin="reused", parents=[twin],
                                    model_hash=stored.hash)
            return self.record(episode, lineage, seen_at)
        taken = snapshot()
        lineage = LineageRecord(
            name=name, origin="trained", snapshot=taken.commit if taken else None,
            method=claimed_command(stored), data_hash=taken.tree("data") if taken else None,
            trainer_hash=taken.tree("trainer") if taken else None, model_hash=stored.hash)
        return self.record(episode, lineage, seen_at)


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
