"""The ledger against a real SQLite file: state machine, budgets, schema guards, concurrency."""

import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from vtbench import layout
from vtbench.errors import (
    AlreadySubmitted,
    BudgetExhausted,
    EpisodeClosed,
    EpisodeNotFound,
    LedgerStateError,
)
from vtbench.grader import EpisodeBudgets, Ledger

INPUTS = {"model_hash": "m" * 64, "harness_hash": "h" * 64, "split": "val"}


def new_ledger(credits: int = 5, seconds: float = 100.0, episode: str = "ep1") -> Ledger:
    ledger = Ledger()
    ledger.create_episode(episode, "mini", f"token-{episode}", EpisodeBudgets(
        validations=credits, compute_seconds=seconds))
    return ledger


def test_ledger_lives_in_the_private_store_in_wal_mode(private_store: Path) -> None:
    ledger = new_ledger()
    assert ledger.path == layout.grader_db()
    assert ledger.path.is_relative_to(private_store)
    conn = sqlite3.connect(ledger.path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_completed_validation_is_charged_credit_and_compute() -> None:
    ledger = new_ledger()
    vid = ledger.reserve_validation("ep1", INPUTS)
    assert ledger.remaining("ep1").validations == 4
    ledger.start(vid)
    ledger.complete(vid, {"score": 0.5}, compute_seconds=12.5)
    validation = ledger.validation(vid)
    assert (validation.state, validation.settlement) == ("completed", "charged")
    assert validation.result == {"score": 0.5}
    assert ledger.remaining("ep1").model_dump() == {"validations": 4, "compute_seconds": 87.5}
    assert ledger.check_consistency() == []


def test_candidate_failure_is_charged_and_keeps_its_error() -> None:
    ledger = new_ledger()
    vid = ledger.reserve_validation("ep1", INPUTS)
    ledger.start(vid)
    ledger.fail_candidate(vid, "harness exited with status 3", compute_seconds=2.0)
    validation = ledger.validation(vid)
    assert validation.state == "failed_candidate"
    assert validation.error == "harness exited with status 3"
    assert ledger.remaining("ep1").validations == 4
    assert ledger.check_consistency() == []


def test_infrastructure_failure_is_refunded_and_costs_no_compute() -> None:
    ledger = new_ledger()
    vid = ledger.reserve_validation("ep1", INPUTS)
    ledger.start(vid)
    ledger.fail_infra(vid, "model server crashed")
    assert ledger.validation(vid).settlement == "refunded"
    assert ledger.remaining("ep1").model_dump() == {"validations": 5, "compute_seconds": 100.0}
    assert ledger.check_consistency() == []


def test_a_settled_validation_cannot_be_settled_again() -> None:
    ledger = new_ledger()
    vid = ledger.reserve_validation("ep1", INPUTS)
    ledger.start(vid)
    ledger.complete(vid, {"score": 1.0}, compute_seconds=1.0)
    for settle in (
        lambda: ledger.complete(vid, {"score": 1.0}, compute_seconds=1.0),
        lambda: ledger.fail_candidate(vid, "x", compute_seconds=1.0),
        lambda: ledger.fail_infra(vid, "x"),
        lambda: ledger.start(vid),
    ):
        with pytest.raises(LedgerStateError):
            settle()
    assert ledger.remaining("ep1").validations == 4


def test_a_queued_validation_cannot_be_charged_before_it_runs() -> None:
    ledger = new_ledger()
    vid = ledger.reserve_validation("ep1", INPUTS)
    with pytest.raises(LedgerStateError):
        ledger.complete(vid, {}, compute_seconds=0.0)


def test_reservation_beyond_the_credits_is_refused_and_logged() -> None:
    ledger = new_ledger(credits=1)
    ledger.reserve_validation("ep1", INPUTS)
    with pytest.raises(BudgetExhausted):
        ledger.reserve_validation("ep1", INPUTS)
    assert [e["kind"] for e in ledger.events("ep1")][-1] == "budget_refused"
    assert len(ledger.validations("ep1")) == 1


def test_reservation_is_refused_once_compute_seconds_are_spent() -> None:
    ledger = new_ledger(credits=5, seconds=3.0)
    vid = ledger.reserve_validation("ep1", INPUTS)
    ledger.start(vid)
    ledger.complete(vid, {}, compute_seconds=3.5)
    with pytest.raises(BudgetExhausted):
        ledger.reserve_validation("ep1", INPUTS)


def test_a_free_cached_repeat_reserves_no_credit() -> None:
    ledger = new_ledger(credits=1)
    vid = ledger.reserve_validation("ep1", INPUTS, credit=0)
    ledger.start(vid)
    ledger.complete(vid, {"cached": True}, compute_seconds=0.0)
    assert ledger.remaining("ep1").validations == 1
    assert ledger.check_consistency() == []


def test_closed_episode_takes_no_more_validations() -> None:
    ledger = new_ledger()
    ledger.close_episode("ep1")
    with pytest.raises(BudgetExhausted, match="is closed"):
        ledger.reserve_validation("ep1", INPUTS)


def test_unknown_episode_is_reported_as_such() -> None:
    ledger = new_ledger()
    with pytest.raises(EpisodeNotFound):
        ledger.reserve_validation("nope", INPUTS)
    assert ledger.episode_for_token("token-nope") is None
    assert ledger.episode_for_token("token-ep1").id == "ep1"  # type: ignore[union-attr]


def test_second_submission_is_refused_and_recorded() -> None:
    ledger = new_ledger()
    ledger.record_submission("ep1", "m" * 64, "h" * 64)
    with pytest.raises(AlreadySubmitted):
        ledger.record_submission("ep1", "x" * 64, "h" * 64)
    submission = ledger.submission("ep1")
    assert submission is not None and submission.model_hash == "m" * 64
    assert [e["kind"] for e in ledger.events("ep1")][-1] == "submission_refused"
    ledger.set_submission_result("ep1", "scored", {"test_score": 0.3})
    with pytest.raises(LedgerStateError):
        ledger.set_submission_result("ep1", "scored", {"test_score": 0.9})


def test_budget_rows_and_events_are_append_only() -> None:
    ledger = new_ledger()
    conn = sqlite3.connect(ledger.path)
    for statement in (
        "UPDATE budget_rows SET amount = 99",
        "DELETE FROM budget_rows",
        "UPDATE events SET kind = 'x'",
        "DELETE FROM events",
    ):
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute(statement)


def test_schema_refuses_a_second_charge_even_from_raw_sql() -> None:
    ledger = new_ledger()
    vid = ledger.reserve_validation("ep1", INPUTS)
    ledger.start(vid)
    ledger.complete(vid, {}, compute_seconds=1.0)
    conn = sqlite3.connect(ledger.path)
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(
            "INSERT INTO budget_rows (episode, validation, kind, op, amount, at)"
            " VALUES ('ep1', ?, 'validation_credit', 'refund', 1, 0)", (vid,))


def test_consistency_check_reports_an_open_reservation_on_a_settled_row() -> None:
    ledger = new_ledger()
    vid = ledger.reserve_validation("ep1", INPUTS)
    conn = sqlite3.connect(ledger.path)
    # Simulate a broken writer that changes state without its budget row.
    conn.execute("UPDATE validations SET state = 'completed', settlement = 'charged' WHERE id = ?",
                 (vid,))
    conn.commit()
    assert ledger.check_consistency() == [f"validation {vid} (completed) has 0 charges, 0 refunds"]


def test_export_holds_every_table() -> None:
    ledger = new_ledger()
    ledger.reserve_validation("ep1", INPUTS)
    export = ledger.export()
    assert set(export) == {"episodes", "budget_rows", "validations", "submissions", "events",
                           "candidates"}
    assert [row["op"] for row in export["budget_rows"]] == ["grant", "grant", "reserve"]


_start_signal: "multiprocessing.synchronize.Event | None" = None


def _remember_start_signal(event: "multiprocessing.synchronize.Event") -> None:
    global _start_signal
    _start_signal = event


def _reserve_in_own_process(db_path: str) -> str:
    ledger = Ledger(Path(db_path))
    assert _start_signal is not None
    _start_signal.wait()
    try:
        ledger.reserve_validation("ep1", INPUTS)
    except BudgetExhausted:
        return "refused"
    return "reserved"


def test_twenty_processes_never_overspend_a_budget_of_five() -> None:
    ledger = new_ledger(credits=5)
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["vtbench.grader.ledger"])  # import once, fork 20 times
    start = ctx.Event()
    with ctx.Pool(20, initializer=_remember_start_signal, initargs=(start,)) as pool:
        pending = [pool.apply_async(_reserve_in_own_process, (str(ledger.path),))
                   for _ in range(20)]
        start.set()
        outcomes = [result.get(timeout=120) for result in pending]
    assert outcomes.count("reserved") == 5
    assert outcomes.count("refused") == 15
    assert ledger.remaining("ep1").validations == 0
    assert len(ledger.validations("ep1")) == 5
    assert ledger.check_consistency() == []


def test_closed_episode_takes_no_submission_and_records_the_refusal() -> None:
    ledger = new_ledger()
    ledger.close_episode("ep1")
    with pytest.raises(EpisodeClosed, match="is closed"):
        ledger.record_submission("ep1", "m" * 64, "pristine")
    assert ledger.submission("ep1") is None
    assert [e["kind"] for e in ledger.events("ep1")][-1] == "submission_refused"
