"""Shared fixtures: an isolated private store per test, a minimal valid task pack, and a
tools folder as an offline install lays it out."""

import contextlib
import http.server
import importlib.machinery
import importlib.util
import os
import secrets
import shutil
import signal
import socketserver
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

MINIMAL_TASK_TOML = """
id = "mini"
title = "A minimal task"
scale = "tiny"
base_model = "tiny"

[components.data]
editable = true
sources = ["public/data"]

[components.trainer]
editable = true
sources = ["public/trainer"]
entry = ["python", "trainer/train.py"]

[components.harness]
editable = false
sources = ["public/harness"]
entry = ["python", "run.py"]
decoding = { temperature = 0.0, max_tokens = 8 }

[splits]
val = 10
test = 20

[metric]
name = "exact_match"

[budgets]
wall_clock_minutes = 10
validations = 5
grader_compute_seconds = 300
llm_tokens = 1000
llm_dollars = 1.0

[scorer]
module = "scorer.py"

[builder]
module = "builder.py"

[reference]
module = "reference.py"
"""


@pytest.fixture(scope="session")
def installation(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What every private store of the run shares: one installation secret, so that a task
    copied alike into two stores has the same splits, and one leak-audit cache, so that
    the runtime every sandbox shows is read once per task, not once per store."""
    shared = tmp_path_factory.mktemp("installation")
    (shared / "leak-audit").mkdir()
    (shared / "secret").write_text(secrets.token_hex(32))
    (shared / "secret").chmod(0o600)
    return shared


def new_store(home: Path, installation: Path) -> Path:
    """``home`` as a fresh private store with the run's secret and leak-audit cache."""
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy2(installation / "secret", home / "secret")
    (home / "leak-audit").symlink_to(installation / "leak-audit", target_is_directory=True)
    return home


@pytest.fixture(autouse=True)
def private_store(tmp_path_factory: pytest.TempPathFactory, installation: Path,
                  monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own $VTBENCH_HOME; nothing touches the user's store."""
    home = new_store(tmp_path_factory.mktemp("vtbench-home"), installation)
    monkeypatch.setenv("VTBENCH_HOME", str(home))
    monkeypatch.delenv("VTBENCH_RESERVATIONS", raising=False)
    return home


@pytest.fixture
def empty_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A $VTBENCH_HOME with nothing in it, for tests of what a command creates."""
    home = tmp_path / "empty-home"
    home.mkdir()
    monkeypatch.setenv("VTBENCH_HOME", str(home))
    return home


@pytest.fixture
def minimal_task(tmp_path: Path) -> Path:
    root = tmp_path / "mini"
    for folder in ("public/data", "public/trainer", "public/harness"):
        (root / folder).mkdir(parents=True)
    for module in ("scorer.py", "builder.py", "reference.py"):
        (root / module).write_text("")
    (root / "task.toml").write_text(MINIMAL_TASK_TOML)
    (root / "README.md").write_text("# mini\n")
    return root


def run_cli(*args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    """Run the real ``vtbench`` entry point in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "vtbench", *args],
        capture_output=True, text=True, check=check, env=dict(os.environ),
    )


def without_cgroups(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a host with no usable cgroup (v1 or v2), where the operator allowed weak limits."""
    from vtbench.sandbox import _cgroup

    monkeypatch.setattr(_cgroup, "support", lambda: _cgroup.Support("none"))
    monkeypatch.setenv(_cgroup.ALLOW_WEAK_ENV, "1")


@contextlib.contextmanager
def processes_of_the_sandbox_uid(count: int) -> Iterator[None]:
    """``count`` sleeping processes of the sandbox uid, as other sandboxes would hold (on a
    host without cgroup v1 they all count against one RLIMIT_NPROC)."""
    from vtbench.sandbox._launch import sandbox_identity

    me = sandbox_identity()
    drop = ["setpriv", f"--reuid={me.uid}", f"--regid={me.gid}", "--clear-groups"]
    busy = subprocess.Popen(
        [*(drop if me.drop else []), "sh", "-c",
         f"for i in $(seq {count}); do sleep 60 & done; echo up; wait"],
        stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert busy.stdout and busy.stdout.readline().strip() == "up"
        yield
    finally:
        os.killpg(busy.pid, signal.SIGKILL)
        busy.wait()


def bytes_read() -> int:
    """What this process has read so far, as the kernel counts it (``rchar``: files, pipes
    and sockets), to show that a step reads no more than it should."""
    lines = Path("/proc/self/io").read_text().splitlines()
    return int(next(line for line in lines if line.startswith("rchar:")).split()[1])


class UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """A threaded HTTP server on a unix socket (a host service a sandbox may be granted)."""

    daemon_threads = True


class HelloHandler(http.server.BaseHTTPRequestHandler):
    """Answers every GET with ``hello from the host, path=PATH``."""

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


def bundle_script() -> ModuleType:
    """scripts/bundle as a module (it has no .py suffix)."""
    path = str(Path(__file__).resolve().parent.parent / "scripts" / "bundle")
    loader = importlib.machinery.SourceFileLoader("vtbench_bundle_script", path)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def make_tools_folder(root: Path, programs: dict[str, str] | None = None) -> Path:
    """A tools folder as ``scripts/setup --offline`` installs it: made by scripts/bundle's
    own ``unpack_tools`` from a tree laid out as Debian packages unpack, holding copies of
    this host's programs (``programs``: name in the folder -> host program; bwrap and socat
    by default), so that a path in it can only be the folder's; readable by all, as setup
    leaves it."""
    programs = programs or {"bwrap": "bwrap", "socat": "socat"}
    unpacked = root.with_name(f"{root.name}-debian") / "usr" / "bin"
    unpacked.mkdir(parents=True)
    for name, host in programs.items():
        shutil.copy2(shutil.which(host, path="/usr/bin:/bin") or host, unpacked / name)
    bundle_script().unpack_tools(unpacked.parent.parent, root, tuple(programs))
    subprocess.run(["chmod", "-R", "go+rX", str(root)], check=True)
    return root


@pytest.fixture
def tools_setting(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """Set VTBENCH_TOOLS_DIR for one test (the lookup is decided once per process)."""
    from vtbench.sandbox import _tools

    _tools.tools_dir.cache_clear()
    _tools.tool.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    _tools.tools_dir.cache_clear()
    _tools.tool.cache_clear()
