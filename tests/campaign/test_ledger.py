"""The campaign ledger (real SQLite, WAL): a finished episode is never claimed again, an
infrastructure failure is retried up to the limit with its reason, an agent's failure is a
result, and a dead campaign's running episodes are counted and released."""

import sqlite3
from pathlib import Path

import pytest

from vtbench.campaign import Ledger, LedgerError, Result
from vtbench.campaign.ledger import State


def result(state: State = "finished", gain: float | None = 0.25) -> Result:
    return Result(state=state, reason=None if state == "finished" else "no submission: x",
                  folder="episodes/a/a-1", gain=gain, seconds=12.5, node="host")


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    opened = Ledger(tmp_path / "ledger.sqlite")
    opened.add(["a", "b"])
    return opened


def test_a_finished_episode_is_never_claimed_again(ledger: Ledger) -> None:
    assert ledger.claim("a") == 1
    ledger.finish("a", result())
    with pytest.raises(LedgerError, match="'a' is finished, not pending"):
        ledger.claim("a")
    row = ledger.row("a")
    assert (row.state, row.attempts, row.gain, row.folder) == ("finished", 1, 0.25,
                                                                "episodes/a/a-1")
    assert ledger.events("a") == [(1, "running", None), (1, "finished", None)]


def test_an_agent_failure_is_a_result_and_is_not_tried_again(ledger: Ledger) -> None:
    ledger.claim("b")
    ledger.finish("b", result("failed_agent", gain=0.0))
    assert ledger.row("b").state == "failed_agent"
    assert ledger.row("b").reason == "no submission: x"
    with pytest.raises(LedgerError):
        ledger.claim("b")


def test_an_infrastructure_failure_is_retried_up_to_the_limit_with_its_reasons(
        ledger: Ledger) -> None:
    reasons = ["grader did not start", "lost node", "runner crashed"]
    states = []
    for reason in reasons:
        ledger.claim("a")
        states.append(ledger.fail("a", reason, max_attempts=3, seconds=1.0, node="n1"))
    assert states == ["pending", "pending", "failed_infra"]
    row = ledger.row("a")
    assert row.attempts == 3 and row.reason == "runner crashed" and row.node == "n1"
    assert [(a, s, r) for a, s, r in ledger.events("a") if s != "running"] == [
        (1, "pending", "grader did not start"), (2, "pending", "lost node"),
        (3, "failed_infra", "runner crashed")]
    with pytest.raises(LedgerError):
        ledger.claim("a")


def test_a_move_from_the_wrong_state_changes_nothing(ledger: Ledger) -> None:
    with pytest.raises(LedgerError, match="'a' is pending, not running"):
        ledger.finish("a", result())
    with pytest.raises(LedgerError):
        ledger.fail("a", "x", max_attempts=3)
    with pytest.raises(LedgerError, match="records an episode's result"):
        ledger.finish("a", result("failed_infra"))
    assert ledger.row("a").state == "pending" and ledger.events("a") == []
    with pytest.raises(LedgerError, match="no episode 'zz'"):
        ledger.row("zz")


def test_a_dead_campaigns_running_episodes_count_that_attempt_and_wait_again(
        tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    dead = Ledger(path)
    dead.add(["a", "b", "c"])
    dead.claim("a")
    dead.claim("b")
    dead.fail("b", "lost node", max_attempts=2)
    dead.claim("b")
    dead.db.close()  # the process that claimed them is gone

    again = Ledger(path)
    assert again.recover(lambda key: 2) == {"a": "pending", "b": "failed_infra"}
    assert [(r.key, r.state, r.attempts) for r in again.rows()] == [
        ("a", "pending", 1), ("b", "failed_infra", 2), ("c", "pending", 0)]
    assert again.row("a").reason is not None and "interrupted" in again.row("a").reason
    assert again.claim("a") == 2


def test_adding_the_plan_again_keeps_every_state(ledger: Ledger) -> None:
    ledger.claim("a")
    ledger.finish("a", result())
    ledger.add(["a", "b", "c"])
    assert [(r.key, r.state) for r in ledger.rows()] == [
        ("a", "finished"), ("b", "pending"), ("c", "pending")]


def test_the_ledger_is_in_wal_mode_and_readers_see_each_move_at_once(
        ledger: Ledger, tmp_path: Path) -> None:
    reader = sqlite3.connect(tmp_path / "ledger.sqlite")
    assert reader.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    ledger.claim("b")
    assert reader.execute("SELECT state FROM episodes WHERE key = 'b'").fetchone()[0] == "running"
    reader.close()


def test_a_reopened_infrastructure_failure_gets_one_more_attempt_and_keeps_its_history(
        ledger: Ledger) -> None:
    for reason in ("grader did not start", "runner crashed"):
        ledger.claim("a")
        ledger.fail("a", reason, max_attempts=2)
    ledger.claim("b")
    ledger.finish("b", result())
    assert ledger.reopen_failed() == ["a"]
    assert ledger.row("b").state == "finished"
    assert ledger.claim("a") == 3
    assert ledger.fail("a", "runner crashed again", max_attempts=2) == "failed_infra"
    assert [(a, s, r) for a, s, r in ledger.events("a") if s != "running"] == [
        (1, "pending", "grader did not start"), (2, "failed_infra", "runner crashed"),
        (2, "pending", "reopened by --retry-failed"), (3, "failed_infra",
                                                      "runner crashed again")]
    assert ledger.reopen_failed() == ["a"] and ledger.reopen_failed() == []
