"""Episode metrics from real records and real workspace histories."""

from pathlib import Path

import pytest

from tests.analysis.conftest import TRAIN_ROWS, Workspace, jsonl, write_record
from vtbench.analysis.history import HISTORY_FILE, load_history, write_history
from vtbench.analysis.loading import load_episode


def codesign_history(ws: Workspace) -> list[str]:
    """v1: D filter + T hyperparameters; v2: T algorithm; v3: no change (a merge)."""
    ws.write("data/train.jsonl", jsonl(TRAIN_ROWS[:4]))
    ws.replace("trainer/config.toml", "lr = 0.001", "lr = 0.0005")
    first = ws.snapshot("validation 1: models/cand1")
    ws.replace("trainer/train.py", "torch.optim.AdamW", "torch.optim.SGD")
    second = ws.snapshot("validation 2: models/cand2")
    third = ws.snapshot("validation 3: models/cand3")
    return [first, second, third]


def test_metrics_follow_the_validations_and_changes(workspace: Workspace) -> None:
    snaps = codesign_history(workspace)
    folder = workspace.root.parent
    write_record(folder, [(snaps[0], 0.35), (snaps[1], 0.33), (snaps[2], 0.40)], submitted=3,
                 final_test=0.37, gain=0.09, normalized_gain=0.09 / 0.32)
    m = load_episode(folder).metrics
    assert m.validations_used == 3
    assert [p.best for p in m.best_over_time] == [0.35, 0.35, 0.40]
    assert [p.improved for p in m.best_over_time] == [True, False, True]
    assert m.improvement_share == pytest.approx(2 / 3)
    assert m.gain_first_third == pytest.approx(0.05)
    assert m.gain_last_third == pytest.approx(0.05)
    assert m.iterations == 3
    assert m.codesign_rate == pytest.approx(1 / 3)
    assert m.full_codesign_rate == 0
    assert m.algorithm_change_rate == pytest.approx(1 / 3)
    assert m.kind_counts == {"filter": 1, "hyperparameters": 1, "algorithm": 1}
    assert m.origin_counts == {"trained": 2, "merged": 1}
    assert m.val_test_gap == pytest.approx(0.03)
    assert m.time_to_first_improvement == 60.0
    assert (m.budget.agent_seconds, m.budget.training_seconds) == (300, 500)
    assert m.budget.validations_by_change == {"D+T": 1, "T": 1, "none": 1}
    assert m.history_error is None


def test_submission_with_new_edits_counts_as_an_iteration(workspace: Workspace) -> None:
    snaps = codesign_history(workspace)
    workspace.replace("harness/run.py", "Question:", "Q:")
    workspace.write("data/train.jsonl", jsonl(TRAIN_ROWS[:2]))
    submitted = workspace.snapshot("submission: models/cand3")
    folder = workspace.root.parent
    write_record(folder, [(s, 0.3) for s in snaps], submitted=3,
                 submission_snapshot=submitted, final_test=0.3)
    episode = load_episode(folder)
    assert episode.history.steps[-1].change is not None
    assert episode.history.steps[-1].change.touched == ["D", "H"]
    assert episode.metrics.iterations == 4
    assert episode.metrics.codesign_rate == pytest.approx(2 / 4)
    assert episode.metrics.improvement_share == 0
    assert episode.metrics.time_to_first_improvement is None


def test_episode_without_validations_has_no_rates(workspace: Workspace) -> None:
    folder = workspace.root.parent
    record = write_record(folder, [], final_test=0.28, gain=0.0)
    m = load_episode(folder).metrics
    assert (m.iterations, m.codesign_rate, m.algorithm_change_rate) == (0, None, None)
    assert m.improvement_share is None and m.gain_first_third is None
    assert m.best_val == record.initial_val


def test_unreadable_history_leaves_rates_out_and_says_why(workspace: Workspace) -> None:
    snaps = codesign_history(workspace)
    folder = workspace.root.parent
    write_record(folder, [(snaps[0], 0.35), ("f" * 40, 0.36)])
    m = load_episode(folder).metrics
    assert m.codesign_rate is None and m.algorithm_change_rate is None
    assert m.history_error is not None and "missing" in m.history_error
    assert m.validations_used == 2 and m.best_val == 0.36
    assert m.budget.validations_by_change == {"unclassified": 2}


def test_record_without_workspace_is_reported_without_changes(tmp_path: Path) -> None:
    folder = tmp_path / "episode"
    write_record(folder, [("a" * 40, 0.4)])
    m = load_episode(folder).metrics
    assert m.history_error is not None and "no workspace" in m.history_error
    assert m.improvement_share == 1.0


def test_stored_history_is_reused_only_while_it_matches(workspace: Workspace) -> None:
    snaps = codesign_history(workspace)
    folder = workspace.root.parent
    record = write_record(folder, [(snaps[0], 0.35), (snaps[1], 0.33)])
    written = write_history(record, folder)
    assert (folder / HISTORY_FILE).is_file()
    # Remove the repository: a matching stored history is all the report needs.
    (folder / "workspace").rename(folder / "gone")
    assert load_history(record, folder) == written
    stale = write_record(folder, [(snaps[0], 0.35), (snaps[2], 0.33)])
    recomputed = load_history(stale, folder)
    assert recomputed.error is not None and "no workspace" in recomputed.error


def test_snapshots_kept_beside_the_workspace_are_found(tmp_path: Path) -> None:
    from vtbench.workspace import git, snapshot

    folder = tmp_path / "episode"
    workspace, git_dir = folder / "workspace", folder / "snapshots.git"
    for path, text in {"TASK.md": "# t\n", "data/train.jsonl": jsonl(TRAIN_ROWS),
                       "trainer/config.toml": "lr = 0.1\n", "harness/run.py": "N = 1\n"}.items():
        (workspace / path).parent.mkdir(parents=True, exist_ok=True)
        (workspace / path).write_text(text)
    git_dir.mkdir()
    git(git_dir, workspace, "init", "--quiet", "--initial-branch=main")
    first = snapshot(git_dir, workspace, "snapshot 0: initial workspace")
    (workspace / "trainer/config.toml").write_text("lr = 0.01\n")
    second = snapshot(git_dir, workspace, "validation 1: models/cand1")
    write_record(folder, [(second, 0.4)])
    episode = load_episode(folder)
    assert episode.history.snapshot0 == first
    assert episode.metrics.kind_counts == {"hyperparameters": 1}
