"""The sandboxed harness run on its own: a clock that starts when the model server is
ready, and a relay that waits for a server starting alongside (real bwrap, real sockets)."""

import threading
import time
from pathlib import Path

import pytest

from tests.conftest import (
    HelloHandler,
    UnixHTTPServer,
    make_tools_folder,
    processes_of_the_sandbox_uid,
    without_cgroups,
)
from tests.evaluation.conftest import write_harness
from vtbench.errors import SandboxError
from vtbench.evaluation import harness as harness_module
from vtbench.evaluation.harness import HarnessRun, finish_harness, start_harness
from vtbench.sandbox import get_sandbox

ITEMS = [{"id": "a", "input": {"x": 1}}, {"id": "b", "input": {"x": 2}}]
ASK_THE_SERVER = (
    "import urllib.request\n"
    "reply = urllib.request.urlopen(args.base_url + '/models', timeout=60).read().decode()\n"
    "answer([reply] * len(instances))\n"
)


def test_a_harness_started_before_its_server_reaches_it_once_it_listens(tmp_path: Path) -> None:
    harness = write_harness(tmp_path / "h", ASK_THE_SERVER)
    (tmp_path / "server").mkdir(mode=0o711)
    socket = tmp_path / "server" / "model.sock"
    run = start_harness(get_sandbox("bwrap"), harness, ["python", "run.py"], ITEMS, socket,
                        tmp_path / "work", timeout=60, lazy=True)
    time.sleep(0.5)  # the "server" starts late
    server = UnixHTTPServer(str(socket), HelloHandler)
    socket.chmod(0o666)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = finish_harness(run)
    finally:
        server.shutdown()
        server.server_close()
    assert result.error is None, result.stderr_tail
    assert result.outputs.count("hello from the host, path=/v1/models") == 2


def test_the_harness_clock_can_start_after_its_sandbox_and_still_stops_it(
        tmp_path: Path) -> None:
    harness = write_harness(tmp_path / "h", "import time\ntime.sleep(60)\n")
    (tmp_path / "server").mkdir(mode=0o711)
    run = start_harness(get_sandbox("bwrap"), harness, ["python", "run.py"], ITEMS,
                        tmp_path / "server" / "model.sock", tmp_path / "work", timeout=1,
                        lazy=True, grace=60)
    time.sleep(1.5)  # longer than the timeout: the grace keeps it alive meanwhile
    assert run.process.returncode is None and run.process.poll() is None
    started = time.monotonic()
    result = finish_harness(run, deadline=started + 1)
    assert result.error == "harness timed out"
    assert 0.9 <= time.monotonic() - started < 15


FORK_BUSY_WORKERS = "for i in 1 2 3 4; do (while :; do :; done) & done; wait\n"
"""Four busy workers, each within a per-process CPU limit until it hits it alone."""


def test_a_harness_that_forks_busy_workers_is_stopped_at_its_cpu_budget(
        tmp_path: Path) -> None:
    harness = tmp_path / "h"
    harness.mkdir()
    (harness / "run.sh").write_text(FORK_BUSY_WORKERS)
    (tmp_path / "server").mkdir(mode=0o711)
    run = start_harness(get_sandbox("bwrap"), harness, ["sh", "run.sh"], ITEMS,
                        tmp_path / "server" / "model.sock", tmp_path / "work", timeout=60,
                        lazy=True, cpu_seconds=1)
    assert finish_harness(run).error == "harness exceeded its cpu_seconds limit"


def run_without_cgroups(tmp_path: Path, harness: Path) -> HarnessRun:
    (tmp_path / "server").mkdir(mode=0o711)
    run = start_harness(get_sandbox("bwrap"), harness, ["python", "run.py"], ITEMS,
                        tmp_path / "server" / "model.sock", tmp_path / "work", timeout=60,
                        lazy=True)
    return finish_harness(run)


def test_a_harness_still_starts_threads_while_other_sandboxes_hold_many_processes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without cgroup v1 the process limit is one RLIMIT_NPROC for every sandbox of the uid:
    harnesses and scorers running in parallel must not make a harness fail to start."""
    without_cgroups(monkeypatch)
    harness = write_harness(tmp_path / "h", (
        "import threading\n"
        "threads = [threading.Thread(target=lambda: None) for _ in range(32)]\n"
        "[t.start() for t in threads]\n[t.join() for t in threads]\n"
        "answer(['ok'] * len(instances))\n"))
    with processes_of_the_sandbox_uid(300):
        result = run_without_cgroups(tmp_path, harness)
    assert result.error is None, result.stderr_tail
    assert result.outputs.count('"ok"') == 2


def test_a_harness_sandbox_that_cannot_start_fails_as_ours_not_the_candidates(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no process left under the uid's limit the launcher cannot start bwrap: that is
    an infrastructure failure (the grader refunds it), not a harness error it charges."""
    without_cgroups(monkeypatch)
    monkeypatch.setattr(harness_module, "PIDS", 16)
    harness = write_harness(tmp_path / "h", "answer(['ok'] * len(instances))\n")
    with processes_of_the_sandbox_uid(48), \
            pytest.raises(SandboxError, match="harness sandbox did not start"):
        run_without_cgroups(tmp_path, harness)


def test_a_harness_that_prints_a_failed_start_is_still_charged_as_the_candidate(
        tmp_path: Path) -> None:
    harness = write_harness(tmp_path / "h", (
        "sys.stderr.write('setpriv: failed to execute /usr/bin/bwrap: Resource temporarily "
        "unavailable\\n')\nsys.exit(126)\n"))
    result = run_without_cgroups(tmp_path, harness)
    assert result.returncode == 126
    assert result.error and result.error.startswith("harness exited with status 126")


def test_a_task_with_instance_workspaces_gets_each_trees_folder_writable_and_named(
        tmp_path: Path) -> None:
    def lay_out(item: dict, folder: Path) -> None:
        folder.mkdir(parents=True)
        (folder / "given.txt").write_text(f"tree of {item['id']}")

    harness = write_harness(tmp_path / "h", (
        "import pathlib\n"
        "seen = []\n"
        "for i in instances:\n"
        "    tree = pathlib.Path(i['workspace'])\n"
        "    (tree / 'made.txt').write_text('written inside')\n"
        "    seen.append((tree / 'given.txt').read_text() + ' at ' + str(tree))\n"
        "answer(seen)\n"))
    (tmp_path / "server").mkdir(mode=0o711)
    items = [{**item, "label": "never shown"} for item in ITEMS]
    run = start_harness(get_sandbox("bwrap"), harness, ["python", "run.py"], items,
                        tmp_path / "server" / "model.sock", tmp_path / "work", timeout=60,
                        lazy=True, lay_out=lay_out)
    result = finish_harness(run)
    assert result.error is None, result.stderr_tail
    assert "tree of a at /io/workspaces/0" in result.outputs
    assert "tree of b at /io/workspaces/1" in result.outputs
    assert (tmp_path / "work" / "io" / "workspaces" / "1" / "made.txt").is_file()
    assert "never shown" not in (tmp_path / "work" / "io" / "inputs.jsonl").read_text()


def test_a_task_without_instance_workspaces_gets_the_same_input_lines_as_before(
        tmp_path: Path) -> None:
    harness_module.write_inputs(tmp_path, ITEMS)
    assert (tmp_path / "inputs.jsonl").read_text() == (
        '{"id": "a", "input": {"x": 1}}\n{"id": "b", "input": {"x": 2}}\n')
    assert not (tmp_path / "workspaces").exists()


def test_a_harness_runs_a_program_of_the_tools_folder_that_the_host_lacks(
        tools_setting: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """shell's reference harness tries commands by name: on a host installed offline it
    must find the programs (cal, cpio, tree) the scorer's sandboxes find."""
    tools = make_tools_folder(tmp_path / "tools", {"bundled-echo": "echo"})
    tools_setting.setenv("VTBENCH_TOOLS_DIR", str(tools))
    harness = write_harness(tmp_path / "h", (
        "import subprocess\n"
        "said = subprocess.run(['bundled-echo', 'found'], capture_output=True, text=True)\n"
        "answer([said.stdout.strip()] * len(instances))\n"))
    result = run_without_cgroups(tmp_path, harness)
    assert result.error is None, result.stderr_tail
    assert result.outputs.count('"found"') == 2
