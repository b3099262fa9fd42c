"""repofix's scoring cost: CPU-seconds per scored instance, against the suite's own.

Scores the gold diff of ``--count`` instances of a val or test library (generated, or read
from the cache, ``$VTBENCH_GENERATED``) as the grader does: a fresh buggy tree, the diff
applied, every test restored, the whole suite in a bubblewrap sandbox. The CPU time of each
scored run is its sandbox's (the cgroup's count of every process the suite ran); the
baseline, measured in the same run, is the pristine suite run unsandboxed, three times
(the median). Goal: 100 instances in at most 10 CPU-minutes.

    python bench/repofix_score.py [--library toolz] [--count 100]
"""

import argparse
import statistics
import time

from vtbench import layout
from vtbench.tasks.registry import import_file

BUILDER = import_file(layout.BUILTIN_TASKS / "repofix" / "builder.py", "repofix_score_bench")
GOAL_CPU_SECONDS = 600.0
"""100 instances in 10 CPU-minutes."""


def pristine_cpu(lib) -> float:
    """The median CPU time of the pristine suite, unsandboxed, over three runs."""
    libraries, suite = BUILDER._module("libraries"), BUILDER._module("suite")
    tree = libraries.unpacked(lib)
    runs = [suite.run_local(tree, lib.pythonpath, list(lib.tests), timeout=300).cpu_seconds
            for _ in range(3)]
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", default="toolz")
    parser.add_argument("--count", type=int, default=100)
    args = parser.parse_args()
    libraries, trees = BUILDER._module("libraries"), BUILDER._module("trees")
    lib = libraries.library(args.library)
    rows = BUILDER._module("instances").cached(lib)[:args.count]
    baseline = pristine_cpu(lib)
    print(f"{lib.release} ({lib.role}): {len(rows)} instances; the pristine suite unsandboxed "
          f"{baseline:.2f} CPU-s (median of 3)")
    cpu: list[float] = []
    scores: list[float] = []
    started = time.monotonic()
    for index, row in enumerate(rows, 1):
        run = trees.scored_run(row, trees.gold_diff(row))
        if run is None or run.cpu_seconds is None:
            raise SystemExit(f"repofix_score.py: {row['key']}: the gold diff did not apply or "
                             "the sandbox does not count CPU time")
        cpu.append(run.cpu_seconds)
        scores.append(trees.verdict(row, run))
        if index % 10 == 0 or index == len(rows):
            print(f"  {index}/{len(rows)} scored, {sum(cpu):.0f} CPU-s, "
                  f"{time.monotonic() - started:.0f} s wall", flush=True)
    total = sum(cpu)
    per_hundred = total / len(rows) * 100
    print(f"gold diffs scoring 1: {int(sum(scores))} of {len(rows)}")
    print(f"CPU-s per instance: median {statistics.median(cpu):.2f}, max {max(cpu):.2f}; "
          f"÷ the pristine suite's: {statistics.median(cpu) / baseline:.2f}")
    print(f"CPU-s for 100 instances: {per_hundred:.0f} (goal ≤ {GOAL_CPU_SECONDS:.0f}: "
          f"{'met' if per_hundred <= GOAL_CPU_SECONDS else 'not met'}); wall "
          f"{time.monotonic() - started:.0f} s for {len(rows)}")


if __name__ == "__main__":
    main()
