"""An agent that makes its own runner die after a poor validation, in a real campaign on the
local executor (``retries = 1``): its episode is resumed, then closed with what the
grader's ledger holds, and the report counts it with its reason. Whatever kills the runner
(a crash the agent provokes, a kill), the test plays that part: when the agent says its
validation was poor, the runner is killed with SIGKILL."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.campaign.episodes.conftest import rows, vtbench
from vtbench.campaign import CampaignFolder
from vtbench.campaign.attempt import episode_folders, record_of

pytestmark = pytest.mark.slow

POISON = "poor validation: ending my episode"
AGENT = ("vtbench validate --model models/initial --json > val.json; "
         "if python -c 'import json, sys; sys.exit(json.load(open(\"val.json\"))[\"score\"] "
         f">= 0.99)'; then echo '{POISON}'; sleep 600; fi; vtbench submit --model models/initial")
CAMPAIGN = """
tasks = ["{task}"]
seeds = [0]
retries = 1
[[agents]]
name = "command:{agent}"
label = "poisoner"
[budget]
budget_minutes = 4
"""
KEY = "arith-poisoner-s0"


def runner_of(slot: Path) -> int | None:
    """The live ``vtbench run`` process of ``slot``, if any."""
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if argv[1:4] == ["-m", "vtbench", "run"] and str(slot) in argv and state != "Z":
            return int(proc.name)
    return None


def poisoned(slot: Path) -> int:
    """How many times the agent said its validation was poor (its log is appended to)."""
    return sum(log.read_text(errors="replace").count(POISON) for log in slot.glob("*/agent.log"))


def kill_runner_whenever_poisoned(campaign: subprocess.Popen[bytes], slot: Path,
                                  timeout: float = 900) -> int:
    """Until the campaign ends: SIGKILL the runner each time the agent poisons; how many."""
    kills, deadline = 0, time.monotonic() + timeout
    while campaign.poll() is None and time.monotonic() < deadline:
        runner = runner_of(slot)
        if runner is not None and poisoned(slot) > kills:
            os.kill(runner, signal.SIGKILL)
            kills += 1
        time.sleep(0.5)
    if campaign.poll() is None:
        campaign.kill()
        raise AssertionError(f"the campaign did not end in {timeout:.0f} s")
    return kills


def test_an_agent_that_kills_its_runner_after_a_poor_validation_is_scored_and_reported(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    file, out = tmp_path / "campaign.toml", tmp_path / "out"
    file.write_text(CAMPAIGN.format(task=prepared_arith, agent=AGENT.replace('"', '\\"')))
    slot = CampaignFolder(out).slot(KEY)
    with (tmp_path / "campaign.log").open("w") as log:
        campaign = subprocess.Popen([sys.executable, "-m", "vtbench", "campaign", "run",
                                     str(file), "--out", str(out)], stdout=log, stderr=log)
    kills = kill_runner_whenever_poisoned(campaign, slot)
    ran = (tmp_path / "campaign.log").read_text()
    assert kills == 2, ran[-3000:]  # the first attempt, then its resumed episode
    assert campaign.returncode == 0, ran[-3000:]

    row = rows(out)[KEY]
    why = "closed after its runner failed once the agent had started: the runner was " \
          "killed by SIGKILL"
    assert (row.state, row.attempts, row.gain) == ("failed_agent", 3, 0.0)
    assert row.reason == f"no submission: {why}"
    (folder,) = episode_folders(slot)  # resumed in its folder, never started afresh
    assert row.folder == f"episodes/{KEY}/{folder.name}"
    assert not CampaignFolder(out).set_aside(KEY).exists()
    record = record_of(folder)
    assert record is not None and record.agent_started_at is not None
    assert (record.status, record.stop_reason, record.submitted) == (
        "finished", "runner_failed", False)
    assert record.runner_failure == "the runner was killed by SIGKILL"
    assert record.final_test == record.initial_test and record.gain == 0.0
    assert record.validations and record.validations[0].score is not None

    report = tmp_path / "report.md"
    shown = vtbench("campaign", "report", str(out), "--markdown", str(report))
    assert shown.returncode == 0, shown.stderr[-2000:]
    text = report.read_text()
    assert text.startswith("# VibeTraining-Bench report\n\n1 episodes")
    shown_name = re.sub(r"([\\`*_\[\]<>|!~&$])", r"\\\1", folder.name)  # Markdown-escaped
    episode_row = next(line for line in text.splitlines() if line.startswith(f"| {shown_name}"))
    assert "| runner\\_failed: the runner was killed by SIGKILL |" in episode_row
    assert "| +0.000 |" in episode_row
