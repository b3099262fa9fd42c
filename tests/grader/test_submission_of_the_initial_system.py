"""A submission that is the initial system, byte for byte, scores what prepare measured:
noop's gain is exactly 0 on every host, however its harness folder is named."""

import shutil
from pathlib import Path

import pytest

from tests.grader.conftest import INITIAL_TEST, GraderProcess
from vtbench.grader import Ledger
from vtbench.prepare.prepare import system_folder
from vtbench.prepare.systems import model_dir
from vtbench.tasks import find_task
from vtbench.tasks.materialize import materialize


def finish(grader: GraderProcess, token: str) -> dict[str, object]:
    episode = grader.client(token).get("/v1/status").json()["episode"]
    answer = grader.operator_client().post(f"/v1/operator/episodes/{episode}/finish")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_the_initial_model_with_an_unchanged_harness_under_another_name_gets_prepares_score(
    grader: GraderProcess, small_task: Path, workspace: Path, tmp_path: Path
) -> None:
    grader.start()
    token = grader.create_episode(small_task, workspace)  # marks the task prepared
    task = find_task(str(small_task))
    shutil.copytree(model_dir(system_folder(task, "initial"), 0), workspace / "models" / "same")
    materialize(task, tmp_path / "pristine", components=("harness",))
    shutil.copytree(tmp_path / "pristine" / "harness", workspace / "my-harness")
    answer = grader.client(token).post("/v1/submission",
                                       json={"model": "models/same", "harness": "my-harness"})
    assert answer.status_code == 200, answer.text
    scored = finish(grader, token)
    assert scored["test_score"] == INITIAL_TEST
    episode = str(grader.client(token).get("/v1/status").json()["episode"])
    assert Ledger().submission(episode).result["source"].startswith("the initial system")


@pytest.mark.slow
def test_a_harness_changed_by_one_byte_is_scored_on_test(
    grader: GraderProcess, small_task: Path, workspace: Path, tmp_path: Path
) -> None:
    grader.start()
    token = grader.create_episode(small_task, workspace)
    task = find_task(str(small_task))
    shutil.copytree(model_dir(system_folder(task, "initial"), 0), workspace / "models" / "same")
    materialize(task, tmp_path / "pristine", components=("harness",))
    shutil.copytree(tmp_path / "pristine" / "harness", workspace / "harness")
    run = workspace / "harness" / "run.py"
    run.write_text(run.read_text() + "\n")
    grader.client(token).post("/v1/submission", json={"model": "models/same", "harness": "harness"})
    finish(grader, token)
    episode = str(grader.client(token).get("/v1/status").json()["episode"])
    assert "source" not in Ledger().submission(episode).result
