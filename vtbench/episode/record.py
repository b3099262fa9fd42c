"""The typed, versioned record every episode writes; reports and analysis read only these.

``episode.json`` in the episode's output folder holds one :class:`EpisodeRecord`. Its
validations, submission and candidate lineage are the grader's own answer
(:class:`vtbench.grader.api.EpisodeHistory`), kept in the models of the wire contract; its
processes are what the runner saw train. The snapshot history (``snapshots.git`` beside
the workspace) holds the snapshots the record names by commit. A record can be rebuilt
into a report without any other state.
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from vtbench.episode.recipe import Retraining
from vtbench.episode.retrained import Attribution, Reproduction
from vtbench.grader.api import LineageRecord as Lineage
from vtbench.grader.api import ProcessSeen
from vtbench.grader.api import SubmissionRecord as Submission
from vtbench.grader.api import ValidationRecord as Validation
from vtbench.spec import EpisodeSpec

SCHEMA_VERSION: Literal[1] = 1
__all__ = ["BudgetSpent", "EpisodeRecord", "Hardware", "Lineage", "LlmUsage", "ProcessSeen",
           "Provenance", "Submission", "Validation"]


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class LlmUsage(Record):
    input_tokens: int = 0
    """Every input token the model read, cached ones included."""
    cached_input_tokens: int = 0
    """The part of ``input_tokens`` read from or written to the provider's prompt cache."""
    output_tokens: int = 0
    dollars: float = 0.0
    requests: int = 0


class BudgetSpent(Record):
    wall_seconds: float = 0.0
    agent_seconds: float = 0.0
    """Wall seconds the agent ran while neither training nor waiting for a validation."""
    training_seconds: float = 0.0
    """Wall seconds a training process ran in the sandbox (a program of ``trainer/``, or
    any process with torch loaded); parallel trainings count once (see
    :mod:`vtbench.episode.timesplit`)."""
    grading_seconds: float = 0.0
    """Wall seconds a validation of the episode was pending, plus the test scoring."""
    runner_seconds: float = 0.0
    """The runner's own wall seconds, measured: set-up until the agent starts (workspace,
    grader, leak audit, gateway), stopping the agent and writing the record."""
    unaccounted_seconds: float = 0.0
    """``wall_seconds`` less the four parts above: time no part saw (a runner that died
    before ``--resume``), and rounding."""
    grader_compute_seconds: float = 0.0
    validations: int = 0


class Hardware(Record):
    cpu_model: str | None = None
    cpu_cores: int = 0
    gpus: list[str] = Field(default_factory=list)
    """One name per GPU of the host (nvidia-smi), empty without GPUs."""


class Provenance(Record):
    """What the episode ran with; records that differ here are different measurements."""

    vtbench_version: str | None = None
    vtbench_commit: str | None = None
    """Commit of the vtbench checkout (``+dirty`` with local edits), None outside git."""
    task_digest: str | None = None
    """sha256 of the task pack and its base model (:func:`vtbench.prepare.digest.pack_digest`)."""
    method_settings: dict[str, list[str]] | None = None
    """The task pack's trainer settings that choose the training method rather than tune it,
    per config file (:func:`vtbench.spec.method_settings`): the change classifier reads them
    here, never from the workspace. None where the pack has no table, or in a record from
    before them (the classifier's generic names decide)."""
    sandbox: str | None = None
    """Sandbox backend of the research sandbox (bwrap, docker, none)."""
    serving_backend: str | None = None
    """What served candidates in the grader's evaluations (transformers, vllm)."""
    sandbox_limits: Literal["v2", "v1", "none"] | None = None
    """Which cgroups limited each bwrap sandbox of this host: v2, v1, or none (rlimits)."""
    sandbox_limits_detail: str | None = None
    """The limits in words, e.g. ``cgroup v2 (cpu, cpuacct, memory, pids; cgroup.kill)``;
    ``CPU time per process only`` where no cgroup counted a sandbox's CPU time."""
    weak_limits_allowed: bool = False
    """The operator passed ``--allow-weak-limits``: sandboxes may have run without
    per-sandbox memory and pids limits (processes counted per uid), off their cpuset, or
    with their CPU budget held per process instead of for the whole tree."""
    cores_held_by: Literal["cpuset", "affinity"] | None = None
    """What kept the research sandbox on its reserved cores (``spec.reservation``): a
    cpuset it cannot leave, or (weak limits allowed, no cpuset controller) an affinity its
    processes may widen; None in records from before reservations."""
    sandbox_tools: dict[str, str] = Field(default_factory=dict)
    """Where bwrap and socat came from: system folders, or the tools folder of an offline
    install (``$VTBENCH_TOOLS_DIR`` or ``<prefix>/vtbench-tools``)."""
    hardware: Hardware = Field(default_factory=Hardware)


class EpisodeRecord(Record):
    schema_version: Literal[1] = SCHEMA_VERSION
    episode_id: str
    task: str
    agent: str
    model: str | None = None
    """The LLM the agent ran with (LLM agents; None for built-in agents or the CLI's default)."""
    reasoning_effort: str | None = None
    seed: int
    spec: EpisodeSpec | None = None
    """What the episode ran with, decided once when it started (None in records written
    before specs were recorded)."""
    budget_minutes: float
    """The episode's wall clock (``spec.budgets.wall_clock_minutes``)."""
    started_at: str
    """ISO-8601 UTC time the episode started (its runner began)."""
    agent_started_at: str | None = None
    """ISO-8601 UTC time the agent first started, saved before it ran any code. From then
    on the episode belongs to the results whatever happens to its runner: a campaign
    resumes it, and closes it with what the grader's ledger holds (``runner_failed``)."""
    ended_at: str | None = None
    status: Literal["running", "finished", "failed"] = "running"
    stop_reason: str | None = None
    """``submitted``, ``deadline``, ``agent_exited``, ``runner_failed`` or an error."""
    runner_failure: str | None = None
    """With ``runner_failed``: why the runner failed after the agent had started; the
    episode was then closed without its agent, scoring the submission the grader's ledger
    held (else the initial system)."""
    submitted: bool = False
    initial_val: float | None = None
    initial_test: float | None = None
    reference_test: float | None = None
    light_gain: float | None = None
    """The task's co-design margin, from its calibration (``vtbench prepare --calibrate``):
    the light system's mean test gain over the initial system across the calibration's
    seeds (None where the task was not calibrated). An agent's gain beside it shows whether
    the agent went beyond lightweight work."""
    reference_gain: float | None = None
    """The reference system's mean test gain over the same seeds."""
    final_test: float | None = None
    """Test score of the submission, or of the initial system when nothing was submitted."""
    gain: float | None = None
    normalized_gain: float | None = None
    validations: list[Validation] = Field(default_factory=list)
    submission: Submission | None = None
    candidates: list[Lineage] = Field(default_factory=list)
    processes: list[ProcessSeen] = Field(default_factory=list)
    """Every training process the runner saw in the sandbox (and every process that named a
    candidate folder and something elsewhere): command, arguments, working folder, what it
    ran or named outside the components (:mod:`vtbench.episode.processes`)."""
    retraining: Retraining | None = None
    """What it takes to retrain the submission from its snapshots
    (:mod:`vtbench.episode.recipe`); None without a submission, or in older records."""
    reproduction: Reproduction | None = None
    """``vtbench reproduce``: the submission retrained from its snapshots (operator side,
    after the episode); None until it ran."""
    attribution: Attribution | None = None
    """``vtbench attribute``: the test gain split into data, trainer and harness."""
    spent: BudgetSpent = Field(default_factory=BudgetSpent)
    llm: LlmUsage = Field(default_factory=LlmUsage)
    provenance: Provenance = Field(default_factory=Provenance)
    gpus: list[str] = Field(default_factory=list)
    """The GPUs the research sandbox held (``index: name``), from the host's allocator;
    empty where the task asks for none or, asking for optional ones, the host has none
    (the episode trained on the CPU)."""
    gpu_shared_with_grader: bool = False
    """The grader evaluated on the GPU the research sandbox held (a host with one GPU):
    each side was given a share of its memory."""
    workspace: str = "workspace"
    """Path of the workspace git repository, relative to the record's folder."""

    @property
    def validations_used(self) -> int:
        return sum(1 for v in self.validations if v.charged)
