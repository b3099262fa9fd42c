"""Per-sandbox cgroups: the detected mode, tree-wide memory and CPU limits, the v2 tree kill,
and the refusal of untrusted code where no cgroup limits a sandbox.

Tests that need one cgroup version skip on the other, naming what this host has; the
tests of tree limits run on whichever version the host gives (v1 here, v2 on the GPU host).
"""

import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.sandbox.helpers import PYTHON, host_processes_matching, python_code, python_spec
from vtbench.errors import SandboxUnavailable
from vtbench.sandbox import Limits, Sandbox, _cgroup, get_sandbox

HOST = _cgroup.support()


def _is_cgroup2fs() -> bool:
    return subprocess.run(["stat", "-fc", "%T", "/sys/fs/cgroup"], capture_output=True,
                          text=True, check=False).stdout.strip() == "cgroup2fs"


def needs(mode: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        HOST.mode != mode or not HOST.strong,
        reason=f"needs per-sandbox cgroup {mode} limits; this host has {HOST.describe()}")


@needs("v2")
def test_a_cgroup2_host_limits_memory_and_pids_per_sandbox_through_v2() -> None:
    assert _is_cgroup2fs() or Path("/sys/fs/cgroup/unified").is_dir()
    assert HOST.mode == "v2" and {"memory", "pids"} <= HOST.controllers


@needs("v1")
def test_a_cgroup1_host_keeps_its_v1_limits() -> None:
    assert not _is_cgroup2fs()
    assert {"memory", "pids"} <= HOST.controllers


def test_four_processes_within_their_own_limit_cannot_together_exceed_the_trees(
        sandbox: Sandbox) -> None:
    hog = "import time; held = b'x' * (120 << 20); time.sleep(3); print('kept')"
    script = "; ".join(f"({PYTHON} -c \"{hog}\" &)" for _ in range(4)) + "; sleep 5"
    spec = python_spec(limits=Limits(wall_seconds=30, memory_mb=256))
    result = sandbox.run(["/bin/sh", "-c", script], spec)
    assert result.stdout.decode().split().count("kept") < 4, result
    single = sandbox.run(python_code(hog), spec)
    assert single.stdout == b"kept\n", single  # one alone fits: the attack is a tree attack


def test_a_cpu_hog_tree_gets_only_its_share_of_the_cpu(sandbox: Sandbox) -> None:
    if "cpu" not in HOST.controllers and sandbox.name == "bwrap":
        pytest.skip(f"the cpu controller is not delegated here: {HOST.describe()}")
    hog = ("import os, time\n"
           "children = []\n"
           "for _ in range(3):\n"
           "    pid = os.fork()\n"
           "    if pid == 0:\n"
           "        children = []\n"
           "        break\n"
           "    children.append(pid)\n"
           "end = time.monotonic() + 2\n"
           "while time.monotonic() < end: pass\n"
           "print(time.process_time(), flush=True)\n"
           "for pid in children:\n"  # else the sandbox may end before a throttled child prints
           "    os.waitpid(pid, 0)\n")
    spec = python_spec(limits=Limits(wall_seconds=30, cpus=0.2))
    result = sandbox.run(python_code(hog), spec)
    used = sum(float(word) for word in result.stdout.split())
    assert len(result.stdout.split()) == 4, result
    assert used < 0.2 * 2 * 1.5 + 0.3, used  # 4 busy processes for 2 s, unlimited: 2-8 s


def test_without_per_sandbox_cgroups_untrusted_code_is_refused_naming_the_fix(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_cgroup, "support", lambda: _cgroup.Support("none"))
    monkeypatch.delenv(_cgroup.ALLOW_WEAK_ENV, raising=False)
    with pytest.raises(SandboxUnavailable) as refused:
        get_sandbox("bwrap").run(["/bin/true"], python_spec(limits=Limits(pids=64)))
    assert "--allow-weak-limits" in refused.value.one_line()
    assert "memory" not in str(refused.value) and "pids" in str(refused.value)
    monkeypatch.setenv(_cgroup.ALLOW_WEAK_ENV, "1")
    weak = get_sandbox("bwrap").run(["/bin/true"], python_spec(limits=Limits(pids=64)))
    assert weak.returncode == 0


def _v2_or_skip() -> _cgroup.Support:
    v2 = _cgroup._v2_support()
    if v2.mode != "v2":
        pytest.skip("no writable cgroup v2 group for this process")
    return v2


def test_cgroup_kill_ends_every_process_of_a_v2_group_even_double_forked_ones() -> None:
    """Runs on a v1 host too where an (empty) v2 hierarchy is mounted: cgroup.kill needs
    no controller."""
    marker = f"vtbench-v2kill-{uuid.uuid4().hex}"
    group = _cgroup.create(None, None, host=_v2_or_skip())
    assert group.v2 and group.procs_files
    script = (f'echo $$ > {group.procs_files[0]}; trap "" TERM; '
              f'( setsid /bin/sh -c "trap \\"\\" TERM; sleep 60; : {marker}" & ); '
              f'sleep 60; : {marker}')
    leader = subprocess.Popen(["/bin/sh", "-c", script], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while len(host_processes_matching(marker)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(host_processes_matching(marker)) >= 2, "the tree never started"
        group.kill()
        leader.wait(timeout=10)
        deadline = time.monotonic() + 10
        while host_processes_matching(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert host_processes_matching(marker) == []
    finally:
        leader.kill()
        group.remove()
    assert not group.dirs


def test_a_v2_sandbox_runs_in_its_own_group_which_is_removed_after(
        monkeypatch: pytest.MonkeyPatch) -> None:
    v2 = _v2_or_skip()
    monkeypatch.setattr(_cgroup, "support", lambda: v2)
    monkeypatch.setenv(_cgroup.ALLOW_WEAK_ENV, "1")  # where v2 delegates no controller
    parent = dict(v2.parents)[""]

    def groups() -> set[Path]:
        return {p for p in parent.iterdir() if p.name.startswith("vtbench-") and p.is_dir()
                and p.name != _cgroup.RUNNER_LEAF}

    before = groups()
    process = get_sandbox("bwrap").start(["/bin/sleep", "30"],
                                         python_spec(limits=Limits(wall_seconds=30, pids=64)))
    try:
        (mine,) = groups() - before
        assert len((mine / "cgroup.procs").read_text().split()) >= 2  # bwrap and its pid 1
    finally:
        assert process.kill_tree(grace_seconds=0.2) in ("terminated", "killed")
    assert groups() - before == set()
