"""The CPU budget (``cpu_seconds``) holds for the whole sandboxed tree, not per process:
forked workers share it, read from the sandbox's cgroup, and the tree dies when it is used.

Each busy worker writes its own CPU time to a file every 50 ms, so the test measures what
the tree used from inside, independently of the clock the watchdog reads.
"""

import time
from pathlib import Path

import pytest

from tests.sandbox.helpers import PYTHON, python_code, python_spec
from vtbench.errors import SandboxUnavailable
from vtbench.sandbox import Limits, Mount, Sandbox, _cgroup, get_sandbox, prepare_writable

BUSY = """import os, time
path = '/out/' + str(os.getpid())
end = time.process_time() + float(os.environ.get('BUSY_SECONDS', 'inf'))
while time.process_time() < end:
    step = time.process_time() + 0.05
    while time.process_time() < step:
        pass
    with open(path + '.part', 'w') as out:
        out.write(str(time.process_time()))
    os.replace(path + '.part', path)
print('done', flush=True)
"""


def _workers(tmp_path: Path, count: int, seconds: float | None,
             cpu_seconds: int) -> tuple[list[str], list[Mount], Limits, Path]:
    """``count`` busy workers started in parallel by a shell (each for ``seconds`` of CPU,
    or for ever), the mounts they need and the limits, and the folder of their reports."""
    job = tmp_path / "job"
    job.mkdir()
    (job / "busy.py").write_text(BUSY)
    out = prepare_writable(tmp_path / "out")
    env = f"BUSY_SECONDS={seconds} " if seconds is not None else ""
    script = " ".join([f"{env}{PYTHON} /job/busy.py &"] * count) + " wait"
    mounts = [Mount(source=job, target=Path("/job")),
              Mount(source=out, target=Path("/out"), writable=True)]
    return ["/bin/sh", "-c", script], mounts, Limits(wall_seconds=60, cpu_seconds=cpu_seconds), out


def _reported(out: Path) -> list[float]:
    return [float(path.read_text()) for path in out.iterdir() if not path.name.endswith(".part")]


def test_four_busy_workers_share_one_cpu_budget_and_die_together(
        sandbox: Sandbox, tmp_path: Path) -> None:
    argv, mounts, limits, out = _workers(tmp_path, 4, None, cpu_seconds=2)
    result = sandbox.run(argv, python_spec(*mounts, limits=limits))
    used = _reported(out)
    assert len(used) == 4, "not every worker started: the attack was not mounted"
    assert result.killed_by_limit == "cpu_seconds" and not result.timed_out, result
    # Each alone would have run to its own 2 s: 8 CPU-seconds in all.
    assert sum(used) < 2.5, used


def test_a_tree_within_its_cpu_budget_finishes_normally(
        sandbox: Sandbox, tmp_path: Path) -> None:
    argv, mounts, limits, out = _workers(tmp_path, 3, 0.3, cpu_seconds=3)
    result = sandbox.run(argv, python_spec(*mounts, limits=limits))
    assert result.returncode == 0 and result.killed_by_limit is None, result
    assert result.stdout.split() == [b"done"] * 3
    assert sorted(used >= 0.3 for used in _reported(out)) == [True] * 3


def test_a_finished_run_reports_the_cpu_time_of_its_whole_tree(
        sandbox: Sandbox, tmp_path: Path) -> None:
    """Three workers' CPU time, each read from inside, is in the run's count (with their
    start-up and the shell's), though every one of them had exited when it was read."""
    argv, mounts, limits, out = _workers(tmp_path, 3, 0.3, cpu_seconds=30)
    result = sandbox.run(argv, python_spec(*mounts, limits=limits))
    used = sum(_reported(out))
    assert result.returncode == 0 and result.cpu_seconds is not None, result
    assert used <= result.cpu_seconds < used + 3.0, (used, result.cpu_seconds)


def test_a_running_sandbox_can_be_given_a_smaller_budget() -> None:
    process = get_sandbox("bwrap").start(python_code("while True: pass"),
                                         python_spec(limits=Limits(wall_seconds=60,
                                                                   cpu_seconds=3600)))
    time.sleep(0.3)
    assert process.limit_cpu(1)
    process.wait(timeout=50)
    assert process.killed_by_limit == "cpu_seconds"


def test_the_cpu_clock_of_a_sandboxed_process_is_its_trees() -> None:
    """What the docker backend reads for a container's tree, here read for a bwrap one."""
    process = get_sandbox("bwrap").start(python_code("while True: pass"),
                                         python_spec(limits=Limits(wall_seconds=60,
                                                                   cpu_seconds=60)))
    try:
        time.sleep(0.5)
        clock = _cgroup.clock_of(process.pid)
        assert clock is not None
        seen, tree = clock.seconds(), process.cpu_seconds
        assert seen is not None and tree is not None and 0 < seen <= tree < seen + 0.5
    finally:
        process.kill_tree(grace_seconds=0)


def test_without_cpu_time_per_sandbox_a_cpu_budget_is_refused_or_said_to_be_weak(
        monkeypatch: pytest.MonkeyPatch) -> None:
    host = _cgroup.support()
    without = _cgroup.Support(host.mode, host.controllers - {"cpuacct"},
                              tuple(p for p in host.parents if p[0] != "cpuacct"))
    monkeypatch.setattr(_cgroup, "support", lambda: without)
    monkeypatch.delenv(_cgroup.ALLOW_WEAK_ENV, raising=False)
    spec = python_spec(limits=Limits(wall_seconds=30, cpu_seconds=5))
    with pytest.raises(SandboxUnavailable) as refused:
        get_sandbox("bwrap").run(["/bin/true"], spec)
    assert "cpu_seconds" in str(refused.value)
    assert "--allow-weak-limits" in refused.value.one_line()
    assert "CPU time per process only" in without.describe()  # what the record gets
    monkeypatch.setenv(_cgroup.ALLOW_WEAK_ENV, "1")
    process = get_sandbox("bwrap").start(["/bin/sleep", "0.1"], spec)
    assert process.cpu_seconds is None and not process.limit_cpu(1)
    assert process.wait(timeout=20) == 0
