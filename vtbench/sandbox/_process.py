"""A started sandboxed command (:class:`SandboxProcess`) and the collector behind ``run``.

Guarantees: the wall-clock limit, and the CPU budget of the whole tree where the backend
can read the tree's CPU time (its cgroup), are enforced by a watchdog thread in the parent
whether or not the caller ever waits; ``kill_tree`` ends every process the command started,
including ones that ignore SIGTERM, double-fork or start new sessions (the backend's
:class:`Killer` knows the whole tree: a pid namespace, a process group, a container);
cleanup (cgroups, relays, temp files) runs exactly once, after the tree is gone.
"""

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from typing import IO, Protocol

from vtbench.sandbox._spec import CompletedRun, Ending, LimitName, Limits, SandboxSpec

Stream = int | IO[bytes] | None
"""What Popen accepts for stdin/stdout/stderr."""
CpuClock = Callable[[], float | None]
"""The CPU-seconds the whole tree has used so far (None once that cannot be read)."""
POLL_SECONDS = (0.01, 0.5)
"""Shortest and longest pause between two readings of the tree's CPU time. The watchdog
waits as long as the tree, on every core of the host, could not use up what is left."""


class Killer(Protocol):
    """How a backend signals the whole tree of one sandbox."""

    def terminate_all(self) -> None:
        """SIGTERM every process of the tree (best effort)."""

    def kill_all(self) -> None:
        """SIGKILL the whole tree; nothing of it may survive."""


class SandboxProcess:
    """Popen-like handle of a sandboxed command. ``returncode`` is None while it runs."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        killer: Killer,
        limits: Limits,
        cleanup: Callable[[], str | None] | None = None,
        grace_seconds: float = 2.0,
        entered: Callable[[], bool] | None = None,
        cpu_clock: CpuClock | None = None,
    ) -> None:
        self._popen = popen
        self._killer = killer
        self._entered = entered
        self._limits = limits
        self._cleanup = cleanup
        self.grace_seconds = grace_seconds
        self.started = time.monotonic()
        self.timed_out = False
        self.ending: Ending | None = None
        self._limit_hit: str | None = None
        self._stopped_by: LimitName | None = None
        self._finished = False
        self._done = threading.Event()
        self._wake = threading.Event()
        self._lock = threading.RLock()
        self._cpu_clock = cpu_clock
        self._cpu_at_end: float | None = None
        # The tree's CPU time (counted from its start) at which the watchdog stops it.
        self._cpu_budget: float | None = limits.cpu_seconds if cpu_clock is not None else None
        if limits.wall_seconds is not None or cpu_clock is not None:
            threading.Thread(target=self._watchdog, daemon=True,
                             name=f"sandbox-watchdog-{popen.pid}").start()

    @property
    def pid(self) -> int:
        """Host pid of the outermost sandbox process (the launcher, then bwrap)."""
        return self._popen.pid

    @property
    def stdin(self) -> IO[bytes] | None:
        return self._popen.stdin

    @property
    def stdout(self) -> IO[bytes] | None:
        return self._popen.stdout

    @property
    def stderr(self) -> IO[bytes] | None:
        return self._popen.stderr

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    def poll(self) -> int | None:
        code = self._popen.poll()
        if code is not None:
            self._finish("exited")
        return code

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the end; raises ``subprocess.TimeoutExpired`` like Popen (the
        command keeps running; the wall-clock limit still applies). Wakes as soon as the
        process exits (Popen's own timed wait polls with sleeps of up to 50 ms)."""
        if timeout is not None and self._popen.returncode is None:
            _wait_exit(self._popen.pid, timeout)
        code = self._popen.wait(timeout)
        self._finish("exited")
        return code

    def kill_tree(self, grace_seconds: float | None = None) -> Ending:
        """SIGTERM the whole tree, SIGKILL it after the grace period; says how it ended."""
        grace = self.grace_seconds if grace_seconds is None else grace_seconds
        with self._lock:
            if self._popen.poll() is not None:
                self._finish("exited")
                return self.ending or "exited"
            self._killer.terminate_all()
            try:
                self._popen.wait(grace)
                ending: Ending = "terminated"
            except subprocess.TimeoutExpired:
                self._killer.kill_all()
                self._popen.kill()
                self._popen.wait()
                ending = "killed"
            self._finish(ending)
            return ending

    @property
    def never_entered(self) -> bool:
        """True when the command ended without the sandbox ever having been set up (the
        launcher could not start it: e.g. no process left under the uid's limit). The
        sandboxed command cannot fake this: it comes from the backend, not from its output.
        Always False for backends that cannot tell."""
        return (self._popen.returncode is not None and self._entered is not None
                and not self._entered())

    @property
    def cpu_seconds(self) -> float | None:
        """CPU time of the whole tree so far (once ended, in all), where the backend counts
        it."""
        if self._finished:
            with self._lock:  # _finish holds it until the count is read
                return self._cpu_at_end
        return self._cpu_clock() if self._cpu_clock is not None else None

    def limit_cpu(self, seconds: float) -> bool:
        """From now on the whole tree may use at most ``seconds`` more CPU time (never more
        than the spec's ``cpu_seconds`` allows); says whether the backend counts the tree's
        CPU time (else only each process's own RLIMIT_CPU holds)."""
        used = self.cpu_seconds
        if used is None:
            return False
        with self._lock:
            budget = used + seconds
            if self._cpu_budget is None or budget < self._cpu_budget:
                self._cpu_budget = budget
        self._wake.set()
        return True

    @property
    def killed_by_limit(self) -> LimitName | None:
        """The limit that ended the command, where it can be told (see CompletedRun)."""
        if self._stopped_by is not None:
            return self._stopped_by
        code = self._popen.returncode
        if code is None:
            return None
        number = -code if code < 0 else code - 128 if code > 128 else 0
        if number == signal.SIGXCPU:
            return "cpu_seconds"
        if number == signal.SIGXFSZ:
            return "file_size_mb"
        if self._limit_hit == "memory_mb":
            return "memory_mb"
        if self._limit_hit == "pids" and code != 0:
            return "pids"
        return None

    def expire(self) -> None:
        """End the command now as if its wall-clock limit had passed (for a caller whose
        clock starts later than the sandbox, e.g. once a service the command needs is up)."""
        self._stop("wall_seconds", self.grace_seconds)

    def _stop(self, limit: LimitName, grace_seconds: float) -> None:
        with self._lock:
            if self._popen.poll() is None and self._stopped_by is None:
                self._stopped_by = limit
                self.timed_out = limit == "wall_seconds"
        if self._stopped_by == limit:
            self.kill_tree(grace_seconds)
        else:
            self.poll()

    def _watchdog(self) -> None:
        # Woken early by _finish and limit_cpu; kills whatever still runs at the deadline
        # or once the tree used its CPU budget.
        wall = self._limits.wall_seconds
        deadline = self.started + wall if wall is not None else None
        while not self._done.is_set():
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                self.expire()
                return
            used = self.cpu_seconds
            left = None if used is None or self._cpu_budget is None else self._cpu_budget - used
            if left is not None and left <= 0:
                # No grace: in one the tree could go on using every core it runs on.
                self._stop("cpu_seconds", 0.0)
                return
            pauses = [] if deadline is None else [deadline - now]
            if left is not None:
                shortest, longest = POLL_SECONDS
                pauses.append(min(longest, max(shortest, left / (os.cpu_count() or 1))))
            self._wake.wait(min(pauses) if pauses else None)
            self._wake.clear()

    def _finish(self, ending: Ending) -> None:
        with self._lock:
            if self._finished:
                return
            self._finished = True
            self._done.set()
            self._wake.set()
            self.ending = ending
            # Read while the tree's cgroup (or container) is still there.
            if self._cpu_clock is not None:
                self._cpu_at_end = self._cpu_clock()
            # The outer process is gone; make sure nothing of the tree outlives it.
            with contextlib.suppress(Exception):
                self._killer.kill_all()
            if self._cleanup is not None:
                self._limit_hit = self._cleanup()


def _wait_exit(pid: int, timeout: float) -> None:
    """Block until process ``pid`` (a child not yet reaped) exits or ``timeout`` passes."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:  # already reaped, or no pidfd on this kernel: Popen's wait decides
        return
    try:
        select.select([pidfd], [], [], max(timeout, 0.0))
    finally:
        os.close(pidfd)


def _drain(stream: IO[bytes] | None, cap: int, sink: list[bytes], cut: list[bool]) -> None:
    if stream is None:
        return
    kept = 0
    with stream:
        while chunk := os.read(stream.fileno(), 65536):
            room = cap - kept
            if len(chunk) > room:
                cut[0] = True
            if room > 0:
                sink.append(chunk[:room])
                kept += min(room, len(chunk))


def _feed(stream: IO[bytes] | None, data: bytes | None) -> None:
    if stream is None:
        return
    with contextlib.suppress(BrokenPipeError, OSError), stream:
        if data:
            stream.write(data)


def collect(process: SandboxProcess, input: bytes | None, max_output_bytes: int) -> CompletedRun:
    """Feed ``input``, read stdout/stderr (keeping at most ``max_output_bytes`` each so a
    hostile command cannot exhaust the parent's memory) and wait for the end."""
    outputs: list[list[bytes]] = [[], []]
    cut = [False]
    threads = [
        threading.Thread(target=_feed, args=(process.stdin, input), daemon=True),
        threading.Thread(
            target=_drain, args=(process.stdout, max_output_bytes, outputs[0], cut), daemon=True
        ),
        threading.Thread(
            target=_drain, args=(process.stderr, max_output_bytes, outputs[1], cut), daemon=True
        ),
    ]
    for thread in threads:
        thread.start()
    returncode = process.wait()
    for thread in threads:
        thread.join(timeout=process.grace_seconds + 5)
    return CompletedRun(
        returncode=returncode,
        stdout=b"".join(outputs[0]),
        stderr=b"".join(outputs[1]),
        wall_seconds=time.monotonic() - process.started,
        timed_out=process.timed_out,
        killed_by_limit=process.killed_by_limit,
        ending=process.ending or "exited",
        output_truncated=cut[0],
        cpu_seconds=process.cpu_seconds,
    )


class RunsToCompletion:
    """``run`` for any backend, in terms of its ``start``."""

    def start(
        self, argv: list[str], spec: SandboxSpec,
        stdin: Stream = None, stdout: Stream = None, stderr: Stream = None,
    ) -> SandboxProcess:
        raise NotImplementedError

    def run(
        self, argv: list[str], spec: SandboxSpec, input: bytes | None = None,
        max_output_bytes: int = 16 * 1024 * 1024,
    ) -> CompletedRun:
        """Run to the end (or the wall-clock limit) and collect the outputs."""
        stdin = subprocess.PIPE if input is not None else subprocess.DEVNULL
        process = self.start(argv, spec, stdin=stdin, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        return collect(process, input, max_output_bytes)
