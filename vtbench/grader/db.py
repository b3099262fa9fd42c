"""The grader's SQLite database: one file in the private store, opened one way by everyone.

Guarantees: every connection uses WAL (readers never block the one writer), foreign keys,
a long busy timeout (concurrent writers queue instead of failing), and
``synchronous=FULL``. In WAL mode ``NORMAL`` already survives a killed process, but a
power loss may drop the last commits; for a budget ledger a dropped commit is a lost
charge or a lost refund, and the ledger writes only a handful of rows per validation, so
the extra fsync per commit is cheap insurance. :func:`immediate` is the one way to write:
``BEGIN IMMEDIATE`` takes the write lock before the first read, so a check-then-insert
inside it cannot race with another process.
"""

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BUSY_TIMEOUT_SECONDS = 60.0


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) the database at ``path`` with the grader's pragmas."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    conn = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
    )
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction holding the database's write lock from its first statement."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
