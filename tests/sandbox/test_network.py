"""Network attacks from inside the sandbox (every isolating backend), judged from inside
(no traffic leaves)."""

import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import HelloHandler, UnixHTTPServer
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


@pytest.fixture
def unix_http_server(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "service.sock"
    server = UnixHTTPServer(str(path), HelloHandler)
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


def _serve_unix_http(path: Path) -> UnixHTTPServer:
    server = UnixHTTPServer(str(path), HelloHandler)
    grant_socket(path)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_a_lazy_relay_reaches_a_socket_that_appears_after_the_start(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    folder = tmp_path / "service"
    folder.mkdir()
    code = (  # asks at once: the relay holds the request until the socket accepts
        "import time, urllib.request\n"
        "started = time.monotonic()\n"
        "print(urllib.request.urlopen('http://127.0.0.1:8080/late', timeout=20).read().decode())\n"
        "print(time.monotonic() - started)\n"
    )
    spec = python_spec(tcp_relays={8080: folder / "service.sock"}, lazy_relays=True)
    process = sandbox.start(python_code(code), spec, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    time.sleep(0.5)
    server = _serve_unix_http(folder / "service.sock")
    try:
        out, err = process.stdout.read(), process.stderr.read()  # type: ignore[union-attr]
        assert process.wait(timeout=30) == 0, err
    finally:
        server.shutdown()
        server.server_close()
    answer, waited = out.decode().split()[-2:]
    assert answer == "path=/late"
    assert float(waited) >= 0.3  # it really was sent before the socket existed


def test_a_lazy_relay_binds_only_the_socket_folder_read_only(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    folder = tmp_path / "service"
    folder.mkdir()
    (tmp_path / "secret.txt").write_text("not for the sandbox")
    server = _serve_unix_http(folder / "service.sock")
    code = (
        "import os, urllib.request\n"
        "print(sorted(os.listdir('/run/vtbench/relay-8080')))\n"
        "try:\n"
        "    open('/run/vtbench/relay-8080/planted', 'w')\n"
        "    print('written')\n"
        "except OSError as err:\n"
        "    print('refused', err.errno)\n"
        "print(urllib.request.urlopen('http://127.0.0.1:8080/x', timeout=10).read().decode())\n"
    )
    spec = python_spec(tcp_relays={8080: folder / "service.sock"}, lazy_relays=True)
    try:
        result = sandbox.run(python_code(code), spec)
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == 0, result.stderr
    listing, refused, answer = result.stdout.decode().splitlines()
    assert listing == "['service.sock']"
    assert refused.startswith("refused")
    assert answer.endswith("path=/x")
    assert not (folder / "planted").exists()


def test_a_lazy_relay_socket_name_that_socat_would_misread_is_refused(tmp_path: Path) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="relay socket name"):
        python_spec(tcp_relays={8080: tmp_path / "a,fork.sock"}, lazy_relays=True)
