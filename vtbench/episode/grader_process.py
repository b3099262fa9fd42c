"""Finding or starting the host's grader service for the runner, and sharing it.

One grader per host (per private store) serves every episode over
``$VTBENCH_HOME/grader/grader.sock``. A runner reuses a live grader or starts one; a grader
a runner started belongs to every runner that uses it and stops when the last one leaves,
so two overlapping ``vtbench run``s never pull the grader from under each other. A grader
the operator started (``vtbench grader serve``) is never stopped by a runner.

Each user holds a shared ``flock`` on ``users.lock`` while it uses the grader; the kernel
drops it when the user's process dies, so a runner killed with ``kill -9`` leaves no stale
claim. Arriving and leaving are serialised by ``lifecycle.lock``, so a leaving runner never
stops a grader that an arriving one has just found alive.
"""

import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import httpx

from vtbench import layout
from vtbench.errors import GraderUnavailable
from vtbench.gpus import grader_shares_gpus
from vtbench.sandbox import grant_socket

START_SECONDS = 60.0
STOP_SECONDS = 15.0


def grader_socket() -> Path:
    return layout.grader_home() / "grader.sock"


def started_by_runner() -> Path:
    """The pid file of a grader a runner started (absent for the operator's own)."""
    return layout.grader_home() / "runner-grader.pid"


def grader_log() -> Path:
    return layout.grader_home() / "grader.log"


def alive(socket: Path) -> bool:
    if not socket.exists():
        return False
    try:
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(socket)),
                          base_url="http://grader", timeout=2.0) as http:
            return http.get("/openapi.json").status_code == 200
    except httpx.TransportError:
        return False


@contextmanager
def locked(path: Path, mode: int) -> Iterator[IO[bytes]]:
    with path.open("ab") as handle:
        fcntl.flock(handle, mode)
        try:
            yield handle
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def running_grader(sandbox: str = "bwrap") -> Iterator[Path]:
    """Yield the socket of a live grader, starting one if needed; the last runner to leave
    stops a grader a runner started."""
    home = layout.grader_home()
    home.mkdir(parents=True, exist_ok=True)
    socket = grader_socket()
    claim = (home / "users.lock").open("ab")
    try:
        with locked(home / "lifecycle.lock", fcntl.LOCK_EX):
            fcntl.flock(claim, fcntl.LOCK_SH)
            if not alive(socket):
                start_grader(socket, sandbox)
    except BaseException:
        claim.close()
        raise
    try:
        yield grant_socket(socket)
    finally:
        leave(home, claim)


def leave(home: Path, claim: IO[bytes]) -> None:
    """Drop this runner's claim; stop a runner-started grader nobody else uses."""
    with locked(home / "lifecycle.lock", fcntl.LOCK_EX):
        fcntl.flock(claim, fcntl.LOCK_UN)
        claim.close()
        with (home / "users.lock").open("ab") as probe:
            try:
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return
            stop_runner_grader()


def start_grader(socket: Path, sandbox: str) -> None:
    """Start a grader in a session of its own (it outlives the runner that started it); on
    a host with one GPU it shares that GPU with the episodes' research sandboxes."""
    with grader_log().open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "vtbench.grader.serve", "--socket", str(socket),
             "--sandbox", sandbox, *(["--share-gpus"] if grader_shares_gpus() else [])],
            stdout=out, stderr=out, env={**os.environ},
            start_new_session=True)
    started_by_runner().write_text(str(process.pid))
    deadline = time.monotonic() + START_SECONDS
    while not alive(socket):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            started_by_runner().unlink(missing_ok=True)
            raise GraderUnavailable("the grader did not start", hint=f"see {grader_log()}")
        time.sleep(0.2)


def stop_runner_grader() -> None:
    """SIGTERM the grader a runner started, SIGKILL after a grace period."""
    pid_file = started_by_runner()
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text())
    pid_file.unlink()
    if not is_grader(pid):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_SECONDS
    while is_grader(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if is_grader(pid):
        os.kill(pid, signal.SIGKILL)


def is_grader(pid: int) -> bool:
    """Whether ``pid`` is a live grader process (not a reused pid, not a zombie)."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return False
    return status.rsplit(")", 1)[1].split()[0] != "Z" and b"vtbench.grader.serve" in command
