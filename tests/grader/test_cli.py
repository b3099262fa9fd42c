"""``vtbench grader status|ledger|result`` in a real subprocess, reading the real ledger."""

import json
from pathlib import Path

from tests.conftest import run_cli
from tests.grader.conftest import INITIAL_TEST
from vtbench.grader import EpisodeBudgets, Ledger


def test_status_ledger_and_result_show_the_operator_what_happened(small_task: Path) -> None:
    ledger = Ledger()
    ledger.create_episode("ep-cli", str(small_task), "hash", EpisodeBudgets(
        validations=2, compute_seconds=60))
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
