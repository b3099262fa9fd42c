"""One attempt on a host: what its slot resumes or sets aside, how its end is classified,
and the two process guarantees a ``kill -9`` of the campaign relies on (real processes)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.campaign.conftest import episode_folder, write_campaign
from vtbench.campaign import load_plan
from vtbench.campaign.attempt import (
    Attempt,
    AttemptResult,
    EpisodeNotHere,
    Running,
    SlotHeld,
    classify,
    hold,
    last_error,
    prepare_slot,
    runner_command,
)


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


def test_a_slot_resumes_the_episode_whose_agent_started_whatever_its_record_says(
        tmp_path: Path) -> None:
    """A runner that failed after its agent started marks its record failed (or dies
    leaving it running): either way the next attempt continues that episode."""
    slot, aside = tmp_path / "slot", tmp_path / "aside"
    episode_folder(slot, "a-1-running-not-started", "running")
    started = episode_folder(slot, "a-2-failed-after-start", "failed", agent_started=True)
    assert prepare_slot(slot, aside) == started
    assert [p.name for p in aside.iterdir()] == ["a-1-running-not-started"]


def test_an_episode_whose_agent_started_is_never_started_afresh_elsewhere(
        tmp_path: Path, minimal_task: Path) -> None:
    """A Ray node's scratch slot does not hold the episode: the attempt refuses, so an agent
    that made its runner die gets no new episode in place of its poor one."""
    plan = load_plan(write_campaign(tmp_path, 'agents = [{name = "noop"}]\n'
                                    f'tasks = ["{minimal_task}"]\nseeds = [0]\n'))
    for attempt in (Attempt(plan.episodes[0], 2, "none", False, resumes=True),
                    Attempt(plan.episodes[0], 3, "none", False, close="killed")):
        with pytest.raises(EpisodeNotHere, match="whose agent started"):
            Running(attempt, tmp_path / f"slot-{attempt.number}", tmp_path / "aside", "here")
        assert [p.name for p in (tmp_path / f"slot-{attempt.number}").iterdir()] == [
            "slot.lock"]


def test_a_closing_attempt_resumes_its_episode_without_the_agent(
        tmp_path: Path, minimal_task: Path) -> None:
    plan = load_plan(write_campaign(tmp_path, 'agents = [{name = "noop"}]\n'
                                    f'tasks = ["{minimal_task}"]\nseeds = [0]\n'))
    closing = Attempt(plan.episodes[0], 3, "bwrap", False, resumes=True,
                      close="--x: the runner was killed by SIGKILL")
    argv = runner_command(closing, tmp_path / "slot", tmp_path / "slot" / "ep")
    assert argv[-3:] == ["--resume", str(tmp_path / "slot" / "ep"),
                         "--close=--x: the runner was killed by SIGKILL"]
    assert not any(arg.startswith("--close") for arg in runner_command(
        Attempt(plan.episodes[0], 2, "bwrap", False, resumes=True), tmp_path, tmp_path / "ep"))


def test_a_closed_episode_is_a_result_that_says_its_runner_failed(tmp_path: Path) -> None:
    slot = tmp_path / "episodes" / "k"
    episode_folder(slot, "closed-with", "finished", submitted=True, agent_started=True,
                   stop_reason="runner_failed")
    episode_folder(slot, "closed-without", "finished", agent_started=True,
                   stop_reason="runner_failed")
    why = ("closed after its runner failed once the agent had started: the runner was killed "
           "by SIGKILL")
    with_submission = classify(AttemptResult(0, 3.0, None, "closed-with", "here"), slot, tmp_path)
    assert (with_submission.state, with_submission.reason) == ("finished", why)
    without = classify(AttemptResult(0, 3.0, None, "closed-without", "here"), slot, tmp_path)
    assert (without.state, without.reason) == ("failed_agent", f"no submission: {why}")
    assert without.gain == 0.0 and without.folder == "episodes/k/closed-without"


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
from vtbench.processes import die_with_parent
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
