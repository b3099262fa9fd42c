"""The built-in reference agent: scripted co-design without an LLM.

Runs inside the research sandbox like any agent, using only the workspace, the trainer and
the grader client. It reads the task author's playbook (the task pack's ``reference.py``,
mounted read-only at ``$VTBENCH_PLAYBOOK``; it holds no split data) and works as a careful
researcher would, one change at a time so every validation can be attributed:

1. validate the initial model (baseline);
2. clean the data, retrain with the initial trainer, validate;
3. change the trainer (algorithm and hyperparameters), train two seeds, validate both:
   side by side where the sandbox has a GPU or a core for each (one that runs out of GPU
   memory beside the other trains again alone), else one after the other, each validated
   once trained, the second only where the time left holds another training and
   validation as long as the first's and the submit margin;
4. where the harness is editable, improve it and validate the best model with it;
5. merge the two seeds (linear), validate (with one seed trained, nothing to merge);
6. submit the best validated (model, harness); a training that fails ends the steps
   early, with the same submission.

Started again in a resumed episode, it walks the steps again and takes up what it
validated before (:class:`vtbench.agents.scripted.BestSoFar`): those validations are not
repeated, nor their models trained or merged again.

It watches the clock like every scripted agent (:mod:`vtbench.agents.scripted`): when the
episode's deadline is :data:`SUBMIT_MARGIN_S` away and it has not submitted yet, it
submits the best (model, harness) validated so far, or the initial model when nothing has
been validated, so a slow machine costs it the steps it did not reach, not the whole
episode.
"""

import argparse
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

from vtbench.agents.scripted import SUBMIT_MARGIN_S as SUBMIT_MARGIN_S
from vtbench.agents.scripted import (
    WORKSPACE,
    BestSoFar,
    TrainingFailed,
    TrainingOutOfMemory,
    speaker,
)
from vtbench.client import GraderClient, episode_gpus, seconds_left
from vtbench.tasks.materialize import apply_reference
from vtbench.tasks.registry import Task, load_task

say = speaker("reference")


class Researcher:
    def __init__(self, task: Task, client: GraderClient, seed: int) -> None:
        self.task, self.client, self.seed = task, client, seed
        self.harness = "harness" if task.spec.harness_editable else None
        self.board = BestSoFar(client, say)

    def run(self) -> None:
        """The steps of the module's docstring; a training that fails ends them early, and the
        agent submits the best it validated before (saying which training failed and why)."""
        self.board.watch_the_clock()
        try:
            self.research()
        except TrainingFailed as failure:
            say(str(failure))
            self.board.submit_best("a training failed")
        self.board.submit_best("done")

    def tuned_models(self, names: list[str], seeds: list[int]) -> dict[str, float]:
        """The models trained with the reference trainer, with their validation scores:
        side by side where the sandbox has a GPU or a core for each, else in turn."""
        board = self.board
        if episode_gpus() or len(os.sched_getaffinity(0)) >= len(names):
            models = train_side_by_side(board.train, names, seeds)
            return {model: board.validate(model) for model in models}
        scores: dict[str, float] = {}

        def train_and_validate(name: str, seed: int) -> str:
            model = board.train(name, seed)
            scores[model] = board.validate(model)
            return model

        train_in_turn(train_and_validate, names, seeds)
        return scores

    def research(self) -> None:
        board = self.board
        board.validate("models/initial")
        apply_reference(self.task, WORKSPACE, components=("data",))
        board.validate(board.train("clean-data", self.seed))
        apply_reference(self.task, WORKSPACE, components=("trainer",))
        scores = self.tuned_models(["tuned-a", "tuned-b"], [self.seed, self.seed + 1])
        models = list(scores)
        best = max(scores, key=lambda m: scores[m])
        if self.harness:
            apply_reference(self.task, WORKSPACE, components=("harness",))
            board.validate(best, harness=self.harness)
        if len(models) < 2:
            return
        if not board.kept("models/merged"):
            merged = self.client.merge("linear", models, [0.5, 0.5], "models/merged")
            say(f"merged {models} into {merged.model}")
        board.validate("models/merged", harness=self.harness)


def train_in_turn(train_one: Callable[[str, int], str], names: list[str],
                  seeds: list[int]) -> list[str]:
    """Run ``train_one(name, seed)`` for one model after another while the time left holds
    the next: as long as the longest so far took, and :data:`SUBMIT_MARGIN_S`. Two
    trainings sharing one core take as long as the two in turn; in turn the first is ready
    at half the time."""
    models: list[str] = []
    longest = 0.0
    for name, seed in zip(names, seeds, strict=True):
        left = seconds_left()
        if models and left is not None and left < longest + SUBMIT_MARGIN_S:
            say(f"not training {name}: {left:.0f} s left, and a training before it took "
                f"{longest:.0f} s")
            break
        started = time.monotonic()
        models.append(train_one(name, seed))
        longest = max(longest, time.monotonic() - started)
    return models


def train_side_by_side(train_one: Callable[[str, int], str], names: list[str],
                       seeds: list[int]) -> list[str]:
    """Train the models at once with ``train_one(name, seed)`` (:meth:`BestSoFar.train`);
    one that ran out of GPU memory beside the others (one GPU shared by them) is trained
    again alone after them."""
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        futures = [pool.submit(train_one, name, seed)
                   for name, seed in zip(names, seeds, strict=True)]
        wait(futures)
    models = []
    for name, seed, future in zip(names, seeds, futures, strict=True):
        if isinstance(future.exception(), TrainingOutOfMemory):
            say(f"training {name} ran out of GPU memory beside another: training it alone")
            models.append(train_one(name, seed))
        else:
            models.append(future.result())
    return models


def main() -> None:
    parser = argparse.ArgumentParser(description="built-in reference agent")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    task = load_task(Path(os.environ["VTBENCH_PLAYBOOK"]))
    Researcher(task, GraderClient.from_environment(), args.seed).run()


if __name__ == "__main__":
    main()
