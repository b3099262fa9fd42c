"""Timings of the humaneval task's expensive steps, to size ``prepare --scale smol``.

Measures, in one run and in a fresh private store: the one-off SmolLM2-135M conversion,
one evaluation of the base model on the validation split (82 problems) with the initial
(greedy) harness, optionally with the reference harness too, and a few optimiser steps of
the initial trainer (tokens/s). Prints one JSON object. The ratio printed is the
evaluation's generation seconds over its wall seconds (how much of an evaluation is the
model itself, the rest being server start-up, harness and scoring).

    python bench/humaneval_smol.py [--sandbox bwrap|none|direct] [--limit 82] [--train-steps 2]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def direct_evaluation(task, model: Path, items: list, harness: Path | None):
    """evaluate() without a sandbox or relay (for hosts without bwrap and socat): the
    harness talks to the server over TCP on 127.0.0.1; scoring is the same."""
    from vtbench.evaluation import EvaluationResult
    from vtbench.evaluation.scoring import score_outputs
    from vtbench.models.serving import serve_model
    from vtbench.tasks.materialize import materialize

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if harness is None:
            materialize(task, folder, components=("harness",))
            harness = folder / "harness"
        inputs, outputs = folder / "inputs.jsonl", folder / "outputs.jsonl"
        inputs.write_text("".join(json.dumps({"id": i["id"], "input": i["input"]}) + "\n"
                                  for i in items))
        started = time.monotonic()
        with serve_model(model, port=0) as server:
            ready, before = time.monotonic(), server.stats()
            subprocess.run([sys.executable, "run.py", "--inputs", str(inputs), "--base-url",
                            server.base_url, "--out", str(outputs)], cwd=harness, check=True)
            generation = server.stats()["generate_seconds"] - before["generate_seconds"]
            harness_seconds = time.monotonic() - ready
        scoring_started = time.monotonic()
        instances = score_outputs(task, items, outputs.read_text())
        scoring = time.monotonic() - scoring_started
    return EvaluationResult(
        task=task.id, split="val", score=sum(i.score for i in instances) / len(instances),
        n=len(instances), harness="direct", decoding=None, instances=instances,
        timings={"wall": time.monotonic() - started, "server_start": ready - started,
                 "harness": harness_seconds, "generation": generation, "scoring": scoring})


def timed_evaluation(task, model: Path, items: list, harness: Path | None, sandbox: str) -> dict:
    from vtbench.evaluation import evaluate

    started = time.monotonic()
    if sandbox == "direct":
        result = direct_evaluation(task, model, items, harness)
    else:
        result = evaluate(task, model, "val", harness_dir=harness, items=items, sandbox=sandbox)
    return {"score": round(result.score, 4), "n": result.n, "error": result.error,
            "seconds": round(time.monotonic() - started, 1),
            "timings": {k: round(v, 1) for k, v in result.timings.items()}}


def timed_training(task, base: Path, steps: int, workdir: Path) -> dict:
    from vtbench.tasks.materialize import materialize

    materialize(task, workdir, components=("data", "trainer"))
    config = workdir / "trainer" / "config.toml"
    config.write_text(config.read_text().replace("steps = 120", f"steps = {steps}"))
    started = time.monotonic()
    subprocess.run([sys.executable, "trainer/train.py", "--base", str(base), "--data", "data",
                    "--out", str(workdir / "model")], cwd=workdir, check=True,
                   env={**os.environ, "VTBENCH_THREADS": os.environ.get("VTBENCH_THREADS", "1")})
    log = json.loads((workdir / "model" / "train_log.json").read_text())
    return {"steps": steps, "device": log["device"],
            "seconds": round(time.monotonic() - started, 1),
            "train_seconds": log["seconds"], "tokens": log["tokens"],
            "tokens_per_second": log["tokens_per_second"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sandbox", default="bwrap", help="bwrap, none or direct")
    parser.add_argument("--limit", type=int, default=None,
                        help="validation problems (default: all)")
    parser.add_argument("--reference-harness", action="store_true")
    parser.add_argument("--train-steps", type=int, default=0)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="vtb-bench-home-"))
    os.environ["VTBENCH_HOME"] = str(home)
    import random

    import torch

    from vtbench.models.smol import ensure_smol
    from vtbench.tasks import find_task
    from vtbench.tasks.materialize import apply_reference, materialize

    torch.set_num_threads(1)
    report: dict = {"device": "cuda" if torch.cuda.is_available() else "cpu"}
    started = time.monotonic()
    base = ensure_smol()
    report["conversion_seconds"] = round(time.monotonic() - started, 1)
    task = find_task("humaneval")
    items = task.builder.build_split(random.Random(0), task.spec.splits.val, set())[:args.limit]
    items = [{"id": f"val-{i:05d}", **item} for i, item in enumerate(items)]
    report["initial_harness"] = timed_evaluation(task, base, items, None, args.sandbox)
    print(json.dumps(report), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        if args.reference_harness:
            materialize(task, Path(tmp) / "ref", components=("harness",))
            apply_reference(task, Path(tmp) / "ref", components=("harness",))
            report["reference_harness"] = timed_evaluation(
                task, base, items, Path(tmp) / "ref" / "harness", args.sandbox)
            print(json.dumps(report), flush=True)
        if args.train_steps:
            report["training"] = timed_training(task, base, args.train_steps, Path(tmp) / "t")
    report["generation_share"] = round(report["initial_harness"]["timings"]["generation"]
                                       / report["initial_harness"]["timings"]["wall"], 3)
    print(json.dumps(report, indent=2))
    shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
