"""What placing a sandbox on its reserved cores adds to its start: the median of N starts of
`true` and `python -c pass` in a bwrap sandbox with a one-core cpuset (an episode's
reservation) against the same sandbox without one, sampled alternately in the same run.

Both run on the same core (the baseline by the launcher's affinity alone), so that what a
busy host does to that core hits both and the difference is the cpuset's own cost: making
its group, writing it, joining it and removing it. The last line times that work alone
(the sandbox's groups made and removed, with and without the cpuset), which a busy host
disturbs far less than a whole start.

The sandbox is a grader harness's: the Python runtime mounts, wall, pids and memory limits;
the cpuset is one more cgroup (v1: its own hierarchy, with ``cpuset.cpus`` and
``cpuset.mems`` written; v2: one more file of the same group). Goal: <= 50 ms added.

    nice -n 10 .venv/bin/python bench/cpuset_start.py [--runs 30]
"""

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

from vtbench.sandbox import (
    Limits,
    SandboxSpec,
    cgroup_limits,
    get_sandbox,
    limit_groups,
    on_cores,
    python_runtime_mounts,
)


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
    parser.add_argument("--runs", type=int, default=30)
    options = parser.parse_args()
    limits = Limits(wall_seconds=60, pids=256, memory_mb=4096)
    core = max(os.sched_getaffinity(0))
    plain = SandboxSpec(mounts=python_runtime_mounts(), limits=limits)
    placed = plain.model_copy(update={"limits": limits.model_copy(update={"cores": [core]})})
    sandbox = get_sandbox("bwrap")
    print(f"host limits: {cgroup_limits().describe()}; cpuset on core {core}")
    print(f"{'command':<16} {'affinity ms':>12} {'cpuset ms':>10} {'added ms':>9} {'ratio':>6}")
    for label, argv in {"true": ["/bin/true"], "python -c pass": [sys.executable, "-c", "pass"]
                        }.items():
        def run(spec: SandboxSpec, argv: list[str] = argv) -> object:
            result = sandbox.run(argv, spec)
            assert result.returncode == 0, result.stderr
            return result

        def pinned_only() -> object:
            with on_cores([core]):
                return run(plain)

        base_ms, placed_ms = _medians_ms(pinned_only, lambda: run(placed), options.runs)
        print(f"{label:<16} {base_ms:>12.1f} {placed_ms:>10.1f} {placed_ms - base_ms:>9.1f} "
              f"{placed_ms / base_ms:>6.2f}")
    def groups(cores: list[int] | None) -> object:
        made = limit_groups(limits.pids, limits.memory_mb, cores=cores)
        made.remove()
        return made

    base_ms, placed_ms = _medians_ms(lambda: groups(None), lambda: groups([core]), options.runs)
    print(f"{'groups only':<16} {base_ms:>12.1f} {placed_ms:>10.1f} {placed_ms - base_ms:>9.1f} "
          f"{placed_ms / base_ms:>6.2f}   (make and remove the sandbox's cgroups)")
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} on {os.cpu_count()} cores (contention inflates wall times)")


if __name__ == "__main__":
    main()
