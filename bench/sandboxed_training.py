"""Tokens/s of a task's training inside the research sandbox ÷ the same training outside it,
in one run.

The workspace is the task's own (its public data and trainer, the base model it trains
from); the sandbox is the research sandbox's: the Python runtime and the workspace mounted
as an episode mounts them, its limits, the GPU passed in where the host has one. Both runs
start ``python trainer/train.py`` with the same environment, alternating A B A B so that
competing load hits both alike; each reads the trainer's own ``tokens_per_second`` from its
``train_log.json`` (training alone, start-up left out) and the process's wall time. Goal:
sandboxed ≥ 0.9 × outside.

    python bench/sandboxed_training.py [--task humaneval] [--steps 20] [--rounds 2]
(on a CPU, a few steps of SmolLM2-135M take a minute or more a run: --steps 2)
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import tomllib
from pathlib import Path

import tomli_w
import torch

from vtbench.episode.sandbox import INSIDE_WORKSPACE, research_environment, workspace_mounts
from vtbench.models.base import resolve_base
from vtbench.sandbox import (
    Limits,
    SandboxSpec,
    get_sandbox,
    prepare_writable,
    python_runtime_mounts,
)
from vtbench.tasks.materialize import materialize
from vtbench.tasks.registry import Task, find_task


def workspace(task: Task, folder: Path, steps: int) -> Path:
    """The task's data and trainer, its base model and an empty ``models/initial``, the
    trainer's steps set to ``steps``."""
    root = folder / "workspace"
    materialize(task, root, ("data", "trainer"))
    config_path = root / "trainer" / "config.toml"
    config = tomllib.loads(config_path.read_text()) | {"steps": steps, "log_every": steps}
    config_path.write_text(tomli_w.dumps(config))
    shutil.copytree(resolve_base(task.spec.base_model), root / "models" / "base")
    (root / "models" / "initial").mkdir()
    return prepare_writable(root)


def environment(gpus: list[int]) -> dict[str, str]:
    env = {**research_environment(), "VTBENCH_THREADS": "1"}
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, gpus))
    return env


def command(out: str) -> list[str]:
    return ["python", "trainer/train.py", "--base", "models/base", "--data", "data",
            "--out", f"models/{out}", "--seed", "0"]


def outside(root: Path, out: str, gpus: list[int]) -> None:
    os.makedirs("/tmp/home", exist_ok=True)
    result = subprocess.run(command(out), cwd=root, env=environment(gpus), capture_output=True,
                            text=True)
    if result.returncode:
        raise SystemExit(f"sandboxed_training.py: the training outside failed:\n"
                         f"{result.stderr[-2000:]}")


def inside(task: Task, root: Path, out: str, gpus: list[int]) -> None:
    spec = SandboxSpec(
        mounts=[*python_runtime_mounts(), *workspace_mounts(task, root)],
        env=environment(gpus), cwd=INSIDE_WORKSPACE, gpus=gpus,
        limits=Limits(wall_seconds=3600, memory_mb=32768, pids=512, open_files=4096,
                      tmp_mb=1024))
    result = get_sandbox().run(command(out), spec)
    if result.returncode:
        raise SystemExit(f"sandboxed_training.py: the training inside failed:\n"
                         f"{result.stderr[-2000:].decode(errors='replace')}")


def rate(root: Path, out: str) -> float:
    return json.loads((root / "models" / out / "train_log.json").read_text())["tokens_per_second"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="humaneval")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    task = find_task(args.task)
    gpus = [0] if torch.cuda.is_available() else []
    device = torch.cuda.get_device_name() if gpus else "cpu (one thread)"
    print(f"{args.task}: {args.steps} steps a run on {device}; {args.rounds} rounds")
    samples: dict[str, list[tuple[float, float]]] = {"outside": [], "inside": []}
    with tempfile.TemporaryDirectory(prefix="vtb-sandboxed-") as tmp:
        root = workspace(task, Path(tmp), args.steps)
        for round_ in range(args.rounds):
            for where, train in (("outside", lambda o: outside(root, o, gpus)),
                                 ("inside", lambda o: inside(task, root, o, gpus))):
                out = f"{where}-{round_}"
                started = time.perf_counter()
                train(out)
                wall = time.perf_counter() - started
                samples[where].append((rate(root, out), wall))
                print(f"  {where:<8} round {round_ + 1}: {samples[where][-1][0]:>9.0f} "
                      f"tokens/s, {wall:6.1f} s wall", flush=True)
    medians = {where: (statistics.median(r for r, _ in runs),
                       statistics.median(w for _, w in runs)) for where, runs in samples.items()}
    for where, (tokens, wall) in medians.items():
        print(f"{where:<8} median {tokens:>9.0f} tokens/s, {wall:6.1f} s wall")
    print(f"inside ÷ outside: tokens/s {medians['inside'][0] / medians['outside'][0]:.3f}, "
          f"wall {medians['inside'][1] / medians['outside'][1]:.3f}")


if __name__ == "__main__":
    main()
