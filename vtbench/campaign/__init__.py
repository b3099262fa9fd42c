"""Campaigns: many episodes (agents × tasks × seeds) from one file, run, resumed and
reported together.

A campaign file (:mod:`~vtbench.campaign.plan`) resolves to a plan; the campaign folder
(:mod:`~vtbench.campaign.folder`) holds it and a ledger of episode states
(:mod:`~vtbench.campaign.ledger`); an executor (:mod:`~vtbench.campaign.executor`: local or
Ray) runs each episode's attempts (:mod:`~vtbench.campaign.attempt`) while
:mod:`~vtbench.campaign.runner` records them and :mod:`~vtbench.campaign.progress` shows
them. Importing this package imports no Ray.
"""

from vtbench.campaign.errors import CampaignBusy, LedgerError, PlanError
from vtbench.campaign.executor import EXECUTORS, Executor, get_executor
from vtbench.campaign.folder import CampaignFolder
from vtbench.campaign.ledger import DONE, EpisodeState, Ledger, Result
from vtbench.campaign.plan import CampaignFile, Plan, PlannedEpisode, load_plan
from vtbench.campaign.runner import dispatch, ledger_rows, run_campaign

__all__ = [
    "DONE", "EXECUTORS", "CampaignBusy", "CampaignFile", "CampaignFolder", "EpisodeState",
    "Executor", "Ledger", "LedgerError", "Plan", "PlanError", "PlannedEpisode", "Result",
    "dispatch", "get_executor", "ledger_rows", "load_plan", "run_campaign",
]
