"""The grader over its real unix socket, with a real tiny model, real bwrap and real SQLite."""

import json
import os
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.grader.conftest import INITIAL_TEST, REFERENCE_TEST, GraderProcess
from vtbench import layout
from vtbench.grader import Ledger
from vtbench.tasks import find_task
from vtbench.tasks.store import load_split


def repeat_text(agent: httpx.Client) -> str:
    return agent.get("/v1/validations/1").text + agent.get("/v1/validations/2").text


def ledger_rows() -> dict[str, int]:
    conn = sqlite3.connect(layout.grader_db())
    return {table: conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            for table in ("budget_rows", "validations", "submissions")}


def events(kind: str) -> list[dict]:
    return [e for e in Ledger().events() if e["kind"] == kind]


def test_validation_scores_with_trajectories_submission_says_nothing_operator_sees_test(
    grader: GraderProcess, small_task: Path, workspace: Path
) -> None:
    grader.start()
    agent = grader.client(grader.create_episode(small_task, workspace, validations=3))

    first = agent.post("/v1/validations", json={"model": "models/good"})
    assert first.status_code == 200, first.text
    result = first.json()
    assert result["state"] == "completed" and result["settlement"] == "charged"
    assert result["n"] == 4 and 0.0 <= result["score"] <= 1.0
    assert result["harness"] == "pristine"  # no harness sent: the task's initial one ran
    for instance in result["instances"]:
        assert instance["id"].startswith("val-") and instance["trajectory"]["calls"]
        assert set(instance) == {"id", "input", "output", "trajectory", "score", "error"}

    repeat = agent.post("/v1/validations", json={"model": "models/good"}).json()
    assert repeat["cached"] and repeat["credit"] == 0 and repeat["score"] == result["score"]

    ack = agent.post("/v1/submission", json={"model": "models/good"})
    assert ack.status_code == 200
    assert set(ack.json()) == {"episode", "model_hash", "harness_hash", "received"}
    again = agent.post("/v1/submission", json={"model": "models/good"})
    assert again.status_code == 409 and "already submitted" in again.json()["error"]

    status = agent.get("/v1/status").json()
    assert status["validations_left"] == 2 and status["submitted"]
    seen_by_agent = first.text + repeat_text(agent) + ack.text + str(status)
    for item in load_split(find_task(str(small_task)), "test"):
        assert item["id"] not in seen_by_agent
        assert json.dumps(item["input"]) not in seen_by_agent
    assert "score" not in ack.text

    episode = status["episode"]
    operator = grader.operator_client()
    finished = operator.post(f"/v1/operator/episodes/{episode}/finish").json()
    assert finished["state"] == "scored" and 0.0 <= finished["test_score"] <= 1.0
    assert finished["initial"] == INITIAL_TEST and finished["reference"] == REFERENCE_TEST
    assert finished["gain"] == pytest.approx(finished["test_score"] - INITIAL_TEST)
    assert operator.get(f"/v1/operator/episodes/{episode}/result").json() == finished
    assert operator.get("/v1/operator/status").json()["consistency"] == []
    history = operator.get(f"/v1/operator/episodes/{episode}/history").json()
    assert [(v["index"], v["cached"], v["charged"]) for v in history["validations"]] == [
        (1, False, True), (2, True, False)]
    assert history["submission"]["candidate"] == "models/good"
    assert agent.get(f"/v1/operator/episodes/{episode}/history").status_code == 401
    assert agent.get(f"/v1/operator/episodes/{episode}/result").status_code == 401


def test_tokens_reach_only_their_own_episode_and_denials_are_vague_and_logged(
    grader: GraderProcess, small_task: Path, workspace: Path
) -> None:
    grader.start()
    alice = grader.client(grader.create_episode(small_task, workspace))
    mallory = grader.client(grader.create_episode(small_task, workspace))
    queued = alice.post("/v1/validations", json={"model": "models/good", "wait": False})
    assert queued.status_code == 202
    validation_id = queued.json()["id"]

    stolen = mallory.get(f"/v1/validations/{validation_id}")
    missing = mallory.get("/v1/validations/999999")
    assert (stolen.status_code, stolen.json()) == (404, {"error": "not found"})
    assert stolen.json() == missing.json()

    for path in ("/v1/operator/status", "/v1/operator/ledger"):
        denied = alice.get(path)
        assert (denied.status_code, denied.json()) == (401, {"error": "not authorized"})
    for client in (grader.client(), grader.client("made-up"), grader.operator_client()):
        assert client.get("/v1/status").json() == {"error": "not authorized"}
    reasons = [e["detail"]["reason"] for e in events("denied")]
    assert reasons.count("episode token on an operator route") == 2
    assert "operator token on an episode route" in reasons and "bad episode token" in reasons


@pytest.mark.parametrize("attack", ["pickle", "symlink", "sparse"])
def test_unsafe_candidate_is_refused_naming_the_file_and_costs_nothing(
    grader: GraderProcess, small_task: Path, workspace: Path, private_store: Path, attack: str
) -> None:
    bad = workspace / "models" / "bad"
    (bad).mkdir()
    for item in (workspace / "models" / "good").iterdir():
        (bad / item.name).write_bytes(item.read_bytes())
    if attack == "pickle":
        (bad / "pytorch_model.bin").write_bytes(b"\x80\x04K\x01.")
        offender = "pytorch_model.bin"
    elif attack == "symlink":
        (bad / "labels.json").symlink_to(private_store / "secret")
        offender = "labels.json"
    else:
        with (bad / "model-00002.safetensors").open("wb") as handle:
            handle.truncate(2**42)
        offender = "model-00002.safetensors"
    grader.start()
    agent = grader.client(grader.create_episode(small_task, workspace))
    before = ledger_rows()
    answer = agent.post("/v1/validations", json={"model": "models/bad"})
    assert answer.status_code == 422 and offender in answer.json()["error"]
    assert ledger_rows() == before
    assert offender in events("candidate_refused")[-1]["detail"]["error"]


def test_twenty_parallel_validations_never_overspend_a_budget_of_five(
    grader: GraderProcess, small_task: Path, workspace: Path
) -> None:
    grader.start()
    token = grader.create_episode(small_task, workspace, validations=5)

    def request(_: int) -> int:
        with grader.client(token) as agent:
            body = {"model": "models/good", "wait": False}
            return agent.post("/v1/validations", json=body).status_code

    with ThreadPoolExecutor(20) as pool:
        codes = list(pool.map(request, range(20)))
    assert sorted(codes) == [202] * 5 + [429] * 15
    grader.stop()  # mid-evaluation: the reservations must survive as open, not lost
    ledger = Ledger()
    assert len(ledger.validations()) == 5
    assert ledger.check_consistency() == []
    assert len(events("budget_refused")) == 15
    assert os.environ["VTBENCH_HOME"]
