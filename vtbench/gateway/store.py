"""The usage ledger: one SQLite (WAL) row per exchange, totals summed from the rows.

Guarantees: a row is inserted (state ``open``) before the request leaves for the upstream
and updated once with the provider's usage when the exchange ends, each in its own
transaction, so concurrent exchanges never lose an update (totals are sums, never
read-modify-write) and a crash of the gateway loses at most the usage of exchanges that were
in flight: on restart those rows are marked ``interrupted`` and stay visible. ``synchronous
= NORMAL`` in WAL mode survives a crash of any process; only an OS crash can drop the last
commits. Each row also holds its exchange's budget reservation (:mod:`vtbench.gateway.budget`),
so an interrupted exchange stays charged for it. Many episodes may share one file; each gateway
touches only its own episode's rows.
"""

import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from vtbench.gateway.usage import Usage

State = Literal["open", "done", "error", "refused", "interrupted"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS exchanges (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    episode TEXT NOT NULL,
    api TEXT NOT NULL,
    model TEXT,
    state TEXT NOT NULL,
    http_status INTEGER,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    dollars REAL NOT NULL DEFAULT 0,
    started_at REAL NOT NULL,
    finished_at REAL,
    reserved_tokens INTEGER NOT NULL DEFAULT 0,
    reserved_dollars REAL NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS exchanges_episode ON exchanges (episode);
"""
_ADDED_COLUMNS = {"reserved_tokens": "INTEGER NOT NULL DEFAULT 0",
                  "reserved_dollars": "REAL NOT NULL DEFAULT 0"}
"""Columns a ledger written before budgets were reserved lacks; added when it is opened."""


@dataclass(frozen=True)
class Totals:
    """What one episode has spent so far."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    dollars: float = 0.0
    exchanges: int = 0
    refused: int = 0
    interrupted: int = 0
    unsettled_tokens: int = 0
    """Reservations of interrupted exchanges, whose usage never arrived: the budget counts
    them in full."""
    unsettled_dollars: float = 0.0

    @property
    def tokens(self) -> int:
        """What a token budget counts: all input (cached included) plus output."""
        return (self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
                + self.output_tokens)


class UsageStore:
    """One connection shared by the gateway's event loop (and, safely, other threads)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=10000")
        with self._lock:
            self._db.executescript(_SCHEMA)
            have = {row[1] for row in self._db.execute("PRAGMA table_info(exchanges)")}
            for name, kind in _ADDED_COLUMNS.items():
                if name not in have:
                    self._db.execute(f"ALTER TABLE exchanges ADD COLUMN {name} {kind}")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def recover(self, episode: str) -> int:
        """Mark this episode's exchanges left open by a crashed gateway; returns how many."""
        with self._lock:
            cursor = self._db.execute(
                "UPDATE exchanges SET state = 'interrupted' WHERE episode = ? AND state = 'open'",
                (episode,))
        return cursor.rowcount

    def open(self, episode: str, api: str, model: str | None, reserved_tokens: int = 0,
             reserved_dollars: float = 0.0) -> int:
        """A row for an exchange about to leave, holding its budget reservation."""
        with self._lock:
            cursor = self._db.execute(
                "INSERT INTO exchanges (episode, api, model, state, started_at,"
                " reserved_tokens, reserved_dollars) VALUES (?, ?, ?, 'open', ?, ?, ?)",
                (episode, api, model, time.time(), reserved_tokens, reserved_dollars))
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def refuse(self, episode: str, api: str, model: str | None, http_status: int) -> int:
        now = time.time()
        with self._lock:
            cursor = self._db.execute(
                "INSERT INTO exchanges (episode, api, model, state, http_status, started_at,"
                " finished_at) VALUES (?, ?, ?, 'refused', ?, ?, ?)",
                (episode, api, model, http_status, now, now))
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def finish(
        self, exchange: int, state: State, http_status: int | None, usage: Usage, dollars: float
    ) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE exchanges SET state = ?, http_status = ?, input_tokens = ?,"
                " output_tokens = ?, cache_read_tokens = ?, cache_write_tokens = ?,"
                " dollars = ?, finished_at = ? WHERE id = ?",
                (state, http_status, usage.input_tokens, usage.output_tokens,
                 usage.cache_read_tokens, usage.cache_write_tokens, dollars, time.time(),
                 exchange))

    def totals(self, episode: str) -> Totals:
        with self._lock:
            row = self._db.execute(
                "SELECT COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),"
                " COALESCE(SUM(cache_read_tokens), 0), COALESCE(SUM(cache_write_tokens), 0),"
                " COALESCE(SUM(dollars), 0.0), COUNT(*),"
                " COALESCE(SUM(state = 'refused'), 0), COALESCE(SUM(state = 'interrupted'), 0),"
                " COALESCE(SUM(CASE WHEN state = 'interrupted' THEN reserved_tokens END), 0),"
                " COALESCE(SUM(CASE WHEN state = 'interrupted' THEN reserved_dollars END), 0.0)"
                " FROM exchanges WHERE episode = ?", (episode,)).fetchone()
        return Totals(*row)

    def episodes(self) -> list[str]:
        """Every episode with a row here, in the order of its first exchange."""
        with self._lock:
            rows = self._db.execute(
                "SELECT episode FROM exchanges GROUP BY episode ORDER BY MIN(id)").fetchall()
        return [row[0] for row in rows]

    def states(self, episode: str) -> list[tuple[int, str, int | None]]:
        """(id, state, http status) of each exchange, oldest first."""
        with self._lock:
            return self._db.execute(
                "SELECT id, state, http_status FROM exchanges WHERE episode = ? ORDER BY id",
                (episode,)).fetchall()
