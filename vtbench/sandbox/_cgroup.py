"""Per-sandbox cgroup v1 groups for the pids and memory controllers, where writable.

A group is made under the caller's own cgroup of each controller (so nesting set up by
the operator is respected). When a controller is not mounted as cgroup v1, or its
directory cannot be created (not root, read-only cgroupfs), it is simply not used and
the caller falls back to rlimits. The launcher moves itself into the groups before it
execs anything, so every process of the sandbox is counted from the first fork on.
"""

import contextlib
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path


def _v1_mounts() -> dict[str, Path]:
    """Controller name -> mount point, for cgroup v1 hierarchies."""
    found: dict[str, Path] = {}
    with open("/proc/self/mounts") as mounts:
        for line in mounts:
            parts = line.split()
            if len(parts) < 4 or parts[2] != "cgroup":
                continue
            for option in parts[3].split(","):
                if option in ("pids", "memory"):
                    found[option] = Path(parts[1])
    return found


def _own_paths() -> dict[str, str]:
    """Controller name -> this process's cgroup path inside that hierarchy."""
    paths: dict[str, str] = {}
    with open("/proc/self/cgroup") as groups:
        for line in groups:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(","):
                paths[controller] = path
    return paths


@dataclass
class CgroupSet:
    """The groups of one sandbox; empty when cgroups are unavailable."""

    dirs: dict[str, Path] = field(default_factory=dict)

    @property
    def procs_files(self) -> list[Path]:
        return [folder / "cgroup.procs" for folder in self.dirs.values()]

    def limit_hit(self) -> str | None:
        """'memory_mb' after an OOM kill, 'pids' after a refused fork, else None."""
        memory = self.dirs.get("memory")
        if memory is not None and _counter(memory / "memory.oom_control", "oom_kill") > 0:
            return "memory_mb"
        pids = self.dirs.get("pids")
        if pids is not None and _counter(pids / "pids.events", "max") > 0:
            return "pids"
        return None

    def remove(self) -> None:
        """Delete the groups; retries while exiting processes still linger in them."""
        for folder in self.dirs.values():
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


def create(pids: int | None, memory_mb: int | None) -> CgroupSet:
    """Make the groups that the requested limits need; skip any that cannot be made."""
    wanted = {"pids": pids, "memory": memory_mb}
    if not any(wanted.values()):
        return CgroupSet()
    mounts, own = _v1_mounts(), _own_paths()
    result = CgroupSet()
    name = f"vtbench-{uuid.uuid4().hex[:12]}"
    for controller, value in wanted.items():
        if value is None or controller not in mounts or controller not in own:
            continue
        folder = mounts[controller] / own[controller].lstrip("/") / name
        try:
            folder.mkdir()
        except OSError:
            continue
        try:
            if controller == "pids":
                (folder / "pids.max").write_text(str(value))
            else:
                (folder / "memory.limit_in_bytes").write_text(str(value * 1024 * 1024))
        except OSError:
            with contextlib.suppress(OSError):
                os.rmdir(folder)
            continue
        result.dirs[controller] = folder
    return result
