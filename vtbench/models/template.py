"""Model servers forked from a warm template process instead of started from scratch.

Starting our model server costs seconds of interpreter start and torch/transformers
imports, which dominates a validation on a tiny model. The template
(``python -m vtbench.models.template``) imports all that once
(:mod:`vtbench.models._template_preload`), then forks one server per request; a fork only
loads its checkpoint. The template is single-threaded and never touches a GPU, so its
forks may use one.

Protocol, over a unix socket in a private folder: the caller sends one JSON line
``{"argv": [...], "log": PATH, "cgroups": [PROCS_FILE, ...], "cores": [N, ...]}`` (the
fork joins each of those groups, then takes the affinity of ``cores``, before it runs a
line of the server; ``cgroups`` and ``cores`` may be left out); the
template answers ``{"pid": N}`` at once and
``{"exit": CODE}`` (negative: killed by that signal) when the server ends, then closes the
connection. Lifetimes are tied together: the template exits when its caller exits (and
removes its folder), each server when the template's caller exits (``--exit-with``), and a
server whose connection closes before it ended is terminated.
"""

import contextlib
import gc
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from vtbench.errors import ModelServerError
from vtbench.sandbox import on_cores

_STARTUP_SECONDS = 120.0
_LOG_NAME = "template.log"


class ForkedProcess:
    """A server forked from the template, with the part of ``subprocess.Popen``'s interface
    the server handles use (``pid``, ``poll``, ``terminate``, ``kill``, ``wait``)."""

    def __init__(self, argv: list[str], log_path: Path, cgroups: Sequence[Path] = (),
                 cores: Sequence[int] | None = None) -> None:
        """Asks for the fork and returns at once (the fork costs the template ~20 ms,
        which the caller may spend on other work); :attr:`pid` waits for it. The fork
        joins the groups whose ``cgroup.procs`` files ``cgroups`` names first, then runs
        on ``cores`` (None: the template's)."""
        self._connection = _template().request({"argv": argv, "log": str(log_path),
                                                "cgroups": [str(c) for c in cgroups],
                                                "cores": list(cores or [])})
        self._buffer = b""
        self._code: int | None = None
        self._pid: int | None = None

    @property
    def pid(self) -> int:
        if self._pid is None:
            answer = self._read_message(_STARTUP_SECONDS)
            if "pid" not in answer:
                self._code = answer.get("exit", -signal.SIGKILL)
                raise ModelServerError("the model-server template died while forking a server")
            self._pid = answer["pid"]
        return self._pid

    def _read_message(self, timeout: float | None) -> dict[str, int]:
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([self._connection], [], [], timeout)
            if not ready:
                raise subprocess.TimeoutExpired("model server", timeout or 0.0)
            chunk = self._connection.recv(4096)
            if not chunk:
                return {"exit": -signal.SIGKILL}  # the template itself died
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return dict(json.loads(line))

    def poll(self) -> int | None:
        with contextlib.suppress(subprocess.TimeoutExpired, ModelServerError):
            self.wait(0)
        return self._code

    def wait(self, timeout: float | None = None) -> int:
        """The exit code; raises ``subprocess.TimeoutExpired`` after ``timeout``."""
        if self._code is None:
            _ = self.pid  # its message comes first
            self._code = int(self._read_message(timeout)["exit"])
            self._connection.close()
        return self._code

    def _signal(self, number: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, number)

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def kill_detached(self) -> None:
        """SIGKILL and hang up without waiting for the end: the template reaps it."""
        self.kill()
        if self._code is None:
            self._connection.close()
            self._code = -signal.SIGKILL


class _Template:
    """The running template process of this caller."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="vtb-tpl-"))
        self.socket = self.folder / "template.sock"
        log = (self.folder / _LOG_NAME).open("wb")
        # On every core of this process (its main thread's), not on those of the thread
        # that happens to start it: a fork given no cores keeps the template's.
        with on_cores(sorted(os.sched_getaffinity(os.getpid()))):
            self.process = subprocess.Popen(
                [sys.executable, "-m", "vtbench.models.template", str(self.socket),
                 str(os.getpid())], stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT)
        log.close()

    def alive(self) -> bool:
        return self.process.poll() is None

    def request(self, message: dict[str, object]) -> socket.socket:
        deadline = time.monotonic() + _STARTUP_SECONDS
        while True:
            connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                connection.connect(str(self.socket))
                connection.sendall(json.dumps(message).encode() + b"\n")
                return connection
            except (FileNotFoundError, ConnectionRefusedError):
                connection.close()
                if not self.alive() or time.monotonic() > deadline:
                    log = (self.folder / _LOG_NAME).read_text(errors="replace")
                    raise ModelServerError(f"the model-server template did not start: "
                                           f"{log.strip()[-300:]}",
                                           hint=f"see {self.folder / _LOG_NAME}") from None
                time.sleep(0.02)


_lock = threading.Lock()
_running: _Template | None = None


def _template() -> _Template:
    """This process's template, started on first use (and again if it died)."""
    global _running
    with _lock:
        if _running is None or not _running.alive():
            _running = _Template()
        return _running


def start_template() -> None:
    """Start this process's template now and return at once: the first server forked from
    it then finds the imports done. A template started by the first validation made that
    validation's server start take 20 s (torch, transformers and CUDA imported) instead of
    about 1 s. The caller's environment (``CUDA_VISIBLE_DEVICES``) must be final: the
    template and its servers inherit it."""
    _template()


def _serve_forever(socket_path: Path, owner: int) -> None:
    """The template's loop: fork a server per request until ``owner`` exits."""
    from vtbench.models._template_preload import warm  # (the point of the template)

    warm()
    # What the preload made lives as long as the template: a fork's collections then never
    # walk it (tens of ms per fork, and each walk copies the pages it touches).
    gc.freeze()

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(socket_path))
    listener.listen(64)
    owner_fd = os.pidfd_open(owner)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, socket.socket | None] = {}  # server pid -> its caller's connection
    while True:
        connections = {c.fileno(): pid for pid, c in children.items() if c is not None}
        watched = [listener.fileno(), owner_fd, wake_read, *connections]
        ready, _, _ = select.select(watched, [], [])
        if owner_fd in ready:
            _remove_own_files(socket_path)
            return
        if wake_read in ready:
            os.read(wake_read, 4096)
            _reap(children)
        if listener.fileno() in ready:
            inherited = [listener.fileno(), owner_fd, wake_read, wake_write, *connections]
            _fork_one(listener, children, owner, inherited)
        for fd, pid in connections.items():
            connection = children.get(pid)
            if fd in ready and connection is not None and not connection.recv(1):
                connection.close()  # the caller hung up: nobody waits for this server
                children[pid] = None
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)


def _remove_own_files(socket_path: Path) -> None:
    """Remove the socket, the log and their folder once the caller is gone (the folder
    only if nothing else is in it)."""
    for path in (socket_path, socket_path.with_name(_LOG_NAME)):
        path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        socket_path.parent.rmdir()


def _fork_one(listener: socket.socket, children: dict[int, socket.socket | None], owner: int,
              inherited: list[int]) -> None:
    """Fork a server for the next request; ``inherited`` are the template's own fds, which
    the fork closes."""
    connection, _ = listener.accept()
    with connection.makefile("rb") as stream:
        request = json.loads(stream.readline())
    pid = os.fork()
    if pid == 0:
        for fd in [*inherited, connection.fileno()]:
            with contextlib.suppress(OSError):
                os.close(fd)
        _run_child(request["argv"], request["log"], owner, request.get("cgroups", []),
                   request.get("cores", []))
    connection.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    children[pid] = connection


def _run_child(argv: list[str], log_path: str, owner: int, cgroups: list[str],
               cores: list[int]) -> None:
    """In the fork: join the cgroups, run on ``cores``, default signals, output to the log,
    run the server, never return (a group it cannot join or cores it cannot have end it:
    it never runs outside its limits)."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        for procs in cgroups:
            try:
                Path(procs).write_text(str(os.getpid()))
            except OSError as err:
                print(f"error: the model server cannot join its cgroup: {err}", flush=True)
                code = 2
                return
        if cores:
            try:
                os.sched_setaffinity(0, cores)
            except OSError as err:
                print(f"error: the model server cannot run on cores {cores}: {err}", flush=True)
                code = 2
                return
        from vtbench.models.server import main

        code = main([*argv, "--exit-with", str(owner)])
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _reap(children: dict[int, socket.socket | None]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        connection = children.pop(pid, None)
        if connection is not None:
            with contextlib.suppress(OSError):
                connection.sendall(json.dumps({"exit": os.waitstatus_to_exitcode(status)})
                                   .encode() + b"\n")
            connection.close()


if __name__ == "__main__":
    _serve_forever(Path(sys.argv[1]), int(sys.argv[2]))
