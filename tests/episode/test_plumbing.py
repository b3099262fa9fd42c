"""The runner's plumbing to the research sandbox, with real pipes, processes and sockets."""

import contextlib
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from vtbench.episode.plumbing import MAX_CONNECTIONS, output_pipe, relayed_sockets


def test_agent_output_beyond_its_limit_is_dropped_without_blocking_the_agent(
        tmp_path: Path) -> None:
    log = tmp_path / "agent.log"
    with output_pipe(log, limit=1000) as output:
        done = subprocess.run([sys.executable, "-c", "import sys; sys.stdout.write('x' * 10**7)"],
                              stdout=output, timeout=60)
    assert done.returncode == 0
    text = log.read_text()
    assert text.startswith("x" * 1000) and text.count("x") == 1000
    assert "agent output beyond 1000 bytes dropped" in text


class Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


@pytest.fixture
def echo_socket(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "upstream.sock"
    server = socketserver.ThreadingUnixStreamServer(str(path), Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield path
    server.shutdown()
    server.server_close()


def connect(path: Path) -> socket.socket:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(10)
    client.connect(str(path))
    return client


def test_a_relayed_socket_names_nothing_of_its_host_path_and_carries_bytes_both_ways(
        echo_socket: Path) -> None:
    with relayed_sockets({"grader": echo_socket}) as relayed:
        path = relayed["grader"]
        assert path.name == "grader.sock" and path.parent.name.startswith("vtbench-")
        assert str(echo_socket.parent) not in str(path)
        payload = bytes(range(256)) * 4096  # 1 MiB: several chunks each way
        with connect(path) as client:
            def send() -> None:
                client.sendall(payload)
                client.shutdown(socket.SHUT_WR)

            sender = threading.Thread(target=send)
            sender.start()
            received = b""
            while chunk := client.recv(65536):
                received += chunk
            sender.join()
        assert received == payload
    assert not path.parent.exists()


def test_a_relay_carries_a_bounded_number_of_connections(echo_socket: Path) -> None:
    with relayed_sockets({"gateway": echo_socket}) as relayed:
        held = [connect(relayed["gateway"]) for _ in range(MAX_CONNECTIONS)]
        for client in held:  # each is carried through to the upstream
            client.sendall(b"ping")
            assert client.recv(4) == b"ping"
        with connect(relayed["gateway"]) as extra:
            assert extra.recv(4) == b""  # closed at once
        held.pop().close()  # its slot is free once the relay has seen it end
        assert carried_within(relayed["gateway"], seconds=10)
        for client in held:
            client.close()


def carried_within(path: Path, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with connect(path) as client, contextlib.suppress(OSError):
            client.sendall(b"pong")
            if client.recv(4) == b"pong":
                return True
        time.sleep(0.05)
    return False
