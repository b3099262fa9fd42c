"""Resource attacks: outliving the deadline, process storms, memory hogs, huge writes."""

import time
import uuid
from pathlib import Path

import pytest

from tests.sandbox.helpers import (
    PYTHON,
    docker_containers,
    host_processes_matching,
    python_code,
    python_spec,
)
from vtbench.sandbox import Limits, Mount, Sandbox, prepare_writable

# Ignores SIGTERM, then double-forks a grandchild into a new session that also ignores
# SIGTERM: the classic way to outlive a parent that only kills its direct child.
ORPHAN_SCRIPT = """#!/bin/sh
trap "" TERM
if [ "$1" = child ]; then while :; do sleep 0.2; done; fi
( setsid /bin/sh /job/orphan.sh child {marker} & )
while :; do sleep 0.2; done
"""


def _job_with(tmp_path: Path, name: str, text: str) -> Mount:
    job = tmp_path / "job"
    job.mkdir(exist_ok=True)
    (job / name).write_text(text)
    (job / name).chmod(0o755)
    return Mount(source=job, target=Path("/job"))


def _wait_for(marker: str, timeout: float = 20) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := host_processes_matching(marker):
            return found
        time.sleep(0.05)
    return []


def _wait_for_command(marker: str, timeout: float = 20) -> bool:
    """Wait for the sandboxed ``/bin/sh`` itself (bwrap's own command line carries the
    marker too, from its first instruction on)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(line.split(" ", 1)[1].startswith("/bin/sh") for line in _wait_for(marker, 1)):
            return True
        time.sleep(0.05)
    return False


def test_the_wall_limit_kills_a_double_forked_child_that_ignores_sigterm(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    marker = f"vtbench-orphan-{uuid.uuid4().hex}"
    job = _job_with(tmp_path, "orphan.sh", ORPHAN_SCRIPT.format(marker=marker))
    spec = python_spec(job, limits=Limits(wall_seconds=1.5))
    process = sandbox.start(["/bin/sh", "/job/orphan.sh"], spec)
    process.grace_seconds = 0.5
    assert _wait_for(marker), "the orphan never started: the attack was not mounted"
    process.wait(timeout=20)
    assert process.timed_out and process.ending == "killed"
    assert process.killed_by_limit == "wall_seconds"
    time.sleep(0.2)
    assert host_processes_matching(marker) == []


def test_processes_left_behind_die_when_the_command_exits(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    marker = f"vtbench-leftover-{uuid.uuid4().hex}"
    script = f'( setsid /bin/sh -c "sleep 30; : {marker}" & ); sleep 0.3; echo left'
    result = sandbox.run(["/bin/sh", "-c", script], python_spec())
    assert result.stdout == b"left\n"
    time.sleep(0.2)
    assert host_processes_matching(marker) == []


def test_kill_tree_terminates_a_cooperative_command_gracefully(sandbox: Sandbox) -> None:
    process = sandbox.start(["/bin/sleep", "30"], python_spec())
    time.sleep(0.2)
    assert process.kill_tree(grace_seconds=5) == "terminated"
    assert process.kill_tree() == "terminated"  # idempotent: reports the same ending


def test_a_fork_storm_is_stopped_by_the_pids_limit(sandbox: Sandbox) -> None:
    code = (
        "import os, time\n"
        "started = 0\n"
        "for _ in range(2000):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(3)\n"
        "        os._exit(0)\n"
        "    started += 1\n"
        "print(started)\n"
        "raise SystemExit(3)\n"
    )
    spec = python_spec(limits=Limits(wall_seconds=30, pids=64))
    result = sandbox.run(python_code(code), spec)
    started = int(result.stdout)
    assert 0 < started < 64, result
    assert result.killed_by_limit in ("pids", None)  # None when only RLIMIT_NPROC applies
    assert result.wall_seconds < 10


def test_a_memory_hog_is_stopped_by_the_memory_limit(sandbox: Sandbox) -> None:
    code = (
        "held = []\n"
        "try:\n"
        "    for _ in range(32):\n"  # at most 1 GiB if the limit failed
        "        held.append(b'x' * (32 << 20))\n"
        "    print('survived', len(held) * 32)\n"
        "except MemoryError:\n"
        "    print('stopped at', len(held) * 32)\n"
    )
    result = sandbox.run(python_code(code), python_spec(limits=Limits(wall_seconds=30,
                                                                       memory_mb=256)))
    words = result.stdout.decode().split()
    assert words[:2] == ["stopped", "at"], result
    assert int(words[2]) <= 256


def test_the_file_size_limit_stops_a_huge_write(sandbox: Sandbox, tmp_path: Path) -> None:
    out = prepare_writable(tmp_path / "out")
    spec = python_spec(Mount(source=out, target=Path("/out"), writable=True),
                       limits=Limits(wall_seconds=30, file_size_mb=4))
    result = sandbox.run(["/bin/sh", "-c", "head -c 64M /dev/zero > /out/big"], spec)
    assert result.returncode != 0
    assert result.killed_by_limit == "file_size_mb"
    assert (out / "big").stat().st_size == 4 * 1024 * 1024


def test_filling_tmp_stops_at_its_size(sandbox: Sandbox) -> None:
    script = "for i in 1 2 3 4 5 6; do head -c 4M /dev/zero > /tmp/f$i || exit 9; done"
    spec = python_spec(limits=Limits(wall_seconds=30, tmp_mb=8))
    result = sandbox.run(["/bin/sh", "-c", script], spec)
    assert result.returncode == 9
    assert b"No space left" in result.stderr


def test_output_beyond_the_cap_is_cut(sandbox: Sandbox) -> None:
    result = sandbox.run(["/bin/sh", "-c", "head -c 3M /dev/zero"], python_spec(),
                         max_output_bytes=1 << 20)
    assert len(result.stdout) == 1 << 20 and result.output_truncated


def test_without_cgroups_the_pids_limit_falls_back_to_rlimit_nproc(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vtbench.sandbox import _cgroup

    if sandbox.name != "bwrap":
        pytest.skip("bwrap's own cgroups: Docker always limits pids with its cgroup")
    monkeypatch.setattr(_cgroup, "create", lambda *limits, **named: _cgroup.CgroupSet())
    monkeypatch.setenv(_cgroup.ALLOW_WEAK_ENV, "1")
    code = (
        "import os, time\n"
        "started = 0\n"
        "for _ in range(2000):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(3)\n"
        "        os._exit(0)\n"
        "    started += 1\n"
        "print(started)\n"
    )
    result = sandbox.run(python_code(code), python_spec(limits=Limits(wall_seconds=30, pids=64)))
    assert 0 < int(result.stdout) < 64, result


def test_the_cpu_limit_stops_a_busy_loop(sandbox: Sandbox) -> None:
    spec = python_spec(limits=Limits(wall_seconds=30, cpu_seconds=1))
    result = sandbox.run(python_code("while True: pass"), spec)
    assert result.killed_by_limit == "cpu_seconds", result
    assert not result.timed_out


def test_the_sandbox_dies_when_its_parent_is_killed(sandbox: Sandbox, tmp_path: Path) -> None:
    token = uuid.uuid4().hex
    marker = f"vtbench-parent-{token}"  # assembled in the runner: not in its command line
    parent = (
        "import sys, time\n"
        "from vtbench.sandbox import SandboxSpec, get_sandbox\n"
        "marker = 'vtbench-parent-' + sys.argv[1]\n"
        f"get_sandbox({sandbox.name!r}).start(['/bin/sh', '-c', 'sleep 120; : ' + marker],"
        " SandboxSpec())\n"
        "print('started', flush=True)\n"
        "time.sleep(60)\n"
    )
    import subprocess
    import sys

    runner = subprocess.Popen([sys.executable, "-c", parent, token], stdout=subprocess.PIPE)
    try:
        assert runner.stdout is not None and runner.stdout.readline() == b"started\n"
        assert _wait_for_command(marker), "the sandboxed sleeper never started"
    finally:
        runner.kill()  # SIGKILL: the runner gets no chance to clean up
        runner.wait()
    deadline = time.monotonic() + 30
    while host_processes_matching(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_processes_matching(marker) == []
    if sandbox.name == "docker":
        while docker_containers() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert docker_containers() == []


def test_parallel_sandboxes_run_independently(sandbox: Sandbox) -> None:
    from concurrent.futures import ThreadPoolExecutor

    spec = python_spec(limits=Limits(wall_seconds=30, pids=32))

    def one(index: int) -> bytes:
        return sandbox.run(["/bin/sh", "-c", f"echo {index}; ls /proc | grep -c '^[0-9]'"],
                           spec).stdout

    with ThreadPoolExecutor(6) as pool:
        outputs = list(pool.map(one, range(6)))
    for index, output in enumerate(outputs):
        number, processes = output.split()
        assert int(number) == index and int(processes) <= 5


def test_no_docker_container_outlives_its_sandbox(docker_sandbox: Sandbox) -> None:
    import subprocess
    import tempfile

    host_files = Path(tempfile.gettempdir())
    files_before = set(host_files.glob("vtbench-docker-*"))

    assert docker_containers() == []
    assert docker_sandbox.run(["/bin/sh", "-c", "exit 3"], python_spec()).returncode == 3
    timed = docker_sandbox.run(["/bin/sleep", "30"], python_spec(limits=Limits(wall_seconds=1)))
    assert timed.timed_out
    process = docker_sandbox.start(["/bin/sleep", "30"], python_spec())
    assert docker_containers() != []  # the check can see a live one
    assert process.kill_tree(grace_seconds=1) == "terminated"
    stubborn = docker_sandbox.start(["/bin/sh", "-c", "trap '' TERM; echo set; sleep 30"],
                                    python_spec(), stdout=subprocess.PIPE)
    assert stubborn.stdout is not None and stubborn.stdout.readline() == b"set\n"
    assert stubborn.kill_tree(grace_seconds=0.5) == "killed"
    stubborn.stdout.close()
    assert docker_containers() == []
    assert set(host_files.glob("vtbench-docker-*")) <= files_before


def test_docker_limits_the_memory_of_the_whole_tree(docker_sandbox: Sandbox) -> None:
    # Four processes of 120 MB each: every one is within the per-process limit of 256 MB,
    # together they are not; the container's memory cgroup must stop some of them.
    hog = "import time; held = b'x' * (120 << 20); time.sleep(3); print('kept')"
    script = "; ".join(f"({PYTHON} -c \"{hog}\" &)" for _ in range(4)) + "; sleep 5"
    spec = python_spec(limits=Limits(wall_seconds=30, memory_mb=256))
    result = docker_sandbox.run(["/bin/sh", "-c", script], spec)
    kept = result.stdout.decode().split().count("kept")
    assert kept < 4, result
    single = docker_sandbox.run(python_code(hog), spec)
    assert single.stdout == b"kept\n", single  # one alone fits: the attack is a tree attack


def test_a_timed_wait_returns_when_the_command_ends_and_not_before(sandbox: Sandbox) -> None:
    import subprocess

    process = sandbox.start(["/bin/sh", "-c", "sleep 0.6"], python_spec())
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        process.wait(timeout=0.1)
    assert process.returncode is None
    assert process.wait(timeout=30) == 0
    assert time.monotonic() - started < 10
