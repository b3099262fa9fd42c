"""The sandbox's host programs from a tools folder (an offline install), and the runtime
mounts of a venv chained onto another: what a GPU host without bwrap, socat or a network
runs on."""

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import HelloHandler, UnixHTTPServer, make_tools_folder
from tests.sandbox.helpers import python_code, python_spec
from vtbench import layout
from vtbench.errors import SandboxUnavailable
from vtbench.sandbox import _tools, get_sandbox, grant_socket, sandbox_tools


@pytest.fixture
def unix_http_server(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "service.sock"
    server = UnixHTTPServer(str(path), HelloHandler)
    grant_socket(path)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield path
    server.shutdown()
    server.server_close()


def test_bwrap_and_socat_come_from_the_tools_folder_and_the_relay_runs_its_socat_inside(
        tools_setting: pytest.MonkeyPatch, tmp_path: Path, unix_http_server: Path) -> None:
    # Under pytest's root-only temporary folder: the sandbox uid cannot reach it, so the
    # launcher has to stage it both to run bwrap and to mount socat inside.
    tools = make_tools_folder(tmp_path / "tools")
    tools_setting.setenv("VTBENCH_TOOLS_DIR", str(tools))
    code = (
        "import os, urllib.request\n"
        "reply = urllib.request.urlopen('http://127.0.0.1:8080/ping', timeout=10).read()\n"
        "exes = set()\n"
        "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
        "    try:\n"
        "        exes.add(os.readlink(f'/proc/{pid}/exe'))\n"
        "    except OSError:\n"
        "        pass\n"
        "print(reply.decode())\n"
        "print(*sorted(e for e in exes if e.endswith('socat')))\n"
    )

    result = get_sandbox("bwrap").run(python_code(code),
                                      python_spec(tcp_relays={8080: unix_http_server}))

    assert sandbox_tools() == {"bwrap": str(tools / "bin" / "bwrap"),
                               "socat": str(tools / "bin" / "socat")}
    assert result.returncode == 0, result.stderr
    reply, socat = result.stdout.decode().splitlines()
    assert reply == "hello from the host, path=/ping"
    assert socat == str(tools / "libexec" / "socat")


def test_a_tools_setting_that_names_no_tools_folder_is_refused_in_one_line(
        tools_setting: pytest.MonkeyPatch, tmp_path: Path) -> None:
    tools_setting.setenv("VTBENCH_TOOLS_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(SandboxUnavailable) as refused:
        get_sandbox("bwrap").run(["true"], python_spec())
    assert refused.value.one_line().startswith(f"VTBENCH_TOOLS_DIR={tmp_path / 'nowhere'} has "
                                               "no bin/ folder")


def test_without_a_setting_the_tools_folder_is_the_one_setup_installed_in_the_prefix(
        tools_setting: pytest.MonkeyPatch) -> None:
    tools_setting.delenv("VTBENCH_TOOLS_DIR", raising=False)
    assert layout.bundled_tools() == Path(sys.prefix) / "vtbench-tools"
    expected = layout.bundled_tools() if (layout.bundled_tools() / "bin").is_dir() else None
    assert _tools.tools_dir() == expected


def venv(folder: Path, *pth_lines: str) -> Path:
    """A venv with no pip whose site-packages holds a .pth of ``pth_lines``; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], capture_output=True, text=True, check=True)
    lines = "".join(f"{line}\n" for line in pth_lines)
    (Path(site.stdout.strip()) / "_chain.pth").write_text(lines)
    return python


def test_a_venv_chained_onto_another_mounts_it_and_imports_its_packages_inside(
        tmp_path: Path) -> None:
    """scripts/setup --offline over a GPU host's own venv: the host's torch lives in the
    base venv, which only a .pth file of ours names. Without its mount, the trainer and
    the harness would not find it."""
    base = venv(tmp_path / "base").parent.parent
    base_site = next(base.glob("lib/python*/site-packages"))
    (base_site / "chained_probe.py").write_text("WHERE = 'the base venv'\n")
    ours = next(Path(sys.prefix).glob("lib/python*/site-packages"))
    top = venv(tmp_path / "top", f"import site; site.addsitedir({str(base_site)!r})",
               f"import site; site.addsitedir({str(ours)!r})")
    program = (
        "import sys\n"
        "from vtbench.sandbox import get_sandbox, python_runtime_mounts, SandboxSpec, Limits\n"
        "spec = SandboxSpec(mounts=python_runtime_mounts(), limits=Limits(wall_seconds=30))\n"
        "code = 'import chained_probe; print(chained_probe.WHERE)'\n"
        "done = get_sandbox('bwrap').run([sys.executable, '-c', code], spec)\n"
        "print(done.returncode, done.stdout.decode().strip(), done.stderr.decode()[-300:])\n"
        "print(*[str(m.source) for m in python_runtime_mounts()])\n"
    )
    done = subprocess.run([top, "-c", program], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(layout.REPO_ROOT)})
    assert done.returncode == 0, done.stderr
    outcome, mounts = done.stdout.splitlines()
    assert outcome == "0 the base venv ", outcome
    assert str(base) in mounts.split()
