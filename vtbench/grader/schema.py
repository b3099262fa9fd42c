"""The ledger's tables, their version and forward migrations, and the check of its
invariants over the stored rows.

The version is SQLite's ``user_version`` in the file's header. :data:`SCHEMA` is version
1 and stays so; each later version is a step of :data:`MIGRATIONS`. :func:`migrate` gives a
new ledger (or one from before versions: 0) :data:`SCHEMA`, then runs every step past the
file's version in order, inside the same write transaction as the version it sets, so a step
runs exactly once and a failing step leaves the ledger as it was; a ledger newer than this
code is refused rather than read with the wrong meaning.

The schema enforces what SQL can: one reservation and at most one settlement per
validation and kind (partial unique indexes), one submission per episode (UNIQUE),
settled exactly when terminal (CHECK), and append-only ``budget_rows``, ``events`` and
``candidates`` (triggers; one lineage row per candidate name and model hash, see
:mod:`vtbench.grader.lineage`). :func:`consistency_problems` checks the rest (see ``ledger.py``).
"""

import sqlite3
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from vtbench.errors import LedgerVersionError

SCHEMA_VERSION = 2
"""The version a ledger written by this code carries (``PRAGMA user_version``)."""
MIGRATIONS: Mapping[int, str] = {
    # 2: episodes name their task by id and pack digest. Version 1 kept the runner's path
    # of the pack, whose last part is the id of every built-in task: keep that part.
    2: """
ALTER TABLE episodes ADD COLUMN task_digest TEXT;
UPDATE episodes SET task = replace(task, rtrim(task, replace(task, '/', '')), '')
    WHERE task LIKE '%/%';
""",
}
"""SQL taking a ledger from version ``n - 1`` to ``n``, keyed by ``n`` (from 2): a schema
change adds a step here and raises :data:`SCHEMA_VERSION` to it; :data:`SCHEMA` never
changes."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS episodes (
    id TEXT PRIMARY KEY,
    task TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    workspace TEXT,
    budgets TEXT NOT NULL,
    created REAL NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('open', 'closed'))
);
CREATE TABLE IF NOT EXISTS validations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    episode TEXT NOT NULL REFERENCES episodes(id),
    state TEXT NOT NULL CHECK (state IN
        ('queued', 'running', 'completed', 'failed_candidate', 'failed_infra')),
    inputs TEXT NOT NULL,
    credit INTEGER NOT NULL CHECK (credit >= 0),
    attempts INTEGER NOT NULL DEFAULT 0,
    result TEXT,
    error TEXT,
    settlement TEXT CHECK (settlement IN ('charged', 'refunded')),
    compute_seconds REAL NOT NULL DEFAULT 0,
    created REAL NOT NULL,
    started REAL,
    finished REAL,
    CHECK ((state IN ('queued', 'running')) = (settlement IS NULL))
);
CREATE TABLE IF NOT EXISTS budget_rows (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    episode TEXT NOT NULL REFERENCES episodes(id),
    validation INTEGER REFERENCES validations(id),
    kind TEXT NOT NULL CHECK (kind IN ('validation_credit', 'compute_seconds')),
    op TEXT NOT NULL CHECK (op IN ('grant', 'reserve', 'charge', 'refund')),
    amount REAL NOT NULL CHECK (amount >= 0),
    at REAL NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS one_reservation
    ON budget_rows(validation, kind) WHERE op = 'reserve';
CREATE UNIQUE INDEX IF NOT EXISTS one_settlement
    ON budget_rows(validation, kind) WHERE op IN ('charge', 'refund');
CREATE TABLE IF NOT EXISTS submissions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    episode TEXT NOT NULL UNIQUE REFERENCES episodes(id),
    model_hash TEXT NOT NULL,
    harness_hash TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'scored', 'failed')),
    result TEXT,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    episode TEXT,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS candidates (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    episode TEXT NOT NULL REFERENCES episodes(id),
    name TEXT NOT NULL,
    model_hash TEXT NOT NULL,
    origin TEXT NOT NULL CHECK (origin IN ('initial', 'trained', 'merged', 'reused')),
    lineage TEXT NOT NULL,
    seen_at TEXT NOT NULL,
    at REAL NOT NULL,
    UNIQUE (episode, name, model_hash)
);
CREATE TRIGGER IF NOT EXISTS candidates_no_update BEFORE UPDATE ON candidates
    BEGIN SELECT RAISE(ABORT, 'candidates is append-only'); END;
CREATE TRIGGER IF NOT EXISTS candidates_no_delete BEFORE DELETE ON candidates
    BEGIN SELECT RAISE(ABORT, 'candidates is append-only'); END;
CREATE TRIGGER IF NOT EXISTS budget_rows_no_update BEFORE UPDATE ON budget_rows
    BEGIN SELECT RAISE(ABORT, 'budget_rows is append-only'); END;
CREATE TRIGGER IF NOT EXISTS budget_rows_no_delete BEFORE DELETE ON budget_rows
    BEGIN SELECT RAISE(ABORT, 'budget_rows is append-only'); END;
CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'events is append-only'); END;
CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'events is append-only'); END;
"""


def migrate(conn: sqlite3.Connection, migrations: Mapping[int, str] = MIGRATIONS) -> int:
    """Create or bring the ledger on ``conn`` (autocommit) up to the newest version of
    ``migrations`` (at least :data:`SCHEMA_VERSION`); returns the version it found."""
    target = max([SCHEMA_VERSION, *migrations])
    conn.execute("BEGIN IMMEDIATE")  # the version is read under the write lock: one migrator
    try:
        found = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if found > target:
            raise LedgerVersionError(
                f"the grader's ledger has schema version {found}, newer than this vtbench"
                f" knows ({target})", hint="upgrade vtbench to the version that wrote it")
        scripts = [SCHEMA] if found == 0 else []  # new, or from before versions
        scripts += [migrations[n] for n in range(max(found, 1) + 1, target + 1)]
        for script in scripts:
            for statement in _statements(script):
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {target}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return found


def _statements(script: str) -> Iterator[str]:
    """The statements of a script one by one (a trigger's body keeps its semicolons)."""
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                yield pending.strip()
            pending = ""


_SETTLEMENT_COUNTS = """
SELECT v.id, v.state, v.settlement, v.credit,
  SUM(b.kind = 'validation_credit' AND b.op = 'reserve') AS reserves,
  SUM(b.kind = 'validation_credit' AND b.op = 'charge') AS charges,
  SUM(b.kind = 'validation_credit' AND b.op = 'refund') AS refunds,
  SUM(CASE WHEN b.kind = 'validation_credit' AND b.op != 'reserve' THEN b.amount END) AS closed
FROM validations v LEFT JOIN budget_rows b ON b.validation = v.id
GROUP BY v.id
"""


def consistency_problems(
    read: Callable[[str, tuple[Any, ...]], list[sqlite3.Row]],
) -> list[str]:
    """Check invariants 1-3 of the module docstring against the stored rows."""
    problems = []
    expected = {"queued": (0, 0), "running": (0, 0), "completed": (1, 0),
                "failed_candidate": (1, 0), "failed_infra": (0, 1)}
    for row in read(_SETTLEMENT_COUNTS, ()):
        label = f"validation {row['id']} ({row['state']})"
        if row["reserves"] != 1:
            problems.append(f"{label} has {row['reserves']} reservations")
        if (row["charges"], row["refunds"]) != expected[row["state"]]:
            problems.append(f"{label} has {row['charges']} charges, {row['refunds']} refunds")
        if row["closed"] is not None and row["closed"] != row["credit"]:
            problems.append(f"{label} closed {row['closed']} of {row['credit']} credits")
    for row in read("SELECT id FROM episodes", ()):
        credits = read(
            "SELECT SUM(CASE op WHEN 'grant' THEN amount WHEN 'refund' THEN amount"
            " WHEN 'reserve' THEN -amount ELSE 0 END) AS left FROM budget_rows"
            " WHERE episode = ? AND kind = 'validation_credit'", (row["id"],))[0]["left"]
        if (credits or 0) < 0:
            problems.append(f"episode {row['id']} overspent: {credits} credits left")
    return problems
