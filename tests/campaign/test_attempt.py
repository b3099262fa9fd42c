"""One attempt on a host: what its slot resumes or sets aside, how its end is classified,
and the two process guarantees a ``kill -9`` of the campaign relies on (real processes)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Literal

import pytest

from vtbench.campaign.attempt import (
    AttemptResult,
    SlotHeld,
    classify,
    hold,
    last_error,
    prepare_slot,
)
from vtbench.episode.record import EpisodeRecord


def episode_folder(slot: Path, name: str, status: Literal["running", "finished", "failed"] | None,
                   submitted: bool = False) -> Path:
    folder = slot / name
    (folder / "workspace").mkdir(parents=True)
    if status is not None:
        record = EpisodeRecord(episode_id=name, task="arith", agent="noop", seed=0,
                               budget_minutes=3, started_at="2026-01-01T00:00:00+00:00",
                               status=status, submitted=submitted, gain=0.0 if status else None,
                               stop_reason="agent_exited")
        (folder / "episode.json").write_text(record.model_dump_json())
    return folder


def test_a_slot_resumes_its_running_episode_and_sets_the_rest_aside(tmp_path: Path) -> None:
    slot, aside = tmp_path / "slot", tmp_path / "aside"
    episode_folder(slot, "a-1-failed", "failed")
    episode_folder(slot, "a-2-half-made", None)
    running = episode_folder(slot, "a-3-running", "running")
    assert prepare_slot(slot, aside) == running
    assert sorted(p.name for p in aside.iterdir()) == ["a-1-failed", "a-2-half-made"]
    assert [p.name for p in slot.iterdir()] == ["a-3-running"]


def test_a_slot_with_nothing_to_resume_starts_afresh(tmp_path: Path) -> None:
    slot, aside = tmp_path / "slot", tmp_path / "aside"
    episode_folder(slot, "a-1", "failed")
    assert prepare_slot(slot, aside) is None
    episode_folder(slot, "a-1", "failed")
    assert prepare_slot(slot, aside) is None
    assert sorted(p.name for p in aside.iterdir()) == ["a-1", "a-1+"]
    assert prepare_slot(tmp_path / "new-slot", aside) is None


def test_an_ended_attempt_is_a_result_or_a_failure_of_the_infrastructure(tmp_path: Path) -> None:
    slot = tmp_path / "episodes" / "k"
    episode_folder(slot, "with-submission", "finished", submitted=True)
    episode_folder(slot, "without", "finished")

    def ended(code: int | None, folder: str | None, error: str | None = None) -> AttemptResult:
        return AttemptResult(returncode=code, seconds=3.0, error=error, episode_folder=folder,
                             node="here")

    done = classify(ended(0, "with-submission"), slot, tmp_path)
    assert (done.state, done.folder, done.reason) == (
        "finished", "episodes/k/with-submission", None)
    no_submission = classify(ended(0, "without"), slot, tmp_path)
    assert no_submission.state == "failed_agent"
    assert no_submission.reason == "no submission: agent_exited"
    crashed = classify(ended(1, None, "task 'x' is not prepared"), slot, tmp_path)
    assert (crashed.state, crashed.reason) == ("failed_infra", "task 'x' is not prepared")
    killed = classify(ended(-9, None), slot, tmp_path)
    assert killed.reason == "the runner was killed by SIGKILL"
    lost = classify(ended(None, None, "the Ray task failed (NodeDiedError)"), slot, tmp_path)
    assert lost.state == "failed_infra" and "NodeDiedError" in (lost.reason or "")


def test_the_runners_error_line_is_its_reason(tmp_path: Path) -> None:
    log = tmp_path / "attempt-1.log"
    log.write_text("[12:00] workspace ready\nerror: the grader did not start (see x)\n")
    assert last_error(log) == "the grader did not start (see x)"
    log.write_text("Traceback (most recent call last):\n  File x\nKeyError: 'token'\n\n")
    assert last_error(log) == "KeyError: 'token'"
    assert last_error(tmp_path / "missing.log") is None


def test_the_slot_stays_held_while_a_runner_that_inherited_its_lock_lives(
        tmp_path: Path) -> None:
    lock = tmp_path / "slot.lock"
    fd = hold(lock)
    runner = subprocess.Popen(["sleep", "60"], pass_fds=(fd,))
    os.close(fd)
    try:
        with pytest.raises(SlotHeld):
            hold(lock, seconds=0.5)
    finally:
        runner.kill()
        runner.wait()
    os.close(hold(lock, seconds=5))


SPAWNER = """
import subprocess, sys
from vtbench.campaign.attempt import die_with_parent
child = subprocess.Popen(["sleep", "60"], preexec_fn=die_with_parent(), start_new_session=True)
print(child.pid, flush=True)
child.wait()
"""


def test_a_runner_dies_with_the_campaign_process_that_started_it() -> None:
    campaign = subprocess.Popen([sys.executable, "-c", SPAWNER], stdout=subprocess.PIPE,
                                text=True)
    assert campaign.stdout is not None
    child = int(campaign.stdout.readline())
    os.kill(campaign.pid, signal.SIGKILL)
    campaign.wait()
    deadline = time.monotonic() + 10
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for init to reap it does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"
