"""The host's grader belongs to every runner using it: overlapping runs never break each other."""

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from vtbench.episode.grader_process import alive, grader_socket, running_grader


def test_a_grader_outlives_its_starter_while_another_runner_uses_it() -> None:
    first = running_grader()
    socket = first.__enter__()
    with running_grader():
        first.__exit__(None, None, None)
        assert alive(socket)
    assert not alive(socket)


def test_the_last_runner_to_leave_stops_the_grader_it_started() -> None:
    with running_grader() as socket:
        assert alive(socket)
    assert not alive(socket)
    with running_grader() as socket:
        assert alive(socket)


@pytest.fixture
def operator_grader() -> Iterator[subprocess.Popen[bytes]]:
    socket = grader_socket()
    socket.parent.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen([sys.executable, "-m", "vtbench.grader.serve",
                                "--socket", str(socket)])
    deadline = time.monotonic() + 60
    while not alive(socket):
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.2)
    yield process
    process.terminate()
    process.wait(timeout=30)


def test_a_runner_never_stops_the_operators_grader(
        operator_grader: subprocess.Popen[bytes]) -> None:
    with running_grader() as socket:
        assert alive(socket)
    assert alive(socket) and operator_grader.poll() is None


def template_sockets(parent: int) -> list[Path]:
    """The sockets that the model-server templates started by ``parent`` listen on."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            argv = stat.with_name("cmdline").read_bytes().decode().split("\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and "vtbench.models.template" in argv:
            found.append(Path(argv[argv.index("vtbench.models.template") + 1]))
    return [socket for socket in found if socket.exists()]


def test_a_grader_has_its_model_server_template_ready_before_the_first_validation(
        operator_grader: subprocess.Popen[bytes]) -> None:
    """Started by the first validation instead, the template's imports (torch,
    transformers, CUDA) made that validation's model server start in 20 s, not 1 s."""
    deadline = time.monotonic() + 120
    while not template_sockets(operator_grader.pid):
        assert operator_grader.poll() is None and time.monotonic() < deadline
        time.sleep(0.2)


def test_a_runner_killed_with_sigkill_leaves_no_claim_on_the_grader(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import pathlib, time\n"
        "from vtbench.episode.grader_process import running_grader\n"
        "with running_grader():\n"
        f"    pathlib.Path({str(ready)!r}).touch()\n"
        "    time.sleep(600)\n")], env={**os.environ})
    deadline = time.monotonic() + 90
    while not ready.exists():
        assert holder.poll() is None and time.monotonic() < deadline
        time.sleep(0.2)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    socket = grader_socket()
    assert alive(socket)
    with running_grader():
        pass
    assert not alive(socket)


WAIT_FOR_GO = "while [ ! -e go ]; do sleep 0.5; done"


@pytest.mark.slow
def test_two_overlapping_runs_both_finish(prepared_arith: Path, tmp_path: Path) -> None:
    """The first run started the grader and ends while the second still needs it."""
    first, second = (overlapping_run(prepared_arith, tmp_path / name) for name in "ab")
    first_folder = started(tmp_path / "a", first)
    second_folder = started(tmp_path / "b", second)
    (first_folder / "workspace" / "go").touch()
    assert first.wait(timeout=600) == 0, first.communicate()[1][-2000:]
    (second_folder / "workspace" / "go").touch()
    assert second.wait(timeout=600) == 0, second.communicate()[1][-2000:]
    for folder in (first_folder, second_folder):
        assert json.loads((folder / "episode.json").read_text())["status"] == "finished"
    assert not alive(grader_socket())


def overlapping_run(task: Path, out: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "vtbench", "run", "--task", str(task), "--agent",
         f"command:{WAIT_FOR_GO}", "--budget-minutes", "5", "--out", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env={**os.environ})


def started(out: Path, run: subprocess.Popen[str]) -> Path:
    """The run's episode folder, once the run holds its grader episode."""
    deadline = time.monotonic() + 300
    while not list(out.glob("*/.runner-state.json")):
        assert run.poll() is None and time.monotonic() < deadline
        time.sleep(0.5)
    return next(out.glob("*/.runner-state.json")).parent


def listed_gpus(folder: Path, monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    """A host whose ``nvidia-smi`` lists ``count`` GPUs (the inventory's only source)."""
    smi = folder / "nvidia-smi"
    lines = "".join(f"{index}, NVIDIA H200\\n" for index in range(count))
    smi.write_text(f"#!/bin/sh\nprintf '{lines}'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")


@pytest.mark.parametrize(("count", "shared", "holds"), [(1, True, []), (2, False, [0])])
def test_a_grader_started_for_episodes_shares_the_only_gpu_and_holds_one_of_several(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int, shared: bool,
        holds: list[int]) -> None:
    from vtbench import layout
    from vtbench.episode.runner import shares_with_grader
    from vtbench.gpus import GpuAllocator
    from vtbench.grader.serve import evaluation_gpus_of_grader

    listed_gpus(tmp_path, monkeypatch, count)
    with running_grader():
        assert evaluation_gpus_of_grader(layout.grader_gpus_file()) == ([0], shared)
        held = [index for index, holder in GpuAllocator().holders().items() if holder]
        assert held == holds
        assert shares_with_grader([0]) is shared
        assert not shares_with_grader([1])
