"""Candidate lineage as the real grader records it, over its socket, with real tiny models.

The agent's forged lineage files are planted everywhere and must change nothing.
"""

import json
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from tests.grader.conftest import GraderProcess
from vtbench import layout
from vtbench.episode.processes import save
from vtbench.episode.record import Lineage, ProcessSeen, Validation
from vtbench.grader.intake import intake
from vtbench.models.tiny import new_tiny_model, save_checkpoint
from vtbench.workspace import git, snapshot

FORGED = {"origin": "merged", "parents": ["models/initial", "models/tuned-b"],
          "method": "linear", "weights": [0.5, 0.5], "snapshot": "0" * 40}
COMMAND = ["python", "trainer/train.py", "--base", "models/base", "--out", "models/tuned-a"]


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lineage-models")
    for name, seed in (("tuned-a", 1), ("tuned-b", 2)):
        save_checkpoint(new_tiny_model(seed=seed), root / name)
    return root


@pytest.fixture
def episode_folder(tmp_path: Path, tiny_model: Path, trained: Path) -> Path:
    """A workspace with models/initial, two trained folders (one with forged lineage
    claims), data/ and trainer/, and its snapshots.git beside it at snapshot 0."""
    workspace = tmp_path / "workspace"
    shutil.copytree(tiny_model, workspace / "models" / "initial")
    for name in ("tuned-a", "tuned-b"):
        shutil.copytree(trained / name, workspace / "models" / name)
    (workspace / "data").mkdir()
    (workspace / "data" / "train.jsonl").write_text('{"input": "2+2", "output": "4"}\n')
    (workspace / "trainer").mkdir()
    (workspace / "trainer" / "train.py").write_text("print('training')\n")
    (workspace / "TASK.md").write_text("# task\n")
    git_dir = tmp_path / "snapshots.git"
    git_dir.mkdir()
    git(git_dir, workspace, "init", "--quiet", "--initial-branch=main")
    snapshot(git_dir, workspace, "snapshot 0")
    forged = json.dumps(FORGED)
    for place in (workspace / "lineage.json", workspace / "models" / "lineage.json",
                  workspace / "models" / "tuned-a" / "lineage.json"):
        place.write_text(forged)
    (workspace / "models" / "tuned-a" / "train_log.json").write_text(
        json.dumps({**FORGED, "command": COMMAND, "seed": 1}))
    now = time.time()  # what the runner saw: the trainer of trainer/ writing models/tuned-a
    save(tmp_path / "processes.json", [ProcessSeen(
        pid=7, first_seen=now, last_seen=now, cwd="/workspace", argv=COMMAND, training=True,
        candidates=["models/tuned-a"])])
    return tmp_path


def by_name(rows: list[dict]) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for row in rows:
        found.setdefault(row["name"], []).append(row)
    return found


@pytest.mark.slow
def test_lineage_is_what_the_grader_saw_and_forged_claims_change_nothing(
    grader: GraderProcess, minimal_task: Path, episode_folder: Path
) -> None:
    workspace, git_dir = episode_folder / "workspace", episode_folder / "snapshots.git"
    models = workspace / "models"
    grader.start()
    agent = grader.client(grader.create_episode(minimal_task, workspace))
    merge = {"method": "linear", "models": ["models/tuned-a", "models/tuned-b"],
             "weights": [0.5, 0.5], "out": "models/merged"}
    merged = agent.post("/v1/merges", json=merge)
    assert merged.status_code == 200, merged.text
    merge_commit = git(git_dir, workspace, "rev-parse", "HEAD")

    shutil.copytree(models / "initial", models / "initial-copy")
    shutil.copytree(models / "merged", models / "merged-copy")
    (models / "merged" / "lineage.json").write_text(json.dumps(FORGED))  # edited after
    second = {"method": "slerp", "models": ["models/merged", "models/initial-copy"],
              "weights": [0.5, 0.5], "out": "models/second"}
    assert agent.post("/v1/merges", json=second).status_code == 200
    assert agent.post("/v1/submission", json={"model": "models/merged-copy/"}).status_code == 200

    listed = agent.get("/v1/models").json()
    seen = by_name(listed)
    assert [(row["name"], row["origin"]) for row in listed] == [
        ("models/initial", "initial"), ("models/tuned-a", "trained"),
        ("models/tuned-b", "trained"), ("models/merged", "merged"), ("models/merged", "trained"),
        ("models/initial-copy", "reused"), ("models/second", "merged"),
        ("models/merged-copy", "reused")]
    tuned_a = seen["models/tuned-a"][0]
    assert tuned_a["snapshot"] == merge_commit
    assert tuned_a["data_hash"] == git(git_dir, workspace, "rev-parse", f"{merge_commit}:data")
    assert tuned_a["trainer_hash"] == git(git_dir, workspace, "rev-parse",
                                          f"{merge_commit}:trainer")
    assert tuned_a["method"] == "claimed: " + " ".join(COMMAND)
    assert tuned_a["trained_with"] == "components"
    assert [p["argv"] for p in tuned_a["trained_by"]] == [COMMAND]
    assert (tuned_a["parents"], tuned_a["weights"]) == ([], [])
    tuned_b = seen["models/tuned-b"][0]  # no training the runner saw names it
    assert tuned_b["method"] is None and tuned_b["trained_with"] == "unknown"
    assert tuned_b["snapshot"] == merge_commit and tuned_b["data_hash"] is None
    first_merge = seen["models/merged"][0]
    assert (first_merge["parents"], first_merge["weights"], first_merge["method"]) == (
        ["models/tuned-a", "models/tuned-b"], [0.5, 0.5], "linear")
    assert first_merge["model_hash"] == merged.json()["hash"]
    assert first_merge["snapshot"] is None and first_merge["data_hash"] is None
    edited = seen["models/merged"][1]
    assert edited["model_hash"] == intake(models / "merged", "model").hash != merged.json()["hash"]
    assert seen["models/initial-copy"][0]["parents"] == ["models/initial"]
    assert seen["models/merged-copy"][0]["parents"] == ["models/merged"]
    assert all(row["best_score"] is None and row["validations"] == 0 for row in listed)

    episode = agent.get("/v1/status").json()["episode"]
    history = grader.operator_client().get(f"/v1/operator/episodes/{episode}/history").json()
    records = [Lineage.model_validate(c) for c in history["candidates"]]
    assert [(r.name, r.origin) for r in records] == [(r["name"], r["origin"]) for r in listed]
    assert history["submission"]["candidate"] == "models/merged-copy"


def test_lineage_rows_are_append_only(
    grader: GraderProcess, minimal_task: Path, episode_folder: Path
) -> None:
    grader.start()
    grader.create_episode(minimal_task, episode_folder / "workspace")
    conn = sqlite3.connect(layout.grader_db())
    assert conn.execute("SELECT origin FROM candidates").fetchall() == [("initial",)]
    for statement in ("UPDATE candidates SET origin = 'merged'", "DELETE FROM candidates"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute(statement)


def test_a_validated_candidate_is_trained_at_the_validation_snapshot_with_its_best_score(
    grader: GraderProcess, small_task: Path, episode_folder: Path
) -> None:
    workspace, git_dir = episode_folder / "workspace", episode_folder / "snapshots.git"
    grader.start()
    agent = grader.client(grader.create_episode(small_task, workspace, validations=2))
    answer = agent.post("/v1/validations", json={"model": "models/tuned-b"})
    assert answer.status_code == 200 and answer.json()["state"] == "completed", answer.text

    listed = by_name(agent.get("/v1/models").json())
    tuned = listed["models/tuned-b"][0]
    assert tuned["origin"] == "trained" and tuned["snapshot"] == git(
        git_dir, workspace, "rev-parse", "HEAD")
    assert (tuned["best_score"], tuned["validations"]) == (answer.json()["score"], 1)
    episode = agent.get("/v1/status").json()["episode"]
    history = grader.operator_client().get(f"/v1/operator/episodes/{episode}/history").json()
    validation = Validation.model_validate(history["validations"][0])
    assert validation.snapshot == tuned["snapshot"] and validation.candidate == "models/tuned-b"
    assert [Lineage.model_validate(c).origin for c in history["candidates"]] == [
        "initial", "trained"]
