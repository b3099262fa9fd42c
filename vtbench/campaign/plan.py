"""The campaign file (TOML) and the plan it resolves to.

A campaign file names agents, tasks and seeds; its plan is their product, one
:class:`PlannedEpisode` each, with every path made absolute (paths in the file are relative
to the file), every agent and task checked, LLM agents' gateway files read, and each
task's resources copied in. :func:`load_plan` turns any problem into one
:class:`PlanError` line before anything is written. The plan is stored as ``plan.json``
in the campaign folder, so a campaign is resumed, shown and reported from its folder alone.
"""

import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from vtbench.agents import get_agent
from vtbench.campaign.errors import PlanError
from vtbench.episode.gateway_process import config_path
from vtbench.errors import VtbenchError
from vtbench.gateway.config import load_config
from vtbench.tasks import find_task, load_task
from vtbench.tasks.registry import Task

PLAN_VERSION: Literal[1] = 1


class Strict(BaseModel):
    """No unknown keys, no coercion: ``budget_minutes = "10"`` is refused, not read as 10."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True,
                              use_attribute_docstrings=True)


class AgentEntry(Strict):
    name: str
    """The agent: noop, reference, filter, tuner, claude-code, codex, gemini, opencode or
    ``command:<program>``."""
    model: str | None = None
    """The LLM an LLM agent runs with (default: its CLI's own)."""
    reasoning_effort: str | None = None
    """For LLM agents, e.g. low, medium, high."""
    gateway_config: str | None = None
    """An LLM agent's gateway TOML, relative to the campaign file (default
    ``$VTBENCH_GATEWAY_CONFIG``)."""
    label: str | None = None
    """This agent's name in the campaign (default: ``name``, with ``@model`` for an LLM
    agent given a model); labels are unique."""

    @property
    def display(self) -> str:
        if self.label:
            return self.label
        return f"{self.name}@{self.model}" if self.model else self.name


class BudgetOverrides(Strict):
    budget_minutes: float | None = Field(None, gt=0)
    """Wall-clock budget of every episode, in minutes (default: each task's)."""


class RaySettings(Strict):
    address: str | None = None
    """``host:port`` of a running Ray cluster's head; without it the Ray executor starts
    a private single-node Ray on this host."""


class CampaignFile(Strict):
    name: str | None = None
    """The campaign's name (default: the file's name without ``.toml``)."""
    agents: list[AgentEntry] = Field(min_length=1)
    """The research agents, each run on every task with every seed."""
    tasks: list[str] = Field(min_length=1)
    """Built-in task ids or task pack folders (relative to the file)."""
    seeds: list[int] = Field(min_length=1)
    """Episode seeds, each run once per agent and task."""
    budget: BudgetOverrides = BudgetOverrides()
    """Overrides of the tasks' budgets."""
    concurrency: int = Field(1, ge=1)
    """Most episodes at once (the executor may run fewer: each task's resources must fit)."""
    retries: int = Field(2, ge=0)
    """How often an episode is tried again after a failure of the infrastructure (not of the
    agent: an agent's own failure is a result)."""
    sandbox: Literal["bwrap", "docker", "none"] = "bwrap"
    """Sandbox backend of every episode."""
    allow_weak_limits: bool = False
    """Run episodes where no cgroup limits each sandbox (as ``vtbench run --allow-weak-limits``)."""
    shared: bool = False
    """Let episodes share cores (as ``vtbench run --shared``): more may run at once than the
    host has cores for, and every result is marked "shared". Off: each episode holds its
    cores alone and the executors never place more than a host has."""
    executor: Literal["local", "ray"] = "local"
    """Where episodes run: this host, or a Ray cluster (``--executor`` overrides it)."""
    ray: RaySettings = RaySettings()
    """Settings of the Ray executor."""
    attribute: bool = False
    """After each episode, attribute its gain to data, trainer and harness (``vtbench
    attribute``, one seed) in the same runner process on the same executor: operator
    compute, cached in the private store, resumed like the episodes."""

    @model_validator(mode="after")
    def _unique(self) -> "CampaignFile":
        named = {"seeds": [str(seed) for seed in self.seeds], "tasks": self.tasks,
                 "agent labels": [agent.display for agent in self.agents]}
        for what, values in named.items():
            repeated = sorted({value for value in values if values.count(value) > 1})
            if repeated:
                raise ValueError(f"{what} repeat: {', '.join(repeated)}")
        return self


class PlannedEpisode(Strict):
    key: str
    """The episode's name in the ledger and its folder under ``episodes/``."""
    agent: str
    """The agent adapter's name."""
    label: str
    model: str | None
    reasoning_effort: str | None
    gateway_config: str | None
    """Absolute path of the LLM gateway file (LLM agents), None otherwise."""
    task: str
    """Absolute path of the task pack."""
    task_id: str
    seed: int
    budget_minutes: float | None
    """The campaign's wall-clock budget for every episode; None: the task's own, which
    ``vtbench run`` decides in the episode's spec."""
    cpus: int
    """The task's ``resources.cpus``: what the executor reserves for the episode."""
    gpus: int
    memory_gb: float
    attribute: bool = False
    """Run ``vtbench attribute`` on the episode once it has finished (``vtbench run
    --attribute``)."""


class Plan(Strict):
    schema_version: Literal[1] = PLAN_VERSION
    name: str
    source: str
    """The campaign file the plan was read from."""
    concurrency: int
    retries: int
    sandbox: str
    allow_weak_limits: bool
    shared: bool = False
    """Episodes share cores (``--shared``); else each holds its own."""
    executor: Literal["local", "ray"]
    ray_address: str | None
    episodes: list[PlannedEpisode]

    @property
    def max_attempts(self) -> int:
        return 1 + self.retries

    def episode(self, key: str) -> PlannedEpisode:
        return next(e for e in self.episodes if e.key == key)


def read_file(path: Path) -> CampaignFile:
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise PlanError(f"{path}: no such campaign file") from None
    except tomllib.TOMLDecodeError as err:
        raise PlanError(f"{path}: not valid TOML: {err}") from None
    try:
        return CampaignFile.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        message = first["msg"].removeprefix("Value error, ")
        more = f" (+{err.error_count() - 1} more)" if err.error_count() > 1 else ""
        raise PlanError(f"{path}: {where}: {message}{more}") from None


def resolve_task(entry: str, base: Path) -> Task:
    """A task pack folder relative to the campaign file, else a built-in task id."""
    folder = base / entry
    if folder.exists():
        return load_task(folder)
    if "/" in entry:
        raise PlanError(f"unknown task {entry!r}: no folder {folder}",
                        hint="task paths are relative to the campaign file")
    return find_task(entry)


def resolve_agent(entry: AgentEntry, base: Path) -> str | None:
    """Check the agent; returns an LLM agent's gateway file (absolute), else None."""
    agent = get_agent(entry.name)
    if not agent.needs_gateway:
        given = [f for f in ("model", "reasoning_effort", "gateway_config") if getattr(entry, f)]
        if given:
            raise PlanError(f"agent {entry.name} uses no LLM: drop {', '.join(given)}")
        return None
    option = base / entry.gateway_config if entry.gateway_config else None
    path = config_path(option, entry.name)
    load_config(path)
    return str(path)


def slot_name(task_id: str, label: str, seed: int) -> str:
    return f"{task_id}-{re.sub(r'[^A-Za-z0-9._-]+', '_', label)[:48]}-s{seed}"


def load_plan(path: Path) -> Plan:
    """Read, check and resolve a campaign file; any problem is one :class:`PlanError`."""
    path = path.resolve()
    spec = read_file(path)
    try:
        return resolve(spec, path)
    except VtbenchError as err:  # unknown agent or task, a bad gateway file, ...
        raise PlanError(f"{path}: {err}", hint=err.hint) from None


def resolve(spec: CampaignFile, path: Path) -> Plan:
    tasks = [resolve_task(entry, path.parent) for entry in spec.tasks]
    ids = [task.id for task in tasks]
    if len(set(ids)) < len(ids):
        raise PlanError(f"two task entries are the same task ({', '.join(ids)})")
    gateways = [resolve_agent(agent, path.parent) for agent in spec.agents]
    episodes = []
    for seed in spec.seeds:
        for task in tasks:
            for agent, gateway in zip(spec.agents, gateways, strict=True):
                resources = task.spec.resources
                episodes.append(PlannedEpisode(
                    key=slot_name(task.id, agent.display, seed), agent=agent.name,
                    label=agent.display, model=agent.model,
                    reasoning_effort=agent.reasoning_effort, gateway_config=gateway,
                    task=str(task.root), task_id=task.id, seed=seed,
                    budget_minutes=spec.budget.budget_minutes, cpus=resources.cpus,
                    gpus=resources.gpus, memory_gb=resources.memory_gb,
                    attribute=spec.attribute))
    keys = [e.key for e in episodes]
    if len(set(keys)) < len(keys):
        raise PlanError("two agent labels name the same episode folder",
                        hint="give the agents labels that differ in letters or digits")
    return Plan(name=spec.name or path.stem, source=str(path), concurrency=spec.concurrency,
                retries=spec.retries, sandbox=spec.sandbox,
                allow_weak_limits=spec.allow_weak_limits, shared=spec.shared,
                executor=spec.executor,
                ray_address=spec.ray.address, episodes=episodes)
