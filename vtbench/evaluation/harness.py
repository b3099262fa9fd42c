"""Running a harness over a split's inputs inside a sandbox.

The harness process gets its own unprivileged uid, no network but a relay to the model
server's unix socket (``127.0.0.1:8000`` inside), its folder read-only, and one writable
folder holding ``inputs.jsonl`` (ids and inputs, never labels) and its ``outputs.jsonl``.
A task whose builder lays out per-instance trees (``instance_workspace(item, folder)``)
gets them there too, one folder per instance under ``workspaces/``, each named on its
input line (``"workspace"``); other tasks' folders and lines are unchanged.

:func:`start_harness` may run before the server's socket exists (the relay binds the
socket's folder, which must hold nothing else, and waits for the socket), so the sandbox
and the interpreter start while the model loads; :func:`finish_harness` waits for the end.
"""

import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vtbench.errors import SandboxError
from vtbench.sandbox import (
    Limits,
    Mount,
    Sandbox,
    SandboxProcess,
    SandboxSpec,
    grant_socket,
    prepare_writable,
    python_runtime_mounts,
    tools_dir,
)

RELAY_PORT = 8000
MAX_OUTPUT_FILE_MB = 64
PIDS = 1024
"""Processes and threads of the harness. Without cgroup v1 this is one RLIMIT_NPROC that
every sandbox of the uid shares, so it leaves room for evaluations running in parallel."""
Cores = list[int] | None
"""The cores an evaluation runs on (an episode's reservation), None: wherever the grader runs."""
INSIDE_HARNESS = Path("/harness")
INSIDE_IO = Path("/io")
WORKSPACES = "workspaces"

LayOut = Callable[[dict[str, Any], Path], None]
"""A task's ``instance_workspace(item, folder)``: writes one instance's tree (trusted)."""


@dataclass(frozen=True)
class HarnessRun:
    returncode: int | None
    timed_out: bool
    killed_by_limit: str | None
    outputs: str
    """Text of ``outputs.jsonl`` (empty when the harness wrote none)."""
    stderr_tail: str
    seconds: float

    @property
    def error(self) -> str | None:
        if self.timed_out:
            return "harness timed out"
        if self.killed_by_limit:
            return f"harness exceeded its {self.killed_by_limit} limit"
        if self.returncode:
            last = self.stderr_tail.strip().splitlines()[-1:] or [""]
            return f"harness exited with status {self.returncode}: {last[0][:300]}"
        return None


def harness_spec(harness_dir: Path, io_dir: Path, server_socket: Path,
                 timeout: float, lazy: bool = False, grace: float = 0.0,
                 cpu_seconds: float | None = None, cores: Cores = None) -> SandboxSpec:
    """The harness sees the Python runtime, its own folder, its io folder and the relay
    (with ``lazy``, to a socket that may appear after the start). ``grace`` extends the
    wall-clock limit by the server's startup time: the caller then enforces ``timeout``
    from when the server is ready (:func:`finish_harness`'s ``deadline``). The CPU budget
    of the whole harness, every process it starts counted, is ``cpu_seconds`` (``timeout``
    when None); a standby lowers it when its harness starts. ``cores``: where the harness
    runs (a cpuset). The PATH ends with an offline install's tools folder (mounted with the
    runtime), so a harness that runs commands (shell's reference) finds the programs the
    scorer's sandboxes find, the host's first."""
    tools = tools_dir()
    path = f"{sys.prefix}/bin:/usr/local/bin:/usr/bin:/bin" + (f":{tools / 'bin'}" if tools else "")
    return SandboxSpec(
        mounts=[*python_runtime_mounts(), Mount(source=harness_dir, target=INSIDE_HARNESS),
                Mount(source=io_dir, target=INSIDE_IO, writable=True)],
        env={"PATH": path, "HOME": "/tmp", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"},
        cwd=INSIDE_HARNESS,
        limits=Limits(wall_seconds=timeout + grace,
                      cpu_seconds=int(cpu_seconds or timeout) + 1,
                      memory_mb=8192, pids=PIDS, file_size_mb=MAX_OUTPUT_FILE_MB, cores=cores),
        tcp_relays={RELAY_PORT: server_socket},
        lazy_relays=lazy,
        socket_wait_seconds=timeout + grace if lazy else 10.0,
    )


@dataclass
class StartedHarness:
    """A harness running in its sandbox (see :func:`start_harness`)."""

    process: SandboxProcess
    io_dir: Path
    stderr_path: Path
    started: float


def start_harness(
    sandbox: Sandbox,
    harness_dir: Path,
    entry: list[str],
    instances: list[dict[str, Any]],
    server_socket: Path,
    workdir: Path,
    timeout: float,
    decoding: dict[str, Any] | None = None,
    lazy: bool = False,
    grace: float = 0.0,
    cpu_seconds: float | None = None,
    cores: Cores = None,
    lay_out: LayOut | None = None,
) -> StartedHarness:
    """Write the inputs and start the harness. With ``lazy`` the server's socket need not
    exist yet: its folder is bound instead, so it must hold nothing but the socket, and
    the socket must be connectable by the sandbox uid (mode 0666 or :func:`grant_socket`);
    ``grace``, ``cpu_seconds`` and ``cores``: see :func:`harness_spec`; ``lay_out``: see
    :func:`write_inputs`."""
    io_dir = workdir / "io"
    io_dir.mkdir(parents=True)
    write_inputs(io_dir, instances, lay_out)
    prepare_writable(io_dir)
    if not lazy:
        grant_socket(server_socket)
    started = time.monotonic()
    stderr_path = workdir / "harness.stderr"
    with stderr_path.open("wb") as stderr:
        spec = harness_spec(harness_dir, io_dir, server_socket, timeout, lazy, grace,
                            cpu_seconds=cpu_seconds, cores=cores)
        process = sandbox.start(harness_argv(entry, decoding), spec,
                                stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr)
    return StartedHarness(process, io_dir, stderr_path, started)


def write_inputs(io_dir: Path, instances: list[dict[str, Any]],
                 lay_out: LayOut | None = None) -> None:
    """``inputs.jsonl``: each instance's id and input, never its label. With ``lay_out``,
    each instance's tree in ``workspaces/<n>/`` too (made writable for the sandbox uid),
    named on its line as ``workspace`` (the path inside)."""
    lines = []
    for number, instance in enumerate(instances):
        line = {"id": instance["id"], "input": instance["input"]}
        if lay_out is not None:
            lay_out(instance, io_dir / WORKSPACES / str(number))
            line["workspace"] = f"{INSIDE_IO}/{WORKSPACES}/{number}"
        lines.append(json.dumps(line) + "\n")
    if lay_out is not None:
        prepare_writable(io_dir / WORKSPACES)
    (io_dir / "inputs.jsonl").write_text("".join(lines))


def harness_argv(entry: list[str], decoding: dict[str, Any] | None) -> list[str]:
    """The harness protocol's command line (paths and address as seen inside)."""
    argv = [*entry, "--inputs", f"{INSIDE_IO}/inputs.jsonl",
            "--out", f"{INSIDE_IO}/outputs.jsonl",
            "--base-url", f"http://127.0.0.1:{RELAY_PORT}/v1"]
    if decoding is not None:
        argv += ["--decoding", json.dumps(decoding)]
    return argv


def finish_harness(run: StartedHarness,
                   on_progress: Callable[[int], None] | None = None,
                   check: Callable[[], None] | None = None,
                   deadline: float | None = None) -> HarnessRun:
    """Wait for the harness to end (reporting progress) and collect what it wrote.
    ``check`` runs every quarter second; what it raises ends the harness and propagates
    (e.g. the model server died: no use waiting for the harness to give up). At
    ``deadline`` (``time.monotonic()``) the harness is ended as timed out."""
    process, outputs = run.process, run.io_dir / "outputs.jsonl"
    while True:
        if deadline is not None and time.monotonic() >= deadline:
            process.expire()
        if on_progress:
            on_progress(_count_lines(outputs))
        if check is not None:
            try:
                check()
            except BaseException:
                process.kill_tree(grace_seconds=0)
                raise
        try:
            left = deadline - time.monotonic() if deadline is not None else 0.25
            process.wait(timeout=min(0.25, max(left, 0.0)))
            break
        except subprocess.TimeoutExpired:
            continue
    stderr_tail = run.stderr_path.read_text(errors="replace")[-4000:]
    if process.never_entered:
        last = stderr_tail.strip().splitlines()[-1:] or [""]
        raise SandboxError(f"the harness sandbox did not start (ours, not the candidate's): "
                           f"{last[0][:300]}")
    text = outputs.read_text(errors="replace") if outputs.is_file() else ""
    return HarnessRun(
        returncode=process.returncode, timed_out=process.killed_by_limit == "wall_seconds",
        killed_by_limit=process.killed_by_limit, outputs=text,
        stderr_tail=stderr_tail, seconds=time.monotonic() - run.started)


def _count_lines(path: Path) -> int:
    try:
        with path.open("rb") as handle:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 16), b""))
    except FileNotFoundError:
        return 0
