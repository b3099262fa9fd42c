"""What it takes to retrain an episode's submission, decided when the episode ends.

The record keeps it as :class:`Retraining`: the submitted candidate's lineage closed over
its parents (a merge's models and base, a reused folder's twin, a training's start model
when that was another candidate), ancestors first, each step with what rebuilds it. A
trained step names the snapshot the grader took when it first saw the folder, the tree
hashes of ``data/`` and ``trainer/`` there and, from what the runner saw, the training
command, the trees of ``data/`` and ``trainer/`` when that command started, and whether the
command is the task's trainer entry (:func:`match_entry`). A merged step keeps its recipe
(method with options, parents, weights). ``vtbench reproduce`` and ``vtbench attribute``
read only this section, the snapshots and the task's preparation.

Everything here comes from trusted records (the grader's lineage, the runner's process
samples, the snapshots); the command line is the agent's text, kept as data.
"""

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from vtbench.grader.api import LineageRecord, ProcessSeen, SubmissionRecord, TrainedWith
from vtbench.workspace import git

RECIPE_VERSION: Literal[1] = 1
FIXED_STARTS = ("models/base", "models/initial")
"""Start models a training may name that are the task's own, not candidates."""


class Recipe(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class RetrainStep(Recipe):
    """One candidate of the submission's lineage and what rebuilds it."""

    name: str
    """The workspace folder, ``models/<name>``."""
    origin: Literal["initial", "trained", "merged", "reused"]
    model_hash: str | None = None
    parents: list[int] = Field(default_factory=list)
    """Steps this one is built from (indexes into :attr:`Retraining.steps`): a merge's
    models then its base, a reused folder's twin, a training's start candidate."""
    snapshot: str | None = None
    """Trained: the snapshot the grader took when it first saw the folder."""
    data_tree: str | None = None
    """Trained: git tree hash of ``data/`` in that snapshot."""
    trainer_tree: str | None = None
    """Trained: git tree hash of ``trainer/`` in that snapshot."""
    trained_with: TrainedWith | None = None
    """Trained: the grader's lineage verdict (components, outside, unknown)."""
    command: list[str] | None = None
    """Trained: the last program of ``trainer/`` the runner saw name the folder."""
    data_at_start: str | None = None
    """Trained: tree hash of ``data/`` when that command started (None: not seen)."""
    trainer_at_start: str | None = None
    """Trained: tree hash of ``trainer/`` when that command started."""
    entry_mismatch: str | None = None
    """Trained: why the command is not the task's trainer entry (None when it is)."""
    start: str | None = None
    """Trained: the start model the command gave to the entry's ``{base}``."""
    seed: int | None = None
    """Trained: the value the command gave to ``{seed}`` (None: the trainer's default)."""
    options: list[str] = Field(default_factory=list)
    """Trained: the entry's options the command gave (the others took the trainer's
    defaults, and a retraining leaves them out too)."""
    method: str | None = None
    """Merged: the method with its options (``ties base=<hash> density=0.5``)."""
    weights: list[float] = Field(default_factory=list)
    """Merged: one weight per merged model."""


class Retraining(Recipe):
    """What rebuilds the submission (see the module docstring)."""

    version: Literal[1] = RECIPE_VERSION
    candidate: str
    """The submitted folder."""
    model_hash: str
    harness_snapshot: str
    """The submission's snapshot: its ``harness/`` is the submitted harness."""
    initial_snapshot: str
    """Snapshot 0, the workspace as handed to the agent: the initial D/T/H."""
    trainer_entry: list[str]
    """The task's trainer command, with ``{base}``, ``{out}``, ``{seed}`` placeholders."""
    episode_seed: int
    steps: list[RetrainStep]
    """The submission's lineage, ancestors first; the last step is the submission."""


@dataclass(frozen=True)
class EntryMatch:
    mismatch: str | None
    start: str | None = None
    seed: int | None = None
    options: tuple[str, ...] = ()


def _options(args: list[str]) -> tuple[dict[str, str], list[str]]:
    """``--flag value`` / ``--flag=value`` pairs (a bare flag maps to "") and positionals."""
    options: dict[str, str] = {}
    positional: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg.startswith("-") and arg != "-":
            flag, equals, value = arg.partition("=")
            if not equals and index + 1 < len(args) and not args[index + 1].startswith("-"):
                value, index = args[index + 1], index + 1
            options[flag] = value
        else:
            positional.append(arg)
        index += 1
    return options, positional


def workspace_path(value: str) -> str:
    """A path as the workspace names it: ``./data``, ``/workspace/data/`` -> ``data``."""
    path = PurePosixPath(os.path.normpath(value))
    if path.is_relative_to("/workspace"):
        path = path.relative_to("/workspace")
    return path.as_posix()


def match_entry(argv: list[str], cwd: str, entry: list[str], name: str) -> EntryMatch:
    """Whether ``argv`` (run in ``cwd``, training folder ``name``) is the trainer entry:
    the same program, only options the entry names, its fixed values unchanged (an option
    left out takes the trainer's default), ``{out}`` the folder itself."""
    if workspace_path(cwd) not in (".", ""):
        return EntryMatch(f"it ran from {cwd!r}, not the workspace")
    program, args = argv[:1], argv[1:]
    want_program, want_args = entry[:1], entry[1:]
    if entry[0] == "python":
        if not os.path.basename(argv[0]).startswith("python"):
            return EntryMatch(f"it runs {argv[0]!r}, not python")
        program, args = argv[1:2], argv[2:]
        want_program, want_args = entry[1:2], entry[2:]
    if [workspace_path(p) for p in program] != [workspace_path(p) for p in want_program]:
        return EntryMatch(f"it runs {' '.join(program)!r}, not {' '.join(want_program)!r}")
    given, positional = _options(args)
    wanted, wanted_positional = _options(want_args)
    if positional != wanted_positional:
        return EntryMatch(f"it passes the arguments {positional!r}")
    values: dict[str, str] = {}
    for flag, value in given.items():
        if flag not in wanted:
            return EntryMatch(f"it passes {flag}, which the trainer entry does not")
        want = wanted[flag]
        if want.startswith("{") and want.endswith("}"):
            values[want] = value
        elif workspace_path(value) != workspace_path(want):
            return EntryMatch(f"it passes {flag} {value!r}, the trainer entry {want!r}")
    if workspace_path(values.get("{out}", "")) != name:
        return EntryMatch(f"its output folder is not {name}")
    seed = values.get("{seed}")
    if seed is not None and not seed.lstrip("-").isdigit():
        return EntryMatch(f"its seed {seed!r} is not a number")
    start = workspace_path(values["{base}"]) if "{base}" in values else "models/base"
    return EntryMatch(None, start=start, seed=int(seed) if seed is not None else None,
                      options=tuple(sorted(given)))


def training_command(lineage: LineageRecord) -> ProcessSeen | None:
    """The last program of ``trainer/`` that named the folder (the runner noted the
    components' trees only for those)."""
    programs = [p for p in lineage.trained_by if p.training and p.trainer_tree is not None]
    return programs[-1] if programs else None


class Snapshots:
    """Tree hashes in the episode's ``snapshots.git``."""

    def __init__(self, git_dir: Path, workspace: Path) -> None:
        self.git_dir, self.workspace = git_dir, workspace

    def tree(self, commit: str | None, folder: str) -> str | None:
        if commit is None:
            return None
        try:
            return git(self.git_dir, self.workspace, "rev-parse", "--verify", "--quiet",
                       f"{commit}:{folder}") or None
        except (OSError, subprocess.CalledProcessError):
            return None

    def root(self, commit: str) -> str:
        """Snapshot 0 of the history that holds ``commit``."""
        roots = git(self.git_dir, self.workspace, "rev-list", "--max-parents=0", commit)
        return roots.split()[-1]


def trained_step(lineage: LineageRecord, entry: list[str], snapshots: Snapshots) -> RetrainStep:
    step = RetrainStep(
        name=lineage.name, origin="trained", model_hash=lineage.model_hash,
        snapshot=lineage.snapshot, trained_with=lineage.trained_with,
        data_tree=snapshots.tree(lineage.snapshot, "data"),
        trainer_tree=snapshots.tree(lineage.snapshot, "trainer"))
    process = training_command(lineage)
    if process is None:
        step.entry_mismatch = "the runner saw no program of trainer/ train it"
        return step
    match = match_entry(process.argv, process.cwd, entry, lineage.name)
    step.command, step.entry_mismatch = process.argv, match.mismatch
    step.data_at_start, step.trainer_at_start = process.data_tree, process.trainer_tree
    step.start, step.seed, step.options = match.start, match.seed, list(match.options)
    return step


class _Closure:
    """Collects the steps of one lineage, ancestors first, each candidate once."""

    def __init__(self, candidates: list[LineageRecord], entry: list[str],
                 snapshots: Snapshots) -> None:
        self.candidates, self.entry, self.snapshots = candidates, entry, snapshots
        self.steps: list[RetrainStep] = []
        self.index: dict[tuple[str, str | None], int] = {}

    def named(self, name: str, before: int, model_hash: str | None = None) -> int | None:
        """The latest record of ``name`` (with ``model_hash`` where given) seen before
        position ``before`` of the lineage, as a step."""
        found = [i for i, c in enumerate(self.candidates[:before]) if c.name == name
                 and (model_hash is None or c.model_hash == model_hash)]
        return self.add(found[-1]) if found else None

    def add(self, position: int) -> int:
        lineage = self.candidates[position]
        key = (lineage.name, lineage.model_hash)
        if key in self.index:
            return self.index[key]
        if lineage.origin == "trained":
            step = trained_step(lineage, self.entry, self.snapshots)
            parents = [self.named(step.start, position)] if step.start and \
                step.start not in FIXED_STARTS else []
        else:
            step = RetrainStep(name=lineage.name, origin=lineage.origin,
                               model_hash=lineage.model_hash, method=lineage.method,
                               weights=lineage.weights)
            same = lineage.model_hash if lineage.origin == "reused" else None
            parents = [self.named(p, position, same) for p in lineage.parents]
            if lineage.origin == "merged" and " base=" in (lineage.method or ""):
                base = (lineage.method or "").split(" base=")[1].split()[0]
                parents.append(self._by_hash(base, position))
        step.parents = [p for p in parents if p is not None]
        self.steps.append(step)
        self.index[key] = len(self.steps) - 1
        return self.index[key]

    def _by_hash(self, model_hash: str, before: int) -> int | None:
        found = [i for i, c in enumerate(self.candidates[:before]) if c.model_hash == model_hash]
        return self.add(found[-1]) if found else None


def retraining(submission: SubmissionRecord, candidates: list[LineageRecord],
               entry: list[str], seed: int, snapshots: Snapshots) -> Retraining | None:
    """The submission's recipe; None where the grader recorded no lineage for it."""
    closure = _Closure(candidates, entry, snapshots)
    found = [i for i, c in enumerate(candidates) if c.name == submission.candidate
             and c.model_hash == submission.model_hash]
    if not found:
        return None
    closure.add(found[0])
    return Retraining(candidate=submission.candidate, model_hash=submission.model_hash,
                      harness_snapshot=submission.snapshot,
                      initial_snapshot=snapshots.root(submission.snapshot),
                      trainer_entry=entry, episode_seed=seed, steps=closure.steps)
