"""The executor boundary: where a campaign's episodes run, picked by name.

An executor starts attempts (:class:`vtbench.campaign.attempt.Attempt`) and reports how
their runner processes ended; the campaign (:mod:`vtbench.campaign.runner`) decides what
that means for the ledger. ``local`` runs them on this host; ``ray`` on a Ray cluster
(imported only when asked for: ``ray`` is the optional ``cluster`` extra).
"""

from collections.abc import Sequence
from typing import Protocol

from vtbench.campaign.attempt import Attempt, AttemptResult
from vtbench.campaign.folder import CampaignFolder
from vtbench.campaign.plan import Plan, PlannedEpisode
from vtbench.campaign.progress import CampaignProgress
from vtbench.errors import VtbenchError

EXECUTORS = ("local", "ray")


class UnknownExecutor(VtbenchError):
    exit_code = 2


class Executor(Protocol):
    @property
    def name(self) -> str: ...

    def check(self, plan: Plan) -> None:
        """Refuse, as one line, a plan this executor could never run (before anything of
        the campaign is written)."""
        ...

    def ready(self, plan: Plan, tasks: Sequence[str], progress: CampaignProgress) -> None:
        """Make ready, or check, what the episodes of ``tasks`` need (prepared tasks)."""
        ...

    def can_start(self, running: Sequence[PlannedEpisode], episode: PlannedEpisode) -> bool:
        """Whether ``episode`` fits beside the ``running`` ones now."""
        ...

    def start(self, attempt: Attempt, folder: CampaignFolder) -> None: ...

    def poll(self, timeout: float) -> list[tuple[str, AttemptResult]]:
        """Attempts that ended (by episode key), waiting up to ``timeout`` seconds for one;
        an ended attempt's episode folder is in its slot of ``folder``."""
        ...

    def close(self) -> None:
        """Stop every attempt still running (its episode stays resumable) and let go of
        what the executor holds."""
        ...


def get_executor(name: str, address: str | None = None) -> Executor:
    if name == "local":
        from vtbench.campaign.local import LocalExecutor

        return LocalExecutor()
    if name == "ray":
        from vtbench.campaign.ray_executor import RayExecutor

        return RayExecutor(address)
    raise UnknownExecutor(f"unknown executor {name!r}", hint=f"valid: {', '.join(EXECUTORS)}")
