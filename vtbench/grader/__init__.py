"""The isolated grader: budget ledger, candidate intake, result cache (and, later, the service)."""

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
