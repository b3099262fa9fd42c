"""The research sandbox's plumbing to the host, under names that tell the agent nothing.

A file or socket bound into a sandbox shows its host path in the sandbox's
``/proc/self/mountinfo`` (a bind mount keeps the path of its source within its filesystem,
wherever it is staged), and an open file shows its path in ``/proc/self/fd``. Were the
agent's output the host file ``EPISODE/agent.log`` and the grader's socket
``$VTBENCH_HOME/grader/grader.sock``, the agent would learn where the private store and
its own episode folder lie. So the runner hands the sandbox only:

* :func:`output_pipe`: a pipe for stdout and stderr (``pipe:[N]`` inside), which a thread of
  the runner copies to ``agent.log``, at most :data:`AGENT_LOG_LIMIT` bytes of it (the rest
  is read and dropped, so the agent never blocks on a full pipe);
* :func:`relayed_sockets`: for each host socket (the grader's, the episode's gateway's), a
  socket of the runner's own in a fresh folder ``/tmp/vtbench-<random>/``, owned by the
  runner and reachable by the sandbox uid only; two threads of the runner per connection
  copy its bytes to the real socket and back (one per direction, so a full buffer one way
  never stalls the other). The grader and the gateway see the runner
  as their peer; what they trust is the episode's token and socket, as before.

The workspace, the other bind, names nothing either where it is a filesystem of its own
(:mod:`vtbench.episode.disk`, a root runner); a runner without root binds the plain folder,
and its host path shows in ``mountinfo``. The Python runtime is mounted at its own host
path (the interpreter runs from there), so that path is no secret.

Trusted code. It trusts the host sockets it relays to; it does not trust what the agent
sends (bytes are copied, never parsed), and bounds what the agent can cost the runner:
at most :data:`MAX_CONNECTIONS` open connections per socket (more are closed at once).
"""

import contextlib
import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

AGENT_LOG_LIMIT = 256 << 20
"""Bytes of agent output kept in ``agent.log``."""
MAX_CONNECTIONS = 64
"""Open connections one relayed socket carries at once."""
_CHUNK = 1 << 16
_POLL_SECONDS = 0.2


@contextlib.contextmanager
def output_pipe(log: Path, limit: int = AGENT_LOG_LIMIT) -> Iterator[int]:
    """Yield the write end of a pipe whose bytes go to ``log`` (appended, at most ``limit``
    of them); on exit the end is closed and the copy waits for the last writer to go."""
    read_end, write_end = os.pipe()
    sink = log.open("ab")
    copier = threading.Thread(target=_copy_output, args=(read_end, sink, limit), daemon=True,
                              name="agent-output")
    copier.start()
    try:
        yield write_end
    finally:
        os.close(write_end)
        copier.join(timeout=30)


def _copy_output(read_end: int, sink: BinaryIO, limit: int) -> None:
    kept = 0
    with os.fdopen(read_end, "rb", buffering=0) as source, sink as out:
        while chunk := source.read(_CHUNK):
            if kept < limit:
                out.write(chunk[:limit - kept])
                out.flush()
                kept += len(chunk)
                if kept >= limit:
                    out.write(f"\n[vtbench: agent output beyond {limit} bytes dropped]\n"
                              .encode())
                    out.flush()


@contextlib.contextmanager
def relayed_sockets(targets: dict[str, Path]) -> Iterator[dict[str, Path]]:
    """For each ``name -> host socket``, yield ``name -> socket in a neutral folder`` that
    relays every connection to it, for as long as the block runs."""
    from vtbench.sandbox import grant_socket

    folder = Path(tempfile.mkdtemp(prefix="vtbench-", dir="/tmp"))
    relays = [_Relay(folder / f"{name}.sock", target) for name, target in targets.items()]
    try:
        for relay in relays:
            grant_socket(relay.path)
            relay.start()
        yield {name: relay.path for name, relay in zip(targets, relays, strict=True)}
    finally:
        for relay in relays:
            relay.close()
        shutil.rmtree(folder, ignore_errors=True)


class _Relay:
    """One listening socket whose connections are copied to ``target`` and back."""

    def __init__(self, path: Path, target: Path) -> None:
        self.path, self.target = path, target
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(path))
        self._listener.listen(MAX_CONNECTIONS)
        self._listener.settimeout(_POLL_SECONDS)
        self._stopping = threading.Event()
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._accepting = threading.Thread(target=self._accept, daemon=True,
                                           name=f"relay-{path.name}")

    def start(self) -> None:
        self._accepting.start()

    def close(self) -> None:
        self._stopping.set()
        self._accepting.join(timeout=5)
        self._listener.close()

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if not self._slots.acquire(blocking=False):
                client.close()
                continue
            threading.Thread(target=self._carry, args=(client,), daemon=True,
                             name=f"relay-{self.path.name}-connection").start()

    def _carry(self, client: socket.socket) -> None:
        try:
            with client, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as upstream:
                try:
                    upstream.connect(str(self.target))
                except OSError:
                    return
                back = threading.Thread(target=_copy, args=(upstream, client), daemon=True,
                                        name=f"relay-{self.path.name}-back")
                back.start()
                _copy(client, upstream)
                back.join()
        finally:
            self._slots.release()


def _copy(source: socket.socket, sink: socket.socket) -> None:
    """One direction of a connection, until its end (passed on) or an error (then both
    directions end)."""
    try:
        while chunk := source.recv(_CHUNK):
            sink.sendall(chunk)
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
