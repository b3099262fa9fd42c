"""Helpers shared by the sandbox tests: specs that can run Python, host process lookup."""

import subprocess
import sys
from typing import Any

from vtbench.sandbox import Limits, Mount, SandboxSpec, python_runtime_mounts

PYTHON = sys.executable


def python_spec(*mounts: Mount, limits: Limits | None = None, **fields: Any) -> SandboxSpec:
    """A spec under which ``sys.executable`` runs, plus ``mounts``."""
    return SandboxSpec(
        mounts=[*python_runtime_mounts(), *mounts],
        limits=limits or Limits(wall_seconds=30),
        **fields,
    )


def host_processes_matching(marker: str) -> list[str]:
    """Host processes whose command line contains ``marker`` (pgrep -f)."""
    found = subprocess.run(["pgrep", "-a", "-f", marker], capture_output=True, text=True)
    return found.stdout.splitlines()


def python_code(code: str) -> list[str]:
    return [PYTHON, "-c", code]


