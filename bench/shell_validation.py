"""One shell validation on this host: the untrained SmolLM2-135M with the initial harness
(and, with --reference-harness, the reference harness) on the validation split.

The untrained model is the costly case for the initial harness: it chats to the
64-token limit where a trained one writes a short command. Prints the score and the
evaluation's timings (server start, harness, generation, scoring). Goal: a validation of
the initial system on val in at most 3 minutes on this machine's CPU.

    nice -n 10 .venv/bin/python bench/shell_validation.py [--reference-harness]
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

from vtbench.evaluation import evaluate
from vtbench.models.smol import ensure_smol
from vtbench.tasks import find_task
from vtbench.tasks.materialize import materialize
from vtbench.tasks.store import ensure_splits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reference-harness", action="store_true")
    options = parser.parse_args()
    task = find_task("shell")
    started = time.perf_counter()
    ensure_splits(task)
    print(f"splits ready in {time.perf_counter() - started:.0f} s")
    with tempfile.TemporaryDirectory() as folder:
        harness = None
        if options.reference_harness:
            materialize(task, Path(folder), components=("harness",))
            task.reference.apply_harness(Path(folder) / "harness", task)
            harness = Path(folder) / "harness"
        began = time.perf_counter()
        result = evaluate(task, ensure_smol(), "val", harness_dir=harness)
        seconds = time.perf_counter() - began
    timings = ", ".join(f"{k} {v:.1f}" for k, v in result.timings.items())
    print(f"val {result.score:.3f} on {result.n} instances in {seconds:.0f} s ({timings}); "
          f"error: {result.error}; load {os.getloadavg()[0]:.1f}")
    for instance in result.instances[:8]:
        print(repr(instance.output)[:100], instance.score)


if __name__ == "__main__":
    main()
