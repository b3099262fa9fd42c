"""Per-sandbox cgroups (v2, else v1) for memory, pids, CPU and cores, the CPU time the
whole tree used, and the whole-tree kill.

Which hierarchy gives per-sandbox limits is detected once per process (:func:`support`):

- **v2**: groups are made under the caller's own cgroup v2 group (a delegated subtree:
  the operator gives the runner a group it may write, see README "Sandbox limits"). To
  enable controllers for child groups, cgroup v2 forbids processes in the parent (the
  no-internal-processes rule), so the processes of the caller's group first move into a
  leaf child :data:`RUNNER_LEAF`; the hierarchy's root is never emptied. Only controllers
  listed in the group's ``cgroup.controllers`` can be used: the support says which.
  ``cgroup.kill`` ends every process of a sandbox's group at once.
- **v1**: groups under the caller's own group of each mounted, writable controller.
- **none**: neither gives per-sandbox memory *and* pids limits. The bwrap backend then
  refuses untrusted code unless the operator allowed weak limits
  (:data:`ALLOW_WEAK_ENV`, set by ``--allow-weak-limits``): processes would fall back to
  RLIMIT_NPROC, one count for every sandbox of the uid.

The launcher moves itself into the group before it execs anything, so every process of
the sandbox is counted from the first fork on.

Cores (``cpuset``): a sandbox given ``cores`` runs on those cores only, through the cpuset
controller (v2 ``cpuset.cpus``, memory nodes inherited; v1 ``cpuset.cpus`` and the parent's
``cpuset.mems``, which a v1 group needs before a process may join it). A process cannot
leave its cpuset by ``sched_setaffinity``; without the controller the caller may fall back
to the affinity of the process it starts (:mod:`vtbench.sandbox._affinity`), which the
process can widen again: a weak limit.

CPU time (``cpuacct``): the CPU time of every process that ever ran in the group, exited
ones included (v1 ``cpuacct.usage``; v2 ``cpu.stat`` ``usage_usec``, which every v2 group
has, whether or not the cpu controller is enabled). A CPU budget for the whole tree is
read from it (:class:`CpuClock`); without it only the per-process RLIMIT_CPU holds, which
a tree of N processes gets N times over: a weak limit.
"""

import contextlib
import functools
import os
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Mode = Literal["v2", "v1", "none"]
CONTROLLERS = ("memory", "pids", "cpu", "cpuacct", "cpuset")
RUNNER_LEAF = "vtbench-runner"
"""The leaf v2 group the caller's processes move into so that their parent may delegate."""
ALLOW_WEAK_ENV = "VTBENCH_ALLOW_WEAK_LIMITS"
"""``1``: run untrusted code even without per-sandbox memory and pids limits."""
CPU_PERIOD_US = 100_000


@dataclass(frozen=True)
class Support:
    """What this host's cgroups give each sandbox."""

    mode: Mode
    controllers: frozenset[str] = frozenset()
    """Per-sandbox limits available: a subset of memory, pids, cpu, cpuacct (the group's CPU
    time: v1 cpuacct, v2 cpu.stat), cpuset."""
    parents: tuple[tuple[str, Path], ...] = ()
    """(controller or "" for v2, folder new groups are made in)."""

    @property
    def strong(self) -> bool:
        """Memory and process count are limited per sandbox, never per uid."""
        return {"memory", "pids"} <= self.controllers

    def describe(self) -> str:
        if self.mode == "none":
            return "none (per-process rlimits only; processes counted per uid)"
        kill = "; cgroup.kill" if self.mode == "v2" else ""
        names = ", ".join(sorted(self.controllers)) or "no controller"
        cpu = "" if "cpuacct" in self.controllers else "; CPU time per process only"
        return f"cgroup {self.mode} ({names}{kill}{cpu})"


def weak_limits_allowed() -> bool:
    return os.environ.get(ALLOW_WEAK_ENV) == "1"


def _mounts(kind: str) -> list[tuple[Path, list[str]]]:
    found = []
    with open("/proc/self/mounts") as mounts:
        for line in mounts:
            parts = line.split()
            if len(parts) >= 4 and parts[2] == kind:
                found.append((Path(parts[1]), parts[3].split(",")))
    return found


def _own_paths() -> dict[str, str]:
    """Controller name ("" for the v2 hierarchy) -> this process's cgroup path in it."""
    paths: dict[str, str] = {}
    with open("/proc/self/cgroup") as groups:
        for line in groups:
            number, controllers, path = line.rstrip("\n").split(":", 2)
            if number == "0" and controllers == "":
                paths[""] = path
            for controller in filter(None, controllers.split(",")):
                paths[controller] = path
    return paths


def _writable(folder: Path) -> bool:
    probe = folder / f"vtbench-probe-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
    except OSError:
        return False
    with contextlib.suppress(OSError):
        probe.rmdir()
    return True


def _v1_support() -> Support:
    own = _own_paths()
    parents = []
    for mount, options in _mounts("cgroup"):
        for controller in CONTROLLERS:
            if controller in options and controller in own:
                folder = mount / own[controller].lstrip("/")
                if _writable(folder):
                    parents.append((controller, folder))
    return Support("v1", frozenset(c for c, _ in parents), tuple(parents))


def _words(path: Path) -> set[str]:
    try:
        return set(path.read_text().split())
    except OSError:
        return set()


def _delegate(base: Path, wanted: set[str], is_root: bool) -> set[str]:
    """Enable ``wanted`` controllers for ``base``'s children; returns those enabled."""
    missing = wanted - _words(base / "cgroup.subtree_control")
    for _ in range(20):
        if not missing:
            break
        if not is_root:  # the no-internal-processes rule; the root group is exempt
            leaf = base / RUNNER_LEAF
            with contextlib.suppress(FileExistsError):
                leaf.mkdir()
            for pid in (base / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    (leaf / "cgroup.procs").write_text(pid)
        refused = False
        for controller in sorted(missing):  # one at a time: one refusal blocks no other
            try:
                (base / "cgroup.subtree_control").write_text(f"+{controller}")
            except OSError:
                refused = True
        if refused:
            time.sleep(0.01)  # a process forked into base meanwhile: move it too
        missing = wanted - _words(base / "cgroup.subtree_control")
    return wanted & _words(base / "cgroup.subtree_control")


def _v2_support() -> Support:
    own = _own_paths().get("")
    mounts = _mounts("cgroup2")
    if own is None or not mounts:
        return Support("none")
    root = mounts[0][0]
    base = root / own.lstrip("/")
    if base.name == RUNNER_LEAF:  # a process started by a runner that already delegated
        base = base.parent
    if not _writable(base):
        return Support("none")
    wanted = set(CONTROLLERS) & _words(base / "cgroup.controllers")
    try:
        enabled = _delegate(base, wanted, is_root=base == root)
    except OSError:
        enabled = set()
    # cpu.stat's usage_usec is in every v2 group, with or without the cpu controller.
    return Support("v2", frozenset(enabled | {"cpuacct"}), (("", base),))


@functools.cache
def support() -> Support:
    """The hierarchy that limits sandboxes best: v2 when it limits memory and pids, else
    v1 when it does, else whichever limits something, else none."""
    v2, v1 = _v2_support(), _v1_support()
    for candidate in (v2, v1):
        if candidate.strong:
            return candidate
    best = max((v2, v1), key=lambda s: (len(s.controllers), s.mode == "v2"))
    return best if best.controllers else Support("none")


@dataclass(frozen=True)
class CpuClock:
    """The CPU time of every process that ever ran in one group: v1 ``cpuacct.usage``
    (nanoseconds) or v2 ``cpu.stat`` (``usage_usec``)."""

    path: Path

    def seconds(self) -> float | None:
        """CPU-seconds so far; None once the group is gone."""
        try:
            text = self.path.read_text()
        except OSError:
            return None
        if self.path.name == "cpuacct.usage":
            return int(text) / 1e9
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name == "usage_usec":
                return int(value) / 1e6
        return None


def _clock_in(folder: Path, v2: bool) -> CpuClock:
    return CpuClock(folder / ("cpu.stat" if v2 else "cpuacct.usage"))


def clock_of(pid: int) -> CpuClock | None:
    """The CPU clock of the group process ``pid`` is in (a group someone else made, e.g. a
    container's): its v1 cpuacct group, else its v2 group; None where neither is mounted
    here or the process is gone."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    paths = {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        paths.update({name: path for name in controllers.split(",")})
    for kind, key, v2 in (("cgroup", "cpuacct", False), ("cgroup2", "", True)):
        for mount, options in _mounts(kind):
            if key in paths and (v2 or key in options):
                clock = _clock_in(mount / paths[key].lstrip("/"), v2)
                if clock.seconds() is not None:
                    return clock
    return None


@dataclass
class CgroupSet:
    """The groups of one sandbox; empty when cgroups are unavailable."""

    dirs: dict[str, Path] = field(default_factory=dict)
    """Controller -> group folder (with v2, every controller names the same folder)."""
    v2: bool = False

    @property
    def procs_files(self) -> list[Path]:
        return [folder / "cgroup.procs" for folder in sorted(set(self.dirs.values()))]

    def cpu_clock(self) -> CpuClock | None:
        """The CPU time of the whole tree, where the groups count it (``cpuacct``)."""
        folder = self.dirs.get("cpuacct")
        return None if folder is None else _clock_in(folder, self.v2)

    def kill(self) -> None:
        """SIGKILL every process of the group at once (v2 ``cgroup.kill``)."""
        if self.v2:
            for folder in set(self.dirs.values()):
                with contextlib.suppress(OSError):
                    (folder / "cgroup.kill").write_text("1")

    def limit_hit(self) -> str | None:
        """'memory_mb' after an OOM kill, 'pids' after a refused fork, else None."""
        memory, pids = self.dirs.get("memory"), self.dirs.get("pids")
        oom = ("memory.events", "oom_kill") if self.v2 else ("memory.oom_control", "oom_kill")
        if memory is not None and _counter(memory / oom[0], oom[1]) > 0:
            return "memory_mb"
        if pids is not None and _counter(pids / "pids.events", "max") > 0:
            return "pids"
        return None

    def remove(self) -> None:
        """Delete the groups; retries while exiting processes still linger in them."""
        for folder in set(self.dirs.values()):
            for _ in range(500):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.002)
        self.dirs.clear()


def _counter(path: Path, key: str) -> int:
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    return 0


def core_list(cores: Sequence[int]) -> str:
    """Cores as the kernel's lists spell them (``0,2,3``)."""
    return ",".join(str(core) for core in sorted(set(cores)))


def parse_core_list(text: str) -> list[int]:
    """``0-2,5`` (``cpuset.cpus``, ``Cpus_allowed_list``) as ``[0, 1, 2, 5]``."""
    cores: list[int] = []
    for part in filter(None, text.strip().split(",")):
        first, _, last = part.partition("-")
        cores += range(int(first), int(last or first) + 1)
    return cores


def _cpuset_settings(cores: Sequence[int], parent: Path, v2: bool) -> dict[str, str]:
    files = {"cpuset.cpus": core_list(cores)}
    if not v2:  # a v1 cpuset starts empty; no process may join it before both are set
        mems = (parent / "cpuset.mems").read_text().strip() if parent.exists() else ""
        files["cpuset.mems"] = mems or "0"
    return files


def _settings(controller: str, value: float, v2: bool) -> dict[str, str]:
    if controller == "cpuacct":  # counts on its own: nothing to set
        return {}
    if controller == "pids":
        return {"pids.max": str(int(value))}
    if controller == "memory":
        size = str(int(value) * 1024 * 1024)
        return {"memory.max": size, "memory.swap.max": "0"} if v2 \
            else {"memory.limit_in_bytes": size}
    quota = str(max(1000, int(value * CPU_PERIOD_US)))
    return {"cpu.max": f"{quota} {CPU_PERIOD_US}"} if v2 \
        else {"cpu.cfs_period_us": str(CPU_PERIOD_US), "cpu.cfs_quota_us": quota}


def _make(folder: Path, files: dict[str, str]) -> bool:
    try:
        folder.mkdir(exist_ok=True)
        for name, text in files.items():
            if (folder / name).exists() or name != "memory.swap.max":
                (folder / name).write_text(text)
    except OSError:
        with contextlib.suppress(OSError):
            folder.rmdir()
        return False
    return True


def create(pids: int | None, memory_mb: int | None, cpus: float | None = None,
           host: Support | None = None, cores: Sequence[int] | None = None,
           cpu_time: bool = False) -> CgroupSet:
    """Make the groups that the requested limits need; skip any that cannot be made. With
    v2 one group is always made, for the whole-tree kill. ``cores``: the cores the group's
    processes may run on (cpuset); ``cpu_time``: count the tree's CPU time (cpuacct)."""
    host = host or support()
    wanted: dict[str, float | None] = {"pids": pids, "memory": memory_mb, "cpu": cpus,
                                       "cpuacct": 1 if cpu_time else None,
                                       "cpuset": 1 if cores else None}
    result = CgroupSet(v2=host.mode == "v2")
    name = f"vtbench-{uuid.uuid4().hex[:12]}"
    for controller, parent in host.parents:
        limits = {c: v for c, v in wanted.items() if v is not None
                  and c in host.controllers and controller in ("", c)}
        if controller and not limits:
            continue
        files: dict[str, str] = {}
        for limited, value in limits.items():
            files.update(_cpuset_settings(cores or [], parent, result.v2)
                         if limited == "cpuset" else _settings(limited, value, result.v2))
        if _make(parent / name, files):
            for limited in limits or ["kill"]:
                result.dirs[limited] = parent / name
    return result
