"""The ``none`` backend: no isolation at all, for development on hosts without bwrap.

It prints a loud warning on stderr at every start. It keeps only what needs no
isolation: the exact environment, the per-process rlimits (``cpu_seconds`` too: each
process gets its own, there is no CPU budget for the whole tree), the cores (as an affinity the
command may widen), the wall-clock limit and the tree kill (a new process group; a process
that leaves the group escapes it). Mounts are not applied: the command sees the whole
host, and ``cwd`` is translated through the mounts to its host path. tcp_relays become
host socat listeners on 127.0.0.1. Never use it for untrusted code.
"""

import contextlib
import os
import signal
import subprocess
import sys

from vtbench.sandbox import _launch
from vtbench.sandbox._affinity import on_cores
from vtbench.sandbox._process import RunsToCompletion, SandboxProcess, Stream
from vtbench.sandbox._relay import relay_argv, relay_wait
from vtbench.sandbox._spec import SandboxSpec

WARNING = (
    "WARNING: vtbench sandbox backend 'none' gives NO isolation: the command can read "
    "and write everything this user can, and reach the network; its CPU and memory limits hold "
    "per process only. Development only."
)


class _GroupKiller:
    def __init__(self, pgid: int) -> None:
        self._pgid = pgid

    def _send(self, number: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._pgid, number)

    def terminate_all(self) -> None:
        self._send(signal.SIGTERM)

    def kill_all(self) -> None:
        self._send(signal.SIGKILL)


class NoSandbox(RunsToCompletion):
    """Runs the command directly on the host (see the module docstring)."""

    name = "none"

    def start(
        self, argv: list[str], spec: SandboxSpec,
        stdin: Stream = None, stdout: Stream = None, stderr: Stream = None,
    ) -> SandboxProcess:
        print(WARNING, file=sys.stderr, flush=True)
        cwd = str(spec.cwd)
        for mount in spec.mounts:
            if spec.cwd == mount.target or mount.target in spec.cwd.parents:
                cwd = str(mount.source / spec.cwd.relative_to(mount.target))
        prefix = [_launch.tool("prlimit"), *_launch.rlimit_args(spec.limits, nproc=False), "--"]
        with on_cores(spec.limits.cores):  # the only hold it has on them: a weak one
            popen = subprocess.Popen(
                [*prefix, *relay_argv(spec.tcp_relays, argv, inside=False,
                                      lazy_seconds=relay_wait(spec))],
                env=spec.command_env(), cwd=cwd, stdin=stdin, stdout=stdout, stderr=stderr,
                start_new_session=True,
            )
        return SandboxProcess(popen, _GroupKiller(popen.pid), spec.limits)
