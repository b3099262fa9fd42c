"""How often scoring the same system again gives another score: a prepared system of a task
evaluated ``--repeats`` times on one split, in one run, on this host's device.

Prints each evaluation's score, how many instances scored differently from the first
evaluation, and whether the outputs differed where the scores did not (a sampled harness
may write other text for the same score). Runs wherever the task is prepared: on a GPU host
it measures the GPU's determinism (kernels, batch composition), on a CPU the CPU's.

Usage: python bench/repeat_scoring.py --task humaneval [--system initial] [--seed 0]
       [--split val] [--repeats 3]
"""

import argparse
import time

from vtbench.evaluation import evaluate
from vtbench.prepare.prepare import system_folder
from vtbench.prepare.systems import SYSTEMS, is_complete, model_dir
from vtbench.tasks.registry import find_task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", required=True)
    parser.add_argument("--system", default="initial")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", default="val")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    task = find_task(args.task)
    plan = next((p for p in SYSTEMS if p.name == args.system), None)
    if plan is None:
        raise SystemExit(f"no system {args.system!r}: one of "
                         f"{', '.join(p.name for p in SYSTEMS)}")
    folder = system_folder(task, plan.name)
    model = model_dir(system_folder(task, plan.model_system), args.seed)
    if not is_complete(model):
        raise SystemExit(f"{args.task}/{args.system} seed {args.seed} is not prepared: "
                         f"run vtbench prepare --task {args.task} --calibrate first")
    runs = []
    for repeat in range(args.repeats):
        started = time.monotonic()
        result = evaluate(task, model, args.split, harness_dir=folder / "harness")
        if result.error:
            raise SystemExit(f"evaluation {repeat} failed: {result.error}")
        runs.append(result)
        first = runs[0].instances
        scores_differ = sum(a.score != b.score for a, b in zip(first, result.instances,
                                                               strict=True))
        outputs_differ = sum(a.output != b.output for a, b in zip(first, result.instances,
                                                                  strict=True))
        print(f"{args.task}/{args.system}/seed{args.seed} {args.split} evaluation {repeat}: "
              f"score {result.score:.4f}, {scores_differ} of {result.n} instances scored "
              f"otherwise than evaluation 0, {outputs_differ} answered otherwise "
              f"({time.monotonic() - started:.0f} s)", flush=True)
    distinct = sorted({round(run.score, 4) for run in runs})
    print(f"{len(distinct)} distinct score(s) in {len(runs)} evaluations: {distinct}")


if __name__ == "__main__":
    main()
