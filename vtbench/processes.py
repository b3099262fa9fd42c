"""Child processes handled the same way everywhere: stopped with SIGTERM, a grace period,
then SIGKILL; or bound to die with the process that started them."""

import ctypes
import os
import signal
import subprocess
from collections.abc import Callable
from typing import Protocol

PR_SET_PDEATHSIG = 1


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


def die_with_parent() -> Callable[[], None]:
    """A ``preexec_fn``: the child is killed when this process dies (call from a thread that
    lives as long as the child should: the signal follows the thread that forked)."""
    libc, parent = ctypes.CDLL(None, use_errno=True), os.getpid()

    def arm() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)

    return arm
