"""Stopping a child process the same way everywhere: SIGTERM, a grace period, SIGKILL."""

import subprocess
from typing import Protocol


class Stoppable(Protocol):
    """What :func:`stop_process` needs (``subprocess.Popen`` has it)."""

    def poll(self) -> int | None: ...
    def terminate(self) -> None: ...
    def kill(self) -> None: ...
    def wait(self, timeout: float | None = None) -> int: ...


def stop_process(process: Stoppable, grace: float = 15.0, graceful: bool = True) -> None:
    """End ``process`` and reap it: SIGTERM (SIGKILL at once when not ``graceful``), then
    SIGKILL if it still runs after ``grace`` seconds."""
    if process.poll() is not None:
        return
    if graceful:
        process.terminate()
    else:
        process.kill()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
