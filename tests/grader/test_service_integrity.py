"""Integrity of the grader's budgets, store and episode state, through its real socket."""

import json
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.grader.conftest import GraderProcess, episode_body
from vtbench import layout
from vtbench.grader import Ledger


def stored_trees() -> list[str]:
    store = layout.candidate_store()
    return sorted(p.name for p in store.iterdir()) if store.is_dir() else []


def with_snapshots(workspace: Path) -> Path:
    git_dir = workspace.parent / "snapshots.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(git_dir)], check=True)
    (workspace / "data").mkdir(exist_ok=True)
    (workspace / "data" / "train.jsonl").write_text('{"x": 1}\n')
    return git_dir


def commits(git_dir: Path) -> int:
    done = subprocess.run(["git", "--git-dir", str(git_dir), "rev-list", "--all", "--count"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout.strip() or 0)


def variant(workspace: Path, index: int) -> str:
    """A copy of the good model whose bytes differ (its tree hash is its own)."""
    folder = workspace / "models" / f"v{index}"
    shutil.copytree(workspace / "models" / "good", folder)
    (folder / "notes.json").write_text(json.dumps({"variant": index}))
    return f"models/v{index}"


def test_a_validation_without_credit_copies_nothing_and_commits_nothing(
    grader: GraderProcess, small_task: Path, workspace: Path
) -> None:
    git_dir = with_snapshots(workspace)
    grader.start()
    agent = grader.client(grader.create_episode(small_task, workspace, validations=0))

    for index in range(3):
        answer = agent.post("/v1/validations", json={"model": variant(workspace, index)})
        assert answer.status_code == 429, answer.text
        assert "no validation budget left" in answer.json()["error"]
    assert stored_trees() == []
    assert commits(git_dir) == 0


def test_parallel_validations_beyond_the_budget_leave_only_the_validated_tree(
    grader: GraderProcess, small_task: Path, workspace: Path
) -> None:
    grader.start()
    token = grader.create_episode(small_task, workspace, validations=1)
    names = [variant(workspace, index) for index in range(6)]

    def request(name: str) -> int:
        with grader.client(token) as agent:
            return agent.post("/v1/validations", json={"model": name, "wait": False}).status_code

    with ThreadPoolExecutor(6) as pool:
        codes = list(pool.map(request, names))
    assert sorted(codes) == [202] + [429] * 5
    episode = grader.client(token).get("/v1/status").json()["episode"]
    assert grader.operator_client().post(f"/v1/operator/episodes/{episode}/finish").is_success
    (validation,) = Ledger().validations(episode)
    assert stored_trees() == [validation.inputs["model_hash"]]


def test_an_intake_quota_bounds_what_one_episode_stores(
    grader: GraderProcess, small_task: Path, workspace: Path
) -> None:
    grader.start()
    size = sum(f.stat().st_size for f in (workspace / "models" / "good").iterdir())
    body = episode_body(small_task, workspace, validations=5, compute_seconds=600,
                        store_bytes=size * 3 // 2)
    grant = grader.operator_client().post("/v1/operator/episodes", json=body).json()
    agent = grader.client(grant["token"])
    first = agent.post("/v1/submission", json={"model": variant(workspace, 0)})
    assert first.status_code == 200, first.text
    over = agent.post("/v1/validations", json={"model": variant(workspace, 1), "wait": False})
    assert over.status_code == 422 and "limit" in over.json()["error"]
    assert len(stored_trees()) == 1


def test_a_submission_after_the_episode_closed_is_refused_and_not_recorded(
    grader: GraderProcess, small_task: Path, workspace: Path
) -> None:
    grader.start()
    token = grader.create_episode(small_task, workspace)
    agent = grader.client(token)
    episode = agent.get("/v1/status").json()["episode"]
    assert grader.operator_client().post(f"/v1/operator/episodes/{episode}/finish").is_success

    late = agent.post("/v1/submission", json={"model": "models/good"})
    assert late.status_code == 409 and "is closed" in late.json()["error"]
    again = agent.post("/v1/validations", json={"model": "models/good"})
    assert again.status_code == 409 and "is closed" in again.json()["error"]
    assert Ledger().submission(episode) is None and stored_trees() == []


def test_closing_an_episode_stops_its_running_intake(
    grader: GraderProcess, small_task: Path, workspace: Path
) -> None:
    big = workspace / "models" / "big"
    shutil.copytree(workspace / "models" / "good", big)
    with (big / "model-00002.safetensors").open("wb") as handle:
        handle.write(b"\x01" * 2**20)
        handle.truncate(3 * 2**30)  # sparse: cheap to make, slow to copy and hash
    grader.start()
    token = grader.create_episode(small_task, workspace)
    agent = grader.client(token)
    episode = agent.get("/v1/status").json()["episode"]

    with ThreadPoolExecutor(1) as pool:
        late = pool.submit(agent.post, "/v1/submission", json={"model": "models/big"})
        while not list(layout.candidate_store().glob(".incoming-*")):
            time.sleep(0.01)
        finished = grader.operator_client().post(f"/v1/operator/episodes/{episode}/finish")
        halted = list(layout.candidate_store().glob(".incoming-*"))
        answer: httpx.Response = late.result(timeout=60)
    assert halted == [], "the finish must wait for the episode's intake to stop and tidy"
    assert finished.json()["state"] == "no submission"
    assert answer.status_code == 422 and "episode closed" in answer.json()["error"]
    assert Ledger().submission(episode) is None and stored_trees() == []


@pytest.mark.slow  # two real validations
def test_a_second_episode_pays_for_bytes_another_episode_validated(
    grader: GraderProcess, small_task: Path, workspace: Path
) -> None:
    grader.start()
    first = grader.client(grader.create_episode(small_task, workspace))
    second = grader.client(grader.create_episode(small_task, workspace))
    paid = first.post("/v1/validations", json={"model": "models/good"}).json()
    again = second.post("/v1/validations", json={"model": "models/good"}).json()
    assert paid["state"] == again["state"] == "completed"
    assert not again["cached"] and again["credit"] == 1
    assert second.get("/v1/status").json()["validations_left"] == 4


def plant_litter() -> Path:
    litter = layout.candidate_store() / ".incoming-0123abcd"
    (litter / "files").mkdir(parents=True)
    (litter / "files" / "model.safetensors").write_bytes(b"\0" * 4096)
    for path in (litter / "files" / "model.safetensors", litter / "files", litter):
        path.chmod(0o555 if path.is_dir() else 0o444)
    return litter


def test_intake_litter_is_swept_at_grader_start_and_at_episode_close(
    grader: GraderProcess, small_task: Path, workspace: Path
) -> None:
    litter = plant_litter()
    grader.start()
    assert not litter.exists()
    agent = grader.client(grader.create_episode(small_task, workspace))
    episode = agent.get("/v1/status").json()["episode"]
    litter = plant_litter()
    assert grader.operator_client().post(f"/v1/operator/episodes/{episode}/finish").is_success
    assert not litter.exists()


@pytest.mark.slow  # one real (time-limited) evaluation
def test_parallel_validations_never_spend_more_grader_seconds_than_the_budget(
    grader: GraderProcess, small_task: Path, workspace: Path
) -> None:
    grader.start()
    body = episode_body(small_task, workspace, validations=5, compute_seconds=1.0)
    token = grader.operator_client().post("/v1/operator/episodes", json=body).json()["token"]
    names = [variant(workspace, index) for index in range(3)]

    def request(name: str) -> dict:
        with grader.client(token) as agent:
            return dict(agent.post("/v1/validations", json={"model": name}).json())

    with ThreadPoolExecutor(3) as pool:
        shown = list(pool.map(request, names))
    assert all(v["state"] not in ("queued", "running") for v in shown), shown
    status = grader.client(token).get("/v1/status").json()
    assert status["compute_seconds_left"] >= 0
    ledger = Ledger()
    charged = [r for r in ledger.export()["budget_rows"]
               if r["kind"] == "compute_seconds" and r["op"] == "charge"]
    assert sum(r["amount"] for r in charged) <= 1.0
    assert ledger.check_consistency() == []
