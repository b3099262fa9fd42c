"""Snapshots record the bytes of every file outside models/, whatever the agent made of them,
and a snapshot past its allowance leaves nothing behind."""

import os
import subprocess
from pathlib import Path

import pytest

from vtbench.analysis.changes import classify
from vtbench.analysis.gitstore import SnapshotStore
from vtbench.errors import AnalysisError, SnapshotRefused
from vtbench.workspace import MAX_DEPTH, git, history_bytes, snapshot

GIT_ENV = {"GIT_AUTHOR_NAME": "agent", "GIT_AUTHOR_EMAIL": "agent@sandbox",
           "GIT_COMMITTER_NAME": "agent", "GIT_COMMITTER_EMAIL": "agent@sandbox"}


def agent_git(folder: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True,
                   env=os.environ | GIT_ENV)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An episode folder's workspace with its snapshots.git beside it at snapshot 0."""
    root = tmp_path / "episode" / "workspace"
    for name, text in {"TASK.md": "# task\n", "data/train.jsonl": '{"input": "1"}\n',
                       "trainer/train.py": "print('train')\n", "harness/run.py": "print(1)\n"
                       }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git_dir = root.parent / "snapshots.git"
    git_dir.mkdir()
    git(git_dir, root, "init", "--quiet", "--initial-branch=main")
    snapshot(git_dir, root, "snapshot 0")
    return root


def take(workspace: Path, message: str = "validate models/a") -> str:
    return snapshot(workspace.parent / "snapshots.git", workspace, message)


def stored(workspace: Path, commit: str, path: str) -> bytes:
    with SnapshotStore(workspace) as store:
        return store.blob(store.files(commit, (path.split("/")[0],))[path])


def test_a_nested_repository_in_data_is_recorded_file_by_file(workspace: Path) -> None:
    hidden = workspace / "data" / "hidden"
    hidden.mkdir()
    (hidden / "extra.jsonl").write_text('{"input": "2"}\n')
    agent_git(hidden, "init", "-q")
    agent_git(hidden, "add", "-A")
    agent_git(hidden, "commit", "-qm", "hidden data")
    first = take(workspace)
    (hidden / "extra.jsonl").write_text('{"input": "2"}\n{"input": "3"}\n')
    second = take(workspace)
    data = git(workspace.parent / "snapshots.git", workspace, "rev-parse", f"{first}:data")
    assert data != git(workspace.parent / "snapshots.git", workspace, "rev-parse",
                       f"{second}:data")
    assert stored(workspace, second, "data/hidden/extra.jsonl") == (hidden / "extra.jsonl"
                                                                     ).read_bytes()
    assert stored(workspace, second, "data/hidden/.git/HEAD") == (hidden / ".git/HEAD"
                                                                  ).read_bytes()
    with SnapshotStore(workspace) as store:
        assert classify(store, first, second).kinds == ["augment"]


def test_git_attributes_in_the_workspace_do_not_rewrite_the_recorded_bytes(
        workspace: Path) -> None:
    (workspace / "data" / ".gitattributes").write_text("* text eol=crlf ident\n")
    rows = b'{"input": "$Id: forged $"}\r\n{"input": "2"}\n'
    (workspace / "data" / "train.jsonl").write_bytes(rows)
    assert stored(workspace, take(workspace), "data/train.jsonl") == rows


def test_symlinks_and_modes_are_recorded_and_fifos_left_out(workspace: Path) -> None:
    (workspace / "trainer" / "run.sh").write_text("#!/bin/sh\n")
    (workspace / "trainer" / "run.sh").chmod(0o755)
    (workspace / "data" / "link.jsonl").symlink_to("/tmp/rows.jsonl")
    os.mkfifo(workspace / "data" / "pipe")
    commit = take(workspace)
    listing = git(workspace.parent / "snapshots.git", workspace, "ls-tree", "-r", commit)
    modes = {line.split("\t")[1]: line.split()[0] for line in listing.splitlines()}
    assert modes == {"TASK.md": "100644", "data/link.jsonl": "120000",
                     "data/train.jsonl": "100644", "harness/run.py": "100644",
                     "trainer/run.sh": "100755", "trainer/train.py": "100644"}
    assert stored(workspace, commit, "data/link.jsonl") == b"/tmp/rows.jsonl"


def test_snapshots_chain_and_git_reads_them_back(workspace: Path) -> None:
    git_dir = workspace.parent / "snapshots.git"
    first = git(git_dir, workspace, "rev-parse", "HEAD")
    second = take(workspace)
    assert git(git_dir, workspace, "rev-parse", f"{second}^") == first
    assert git(git_dir, workspace, "log", "--format=%s", "-1") == "validate models/a"
    assert git(git_dir, workspace, "show", f"{second}:data/train.jsonl") == '{"input": "1"}'


def test_folders_nested_too_deep_are_refused_with_the_fix(workspace: Path) -> None:
    deep = workspace / "data"
    for _ in range(MAX_DEPTH + 1):
        deep = deep / "d"
    deep.mkdir(parents=True)
    (deep / "rows.jsonl").write_text("{}\n")
    with pytest.raises(SnapshotRefused, match="deeper than"):
        take(workspace)


def test_a_history_holding_a_gitlink_is_unreadable_not_skipped(workspace: Path) -> None:
    git_dir = workspace.parent / "snapshots.git"
    git(git_dir, workspace, "update-index", "--add", "--cacheinfo",
        f"160000,{'1' * 40},data/hidden")
    tree = git(git_dir, workspace, "write-tree")
    commit = git(git_dir, workspace, "commit-tree", tree, "-m", "with a gitlink")
    with SnapshotStore(workspace) as store, pytest.raises(AnalysisError, match="not a file"):
        store.files(commit, ("data",))


def test_files_that_come_and_go_during_snapshots_never_fail_them_silently(
        workspace: Path) -> None:
    """An agent churning files while it validates gets a snapshot or a refusal, never a
    validation without a snapshot (the grader treated any OSError as 'no snapshot')."""
    import threading

    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            for index in range(50):
                path = workspace / "data" / f"churn-{index}"
                path.write_bytes(b"x" * index)
                path.unlink()

    thread = threading.Thread(target=churn)
    thread.start()
    outcomes = []
    try:
        for _ in range(30):
            try:
                outcomes.append(take(workspace))
            except SnapshotRefused:
                outcomes.append("refused")
    finally:
        stop.set()
        thread.join()
    assert len(outcomes) == 30


def test_a_snapshot_holds_every_file_outside_models_and_none_inside(workspace: Path) -> None:
    for name in ("alt_trainer/train.py", "alt_data/rows.jsonl", "notes.txt",
                 "models/a/model.safetensors"):
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(name)
    commit = take(workspace)
    listed = git(workspace.parent / "snapshots.git", workspace, "ls-tree", "-r",
                 "--name-only", commit).splitlines()
    assert {"alt_trainer/train.py", "alt_data/rows.jsonl", "notes.txt"} <= set(listed)
    assert not [name for name in listed if name.startswith("models")]


def test_a_snapshot_past_its_allowance_is_refused_and_leaves_nothing(workspace: Path) -> None:
    git_dir = workspace.parent / "snapshots.git"
    before, head = history_bytes(git_dir), git(git_dir, workspace, "rev-parse", "HEAD")
    for number in range(200):
        (workspace / "data" / f"{number}.txt").write_text(str(number))
    with pytest.raises(SnapshotRefused, match="store quota"):
        snapshot(git_dir, workspace, "validate models/a", allowance=100 * 4096)
    assert history_bytes(git_dir) == before
    assert git(git_dir, workspace, "rev-parse", "HEAD") == head
