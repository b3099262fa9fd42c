"""``vtbench tasks scores``: the built-in tasks prepared, or the packs named (by id or folder)."""

import json
from pathlib import Path

from tests.conftest import run_cli
from tests.grader.conftest import small_task  # noqa: F401  (fixture, found by name)


def test_a_task_pack_prepared_from_its_folder_is_scored_by_its_folder(
        small_task: Path) -> None:  # noqa: F811
    """Packs outside the built-in ones are prepared by path, and their scores asked so."""
    named = run_cli("tasks", "scores", "--task", str(small_task), "--json", check=True)
    (row,) = json.loads(named.stdout)
    assert row["task"] == "dsl" and row["initial"]["test"] is not None


def test_the_scores_of_a_task_not_yet_prepared_say_how_to_prepare_it() -> None:
    done = run_cli("tasks", "scores", "--task", "arith")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "task 'arith' is not prepared (run: vtbench prepare --task arith)" in done.stderr
