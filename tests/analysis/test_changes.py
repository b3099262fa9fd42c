"""The change classifier on crafted snapshot histories: one real git commit per edit."""

import shutil
import subprocess
import zlib
from pathlib import Path

import pytest

from tests.analysis.conftest import TRAIN_ROWS, Workspace, jsonl
from vtbench.analysis.changes import SnapshotChange, classify
from vtbench.analysis.gitstore import SnapshotStore
from vtbench.errors import AnalysisError


def change(ws: Workspace, message: str = "validation 1: models/cand1") -> SnapshotChange:
    before = ws.git("rev-parse", "HEAD")
    after = ws.snapshot(message)
    with SnapshotStore(ws.root) as store:
        return classify(store, before, after)


def test_removing_rows_is_a_filter(workspace: Workspace) -> None:
    workspace.write("data/train.jsonl", jsonl(TRAIN_ROWS[:4]))
    result = change(workspace)
    assert result.touched == ["D"]
    assert result.kinds_of("D") == ["filter"]
    rows = result.components[0].rows
    assert rows is not None and (rows.removed, rows.added, rows.rewritten) == (2, 0, 0)


def test_adding_rows_is_augmentation(workspace: Workspace) -> None:
    extra = [{"input": f"{a}+1", "target": str(a + 1)} for a in range(10, 13)]
    workspace.write("data/train.jsonl", jsonl(TRAIN_ROWS + extra))
    assert change(workspace).kinds == ["augment"]


def test_relabelled_rows_are_rewrites(workspace: Workspace) -> None:
    rows = [dict(r) for r in TRAIN_ROWS]
    rows[1]["target"], rows[3]["target"] = "wrong", "also wrong"
    workspace.write("data/train.jsonl", jsonl(rows))
    result = change(workspace)
    assert result.kinds == ["rewrite"]
    assert result.components[0].rows is not None
    assert result.components[0].rows.rewritten == 2


def test_shuffling_rows_and_reordering_keys_is_no_change(workspace: Workspace) -> None:
    shuffled = [{"target": r["target"], "input": r["input"]} for r in reversed(TRAIN_ROWS)]
    workspace.write("data/train.jsonl", jsonl(shuffled))
    result = change(workspace)
    assert result.touched == []
    assert result.components[0].files[0].kinds == []


def test_new_data_file_or_source_is_mixing(workspace: Workspace) -> None:
    workspace.write("data/extra.jsonl", jsonl([{"input": "9+9", "target": "18"}]))
    assert change(workspace).kinds == ["mix"]
    sourced = [dict(r, source="web") for r in TRAIN_ROWS]
    workspace.write("data/train.jsonl", jsonl(sourced))
    change(workspace)
    sourced.append({"input": "7+7", "target": "14", "source": "synthetic"})
    workspace.write("data/train.jsonl", jsonl(sourced))
    result = change(workspace)
    assert result.kinds == ["augment", "mix"]
    assert result.components[0].rows is not None
    assert result.components[0].rows.new_sources == ["synthetic"]


def test_filter_plus_synthesis_in_one_step_reports_both(workspace: Workspace) -> None:
    workspace.write("data/train.jsonl", jsonl([*TRAIN_ROWS[2:], {"input": "x", "target": "y"}]))
    assert change(workspace).kinds == ["filter", "augment"]


def test_data_script_edit_is_a_script_change(workspace: Workspace) -> None:
    workspace.write("data/prepare.py", 'import json\nprint(json.dumps({"a": 1}))\n')
    assert change(workspace).kinds == ["script"]


def test_config_value_edit_is_hyperparameters_only(workspace: Workspace) -> None:
    workspace.replace("trainer/config.toml", "lr = 0.001", "lr = 0.0003")
    workspace.replace("trainer/config.toml", "weight_decay = 0.0", "weight_decay = 0.01")
    result = change(workspace)
    assert result.touched == ["T"]
    assert result.kinds_of("T") == ["hyperparameters"]
    assert "lr: 0.001 -> 0.0003" in result.components[0].files[0].detail


def test_a_config_key_that_chooses_the_loss_is_an_algorithm_change(
        workspace: Workspace) -> None:
    workspace.write("trainer/config.toml", "completion_only_loss = false\n"
                    + workspace.read("trainer/config.toml"))
    change(workspace)
    workspace.replace("trainer/config.toml", "completion_only_loss = false",
                      "completion_only_loss = true")
    assert change(workspace, "validation 2: models/c2").kinds_of("T") == ["algorithm"]
    workspace.replace("trainer/config.toml", "steps = 200", "steps = 400")
    workspace.replace("trainer/config.toml", "lr = 0.001", "lr = 0.0003")
    tuned = change(workspace, "validation 3: models/c3")
    assert tuned.kinds_of("T") == ["hyperparameters"]  # what a tuner does is tuning


def test_python_constant_edit_is_hyperparameters_only(workspace: Workspace) -> None:
    workspace.replace("trainer/train.py", "LEARNING_RATE = 0.001", "LEARNING_RATE = 0.01")
    workspace.replace("trainer/train.py", "steps=100", "steps=400")
    result = change(workspace)
    assert result.kinds_of("T") == ["hyperparameters"]
    assert "LEARNING_RATE" in result.components[0].files[0].detail


def test_loss_or_optimiser_code_edit_is_an_algorithm_change(workspace: Workspace) -> None:
    workspace.replace("trainer/train.py", "cross_entropy(logits, labels)",
                      "cross_entropy(logits, labels, label_smoothing=0.1)")
    assert change(workspace).kinds_of("T") == ["algorithm"]
    workspace.replace("trainer/train.py", "torch.optim.AdamW", "torch.optim.SGD")
    assert change(workspace).kinds_of("T") == ["algorithm"]


def test_new_trainer_module_is_an_algorithm_change(workspace: Workspace) -> None:
    workspace.write("trainer/schedule.py", "def cosine(step):\n    return 1.0\n")
    assert change(workspace).kinds == ["algorithm"]


def test_comments_and_docstrings_are_not_a_change(workspace: Workspace) -> None:
    workspace.replace("trainer/train.py", '"""Initial trainer."""', '"""Better words."""\n# hi')
    workspace.replace("harness/run.py", "def main():", "def main():  # entry point")
    result = change(workspace)
    assert result.touched == []
    assert {c.component for c in result.components} == {"T", "H"}


def test_prompt_string_edit_is_a_prompt_change(workspace: Workspace) -> None:
    workspace.replace("harness/run.py", "Question: {question}", "Solve step by step: {question}")
    result = change(workspace)
    assert result.touched == ["H"]
    assert result.kinds_of("H") == ["prompt"]


def test_template_file_is_a_prompt_change(workspace: Workspace) -> None:
    workspace.write("harness/prompt.j2", "You are a careful solver.\n{{ question }}\n")
    assert change(workspace).kinds == ["prompt"]


def test_sampling_literals_are_decoding_changes(workspace: Workspace) -> None:
    workspace.replace("harness/run.py", "temperature=0.0, max_tokens=16",
                      "temperature=0.7, max_tokens=32")
    assert change(workspace).kinds == ["decoding"]
    workspace.write("harness/config.json", '{"temperature": 0.7, "top_p": 0.9}')
    change(workspace)
    workspace.write("harness/config.json", '{"temperature": 0.2, "top_p": 0.9}')
    assert change(workspace).kinds == ["decoding"]


def test_other_literals_are_settings(workspace: Workspace) -> None:
    workspace.replace("harness/run.py", "MAX_RETRIES = 1", "MAX_RETRIES = 3")
    assert change(workspace).kinds == ["settings"]


def test_new_code_path_is_a_control_flow_change(workspace: Workspace) -> None:
    workspace.replace(
        "harness/run.py", "    return reply.strip()",
        "    for _ in range(MAX_RETRIES):\n        if reply.strip():\n            break\n"
        "        reply = client.complete(question)\n    return reply.strip()")
    assert change(workspace).kinds == ["control_flow"]


def test_added_tool_definition_is_a_tools_change(workspace: Workspace) -> None:
    workspace.replace("harness/run.py", "def main():",
                      'TOOLS = [{"type": "function", "function": {"name": "calculator"}}]\n\n\n'
                      "def calculator_tool(expression):\n    return str(eval(expression))\n\n\n"
                      "def main():")
    assert change(workspace).kinds == ["tools"]


def test_tool_calls_inside_new_control_flow_report_both(workspace: Workspace) -> None:
    workspace.replace("harness/run.py", "    return reply.strip()",
                      "    if reply.tool_calls:\n        reply = client.complete(question, "
                      'tools=[{"type": "function"}])\n    return reply.strip()')
    assert change(workspace).kinds == ["control_flow", "tools"]


def test_codesign_step_reports_every_component_in_order(workspace: Workspace) -> None:
    workspace.write("data/train.jsonl", jsonl(TRAIN_ROWS[1:]))
    workspace.replace("trainer/config.toml", "steps = 200", "steps = 300")
    workspace.replace("harness/run.py", "temperature=0.0", "temperature=0.3")
    result = change(workspace, "submission: models/cand2")
    assert result.touched == ["D", "T", "H"]
    assert result.kinds == ["filter", "hyperparameters", "decoding"]


def test_candidate_files_and_paths_outside_components_are_ignored(workspace: Workspace) -> None:
    workspace.write("models/cand1/model.safetensors", "weights")
    workspace.write("TASK.md", "# changed\n")
    workspace.write("notes.txt", "thinking\n")
    assert change(workspace).components == []


def test_identical_snapshots_have_no_change(workspace: Workspace) -> None:
    result = change(workspace)
    assert result.components == [] and result.touched == []


def test_workspace_owned_by_the_sandbox_user_is_readable(workspace: Workspace,
                                                        tmp_path: Path) -> None:
    if shutil.which("chown") is None:
        pytest.skip("chown is missing")
    workspace.write("data/train.jsonl", jsonl(TRAIN_ROWS[:3]))
    after = workspace.snapshot("validation 1: models/cand1")
    subprocess.run(["chown", "-R", "vtbench-sbx", str(workspace.root)], check=True)
    with SnapshotStore(workspace.root) as store:
        assert classify(store, workspace.first, after).kinds == ["filter"]
        assert store.root(after) == workspace.first


def test_missing_snapshot_is_one_clear_error(workspace: Workspace) -> None:
    with SnapshotStore(workspace.root) as store, pytest.raises(AnalysisError, match="missing"):
        classify(store, workspace.first, "0" * 40)


def test_folder_without_a_repository_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AnalysisError, match="not a git repository"):
        SnapshotStore(tmp_path)


def test_packed_history_reads_the_same_as_loose(workspace: Workspace) -> None:
    workspace.write("data/train.jsonl", jsonl(TRAIN_ROWS[:3]))
    workspace.replace("harness/run.py", "temperature=0.0", "temperature=0.5")
    after = workspace.snapshot("validation 1: models/cand1")
    with SnapshotStore(workspace.root) as store:
        loose = classify(store, workspace.first, after)
    workspace.git("gc", "-q", "--prune=now")
    assert not any((workspace.root / ".git" / "objects").glob("??/*"))
    with SnapshotStore(workspace.root) as store:
        assert classify(store, workspace.first, after) == loose
    assert loose.kinds == ["filter", "decoding"]


def test_planted_loose_objects_are_not_believed(workspace: Workspace, tmp_path: Path) -> None:
    workspace.write("data/train.jsonl", jsonl(TRAIN_ROWS[:3]))
    workspace.snapshot("validation 1: models/cand1")
    blob = workspace.git("rev-parse", "HEAD:data/train.jsonl")
    workspace.git("gc", "-q", "--prune=now")
    objects = workspace.root / ".git" / "objects" / blob[:2]
    objects.mkdir(exist_ok=True)
    secret = tmp_path / "secret"
    secret.write_bytes(zlib.compress(b"blob 6\0secret"))
    (objects / blob[2:]).symlink_to(secret)
    with SnapshotStore(workspace.root) as store:
        assert store.blob(blob) == jsonl(TRAIN_ROWS[:3]).encode()
    (objects / blob[2:]).unlink()
    (objects / blob[2:]).write_bytes(zlib.compress(b"blob 6\0forged"))
    with SnapshotStore(workspace.root) as store:
        assert store.blob(blob) == jsonl(TRAIN_ROWS[:3]).encode()


def test_file_moved_unchanged_is_no_change(workspace: Workspace) -> None:
    workspace.write("data/v2/train.jsonl", workspace.read("data/train.jsonl"))
    workspace.remove("data/train.jsonl")
    result = change(workspace)
    assert result.touched == []
    assert [(f.status, f.detail) for f in result.components[0].files] == [
        ("deleted", "moved"), ("added", "moved")]
