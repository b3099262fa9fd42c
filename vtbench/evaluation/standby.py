"""Harness sandboxes started ahead of their validation (bwrap only).

A fresh harness sandbox costs a validation the sandbox's start and the interpreter's, on
the path to its first request (about 70 ms of a 2-core VM's 200). A *standby* is that
sandbox started in advance, with the spec :func:`harness.harness_spec` gives every harness,
around a folder of its own: ``harness/`` (empty until a validation copies its harness in),
``io/`` and ``server/`` (the model's socket appears there later; the relay retries until
it does). Its command is a small trusted launcher that waits on its stdin for one order,
``{"argv": [...], "cpu_seconds": N}``, lowers its own CPU limit to N (the host lowers
the budget of the sandbox's whole tree to N more as it sends the order), and then runs argv
as ``python SCRIPT.py ...`` would when argv names this interpreter and a script (in the same
process, as a fresh ``__main__`` module: its ``__file__``, ``sys.argv``, the script's folder
first on ``sys.path``), or else ``exec``s it. So the harness runs with the uid, mounts, limits and
environment it would get from :func:`harness.start_harness`; only its process was started
earlier. A standby serves one harness, is replaced as it is taken, and the replacement is
started by one long-lived thread (bwrap dies with the thread that started it); all die with
this process. A standby runs on the cores it was started for (an episode's reserved cores,
or none named) and stands in only for a harness of those cores.
"""

import atexit
import contextlib
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vtbench.evaluation.harness import (
    Cores,
    LayOut,
    StartedHarness,
    harness_argv,
    harness_spec,
    write_inputs,
)
from vtbench.sandbox import Sandbox, SandboxProcess, SandboxSpec, prepare_writable

STANDBY_SECONDS = 24 * 3600.0
"""Wall-clock limit of a standby's sandbox; a harness's own limit is its caller's deadline."""
SOCKET_WAIT_SECONDS = 600.0
"""How long a standby's relay retries for the model's socket once its harness runs."""

LAUNCHER = r"""
import json, os, resource, sys
order = json.loads(sys.stdin.buffer.readline() or b"null")
if order is None:
    sys.exit(0)
used = resource.getrusage(resource.RUSAGE_SELF)
limit = int(used.ru_utime + used.ru_stime) + order["cpu_seconds"]
resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 1))  # as prlimit sets it
argv = order["argv"]

def found(name):
    if "/" in name:
        return name
    for folder in os.environ.get("PATH", "").split(":"):
        path = os.path.join(folder, name)
        if os.access(path, os.X_OK):
            return path
    return None

program = found(argv[0])
if (program and os.path.realpath(program) == os.path.realpath(sys.executable)
        and len(argv) > 1 and argv[1].endswith(".py") and not argv[1].startswith("-")):
    import importlib.machinery, types
    script = os.path.abspath(argv[1])
    main = types.ModuleType("__main__")
    main.__file__, main.__cached__, main.__annotations__ = script, None, {}
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", script)
    main.__builtins__ = __builtins__
    sys.modules["__main__"] = main
    sys.argv = argv[1:]
    sys.path[0] = os.path.dirname(script)
    with open(script, "rb") as source:
        code = compile(source.read(), script, "exec")
    exec(code, main.__dict__)
else:
    os.execvp(argv[0], argv)
"""


class Standby:
    """A started harness sandbox waiting for its harness (see the module docstring)."""

    def __init__(self, sandbox: Sandbox, cores: Cores = None) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="vtbench-eval-"))
        os.chmod(self.folder, 0o711)
        for name, mode in (("harness", 0o755), ("server", 0o711)):
            (self.folder / name).mkdir(mode=mode)
        prepare_writable(self.folder / "io")
        self.stderr_path = self.folder / "harness.stderr"
        with self.stderr_path.open("wb") as stderr:
            self.process: SandboxProcess = sandbox.start(
                [sys.executable, "-c", LAUNCHER], standby_spec(self.folder, cores),
                stdin=subprocess.PIPE,
                stdout=stderr, stderr=stderr)

    def alive(self) -> bool:
        return self.process.poll() is None

    def launch(self, entry: list[str], instances: list[dict[str, Any]], cpu_seconds: float,
               decoding: dict[str, Any] | None = None,
               lay_out: LayOut | None = None) -> StartedHarness:
        """Give the standby its harness (already copied into ``folder/harness``), limited to
        ``cpu_seconds`` of CPU time (its wall clock is the caller's); ``lay_out``: see
        :func:`~vtbench.evaluation.harness.write_inputs`."""
        io_dir = self.folder / "io"
        write_inputs(io_dir, instances, lay_out)
        budget = int(cpu_seconds) + 1
        order = {"argv": harness_argv(entry, decoding), "cpu_seconds": budget}
        self.process.limit_cpu(budget)
        stdin = self.process.stdin
        assert stdin is not None
        started = time.monotonic()
        with contextlib.suppress(BrokenPipeError):  # it died: finish_harness reports that
            stdin.write(json.dumps(order).encode() + b"\n")
            stdin.close()
        return StartedHarness(self.process, io_dir, self.stderr_path, started)

    def close(self) -> None:
        """End the sandbox if it still runs and remove its folder."""
        if self.process.poll() is None:
            self.process.kill_tree(grace_seconds=0)
        shutil.rmtree(self.folder, ignore_errors=True)


def standby_spec(folder: Path, cores: Cores = None) -> SandboxSpec:
    """A harness's sandbox spec around ``folder``, on ``cores``, with a wall-clock limit and
    a CPU budget for waiting (:meth:`Standby.launch` lowers the budget to the harness's)."""
    return harness_spec(folder / "harness", folder / "io", folder / "server" / "model.sock",
                        STANDBY_SECONDS, lazy=True, grace=SOCKET_WAIT_SECONDS, cores=cores)


def spec_key(sandbox: Sandbox, cores: Cores = None) -> str:
    """What a standby shares with every harness sandbox it may stand in for: the backend
    and the spec (its cores included), up to the folder."""
    return sandbox.name + "\n" + standby_spec(Path("/FOLDER"), cores).model_dump_json()


class _Pool:
    """At most one standby per spec key, replaced from one long-lived starter thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._ready: dict[str, Standby] = {}
        self._wanted: queue.SimpleQueue[tuple[Sandbox, Cores]] = queue.SimpleQueue()
        self._starting: set[str] = set()
        self._thread: threading.Thread | None = None

    def take(self, sandbox: Sandbox, cores: Cores = None) -> Standby | None:
        """A live standby for ``sandbox`` on ``cores`` if one is ready."""
        with self._lock:
            standby = self._ready.pop(spec_key(sandbox, cores), None)
        if standby is not None and not standby.alive():
            standby.close()
            return None
        return standby

    def replenish(self, sandbox: Sandbox, cores: Cores = None) -> None:
        """Start a standby for ``sandbox`` on ``cores`` unless one is ready or starting."""
        key = spec_key(sandbox, cores)
        with self._lock:
            if key in self._ready or key in self._starting:
                return
            self._starting.add(key)
            self._wanted.put((sandbox, cores))
            if self._thread is None:
                self._thread = threading.Thread(target=self._start_forever, daemon=True,
                                                name="harness-standby-starter")
                self._thread.start()

    def _start_forever(self) -> None:
        while True:
            sandbox, cores = self._wanted.get()
            key = spec_key(sandbox, cores)
            try:
                standby: Standby | None = Standby(sandbox, cores)
            except Exception:  # no standby: validations start their own sandbox
                standby = None
            with self._lock:
                self._starting.discard(key)
                old = self._ready.pop(key, None)
                if standby is not None:
                    self._ready[key] = standby
                self._changed.notify_all()
            if old is not None:
                old.close()

    def wait(self, sandbox: Sandbox, timeout: float, cores: Cores = None) -> bool:
        """Until a standby for ``sandbox`` on ``cores`` is ready (True) or none is starting
        (False)."""
        key = spec_key(sandbox, cores)
        deadline = time.monotonic() + timeout
        with self._lock:
            while key not in self._ready and key in self._starting:
                if not self._changed.wait(max(0.0, deadline - time.monotonic())):
                    break
            return key in self._ready

    def close_all(self) -> None:
        with self._lock:
            ready, self._ready = list(self._ready.values()), {}
        for standby in ready:
            standby.close()


_pool = _Pool()
atexit.register(_pool.close_all)


def warm(sandbox: Sandbox, timeout: float = 30.0, cores: Cores = None) -> bool:
    """Start a standby for ``sandbox`` on ``cores`` and wait for it (e.g. before a first
    validation); says whether one is ready."""
    replenish(sandbox, cores)
    return sandbox.name == "bwrap" and _pool.wait(sandbox, timeout, cores)


def replenish(sandbox: Sandbox, cores: Cores = None) -> None:
    """Start the next standby for ``sandbox`` on ``cores`` in the background (bwrap only).
    Best called while the model generates, when the start competes least with the
    validation's own."""
    if sandbox.name == "bwrap":
        _pool.replenish(sandbox, cores)


@contextlib.contextmanager
def evaluation_folder(sandbox: Sandbox, use_standby: bool = True,
                      cores: Cores = None) -> Iterator[tuple[Path, Standby | None]]:
    """A folder for one evaluation, with ``server/`` made, and with ``use_standby`` the
    standby sandbox on ``cores`` around it when one is ready (bwrap only); removed
    afterwards."""
    standby = _pool.take(sandbox, cores) if use_standby and sandbox.name == "bwrap" else None
    if standby is not None:
        try:
            yield standby.folder, standby
        finally:
            standby.close()
        return
    folder = Path(tempfile.mkdtemp(prefix="vtbench-eval-"))
    try:
        os.chmod(folder, 0o711)
        (folder / "server").mkdir(mode=0o711)
        yield folder, None
    finally:
        shutil.rmtree(folder, ignore_errors=True)
