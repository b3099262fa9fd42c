"""Test hook: stop the grader dead at a named point, so crash recovery can be tested for real.

Set ``VTBENCH_GRADER_CRASH_AT`` to a point name (see :data:`POINTS`). When the code
reaches :func:`checkpoint` with that name, the process is killed with SIGKILL, the same
as ``kill -9``. If ``VTBENCH_GRADER_PAUSE_FILE`` is also set, the process instead writes
its pid to that file and waits, so that a test can deliver the ``kill -9`` itself from
outside. Unset (always, in production) the hook does nothing. It only ever ends the
process that reached it.
"""

import os
import signal
import time

CRASH_ENV = "VTBENCH_GRADER_CRASH_AT"
PAUSE_ENV = "VTBENCH_GRADER_PAUSE_FILE"

POINTS = (
    "queued",  # reservation committed, nothing started
    "running",  # validation marked running
    "writing_result",  # inside the settling transaction, before COMMIT
    "settled",  # settling transaction committed
)
"""The points the ledger passes; the service adds its own between running and settling."""


def checkpoint(name: str) -> None:
    """Die here (or pause here for an outside kill) if the crash hook names this point."""
    if os.environ.get(CRASH_ENV) != name:
        return
    pause_file = os.environ.get(PAUSE_ENV)
    if not pause_file:
        os.kill(os.getpid(), signal.SIGKILL)
        return
    tmp = f"{pause_file}.tmp"
    with open(tmp, "w") as handle:
        handle.write(str(os.getpid()))
    os.replace(tmp, pause_file)
    while True:
        time.sleep(3600)
