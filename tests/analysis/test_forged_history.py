"""A history the agent forges inside its workspace never reaches the report.

The runner keeps the snapshots in ``snapshots.git`` beside the workspace; the agent may
plant a ``/workspace/.git`` that borrows the runner's objects (``objects/info/alternates``)
and holds loose objects under the runner's snapshot ids with commits of its choice.
"""

import os
import subprocess
import zlib
from pathlib import Path

import pytest

from tests.analysis.conftest import GIT_ENV, TRAINER_PY, write_record
from vtbench.analysis.gitstore import SnapshotStore
from vtbench.analysis.history import episode_history
from vtbench.errors import AnalysisError
from vtbench.workspace import git, snapshot


def planted_git(workspace: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=workspace, check=True, capture_output=True,
                          text=True, env=os.environ | GIT_ENV).stdout.strip()


@pytest.fixture
def episode(tmp_path: Path) -> tuple[Path, str, str]:
    """A runner-made episode folder with snapshot 0 and one unchanged validation."""
    folder, workspace = tmp_path / "episode", tmp_path / "episode" / "workspace"
    for name, text in {"TASK.md": "# task\n", "data/train.jsonl": '{"input": "1"}\n',
                       "trainer/train.py": TRAINER_PY, "harness/run.py": "print(1)\n"}.items():
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(text)
    git_dir = folder / "snapshots.git"
    git_dir.mkdir()
    git(git_dir, workspace, "init", "--quiet", "--initial-branch=main")
    first = snapshot(git_dir, workspace, "snapshot 0")
    return folder, first, snapshot(git_dir, workspace, "validation 1: models/a")


def forge(workspace: Path, snapshots: Path, genuine: str, parent: str) -> None:
    """Plant ``.git`` borrowing ``snapshots``' objects, with ``genuine`` a commit whose tree
    rewrites the trainer's loss."""
    planted_git(workspace, "init", "-q")
    (workspace / ".git/objects/info/alternates").write_text(f"{snapshots / 'objects'}\n")
    (workspace / "trainer/train.py").write_text(TRAINER_PY.replace("cross_entropy", "nll_loss"))
    planted_git(workspace, "add", "-A")
    tree = planted_git(workspace, "write-tree")
    body = (f"tree {tree}\nparent {parent}\nauthor vtbench <v@localhost> 0 +0000\n"
            f"committer vtbench <v@localhost> 0 +0000\n\nvalidation 1: models/a\n").encode()
    loose = workspace / ".git/objects" / genuine[:2] / genuine[2:]
    loose.parent.mkdir(exist_ok=True)
    loose.write_bytes(zlib.compress(b"commit %d\0" % len(body) + body))


def test_a_planted_workspace_git_does_not_change_the_report(
        episode: tuple[Path, str, str]) -> None:
    folder, first, validated = episode
    forge(folder / "workspace", folder / "snapshots.git", validated, first)
    history = episode_history(write_record(folder, [(validated, 0.5)]), folder)
    assert history.classified and history.snapshot0 == first
    change = history.steps[0].change
    assert change is not None and change.components == [] and change.touched == []


def test_a_repository_with_alternates_is_refused(episode: tuple[Path, str, str]) -> None:
    folder, first, validated = episode
    forge(folder / "workspace", folder / "snapshots.git", validated, first)
    with pytest.raises(AnalysisError, match="borrows objects"):
        SnapshotStore(folder / "workspace" / ".git")


def test_an_object_git_serves_is_hashed_before_it_is_believed(
        episode: tuple[Path, str, str]) -> None:
    folder, first, validated = episode
    forge(folder / "workspace", folder / "snapshots.git", validated, first)
    planted = folder / "workspace" / ".git"
    (planted / "objects/info/alternates").unlink()
    with SnapshotStore(planted) as store, pytest.raises(AnalysisError, match="its hash"):
        store.commit(validated)
