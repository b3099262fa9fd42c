"""What an episode ran on, so that two records can be compared (or told apart) later.

A gain measured with another version of vtbench, another task pack or on a slower machine
is a different measurement; the record names each so that a report can refuse to pool
them silently. Every probe is best effort: a host without git or nvidia-smi still runs
episodes, and its record says what could not be found (None, no GPUs).
"""

import os
import platform
import shutil
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Literal

from vtbench import layout
from vtbench.episode.record import Hardware, Provenance
from vtbench.gpus import inventory
from vtbench.prepare import PreparedTask
from vtbench.sandbox import cgroup_limits, sandbox_tools, weak_limits_allowed


def vtbench_version() -> str | None:
    try:
        return metadata.version("vtbench")
    except metadata.PackageNotFoundError:
        return None


def vtbench_commit() -> str | None:
    """The commit of the vtbench checkout in use (with ``+dirty`` when it has local edits),
    or None when vtbench is not run from a git checkout."""
    git = shutil.which("git")
    if git is None or not (layout.REPO_ROOT / ".git").exists():
        return None
    head = _git(git, "rev-parse", "HEAD")
    if head is None:
        return None
    dirty = _git(git, "status", "--porcelain", "--untracked-files=no", "--", "vtbench")
    return f"{head}+dirty" if dirty else head


def _git(git: str, *args: str) -> str | None:
    done = subprocess.run([git, "-C", str(layout.REPO_ROOT), *args], capture_output=True,
                          text=True, timeout=30, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def cpu_model() -> str | None:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or None


def hardware() -> Hardware:
    return Hardware(cpu_model=cpu_model(), cpu_cores=os.cpu_count() or 0,
                    gpus=[gpu.name for gpu in inventory()])


def cores_held_by(sandbox: str) -> Literal["cpuset", "affinity"]:
    """How the research sandbox is kept on its reserved cores: a cpuset (docker's, or a
    cgroup's where the host gives bwrap one), else only an affinity its processes may widen
    (weak limits allowed, or the ``none`` backend)."""
    if sandbox == "docker" or (sandbox == "bwrap" and "cpuset" in cgroup_limits().controllers):
        return "cpuset"
    return "affinity"


def provenance(prepared: PreparedTask, sandbox: str) -> Provenance:
    limits = cgroup_limits()
    return Provenance(cores_held_by=cores_held_by(sandbox),
                      vtbench_version=vtbench_version(), vtbench_commit=vtbench_commit(),
                      task_digest=prepared.digest, method_settings=prepared.task.method_settings,
                      sandbox=sandbox, hardware=hardware(),
                      serving_backend=prepared.task.serving_backend,
                      sandbox_limits=limits.mode, sandbox_limits_detail=limits.describe(),
                      weak_limits_allowed=weak_limits_allowed(), sandbox_tools=sandbox_tools())
