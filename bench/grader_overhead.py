"""Validation overhead: (wall − generation − scoring) ÷ wall, median of N validations.

Each run evaluates a prepared task's initial model on its validation split exactly as a
grader worker does (``vtbench.evaluation.evaluate``: model server start, sandboxed
harness, trusted scorer); the grader's ledger and HTTP add milliseconds on top and are
not included. Goal: ≤ 5%.

    python bench/grader_overhead.py --task arith --runs 10
"""

import argparse
import statistics

from vtbench.evaluation import evaluate
from vtbench.prepare.prepare import system_folder
from vtbench.prepare.systems import model_dir
from vtbench.tasks import find_task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="arith")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    task = find_task(args.task)
    model = model_dir(system_folder(task, "initial"), 0)
    shares, starts = [], []
    for _ in range(args.runs):
        timings = evaluate(task, model, "val").timings
        overhead = timings["wall"] - timings["generation"] - timings["scoring"]
        shares.append(overhead / timings["wall"])
        starts.append(timings["server_start"] / timings["wall"])
    print(f"validation overhead, median of {args.runs}: {statistics.median(shares):.1%} "
          f"(of which model-server start {statistics.median(starts):.1%}; goal <= 5%)")


if __name__ == "__main__":
    main()
