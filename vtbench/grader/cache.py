"""The result cache: a repeated validation of the same system spends no compute.

Trusted code; it lives in the grader's database next to the ledger (another table,
another connection, the same WAL file). A key is (episode, task, split, model hash,
harness hash, decoding); hashes are tree hashes from intake, so a key names exact bytes.
The episode is part of the key so that one episode's paid validation is never another's
free one, and a cache hit tells an agent nothing about what other episodes validated. The
decoding is stored as canonical JSON (sorted keys, no spaces, ``null`` when the harness
chooses its own), so equal settings always give equal keys. Only completed results are
cached; the first stored result for a key is kept (an evaluation of the same bytes with
the same fixed decoding is deterministic, and a first-writer-wins rule needs no lock).
Whether a cache hit spends a validation credit is the task's decision
(``budgets.repeat_validation_costs_credit``), not the cache's.
"""

import json
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from vtbench import layout
from vtbench.grader import db

SCHEMA = """
CREATE TABLE IF NOT EXISTS episode_result_cache (
    episode TEXT NOT NULL,
    task TEXT NOT NULL,
    split TEXT NOT NULL,
    model_hash TEXT NOT NULL,
    harness_hash TEXT NOT NULL,
    decoding TEXT NOT NULL,
    result TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (episode, task, split, model_hash, harness_hash, decoding)
)
"""


class CacheKey(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    episode: str
    task: str
    split: str
    model_hash: str
    harness_hash: str
    decoding: dict[str, Any] | None

    def row(self) -> tuple[str, str, str, str, str, str]:
        decoding = json.dumps(self.decoding, sort_keys=True, separators=(",", ":"))
        return (self.episode, self.task, self.split, self.model_hash, self.harness_hash, decoding)


class ResultCache:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or layout.grader_db()
        self._conn = db.connect(self.path)
        self._lock = threading.Lock()
        with db.immediate(self._conn) as conn:
            conn.execute(SCHEMA)

    def close(self) -> None:
        self._conn.close()

    def get(self, key: CacheKey) -> dict[str, Any] | None:
        with self._lock:
            row = self._read_row(key)
        return json.loads(row["result"]) if row else None

    def _read_row(self, key: CacheKey) -> Any:
        return self._conn.execute(
            "SELECT result FROM episode_result_cache WHERE episode = ? AND task = ? AND split = ?"
            " AND model_hash = ? AND harness_hash = ? AND decoding = ?",
            key.row(),
        ).fetchone()

    def put(self, key: CacheKey, result: dict[str, Any]) -> bool:
        """Store a completed result; False when the key already had one (kept as is)."""
        with self._lock, db.immediate(self._conn) as conn:
            inserted = conn.execute(
                "INSERT OR IGNORE INTO episode_result_cache VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (*key.row(), json.dumps(result, sort_keys=True), time.time()),
            ).rowcount
        return bool(inserted)

    def __len__(self) -> int:
        with self._lock:
            counted = self._conn.execute("SELECT COUNT(*) FROM episode_result_cache")
            return int(counted.fetchone()[0])
