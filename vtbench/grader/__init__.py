"""The isolated grader: budget ledger, candidate intake, result cache and the service.

Its public names load on first use, so that a client importing the wire contract
(:mod:`vtbench.grader.api`) loads neither the ledger nor SQLite."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vtbench.grader.ledger import (
        Episode,
        EpisodeBudgets,
        Ledger,
        RecoveryReport,
        Remaining,
        Submission,
        Validation,
    )

__all__ = [
    "Episode",
    "EpisodeBudgets",
    "Ledger",
    "RecoveryReport",
    "Remaining",
    "Submission",
    "Validation",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from vtbench.grader import ledger

        return getattr(ledger, name)
    raise AttributeError(f"module 'vtbench.grader' has no attribute {name!r}")
