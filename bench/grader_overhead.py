"""Validation overhead: (wall − generation − scoring) ÷ wall, median of N validations.

Each run evaluates a prepared task's initial model on its validation split exactly as a
grader worker does (``vtbench.evaluation.evaluate``: model server start, sandboxed
harness, trusted scorer); the grader's ledger and HTTP add milliseconds on top and are
not included. Goal: ≤ 5%. Validations alternate between the grader's way (the harness
runs in a standby sandbox started ahead, :mod:`vtbench.evaluation.standby`) and a fresh
sandbox per validation, so that both meet the same load. The breakdown says where the
overhead goes (medians, as shares of the wall time): staging the harness, model-server
start (launch to ready; the harness starts meanwhile), the harness running while the
server is not generating (batching, HTTP, the harness's own work and exit), and finishing
(server stop, work folder removed).

    python bench/grader_overhead.py --task arith --runs 10
"""

import argparse
import os
import statistics

from vtbench.evaluation import evaluate
from vtbench.evaluation.standby import warm
from vtbench.prepare.prepare import system_folder
from vtbench.prepare.systems import model_dir
from vtbench.sandbox import get_sandbox
from vtbench.tasks import find_task


def parts(timings: dict[str, float]) -> dict[str, float]:
    """The overhead and its parts, as shares of the wall time."""
    wall = timings["wall"]
    overhead = wall - timings["generation"] - timings["scoring"]
    idle = (wall - timings["staging"] - timings["server_start"] - timings["generation"]
            - timings["finish"] - timings["scoring"])
    return {"overhead": overhead / wall, "staging": timings["staging"] / wall,
            "server start": timings["server_start"] / wall,
            "harness not generating": idle / wall, "finish": timings["finish"] / wall}


def summary(runs: list[dict[str, float]]) -> str:
    shares = [parts(timings) for timings in runs]
    median = {key: statistics.median(share[key] for share in shares) for key in shares[0]}
    wall = statistics.median(timings["wall"] for timings in runs)
    detail = ", ".join(f"{key} {value:.1%}" for key, value in median.items() if key != "overhead")
    return (f"{median['overhead']:.1%} (goal <= 5%); median wall {wall:.2f} s; {detail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="arith")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    task = find_task(args.task)
    model = model_dir(system_folder(task, "initial"), 0)
    warm(get_sandbox("bwrap"))
    runs: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    for _ in range(args.runs):
        for standby in (True, False):
            runs[standby].append(evaluate(task, model, "val", standby=standby).timings)
            if standby is False:
                warm(get_sandbox("bwrap"))  # as the grader would have it between validations
    print(f"{args.task}, median of {args.runs}, load average {os.getloadavg()[0]:.2f}")
    print(f"  with a standby sandbox (the grader):   {summary(runs[True])}")
    print(f"  with a fresh sandbox each validation: {summary(runs[False])}")


if __name__ == "__main__":
    main()
