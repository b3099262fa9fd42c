"""Copying a task's public components (data, trainer, harness) into a folder.

Each component's ``sources`` are copied in order into ``<dest>/<component>/`` (a later
source overrides files of an earlier one). Only these public trees are ever copied out of a
task pack: builder, scorer and reference stay behind.
"""

import shutil
from pathlib import Path

from vtbench.tasks.registry import Task

COMPONENTS = ("data", "trainer", "harness")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc")


def materialize(task: Task, dest: Path, components: tuple[str, ...] = COMPONENTS) -> None:
    for name in components:
        component = getattr(task.spec.components, name)
        target = dest / name
        target.mkdir(parents=True, exist_ok=True)
        for source in component.sources:
            shutil.copytree(task.root / source, target, dirs_exist_ok=True, ignore=IGNORED)


def apply_reference(task: Task, dest: Path, components: tuple[str, ...] = COMPONENTS) -> None:
    """Apply the task's reference changes to the materialised ``components`` in ``dest``."""
    for name in components:
        change = getattr(task.reference, f"apply_{name}", None)
        if change is not None:
            change(dest / name, task)
