"""Finding task packs and loading their trusted code.

A task pack is a folder with ``task.toml``; the built-in ones live in the repository's
``tasks/`` folder. The builder, scorer and reference modules are trusted code of the task
author, imported by file path; they never run inside a sandbox and are never shown to a
research agent.
"""

import importlib.util
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import get_args

from vtbench import layout
from vtbench.errors import SpecError, TaskNotFound
from vtbench.spec import ServingBackend, TaskSpec, load_spec, method_settings

SERVING_BACKEND_ENV = "VTBENCH_SERVING_BACKEND"


@dataclass(frozen=True)
class Task:
    spec: TaskSpec
    root: Path

    @property
    def id(self) -> str:
        return self.spec.id

    @cached_property
    def builder(self) -> ModuleType:
        return import_file(self.root / self.spec.builder.module, f"{self.id}_builder")

    @cached_property
    def scorer(self) -> ModuleType:
        return import_file(self.root / self.spec.scorer.module, f"{self.id}_scorer")

    @cached_property
    def reference(self) -> ModuleType:
        return import_file(self.root / self.spec.reference.module, f"{self.id}_reference")

    @cached_property
    def method_settings(self) -> dict[str, list[str]] | None:
        """The trainer's settings that choose its method, per config file
        (:func:`vtbench.spec.method_settings`); None when the pack has no table."""
        return method_settings(self.root, self.spec.components.trainer.sources)

    def readme(self) -> str:
        return (self.root / "README.md").read_text()

    @property
    def serving_backend(self) -> str:
        """What serves candidates in this task's evaluations: the operator's
        ``$VTBENCH_SERVING_BACKEND`` where set, else the task's ``[serving] backend``."""
        chosen = os.environ.get(SERVING_BACKEND_ENV) or self.spec.serving.backend
        if chosen not in get_args(ServingBackend):
            raise SpecError(f"{SERVING_BACKEND_ENV}={chosen!r} is no serving backend",
                            hint=f"use one of {', '.join(get_args(ServingBackend))}")
        return chosen


def import_file(path: Path, name: str) -> ModuleType:
    module_spec = importlib.util.spec_from_file_location(f"vtbench_taskcode.{name}", path)
    assert module_spec and module_spec.loader
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def load_task(path: Path) -> Task:
    """Load a task pack from its folder (or its ``task.toml``)."""
    folder = path.parent if path.name == "task.toml" else path
    return Task(spec=load_spec(folder / "task.toml"), root=folder.resolve())


def builtin_tasks() -> list[Task]:
    folders = sorted(p.parent for p in layout.BUILTIN_TASKS.glob("*/task.toml"))
    return [load_task(folder) for folder in folders]


def find_task(id_or_path: str) -> Task:
    """A built-in task by id, or a task pack by path."""
    candidate = Path(id_or_path)
    if candidate.exists():
        return load_task(candidate)
    folder = layout.BUILTIN_TASKS / id_or_path
    if (folder / "task.toml").exists():
        return load_task(folder)
    known = ", ".join(p.parent.name for p in sorted(layout.BUILTIN_TASKS.glob("*/task.toml")))
    raise TaskNotFound(f"unknown task {id_or_path!r}", hint=f"built-in tasks: {known}")
