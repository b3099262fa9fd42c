"""The error family whose messages reach the user as one line.

Every expected failure raises a subclass of :class:`VtbenchError`; the CLI prints its
message (and its ``hint``, the fix) on one line and exits with its ``exit_code``.
Anything else is a bug and keeps its traceback.
"""


class VtbenchError(Exception):
    """An expected failure; ``str(err)`` is what the user sees."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint

    def one_line(self) -> str:
        return f"{self}" + (f" ({self.hint})" if self.hint else "")


class SpecError(VtbenchError):
    """A task spec (task.toml) or another config file is invalid."""

    exit_code = 2


class TaskNotFound(VtbenchError):
    exit_code = 2


class NotPrepared(VtbenchError):
    """A task needs `vtbench prepare` first."""


class CheckpointError(VtbenchError):
    """A model directory is missing, corrupt or unsafe to load."""


class HarnessError(VtbenchError):
    """The harness process failed, timed out or wrote malformed output."""


class ScorerError(VtbenchError):
    """A task's trusted scorer raised on a well-formed output: the grader's failure."""


class MissingDependency(VtbenchError):
    """An optional package is needed; the hint names the pip install."""


class GraderError(VtbenchError):
    """The grader refused or could not serve a request."""


class EpisodeNotFound(GraderError):
    """No episode with that id (or token) is known to the grader."""


class BudgetExhausted(GraderError):
    """The episode has no validation credits or grader compute seconds left."""


class EpisodeClosed(BudgetExhausted):
    """The episode is closed: it takes no more validations, submissions or intakes."""


class AlreadySubmitted(GraderError):
    """The episode's one submission has already been made."""


class LedgerStateError(GraderError):
    """A validation was asked to move to a state its current state does not allow."""


class LedgerVersionError(GraderError):
    """The ledger was written by a newer vtbench than this one: it is never read backward."""


class CandidateRefused(GraderError):
    """A candidate directory failed intake; the message names the offending file."""


class Unauthorized(GraderError):
    """A grader request's token is missing, unknown or not allowed on that route."""


class NotFound(GraderError):
    """A grader request names something the caller cannot see (or that does not exist)."""


class GraderUnavailable(GraderError):
    """The grader failed for a reason of its own; the request can be retried."""


class UnknownCandidate(NotFound):
    """A request names a candidate folder that is not in the episode's workspace."""


class MergeRefused(GraderError):
    """A merge request cannot be carried out as asked (bad paths or options); the message
    names what to change."""


class MergeOutputExists(MergeRefused):
    """A merge's output folder already exists, or another merge is writing it."""


class MergeFailed(MergeRefused):
    """The merge engine could not merge these parents (e.g. different shapes), or its
    output failed the checkpoint checks."""


class SnapshotRefused(VtbenchError):
    """The workspace cannot be snapshotted as it is (the message names what to change)."""


class AnalysisError(VtbenchError):
    """An episode record or its workspace history cannot be read for analysis."""


class GatewayError(VtbenchError):
    """The LLM gateway cannot start or serve (bad config, missing key, bad address)."""


class SandboxError(VtbenchError):
    """A sandbox cannot be started as specified (missing mount source, socket, bad spec)."""


class SandboxUnavailable(SandboxError):
    """A sandbox backend cannot run on this host; the hint names the fix."""


class ModelServerError(VtbenchError):
    """The model server could not start, died, or was asked for an unknown backend."""
