"""``vtbench grader status|ledger|result`` in a real subprocess, reading the real ledger."""

import json
from pathlib import Path

from tests.conftest import run_cli
from tests.grader.conftest import INITIAL_TEST, GraderProcess, mark_prepared
from vtbench import layout
from vtbench.grader import EpisodeBudgets, Ledger


def test_status_ledger_and_result_show_the_operator_what_happened(small_task: Path) -> None:
    task, digest = mark_prepared(small_task)
    ledger = Ledger()
    ledger.create_episode("ep-cli", task, "hash", EpisodeBudgets(
        validations=2, compute_seconds=60), task_digest=digest)
    ledger.reserve_validation("ep-cli", {"model_hash": "m", "harness_hash": "pristine"})

    status = json.loads(run_cli("grader", "status", "--json", check=True).stdout)
    assert status["episodes"][0]["episode"] == "ep-cli"
    assert status["episodes"][0]["validations"] == 1
    assert status["open_validations"] == [1] and status["consistency"] == []

    export = json.loads(run_cli("grader", "ledger", "--json", check=True).stdout)
    assert [row["op"] for row in export["budget_rows"]] == ["grant", "grant", "reserve"]

    result = json.loads(run_cli("grader", "result", "ep-cli", "--json", check=True).stdout)
    assert result["state"] == "no submission" and result["test_score"] == INITIAL_TEST
    assert result["gain"] == 0.0


def test_result_of_an_unknown_episode_is_one_line() -> None:
    done = run_cli("grader", "result", "nope")
    assert done.returncode != 0
    assert "no episode 'nope'" in done.stderr + done.stdout
    assert "Traceback" not in done.stderr


def files_under(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*"))


def test_status_on_a_fresh_home_creates_nothing_and_says_no_grader_runs(
        empty_store: Path) -> None:
    plain = run_cli("grader", "status", check=True).stdout
    as_json = json.loads(run_cli("grader", "status", "--json", check=True).stdout)

    assert "grader: not running" in plain and "no ledger yet" in plain
    assert as_json["grader_running"] is False and as_json["ledger"] is None
    assert as_json["episodes"] == []
    assert files_under(empty_store) == []


def test_status_says_when_the_grader_runs(private_store: Path) -> None:
    process = GraderProcess(layout.grader_home())  # creates the home's operator token
    process.start()
    try:
        status = json.loads(run_cli("grader", "status", "--json", check=True).stdout)
        plain = run_cli("grader", "status", check=True).stdout
    finally:
        process.stop()
    assert status["grader_running"] is True and status["ledger"] == str(layout.grader_db())
    assert "grader: running on" in plain
