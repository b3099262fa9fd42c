"""The snapshot history holds only snapshots that something names, and grows only within
the episode's quota: a request the ledger refuses after its snapshot takes the snapshot
back, a cached repeat takes none, and a snapshot past the store quota is refused whole
(real grader over its socket, real git)."""

import random
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.grader.conftest import GraderProcess, episode_body
from tests.grader.test_service_integrity import commits, stored_trees, variant, with_snapshots
from vtbench.grader import Ledger


@pytest.mark.slow
def test_snapshots_of_validations_that_lost_the_race_for_the_last_credit_are_withdrawn(
    grader: GraderProcess, small_task: Path, workspace: Path
) -> None:
    git_dir = with_snapshots(workspace)
    with (workspace / "data" / "big.bin").open("wb") as handle:  # a snapshot takes a while
        handle.write(b"\0" * (96 << 20))
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
    (validation,) = Ledger().validations(episode)
    head = subprocess.run(["git", "--git-dir", str(git_dir), "rev-parse", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert commits(git_dir) == 1 and head == validation.inputs["snapshot"]


def objects_on_disk(git_dir: Path) -> tuple[int, int]:
    """(bytes, files) of the history's objects, as the host's disk holds them."""
    files = [p for p in (git_dir / "objects").rglob("*") if p.is_file()]
    return sum(p.stat().st_blocks * 512 for p in files), len(files)


def write_text(path: Path, megabytes: int, seed: int) -> None:
    """New text that compresses no better than hex digits do."""
    path.write_text(random.Random(seed).randbytes(megabytes << 19).hex())


@pytest.mark.slow
def test_cached_repeats_without_credit_add_nothing_to_the_snapshot_history(
    grader: GraderProcess, small_task: Path, workspace: Path
) -> None:
    git_dir = with_snapshots(workspace)
    grader.start()
    agent = grader.client(grader.create_episode(small_task, workspace, validations=1))
    first = agent.post("/v1/validations", json={"model": "models/good"})
    assert first.status_code == 200 and first.json()["credit"] == 1, first.text
    before, history = objects_on_disk(git_dir), commits(git_dir)

    for index in range(3):
        write_text(workspace / "data" / f"new-{index}.txt", 24, seed=index)
        repeat = agent.post("/v1/validations", json={"model": "models/good"})
        assert repeat.status_code == 200 and repeat.json()["cached"], repeat.text
        assert repeat.json()["credit"] == 0
    for index in range(2):
        many = workspace / "data" / f"many-{index}"
        many.mkdir()
        for number in range(5000):
            (many / f"{number}.txt").write_text(f"{index}-{number:016d}\n")
        assert agent.post("/v1/validations", json={"model": "models/good"}).json()["cached"]
    assert objects_on_disk(git_dir) == before and commits(git_dir) == history
    episode = agent.get("/v1/status").json()["episode"]
    snapshots = {v.inputs["snapshot"] for v in Ledger().validations(episode)}
    assert len(snapshots) == 1


@pytest.mark.slow
def test_snapshots_count_against_the_store_quota_and_many_files_are_packed(
    grader: GraderProcess, small_task: Path, workspace: Path
) -> None:
    git_dir = with_snapshots(workspace)
    grader.start()
    model = sum(f.stat().st_size for f in (workspace / "models" / "good").iterdir())
    body = episode_body(small_task, workspace, validations=3, compute_seconds=600,
                        store_bytes=model + (8 << 20))
    grant = grader.operator_client().post("/v1/operator/episodes", json=body).json()
    agent = grader.client(grant["token"])
    before = objects_on_disk(git_dir)

    write_text(workspace / "data" / "big.txt", 24, seed=1)  # ~12 MB compressed
    big = agent.post("/v1/validations", json={"model": "models/good"})
    (workspace / "data" / "big.txt").unlink()
    tiny = workspace / "data" / "tiny"  # 3,000 objects: at least a block each
    tiny.mkdir()
    for number in range(3000):
        (tiny / f"{number}.txt").write_text(f"{number:016d}\n")
    many = agent.post("/v1/validations", json={"model": "models/good"})
    for answer in (big, many):
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        assert "store quota" in error and "\n" not in error, error
    assert objects_on_disk(git_dir) == before and commits(git_dir) == 0
    assert stored_trees() == []

    shutil.rmtree(tiny)
    for name in ("a", "b"):  # 2 x 300 files: within the quota, packed once written
        folder = workspace / "data" / name
        folder.mkdir()
        for number in range(300):
            (folder / f"{number}.txt").write_text(f"{name}{number:016d}\n")
    fine = agent.post("/v1/validations", json={"model": "models/good"})
    assert fine.status_code == 200 and fine.json()["state"] == "completed", fine.text
    loose = [p for p in (git_dir / "objects").glob("??/*")]
    assert len(loose) < 64 and list((git_dir / "objects" / "pack").glob("*.pack"))
    assert commits(git_dir) == 1


def grow_for_free(grader: GraderProcess, token: str, workspace: Path) -> list[dict[str, Any]]:
    """A snapshot past the store quota, one charged validation, then cached repeats that
    each bring new text: what the attacked episode's agent sends."""
    answers = []
    with grader.client(token) as agent:
        write_text(workspace / "data" / "big.txt", 24, seed=1)
        answers.append(agent.post("/v1/validations", json={"model": "models/good"}).json())
        (workspace / "data" / "big.txt").unlink()
        answers.append(agent.post("/v1/validations", json={"model": "models/good"}).json())
        for index in range(2):
            write_text(workspace / "data" / f"new-{index}.txt", 2, seed=index)
            answers.append(agent.post("/v1/validations", json={"model": "models/good"}).json())
    return answers


@pytest.mark.slow  # two episodes' validations and snapshots on one real grader
def test_snapshots_growing_in_one_episode_leave_another_sharing_the_grader_untouched(
    grader: GraderProcess, small_task: Path, workspace: Path, tmp_path: Path
) -> None:
    honest = tmp_path / "honest" / "workspace"
    shutil.copytree(workspace, honest)
    attacked_git, honest_git = with_snapshots(workspace), with_snapshots(honest)
    grader.start()
    model = sum(f.stat().st_size for f in (workspace / "models" / "good").iterdir())
    body = episode_body(small_task, workspace, validations=1, compute_seconds=600,
                        store_bytes=model + (8 << 20))
    attacker = grader.operator_client().post("/v1/operator/episodes", json=body).json()
    scoring = grader.client(grader.create_episode(small_task, honest, validations=5))
    with ThreadPoolExecutor(2) as pool:
        attacked = pool.submit(grow_for_free, grader, attacker["token"], workspace)
        scored = pool.submit(scoring.post, "/v1/validations", json={"model": "models/good"})
        (quota, charged, *repeats), score = attacked.result(), scored.result().json()
    assert "store quota" in quota["error"] and "\n" not in quota["error"], quota
    assert (charged["state"], charged["credit"]) == ("completed", 1), charged
    assert all(r["cached"] and r["credit"] == 0 for r in repeats), repeats
    assert commits(attacked_git) == 1
    assert (score["state"], score["settlement"], score["credit"]) == ("completed", "charged", 1)
    status = scoring.get("/v1/status").json()
    assert status["validations_left"] == 4 and commits(honest_git) == 1
    (validation,) = Ledger().validations(status["episode"])
    head = subprocess.run(["git", "--git-dir", str(honest_git), "rev-parse", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert validation.inputs["snapshot"] == head
