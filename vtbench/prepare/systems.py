"""The systems ``prepare`` builds for a task and how each is trained.

Each system is a folder in the private store shaped like a workspace (``data/``,
``trainer/``, ``harness/``, ``model/``). Which components carry the reference's changes
decides the system: ``initial`` none, ``reference`` all, ``data``/``trainer``/``harness``
only that one (the ablations). ``light`` is the initial system after the light agent's
lightweight work (:func:`vtbench.agents.light_agent.first_candidate`: the data filtered,
the trainer's settings tuned), the measure of the task's co-design margin. A system whose
model is complete (a ``model-seedN.complete`` marker beside the model folder, so the folder
holds checkpoint files only) is never rebuilt, so an interrupted prepare resumes where it
stopped.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from vtbench.agents.light_agent import first_candidate
from vtbench.errors import VtbenchError
from vtbench.gpus import MEMORY_FRACTION_ENV, ran_out_of_memory
from vtbench.processes import die_with_parent
from vtbench.tasks.materialize import COMPONENTS, apply_reference, materialize
from vtbench.tasks.registry import Task


@dataclass(frozen=True)
class SystemPlan:
    name: str
    changed: tuple[str, ...]
    """Components that carry the reference's changes."""
    lightweight: bool = False
    """Whether the light agent's lightweight work is applied to the initial components."""

    @property
    def model_system(self) -> str:
        """The system whose model this one uses: a model depends on data and trainer only."""
        if self.lightweight:
            return self.name
        trained = tuple(c for c in ("data", "trainer") if c in self.changed)
        return {(): "initial", ("data",): "data", ("trainer",): "trainer"}.get(
            trained, "reference")

    @property
    def trains(self) -> bool:
        """Whether this system has its own model (else it reuses another system's)."""
        return self.model_system == self.name


SYSTEMS = (
    SystemPlan("initial", ()),
    SystemPlan("reference", COMPONENTS),
    SystemPlan("data", ("data",)),
    SystemPlan("trainer", ("trainer",)),
    SystemPlan("harness", ("harness",)),
    SystemPlan("without-data", ("trainer", "harness")),
    SystemPlan("without-trainer", ("data", "harness")),
    SystemPlan("without-harness", ("data", "trainer")),
    SystemPlan("light", (), lightweight=True),
)
"""The initial and reference systems, each component's change alone, (where the harness
is editable; otherwise they equal "trainer", "data" and "reference") the reference with
one component's change reverted, and the lightweight system."""


class TrainingFailed(VtbenchError):
    pass


class TrainingOutOfMemory(TrainingFailed):
    """The training ran out of GPU memory (CUDA's ``OutOfMemoryError``)."""


EPISODE_SYSTEMS = ("initial", "reference")
"""What an episode needs: the initial system (the agent's start, the gain's zero) and the
reference (the normaliser of gains). The others only calibrate the task."""


CALIBRATION_SYSTEMS = tuple(p.name for p in SYSTEMS if p.name not in EPISODE_SYSTEMS)
"""What ``--calibrate`` adds to the episode's systems."""


def plans_for(task: Task, calibrate: bool = False,
              only: Collection[str] = CALIBRATION_SYSTEMS) -> list[SystemPlan]:
    """The systems to build: the episode's two, and with ``calibrate`` the ablations (those
    named in ``only``: after a change that concerns one of them, the others stay)."""
    names = [p.name for p in SYSTEMS] if task.spec.harness_editable else [
        "initial", "reference", "data", "trainer", "light"]
    return [p for p in SYSTEMS if p.name in names
            and (p.name in EPISODE_SYSTEMS or (calibrate and p.name in only))]


LIGHTWEIGHT_DIGEST = "components.sha256"
"""Beside a lightweight system's components: what the light agent's work made of them."""


def build_components(task: Task, plan: SystemPlan, folder: Path) -> bool:
    """Materialise the public components and apply the reference to the changed ones;
    whether the system was (re)built. The light agent's work is done again every time: a
    lightweight system whose components it now makes otherwise (the agent's code changed,
    not the pack) is built again, its models with it."""
    if (folder / "trainer").exists() and not plan.lightweight:
        return False
    staging = folder.with_name(folder.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    materialize(task, staging)
    apply_reference(task, staging, components=plan.changed)
    if plan.lightweight:
        first_candidate(staging)
        digest = components_digest(staging)
        recorded = folder / LIGHTWEIGHT_DIGEST
        if recorded.exists() and recorded.read_text() == digest:
            shutil.rmtree(staging)
            return False
        shutil.rmtree(folder, ignore_errors=True)
        (staging / LIGHTWEIGHT_DIGEST).write_text(digest)
    staging.rename(folder)
    return True


def components_digest(folder: Path) -> str:
    """sha256 over the relative paths and contents of a system's components."""
    digest = hashlib.sha256()
    for name in COMPONENTS:
        for path in sorted(p for p in (folder / name).rglob("*") if p.is_file()):
            digest.update(f"{path.relative_to(folder)}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def estimated_cost(folder: Path) -> float:
    """A system's training cost in relative units, for ordering trainings: optimiser steps
    times the mean characters per training row (1 where the trainer's config does not say)."""
    try:
        steps = float(tomllib.loads((folder / "trainer" / "config.toml").read_text())["steps"])
    except (OSError, KeyError, ValueError, TypeError, tomllib.TOMLDecodeError):
        steps = 1.0
    sizes = [len(line) for path in sorted((folder / "data").glob("*.jsonl"))
             for line in path.read_text(errors="replace").splitlines() if line.strip()]
    return steps * (sum(sizes) / len(sizes) if sizes else 1.0)


def train_command(task: Task, base: Path, out: Path, seed: int) -> list[str]:
    values = {"base": str(base), "out": str(out), "seed": str(seed)}
    argv = [part.format(**values) for part in task.spec.components.trainer.entry]
    return [sys.executable if argv[0] == "python" else argv[0], *argv[1:]]


def model_dir(folder: Path, seed: int) -> Path:
    return folder / f"model-seed{seed}"


def is_complete(model: Path) -> bool:
    return model.with_name(model.name + ".complete").exists()


def train_system(task: Task, folder: Path, base: Path, seed: int,
                 on_line: Callable[[str], None] | None = None,
                 whole_gpu: bool = False) -> Path:
    """Train the system's model (trusted trainer code; one thread) unless already complete;
    within this process's share of the GPU's memory unless ``whole_gpu``. The training dies
    with this process: a prepare that is stopped leaves none running."""
    model = model_dir(folder, seed)
    if is_complete(model):
        return model
    shutil.rmtree(model, ignore_errors=True)
    env = {**os.environ, "VTBENCH_THREADS": "1", "OMP_NUM_THREADS": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    if whole_gpu:
        env.pop(MEMORY_FRACTION_ENV, None)
    process = subprocess.Popen(train_command(task, base, model, seed), cwd=folder, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               preexec_fn=die_with_parent())
    lines = []
    assert process.stdout
    for line in process.stdout:
        lines.append(line)
        if on_line:
            on_line(line)
    if process.wait() != 0:
        shutil.rmtree(model, ignore_errors=True)
        tail = "".join(lines[-3:]).strip().replace("\n", " | ")
        failure = TrainingOutOfMemory if ran_out_of_memory("".join(lines)) else TrainingFailed
        raise failure(f"training {task.id}/{folder.name} failed: {tail[-400:]}")
    model.with_name(model.name + ".complete").touch()
    return model
