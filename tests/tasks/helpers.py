"""Shared helpers of the task-pack tests."""

from pathlib import Path

from vtbench.tasks.materialize import materialize
from vtbench.tasks.registry import Task
from vtbench.tasks.tiny_reference import read_rows


def reference_rows(task: Task, folder: Path) -> list[dict]:
    """The task's public data after its reference ``apply_data``."""
    materialize(task, folder, components=("data",))
    task.reference.apply_data(folder / "data", task)
    return read_rows(folder / "data")
