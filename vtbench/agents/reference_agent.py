"""The built-in reference agent: scripted co-design without an LLM.

Runs inside the research sandbox like any agent, using only the workspace, the trainer and
the grader client. It reads the task author's playbook (the task pack's ``reference.py``,
mounted read-only at ``$VTBENCH_PLAYBOOK``; it holds no split data) and works as a careful
researcher would, one change at a time so every validation can be attributed:

1. validate the initial model (baseline);
2. clean the data, retrain with the initial trainer, validate;
3. change the trainer (algorithm and hyperparameters), train two seeds, validate both:
   side by side where the sandbox has a GPU or a core for each (one that runs out of GPU
   memory beside the other trains again alone), else one after the other, the second
   only where the time left holds another training and its validations as long as the
   first's and the submit margin;
4. where the harness is editable, improve it and validate with it the best of the two
   side by side, or each one in turn as soon as it is validated (so a deadline that
   leaves no time for the second training still finds the harness step done);
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
        """The models trained with the reference trainer, with their validation scores
        (with the initial harness): side by side where the sandbox has a GPU or a core for
        each, else in turn; either way validated with the improved harness where the task's
        harness is editable (step 4 of the module's docstring)."""
        board = self.board
        if episode_gpus() or len(os.sched_getaffinity(0)) >= len(names):
            models = train_side_by_side(board.train, names, seeds)
            side_by_side = {model: board.validate(model) for model in models}
            self.validate_with_harness(max(side_by_side, key=side_by_side.__getitem__))
            return side_by_side
        scores: dict[str, float] = {}

        def validate(model: str) -> None:
            scores[model] = board.validate(model)
            self.validate_with_harness(model)

        train_in_turn(board.train, validate, names, seeds)
        return scores

    def validate_with_harness(self, model: str) -> None:
        """Where the task's harness is editable: validate ``model`` with the reference
        harness (applying it again leaves the workspace as it was)."""
        if self.harness:
            apply_reference(self.task, WORKSPACE, components=("harness",))
            self.board.validate(model, harness=self.harness)

    def research(self) -> None:
        board = self.board
        board.validate("models/initial")
        apply_reference(self.task, WORKSPACE, components=("data",))
        board.validate(board.train("clean-data", self.seed))
        apply_reference(self.task, WORKSPACE, components=("trainer",))
        models = list(self.tuned_models(["tuned-a", "tuned-b"], [self.seed, self.seed + 1]))
        if len(models) < 2:
            return
        if not board.kept("models/merged"):
            merged = self.client.merge("linear", models, [0.5, 0.5], "models/merged")
            say(f"merged {models} into {merged.model}")
        board.validate("models/merged", harness=self.harness)


def train_in_turn(train_one: Callable[[str, int], str], validate: Callable[[str], None],
                  names: list[str], seeds: list[int]) -> list[str]:
    """Train ``train_one(name, seed)`` and ``validate`` one model after another while the
    time left holds the next: as long as the longest so far took, and
    :data:`SUBMIT_MARGIN_S`. Two trainings sharing one core take as long as the two in
    turn; in turn the first is ready, and validated, at half the time."""
    models: list[str] = []
    longest = 0.0
    for name, seed in zip(names, seeds, strict=True):
        left = seconds_left()
        if models and left is not None and left < longest + SUBMIT_MARGIN_S:
            say(f"not training {name}: {left:.0f} s left, and a training with its "
                f"validations before it took {longest:.0f} s")
            break
        started = time.monotonic()
        models.append(train_one(name, seed))
        validate(models[-1])
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
