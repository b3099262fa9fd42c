"""Campaigns of real episodes share the episode tests' quickly prepared arith and its
grader (one per test module), and run ``vtbench campaign`` as real processes."""

import os
import subprocess
import sys
from pathlib import Path

from tests.episode.conftest import (  # noqa: F401  (fixtures, found by name)
    episode_home,
    grader,
    prepared_arith,
    private_store,
)
from vtbench.campaign import CampaignFolder, EpisodeState, Ledger

CAMPAIGN = """
agents = [{{name = "noop"}}, {{name = "command:true", label = "quitter"}}]
tasks = ["{task}"]
seeds = {seeds}
concurrency = 2
retries = 2
[budget]
budget_minutes = 3
"""


def campaign_file(folder: Path, task: Path, seeds: str = "[0, 1]") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "campaign.toml"
    path.write_text(CAMPAIGN.format(task=task, seeds=seeds))
    return path


def vtbench(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "vtbench", *args], capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ))


def rows(out: Path) -> dict[str, EpisodeState]:
    ledger = Ledger(CampaignFolder(out).ledger)
    try:
        return {row.key: row for row in ledger.rows()}
    finally:
        ledger.close()


def shape(found: dict[str, EpisodeState]) -> list[tuple[object, ...]]:
    """What two runs of one campaign must agree on, wherever they ran."""
    return sorted((row.key, row.state, row.attempts, row.gain, row.reason,
                   row.folder is not None and row.folder.startswith(f"episodes/{row.key}/"))
                  for row in found.values())
