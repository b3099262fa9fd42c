"""Sandbox start latency: median of N starts of `true` and `python -c pass`, sandboxed
(bwrap, or each backend named by --backends) vs direct.

The baseline is the same command started directly with subprocess in the same run,
sampled alternately with the sandboxed one. The sandbox is what a grader harness gets:
the Python runtime mounts (the base interpreter is staged from root-only /root), wall,
pids and memory limits (cgroup v1 groups when writable). Goal: sandbox start <= 50 ms.

    nice -n 10 .venv/bin/python bench/sandbox_start.py [--runs 20] [--backends bwrap,docker]
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from vtbench.sandbox import Limits, Sandbox, SandboxSpec, get_sandbox, python_runtime_mounts


def _medians_ms(first: Callable[[], object], second: Callable[[], object],
                runs: int) -> tuple[float, float]:
    """Median wall time of each, sampled alternately so that load changes hit both."""
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(runs):
        for index, start in enumerate((first, second)):
            began = time.perf_counter()
            start()
            samples[index].append((time.perf_counter() - began) * 1000)
    return statistics.median(samples[0]), statistics.median(samples[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--backends", default="bwrap",
                        help="comma-separated sandbox backends, e.g. bwrap,docker")
    options = parser.parse_args()
    spec = SandboxSpec(mounts=python_runtime_mounts(),
                       limits=Limits(wall_seconds=60, pids=256, memory_mb=4096))
    commands = {"true": ["/bin/true"], "python -c pass": [sys.executable, "-c", "pass"]}
    print(f"{'backend':<8} {'command':<16} {'direct ms':>10} {'sandbox ms':>10} "
          f"{'added ms':>10} {'ratio':>7}")
    for backend in options.backends.split(","):
        sandbox = get_sandbox(backend)
        for label, argv in commands.items():
            def direct(argv: list[str] = argv) -> object:
                return subprocess.run(argv, env=spec.env, check=True)

            def sandboxed(argv: list[str] = argv, sandbox: Sandbox = sandbox) -> object:
                result = sandbox.run(argv, spec)
                assert result.returncode == 0, result.stderr
                return result

            direct_ms, sandbox_ms = _medians_ms(direct, sandboxed, options.runs)
            print(f"{backend:<8} {label:<16} {direct_ms:>10.1f} {sandbox_ms:>10.1f} "
                  f"{sandbox_ms - direct_ms:>10.1f} {sandbox_ms / direct_ms:>7.1f}")
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} on {os.cpu_count()} cores (contention inflates wall times)")


if __name__ == "__main__":
    main()
