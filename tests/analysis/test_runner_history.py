"""For an episode the runner made, the report reads the runner's ``snapshots.git`` or
nothing: a missing ``snapshots.git`` is refused in one line, never replaced by a ``.git``
the agent left in the workspace."""

import pytest

from tests.analysis.conftest import Workspace, write_record
from vtbench.analysis.gitstore import SnapshotStore
from vtbench.analysis.history import episode_history
from vtbench.errors import AnalysisError
from vtbench.layout import EpisodePaths


def test_a_runner_episode_without_its_snapshots_is_refused_not_read_from_the_workspace(
        workspace: Workspace) -> None:
    folder = workspace.root.parent
    first = workspace.snapshot("snapshot 0")
    workspace.write("data/train.jsonl", '{"input": "planted"}\n')
    record = write_record(folder, [(workspace.snapshot("validation 1: models/a"), 0.5)])
    assert episode_history(record, folder).classified  # a workspace of its own: readable

    EpisodePaths(folder).runner_state.write_text("{}")  # what the runner leaves beside it
    history = episode_history(record, folder)
    assert not history.classified and history.snapshot0 != first
    assert history.error is not None and "snapshots.git is missing" in history.error
    assert "\n" not in history.error
    with pytest.raises(AnalysisError, match=r"snapshots\.git is missing"):
        SnapshotStore(workspace.root)
