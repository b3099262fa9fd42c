"""The campaign's errors: each reaches the user as one line naming the fix."""

from vtbench.errors import VtbenchError


class PlanError(VtbenchError):
    """The campaign file (or what it names) cannot be run as written; nothing was created."""

    exit_code = 2


class CampaignBusy(VtbenchError):
    """Another ``vtbench campaign run`` holds the campaign folder's lock."""

    exit_code = 2


class LedgerError(VtbenchError):
    """An episode was asked to move to a state its current state does not allow."""
