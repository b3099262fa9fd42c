"""The grader's wire contract: the body of every request its routes take and every answer
they give.

The FastAPI app (:mod:`vtbench.grader.app`) declares its routes with these models, so the
OpenAPI document names them; the client (:mod:`vtbench.client`) parses its answers into
them; the episode record (:mod:`vtbench.episode.record`) keeps an episode's history in
them. This module imports nothing from the grader's own layer: the client side may import
it too. Every model forbids unknown keys, so a field renamed on one side fails loudly.
"""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from vtbench.spec import EpisodeSpec

Method = Literal["linear", "slerp", "ties", "dare_ties", "task_arithmetic"]
NEEDS_BASE = ("ties", "dare_ties", "task_arithmetic")
DEFAULT_BASE = "models/base"
DEFAULT_DENSITY = 0.5
DEFAULT_STORE_BYTES = 256 * 2**30
"""Four of the largest candidates intake accepts."""


class View(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


# --- requests ------------------------------------------------------------------------


class CandidateRequest(View):
    """The body of ``POST /v1/submission``."""

    model: str = Field(min_length=1, max_length=500)
    """Model directory, relative to the workspace (e.g. ``models/a``)."""
    harness: str | None = Field(None, min_length=1, max_length=500)
    """Harness directory, relative to the workspace; ignored where the harness is fixed."""


class ValidateRequest(CandidateRequest):
    """The body of ``POST /v1/validations``."""

    wait: bool = True
    """Answer when the validation has settled (else at once, with its id, as 202)."""


class EpisodeBudgets(View):
    validations: int = Field(ge=0)
    """Validation credits the episode starts with."""
    compute_seconds: float = Field(gt=0)
    """Grader compute seconds (GPU-seconds where a GPU evaluates) its validations may spend."""
    store_bytes: int = Field(DEFAULT_STORE_BYTES, ge=0)
    """Bytes the grader keeps for the episode: its candidates in the candidate store and
    its snapshot history (``snapshots.git``) on disk."""


class CreateEpisodeRequest(View):
    """The body of ``POST /v1/operator/episodes``."""

    task: str = Field(min_length=1, max_length=200)
    """The task's id, as prepared in the private store."""
    digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    """The pack digest the runner checked (:class:`vtbench.prepare.PreparedTask`)."""
    workspace: str = Field(min_length=1, max_length=4000)
    budgets: EpisodeBudgets | None = None
    """Default: the episode spec's budgets, else the task's own."""
    spec: EpisodeSpec | None = None
    """The episode's spec (:class:`vtbench.spec.EpisodeSpec`), kept in the ledger; its
    task and digest must be the request's."""


class MergeRequest(View):
    """The body of ``POST /v1/merges``."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)

    method: Method
    models: list[str] = Field(min_length=1, max_length=8)
    """Candidate folders to merge, e.g. ``models/a``."""
    weights: list[float] = Field(min_length=1, max_length=8)
    """One weight per model."""
    out: str = Field(min_length=1, max_length=200)
    """The new folder to write, ``models/<name>``; it must not exist."""
    base: str | None = Field(None, min_length=1, max_length=200)
    """Base model of task_arithmetic, ties and dare_ties (default ``models/base``)."""
    density: float | None = Field(None, gt=0, le=1)
    """Share of each task vector kept by ties and dare_ties (default 0.5)."""
    t: float | None = Field(None, ge=0, le=1)
    """slerp position from the first model (0) to the second (1)."""

    @property
    def base_model(self) -> str | None:
        return (self.base or DEFAULT_BASE) if self.method in NEEDS_BASE else None

    def description(self, base_hash: str | None = None) -> str:
        """The method with its options, as lineage records it (``ties base=<hash>``)."""
        options = {"base": base_hash if self.base_model else None, "t": self.t,
                   "density": (self.density or DEFAULT_DENSITY)
                   if self.method in ("ties", "dare_ties") else None}
        return " ".join([self.method, *(f"{k}={v}" for k, v in options.items() if v is not None)])

    @property
    def parents(self) -> list[str]:
        """Every folder the merge reads: the models, then the base (if any)."""
        extra = [self.base_model] if self.base_model and self.base_model not in self.models else []
        return [*self.models, *extra]


# --- answers to an episode -----------------------------------------------------------


class EpisodeGrant(View):
    episode: str
    token: str
    """Shown once; the grader keeps only its hash."""


class ValidationView(View):
    """What an episode sees of one of its validations."""

    id: int
    state: str
    score: float | None = None
    n: int | None = None
    harness: str | None = None
    """``candidate``, or ``pristine`` when the task's fixed harness ran whatever was sent."""
    decoding: dict[str, Any] | None = None
    instances: list[dict[str, Any]] = []
    error: str | None = None
    cached: bool = False
    credit: int
    settlement: str | None = None
    gpus: int = 0
    """GPUs the evaluation ran on (0: the CPU); its compute seconds are GPU-seconds then."""
    model: str | None = None
    """The model folder the request named (``models/a``): what an agent that was restarted
    reads to take up its earlier validations."""
    harness_folder: str | None = None
    """The harness folder the request named, where the candidate's harness ran."""


class SubmittedHashes(View):
    model_hash: str
    harness_hash: str


class EpisodeStatus(View):
    episode: str
    task: str
    status: str
    validations_left: int
    compute_seconds_left: float
    validations: list[ValidationView]
    submitted: bool
    submission: SubmittedHashes | None
    """The submitted hashes (never a test score)."""


class SubmissionAck(View):
    episode: str
    model_hash: str
    harness_hash: str
    received: Literal[True] = True


class MergeResult(View):
    model: str
    """The folder written, ``models/<name>``."""
    hash: str
    method: str
    """The method with its options, as lineage records it."""


class ProcessSeen(View):
    """A process of the research sandbox that the runner saw train, or name a candidate
    folder on its command line (see :mod:`vtbench.episode.processes`). Everything but the
    times is the agent's own text: data, never markup."""

    pid: int
    first_seen: float
    """Unix time of the runner's first sample that saw it."""
    last_seen: float
    """Unix time of the last sample that saw it alive."""
    cwd: str
    """Its working folder, as the sandbox names it (``/workspace``)."""
    argv: list[str]
    """Its command and arguments (each cut to a bounded length)."""
    training: bool
    """It ran a program of ``trainer/``, or loaded torch (training or other model work)."""
    elsewhere: list[str] = Field(default_factory=list)
    """What it ran or named outside ``trainer/``, ``data/`` and ``models/`` that the agent
    could have written: a program, a working folder or an argument (``alt_data``,
    ``/tmp/cfg.toml``), or ``(inline program)`` for code given on its command line."""
    candidates: list[str] = Field(default_factory=list)
    """Paths under ``models/`` it named (``models/a``), other than ``base`` and ``initial``."""
    data_tree: str | None = None
    """Git tree hash of the workspace's ``data/`` when the runner first saw this program of
    ``trainer/`` run (None for other processes, and in records from before it)."""
    trainer_tree: str | None = None
    """Git tree hash of ``trainer/`` at that moment."""


TrainedWith = Literal["components", "outside", "unknown"]


class LineageRecord(View):
    """How a candidate came to be (see :mod:`vtbench.grader.lineage`)."""

    name: str
    """Workspace-relative folder, e.g. ``models/tuned-a`` (as in ``Validation.candidate``)."""
    origin: Literal["initial", "trained", "merged", "reused"]
    snapshot: str | None = None
    """Workspace commit the grader took when it first saw a trained candidate."""
    parents: list[str] = Field(default_factory=list)
    """Candidates this one was merged from, or the one it reuses."""
    method: str | None = None
    """Merge method (merged), or ``claimed: <command>`` from ``train_log.json`` (trained)."""
    weights: list[float] = Field(default_factory=list)
    """Merge weights, one per merged model (merged)."""
    trained_with: TrainedWith | None = None
    """What trained it (trained): ``components`` (only programs of ``trainer/`` on
    ``data/``, as the runner saw them), ``outside`` (trained outside the components: a
    program, working folder or argument elsewhere), ``unknown`` (no training the runner saw
    names it). None for the other origins and for ledgers older than this field."""
    trained_by: list[ProcessSeen] = Field(default_factory=list)
    """The processes the runner saw name this folder before the grader first saw it."""
    data_hash: str | None = None
    """Git tree hash of ``data/`` in the snapshot (trained with the components only)."""
    trainer_hash: str | None = None
    """Git tree hash of ``trainer/`` in the snapshot (trained with the components only)."""
    model_hash: str | None = None
    """The intake tree hash of the folder's contents."""


class CandidateView(LineageRecord):
    """What ``GET /v1/models`` shows of one candidate: its lineage and how it scored."""

    best_score: float | None = None
    """Best completed validation score of this model hash in the episode (any harness)."""
    validations: int = 0
    """Completed validations of this model hash."""


# --- answers to the operator ---------------------------------------------------------


class TestResult(View):
    """Operator only: the submission's test score and its gain over the initial system."""

    __test__ = False  # not a pytest class
    episode: str
    task: str
    state: str
    test_score: float | None
    initial: float | None
    reference: float | None
    gain: float | None
    normalised_gain: float | None
    error: str | None = None


class ValidationRecord(View):
    """One validation as the episode record keeps it."""

    index: int
    """1-based order of the validation within the episode."""
    elapsed_seconds: float
    """Seconds since the episode was created."""
    snapshot: str
    """Workspace commit taken for this validation."""
    candidate: str
    model_hash: str
    harness_hash: str
    score: float | None
    """Validation score; None when the validation failed."""
    error: str | None = None
    cached: bool = False
    charged: bool = True
    """Whether it spent a validation credit."""
    compute_seconds: float = 0.0


class SubmissionRecord(View):
    candidate: str
    snapshot: str
    model_hash: str
    harness_hash: str
    elapsed_seconds: float


class EpisodeHistory(View):
    """Operator only: an episode's validations, submission and candidates."""

    validations: list[ValidationRecord]
    submission: SubmissionRecord | None
    candidates: list[LineageRecord]


class EpisodeSummary(View):
    episode: str
    task: str
    status: str
    validations: int
    """Validation credits left."""
    compute_seconds: float
    """Grader compute seconds left."""
    submission: str | None
    """The submission's state, None before one."""


class OperatorStatus(View):
    episodes: list[EpisodeSummary]
    open_validations: list[int]
    consistency: list[str]
    """The ledger's broken invariants; empty when consistent."""
