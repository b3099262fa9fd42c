"""The ledger carries its schema version and migrates forward, never silently backward."""

import sqlite3
from pathlib import Path

import pytest

from vtbench.errors import LedgerVersionError
from vtbench.grader import EpisodeBudgets, Ledger
from vtbench.grader.schema import MIGRATIONS, SCHEMA, SCHEMA_VERSION, migrate


def user_version(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def test_a_new_ledger_carries_the_current_version(tmp_path: Path) -> None:
    Ledger(tmp_path / "ledger.sqlite").close()
    assert user_version(tmp_path / "ledger.sqlite") == SCHEMA_VERSION


def test_a_ledger_from_before_versions_opens_as_the_first_version_with_its_rows(
        tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    old = sqlite3.connect(path)
    old.executescript(SCHEMA)  # what every ledger written before versions holds
    old.close()
    ledger = Ledger(path)
    ledger.create_episode("ep-old", "arith", "hash", EpisodeBudgets(validations=2,
                                                                    compute_seconds=60))
    ledger.close()
    reopened = Ledger(path)
    assert [episode.id for episode in reopened.episodes()] == ["ep-old"]
    reopened.close()
    assert user_version(path) == SCHEMA_VERSION


def test_each_step_runs_once_in_order_and_keeps_the_rows(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    ledger = Ledger(path)
    ledger.create_episode("ep-1", "arith", "hash", EpisodeBudgets(validations=2,
                                                                  compute_seconds=60))
    ledger.close()
    later = {**MIGRATIONS,
             SCHEMA_VERSION + 1: "ALTER TABLE episodes ADD COLUMN pack_digest TEXT;",
             SCHEMA_VERSION + 2: "UPDATE episodes SET pack_digest = 'd-' || id;"
                                 "CREATE INDEX episodes_digest ON episodes (pack_digest);"}
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        assert migrate(conn, later) == SCHEMA_VERSION
        assert migrate(conn, later) == SCHEMA_VERSION + 2  # a second open finds it done
        rows = conn.execute("SELECT id, pack_digest FROM episodes").fetchall()
    finally:
        conn.close()
    assert rows == [("ep-1", "d-ep-1")]
    assert user_version(path) == SCHEMA_VERSION + 2


def test_a_failing_step_leaves_the_ledger_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    Ledger(path).close()
    broken = {**MIGRATIONS, SCHEMA_VERSION + 1: "ALTER TABLE episodes ADD COLUMN x TEXT;"
                                                "ALTER TABLE no_such_table ADD COLUMN y;"}
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        with pytest.raises(sqlite3.OperationalError):
            migrate(conn, broken)
        columns = [row[1] for row in conn.execute("PRAGMA table_info(episodes)")]
    finally:
        conn.close()
    assert "x" not in columns
    assert user_version(path) == SCHEMA_VERSION


def test_a_ledger_newer_than_this_vtbench_is_refused_naming_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    Ledger(path).close()
    newer = sqlite3.connect(path)
    newer.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    newer.close()
    with pytest.raises(LedgerVersionError) as refused:
        Ledger(path)
    line = refused.value.one_line()
    assert f"version {SCHEMA_VERSION + 1}" in line and "upgrade vtbench" in line


def test_version_two_names_tasks_by_id_and_keeps_the_episodes_of_version_one(
        tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    old = sqlite3.connect(path)
    old.executescript(SCHEMA)
    old.execute("INSERT INTO episodes VALUES ('ep-path', '/srv/vtbench/tasks/arith', 'h1', NULL,"
                " '{\"validations\": 1, \"compute_seconds\": 9}', 0, 'closed')")
    old.execute("INSERT INTO episodes VALUES ('ep-id', 'dsl', 'h2', NULL,"
                " '{\"validations\": 1, \"compute_seconds\": 9}', 0, 'open')")
    old.execute("PRAGMA user_version = 1")
    old.commit()
    old.close()
    ledger = Ledger(path)
    try:
        tasks = {e.id: (e.task, e.task_digest) for e in ledger.episodes()}
        assert tasks == {"ep-path": ("arith", None), "ep-id": ("dsl", None)}
        ledger.create_episode("ep-new", "arith", "h3", EpisodeBudgets(
            validations=1, compute_seconds=9), task_digest="ab" * 32)
        assert ledger.episode("ep-new").task_digest == "ab" * 32
    finally:
        ledger.close()
    assert user_version(path) == 2
