"""The grader's wire contract: the bodies its routes answer with.

The FastAPI app (:mod:`vtbench.grader.app`) declares its routes with these models, so the
OpenAPI document names them. This module imports nothing from the grader's own layer:
the client side may import it too.
"""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class View(BaseModel):
    model_config = ConfigDict(extra="forbid")


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


class EpisodeStatus(View):
    episode: str
    task: str
    status: str
    validations_left: int
    compute_seconds_left: float
    validations: list[ValidationView]
    submitted: bool
    submission: dict[str, str] | None
    """The submitted hashes (never a test score)."""


class SubmissionAck(View):
    episode: str
    model_hash: str
    harness_hash: str
    received: Literal[True] = True


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
