"""Network attacks from inside the sandbox (every isolating backend), judged from inside
(no traffic leaves)."""

import http.server
import os
import socket
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sandbox.helpers import python_code, python_spec
from vtbench.sandbox import Sandbox, grant_socket


def test_the_only_interface_is_loopback_and_there_is_no_route(sandbox: Sandbox) -> None:
    result = sandbox.run(["/bin/sh", "-c", "cat /proc/net/dev; echo ===; cat /proc/net/route"],
                         python_spec())
    assert result.returncode == 0, result.stderr
    devices, routes = result.stdout.decode().split("===\n")
    interfaces = [line.split(":")[0].strip() for line in devices.splitlines()[2:]]
    assert interfaces == ["lo"]
    assert routes.splitlines()[1:] == []  # only the header line


def test_an_address_off_this_machine_is_unreachable(sandbox: Sandbox) -> None:
    # 192.0.2.1 is TEST-NET-1; with no interface but lo, connect fails before any packet.
    code = (
        "import socket\n"
        "try:\n"
        "    socket.create_connection(('192.0.2.1', 80), timeout=5)\n"
        "    print('connected')\n"
        "except OSError as err:\n"
        "    print('refused', err.errno)\n"
    )
    result = sandbox.run(python_code(code), python_spec())
    assert result.stdout.decode().startswith("refused"), result


def test_a_listener_on_the_host_loopback_cannot_be_reached(sandbox: Sandbox) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        # The host listener is reachable from the host: the attack has a real target.
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        code = (
            "import socket\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=5)\n"
            "    print('connected')\n"
            "except OSError as err:\n"
            "    print('refused', err.errno)\n"
        )
        result = sandbox.run(python_code(code), python_spec())
    assert result.stdout.decode().startswith("refused"), result


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"hello from the host, path={self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass

    def address_string(self) -> str:
        return "unix"


@pytest.fixture
def unix_http_server(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "service.sock"
    server = _UnixHTTPServer(str(path), _Hello)
    os.chmod(path, 0o600)
    grant_socket(path)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield path
    server.shutdown()
    server.server_close()


def test_a_tcp_relay_reaches_the_host_unix_socket(
    sandbox: Sandbox, unix_http_server: Path
) -> None:
    code = (
        "import urllib.request\n"
        "print(urllib.request.urlopen('http://127.0.0.1:8080/ping', timeout=10).read().decode())"
    )
    result = sandbox.run(python_code(code), python_spec(tcp_relays={8080: unix_http_server}))
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().strip() == "hello from the host, path=/ping"


def test_a_bound_unix_socket_is_reachable_at_its_inside_path(
    sandbox: Sandbox, unix_http_server: Path
) -> None:
    code = (
        "import socket\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "s.connect('/run/grader.sock')\n"
        "s.sendall(b'GET /x HTTP/1.0\\r\\n\\r\\n')\n"
        "reply = b''\n"
        "while chunk := s.recv(4096):  # HTTP/1.0: the server closes after the body\n"
        "    reply += chunk\n"
        "print(reply.decode().splitlines()[-1])\n"
    )
    spec = python_spec(unix_sockets={Path("/run/grader.sock"): unix_http_server})
    result = sandbox.run(python_code(code), spec)
    assert result.stdout.decode().strip() == "hello from the host, path=/x", result.stderr


def test_a_relay_socket_that_never_appears_fails_clearly(sandbox: Sandbox, tmp_path: Path) -> None:
    from vtbench.errors import SandboxError

    missing = tmp_path / "missing.sock"
    spec = python_spec(tcp_relays={8080: missing}, socket_wait_seconds=0.2)
    with pytest.raises(SandboxError, match=str(missing)):
        sandbox.run(["true"], spec)
