"""Each built-in trainer's table of the config settings that choose its training method:
an edit of a listed setting is an ``algorithm`` change, a learning-rate change is tuning.
The table comes from the task pack through the episode record, never from the workspace,
so an agent cannot relabel its own changes."""

import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from tests.analysis.conftest import write_record
from vtbench.analysis.changes import SnapshotChange, classify
from vtbench.analysis.gitstore import SnapshotStore
from vtbench.analysis.history import episode_history
from vtbench.episode.provenance import provenance
from vtbench.prepare import PreparedTask
from vtbench.spec import METHOD_SUFFIX
from vtbench.tasks import builtin_tasks
from vtbench.tasks.materialize import materialize
from vtbench.tasks.registry import Task
from vtbench.workspace import git, snapshot

TASKS = {task.id: task for task in builtin_tasks()}


class Trainer:
    """A task's materialised workspace with its snapshots beside it, as the runner keeps
    them; ``set`` edits one setting of a trainer config and snapshots the result."""

    def __init__(self, task: Task, folder: Path) -> None:
        self.task, self.root, self.git_dir = task, folder / "workspace", folder / "snapshots.git"
        materialize(task, self.root)
        self.git_dir.mkdir()
        git(self.git_dir, self.root, "init", "--quiet", "--initial-branch=main")
        self.commits = [snapshot(self.git_dir, self.root, "snapshot 0: initial workspace")]

    def set(self, config: str, key: str, change: Any) -> str:
        path = self.root / "trainer" / config
        settings = tomllib.loads(path.read_text())
        *tables, leaf = key.split(".")
        inner = settings
        for table in tables:
            inner = inner.setdefault(table, {})
        inner[leaf] = change(inner[leaf])
        path.write_text(tomli_w.dumps(settings))
        self.commits.append(snapshot(self.git_dir, self.root,
                                     f"validation {len(self.commits)}: models/c"))
        return self.commits[-1]

    def last_change(self) -> SnapshotChange:
        with SnapshotStore(self.root) as store:
            return classify(store, self.commits[-2], self.commits[-1], self.task.method_settings)


def other_value(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value * 2
    return f"{value}-changed"


def flat_keys(settings: dict[str, Any], prefix: str = "") -> set[str]:
    keys = set()
    for key, value in settings.items():
        path = f"{prefix}{key}"
        keys |= flat_keys(value, path + ".") if isinstance(value, dict) else {path}
    return keys


@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_each_listed_setting_is_an_algorithm_change_and_the_learning_rate_is_tuning(
        task_id: str, tmp_path: Path) -> None:
    task = TASKS[task_id]
    assert task.method_settings is not None, "every built-in trainer has its table"
    trainer = Trainer(task, tmp_path)
    assert not list(trainer.root.rglob(f"*{METHOD_SUFFIX}")), "the table is not the agent's"
    for config, keys in task.method_settings.items():
        present = flat_keys(tomllib.loads((trainer.root / "trainer" / config).read_text()))
        for key in keys:
            assert key in present, f"{config} has no setting {key}: the table is stale"
            trainer.set(config, key, other_value)
            assert trainer.last_change().kinds_of("T") == ["algorithm"], key
    trainer.set("config.toml", "lr", lambda lr: lr / 3)
    assert trainer.last_change().kinds_of("T") == ["hyperparameters"]


@pytest.mark.parametrize("task_id", ["humaneval", "bfcl", "shell"])
def test_switching_on_lora_is_an_algorithm_change_in_the_episode_record(
        task_id: str, tmp_path: Path) -> None:
    """The attack of the report: ``[lora] enabled`` from false to true was tuning."""
    task = TASKS[task_id]
    trainer = Trainer(task, tmp_path)
    lora = trainer.set("config.toml", "lora.enabled", lambda enabled: True)
    (trainer.root / "trainer" / f"config.toml{METHOD_SUFFIX}").write_text('["config.toml"]\n')
    (trainer.root / f"trainer{METHOD_SUFFIX}").write_text('["config.toml"]\n')  # ignored
    rate = trainer.set("config.toml", "lr", lambda lr: lr * 2)
    recorded = provenance(PreparedTask(task, "0" * 64, {}), "none")
    assert recorded.method_settings == task.method_settings
    record = write_record(tmp_path, [(lora, 0.4), (rate, 0.5)], provenance=recorded)
    steps = episode_history(record, tmp_path).steps
    assert [step.change.kinds_of("T") if step.change else None for step in steps] == [
        ["algorithm"], ["hyperparameters"]]
    assert steps[0].change is not None
    assert "method: lora.enabled" in steps[0].change.components[0].files[0].detail
