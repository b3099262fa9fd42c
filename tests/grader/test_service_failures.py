"""Whose failure is it: the candidate's (charged) or the grader's (refunded), through the
real grader over its socket."""

import json
import struct
from pathlib import Path

import pytest

from tests.evaluation.conftest import write_harness
from tests.grader.conftest import GraderProcess
from vtbench.grader import Ledger

NESTED = "[" * 100_000 + "]" * 100_000

DEEP_OUTPUT = f"""
with open(args.out, "w") as out:
    for instance in instances:
        out.write({NESTED!r} + "\\n")
"""


@pytest.mark.slow  # one real validation
def test_output_nested_too_deep_is_the_candidates_failure_and_charged(
    grader: GraderProcess, small_task: Path, workspace: Path
) -> None:
    write_harness(workspace / "harness", DEEP_OUTPUT)
    grader.start()
    agent = grader.client(grader.create_episode(small_task, workspace, validations=5))
    shown = agent.post("/v1/validations", json={"model": "models/good", "harness": "harness"})
    result = shown.json()
    assert (result["state"], result["settlement"], result["score"]) == ("completed", "charged", 0)
    assert {i["error"] for i in result["instances"]} == {"no output"}
    assert agent.get("/v1/status").json()["validations_left"] == 4


@pytest.mark.slow  # one real validation
def test_a_trusted_scorer_that_raises_is_refunded_and_its_traceback_kept_for_the_operator(
    grader: GraderProcess, small_task: Path, workspace: Path
) -> None:
    scorer = small_task / "scorer.py"
    scorer.write_text(scorer.read_text().replace(
        'hidden = item["label"]["hidden"]', 'raise KeyError("scorer bug")'))
    grader.start()
    agent = grader.client(grader.create_episode(small_task, workspace, validations=5))
    shown = agent.post("/v1/validations", json={"model": "models/good"})
    result = shown.json()
    assert (result["state"], result["settlement"]) == ("failed_infra", "refunded")
    assert "infrastructure error" in result["error"] and "scorer bug" not in shown.text
    assert agent.get("/v1/status").json()["validations_left"] == 5
    (failure,) = [e for e in Ledger().events() if e["kind"] == "grader_failure"]
    assert "scorer bug" in failure["detail"]["traceback"]
    assert "ScorerError" in failure["detail"]["traceback"]


@pytest.mark.slow  # one real test scoring, twice
def test_a_scorer_that_raises_on_the_submission_leaves_it_pending_with_the_traceback_kept(
    grader: GraderProcess, small_task: Path, workspace: Path
) -> None:
    scorer = small_task / "scorer.py"
    honest = scorer.read_text()
    scorer.write_text(honest.replace('hidden = item["label"]["hidden"]',
                                     'raise KeyError("scorer bug")'))
    grader.start()
    agent = grader.client(grader.create_episode(small_task, workspace, validations=5))
    assert agent.post("/v1/submission", json={"model": "models/good"}).status_code == 200
    episode = agent.get("/v1/status").json()["episode"]
    operator = grader.operator_client()
    failed = operator.post(f"/v1/operator/episodes/{episode}/finish")
    assert failed.status_code == 503 and "finish again" in failed.json()["error"]
    (failure,) = [e for e in Ledger().events(episode) if e["kind"] == "grader_failure"]
    assert failure["detail"]["stage"] == "submission scoring"
    assert "scorer bug" in failure["detail"]["traceback"]
    assert Ledger().submission(episode).state == "pending"
    scorer.write_text(honest)  # the operator fixes the scorer and restarts the grader
    grader.stop()
    grader.start()
    scored = grader.operator_client().post(f"/v1/operator/episodes/{episode}/finish").json()
    assert scored["state"] == "scored" and scored["test_score"] is not None


def deep_header(folder: Path) -> str:
    header = ('{"__metadata__": ' + "[" * 50_000 + "]" * 50_000 + "}").encode()
    name = "model.safetensors"
    (folder / name).write_bytes(struct.pack("<Q", len(header)) + header)
    return name


def deep_config(folder: Path) -> str:
    config = json.loads((folder / "config.json").read_text())
    text = json.dumps(config)[:-1] + ', "extra": ' + NESTED + "}"
    (folder / "config.json").write_text(text)
    return "config.json"


@pytest.mark.parametrize("plant", [deep_header, deep_config])
def test_deeply_nested_json_at_intake_is_refused_naming_the_file(
    grader: GraderProcess, small_task: Path, workspace: Path, plant: object
) -> None:
    assert callable(plant)
    offender = plant(workspace / "models" / "good")
    grader.start()
    agent = grader.client(grader.create_episode(small_task, workspace))
    answer = agent.post("/v1/validations", json={"model": "models/good"})
    assert answer.status_code == 422, answer.text
    assert offender in answer.json()["error"] and "nested deeper" in answer.json()["error"]


@pytest.mark.slow
def test_a_model_that_fails_to_load_is_reported_without_store_paths(
    grader: GraderProcess, small_task: Path, workspace: Path, private_store: Path
) -> None:
    config_path = workspace / "models" / "good" / "config.json"
    config = json.loads(config_path.read_text())
    config["vocab_size"] = config["vocab_size"] * 2 + 1  # the weights no longer fit
    config_path.write_text(json.dumps(config))
    grader.start()
    agent = grader.client(grader.create_episode(small_task, workspace))
    shown = agent.post("/v1/validations", json={"model": "models/good"})
    result = shown.json()
    assert (result["state"], result["settlement"]) == ("failed_candidate", "charged")
    assert "the weights do not cover the config" in result["error"], result["error"]
    assert str(private_store) not in shown.text and "/cas/" not in shown.text
    (detail,) = [e for e in Ledger().events() if e["kind"] == "candidate_failure_detail"]
    assert "/cas/" in detail["detail"]["error"]
