"""The campaign's loop with the local executor and real ``vtbench run`` processes whose
runner fails (the task is not prepared: a ``VtbenchError`` on the runner's side), the
folder's lock against a second real ``campaign run``, and the host's capacity."""

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.campaign.conftest import episode_folder, write_campaign
from vtbench.campaign import CampaignBusy, CampaignFolder, Ledger, dispatch, load_plan
from vtbench.campaign.attempt import AttemptResult
from vtbench.campaign.local import Capacity, LocalExecutor
from vtbench.campaign.plan import PlannedEpisode
from vtbench.campaign.progress import CampaignProgress
from vtbench.campaign.runner import attempt, attempts_allowed, record


def dispatch_rounds(tmp_path: Path, text: str, between: list[Callable[[Ledger], object]]
                    ) -> tuple[CampaignFolder, Ledger, list[object]]:
    """Dispatch the campaign of ``text`` once, then again after each of ``between``."""
    plan = load_plan(write_campaign(tmp_path, text))
    folder = CampaignFolder(tmp_path / "out")
    folder.root.mkdir()
    ledger = Ledger(folder.ledger)
    ledger.add([e.key for e in plan.episodes])
    executor, returned = LocalExecutor(), []
    with CampaignProgress(folder.log, "test", live=False) as progress:
        try:
            dispatch(plan, folder, ledger, executor, progress)
            for step in between:
                returned.append(step(ledger))
                dispatch(plan, folder, ledger, executor, progress)
        finally:
            executor.close()
    return folder, ledger, returned


def test_a_failing_runner_is_tried_again_up_to_the_retries_and_each_reason_is_kept(
        tmp_path: Path, minimal_task: Path) -> None:
    folder, ledger, _ = dispatch_rounds(
        tmp_path, f'agents = [{{name = "noop"}}]\ntasks = ["{minimal_task}"]\nseeds = [0, 1]\n'
                  'retries = 1\nconcurrency = 2\n[budget]\nbudget_minutes = 1\n', [])
    for row in ledger.rows():
        assert (row.state, row.attempts) == ("failed_infra", 2)
        assert row.reason == "task 'mini' is not prepared (run: vtbench prepare --task mini)"
        assert [state for _, state, _ in ledger.events(row.key)] == [
            "running", "pending", "running", "failed_infra"]
        slot = folder.slot(row.key)
        assert sorted(p.name for p in slot.iterdir() if p.suffix != ".lock") == [
            "attempt-1.json", "attempt-1.log", "attempt-2.json", "attempt-2.log"]
    log = folder.log.read_text()
    assert log.count("tried again") == 2 and log.count("out of attempts") == 2


def test_a_runner_that_fails_after_its_agent_started_is_resumed_then_closed(
        tmp_path: Path, minimal_task: Path) -> None:
    """``retries = 1``: two attempts that resume the episode, then one that closes it with
    the last failure as its reason; the episode never ends failed_infra for it, and a dead
    campaign's interrupted attempt counts the same way."""
    plan = load_plan(write_campaign(tmp_path, 'agents = [{name = "noop"}]\n'
                                    f'tasks = ["{minimal_task}"]\nseeds = [0, 1]\n'
                                    'retries = 1\n'))
    folder = CampaignFolder(tmp_path / "out")
    folder.root.mkdir()
    ledger = Ledger(folder.ledger)
    ledger.add([e.key for e in plan.episodes])
    started, other = plan.episodes
    episode_folder(folder.slot(started.key), "ep", "running", agent_started=True)
    killed = AttemptResult(-9, 5.0, None, None, "here")
    with CampaignProgress(folder.log, "test", live=False) as progress:
        for number in (1, 2):
            assert ledger.claim(started.key) == number
            made = attempt(plan, folder, ledger, started, number)
            assert made.resumes and made.close is None
            assert record(plan, folder, ledger, started.key, killed, progress) == "pending"
        assert ledger.claim(started.key) == 3
        closing = attempt(plan, folder, ledger, started, 3)
        assert closing.close == "the runner was killed by SIGKILL"
        for number in (1, 2):
            ledger.claim(other.key)
            assert not attempt(plan, folder, ledger, other, number).resumes
            state = record(plan, folder, ledger, other.key, killed, progress)
        assert state == "failed_infra"
    ledger.db.close()
    again = Ledger(folder.ledger)
    assert again.recover(lambda key: attempts_allowed(plan, folder, again, key)) == {
        started.key: "failed_infra"}
    assert again.row(started.key).attempts == 3
    assert "its agent had started: resumed" in folder.log.read_text()


def test_a_second_campaign_run_on_a_held_folder_is_refused(
        tmp_path: Path, minimal_task: Path) -> None:
    file = write_campaign(tmp_path, 'agents = [{name = "noop"}]\n'
                          f'tasks = ["{minimal_task}"]\nseeds = [0]\n')
    folder = CampaignFolder(tmp_path / "out")
    folder.write_plan(load_plan(file))
    with folder.locked():
        with pytest.raises(CampaignBusy), folder.locked():
            pass
        second = subprocess.run([sys.executable, "-m", "vtbench", "campaign", "run", str(file),
                                 "--out", str(folder.root)], capture_output=True, text=True,
                                timeout=120)
    assert second.returncode == 2
    assert second.stderr.strip() == (f"error: {folder.root} is being run by pid "
                                     f"{os.getpid()} (wait for it, or stop "
                                     "that campaign first)")
    assert not folder.ledger.exists()


def episode(cpus: int = 1, gpus: int = 0, memory_gb: float = 4.0) -> PlannedEpisode:
    return PlannedEpisode(key=f"k{cpus}{gpus}{memory_gb}", agent="noop", label="noop",
                          model=None, reasoning_effort=None, gateway_config=None, task="/t",
                          task_id="t", seed=0, budget_minutes=1.0, cpus=cpus, gpus=gpus,
                          memory_gb=memory_gb)


def test_episodes_run_side_by_side_only_as_far_as_the_hosts_resources_go() -> None:
    host = Capacity(cpus=2, gpus=1, memory_gb=10.0)
    one = episode()
    assert host.fits([], one) and host.fits([one], one) and not host.fits([one, one], one)
    assert not host.fits([episode(cpus=1, memory_gb=7)], episode(cpus=1, memory_gb=4))
    assert host.fits([], episode(gpus=1)) and not host.fits([episode(gpus=1)], episode(gpus=1))
    assert not host.fits([], episode(cpus=3))


def test_shared_episodes_may_outnumber_the_cores_but_each_must_fit_alone() -> None:
    host = Capacity(cpus=2, gpus=0, memory_gb=100.0)
    one = episode()
    assert not host.fits([one, one], one)
    assert host.fits([one, one], one, shared=True)
    assert not host.fits([], episode(cpus=3), shared=True)


def test_a_reopened_failed_episode_gets_one_more_real_attempt_beside_its_first(
        tmp_path: Path, minimal_task: Path) -> None:
    """What ``campaign run --retry-failed`` does before dispatching: the runner fails for
    real both times (the task is not prepared)."""
    folder, ledger, reopened = dispatch_rounds(
        tmp_path, f'agents = [{{name = "noop"}}]\ntasks = ["{minimal_task}"]\nseeds = [0]\n'
                  'retries = 0\n[budget]\nbudget_minutes = 1\n', [Ledger.reopen_failed])
    row = ledger.rows()[0]
    assert reopened == [[row.key]] and (row.state, row.attempts) == ("failed_infra", 2)
    assert [state for _, state, _ in ledger.events(row.key)] == [
        "running", "failed_infra", "pending", "running", "failed_infra"]
    names = sorted(p.name for p in folder.slot(row.key).iterdir())
    assert names == ["attempt-1.json", "attempt-1.log", "attempt-2.json", "attempt-2.log",
                     "slot.lock"], names
