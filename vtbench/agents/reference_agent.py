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

It watches the clock: when the episode's deadline is :data:`SUBMIT_MARGIN_S` away and it
has not submitted yet, it submits the best (model, harness) validated so far, or the
initial model when nothing has been validated, so a slow machine costs it the steps it
did not reach, not the whole episode.
"""

import argparse
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from vtbench.client import GraderClient, seconds_left
from vtbench.tasks.materialize import apply_reference
from vtbench.tasks.registry import Task, load_task

WORKSPACE = Path("/workspace")
SUBMIT_MARGIN_S = 30.0
"""Time before the deadline at which the best result so far is submitted: enough for the
grader to copy and hash a smol-scale model."""


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
        self.lock = threading.Lock()
        self.submitted = False

    def validate(self, model: str, harness: str | None = None) -> float:
        result = self.client.validate(model, harness=harness)
        score = result.get("score")
        say(f"validated {model} (harness {harness or 'initial'}): {score}")
        if score is not None:
            with self.lock:
                self.results.append((score, model, harness))
        return score if score is not None else float("-inf")

    def submit_best(self, why: str) -> None:
        """Submit the best validated (model, harness) once; later calls do nothing."""
        with self.lock:
            if self.submitted:
                return
            score, model, harness = max(self.results, key=lambda r: r[0],
                                        default=(None, "models/initial", None))
            self.client.submit(model, harness=harness)
            self.submitted = True
        say(f"{why}: submitted {model} (harness {harness or 'initial'}) with validation "
            f"score {score}")

    def watch_the_clock(self) -> None:
        """Submit the best so far :data:`SUBMIT_MARGIN_S` before the deadline."""
        left = seconds_left()
        if left is not None:
            timer = threading.Timer(max(0.0, left - SUBMIT_MARGIN_S), self.submit_best,
                                    args=("the deadline is near",))
            timer.daemon = True
            timer.start()

    def run(self) -> None:
        self.watch_the_clock()
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
        self.submit_best("done")


def main() -> None:
    parser = argparse.ArgumentParser(description="built-in reference agent")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    task = load_task(Path(os.environ["VTBENCH_PLAYBOOK"]))
    Researcher(task, GraderClient.from_environment(), args.seed).run()


if __name__ == "__main__":
    main()
