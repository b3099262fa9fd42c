"""kill -9 of the runner mid-episode, then ``vtbench run --resume`` finishes the episode."""

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vtbench.episode.record import EpisodeRecord
from vtbench.episode.runner import RunOptions, run_episode
from vtbench.tasks import find_task
from vtbench.tasks.store import load_split

pytestmark = pytest.mark.slow


def killed_mid_episode(task: Path, agent: str, out: Path, budget_minutes: float = 3,
                       running_seconds: float = 2) -> Path:
    """Start ``vtbench run``, kill its process group once the agent has run for
    ``running_seconds``; the episode's folder."""
    runner = subprocess.Popen(
        [sys.executable, "-m", "vtbench", "run", "--task", str(task), "--agent", agent,
         "--out", str(out), "--budget-minutes", str(budget_minutes)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while not list(out.glob("*/agent.log")) and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(running_seconds)
    os.killpg(runner.pid, signal.SIGKILL)
    runner.wait()
    folder = next(out.iterdir())
    assert '"status": "running"' in (folder / "episode.json").read_text()
    return folder


def test_a_killed_runner_is_resumed_and_the_episode_finishes(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    agent = "command:sleep 15; vtbench submit --model models/initial"
    folder = killed_mid_episode(prepared_arith, agent, tmp_path)

    record, path = run_episode(RunOptions(task="", agent=""), resume=folder)
    assert record.status == "finished" and record.submitted
    assert record.gain == 0.0 and path == folder / "episode.json"


def test_what_the_agent_wrote_is_not_refused_as_a_leak_when_it_resumes(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    """A generator can draw a test item by chance (arith's reference synthesises problems
    of the test's template): the resumed audit covers the sandbox, not the agent's work."""
    question = load_split(find_task(str(prepared_arith)), "test")[0]["input"]["question"]
    agent = (f"command:printf '%s' {shlex.quote(question)} > data/drawn.txt; sleep 15; "
             "vtbench submit --model models/initial")
    folder = killed_mid_episode(prepared_arith, agent, tmp_path)

    record, _ = run_episode(RunOptions(task="", agent=""), resume=folder)
    assert record.status == "finished" and record.submitted


def test_the_time_a_dead_runner_waits_for_its_resume_is_not_taken_from_the_budget(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    """Three minutes of budget; the runner dies 7 s into the agent's run and is resumed two
    minutes later. Charged by the wall clock the agent would have under a minute left and
    miss its submission at 45 s; charged what the runners measured (saved every 5 s) it
    has more than two."""
    agent = "command:sleep 45; vtbench submit --model models/initial"
    folder = killed_mid_episode(prepared_arith, agent, tmp_path, running_seconds=7)
    saved = EpisodeRecord.model_validate_json((folder / "episode.json").read_text())
    assert saved.spent.agent_seconds > 0
    time.sleep(120)

    record, _ = run_episode(RunOptions(task="", agent=""), resume=folder)
    assert record.status == "finished" and record.submitted
    assert record.spent.unaccounted_seconds > 100
