"""The classifier on the built-in tasks' own reference solutions, applied as an agent would.

Each task's public files are materialised into a workspace whose snapshots live beside it
(as the runner keeps them), then the reference's data, trainer and harness changes are
applied one validation at a time. The labels must say what the reference docstrings say
it does: clean, relabel and synthesise data; completion-only loss plus a new schedule;
sample-and-check decoding in the one exposed harness.
"""

from itertools import pairwise
from pathlib import Path

import pytest

from vtbench.analysis.changes import classify
from vtbench.analysis.gitstore import SnapshotStore
from vtbench.tasks import builtin_tasks
from vtbench.tasks.materialize import apply_reference, materialize
from vtbench.tasks.registry import Task
from vtbench.workspace import git, snapshot

TASKS = {task.id: task for task in builtin_tasks()}


@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_reference_solution_is_classified_as_it_acts(task_id: str, tmp_path: Path) -> None:
    task: Task = TASKS[task_id]
    workspace, git_dir = tmp_path / "workspace", tmp_path / "snapshots.git"
    materialize(task, workspace)
    git_dir.mkdir()
    git(git_dir, workspace, "init", "--quiet", "--initial-branch=main")
    commits = [snapshot(git_dir, workspace, "snapshot 0: initial workspace")]
    for index, component in enumerate(("data", "trainer", "harness"), start=1):
        apply_reference(task, workspace, (component,))
        commits.append(snapshot(git_dir, workspace, f"validation {index}: models/ref{index}"))
    with SnapshotStore(workspace) as store:
        data, trainer, harness = (classify(store, before, after, task.method_settings)
                                  for before, after in pairwise(commits))
    assert data.touched == ["D"]
    assert data.kinds == ["filter", "augment", "rewrite"]
    assert trainer.touched == ["T"]
    assert trainer.kinds == ["hyperparameters", "algorithm"]
    if task.spec.harness_editable:
        assert harness.touched == ["H"]
        assert {"decoding", "control_flow"} <= set(harness.kinds)
    else:
        assert harness.touched == []
