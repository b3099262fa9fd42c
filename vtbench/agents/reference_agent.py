"""The built-in reference agent: scripted co-design without an LLM.

Runs inside the research sandbox like any agent, using only the workspace, the trainer and
the grader client. It reads the task author's playbook (the task pack's ``reference.py``,
mounted read-only at ``$VTBENCH_PLAYBOOK``; it holds no split data) and works as a careful
researcher would, one change at a time so every validation can be attributed:

1. validate the initial model (baseline);
2. clean the data, retrain with the initial trainer, validate;
3. change the trainer (algorithm and hyperparameters), train two seeds in parallel,
   validate both;
4. where the harness is editable, improve it and validate the best model with it;
5. merge the two seeds (linear), validate;
6. submit the best validated (model, harness).
"""

import argparse
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from vtbench.client import GraderClient
from vtbench.tasks.materialize import apply_reference
from vtbench.tasks.registry import Task, load_task

WORKSPACE = Path("/workspace")


def say(message: str) -> None:
    print(f"[reference agent] {message}", flush=True)


def train(name: str, seed: int) -> str:
    out = f"models/{name}"
    env = {**os.environ, "VTBENCH_THREADS": "1", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "trainer/train.py", "--base", "models/base", "--out", out,
               "--seed", str(seed)]
    done = subprocess.run(command, cwd=WORKSPACE, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"training {name} failed: {done.stdout[-300:]}{done.stderr[-300:]}")
    say(f"trained {out}")
    return out


class Researcher:
    def __init__(self, task: Task, client: GraderClient, seed: int) -> None:
        self.task, self.client, self.seed = task, client, seed
        self.harness = "harness" if task.spec.harness_editable else None
        self.results: list[tuple[float, str, str | None]] = []

    def validate(self, model: str, harness: str | None = None) -> float:
        result = self.client.validate(model, harness=harness)
        score = result.get("score")
        say(f"validated {model} (harness {harness or 'initial'}): {score}")
        if score is not None:
            self.results.append((score, model, harness))
        return score if score is not None else float("-inf")

    def run(self) -> None:
        self.validate("models/initial")
        apply_reference(self.task, WORKSPACE, components=("data",))
        self.validate(train("clean-data", self.seed))
        apply_reference(self.task, WORKSPACE, components=("trainer",))
        with ThreadPoolExecutor(max_workers=2) as pool:
            models = list(pool.map(train, ["tuned-a", "tuned-b"], [self.seed, self.seed + 1]))
        scores = {model: self.validate(model) for model in models}
        best = max(scores, key=lambda m: scores[m])
        if self.harness:
            apply_reference(self.task, WORKSPACE, components=("harness",))
            self.validate(best, harness=self.harness)
        merged = self.client.merge("linear", models, [0.5, 0.5], "models/merged")
        say(f"merged {models} into {merged['model']}")
        self.validate("models/merged", harness=self.harness)
        score, model, harness = max(self.results, key=lambda r: r[0])
        self.client.submit(model, harness=harness)
        say(f"submitted {model} (harness {harness or 'initial'}) with validation score {score}")


def main() -> None:
    parser = argparse.ArgumentParser(description="built-in reference agent")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    task = load_task(Path(os.environ["VTBENCH_PLAYBOOK"]))
    Researcher(task, GraderClient.from_environment(), args.seed).run()


if __name__ == "__main__":
    main()
