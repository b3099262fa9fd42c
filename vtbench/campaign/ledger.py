"""The campaign's ledger of episode states (SQLite in WAL mode, in the campaign folder).

Each planned episode has one row: ``pending`` → ``running`` → ``finished`` (the episode
ended with a submission) or ``failed_agent`` (it ended without one: whatever the agent
did, that is its result); a failure of the infrastructure (the runner's crash or error, a
lost node, the campaign process dying mid-episode) sends it back to ``pending`` until it
has had the attempts the campaign allows it (one more for an episode whose agent started:
the attempt that closes it), then to ``failed_infra``. Every move is one
transaction that checks the state it leaves, so a finished episode is never claimed again
and an attempt is counted exactly once; every move is also appended to ``events``, which
keeps each attempt's reason.
"""

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from vtbench.campaign.errors import LedgerError

State = Literal["pending", "running", "finished", "failed_agent", "failed_infra"]
DONE: tuple[State, ...] = ("finished", "failed_agent", "failed_infra")
REOPENED = "reopened by --retry-failed"

SCHEMA = """
CREATE TABLE IF NOT EXISTS episodes (
    key TEXT PRIMARY KEY,
    state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN
        ('pending', 'running', 'finished', 'failed_agent', 'failed_infra')),
    attempts INTEGER NOT NULL DEFAULT 0,
    reason TEXT,
    folder TEXT,
    gain REAL,
    node TEXT,
    started_at REAL,
    seconds REAL
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL REFERENCES episodes(key),
    at REAL NOT NULL,
    attempt INTEGER NOT NULL,
    state TEXT NOT NULL,
    reason TEXT
);
"""


class EpisodeState(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    key: str
    state: State
    attempts: int
    """Attempts started so far (an interrupted or failed one included)."""
    reason: str | None
    """Why the last attempt ended as it did (None for a submission)."""
    folder: str | None
    """The episode folder, relative to the campaign folder, once the episode is done."""
    gain: float | None
    """Test-score gain over the initial system (0 without a submission)."""
    node: str | None
    """Where the last attempt ran (the host, or the Ray node's address)."""
    started_at: float | None
    """Unix time the last attempt started."""
    seconds: float | None
    """Wall seconds of the last attempt that ended."""


@dataclass(frozen=True)
class Result:
    """How an attempt ended: the episode's result (``finished``, ``failed_agent``), or
    ``failed_infra`` for an attempt the infrastructure failed (the ledger decides whether
    the episode is tried again)."""

    state: State
    reason: str | None
    folder: str | None
    """The episode folder, relative to the campaign folder."""
    gain: float | None
    seconds: float
    node: str


class Ledger:
    """One campaign's episode states; opened by the campaign process and by readers."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, timeout=30.0)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(SCHEMA)

    def close(self) -> None:
        self.db.close()

    def add(self, keys: list[str]) -> None:
        """Planned episodes the ledger does not know yet become pending."""
        self.db.executemany("INSERT OR IGNORE INTO episodes (key) VALUES (?)",
                            [(key,) for key in keys])

    def rows(self) -> list[EpisodeState]:
        found = self.db.execute("SELECT * FROM episodes ORDER BY rowid").fetchall()
        return [EpisodeState.model_validate(dict(row)) for row in found]

    def row(self, key: str) -> EpisodeState:
        found = self.db.execute("SELECT * FROM episodes WHERE key = ?", (key,)).fetchone()
        if found is None:
            raise LedgerError(f"no episode {key!r} in this campaign")
        return EpisodeState.model_validate(dict(found))

    def events(self, key: str) -> list[tuple[int, str, str | None]]:
        """(attempt, state, reason) of every move of one episode, oldest first."""
        found = self.db.execute("SELECT attempt, state, reason FROM events WHERE key = ? "
                                "ORDER BY id", (key,)).fetchall()
        return [(row["attempt"], row["state"], row["reason"]) for row in found]

    def claim(self, key: str) -> int:
        """pending → running; returns the attempt's number (1 for the first)."""
        with self._move(key, "pending") as row:
            attempt = row["attempts"] + 1
            self.db.execute("UPDATE episodes SET state = 'running', attempts = ?, node = NULL, "
                            "started_at = ? WHERE key = ?", (attempt, time.time(), key))
            self._event(key, attempt, "running", None)
        return attempt

    def finish(self, key: str, result: "Result") -> None:
        """running → finished or failed_agent: the episode's result, final."""
        if result.state not in ("finished", "failed_agent") or result.folder is None:
            raise LedgerError(f"finish() records an episode's result, not {result.state!r}")
        with self._move(key, "running") as row:
            self.db.execute("UPDATE episodes SET state = ?, folder = ?, gain = ?, reason = ?, "
                            "seconds = ?, node = ? WHERE key = ?",
                            (result.state, result.folder, result.gain, result.reason,
                             result.seconds, result.node, key))
            self._event(key, row["attempts"], result.state, result.reason)

    def fail(self, key: str, reason: str, max_attempts: int, seconds: float | None = None,
             node: str | None = None) -> State:
        """running → pending (tried again) or failed_infra (out of attempts)."""
        with self._move(key, "running") as row:
            state: State = "pending" if row["attempts"] < max_attempts else "failed_infra"
            self.db.execute("UPDATE episodes SET state = ?, reason = ?, seconds = ?, node = ? "
                            "WHERE key = ?", (state, reason, seconds, node, key))
            self._event(key, row["attempts"], state, reason)
        return state

    def reopen_failed(self) -> list[str]:
        """failed_infra → pending, for an operator who fixed what failed: each such episode
        gets one more attempt (its attempts so far stay counted); returns their keys."""
        failed = [row.key for row in self.rows() if row.state == "failed_infra"]
        for key in failed:
            with self._move(key, "failed_infra") as row:
                self.db.execute("UPDATE episodes SET state = 'pending' WHERE key = ?", (key,))
                self._event(key, row["attempts"], "pending", REOPENED)
        return failed

    def reopens(self, key: str) -> int:
        """How many times ``key`` was reopened: each adds one attempt to its allowance."""
        found = self.db.execute("SELECT COUNT(*) FROM events WHERE key = ? AND state = "
                                "'pending' AND reason = ?", (key, REOPENED)).fetchone()
        return int(found[0])

    def recover(self, max_attempts: Callable[[str], int]) -> dict[str, State]:
        """Episodes left ``running`` by a campaign process that died count that attempt as
        a failure of the infrastructure (only the process holding the folder's lock calls
        it), each against the attempts ``max_attempts(key)`` allows; returns their new
        states."""
        stale = [row.key for row in self.rows() if row.state == "running"]
        return {key: self.fail(key, "interrupted: the campaign process stopped while the "
                               "episode ran", max_attempts(key)) for key in stale}

    def _move(self, key: str, expected: State) -> "_Move":
        return _Move(self, key, expected)

    def _event(self, key: str, attempt: int, state: State, reason: str | None) -> None:
        self.db.execute("INSERT INTO events (key, at, attempt, state, reason) "
                        "VALUES (?, ?, ?, ?, ?)", (key, time.time(), attempt, state, reason))


class _Move:
    """One transaction that moves ``key`` out of ``expected`` (or raises, changing nothing)."""

    def __init__(self, ledger: Ledger, key: str, expected: State) -> None:
        self.ledger, self.key, self.expected = ledger, key, expected

    def __enter__(self) -> sqlite3.Row:
        db = self.ledger.db
        db.execute("BEGIN IMMEDIATE")
        row = db.execute("SELECT * FROM episodes WHERE key = ?", (self.key,)).fetchone()
        if row is None or row["state"] != self.expected:
            db.execute("ROLLBACK")
            now = "unknown" if row is None else row["state"]
            raise LedgerError(f"episode {self.key!r} is {now}, not {self.expected}")
        return row

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        self.ledger.db.execute("COMMIT" if kind is None else "ROLLBACK")
