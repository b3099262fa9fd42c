"""Running on given cores without a cpuset: the weak fallback, and the trusted side's own.

``sched_setaffinity(0, ...)`` sets the affinity of the calling *thread*, and a process forked
from that thread starts with it. :func:`on_cores` pins the calling thread for a block and
restores it after, so a grader thread can evaluate one episode on that episode's cores while
another thread evaluates another episode elsewhere, and the processes it starts meanwhile
(a sandbox's launcher, the scorer's helpers) begin on those cores. A process can widen its own
affinity again within its cpuset, so for untrusted code this is a weak limit; the cpuset
cgroup (:mod:`vtbench.sandbox._cgroup`) is the strong one.
"""

import contextlib
import os
from collections.abc import Iterator, Sequence

from vtbench.errors import SandboxUnavailable


@contextlib.contextmanager
def on_cores(cores: Sequence[int] | None) -> Iterator[None]:
    """Run the block (and what it forks) on ``cores``; None or empty: where it ran."""
    if not cores:
        yield
        return
    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, set(cores))
    except OSError as err:
        raise SandboxUnavailable(
            f"cannot run on cores {sorted(set(cores))}: {err.strerror or err} (this process may "
            f"use cores {sorted(before)})",
            hint="reserve cores this process may use, or widen its cpuset") from None
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
