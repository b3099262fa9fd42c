"""The budget ledger: the grader's crash-safe, append-only record of what each episode spent.

Trusted code only (the grader process) writes it; the file lives in the private store
(:func:`vtbench.layout.grader_db`) and no episode token ever reaches it directly.

Tables: ``episodes`` (id, task id and pack digest, hashed token, budgets as JSON, status),
``budget_rows`` (every budget change is one row: ``grant``, ``reserve``, ``charge`` or
``refund`` of a ``validation_credit`` or of ``compute_seconds``), ``validations`` (a state
machine),
``submissions`` (UNIQUE per episode), ``events`` (an append-only log) and ``candidates``
(lineage, written by :mod:`vtbench.grader.lineage`).

Validation life::

    reserve ─► queued ─start/claim─► running ─complete───────► completed        (charged)
                 │                      ├─fail_candidate─► failed_candidate (charged)
                 └──────fail_infra──────┴─fail_infra─────► failed_infra     (refunded)

Invariants (enforced by the schema where it can, checked by :meth:`Ledger.check_consistency`):

1. No overspending: a reservation checks the remaining credits and inserts itself in one
   ``BEGIN IMMEDIATE`` transaction, so concurrent processes serialise on the write lock
   and ``credits granted - reserved + refunded >= 0`` always holds.
2. Every validation has exactly one ``reserve`` row of credits (a unique index), and at
   most one closing row (``charge`` or ``refund``) per kind (a unique index): nothing is
   ever charged twice. Every terminal validation has its closing row, written in the same
   transaction as the state change: a crash leaves either both or neither.
3. ``completed`` and ``failed_candidate`` are charged; ``failed_infra`` is refunded;
   ``queued``/``running`` hold an open reservation. Hence the credits charged equal the
   credits reserved by completed + failed_candidate validations.
4. ``budget_rows`` and ``events`` are append-only (triggers abort UPDATE and DELETE).
5. After a crash, :meth:`Ledger.recover` (run at startup, before any worker) requeues
   every queued/running validation whose inputs are intact and refunds the rest, so no
   reservation stays open forever and none is lost.

Compute seconds are not known before a run, so they are not reserved: a reservation needs
some compute left, and the measured seconds are charged when a validation is charged
(an infrastructure failure costs the episode nothing).
"""

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from vtbench import layout
from vtbench.errors import (
    AlreadySubmitted,
    BudgetExhausted,
    EpisodeClosed,
    EpisodeNotFound,
    LedgerStateError,
)
from vtbench.grader import db, faults
from vtbench.grader.api import EpisodeBudgets
from vtbench.grader.schema import consistency_problems, migrate

ValidationState = Literal["queued", "running", "completed", "failed_candidate", "failed_infra"]
OPEN_STATES = ("queued", "running")
CHARGED_STATES = ("completed", "failed_candidate")

class Row(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class Episode(Row):
    id: str
    task: str
    """The task's id (:func:`vtbench.prepare.prepared_by_id`)."""
    task_digest: str | None = None
    """The digest of the pack the episode runs (None in episodes of schema version 1)."""
    token_hash: str
    workspace: str | None
    """Host path of the episode's workspace; candidate paths are relative to it."""
    budgets: EpisodeBudgets
    created: float
    status: Literal["open", "closed"]


class Remaining(Row):
    validations: int
    compute_seconds: float


class Validation(Row):
    id: int
    episode: str
    state: ValidationState
    inputs: dict[str, Any]
    """What to evaluate (hashes, split, decoding); opaque to the ledger."""
    credit: int
    """Credits reserved (0 for a free cached repeat)."""
    attempts: int
    result: dict[str, Any] | None
    error: str | None
    settlement: Literal["charged", "refunded"] | None
    compute_seconds: float
    created: float
    started: float | None
    finished: float | None


class Submission(Row):
    episode: str
    model_hash: str
    harness_hash: str
    state: Literal["pending", "scored", "failed"]
    result: dict[str, Any] | None
    created: float


class RecoveryReport(Row):
    requeued: list[int] = Field(default_factory=list)
    refunded: list[int] = Field(default_factory=list)
    pending_submissions: list[str] = Field(default_factory=list)


def _validation(row: sqlite3.Row) -> Validation:
    data = dict(row)
    data["inputs"] = json.loads(data["inputs"])
    data["result"] = json.loads(data["result"]) if data["result"] else None
    return Validation.model_validate(data)


def _event(conn: sqlite3.Connection, episode: str | None, kind: str, **detail: Any) -> None:
    conn.execute(
        "INSERT INTO events (at, episode, kind, detail) VALUES (?, ?, ?, ?)",
        (time.time(), episode, kind, json.dumps(detail, sort_keys=True)),
    )


class Ledger:
    """One process's handle on the ledger; safe to share between its threads."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or layout.grader_db()
        self._conn = db.connect(self.path)
        self._lock = threading.Lock()
        with self._lock:
            migrate(self._conn)

    def close(self) -> None:
        self._conn.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock, db.immediate(self._conn) as conn:
            yield conn

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    # -- episodes ----------------------------------------------------------------------

    def create_episode(
        self, episode_id: str, task: str, token_hash: str, budgets: EpisodeBudgets,
        workspace: str | None = None, task_digest: str | None = None,
    ) -> Episode:
        now = time.time()
        with self._write() as conn:
            conn.execute(
                "INSERT INTO episodes (id, task, task_digest, token_hash, workspace, budgets,"
                " created, status) VALUES (?, ?, ?, ?, ?, ?, ?, 'open')",
                (episode_id, task, task_digest, token_hash, workspace,
                 budgets.model_dump_json(), now),
            )
            for kind, amount in (
                ("validation_credit", budgets.validations),
                ("compute_seconds", budgets.compute_seconds),
            ):
                conn.execute(
                    "INSERT INTO budget_rows (episode, kind, op, amount, at)"
                    " VALUES (?, ?, 'grant', ?, ?)",
                    (episode_id, kind, amount, now),
                )
            _event(conn, episode_id, "episode_created", task=task, budgets=budgets.model_dump())
        return self.episode(episode_id)

    def episode(self, episode_id: str) -> Episode:
        rows = self._read("SELECT * FROM episodes WHERE id = ?", (episode_id,))
        if not rows:
            raise EpisodeNotFound(f"no episode {episode_id!r}")
        data = dict(rows[0])
        data["budgets"] = json.loads(data["budgets"])
        return Episode.model_validate(data)

    def episode_for_token(self, token_hash: str) -> Episode | None:
        rows = self._read("SELECT id FROM episodes WHERE token_hash = ?", (token_hash,))
        return self.episode(rows[0]["id"]) if rows else None

    def episodes(self) -> list[Episode]:
        return [self.episode(row["id"]) for row in self._read("SELECT id FROM episodes")]

    def close_episode(self, episode_id: str) -> None:
        with self._write() as conn:
            conn.execute("UPDATE episodes SET status = 'closed' WHERE id = ?", (episode_id,))
            _event(conn, episode_id, "episode_closed")

    @staticmethod
    def _remaining(conn: sqlite3.Connection, episode_id: str) -> Remaining:
        row = conn.execute(
            """SELECT
                 SUM(CASE WHEN kind = 'validation_credit' THEN
                       CASE op WHEN 'grant' THEN amount WHEN 'refund' THEN amount
                               WHEN 'reserve' THEN -amount ELSE 0 END END) AS credits,
                 SUM(CASE WHEN kind = 'compute_seconds' THEN
                       CASE op WHEN 'grant' THEN amount WHEN 'charge' THEN -amount
                               ELSE 0 END END) AS seconds
               FROM budget_rows WHERE episode = ?""",
            (episode_id,),
        ).fetchone()
        return Remaining(validations=int(row["credits"] or 0), compute_seconds=row["seconds"] or 0)

    def remaining(self, episode_id: str) -> Remaining:
        self.episode(episode_id)
        with self._lock:
            return self._remaining(self._conn, episode_id)

    # -- validations -------------------------------------------------------------------

    @staticmethod
    def _refusal(conn: sqlite3.Connection, episode_id: str, credit: int) -> BudgetExhausted | None:
        """Why the episode cannot take a validation of ``credit`` now (None: it can)."""
        found = conn.execute("SELECT status FROM episodes WHERE id = ?", (episode_id,))
        status = (found.fetchone() or {"status": None})["status"]
        if status is None:
            raise EpisodeNotFound(f"no episode {episode_id!r}")
        if status != "open":
            return EpisodeClosed(f"episode {episode_id} is closed", hint="it takes no more work")
        left = Ledger._remaining(conn, episode_id)
        if left.validations < credit or left.compute_seconds <= 0:
            return BudgetExhausted(f"episode {episode_id} has no validation budget left",
                                   hint="submit a candidate instead")
        return None

    def check_can_validate(self, episode_id: str, credit: int = 1) -> None:
        """Raise what :meth:`reserve_validation` would raise now; called before any intake
        or snapshot, so that a refused request costs the host no disk."""
        with self._lock:
            refusal = self._refusal(self._conn, episode_id, credit)
        if refusal is not None:
            self.log_event(episode_id, "budget_refused", before="intake", error=str(refusal))
            raise refusal

    def reserve_validation(self, episode_id: str, inputs: dict[str, Any], credit: int = 1) -> int:
        """Atomically check the budget and queue a validation; returns its id."""
        now = time.time()
        with self._write() as conn:
            refusal = self._refusal(conn, episode_id, credit)
            if refusal is not None:
                _event(conn, episode_id, "budget_refused", error=str(refusal),
                       **self._remaining(conn, episode_id).model_dump())
            else:
                cursor = conn.execute(
                    "INSERT INTO validations (episode, state, inputs, credit, created)"
                    " VALUES (?, 'queued', ?, ?, ?)",
                    (episode_id, json.dumps(inputs, sort_keys=True), credit, now),
                )
                validation_id = int(cursor.lastrowid or 0)
                conn.execute(
                    "INSERT INTO budget_rows (episode, validation, kind, op, amount, at)"
                    " VALUES (?, ?, 'validation_credit', 'reserve', ?, ?)",
                    (episode_id, validation_id, credit, now),
                )
                _event(conn, episode_id, "validation_reserved", validation=validation_id)
        if refusal is not None:
            raise refusal
        faults.checkpoint("queued")
        return validation_id

    def start(self, validation_id: int) -> Validation:
        """Move a queued validation to running (one more attempt)."""
        with self._write() as conn:
            updated = conn.execute(
                "UPDATE validations SET state = 'running', attempts = attempts + 1, started = ?"
                " WHERE id = ? AND state = 'queued'",
                (time.time(), validation_id),
            ).rowcount
            if not updated:
                raise LedgerStateError(f"validation {validation_id} is not queued")
            _event(conn, self._episode_of(conn, validation_id), "validation_started",
                   validation=validation_id)
        faults.checkpoint("running")
        return self.validation(validation_id)

    def claim_next(self) -> Validation | None:
        """Start the oldest queued validation of an episode with none running, or None."""
        while True:
            rows = self._read(  # one running validation per episode: each is capped at
                # the compute seconds left when it starts, so two at once could overspend
                "SELECT id FROM validations WHERE state = 'queued' AND episode NOT IN"
                " (SELECT episode FROM validations WHERE state = 'running')"
                " ORDER BY id LIMIT 1"
            )
            if not rows:
                return None
            try:
                return self.start(rows[0]["id"])
            except LedgerStateError:
                continue  # another worker took it first

    def complete(self, validation_id: int, result: dict[str, Any], compute_seconds: float) -> None:
        self._settle(validation_id, "completed", compute_seconds, result=result)

    def fail_candidate(
        self, validation_id: int, error: str, compute_seconds: float,
        result: dict[str, Any] | None = None,
    ) -> None:
        """The candidate's fault (bad weights, harness crash or timeout): charged, error kept."""
        self._settle(validation_id, "failed_candidate", compute_seconds, result=result, error=error)

    def fail_infra(self, validation_id: int, error: str) -> None:
        """Our fault (server crash, our timeout, restart): the reservation is refunded."""
        self._settle(validation_id, "failed_infra", 0.0, error=error)

    def _settle(
        self,
        validation_id: int,
        state: ValidationState,
        compute_seconds: float,
        result: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> None:
        charged = state in CHARGED_STATES
        allowed = ("running",) if charged else OPEN_STATES
        now = time.time()
        with self._write() as conn:
            row = conn.execute(
                "SELECT episode, state, credit FROM validations WHERE id = ?", (validation_id,)
            ).fetchone()
            if row is None or row["state"] not in allowed:
                current = row["state"] if row else "unknown"
                raise LedgerStateError(f"validation {validation_id} is {current}, not {allowed}")
            conn.execute(
                "UPDATE validations SET state = ?, settlement = ?, result = ?, error = ?,"
                " compute_seconds = ?, finished = ? WHERE id = ?",
                (state, "charged" if charged else "refunded",
                 json.dumps(result, sort_keys=True) if result is not None else None,
                 error, compute_seconds, now, validation_id),
            )
            closing = [("validation_credit", "charge" if charged else "refund", row["credit"])]
            if charged:  # never past the budget: a run is capped at what was left anyway
                left = max(self._remaining(conn, row["episode"]).compute_seconds, 0.0)
                closing.append(("compute_seconds", "charge", min(max(compute_seconds, 0.0),
                                                                 left)))
            for kind, op, amount in closing:
                conn.execute(
                    "INSERT INTO budget_rows (episode, validation, kind, op, amount, at)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (row["episode"], validation_id, kind, op, amount, now),
                )
            _event(conn, row["episode"], f"validation_{state}", validation=validation_id,
                   error=error, compute_seconds=compute_seconds)
            faults.checkpoint("writing_result")
        faults.checkpoint("settled")

    @staticmethod
    def _episode_of(conn: sqlite3.Connection, validation_id: int) -> str:
        row = conn.execute("SELECT episode FROM validations WHERE id = ?", (validation_id,))
        return str(row.fetchone()["episode"])

    def validation(self, validation_id: int) -> Validation:
        rows = self._read("SELECT * FROM validations WHERE id = ?", (validation_id,))
        if not rows:
            raise LedgerStateError(f"no validation {validation_id}")
        return _validation(rows[0])

    def validations(self, episode_id: str | None = None) -> list[Validation]:
        if episode_id is None:
            return [_validation(r) for r in self._read("SELECT * FROM validations ORDER BY id")]
        rows = self._read("SELECT * FROM validations WHERE episode = ? ORDER BY id", (episode_id,))
        return [_validation(r) for r in rows]

    # -- crash recovery ----------------------------------------------------------------

    def recover(
        self, inputs_intact: Callable[[dict[str, Any]], bool], max_attempts: int = 3
    ) -> RecoveryReport:
        """Settle what a crash left open. Call once at startup, before any worker runs.

        A queued or running validation is requeued when ``inputs_intact(inputs)`` holds and
        it has been started fewer than ``max_attempts`` times; otherwise it is refunded.
        Its reservation is untouched by a requeue, so it is charged at most once later.
        """
        report = RecoveryReport()
        for validation in self.validations():
            if validation.state not in OPEN_STATES:
                continue
            if validation.attempts < max_attempts and inputs_intact(validation.inputs):
                with self._write() as conn:
                    conn.execute(
                        "UPDATE validations SET state = 'queued', started = NULL"
                        " WHERE id = ? AND state IN ('queued', 'running')",
                        (validation.id,),
                    )
                    _event(conn, validation.episode, "validation_requeued",
                           validation=validation.id, attempts=validation.attempts)
                report.requeued.append(validation.id)
            else:
                reason = ("inputs no longer intact" if validation.attempts < max_attempts
                          else f"gave up after {validation.attempts} attempts")
                self.fail_infra(validation.id, f"grader restarted: {reason}")
                report.refunded.append(validation.id)
        pending = self._read("SELECT episode FROM submissions WHERE state = 'pending'")
        report.pending_submissions = [row["episode"] for row in pending]
        self.log_event(None, "recovered", **report.model_dump())
        return report

    # -- submissions and events --------------------------------------------------------

    def record_submission(self, episode_id: str, model_hash: str, harness_hash: str) -> Submission:
        """Record the episode's one submission; a second one raises AlreadySubmitted, one
        after the episode closed EpisodeClosed (checked in the same transaction)."""
        self.episode(episode_id)
        try:
            with self._write() as conn:
                status = conn.execute("SELECT status FROM episodes WHERE id = ?",
                                      (episode_id,)).fetchone()["status"]
                if status != "open":
                    _event(conn, episode_id, "submission_refused", reason="episode closed",
                           model_hash=model_hash, harness_hash=harness_hash)
                else:
                    conn.execute(
                        "INSERT INTO submissions (episode, model_hash, harness_hash, state,"
                        " created) VALUES (?, ?, ?, 'pending', ?)",
                        (episode_id, model_hash, harness_hash, time.time()),
                    )
                    _event(conn, episode_id, "submission_recorded",
                           model_hash=model_hash, harness_hash=harness_hash)
        except sqlite3.IntegrityError:
            self.log_event(episode_id, "submission_refused", reason="already submitted",
                           model_hash=model_hash, harness_hash=harness_hash)
            raise AlreadySubmitted(
                f"episode {episode_id} has already submitted", hint="only one submission counts"
            ) from None
        if status != "open":
            raise EpisodeClosed(f"episode {episode_id} is closed",
                                hint="a submission must arrive before the deadline")
        submission = self.submission(episode_id)
        assert submission is not None
        return submission

    def check_can_submit(self, episode_id: str) -> None:
        """Raise what :meth:`record_submission` would raise now (before any intake)."""
        episode = self.episode(episode_id)
        if episode.status != "open":
            raise EpisodeClosed(f"episode {episode_id} is closed",
                                hint="a submission must arrive before the deadline")
        if self.submission(episode_id) is not None:
            self.log_event(episode_id, "submission_refused", reason="already submitted")
            raise AlreadySubmitted(
                f"episode {episode_id} has already submitted", hint="only one submission counts")

    def record_merge(self, episode_id: str, **detail: Any) -> None:
        """Log a merge as done unless the episode is closed or its grader compute is spent
        (checked in the same transaction, as a reservation checks it); else raise why."""
        with self._write() as conn:
            refusal = self._refusal(conn, episode_id, credit=0)
            if refusal is None:
                _event(conn, episode_id, "merged", **detail)
        if refusal is not None:
            raise refusal

    def uses_candidate(self, tree_hash: str) -> bool:
        """Whether any validation, submission or lineage record names this stored tree."""
        pattern = f'%"{tree_hash}"%'
        return bool(self._read(
            "SELECT 1 FROM validations WHERE inputs LIKE ? UNION ALL"
            " SELECT 1 FROM submissions WHERE model_hash = ? OR harness_hash = ? UNION ALL"
            " SELECT 1 FROM candidates WHERE model_hash = ? LIMIT 1",
            (pattern, tree_hash, tree_hash, tree_hash)))

    def set_submission_result(
        self, episode_id: str, state: Literal["scored", "failed"], result: dict[str, Any]
    ) -> None:
        with self._write() as conn:
            updated = conn.execute(
                "UPDATE submissions SET state = ?, result = ?"
                " WHERE episode = ? AND state = 'pending'",
                (state, json.dumps(result, sort_keys=True), episode_id),
            ).rowcount
            if not updated:
                raise LedgerStateError(f"episode {episode_id} has no pending submission")
            _event(conn, episode_id, f"submission_{state}")

    def submission(self, episode_id: str) -> Submission | None:
        rows = self._read("SELECT * FROM submissions WHERE episode = ?", (episode_id,))
        if not rows:
            return None
        data = dict(rows[0])
        data.pop("id")
        data["result"] = json.loads(data["result"]) if data["result"] else None
        return Submission.model_validate(data)

    def log_event(self, episode_id: str | None, kind: str, **detail: Any) -> None:
        with self._write() as conn:
            _event(conn, episode_id, kind, **detail)

    def events(self, episode_id: str | None = None) -> list[dict[str, Any]]:
        params: tuple[str, ...] = ()
        sql = "SELECT * FROM events ORDER BY id"
        if episode_id is not None:
            sql, params = "SELECT * FROM events WHERE episode = ? ORDER BY id", (episode_id,)
        return [{**dict(r), "detail": json.loads(r["detail"])} for r in self._read(sql, params)]

    def export(self) -> dict[str, list[dict[str, Any]]]:
        """Every table, row by row, for ``vtbench grader ledger --json``."""
        tables = ("episodes", "budget_rows", "validations", "submissions", "events",
                  "candidates")
        return {t: [dict(r) for r in self._read(f"SELECT * FROM {t} ORDER BY rowid")]
                for t in tables}

    def check_consistency(self) -> list[str]:
        """Every violated invariant, one line each; an empty list means consistent."""
        return consistency_problems(self._read)

