"""repofix's instance generation: counts per library and bug kind, and its time.

Generates (or reads from the cache, ``$VTBENCH_GENERATED``) every library's instances and
prints a Markdown table: the mutants each library tries, its instances and those per kind,
failing tests per instance, and the wall and CPU seconds of each library generated in this
run (a cached one shows none). ``--fresh NAME`` generates that library into a temporary
cache to time it.

    python bench/repofix_generate.py [--fresh toolz]
"""

import argparse
import os
import tempfile
import time
from collections import Counter

from vtbench import layout
from vtbench.tasks.registry import import_file

BUILDER = import_file(layout.BUILTIN_TASKS / "repofix" / "builder.py", "repofix_bench")


def cpu() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def generate(name: str) -> tuple[list[dict], float | None, float | None]:
    instances, libraries = BUILDER._module("instances"), BUILDER._module("libraries")
    lib = libraries.library(name)
    was_cached = instances.cache_file(lib).is_file()
    wall, used = time.monotonic(), cpu()
    rows = instances.cached(lib)
    if was_cached:
        return rows, None, None
    return rows, time.monotonic() - wall, cpu() - used


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fresh", default=None)
    args = parser.parse_args()
    if args.fresh:
        os.environ["VTBENCH_GENERATED"] = tempfile.mkdtemp()
    libraries = BUILDER._module("libraries").libraries()
    kinds = BUILDER._module("mutants").KINDS
    print("| library | role | mutants | instances | " + " | ".join(kinds)
          + " | failing 1/2/3/4/5 | wall s | CPU s |")
    print("|---" * (len(kinds) + 7) + "|")
    for lib in libraries:
        if args.fresh and lib.name != args.fresh:
            continue
        rows, wall, used = generate(lib.name)
        by_kind = Counter(row["kind"] for row in rows)
        failing = Counter(len(row["failing"]) for row in rows)
        timing = [f"{wall:.0f}" if wall else "cached", f"{used:.0f}" if used else "cached"]
        print(f"| {lib.name} | {lib.role} | {lib.mutants} | {len(rows)} | "
              + " | ".join(str(by_kind[k]) for k in kinds) + " | "
              + "/".join(str(failing[n]) for n in range(1, 6)) + " | " + " | ".join(timing)
              + " |", flush=True)


if __name__ == "__main__":
    main()
