"""The task spec (``task.toml``) as strict pydantic models.

Unknown keys are refused so that a typo fails loudly; relative paths resolve against the
folder that holds the ``task.toml``. :func:`load_spec` turns every validation problem
into one :class:`SpecError` line naming the file, the field and the reason.
"""

import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from vtbench.errors import SpecError

METHOD_SUFFIX = ".method.toml"
"""A trainer source folder ``S`` may have its method settings table beside it, ``S.method.toml``
(:func:`method_settings`)."""
METHOD_TABLE = TypeAdapter(dict[str, dict[str, str]])
"""A method settings table: ``{"config.toml": {"lora.enabled": "which weights train"}}``."""
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*(@[\w./-]+)?")
"""``org/name`` as the Hugging Face hub spells it, with an optional ``@revision``."""
BaseKind = Literal["tiny", "smol", "path", "hub"]


def base_model_kind(name: str) -> BaseKind:
    """How ``base_model`` names its model. A folder is written as a path (``/…``, ``~/…``,
    ``./…``, ``../…``) so that it never reads as a hub id; a ValueError lists the forms."""
    if name in ("tiny", "smol"):
        return "tiny" if name == "tiny" else "smol"
    if name in (".", "..") or name.startswith(("/", "~", "./", "../")):
        return "path"
    if HUB_ID.fullmatch(name):
        return "hub"
    raise ValueError(f"{name!r} is not tiny, smol, a folder (/…, ./…, ../…, ~/…) or a hub id "
                     "(org/name or org/name@revision)")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class Decoding(Strict):
    """Sampling settings the fixed harness always uses."""

    temperature: float = Field(0.0, ge=0.0, le=2.0)
    """0 means greedy."""
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int = Field(64, ge=1, le=4096)
    """Most new tokens per model call."""


class Component(Strict):
    editable: bool
    """Whether the research agent may change this component."""
    sources: list[str] = Field(min_length=1)
    """Folders, relative to the task folder, copied in order into the workspace's
    ``<component>/`` folder (a later one overrides files of an earlier one)."""
    entry: list[str] = Field(default_factory=list)
    """Command that runs the component, relative to the workspace (trainer) or the
    harness folder (harness). Placeholders: ``{base}``, ``{out}``, ``{seed}``, ``{steps}``."""


class HarnessComponent(Component):
    decoding: Decoding | None = None
    """Required when the harness is fixed: the decoding it always runs with."""
    timeout_seconds: int = Field(600, ge=1)
    """Wall-clock limit of one harness run over a whole split."""
    cpu_seconds: int | None = Field(None, ge=1)
    """CPU-time limit of each harness process over a whole split, before
    ``cpu_seconds_per_instance`` adds to it; ``timeout_seconds`` when unset."""
    cpu_seconds_per_instance: float = Field(0.0, ge=0.0)
    """Added to the CPU-time limit per instance of the split: a compute budget per instance
    that keeps a harness from searching where the task wants the model to propose. CPU
    time, not wall clock, so that a busy host (or a slow model) does not spend it."""

    def cpu_limit_seconds(self, instances: int) -> float:
        """The CPU-time limit of one harness run over ``instances`` instances."""
        fixed = self.cpu_seconds if self.cpu_seconds is not None else self.timeout_seconds
        return fixed + self.cpu_seconds_per_instance * instances

    @model_validator(mode="after")
    def fixed_harness_fixes_decoding(self) -> "HarnessComponent":
        if not self.editable and self.decoding is None:
            raise ValueError("a fixed harness must fix its decoding")
        if not self.entry:
            raise ValueError("the harness needs an entry command")
        return self


class Components(Strict):
    data: Component
    trainer: Component
    harness: HarnessComponent


class Splits(Strict):
    val: int = Field(ge=1)
    """Validation items (the agent gets scores and trajectories on these)."""
    test: int = Field(ge=1)
    """Hidden test items (scored once, on the submission)."""


class Metric(Strict):
    name: str
    direction: Literal["maximize", "minimize"] = "maximize"


class Budgets(Strict):
    wall_clock_minutes: float = Field(gt=0)
    validations: int = Field(ge=0)
    grader_compute_seconds: float = Field(gt=0)
    """CPU-seconds the grader may spend on this episode's validations."""
    train_steps: int | None = Field(None, ge=1)
    """Optimiser steps a single training run may take; None means unlimited."""
    llm_tokens: int = Field(ge=0)
    llm_dollars: float = Field(ge=0)
    repeat_validation_costs_credit: bool = False
    """Whether a cached repeat of an earlier validation spends a validation credit."""


class Resources(Strict):
    cpus: int = Field(1, ge=1)
    gpus: int = Field(0, ge=0)
    """GPUs the research sandbox needs: a host with fewer refuses the task."""
    optional_gpus: int = Field(0, ge=0)
    """GPUs the research sandbox gets where the host has them (when ``gpus`` is 0): on a
    host without, the episode trains on the CPU, and its record says which it had."""
    memory_gb: float = Field(4, gt=0)
    max_file_gb: float = Field(4, gt=0)
    """Largest single file a process in the research sandbox may write."""
    disk_gb: float = Field(20, gt=0)
    """Space the whole workspace may take (its own filesystem when the runner is root)."""


ServingBackend = Literal["transformers", "vllm"]


class Serving(Strict):
    backend: ServingBackend = "transformers"
    """What serves a candidate in every evaluation: our batching server (any host), or vLLM
    where installed (GPU hosts); the operator may override it (``$VTBENCH_SERVING_BACKEND``)."""


class Scorer(Strict):
    module: str
    """Trusted Python file of the task pack defining ``score(item, output) -> float``."""


class Builder(Strict):
    module: str
    """Trusted Python file defining ``build_split`` and ``normalize`` (see tasks/README.md)."""


class Reference(Strict):
    module: str
    """Python file defining ``apply_data``, ``apply_trainer`` and ``apply_harness``."""


class TaskSpec(Strict):
    id: str = Field(pattern=r"^[a-z][a-z0-9_-]{1,31}$")
    title: str
    scale: Literal["tiny", "smol", "full"]
    base_model: str
    """``tiny`` (the shared pre-trained base), ``smol`` (SmolLM2-135M), a local Hugging Face
    checkpoint folder (``/…``, ``~/…``, or ``./…``/``../…`` relative to this task.toml, made
    absolute when the spec loads) or a hub id ``org/name[@revision]``, found in the
    operator's Hugging Face cache (``vtbench prepare --download`` fetches it)."""
    components: Components
    splits: Splits
    metric: Metric
    budgets: Budgets
    resources: Resources = Resources()
    serving: Serving = Serving()
    scorer: Scorer
    builder: Builder
    reference: Reference

    @property
    def harness_editable(self) -> bool:
        return self.components.harness.editable

    @field_validator("base_model")
    @classmethod
    def folder_relative_to_the_spec(cls, value: str, info: ValidationInfo) -> str:
        root = (info.context or {}).get("root")
        if base_model_kind(value) == "path" and root is not None:
            return os.path.normpath(Path(root).resolve() / Path(value).expanduser())
        return value

    @model_validator(mode="after")
    def full_scale_names_its_checkpoint(self) -> "TaskSpec":
        if self.scale == "full" and base_model_kind(self.base_model) not in ("path", "hub"):
            raise ValueError("a full-scale task names its base model by folder or hub id")
        return self


def read_toml(path: Path, what: str = "file") -> dict[str, Any]:
    """A TOML file's table; a missing or malformed file is one SpecError line."""
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise SpecError(f"{path}: no such {what}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise SpecError(f"{path}: cannot be read: {err}") from None
    except tomllib.TOMLDecodeError as err:
        raise SpecError(f"{path}: not valid TOML: {err}") from None


def first_problem(path: Path, err: ValidationError) -> str:
    """A validation error as one line: the file, the first problem's field and message, and
    how many more there are."""
    first = err.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "(top level)"
    more = f" (+{err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"{path}: {field}: {first['msg']}{more}"


def load_spec(path: Path) -> TaskSpec:
    """Read and validate a ``task.toml``; every problem becomes one SpecError line."""
    raw = read_toml(path)
    try:
        spec = TaskSpec.model_validate(raw, context={"root": path.parent})
    except ValidationError as err:
        raise SpecError(first_problem(path, err)) from None
    _check_files_exist(spec, path.parent)
    return spec


def _check_files_exist(spec: TaskSpec, root: Path) -> None:
    files = {
        "scorer.module": spec.scorer.module,
        "builder.module": spec.builder.module,
        "reference.module": spec.reference.module,
    }
    for name, component in spec.components:
        for index, source in enumerate(component.sources):
            files[f"components.{name}.sources.{index}"] = source
    for field, rel in files.items():
        if not (root / rel).exists():
            raise SpecError(f"{root / 'task.toml'}: {field}: {rel} does not exist")
    method_settings(root, spec.components.trainer.sources)  # a malformed table fails here


def method_settings(root: Path, sources: list[str]) -> dict[str, list[str]] | None:
    """Which settings of a trainer choose its training method rather than tune it: config
    file (its path inside ``trainer/``) -> the dotted keys whose change is an ``algorithm``
    change (any other setting of that file is ``hyperparameters``). Read from the table
    ``<source>.method.toml`` beside each trainer source folder, a later source's tables
    replacing an earlier one's, as its files do; None when no source has one. A table
    beside its source, not inside it, is never copied into a workspace, so an agent cannot
    relabel its own changes. One SpecError line when a table is malformed."""
    found: dict[str, list[str]] | None = None
    for source in sources:
        path = root / (source.rstrip("/") + METHOD_SUFFIX)
        if path.is_file():
            found = {**(found or {}), **_method_table(path)}
    return found


def _method_table(path: Path) -> dict[str, list[str]]:
    raw = read_toml(path, "method table")
    try:
        table = METHOD_TABLE.validate_python(raw)
    except ValidationError as err:
        raise SpecError(first_problem(path, err),
                        hint='a table per config file, e.g. ["config.toml"], of '
                             '"dotted.key" = "what it chooses"') from None
    return {file: sorted(keys) for file, keys in table.items()}


class AgentChoice(Strict):
    name: str
    """The agent's name (``noop``, ``reference``, ``claude-code``, ``command:...``)."""
    model: str | None = None
    """An LLM agent's model; None: its CLI's default."""
    reasoning_effort: str | None = None
    """An LLM agent's reasoning effort; None: its CLI's default."""


class EpisodeSpec(Strict):
    """Everything one episode runs with, decided once (:meth:`decide`) and carried whole:
    written into the episode's record, sent to the grader when the episode is registered
    (the ledger keeps it), and the one source of ``TASK.md``'s budget, the research
    sandbox's limits, ``$VTBENCH_DEADLINE`` and the gateway's limits. Nothing downstream
    works a default out again."""

    schema_version: Literal[1] = 1
    task: str
    """The task's id."""
    task_digest: str
    """sha256 of the task pack and base model the prepared systems were built from."""
    agent: AgentChoice
    seed: int
    budgets: Budgets
    """The task's budgets with the episode's own wall clock (``--budget-minutes``)."""
    resources: Resources
    """What the research sandbox may use (the task's ``resources``)."""

    @classmethod
    def decide(cls, task: str, digest: str, spec: "TaskSpec", agent: AgentChoice, seed: int,
               budget_minutes: float | None = None) -> "EpisodeSpec":
        """The episode's spec from the task's and the caller's choices: a budget given
        replaces the task's wall clock; every other budget is the task's."""
        budgets = spec.budgets
        if budget_minutes is not None:
            budgets = Budgets.model_validate({**budgets.model_dump(),
                                              "wall_clock_minutes": budget_minutes})
        return cls(task=task, task_digest=digest, agent=agent, seed=seed, budgets=budgets,
                   resources=spec.resources)

    @property
    def wall_clock_seconds(self) -> float:
        return self.budgets.wall_clock_minutes * 60
