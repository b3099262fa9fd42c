"""Scoring 100 shell instances: the trusted scorer's wall clock on this host.

Half human-written items (NL2Bash, icalfa), half generated over random trees, each scored
with its second gold as the candidate (a command that does something, so both runs do
real work). Cold: the first scoring of each item runs its gold and the candidate, side by
side; warm: a second pass, where the gold's outcome is kept (as in a grader that scores
the same validation split again). Goal: 100 instances in at most 30 s.

    nice -n 10 .venv/bin/python bench/shell_scoring.py [--items 100]
"""

import argparse
import os
import platform
import random
import time
from collections import Counter

from vtbench.tasks import find_task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=100)
    options = parser.parse_args()
    task = find_task("shell")
    builder, scorer = task.builder, task.scorer
    kept = Counter(item["label"]["source"] for item in builder.human_items())
    print(f"clean human items: {sum(kept.values())} ({dict(sorted(kept.items()))})")
    human = list(builder.ordered_human()[: options.items // 2])
    rng = random.Random(1)
    generated: list[dict] = []
    while len(human) + len(generated) < options.items:
        item = builder.generated_item(rng, held_out=True)
        if item is not None:
            generated.append(item)
    items = human + generated
    for name in ("cold", "warm"):
        started = time.perf_counter()
        scores = [scorer.score(item, item["label"]["gold2"]) for item in items]
        seconds = time.perf_counter() - started
        mean = sum(scores) / len(items)
        print(f"{name}: {len(items)} instances in {seconds:.1f} s "
              f"({seconds / len(items) * 1000:.0f} ms each), mean score {mean:.3f}")
    print(f"host: {platform.node()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
