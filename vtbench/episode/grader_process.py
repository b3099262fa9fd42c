"""Finding or starting the host's grader service for the runner.

One grader per host (per private store) serves every episode over
``$VTBENCH_HOME/grader/grader.sock``. The runner reuses a live one, or starts one for the
duration of its run; the grader's ledger survives either way.
"""

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from vtbench import layout
from vtbench.errors import GraderUnavailable
from vtbench.processes import stop_process
from vtbench.sandbox import grant_socket


def grader_socket() -> Path:
    return layout.home() / "grader" / "grader.sock"


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
def running_grader(sandbox: str = "bwrap", log: Path | None = None) -> Iterator[Path]:
    """Yield the socket of a live grader, starting one (and stopping it after) if needed."""
    socket = grader_socket()
    if alive(socket):
        yield grant_socket(socket)
        return
    socket.parent.mkdir(parents=True, exist_ok=True)
    out = log.open("ab") if log else subprocess.DEVNULL
    process = subprocess.Popen(
        [sys.executable, "-m", "vtbench.grader.serve", "--socket", str(socket),
         "--sandbox", sandbox], stdout=out, stderr=out, env={**os.environ})
    try:
        deadline = time.monotonic() + 60
        while not alive(socket):
            if process.poll() is not None or time.monotonic() > deadline:
                raise GraderUnavailable("the grader did not start",
                                        hint=f"see {log}" if log else None)
            time.sleep(0.2)
        yield grant_socket(socket)
    finally:
        stop_process(process)
