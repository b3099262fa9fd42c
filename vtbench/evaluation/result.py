"""What an evaluation returns: the split score and one record per instance."""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class InstanceResult(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    id: str
    input: dict[str, Any]
    output: str | None
    """What the harness answered; None when it wrote nothing for this instance."""
    trajectory: Any = None
    """The harness's own account of how it got there (messages, calls, timings)."""
    score: float
    error: str | None = None


class EvaluationResult(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    task: str
    split: str
    score: float
    """Mean instance score."""
    n: int
    harness: str
    """``candidate`` or ``pristine`` (a fixed-harness task always runs its own harness)."""
    decoding: dict[str, Any] | None
    """The decoding forced on a fixed harness; None when the harness chooses."""
    instances: list[InstanceResult]
    error: str | None = None
    """Set when the harness failed as a whole (crash, timeout, oversized output)."""
    timings: dict[str, float] = Field(default_factory=dict)
    """Seconds: ``wall``; ``staging`` (the harness copied in); ``server_start`` (launch to
    ready; the harness sandbox starts meanwhile); ``harness`` (its sandbox start to its
    end); ``generation`` (the server's generate calls); ``finish`` (server stopped, work
    folder removed); ``scoring``."""
