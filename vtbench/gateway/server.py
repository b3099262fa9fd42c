"""Serving the gateway with uvicorn on a unix socket (default) or on loopback TCP.

The socket is the episode's identity: the runner binds only that episode's socket into
its sandbox, so whoever connects is that episode and no token is needed inside the
sandbox. TCP is offered for agents running outside a sandbox and is refused on any
address but loopback.
"""

import socket
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn

from vtbench.errors import GatewayError

LOOPBACK = ("127.0.0.1", "::1", "localhost")


def _config(app: Any, socket_path: Path | None) -> uvicorn.Config:
    return uvicorn.Config(
        app, uds=str(socket_path) if socket_path else None, lifespan="on",
        access_log=False, log_level="warning", timeout_keep_alive=30,
        timeout_graceful_shutdown=5)


def bind_tcp(host: str, port: int) -> socket.socket:
    if host not in LOOPBACK:
        raise GatewayError(f"gateway: refusing to listen on {host}",
                           hint="use a unix socket or --host 127.0.0.1")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        raise GatewayError(f"gateway: cannot listen on {host}:{port}: {err}") from err
    return sock


def serve(app: Any, socket_path: Path | None = None, host: str = "127.0.0.1",
          port: int | None = None) -> None:
    """Serve in the foreground until SIGINT/SIGTERM."""
    if (socket_path is None) == (port is None):
        raise GatewayError("gateway: give exactly one of a socket path or a TCP port")
    sockets = [bind_tcp(host, port)] if port is not None else None
    if socket_path is not None:
        socket_path.parent.mkdir(parents=True, exist_ok=True)
    uvicorn.Server(_config(app, socket_path)).run(sockets=sockets)


class GatewayServer:
    """Serve an app from a background thread (the runner, tests, benchmarks)."""

    def __init__(self, app: Any, socket_path: Path | None = None, host: str = "127.0.0.1",
                 port: int | None = None) -> None:
        if socket_path is None and port is None:
            port = 0
        self._sockets = [bind_tcp(host, port)] if port is not None else None
        self.socket_path = socket_path
        self.host = host
        self._server = uvicorn.Server(_config(app, socket_path))
        self._thread = threading.Thread(target=self._run, name="vtbench-gateway", daemon=True)
        self._error: BaseException | None = None

    @property
    def port(self) -> int | None:
        return self._sockets[0].getsockname()[1] if self._sockets else None

    @property
    def base_url(self) -> str:
        """URL for clients; with a unix socket the host part is only a name."""
        return f"http://{self.host}:{self.port}" if self.port is not None else "http://gateway"

    def _run(self) -> None:
        try:
            self._server.run(sockets=self._sockets)
        except BaseException as err:
            self._error = err

    def start(self, timeout_s: float = 20.0) -> "GatewayServer":
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if self._error is not None or not self._thread.is_alive():
                raise GatewayError(f"gateway failed to start: {self._error!r}")
            if time.monotonic() > deadline:
                raise GatewayError("gateway did not start in time")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=15)

    def __enter__(self) -> "GatewayServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
