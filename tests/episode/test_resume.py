"""kill -9 of the runner mid-episode, then ``vtbench run --resume`` finishes the episode."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vtbench.episode.runner import RunOptions, run_episode

pytestmark = pytest.mark.slow


def test_a_killed_runner_is_resumed_and_the_episode_finishes(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    agent = "command:sleep 15; vtbench submit --model models/initial"
    runner = subprocess.Popen(
        [sys.executable, "-m", "vtbench", "run", "--task", str(prepared_arith), "--agent", agent,
         "--out", str(tmp_path), "--budget-minutes", "3"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob("*/agent.log")) and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(2)
    os.killpg(runner.pid, signal.SIGKILL)
    runner.wait()
    folder = next(tmp_path.iterdir())
    assert '"status": "running"' in (folder / "episode.json").read_text()

    record, path = run_episode(RunOptions(task="", agent=""), resume=folder)
    assert record.status == "finished" and record.submitted
    assert record.gain == 0.0 and path == folder / "episode.json"
