"""Trajectory export: versioned JSON files that read back into the same steps."""

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.analysis.conftest import Workspace, write_record
from tests.analysis.test_metrics import codesign_history
from tests.conftest import run_cli
from vtbench.analysis.export import SCHEMA_FILE, read_trajectory, trajectory
from vtbench.analysis.loading import load_episode


def test_trajectory_carries_every_step_with_its_change(workspace: Workspace) -> None:
    snaps = codesign_history(workspace)
    folder = workspace.root.parent
    write_record(folder, [(snaps[0], 0.35), (snaps[1], 0.33), (snaps[2], 0.40)], submitted=3,
                 final_test=0.37)
    item = trajectory(load_episode(folder))
    assert [s.event for s in item.steps] == ["validation"] * 3 + ["submission"]
    assert [s.touched for s in item.steps] == [["D", "T"], ["T"], [], []]
    assert item.steps[0].kinds == ["filter", "hyperparameters"]
    assert item.steps[0].previous == workspace.first
    assert [s.best_so_far for s in item.steps] == [0.35, 0.35, 0.40, 0.40]
    assert [s.origin for s in item.steps] == ["trained", "trained", "merged", "merged"]
    assert item.metrics.codesign_rate == pytest.approx(1 / 3)


def test_cli_export_writes_schema_and_files_that_read_back(workspace: Workspace,
                                                           tmp_path: Path) -> None:
    snaps = codesign_history(workspace)
    folder = workspace.root.parent
    write_record(folder, [(snaps[0], 0.35)], submitted=1, final_test=0.33)
    out = tmp_path / "export"
    result = run_cli("report", str(folder), "--export", str(out))
    assert result.returncode == 0, result.stderr
    exported = out / f"{folder.name}.trajectory.json"
    raw = json.loads(exported.read_text())
    assert raw["schema"] == "vtbench.trajectory" and raw["schema_version"] == 2
    schema = json.loads((out / SCHEMA_FILE).read_text())
    assert schema["$id"] == "vtbench.trajectory/2"
    assert set(schema["required"]) >= {"episode", "steps", "metrics"}
    assert read_trajectory(exported).steps[0].kinds == ["filter", "hyperparameters"]
    raw["schema_version"] = 1
    exported.write_text(json.dumps(raw))
    with pytest.raises(ValidationError):
        read_trajectory(exported)
