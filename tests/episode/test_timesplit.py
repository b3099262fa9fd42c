"""The runner's view of training: a program of the workspace's trainer/ running in the tree."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from vtbench.episode.processes import Places, ProcessWatch, runs_trainer
from vtbench.episode.record import BudgetSpent
from vtbench.episode.timesplit import TimeSplit, close


def watch(root: int, tmp_path: Path) -> ProcessWatch:
    return ProcessWatch(root, Places(tmp_path, []))


@pytest.mark.parametrize("argv", [
    ["python", "trainer/train.py", "--out", "models/a"],
    ["/usr/bin/python3", "/workspace/trainer/train.py"],
    ["bash", "./trainer/launch.sh"],
    ["/workspace/trainer/run.sh"],
])
def test_a_program_of_the_trainer_folder_is_training(argv: list[str]) -> None:
    assert runs_trainer(argv)


@pytest.mark.parametrize("argv", [
    ["python", "harness/run.py"],
    ["python", "/tmp/trainer/train.py"],
    ["ls", "trainer"],
    ["python", "data/trainer/clean.py"],
])
def test_anything_else_is_not(argv: list[str]) -> None:
    assert not runs_trainer(argv)


def sleeping_trainer(seconds: float) -> list[str]:
    return [sys.executable, "-c", f"import time; time.sleep({seconds})", "trainer/train.py"]


def test_a_trainer_grandchild_is_seen_while_it_runs_and_not_after(tmp_path: Path) -> None:
    inner = " ".join(f"'{part}'" for part in sleeping_trainer(1.5))
    shell = subprocess.Popen(["sh", "-c", f"{inner}; sleep 1.5"], cwd=tmp_path)
    watcher = watch(shell.pid, tmp_path)
    try:
        time.sleep(0.5)
        assert watcher.sample(time.time())
        time.sleep(1.5)
        assert not watcher.sample(time.time())
    finally:
        shell.kill()
        shell.wait()


def test_two_parallel_trainings_count_as_the_wall_time_they_took(tmp_path: Path) -> None:
    script = " & ".join(" ".join(f"'{p}'" for p in sleeping_trainer(2)) for _ in range(2))
    shell = subprocess.Popen(["sh", "-c", f"{script}; wait"], cwd=tmp_path)
    spent = BudgetSpent()
    split = TimeSplit(watch(shell.pid, tmp_path), spent)
    while shell.poll() is None:
        time.sleep(0.2)
        split.tick(grading=False)
    close(spent, wall_seconds=spent.training_seconds + spent.agent_seconds)
    assert 1.6 <= spent.training_seconds <= 2.8
    assert spent.runner_seconds == spent.grading_seconds == 0.0
