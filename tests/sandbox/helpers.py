"""Helpers shared by the sandbox tests: specs that can run Python, host process lookup,
the docker backend or a skip."""

import os
import subprocess
import sys
from typing import Any

import pytest

from vtbench.errors import SandboxUnavailable
from vtbench.sandbox import Limits, Mount, Sandbox, SandboxSpec, get_sandbox, python_runtime_mounts

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



NO_DAEMON = "no Docker daemon is reachable"


def docker_or_skip() -> Sandbox:
    """The docker backend when a daemon answers here; a skip saying so when none does.
    Any other failure (a daemon that answers wrongly, a base image that cannot be
    built, a run that fails) raises, and ``VTBENCH_REQUIRE_DOCKER=1``
    turns the skip into a failure too (for machines that must run these tests)."""
    try:
        return get_sandbox("docker")
    except SandboxUnavailable as error:
        line = error.one_line()
        if not line.startswith(NO_DAEMON) or os.environ.get("VTBENCH_REQUIRE_DOCKER"):
            raise
        pytest.skip(f"docker backend: {line} [VTBENCH_REQUIRE_DOCKER=1 makes this a failure]")


def docker_containers() -> list[str]:
    """Ids of the sandbox containers the daemon still knows, running or not."""
    from vtbench.sandbox._docker import LABEL

    listing = subprocess.run(["docker", "ps", "-aq", "--filter", f"label={LABEL}"],
                             capture_output=True, text=True, check=True)
    return listing.stdout.split()
