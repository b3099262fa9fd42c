"""A merge is a request of its episode like a validation: the episode's state, its store
quota and its close hold for merges too, through the real grader over its unix socket."""

import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.grader.conftest import GraderProcess, episode_body
from tests.grader.test_merge import listing, merge_workspace, parents  # noqa: F401 (fixtures)
from tests.grader.test_service_integrity import stored_trees
from vtbench import layout
from vtbench.errors import BudgetExhausted, EpisodeClosed
from vtbench.grader import Ledger
from vtbench.grader.ledger import EpisodeBudgets

BODY = {"method": "linear", "models": ["models/a", "models/b"], "weights": [0.5, 0.5],
        "out": "models/avg"}


def finish(grader: GraderProcess, agent: httpx.Client) -> None:
    episode = agent.get("/v1/status").json()["episode"]
    assert grader.operator_client().post(f"/v1/operator/episodes/{episode}/finish").is_success


def test_a_merge_after_the_episode_closed_is_refused_and_writes_nothing(
    grader: GraderProcess, minimal_task: Path, merge_workspace: Path  # noqa: F811
) -> None:
    grader.start()
    agent = grader.client(grader.create_episode(minimal_task, merge_workspace))
    finish(grader, agent)
    before = listing(merge_workspace)

    late = agent.post("/v1/merges", json=BODY)
    assert late.status_code == 409 and "is closed" in late.json()["error"], late.text
    assert listing(merge_workspace) == before and stored_trees() == []
    assert not [e for e in Ledger().events() if e["kind"] == "merged"]


def test_the_store_quota_bounds_what_a_merge_takes_in(
    grader: GraderProcess, minimal_task: Path, merge_workspace: Path  # noqa: F811
) -> None:
    grader.start()
    size = sum(f.stat().st_size for f in (merge_workspace / "models" / "a").iterdir())
    body = episode_body(minimal_task, merge_workspace, validations=5, compute_seconds=600,
                        store_bytes=size * 3 // 2)
    grant = grader.operator_client().post("/v1/operator/episodes", json=body).json()
    agent = grader.client(grant["token"])
    before = listing(merge_workspace)

    over = agent.post("/v1/merges", json=BODY)
    assert over.status_code == 422 and "limit" in over.json()["error"], over.text
    assert listing(merge_workspace) == before
    assert stored_trees() == []  # the first parent, taken in before the second was refused


def test_closing_an_episode_stops_its_running_merge_intake(
    grader: GraderProcess, minimal_task: Path, merge_workspace: Path  # noqa: F811
) -> None:
    big = merge_workspace / "models" / "big"
    shutil.copytree(merge_workspace / "models" / "a", big)
    with (big / "model-00002.safetensors").open("wb") as handle:
        handle.write(b"\x01" * 2**20)
        handle.truncate(3 * 2**30)  # sparse: cheap to make, slow to copy and hash
    grader.start()
    agent = grader.client(grader.create_episode(minimal_task, merge_workspace))
    before = listing(merge_workspace)

    with ThreadPoolExecutor(1) as pool:
        late = pool.submit(agent.post, "/v1/merges",
                           json={**BODY, "models": ["models/big", "models/a"]})
        while not list(layout.candidate_store().glob(".incoming-*")):
            time.sleep(0.01)
        finish(grader, agent)
        halted = list(layout.candidate_store().glob(".incoming-*"))
        answer: httpx.Response = late.result(timeout=60)
    assert halted == [], "the finish must wait for the merge's intake to stop and tidy"
    assert answer.status_code == 422 and "episode closed" in answer.json()["error"], answer.text
    assert listing(merge_workspace) == before and stored_trees() == []


def test_the_ledger_accepts_a_merge_only_while_its_episode_is_open_with_compute_left(
        tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite")
    for episode in ("spent", "closed"):
        ledger.create_episode(episode, "task", f"hash-{episode}",
                              EpisodeBudgets(validations=2, compute_seconds=10))
        ledger.record_merge(episode, out="models/first")
    ledger.close_episode("closed")
    validation = ledger.reserve_validation("spent", {"model_hash": "m"})
    ledger.start(validation)
    ledger.complete(validation, {"score": 0.5}, compute_seconds=10)
    with pytest.raises(EpisodeClosed):
        ledger.record_merge("closed", out="models/second")
    with pytest.raises(BudgetExhausted, match="no validation budget left"):
        ledger.record_merge("spent", out="models/second")
    for episode in ("spent", "closed"):
        merged = [e["detail"]["out"] for e in ledger.events(episode) if e["kind"] == "merged"]
        assert merged == ["models/first"]
