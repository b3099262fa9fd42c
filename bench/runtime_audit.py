"""A task's first leak audit of the runtime every research sandbox shows, read in one
process against shared out over the host's cores, in the same run.

The first audit of a task (``vtbench prepare``'s, or a first episode's) reads every file
of the Python runtime (about 114,000 on this repository's environment) and searches it for
the task's fingerprints; later ones read the cache. Prints each way's time and the ratio.

    python bench/runtime_audit.py [--task arith] [--workers N]
"""

import argparse
import os
import tempfile
import time

from vtbench.episode.fingerprint_search import Search, first_hit, usable_cores
from vtbench.episode.leak_audit import file_paths, fingerprints
from vtbench.sandbox import python_runtime_mounts
from vtbench.tasks import find_task
from vtbench.tasks.store import ensure_splits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="arith")
    parser.add_argument("--workers", type=int, default=usable_cores())
    options = parser.parse_args()
    os.environ.setdefault("VTBENCH_HOME", tempfile.mkdtemp(prefix="vtbench-bench-"))
    task = find_task(options.task)
    ensure_splits(task)
    search = Search(fingerprints(task))
    paths = list(file_paths([mount.source for mount in python_runtime_mounts()]))
    print(f"{task.id}: {len(search.prints)} fingerprints, {len(paths)} runtime files")
    took = {}
    for workers in (1, options.workers):
        started = time.perf_counter()
        hit = first_hit(search, paths, workers=workers)
        took[workers] = time.perf_counter() - started
        print(f"{workers:>2} process(es): {took[workers]:6.1f} s, hit: {hit}", flush=True)
    print(f"speed-up with {options.workers} processes: {took[1] / took[options.workers]:.2f}x "
          f"(load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
