"""Running a library's test suite and reading its structured results (trusted task code).

pytest runs with the task's report plugin (``runtime/repofix_report.py``), which writes
every test's outcome with its crash message and report text as JSON: the issue text and
the scorer read that, never pytest's one-line summary. Plugins installed beside pytest are
not loaded (none of the libraries' suites uses one, and hypothesis's alone costs most of a
second at every start). :func:`run_local` runs the task's
own pinned code (instance generation); :func:`run_sandboxed` runs a tree that a candidate's
patch changed, in a bubblewrap sandbox with no network and CPU, memory and process limits.
"""

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from vtbench.sandbox import Limits, Mount, SandboxSpec, get_sandbox, python_runtime_mounts

RUNTIME = Path(__file__).resolve().parent.parent / "runtime"
PYTEST_ARGS = ["-p", "repofix_report", "-p", "no:cacheprovider", "-o", "addopts=", "-q",
               "--no-header"]
INSIDE_TREE = Path("/repo")
INSIDE_RUNTIME = Path("/repofix-runtime")
INSIDE_OUT = Path("/out")
QUIET_ENV = {"PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


@dataclass(frozen=True)
class SuiteRun:
    results: dict[str, dict]
    """Test id → {"outcome": passed|failed|skipped, "message", "text", ...}."""
    calls: dict[str, list[str]] | None
    cpu_seconds: float | None
    """CPU time of the run (pytest and its children); None where the sandbox does not
    count it."""
    timed_out: bool

    def failed(self) -> list[str]:
        return sorted(t for t, r in self.results.items() if r["outcome"] == "failed")

    def passed(self) -> list[str]:
        return sorted(t for t, r in self.results.items() if r["outcome"] == "passed")


def pytest_argv(tests: list[str], max_failures: int | None = None) -> list[str]:
    stop = [f"--maxfail={max_failures}"] if max_failures else []
    return [sys.executable, "-m", "pytest", *PYTEST_ARGS, *stop, *tests]


def read_report(path: Path, cpu: float | None, timed_out: bool) -> SuiteRun:
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):
        report = {"results": {}, "calls": None}
    return SuiteRun(results=report["results"], calls=report.get("calls"), cpu_seconds=cpu,
                    timed_out=timed_out)


def run_local(tree: Path, pythonpath: str, tests: list[str], timeout: float,
              trace: str | None = None, max_failures: int | None = None,
              cpu_seconds: int | None = None) -> SuiteRun:
    """The suite (or the given test ids) of a tree of the task's own code, unsandboxed;
    pytest stops after ``max_failures`` failures and is killed after ``cpu_seconds`` of
    CPU time (a limit that, unlike the wall clock, other work on the machine leaves alone)."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        env = {**os.environ, **QUIET_ENV, "PYTHONPATH": f"{RUNTIME}:{tree / pythonpath}",
               "REPOFIX_REPORT": str(report)}
        for name in ("REPOFIX_TRACE", "REPOFIX_CPU_SECONDS"):
            env.pop(name, None)
        if trace:
            env["REPOFIX_TRACE"] = trace
        if cpu_seconds:
            env["REPOFIX_CPU_SECONDS"] = str(cpu_seconds)
        before = os.times()
        timed_out = False
        try:
            subprocess.run(pytest_argv(tests, max_failures), cwd=tree, env=env, timeout=timeout,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired:
            timed_out = True
        after = os.times()
        cpu = (after.children_user - before.children_user
               + after.children_system - before.children_system)
        return read_report(report, cpu, timed_out)


def sandbox_spec(tree: Path, out: Path, pythonpath: str, timeout: float) -> SandboxSpec:
    return SandboxSpec(
        mounts=[*python_runtime_mounts(include_vtbench=False),
                Mount(source=RUNTIME, target=INSIDE_RUNTIME),
                Mount(source=tree, target=INSIDE_TREE, writable=True),
                Mount(source=out, target=INSIDE_OUT, writable=True)],
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8", **QUIET_ENV,
             "PYTHONPATH": f"{INSIDE_RUNTIME}:{INSIDE_TREE / pythonpath}",
             "REPOFIX_REPORT": str(INSIDE_OUT / "report.json")},
        cwd=INSIDE_TREE,
        limits=Limits(wall_seconds=timeout, cpu_seconds=int(timeout), memory_mb=4096,
                      pids=1024, file_size_mb=64, tmp_mb=256),
    )


def run_sandboxed(tree: Path, pythonpath: str, tests: list[str], timeout: float) -> SuiteRun:
    """The suite of a tree a candidate changed, in a bwrap sandbox (``SandboxUnavailable``
    where bubblewrap cannot run: such code never runs anywhere else)."""
    from vtbench.sandbox import prepare_writable

    with tempfile.TemporaryDirectory() as scratch:
        out = prepare_writable(Path(scratch) / "out")
        prepare_writable(tree)
        spec = sandbox_spec(tree, out, pythonpath, timeout)
        result = get_sandbox("bwrap").run(pytest_argv(tests), spec, max_output_bytes=1 << 16)
        return read_report(out / "report.json", result.cpu_seconds, result.timed_out)
