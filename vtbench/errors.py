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


class MissingDependency(VtbenchError):
    """An optional package is needed; the hint names the pip install."""
