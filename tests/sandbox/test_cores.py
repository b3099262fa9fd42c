"""A sandbox given ``cores`` runs on those cores only, through a cpuset cgroup of its own (v1
here, v2 on the GPU host), and cannot leave them; without a cpuset it is refused unless weak
limits are allowed, and then runs with the launcher's affinity."""

import os
from pathlib import Path

import pytest

from tests.sandbox.helpers import python_code, python_spec
from vtbench.errors import SandboxUnavailable
from vtbench.sandbox import (
    Limits,
    Sandbox,
    _cgroup,
    get_sandbox,
    on_cores,
    parse_core_list,
)

HOST = _cgroup.support()
LAST_CORE = max(os.sched_getaffinity(0))
READ_CORES = ("import os\n"
              "line = [l for l in open('/proc/self/status') if l.startswith('Cpus_allowed_list')]\n"
              "print(line[0].split()[1])\n"
              "try:\n"
              "    os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))\n"
              "except OSError:\n"
              "    print('widening refused')\n"
              "print(sorted(os.sched_getaffinity(0)))\n")


def needs_cpuset() -> pytest.MarkDecorator:
    return pytest.mark.skipif("cpuset" not in HOST.controllers,
                              reason=f"no cpuset controller for sandboxes: {HOST.describe()}")


@needs_cpuset()
def test_a_sandbox_given_one_core_runs_on_it_and_cannot_widen_its_cores(
        sandbox: Sandbox) -> None:
    spec = python_spec(limits=Limits(wall_seconds=30, memory_mb=1024, pids=64,
                                     cores=[LAST_CORE]))
    result = sandbox.run(python_code(READ_CORES), spec)
    lines = result.stdout.decode().split("\n")
    assert parse_core_list(lines[0]) == [LAST_CORE], result
    assert lines[-2] == f"[{LAST_CORE}]", result  # whatever it asked for, it keeps one core


@needs_cpuset()
def test_a_sandbox_cpuset_group_is_removed_after_the_sandbox_ends() -> None:
    parent = dict(HOST.parents).get("cpuset") or dict(HOST.parents)[""]
    before = {p.name for p in parent.iterdir() if p.name.startswith("vtbench-")}
    get_sandbox("bwrap").run(["/bin/true"], python_spec(limits=Limits(cores=[0])))
    after = {p.name for p in parent.iterdir() if p.name.startswith("vtbench-")}
    assert after <= before


def test_cores_without_a_cpuset_are_refused_unless_weak_limits_are_allowed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    without = _cgroup.Support(HOST.mode, HOST.controllers - {"cpuset"},
                              tuple(p for p in HOST.parents if p[0] != "cpuset"))
    monkeypatch.setattr(_cgroup, "support", lambda: without)
    monkeypatch.delenv(_cgroup.ALLOW_WEAK_ENV, raising=False)
    spec = python_spec(limits=Limits(wall_seconds=30, cores=[LAST_CORE]))
    with pytest.raises(SandboxUnavailable) as refused:
        get_sandbox("bwrap").run(python_code(READ_CORES), spec)
    assert "cores" in str(refused.value) and "--allow-weak-limits" in refused.value.one_line()
    monkeypatch.setenv(_cgroup.ALLOW_WEAK_ENV, "1")
    weak = get_sandbox("bwrap").run(python_code(READ_CORES), spec)
    assert parse_core_list(weak.stdout.decode().split("\n")[0]) == [LAST_CORE], weak


def test_the_calling_thread_runs_on_the_cores_for_the_block_and_gets_its_own_back() -> None:
    before = os.sched_getaffinity(0)
    with on_cores([LAST_CORE]):
        assert os.sched_getaffinity(0) == {LAST_CORE}
    assert os.sched_getaffinity(0) == before


def test_a_v1_cpuset_group_gets_its_parents_memory_nodes_and_a_v2_group_inherits_them(
        tmp_path: Path) -> None:
    (tmp_path / "cpuset.mems").write_text("0-1\n")
    assert _cgroup._cpuset_settings([3, 1], tmp_path, v2=False) == {
        "cpuset.cpus": "1,3", "cpuset.mems": "0-1"}
    assert _cgroup._cpuset_settings([3, 1], tmp_path, v2=True) == {"cpuset.cpus": "1,3"}


def test_core_lists_read_as_the_kernel_writes_them() -> None:
    assert parse_core_list("0-2,5\n") == [0, 1, 2, 5]
    assert parse_core_list("7") == [7]
