"""Whose failure is it: the candidate's, unless the grader shows it is its own.

The rule for every validation and submission that fails: anything that happens while the
candidate's model loads or serves, or while its harness runs, is the candidate's failure
and is charged, whatever the exception (a loader's ``ZeroDivisionError`` as much as a
:class:`CheckpointError`; a model server that aborts as much as one that exits 3). The
grader refunds only with evidence that the failure is its own, and records which:

* a **known infrastructure condition** raised by trusted code: the sandbox could not be
  had, the disk is full, a stored tree went missing, a dependency is missing, the task
  was prepared again, the trusted scorer raised; or
* a **control**: right after the failure, the task's initial system is evaluated through
  the same pipeline (same server backend and device, same sandbox backend, the task's own
  harness) on one validation item. If the initial system fails too, the failure is the
  grader's; if it answers, the candidate caused it.

Trusts: the evaluation pipeline, the prepared initial system. Does not trust the failed
candidate's exception text (kept for the operator, shown to the agent without store
paths by the caller).
"""

import errno
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from vtbench.errors import (
    GraderUnavailable,
    MissingDependency,
    ModelServerError,
    NotPrepared,
    SandboxUnavailable,
    ScorerError,
    VtbenchError,
)

if TYPE_CHECKING:
    from vtbench.prepare import PreparedTask

log = logging.getLogger("vtbench.grader")

CONTROL_TIMEOUT_SECONDS = 300.0
"""Longest a control evaluation (one item of the initial system) may take."""

_KNOWN: tuple[tuple[type[BaseException], str], ...] = (
    (SandboxUnavailable, "sandbox_unavailable"),
    (GraderUnavailable, "store_unavailable"),
    (MissingDependency, "missing_dependency"),
    (NotPrepared, "task_prepared_again"),
    (ScorerError, "scorer_failed"),
)
_DISK_FULL = {errno.ENOSPC, errno.EDQUOT}


@dataclass(frozen=True)
class Blame:
    """The verdict on one failure, as the ledger records it."""

    party: Literal["candidate", "grader"]
    cause: str
    """``control_passed`` (candidate), ``control_failed`` or a known condition (grader)."""
    evidence: str
    """What showed it: the control's outcome or the condition's message."""

    @property
    def refunded(self) -> bool:
        return self.party == "grader"

    def event(self) -> dict[str, str]:
        return {"party": self.party, "cause": self.cause, "evidence": self.evidence}


def describe(err: BaseException) -> str:
    """One line for an exception: ours keep their message and hint (a model server's hint
    names its log on the grader's host: the operator's, kept in the traceback), others
    their type."""
    if isinstance(err, ModelServerError):
        return str(err)
    if isinstance(err, VtbenchError):
        return err.one_line()
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[-1]}" if text else type(err).__name__


def known_infrastructure(err: BaseException) -> str | None:
    """The infrastructure condition ``err`` (or an exception it came from) shows, if any."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        for kind, cause in _KNOWN:
            if isinstance(current, kind):
                return cause
        if isinstance(current, OSError) and current.errno in _DISK_FULL:
            return "disk_full"
        current = current.__cause__ or current.__context__
    return None


def judge(err: BaseException, control: Callable[[], None]) -> Blame:
    """The candidate's failure unless a known condition or a failed ``control`` shows
    the grader's."""
    cause = known_infrastructure(err)
    if cause is not None:
        return Blame("grader", cause, describe(err))
    started = time.monotonic()
    try:
        control()
    except Exception as control_err:  # the initial system fails too: the grader is broken
        log.exception("the control evaluation failed after a candidate's failure")
        return Blame("grader", "control_failed",
                     f"the initial system failed too: {describe(control_err)}")
    return Blame("candidate", "control_passed",
                 f"the initial system loaded and answered in "
                 f"{time.monotonic() - started:.1f}s")


def initial_system_control(prepared: "PreparedTask", sandbox: str,
                           cores: list[int] | None = None) -> Callable[[], None]:
    """Evaluate the initial system on the first validation item (on ``cores``, the
    episode's), raising if it fails."""

    def control() -> None:
        from vtbench.evaluation import evaluate
        from vtbench.tasks.store import load_split

        items = load_split(prepared.task, "val")[:1]
        result = evaluate(prepared.task, prepared.initial_model, "val", None, items=items,
                          sandbox=sandbox, timeout=CONTROL_TIMEOUT_SECONDS, standby=False,
                          cores=cores)
        if result.error:
            raise GraderUnavailable(f"the initial system's control run failed: {result.error}")

    return control
